"""The index: incremental re-indexing, bad files, interrupted runs."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nnrag
from nnrag.sourcing.spec import parse_source

BLOCK = "import torch.nn as nn\n\n\nclass Block{i}(nn.Module):\n    def forward(self, x):\n        return x + {i}\n"


def _parsed_paths(home: Path) -> dict[str, str]:
    with sqlite3.connect(home / "index.sqlite3") as conn:
        return dict(conn.execute("SELECT path, sha1 FROM files"))


def test_incremental_reindex(forms_repo: Path, home: Path) -> None:
    first = nnrag.index([str(forms_repo)], home=home)
    assert first.parsed == first.files == 9 and first.unchanged == 0
    assert first.blocks == 29

    again = nnrag.index([str(forms_repo)], home=home)
    assert (again.parsed, again.unchanged, again.removed) == (0, 9, 0)

    # The index keeps each file's content by SHA-1 (extraction reads it from there).
    from nnrag.db import Database

    with Database(home / "index.sqlite3") as store:
        sha1 = _parsed_paths(home)["pkg/base.py"]
        assert store.file_text(sha1) == (forms_repo / "pkg/base.py").read_text()

    # Content change: only that file is parsed again, and its blocks follow.
    core = forms_repo / "pkg/layers/core.py"
    core.write_text(core.read_text() + "\n\nclass Added(nn.Module):\n    def forward(self, x):\n        return x\n")
    changed = nnrag.index([str(forms_repo)], home=home)
    assert (changed.parsed, changed.unchanged) == (1, 8)
    assert [b.qualname for b in nnrag.blocks("Added", home=home)] == ["pkg.layers.core.Added"]

    # mtime-only change (touch): hashed, found identical, not parsed.
    base = forms_repo / "pkg/base.py"
    os.utime(base, ns=(time.time_ns(), time.time_ns() + 10**9))
    touched = nnrag.index([str(forms_repo)], home=home)
    assert (touched.parsed, touched.unchanged) == (0, 9)

    # A source another parser version parsed is parsed again in full, its stats unchanged.
    import sqlite3

    with sqlite3.connect(home / "index.sqlite3") as conn:
        assert conn.execute("UPDATE meta SET value='1' WHERE key LIKE 'parser:%'").rowcount == 1
    reparsed = nnrag.index([str(forms_repo)], home=home)
    assert (reparsed.parsed, reparsed.unchanged) == (9, 0) and reparsed.blocks == 30
    assert (nnrag.index([str(forms_repo)], home=home).parsed) == 0

    # Deleting a file forgets it and the blocks that depended on it.
    (forms_repo / "pkg/abstract.py").unlink()
    removed = nnrag.index([str(forms_repo)], home=home)
    assert (removed.parsed, removed.removed) == (0, 1)
    assert nnrag.blocks("Diamond*", home=home) == []
    assert "pkg/abstract.py" not in _parsed_paths(home)


def test_bad_files_are_recorded_and_skipped(tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "bad"
    repo.mkdir()
    (repo / "good.py").write_text(BLOCK.format(i=0))
    (repo / "latin1_cookie.py").write_bytes(b"# -*- coding: latin-1 -*-\n" + BLOCK.format(i=1).encode() + b"# caf\xe9\n")
    (repo / "syntax.py").write_text("def broken(:\n    pass\n")
    (repo / "py2.py").write_text('print "hello"\n')
    (repo / "py2_except.py").write_text("try:\n    pass\nexcept ValueError, e:\n    pass\n")
    (repo / "latin1.py").write_bytes(b"x = '\xe9t\xe9'\n")
    (repo / "binary.py").write_bytes(b"\x7fELF\x00\x00\x01\x02")
    (repo / "huge.py").write_text("x = 1\n" * 60_000)
    (repo / "deep.py").write_text("x = " + "-" * 200_000 + "1\n")
    (repo / "loop_a.py").symlink_to(repo / "loop_b.py")
    (repo / "loop_b.py").symlink_to(repo / "loop_a.py")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "again").symlink_to(repo)  # a directory symlink loop
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(BLOCK.format(i=9))  # a block that is not the repository's
    (repo / "stolen.py").symlink_to(outside / "secret.py")
    (repo / "mounted").symlink_to(outside, target_is_directory=True)
    spec = parse_source(str(repo), max_file_bytes=300_000)
    report = nnrag.index([spec], home=home)
    assert report.failures == {
        "binary": 1,
        "encoding": 1,
        "outside-root": 2,
        "parser-limit": 1,
        "python2": 2,
        "symlink-loop": 3,
        "syntax-error": 1,
        "too-large": 1,
    }
    assert {b.name for b in nnrag.blocks(home=home)} == {"Block0", "Block1"}
    with sqlite3.connect(home / "index.sqlite3") as conn:
        reasons = dict(conn.execute("SELECT path, message FROM files WHERE status='error'"))
    assert reasons["syntax.py"].startswith("line 1:")
    assert "Python 2" in reasons["py2.py"]
    assert "300000" in reasons["huge.py"]
    # Nothing changed: nothing is re-read, and the failures stay recorded.
    again = nnrag.index([spec], home=home)
    assert again.parsed == 0 and again.failures == report.failures


def _make_many(repo: Path, n: int) -> None:
    for i in range(n):
        sub = repo / f"m{i // 500}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.py").write_text(BLOCK.format(i=i) + "\n".join(f"V{k} = {k}" for k in range(10)) + "\n")


def _count_files(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_run_resumes(tmp_path: Path, home: Path, sig: int) -> None:
    n = 5000
    repo = tmp_path / "many"
    _make_many(repo, n)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nnrag", "index", str(repo), "--home", str(home), "--workers", "1", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a test run started in the background inherits SIGINT ignored; Ctrl-C must reach the child
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    db = home / "index.sqlite3"
    deadline = time.monotonic() + 120
    while _count_files(db) < 200 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    committed = _count_files(db)
    assert 0 < committed < n, "the run should have been stopped part-way"
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert "resume" in stderr
    else:
        assert proc.returncode == -signal.SIGKILL

    resumed = nnrag.index([str(repo)], home=home)
    assert resumed.parsed == n - committed
    assert resumed.unchanged == committed
    assert resumed.files == n and resumed.blocks == n


def test_parallel_index_matches_inline(tmp_path: Path) -> None:
    repo = tmp_path / "many"
    _make_many(repo, 300)
    inline = nnrag.index([str(repo)], home=tmp_path / "h1", workers=1)
    pooled = nnrag.index([str(repo)], home=tmp_path / "h2", workers=2)
    assert inline.blocks == pooled.blocks == 300
    assert _parsed_paths(tmp_path / "h1") == _parsed_paths(tmp_path / "h2")


def test_homes_do_not_interfere(forms_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NNRAG_HOME", str(tmp_path / "from_env"))
    nnrag.index([str(forms_repo)])
    assert (tmp_path / "from_env" / "index.sqlite3").exists()
    assert len(nnrag.blocks()) == 29
    with pytest.raises(nnrag.NotFoundError, match="run `nnrag index` or `nnrag build` first"):
        nnrag.blocks(home=tmp_path / "other")


def test_same_name_for_two_sources_is_refused(forms_repo: Path, tmp_path: Path, home: Path) -> None:
    other = tmp_path / "x" / "forms_repo"
    other.mkdir(parents=True)
    nnrag.index([str(forms_repo)], home=home)
    with pytest.raises(nnrag.ConfigError, match="already indexes"):
        nnrag.index([str(other)], home=home)
    nnrag.forget("forms_repo", home=home)
    assert nnrag.blocks(home=home) == []


def test_new_package_marker_renames_unchanged_modules(tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "lib" / "layers").mkdir(parents=True)
    (repo / "lib" / "layers" / "__init__.py").write_text("")
    (repo / "lib" / "layers" / "conv.py").write_text(BLOCK.format(i=7))
    nnrag.index([str(repo)], home=home)
    assert [b.qualname for b in nnrag.blocks(home=home)] == ["layers.conv.Block7"]
    (repo / "lib" / "__init__.py").write_text("")  # lib becomes a package: conv.py is now lib.layers.conv
    report = nnrag.index([str(repo)], home=home)
    assert report.parsed == 1  # only the new file; conv.py is renamed without parsing
    assert [b.qualname for b in nnrag.blocks(home=home)] == ["lib.layers.conv.Block7"]


def test_a_folder_the_code_imports_as_a_namespace_package_names_its_modules(tmp_path: Path) -> None:
    """``tool/`` has no ``__init__.py`` but its code imports ``tool.pkg.util`` (a PEP 420 namespace
    package, as NAFNet's ``basicsr/``): modules are named from the root, so imports resolve and
    the closure copies the helper. A folder nothing imports that way keeps the package rule."""
    root = tmp_path / "ns_repo"
    (root / "tool" / "pkg").mkdir(parents=True)
    (root / "tool" / "pkg" / "__init__.py").write_text("")
    (root / "tool" / "pkg" / "util.py").write_text("def helper(x):\n    return x * 2\n")
    (root / "tool" / "pkg" / "layers.py").write_text(
        "import torch.nn as nn\nfrom tool.pkg.util import helper\n\n\nclass Doubles(nn.Module):\n"
        "    def forward(self, x):\n        return helper(x)\n")
    (root / "scripts" / "lib").mkdir(parents=True)
    (root / "scripts" / "lib" / "__init__.py").write_text("from .x import y\n")
    (root / "scripts" / "lib" / "x.py").write_text("y = 1\n")
    home = tmp_path / "home"
    nnrag.index([str(root)], home=home)
    with sqlite3.connect(home / "index.sqlite3") as conn:
        modules = dict(conn.execute("SELECT path, module FROM files"))
    assert modules["tool/pkg/layers.py"] == "tool.pkg.layers" and modules["scripts/lib/x.py"] == "lib.x"
    result = nnrag.extract("tool.pkg.layers.Doubles", home=home)
    assert result.ok and "def helper" in result.code and "from tool" not in result.code


def test_a_folder_inside_a_package_the_code_imports_through_is_part_of_the_package(tmp_path: Path) -> None:
    """``det/ops/`` and ``seg/ops/`` have no ``__init__.py`` but hold packages the code imports through
    them, as the DETR family ships its deformable attention: ``from .ops.modules import Attn``
    (relative, from the folder above), ``from det.ops.modules import Attn`` (absolute) and
    ``from ..functions import scaled`` (from a package below). Both name their modules inside the
    package, so the closure copies the helpers; ``tools/`` inside a package, which nothing imports
    through, keeps its own chain."""
    root = tmp_path / "ops_repo"
    for kit, importer in (("det", "from det.ops.modules import Attn"), ("seg", "from .ops.modules import Attn")):
        (root / kit / "ops" / "functions").mkdir(parents=True)
        (root / kit / "ops" / "modules").mkdir(parents=True)
        (root / kit / "__init__.py").write_text("")
        (root / kit / "ops" / "functions" / "__init__.py").write_text("from .func import scaled\n")
        (root / kit / "ops" / "functions" / "func.py").write_text("def scaled(x):\n    return x * 2\n")
        (root / kit / "ops" / "modules" / "__init__.py").write_text("from .attn import Attn\n")
        (root / kit / "ops" / "modules" / "attn.py").write_text(
            "import torch.nn as nn\nfrom ..functions import scaled\n\n\nclass Attn(nn.Module):\n"
            "    def forward(self, x):\n        return scaled(x)\n")
        (root / kit / "layer.py").write_text(
            f"import torch.nn as nn\n{importer}\n\n\nclass Layer(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.attn = Attn()\n\n    def forward(self, x):\n        return self.attn(x)\n")
    (root / "seg" / "tools" / "lib").mkdir(parents=True)
    (root / "seg" / "tools" / "lib" / "__init__.py").write_text("from .x import y\n")
    (root / "seg" / "tools" / "lib" / "x.py").write_text("y = 1\n")
    home = tmp_path / "home"
    nnrag.index([str(root)], home=home)
    with sqlite3.connect(home / "index.sqlite3") as conn:
        modules = dict(conn.execute("SELECT path, module FROM files"))
    assert modules["det/ops/modules/attn.py"] == "det.ops.modules.attn", modules
    assert modules["seg/ops/functions/func.py"] == "seg.ops.functions.func" and modules["seg/tools/lib/x.py"] == "lib.x"
    for kit in ("det", "seg"):
        result = nnrag.extract(f"{kit}.layer.Layer", home=home)
        assert result.ok, result.issues
        assert "def scaled" in result.code and "class Attn" in result.code
        assert nnrag.validate(code=result.code, class_name="Layer").ok


def test_files_of_one_import_name_index_without_losing_the_corpus(tmp_path: Path, home: Path) -> None:
    """Two overlay packages both named ``backbones`` are named from the folders above them; a
    module ``net.py`` beside a package ``net/`` (one import name, Python imports the package)
    keeps one block of the name instead of failing the whole index."""
    repo = tmp_path / "overlays"
    for kit in ("seg/mmseg", "det/mmdet"):
        (repo / kit / "backbones").mkdir(parents=True)
        (repo / kit / "backbones" / "__init__.py").write_text("")
        (repo / kit / "backbones" / "focal.py").write_text(BLOCK.format(i=1))
    (repo / "net").mkdir()
    (repo / "net" / "__init__.py").write_text(BLOCK.format(i=2))
    (repo / "net.py").write_text(BLOCK.format(i=2))
    nnrag.index([str(repo)], home=home)
    assert sorted(b.qualname for b in nnrag.blocks(home=home)) == [
        "mmdet.backbones.focal.Block1", "mmseg.backbones.focal.Block1", "net.Block2"]
