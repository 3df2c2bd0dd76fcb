"""Cross-source closure: a block of one indexed source that imports another indexed source
(borrower_repo imports baselib from lender_repo) is copied whole, with both provenances."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nnrag
from conftest import FIXTURES, run_cli, search_limits

RUN = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from block import DetHead
out = DetHead()(torch.randn(2, 16, 8, 8))
print(tuple(out.shape))
"""


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    src = tmp_path_factory.mktemp("src")
    repos = {name: src / name for name in ("lender_repo", "borrower_repo")}
    for name, path in repos.items():
        shutil.copytree(FIXTURES / name, path)
    home = tmp_path_factory.mktemp("home")
    nnrag.index([str(repos["lender_repo"]), str(repos["borrower_repo"])], home=home)
    return home, repos


def test_a_block_takes_the_definitions_it_needs_from_the_source_that_holds_them(
        two_sources: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    home, _ = two_sources
    result = nnrag.extract("DetHead", home=home)
    assert result.ok, result.issues
    code = result.code
    assert "import baselib" not in code and "from baselib" not in code
    assert "class ConvBN(nn.Module):" in code and "def make_divisible(" in code and "def hard_swish(" in code
    assert "# also from: lender_repo (local " in code
    assert set(result.files) == {"app/heads.py", "lender_repo:baselib/layers.py", "lender_repo:baselib/ops.py"}
    # the file alone, in an empty folder, under an isolated interpreter
    (tmp_path / "block.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-I", "-c", RUN, str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(2, 5, 8, 8)"


def test_cross_source_blocks_pass_the_gate_and_prefer_installed_keeps_the_import(
        two_sources: tuple[Path, dict[str, Path]]) -> None:
    home, repos = two_sources
    report = nnrag.build([str(repos["lender_repo"]), str(repos["borrower_repo"])], home=home, limits=search_limits(),
                         search=False, harvest=False)
    assert report.per_source["borrower_repo"]["passed"] == report.per_source["borrower_repo"]["tried"] == 1
    # with baselib importable here, the default keeps it an import; --prefer corpus copies it
    sys.path.insert(0, str(repos["lender_repo"]))
    try:
        kept = nnrag.extract("DetHead", home=home)
        copied = nnrag.extract("DetHead", prefer="corpus", home=home)
    finally:
        sys.path.remove(str(repos["lender_repo"]))
    assert "from baselib import ConvBN" in kept.code and "class ConvBN" not in kept.code
    assert "class ConvBN" in copied.code
    with pytest.raises(nnrag.ConfigError, match="prefer must be one of installed, corpus"):
        nnrag.extract("DetHead", prefer="nowhere", home=home)


# the lender module the two vendored blocks both need, written once, as the lender wrote it
SHARED = (FIXTURES / "lender_repo" / "baselib" / "layers.py").read_text()

RUN_VENDORED = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from mypkg.layers import ConvBN, DetHead, _shared, det_head
assert det_head.ConvBN is _shared.ConvBN is ConvBN
print(tuple(DetHead()(torch.randn(2, 16, 8, 8)).shape), tuple(ConvBN(3, 4)(torch.randn(1, 3, 4, 4)).shape))
"""


def _body(path: Path) -> str:
    """A written module without its comment header."""
    return path.read_text().split("\n\n", 1)[1]


def test_vendored_blocks_write_shared_definitions_once_and_import_from_a_fresh_folder(
        two_sources: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    home, _ = two_sources
    project = tmp_path / "project"
    report = nnrag.vendor(["DetHead", "ConvBN"], project, package="mypkg.layers", home=home)
    # each block passed the gate imported from the written package
    assert [(b.module, b.class_name, b.ok) for b in report.blocks] == [
        ("mypkg.layers.det_head", "DetHead", True), ("mypkg.layers.conv_bn", "ConvBN", True)]
    folder = project / "mypkg" / "layers"
    assert (project / "mypkg" / "__init__.py").read_text() == ""
    assert report.shared == 2 and _body(folder / "_shared.py") == SHARED
    assert _body(folder / "conv_bn.py") == "from ._shared import ConvBN\n"
    det = (folder / "det_head.py").read_text()
    assert "from ._shared import ConvBN\n" in det and "def hard_swish(" in det and "class ConvBN" not in det
    assert "# also from: lender_repo (local " in det
    notice = (folder / "NOTICE").read_text()
    assert "block:    borrower_repo:app.heads.DetHead" in notice and "also from: lender_repo" in notice
    assert "file:     lender_repo:baselib/ops.py  sha1:" in notice
    assert (folder / "requirements.txt").read_text().splitlines()[1].startswith("torch==")
    # the package alone, from a folder that holds nothing else, under an isolated interpreter
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-I", "-c", RUN_VENDORED, str(project)], capture_output=True, text=True,
                          cwd=fresh, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(2, 5, 8, 8) (1, 8, 4, 4)"
    # vendoring again keeps what the folder already holds; a file nnrag did not write is never replaced
    again = run_cli("vendor", "ConvBN", "--into", str(folder), "--no-check", "--json", "--home", str(home))
    assert [b["block_id"] for b in json.loads(again.stdout)["blocks"]] == [
        "borrower_repo:app.heads.DetHead", "lender_repo:baselib.layers.ConvBN"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "conv_bn.py").write_text("# my own\n")
    with pytest.raises(nnrag.VendorError, match="conv_bn.py exists and was not written by nnrag"):
        nnrag.vendor(["ConvBN"], mine, home=home, check=False)
    assert (mine / "conv_bn.py").read_text() == "# my own\n"


def test_a_bare_folder_named_like_a_corpus_package_is_not_an_installed_distribution(
        two_sources: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    home, _ = two_sources
    (tmp_path / "baselib" / "stray").mkdir(parents=True)  # e.g. files unpacked in the current directory
    sys.path.insert(0, str(tmp_path))
    try:
        result = nnrag.extract("DetHead", home=home)
    finally:
        sys.path.remove(str(tmp_path))
    assert "class ConvBN" in result.code and "from baselib" not in result.code


@pytest.mark.parametrize(("statement", "expected"), [
    ("MODELS = Registry('model', parent=ROOT, locations=['pkg.models'])\n",
     "MODELS = Registry('model', parent=ROOT, locations=['pkg.models'], scope='pkg')\n"),
    ("TASKS = Registry(\n    'task',\n    parent=ROOT,\n)\n",
     "TASKS = Registry(\n    'task',\n    parent=ROOT,\n    scope='pkg',\n)\n"),
    ("def make():\n    return Registry('x')\n", "def make():\n    return Registry('x', scope='pkg')\n"),
    ("OWN = Registry('model', scope='other')\n", "OWN = Registry('model', scope='other')\n"),  # given: kept
    ("POS = Registry('model', None, ROOT, 'other')\n", "POS = Registry('model', None, ROOT, 'other')\n"),
    ("KW = Registry(**options)\n", "KW = Registry(**options)\n"),
    ("LIST = list('abc')\n", "LIST = list('abc')\n"),
])
def test_a_copied_registry_keeps_the_scope_it_infers_from_its_package(statement: str, expected: str) -> None:
    from nnrag.extraction.registry_scopes import keep_scopes

    assert keep_scopes(statement, frozenset({"Registry"}), "pkg.registry") == expected


def test_registries_that_infer_their_scope_are_mmengines_copied_or_imported() -> None:
    from nnrag.extraction.plan import DefTarget, ExtImport
    from nnrag.extraction.registry_scopes import self_scoped

    assert self_scoped(DefTarget("mmengine.registry.registry", "Registry"))
    assert self_scoped(ExtImport("mmengine.registry", "Registry"))
    assert not self_scoped(DefTarget("pkg.registry", "Registry"))  # a registry of another design


def test_a_module_that_loads_a_compiled_library_from_its_folder_stays_an_import(tmp_path: Path) -> None:
    """A copy of torchvision's ``extension`` loads no ``_C`` (it is not beside the block file) and
    every op fails; where the package is installed, the module stays an import of it. A package
    that ships no compiled file has nothing to load: its module is copied as any other."""
    repo = tmp_path / "native_repo"
    shutil.copytree(FIXTURES / "native_repo", repo)
    home = tmp_path / "home"
    report = nnrag.build([str(repo)], home=home, harvest=False, search=False)
    assert report.passed == report.tried == 1, report.failures
    code = nnrag.extract("NmsKeep", home=home).code
    assert "from torchvision.extension import _assert_has_ops" in code and "def _has_ops" not in code
    (repo / "torchvision" / "_C.so").unlink()
    nnrag.index([str(repo)], home=home)
    code = nnrag.extract("NmsKeep", home=home).code
    assert "def _has_ops" in code and "from torchvision.extension" not in code
