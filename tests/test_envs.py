"""Requirement environments: a block that imports a distribution not installed here passes the
gate in a cached environment that has it. A local wheel folder stands in for PyPI."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sysconfig
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

import nnrag
from conftest import FIXTURES, search_limits, write_wheel
from nnrag.db import connect
from nnrag.library.report import BuildReport
from nnrag.progress import ProgressFn
from nnrag.validator.envs import environment
from nnrag.workspace import Workspace

MODULE = "import torch\n\n\ndef scaled_tanh(x, scale):\n    return torch.tanh(x) * scale\n"


def _wheel(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, text in (("tinyact", MODULE), ("tinyplot", "def show(x):\n    return x\n")):
        write_wheel(folder, name, {f"{name}/__init__.py": text})


def test_a_block_passes_in_the_environment_of_its_requirements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _wheel(tmp_path / "wheels")
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {tmp_path / 'wheels'}")
    repo = tmp_path / "needs_repo"
    shutil.copytree(FIXTURES / "needs_repo", repo)
    home = tmp_path / "home"

    off = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False)
    assert (off.passed, off.failures) == (0, {"missing-dependency": 2, "constructor-args": 1, "unresolved-name": 1})
    # OptionalTanh imports without tinyact, then fails on the name the optional import's fallback
    # bound; TabledTanh on a name only the optional import binds
    assert off.requirements == {"needs_install": {"tinyact": 4}}
    assert not (home / "envs").exists()  # nothing installed unless asked

    on = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False, requirements="install")
    assert on.passed == 3 and on.requirements == {"environments": 1, "blocks": 4, "rescued": 3, "not_installable": {}}
    entries = {e["name"]: e for e in nnrag.library_entries(home=home)}
    assert entries["ScaledTanh"]["status"] == entries["OptionalTanh"]["status"] == entries["TabledTanh"]["status"] == "validated"
    assert entries["TanhGate"]["code"] == "constructor-args"  # imports there, but no guess builds it
    (env,) = [p for p in (home / "envs").iterdir() if p.is_dir()]
    assert (env / "lib").exists() and not list(env.rglob("torch/__init__.py"))  # torch comes from here, not pip
    with pytest.raises(ImportError):
        __import__("tinyact")  # installed in the environment, never here

    again = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False, requirements="install")
    assert (again.passed, again.cached) == (3, 4)

    # its documented example runs where its package imports: the block's environment, widened by
    # what the package itself imports (tinyplot), which the harvest stopped at once
    harvested = nnrag.build([str(repo)], home=tmp_path / "harvested", limits=search_limits(), search=False,
                            requirements="install")
    assert harvested.passed == 4
    assert harvested.harvest["examples"] == 2 and harvested.harvest["rescued"] == 1  # type: ignore[index]
    gate_entry = {e["name"]: e for e in nnrag.library_entries(home=tmp_path / "harvested")}["TanhGate"]
    assert gate_entry["status"] == "validated"
    with connect(Workspace.resolve(tmp_path / "harvested")) as store:
        (record,) = store.conn.execute("SELECT record FROM library WHERE name='TanhGate'").fetchone()
    assert json.loads(record)["environment"] == ["tinyact", "tinyplot"]


def _record(home: Path, name: str) -> dict[str, object]:
    with connect(Workspace.resolve(home)) as store:
        (record,) = store.conn.execute("SELECT record FROM library WHERE name=?", (name,)).fetchone()
    return json.loads(record)


def test_a_harvest_that_stopped_at_a_requirement_is_run_again_when_it_may_be_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block that imports nothing missing, but whose package does (``import kornia`` needs
    ``kornia_rs``), fails on its guesses, and its documented example cannot run without that
    distribution. A build without ``--requirements install`` says so and records it; a later build
    with it judges the block again, and the example rescues it, as a first build with it would."""
    _wheel(tmp_path / "wheels")
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {tmp_path / 'wheels'}")
    repo = tmp_path / "needs_repo"
    shutil.copytree(FIXTURES / "needs_repo", repo)
    blocks = repo / "npkg" / "blocks.py"  # its blocks' own requirement made local: only the package needs one
    local = "import torch\n\n\ndef scaled_tanh(x, scale):\n    return torch.tanh(x) * scale\n"
    blocks.write_text(blocks.read_text().replace("from tinyact import scaled_tanh", local, 1))
    home = tmp_path / "home"

    gate = {"TanhGate"}
    off = nnrag.build([str(repo)], home=home, limits=search_limits(), names=gate, search=False)
    assert (off.passed, off.failures) == (0, {"constructor-args": 1})
    assert (off.harvest["usage_waiting"], off.harvest["usage_waits_for"]) == (1, {"tinyplot": 1})  # type: ignore[index]
    assert _record(home, "TanhGate")["usage_waits_for"] == ["tinyplot"]
    assert nnrag.build([str(repo)], home=home, limits=search_limits(), names=gate, search=False).cached == 1

    on = nnrag.build([str(repo)], home=home, limits=search_limits(), names=gate, search=False, requirements="install")
    assert on.passed == 1 and on.harvest["rescued"] == 1, on.harvest  # type: ignore[index]
    record = _record(home, "TanhGate")
    assert record["ok"] and record["environment"] == ["tinyplot"] and "usage_waits_for" not in record
    assert nnrag.build([str(repo)], home=home, limits=search_limits(), names=gate, search=False,
                       requirements="install").cached == 1


def test_an_environment_layered_over_a_python_that_is_gone_is_layered_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home's environments outlive the virtual environment nnrag runs in (made again, moved): the
    layer that lends them torch then names a folder that is gone, and every worker there would fail
    to start. The environment is layered over this Python again, keeping what pip installed."""
    _wheel(tmp_path / "wheels")
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {tmp_path / 'wheels'}")
    workspace = Workspace.resolve(tmp_path / "home")
    made = environment(workspace, ("tinyact",))
    assert made.python
    (layer,) = (tmp_path / "home" / "envs").rglob("zz_nnrag_parent.pth")
    layer.write_text("import site; site.addsitedir('/gone/venv/lib/python3.11/site-packages')\n")
    probe = [made.python, "-c", "import torch, tinyact"]
    assert subprocess.run(probe, capture_output=True).returncode != 0

    monkeypatch.setenv("NNRAG_PIP_ARGS", "--no-index")  # nothing to install from: the layer alone mends it
    assert environment(workspace, ("tinyact",)).python == made.python
    subprocess.run(probe, check=True, capture_output=True)


def _build_with_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wheels: Path,
                       progress: ProgressFn | None = None) -> tuple[Path, BuildReport]:
    """needs_repo built with its requirements installed from ``wheels`` only; none of its blocks is
    rescued, so the first verdicts stand: two missing dependencies, one constructor failure, one
    name only the missing import binds."""
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {wheels}")
    repo = tmp_path / "needs_repo"
    shutil.copytree(FIXTURES / "needs_repo", repo)
    report = nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False, harvest=False,
                         requirements="install", progress=progress)
    assert report.failures == {"missing-dependency": 2, "constructor-args": 1, "unresolved-name": 1}
    return repo, report


def test_a_requirement_pip_cannot_install_is_a_recorded_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    steps: list[tuple[str, int, int]] = []
    repo, report = _build_with_wheels(tmp_path, monkeypatch, tmp_path / "empty", lambda *step: steps.append(step))
    assert "tinyact" in report.requirements["not_installable"]  # type: ignore[operator]
    assert ("environments", 4, 4) in steps  # the four waiting blocks settle in the progress line too
    for entry in nnrag.library_entries(home=tmp_path / "home"):
        assert "pip cannot install tinyact" in str(entry["message"])

    # pip is not asked again for a set it could not install: the next build keeps every verdict ...
    again = nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False, harvest=False,
                        requirements="install")
    assert (again.cached, again.extracted) == (4, 0)
    # ... until the set's record is removed
    (marker,) = (tmp_path / "home" / "envs").glob("*/nnrag-env.json")
    shutil.rmtree(marker.parent)
    retried = nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False, harvest=False,
                          requirements="install")
    assert retried.cached == 2 and "tinyact" in retried.requirements["not_installable"]  # type: ignore[operator]
    with pytest.raises(nnrag.ConfigError, match="requirements must be one of off, install"):
        nnrag.build([str(repo)], home=tmp_path / "home", requirements="always")


def test_a_corpus_package_loaded_by_a_computed_name_is_explained_not_offered_for_install() -> None:
    from nnrag.library.environments import explain_corpus_import, missing_distribution
    from nnrag.validator.record import ValidationRecord

    record = ValidationRecord(False, "import", "missing-dependency", "ModuleNotFoundError: No module named 'baselib'")
    corpus = frozenset({"baselib"})
    assert missing_distribution(record, corpus) is None  # never installed from PyPI under a corpus name
    explained = explain_corpus_import(record, corpus)
    assert explained.code == "missing-dependency"
    assert "baselib is a source of the corpus: the block loads a module of it by a name computed at run time" in explained.message
    assert explain_corpus_import(record, frozenset()) is record  # a third-party distribution: unchanged
    # the copy's own ``importlib.import_module`` (a compiled extension loaded by name), called
    # below torch's module machinery, is the copy's import, not torch's
    stdlib = sysconfig.get_paths()["stdlib"]
    loaded = replace(record, traceback=(
        'File "/env/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1794, in _call_impl\n'
        'File "/tmp/sandbox/candidate.py", line 116, in import_module\n'
        f'File "{stdlib}/importlib/__init__.py", line 126, in import_module\n'
        'File "<frozen importlib._bootstrap>", line 1204, in _gcd_import\n'))
    assert "computed at run time" in explain_corpus_import(loaded, corpus).message
    # an installed distribution whose own import stops at the corpus package (mmdet 2 importing mmcv)
    chained = replace(record, traceback=(
        'File "/tmp/sandbox/candidate.py", line 67, in <module>\n'
        'File "/env/lib/python3.11/site-packages/chainlib/__init__.py", line 2, in <module>\n'))
    assert "the installed chainlib imports baselib" in explain_corpus_import(chained, corpus).message
    # a private module is the compiled part of a distribution named otherwise; as "-k2" it would be an option of pip's
    private = ValidationRecord(False, "import", "missing-dependency", "ModuleNotFoundError: No module named '_k2'")
    assert missing_distribution(private) is None


def test_an_environment_whose_torch_is_broken_leaves_its_blocks_waiting_and_the_build_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A requirement that installs a torch of its own which does not import: the validation worker
    cannot start there, so its blocks keep their first verdict with that reason."""
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "tinyact", {"tinyact/__init__.py": MODULE,
                                    "torch/__init__.py": "raise ImportError('a torch this machine cannot load')\n"})
    _, report = _build_with_wheels(tmp_path, monkeypatch, wheels)
    assert "did not start" in report.requirements["not_installable"]["tinyact"]  # type: ignore[index]
    for entry in nnrag.library_entries(home=tmp_path / "home"):
        assert "did not start" in str(entry["message"])


@contextlib.contextmanager
def _package_index(root: Path, name: str, releases: list[Path],
                   more: dict[str, list[Path]] | None = None) -> Iterator[str]:
    """A package index (PEP 503 pages) on 127.0.0.1 serving ``releases`` of ``name`` (and of each
    distribution ``more`` names) from ``root``."""
    import hashlib
    import http.server
    import threading

    for project, files in {name: releases, **(more or {})}.items():
        page = root / "simple" / project
        page.mkdir(parents=True)
        page.joinpath("index.html").write_text("".join(
            f'<a href="../../{p.relative_to(root)}#sha256={hashlib.sha256(p.read_bytes()).hexdigest()}">{p.name}</a>\n'
            for p in files))
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()


def _sdist(folder: Path, name: str, version: str, files: dict[str, str],
           setup: str = "raise SystemExit('this distribution does not build here')\n") -> Path:
    """An sdist whose setup.py fails (by default), as a package pip cannot build here does."""
    import io
    import tarfile

    path = folder / f"{name}-{version}.tar.gz"
    members = {"setup.py": setup,
               "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", **files}
    with tarfile.open(path, "w:gz") as tf:
        for member, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{member}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_a_distribution_pip_cannot_build_is_lent_from_the_release_that_has_what_the_blocks_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package index on 127.0.0.1 holds two sdists of ``lentpkg`` that do not build; the blocks
    import ``lentpkg.runner``, which only the older release has. The build lends that release."""
    files = tmp_path / "index" / "files"
    files.mkdir(parents=True)
    scale = "import torch\n\n\nclass Scale(torch.nn.Module):\n    def __init__(self, s):\n        super().__init__()\n" \
            "        self.s = s\n\n    def forward(self, x):\n        return x * self.s\n"
    old = _sdist(files, "lentpkg", "1.0", {"lentpkg/__init__.py": "", "lentpkg/runner.py": scale})
    new = _sdist(files, "lentpkg", "2.0", {"lentpkg/__init__.py": "", "lentpkg/engine.py": scale})
    with _package_index(tmp_path / "index", "lentpkg", [old, new]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        repo = tmp_path / "old_api_repo"
        shutil.copytree(FIXTURES / "old_api_repo", repo)
        home = tmp_path / "home"
        report = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    (lent,) = report.requirements["lent"]  # type: ignore[misc]
    assert (lent["distribution"], lent["version"], lent["covers"], lent["blocks"]) == ("lentpkg", "1.0", "1/1", 1)
    assert "build" in lent["reason"]  # pip's own last line, kept
    assert report.passed == report.tried == 2  # the lending source's own blocks are no part of the library
    entries = {e["name"]: e for e in nnrag.library_entries(home=home)}
    assert set(entries) == {"ScaledConv", "Plain"} and entries["ScaledConv"]["status"] == "validated"
    code = (home / str(entries["ScaledConv"]["path"])).read_text(encoding="utf-8")
    assert "class Scale" in code and "from lentpkg" not in code  # its code copied from the release lent
    (source,) = [s for s in nnrag.sources(home=home) if s.name == "lentpkg"]
    assert source.spec == "pypi:lentpkg==1.0"
    with pytest.raises(ImportError):
        __import__("lentpkg")  # read as data, never installed


def test_the_release_lent_is_within_the_versions_the_repository_states_it_accepts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every release provides ``lentpkg.runner``; the repository's package checks at import that
    ``lentpkg`` is at most 1.5 (``LENTPKG_MAX``), as OpenMMLab packages check mmcv. The newest
    release inside that bound is lent, not the newest."""
    files = tmp_path / "index" / "files"
    files.mkdir(parents=True)
    scale = "import torch\n\n\nclass Scale(torch.nn.Module):\n    def __init__(self, s):\n        super().__init__()\n" \
            "        self.s = s\n\n    def forward(self, x):\n        return x * self.s\n"
    releases = [_sdist(files, "lentpkg", v, {"lentpkg/__init__.py": "", "lentpkg/runner.py": scale}) for v in ("1.0", "1.5", "2.0")]
    repo = tmp_path / "old_api_repo"
    shutil.copytree(FIXTURES / "old_api_repo", repo)
    (repo / "oldapi" / "__init__.py").write_text(
        "LENTPKG_MIN = '1.0'\nLENTPKG_MAX = '1.5'\n\n\ndef _check(version):\n"
        "    assert LENTPKG_MIN <= version <= LENTPKG_MAX, f'lentpkg=={version} is used but incompatible'\n")
    with _package_index(tmp_path / "index", "lentpkg", releases) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        report = nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    (lent,) = report.requirements["lent"]  # type: ignore[misc]
    assert (lent["version"], lent["covers"]) == ("1.5", "1/1") and report.passed == 2


def test_an_installed_distribution_too_new_for_the_code_is_pinned_to_the_release_that_has_what_it_imports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block imports ``tqdm.oldmod``, which the tqdm installed here does not have; an index on
    127.0.0.1 holds two releases, and only the older has it. The build judges the block again in an
    environment with that release, layered over this one."""
    import importlib.metadata as md

    scale = ("import torch\n\n\nclass Scale(torch.nn.Module):\n    def __init__(self, s):\n        super().__init__()\n"
             "        self.s = s\n\n    def forward(self, x):\n        return x * self.s\n")
    files = tmp_path / "index" / "files"
    old = write_wheel(files, "tqdm", {"tqdm/__init__.py": "", "tqdm/oldmod.py": scale}, version="1.0")
    new = write_wheel(files, "tqdm", {"tqdm/__init__.py": ""}, version="99.0")
    repo = tmp_path / "moved_api_repo"
    shutil.copytree(FIXTURES / "moved_api_repo", repo)
    home = tmp_path / "home"
    with _package_index(tmp_path / "index", "tqdm", [old, new]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        report = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    (pin,) = report.requirements["pinned"]  # type: ignore[misc]
    assert (pin["distribution"], pin["version"], pin["covers"], pin["installed"]) == ("tqdm", "1.0", "1/1", md.version("tqdm"))
    (entry,) = nnrag.library_entries(home=home)
    assert entry["status"] == "validated", entry["message"]
    with connect(Workspace.resolve(home)) as store:
        (record,) = store.conn.execute("SELECT record FROM library").fetchone()
    assert json.loads(record)["environment"] == ["tqdm==1.0"]
    assert md.version("tqdm") != "1.0"  # installed in the block's environment, never here
    again = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False, requirements="install")
    assert (again.passed, again.cached) == (1, 1)  # the pinned environment stands: nothing judged again


def test_a_harvest_runs_without_the_declared_requirements_pip_cannot_install_and_without_other_sources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """needs_repo declares ``tinyplot`` and ``brokenpkg``, whose sdist does not build; another
    source of the corpus declares ``otherbroken``, which needs_repo never imports. The harvest of
    needs_repo runs in an environment with what it declares and pip installs, and rescues TanhGate
    as it does when nothing is broken; what it ran without is reported with pip's reason."""
    wheels = tmp_path / "wheels"
    _wheel(wheels)
    for name in ("brokenpkg", "otherbroken"):
        _sdist(wheels, name, "1.0", {f"{name}/__init__.py": ""})
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {wheels} --no-cache-dir")
    repo, other = tmp_path / "needs_repo", tmp_path / "other_repo"
    shutil.copytree(FIXTURES / "needs_repo", repo)
    shutil.copytree(FIXTURES / "usage_repo", other)
    for root, declared in ((repo, ("tinyplot", "brokenpkg")), (other, ("otherbroken",))):
        meta = root / f"{root.name}-1.0.dist-info"
        meta.mkdir()
        meta.joinpath("METADATA").write_text("Metadata-Version: 2.1\nName: x\nVersion: 1.0\n"
                                             + "".join(f"Requires-Dist: {d}\n" for d in declared))
    home = tmp_path / "home"
    report = nnrag.build([str(repo), str(other)], home=home, limits=search_limits(), search=False,
                         names={"TanhGate"}, requirements="install")
    assert report.passed == 1 and report.harvest["rescued"] == 1, report.harvest  # type: ignore[index]
    assert _record(home, "TanhGate")["environment"] == ["tinyact", "tinyplot"]
    (left_out,) = report.harvest["left_out"].values()  # type: ignore[index,union-attr]
    assert list(left_out) == ["brokenpkg"] and "brokenpkg" in left_out["brokenpkg"]


def test_an_import_name_maps_to_its_distribution_through_the_maintained_mapping() -> None:
    from nnrag.validator.envs import distribution_for

    # from pipreqs' mapping, which the package ships as data
    assert distribution_for("sklearn") == "scikit-learn" and distribution_for("yaml") == "PyYAML"
    assert distribution_for("Levenshtein") == "python-Levenshtein"
    # what the mapping lacks, and a build that imports without a display
    assert distribution_for("cv2") == "opencv-python-headless" and distribution_for("skimage") == "scikit-image"
    # a name no mapping holds is its own distribution; a private module is a compiled part of one
    assert distribution_for("einops") == "einops" and distribution_for("_ext") is None


def test_a_widening_that_breaks_the_harvest_is_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One module imports a toolbox without a guard, so the harvest stops at it and the build
    installs it; the models module imports it only optionally, and the toolbox, installed, raises
    as it imports (mmdet asserting an mmcv release other than the one lent). The units that ran
    before would fail now: the blocks are judged in the narrower environment, with its recordings."""
    write_wheel(tmp_path / "wheels", "breaker", {"breaker/__init__.py": "raise AssertionError('needs another release of its base')\n"})
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {tmp_path / 'wheels'}")
    package = tmp_path / "widen_repo" / "wpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(
        "import torch\nfrom torch import nn\n\ntry:\n    import breaker  # optional\nexcept ImportError:\n    breaker = None\n\n\n"
        "class Gate(nn.Module):\n    def __init__(self, table):\n        super().__init__()\n"
        "        self.scale = nn.Parameter(torch.tensor(float(table['scale'])))\n\n"
        "    def forward(self, x):\n        return torch.tanh(x) * self.scale\n\n\n"
        "def gate_small(**kwargs):\n    return Gate({'scale': 2})\n")
    (package / "tools.py").write_text("import breaker\n\nfrom .models import Gate\n\n\n"
                                      "def gate_tool(**kwargs):\n    return Gate({'scale': 3})\n")
    home = tmp_path / "home"
    report = nnrag.build([str(tmp_path / "widen_repo")], home=home, limits=search_limits(), names={"Gate"}, search=False,
                         requirements="install")
    assert report.harvest["widening_undone"] == ["widen_repo"], report.harvest  # type: ignore[index]
    assert report.passed == 1 and report.harvest["rescued"] == 1, report.harvest  # type: ignore[index]
    assert _record(home, "Gate")["arguments"] == "recorded"


def test_an_import_name_of_an_unrelated_project_is_installed_as_the_source_declares_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block imports ``tinyact``; on the index that name has no installable release, and the
    module comes from ``tinyact-ppl``, which the repository declares as an extra (as gpytorch's
    ``pyro`` extra requires ``pyro-ppl``): pip failing on the name it is spelt as, the declared
    distribution is installed instead."""
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "tinyact_ppl", {"tinyact/__init__.py": MODULE})
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {wheels}")
    repo = tmp_path / "needs_repo"
    shutil.copytree(FIXTURES / "needs_repo", repo)
    (repo / "pyproject.toml").write_text('[project]\nname = "npkg"\nversion = "1.0"\ndependencies = []\n\n'
                                         '[project.optional-dependencies]\ntinyact = ["tinyact-ppl>=1.0"]\n')
    report = nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False, harvest=False,
                         requirements="install")
    assert report.passed == 3, report.failures
    assert report.requirements["declared_instead"] == {"tinyact": "tinyact-ppl"}, report.requirements
    entries = {e["name"]: e for e in nnrag.library_entries(home=tmp_path / "home")}
    assert entries["ScaledTanh"]["status"] == "validated", entries["ScaledTanh"]["message"]


def test_a_distribution_whose_setup_imports_torch_is_built_against_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``setup.py`` imports torch to decide what to build (mmcv 1.x): pip's isolated build has
    neither torch nor, offline, setuptools, and fails; built against the environment, whose layer
    has both, it installs, and the reason of the first try is not the environment's."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _sdist(wheels, "torchbuilt", "1.0", {"torchbuilt/__init__.py": "import torch\nWITH = torch.__version__\n"},
           setup="import torch\nfrom setuptools import setup\nsetup(name='torchbuilt', version='1.0', packages=['torchbuilt'])\n")
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {wheels} --no-cache-dir")
    env = environment(nnrag.Workspace(tmp_path / "home"), ("torchbuilt",))
    assert env.python is not None and env.error is None, env
    out = subprocess.run([env.python, "-c", "import torchbuilt, torch; print(torchbuilt.WITH == torch.__version__)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    # one that builds neither way keeps pip's first reason and is noted, so no other set tries again
    _sdist(wheels, "neverbuilt", "1.0", {"neverbuilt/__init__.py": ""})
    broken = environment(nnrag.Workspace(tmp_path / "home"), ("neverbuilt",))
    assert broken.python is None and "neverbuilt" in (broken.error or ""), broken
    assert json.loads((tmp_path / "home" / "envs" / "unbuildable.json").read_text()) == ["neverbuilt"]


def test_a_distribution_a_requirement_environment_installed_too_new_is_pinned_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tinyscale`` is not installed here: the block's environment gets the newest release, which
    no longer has the name the block imports ("cannot import name ... (…/envs/…/site-packages/…)").
    The build reads the release from that environment and pins the older one that has it."""
    helper = "def scale_of(x):\n    return x * 2\n"
    files = tmp_path / "index" / "files"
    old = write_wheel(files, "tinyscale", {"tinyscale/__init__.py": "", "tinyscale/core.py": helper}, version="1.0")
    new = write_wheel(files, "tinyscale", {"tinyscale/__init__.py": "", "tinyscale/core.py": "VERSION = 99\n"}, version="99.0")
    repo = tmp_path / "drifted_repo"
    repo.mkdir()
    (repo / "blocks.py").write_text(
        "import torch\nfrom tinyscale.core import scale_of\n\n\nclass Doubled(torch.nn.Module):\n"
        "    def __init__(self, dim: int):\n        super().__init__()\n        self.proj = torch.nn.Linear(dim, dim)\n\n"
        "    def forward(self, x):\n        return scale_of(self.proj(x))\n")
    home = tmp_path / "home"
    with _package_index(tmp_path / "index", "tinyscale", [old, new]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        report = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    (pin,) = report.requirements["pinned"]  # type: ignore[misc]
    assert (pin["distribution"], pin["version"], pin["installed"]) == ("tinyscale", "1.0", "99.0"), pin
    (entry,) = nnrag.library_entries(home=home)
    assert entry["status"] == "validated", entry["message"]


def test_an_import_name_no_declared_name_says_is_found_in_what_a_declared_distribution_releases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block imports ``tinyact``; the index has no ``tinyact``, and the repository declares
    ``quirky-torch``, whose name shares no word with it (as ``tensorly-torch`` installs
    ``tltorch``). Its wheel on the index installs ``tinyact``: that distribution is installed."""
    files = tmp_path / "index" / "files"
    wheel = write_wheel(files, "quirky_torch", {"tinyact/__init__.py": MODULE})
    unrelated = write_wheel(files, "plainpkg", {"plainpkg/__init__.py": ""})
    with _package_index(tmp_path / "index", "quirky-torch", [wheel], {"plainpkg": [unrelated]}) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        repo = tmp_path / "needs_repo"
        shutil.copytree(FIXTURES / "needs_repo", repo)
        (repo / "requirements.txt").write_text("plainpkg\nquirky-torch>=1.0\n")
        report = nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False,
                             harvest=False, requirements="install")
    assert report.requirements["declared_instead"] == {"tinyact": "quirky-torch"}, report.requirements
    assert report.passed == 3, report.failures


def test_a_module_of_a_namespace_package_is_installed_from_the_distribution_named_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nsdemo`` is a namespace package that several distributions fill, as ``opentelemetry`` and
    ``google`` are: no distribution is named ``nsdemo``, and the one that holds ``nsdemo.extra``
    is named for that path (``opentelemetry.exporter.otlp.proto.http`` comes from
    ``opentelemetry-exporter-otlp-proto-http``). The block's missing module is looked up on the
    index by its longest such name."""
    files = tmp_path / "index" / "files"
    wheel = write_wheel(files, "nsdemo_extra", {"nsdemo/extra/core.py": MODULE})
    repo = tmp_path / "ns_repo"
    repo.mkdir()
    (repo / "blocks.py").write_text(
        "import torch\nfrom nsdemo.extra.core import scaled_tanh\n\n\nclass Squashed(torch.nn.Module):\n"
        "    def forward(self, x):\n        return scaled_tanh(x, 2.0)\n")
    with _package_index(tmp_path / "index", "nsdemo-extra", [wheel]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False,
                    harvest=False, requirements="install")
    (entry,) = nnrag.library_entries(home=tmp_path / "home")
    assert entry["status"] == "validated", entry["message"]


def test_a_portion_of_a_namespace_the_corpus_also_holds_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyannote.audio is one portion of the ``pyannote`` namespace and imports another,
    ``pyannote.core``: the corpus holds ``pyannote`` and the copy still imports
    ``pyannote.core``, which is not a module of the corpus but another distribution's."""
    from nnrag.library.environments import missing_distribution
    from nnrag.validator.record import ValidationRecord

    files = tmp_path / "index" / "files"
    wheel = write_wheel(files, "nsportion_core", {"nsportion/core/__init__.py": MODULE})
    record = ValidationRecord(False, "import", "missing-dependency", "ModuleNotFoundError: No module named 'nsportion'")
    code = "import torch\nfrom nsportion.core import scaled_tanh\n"
    with _package_index(tmp_path / "index", "nsportion-core", [wheel]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        assert missing_distribution(record, frozenset({"nsportion"}), code) == "nsportion-core"
        assert missing_distribution(record, frozenset({"nsportion"})) is None  # nothing says which portion


def test_a_package_declared_as_a_variant_and_an_installed_distribution_that_imports_it_are_both_lent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository declares ``lentpkg-full`` (as mmrotate declares ``mmcv-full``), whose sdist does
    not build, and imports ``lentpkg`` and ``chainpkg``; ``chainpkg`` installs from its wheel but
    imports ``lentpkg`` as it loads (as mmdet 2 imports mmcv). ``lentpkg-full`` is lent for
    ``lentpkg`` (before: nothing, the name is not ``lentpkg``'s own), then, in another round,
    ``chainpkg`` too, so the copy carries the code of both (before: ``No module named 'lentpkg'``
    from the installed ``chainpkg``)."""
    files = tmp_path / "index" / "files"
    files.mkdir(parents=True)
    runner = "def scale(x):\n    return x * 2\n"
    lent_full = _sdist(files, "lentpkg_full", "1.0", {"lentpkg/__init__.py": "", "lentpkg/runner.py": runner})
    chain = {"chainpkg/__init__.py": "import lentpkg\n",
             "chainpkg/layers.py": "import torch\nfrom lentpkg.runner import scale\n\n\nclass Gate(torch.nn.Module):\n"
                                   "    def forward(self, x):\n        return scale(x)\n"}
    chain_wheel = write_wheel(files, "chainpkg", chain, version="1.0")
    chain_sdist = _sdist(files, "chainpkg", "1.0", chain)
    repo = tmp_path / "chain_repo"
    (repo / "chainuser").mkdir(parents=True)
    (repo / "requirements.txt").write_text("lentpkg-full\nchainpkg\n")
    (repo / "chainuser" / "__init__.py").write_text("")
    (repo / "chainuser" / "blocks.py").write_text(
        "import torch\nfrom lentpkg.runner import scale\nfrom chainpkg.layers import Gate\n\n\n"
        "class Doubled(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.gate = Gate()\n\n"
        "    def forward(self, x):\n        return scale(self.gate(x))\n")
    with _package_index(tmp_path / "index", "lentpkg-full", [lent_full], {"chainpkg": [chain_wheel, chain_sdist]}) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        home = tmp_path / "home"
        report = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    lent = {o["distribution"]: o for o in report.requirements["lent"]}  # type: ignore[union-attr]
    assert lent["lentpkg-full"]["version"] == "1.0" and lent["chainpkg"]["version"] == "1.0", lent
    assert "imports lentpkg" in lent["chainpkg"]["reason"]
    (entry,) = nnrag.library_entries(home=home)
    assert entry["status"] == "validated", entry["message"]
    code = (home / str(entry["path"])).read_text(encoding="utf-8")
    assert "class Gate" in code and "def scale" in code and "import chainpkg" not in code


def test_a_distribution_no_index_has_is_lent_from_the_repository_the_source_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``gitdep`` is on no package index, as detectron2 is not; the repository's README names its
    GitHub repository (``pip install git+https://github.com/someone/gitdep.git``). The build lends
    the package from that repository (here a local one, which git's ``insteadOf`` reaches), so
    the block's copy carries the code it imports (before: missing-dependency, "no matching
    distribution")."""
    origin = tmp_path / "github" / "someone" / "gitdep"
    (origin / "gitdep").mkdir(parents=True)
    (origin / "gitdep" / "__init__.py").write_text("")
    (origin / "gitdep" / "layers.py").write_text(
        "import torch\n\n\nclass Scale(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n")
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "one")):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=origin, check=True, capture_output=True)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")  # the machine's own rewrites of GitHub URLs left out
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", f"url.file://{tmp_path / 'github'}/.insteadOf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://github.com/")
    repo = tmp_path / "needs_git"
    (repo / "user").mkdir(parents=True)
    (repo / "README.md").write_text("Install gitdep first:\n\n    pip install git+https://github.com/someone/gitdep.git\n")
    (repo / "user" / "__init__.py").write_text("")
    (repo / "user" / "blocks.py").write_text(
        "import torch\nfrom gitdep.layers import Scale\n\n\nclass Twice(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.scale = Scale()\n\n"
        "    def forward(self, x):\n        return self.scale(x)\n")
    files = tmp_path / "index" / "files"
    other = write_wheel(files, "unrelated", {"unrelated/__init__.py": ""})
    with _package_index(tmp_path / "index", "unrelated", [other]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        home = tmp_path / "home"
        report = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    (lent,) = report.requirements["lent"]  # type: ignore[misc]
    assert (lent["distribution"], lent["repository"]) == ("gitdep", "https://github.com/someone/gitdep"), lent
    (entry,) = nnrag.library_entries(home=home)
    assert entry["status"] == "validated", entry["message"]
    assert "class Scale" in (home / str(entry["path"])).read_text(encoding="utf-8")


def test_an_installed_distribution_whose_import_stops_at_what_an_unpinnable_package_lost_is_lent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``oldimporter`` installs, but its ``__init__`` imports a module of torch that this torch no
    longer has (as basicsr's imports ``torchvision.transforms.functional_tensor``), and no release
    of torch can be pinned. Before: the block that uses only ``oldimporter.archs`` stays
    missing-dependency. Now ``oldimporter`` is lent from its sdist and the copy carries the one
    module the block uses, never the ``__init__`` that stops."""
    files = tmp_path / "index" / "files"
    package = {"oldimporter/__init__.py": "from . import data\n",
               "oldimporter/data.py": "from torch.gone_in_this_release import helper\n",
               "oldimporter/archs.py": "import torch\n\n\nclass Layer(torch.nn.Module):\n"
                                       "    def forward(self, x):\n        return x * 2\n"}
    wheel = write_wheel(files, "oldimporter", package, version="1.0")
    sdist = _sdist(files, "oldimporter", "1.0", package)
    repo = tmp_path / "importer_repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text("oldimporter\n")
    (repo / "blocks.py").write_text(
        "import torch\nfrom oldimporter.archs import Layer\n\n\nclass Twice(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.layer = Layer()\n\n"
        "    def forward(self, x):\n        return self.layer(x)\n")
    with _package_index(tmp_path / "index", "oldimporter", [wheel, sdist]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        home = tmp_path / "home"
        report = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    (lent,) = report.requirements["lent"]  # type: ignore[misc]
    assert (lent["distribution"], lent["version"]) == ("oldimporter", "1.0"), lent
    assert lent["reason"] == "the installed oldimporter imports torch.gone_in_this_release, which the installed torch no longer has"
    (entry,) = nnrag.library_entries(home=home)
    assert entry["status"] == "validated", entry["message"]
    code = (home / str(entry["path"])).read_text(encoding="utf-8")
    assert "class Layer" in code and "import oldimporter" not in code and "from oldimporter" not in code


def test_a_top_level_module_a_distribution_stopped_shipping_is_pinned_to_a_release_that_has_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``gonemod`` 2.0 no longer ships the top-level module ``gonemod`` that 1.0 had (as setuptools 81
    stopped shipping ``pkg_resources``). The block's environment gets 2.0 and the import still
    fails ("No module named 'gonemod'", nothing dotted, no path): before, that was the verdict.
    Now the distribution the environment holds is pinned to the release that has the module."""
    helper = "def scale_of(x):\n    return x * 2\n"
    files = tmp_path / "index" / "files"
    old = write_wheel(files, "gonemod", {"gonemod/__init__.py": helper}, version="1.0")
    new = write_wheel(files, "gonemod", {"gonemod_next/__init__.py": helper}, version="2.0")
    repo = tmp_path / "gone_repo"
    repo.mkdir()
    (repo / "blocks.py").write_text(
        "import torch\nfrom gonemod import scale_of\n\n\nclass Doubled(torch.nn.Module):\n"
        "    def __init__(self, dim: int):\n        super().__init__()\n        self.proj = torch.nn.Linear(dim, dim)\n\n"
        "    def forward(self, x):\n        return scale_of(self.proj(x))\n")
    home = tmp_path / "home"
    with _package_index(tmp_path / "index", "gonemod", [old, new]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        report = nnrag.build([str(repo)], home=home, limits=search_limits(), search=False, harvest=False,
                             requirements="install")
    (pin,) = report.requirements["pinned"]  # type: ignore[misc]
    assert (pin["distribution"], pin["version"], pin["installed"]) == ("gonemod", "1.0", "2.0"), pin
    (entry,) = nnrag.library_entries(home=home)
    assert entry["status"] == "validated", entry["message"]


def test_a_project_of_the_same_name_that_provides_little_of_what_the_blocks_import_is_not_lent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks import ``homonym.layers.Scale`` and ``homonym.ops.shift``; the only ``homonym`` on
    the index is another project (its sdist does not build) with neither module, as PyPI's ``corr``
    is not a repository's own ``corr.py``. Before: lent anyway (0/2), its code copied for nothing.
    Now it is not lent, and the report says why."""
    files = tmp_path / "index" / "files"
    files.mkdir(parents=True)
    other = _sdist(files, "homonym", "1.0", {"homonym/__init__.py": "", "homonym/web.py": "def serve():\n    pass\n"})
    repo = tmp_path / "homonym_repo"
    repo.mkdir()
    (repo / "blocks.py").write_text(
        "import torch\nfrom homonym.layers import Scale\nfrom homonym.ops import shift\n\n\n"
        "class Twice(torch.nn.Module):\n    def forward(self, x):\n        return shift(Scale()(x))\n")
    with _package_index(tmp_path / "index", "homonym", [other]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        report = nnrag.build([str(repo)], home=tmp_path / "home", limits=search_limits(), search=False,
                             harvest=False, requirements="install")
    (outcome,) = report.requirements["lent"]  # type: ignore[misc]
    assert "version" not in outcome and outcome["why_not"] == "no release provides what the corpus imports (at best 0/2)", outcome
    assert [s.name for s in nnrag.sources(home=tmp_path / "home")] == ["homonym_repo"]


def test_a_compiled_module_a_pypi_source_ships_is_imported_from_that_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wheel of ``compiledpkg``, a PyPI source, ships a compiled module built for this
    platform (here a copy of the standard library's own ``_bisect``) that its Python imports, as
    compressai's wheel ships ``_CXX``. A standalone file cannot hold it: before, the block was
    ``native-extension``. Now the copy imports it from that release, and the block is judged in
    an environment that installs it."""
    import importlib.machinery
    import importlib.util

    origin = importlib.util.find_spec("_bisect").origin  # type: ignore[union-attr]
    assert origin and origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), origin
    files = tmp_path / "index" / "files"
    wheel = write_wheel(files, "compiledpkg", {
        "compiledpkg/__init__.py": "",
        f"compiledpkg/{Path(origin).name}": Path(origin).read_bytes(),
        "compiledpkg/layers.py": "import torch\nfrom compiledpkg._bisect import bisect_left\n\n\n"
                                 "class Bucketed(torch.nn.Module):\n    def __init__(self, edges=(0.25, 0.5, 0.75)):\n"
                                 "        super().__init__()\n        self.edges = list(edges)\n"
                                 "        self.scale = torch.nn.Parameter(torch.ones(len(self.edges) + 1))\n\n"
                                 "    def forward(self, x):\n        return x * self.scale[bisect_left(self.edges, 0.6)]\n"})
    home = tmp_path / "home"
    with _package_index(tmp_path / "index", "compiledpkg", [wheel]) as index:
        monkeypatch.setenv("NNRAG_PIP_ARGS", f"--index-url {index} --no-cache-dir")
        nnrag.build(["pypi:compiledpkg==1.0"], home=home, limits=search_limits(), search=False, harvest=False,
                    requirements="install")
    (entry,) = nnrag.library_entries(home=home)
    assert entry["status"] == "validated", entry["message"]
    assert "from compiledpkg._bisect import bisect_left" in (home / str(entry["path"])).read_text(encoding="utf-8")
    assert _record(home, "Bucketed")["environment"] == ["compiledpkg==1.0"]
