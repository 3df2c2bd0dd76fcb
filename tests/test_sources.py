"""Corpus sources: local folders, git clones, wheels from a package index, archives, corpus files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import nnrag
from conftest import search_limits, write_wheel
from nnrag.sourcing.corpus import load_corpus
from nnrag.sourcing.globs import PathFilter
from nnrag.sourcing.spec import default_corpus, module_names, parse_source

LAYER = "import torch.nn as nn\n\n\nclass {name}(nn.Module):\n    def forward(self, x):\n        return x\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "origin" / "layers"
    (repo / "layers").mkdir(parents=True)
    (repo / "layers" / "__init__.py").write_text("")
    (repo / "layers" / "a.py").write_text(LAYER.format(name="LayerA"))
    (repo / "README.md").write_text("its code blocks show how the layers are used\n")
    (repo / "configs").mkdir()
    (repo / "configs" / "model.yaml").write_text("model:\n  target: layers.a.LayerA\n")
    (repo / "weights.bin").write_bytes(b"\0" * 64)  # data: never checked out
    (repo / "LICENSE").write_text("MIT License\n\nPermission is hereby granted, free of charge, ...\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    return repo


def test_parse_source_kinds(tmp_path: Path) -> None:
    git = parse_source("git+https://github.com/huggingface/pytorch-image-models@v1.0.15")
    assert (git.kind, git.name, git.location, git.ref) == (
        "git",
        "pytorch-image-models",
        "https://github.com/huggingface/pytorch-image-models",
        "v1.0.15",
    )
    assert git.spec == "git+https://github.com/huggingface/pytorch-image-models@v1.0.15"
    assert parse_source("git+https://github.com/o/n.git").name == "n"
    assert (parse_source("dist:timm").kind, parse_source("dist:timm").name) == ("dist", "timm")
    pypi = parse_source("pypi:segmentation-models-pytorch==0.3.3")
    assert (pypi.kind, pypi.name, pypi.location) == ("pypi", "segmentation-models-pytorch", "segmentation-models-pytorch==0.3.3")
    local = parse_source(str(tmp_path))
    assert (local.kind, local.name) == ("local", tmp_path.name)
    with pytest.raises(nnrag.ConfigError, match="git\\+"):
        parse_source("https://github.com/o/n")
    assert [s.spec for s in default_corpus()] == ["dist:torch", "dist:torchvision", "dist:timm"]


@pytest.mark.parametrize(
    ("path", "style", "expected"),
    [
        ("timm/layers/blur_pool.py", "path", "timm.layers.blur_pool"),
        ("timm/layers/__init__.py", "path", "timm.layers"),
        ("src/pkg/mod.py", "package", "pkg.mod"),
        ("src/pkg/__init__.py", "package", "pkg"),
        ("models/resnet.py", "package", "models.resnet"),
        ("train.py", "package", "train"),
    ],
)
def test_module_names(path: str, style: str, expected: str) -> None:
    assert module_names([path], style, frozenset({"src/pkg", "timm", "timm/layers"}))[path] == expected


def test_two_package_chains_of_one_name_are_named_from_the_folders_above_them() -> None:
    """Overlays for two toolboxes (``seg/mmseg/models/backbones``, ``det/mmdet/models/backbones``)
    would both be ``backbones``: each chain is named from the folders above it until they differ,
    every file of a chain alike; a chain whose name is its own keeps it."""
    paths = ["seg/mmseg/models/backbones/__init__.py", "seg/mmseg/models/backbones/net.py",
             "det/mmdet/models/backbones/__init__.py", "det/mmdet/models/backbones/net.py",
             "tools/heads/__init__.py", "tools/heads/fpn.py", "train.py"]
    packages = frozenset({"seg/mmseg/models/backbones", "det/mmdet/models/backbones", "tools/heads"})
    assert module_names(paths, "package", packages) == {
        "seg/mmseg/models/backbones/__init__.py": "mmseg.models.backbones",
        "seg/mmseg/models/backbones/net.py": "mmseg.models.backbones.net",
        "det/mmdet/models/backbones/__init__.py": "mmdet.models.backbones",
        "det/mmdet/models/backbones/net.py": "mmdet.models.backbones.net",
        "tools/heads/__init__.py": "heads", "tools/heads/fpn.py": "heads.fpn", "train.py": "train"}


@pytest.mark.parametrize(
    ("include", "exclude", "path", "kept"),
    [
        ((), ("tests",), "pkg/tests/test_x.py", False),
        ((), ("tests",), "pkg/mod.py", True),
        (("torch/nn",), (), "torch/nn/modules/conv.py", True),
        (("torch/nn/**",), (), "torch/nn/modules/conv.py", True),
        (("torch/nn",), (), "torch/optim/sgd.py", False),
        (("timm/layers/*.py",), (), "timm/layers/x.py", True),
        (("timm/layers/*.py",), (), "timm/layers/sub/x.py", False),
        ((), ("**/_builder.py",), "timm/models/_builder.py", False),
    ],
)
def test_path_filters(include: tuple[str, ...], exclude: tuple[str, ...], path: str, kept: bool) -> None:
    assert PathFilter(include, exclude).keeps(path) is kept


def test_git_source_clone_update_and_offline(git_repo: Path, home: Path) -> None:
    url = f"git+file://{git_repo}"
    report = nnrag.index([url], home=home)
    (src,) = report.sources
    assert src.name == "layers" and src.license == "MIT"
    assert src.commit == _git(git_repo, "rev-parse", "HEAD")
    clone = Path(nnrag.sources(home=home)[0].root)
    assert clone.is_relative_to(home / "cache" / "git")
    # code, and the texts the usage harvest reads beside it; no data
    assert (clone / "README.md").exists() and (clone / "configs" / "model.yaml").exists()
    assert not (clone / "weights.bin").exists()
    # a clone made when only Python was checked out gets the rest on its next update
    _git(clone, "sparse-checkout", "set", "--no-cone", "/**/*.py")
    assert not (clone / "README.md").exists()
    nnrag.index([url], home=home)
    assert (clone / "README.md").exists()
    assert [b.name for b in nnrag.blocks(home=home)] == ["LayerA"]

    (git_repo / "layers" / "b.py").write_text(LAYER.format(name="LayerB"))
    _git(git_repo, "add", "-A")
    _git(git_repo, "commit", "-qm", "two")
    updated = nnrag.index([url], home=home)
    assert updated.sources[0].commit == _git(git_repo, "rev-parse", "HEAD")
    assert (updated.parsed, updated.unchanged) == (1, 2)
    assert {b.name for b in nnrag.blocks(home=home)} == {"LayerA", "LayerB"}

    # The remote goes away (as offline): the existing clone is used as is, and the run says so.
    git_repo.rename(git_repo.with_name("gone"))
    offline = nnrag.index([url], home=home)
    assert "using existing clone" in (offline.sources[0].note or "")
    assert offline.blocks == 2


def test_a_git_clone_holds_the_compiled_sources_that_make_an_import_an_extension(tmp_path: Path, home: Path) -> None:
    """``from . import deform_conv_ext`` beside ``src/deform_conv.cu``: an extension module its setup
    compiles. The clone checks out the C++ and CUDA sources (not the data), so the import is a
    native extension that stands in until called, not a name the source lacks; and the JSON
    settings files models read their sizes from, not other JSON."""
    repo = tmp_path / "origin" / "restore"
    (repo / "restore" / "ops" / "src").mkdir(parents=True)
    (repo / "restore" / "__init__.py").write_text("")
    (repo / "restore" / "ops" / "__init__.py").write_text("")
    (repo / "restore" / "ops" / "src" / "deform_conv_cuda.cu").write_text("// the kernel\n")
    (repo / "restore" / "ops" / "deform.py").write_text(
        "import torch\nimport torch.nn as nn\n\nfrom . import deform_conv_ext\n\n\n"
        "class DeformConv(nn.Module):\n    def forward(self, x):\n        return deform_conv_ext.forward(x)\n\n\n"
        "class Shift(nn.Module):\n    def forward(self, x):\n        return torch.roll(x, 1, -1)\n")
    (repo / "sample.png").write_bytes(b"\0" * 64)
    (repo / "configs").mkdir()
    (repo / "configs" / "base_22khz.json").write_text('{"num_mels": 80}')  # settings a model reads its sizes from
    (repo / "config_v1.json").write_text('{"num_mels": 80}')
    (repo / "annotations.json").write_text("[]")  # data: left out
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    nnrag.index([f"git+file://{repo}"], home=home)
    clone = Path(nnrag.sources(home=home)[0].root)
    assert (clone / "restore" / "ops" / "src" / "deform_conv_cuda.cu").exists() and not (clone / "sample.png").exists()
    assert (clone / "configs" / "base_22khz.json").exists() and (clone / "config_v1.json").exists()
    assert not (clone / "annotations.json").exists()
    deform = nnrag.extract("restore.ops.deform.DeformConv", home=home)
    assert [i.code for i in deform.issues] == ["native-extension"], deform.issues
    assert nnrag.extract("restore.ops.deform.Shift", home=home).ok


def test_git_source_unreachable_without_clone(tmp_path: Path, home: Path) -> None:
    with pytest.raises(nnrag.SourceError, match="cannot clone"):
        nnrag.index([f"git+file://{tmp_path}/missing"], home=home)


def _wheel(folder: Path, name: str = "fixturepkg", version: str = "1.0", license_file: str | None = None) -> Path:
    files = {f"{name}/__init__.py": "from .layers import WheelLayer\n", f"{name}/layers.py": LAYER.format(name="WheelLayer")}
    if license_file is None:
        return write_wheel(folder, name, files, version, "License: BSD-3-Clause\n")
    # the metadata names no license; the file in dist-info does
    files[f"{name}-{version}.dist-info/licenses/LICENSE"] = license_file
    return write_wheel(folder, name, files, version, "License-File: LICENSE\n", metadata_version="2.4")


def test_pypi_source_downloads_and_unpacks_never_installs(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = tmp_path / "wheels"
    _wheel(wheels)
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {wheels}")
    report = nnrag.index(["pypi:fixturepkg==1.0"], home=home)
    (src,) = report.sources
    assert (src.name, src.version, src.license) == ("fixturepkg", "1.0", "BSD-3-Clause")
    (block,) = nnrag.blocks(home=home)
    assert block.qualname == "fixturepkg.layers.WheelLayer"
    with pytest.raises(ImportError):
        __import__("fixturepkg")
    # A second run uses the cached download, even with the index unreachable.
    monkeypatch.setenv("NNRAG_PIP_ARGS", "--no-index")
    assert "cached" in (nnrag.index(["pypi:fixturepkg==1.0"], home=home).sources[0].note or "")


def test_a_moved_home_reuses_what_it_extracted_from_its_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A download lives in the home's cache, so a copied or moved home finds it under another
    root. The block's file does not depend on where that is: the copy extracts nothing again."""
    wheels = tmp_path / "wheels"
    _wheel(wheels)
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {wheels}")
    first = nnrag.build(["pypi:fixturepkg==1.0"], home=tmp_path / "home", limits=search_limits(), search=False,
                        harvest=False)
    assert (first.extracted, first.passed) == (1, 1)
    shutil.copytree(tmp_path / "home", tmp_path / "moved")
    shutil.rmtree(tmp_path / "home")
    monkeypatch.setenv("NNRAG_PIP_ARGS", "--no-index")
    again = nnrag.build(["pypi:fixturepkg==1.0"], home=tmp_path / "moved", limits=search_limits(), search=False,
                        harvest=False)
    assert (again.extracted, again.cached, again.passed) == (0, 1, 1)


def test_a_wheel_without_license_metadata_takes_it_from_its_license_file(tmp_path: Path, home: Path) -> None:
    wheel = _wheel(tmp_path / "w", name="licpkg", version="0.3", license_file="MIT License\n\nPermission is hereby granted...")
    (src,) = nnrag.index([str(wheel)], home=home).sources
    assert src.license == "MIT"


def test_pypi_source_missing_package(home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NNRAG_PIP_ARGS", f"--no-index --find-links {tmp_path}")
    with pytest.raises(nnrag.SourceError, match="cannot download 'nosuchpkg==1'"):
        nnrag.index(["pypi:nosuchpkg==1"], home=home)


def test_archive_source(tmp_path: Path, home: Path) -> None:
    wheel = _wheel(tmp_path / "w", name="archpkg", version="2.1")
    report = nnrag.index([str(wheel)], home=home)
    assert (report.sources[0].name, report.sources[0].version) == ("archpkg", "2.1")
    assert [b.qualname for b in nnrag.blocks(home=home)] == ["archpkg.layers.WheelLayer"]
    # everyone may read the unpacked source: a root build's gate imports it as the user nobody
    (unpacked,) = (home / "cache").rglob("archpkg-2.1-py3-none-any.whl-*")
    assert unpacked.stat().st_mode & 0o777 == 0o755
    unpacked.chmod(0o700)  # unpacked by an earlier release: repaired when the source is read again
    nnrag.index([str(wheel)], home=home)
    assert unpacked.stat().st_mode & 0o777 == 0o755


def test_dist_source_missing(home: Path) -> None:
    with pytest.raises(nnrag.SourceError, match="not installed"):
        nnrag.index(["dist:no-such-distribution-here"], home=home)


def test_toml_corpus(forms_repo: Path, tmp_path: Path, home: Path) -> None:
    corpus = tmp_path / "corpus.toml"
    corpus.write_text(
        f"""
[[source]]
spec = "{forms_repo}"
name = "forms"
priority = 2
include = ["pkg/blocks", "pkg/base.py", "pkg/layers", "pkg/__init__.py"]
exclude = ["broken_star.py"]
symbols = ["*Child"]
"""
    )
    (spec,) = load_corpus(corpus)
    assert (spec.name, spec.priority, spec.symbols) == ("forms", 2, ("*Child",))
    nnrag.index(corpus=corpus, home=home)
    names = {b.name for b in nnrag.blocks(home=home)}
    assert names == {
        "RelativeChild", "AliasedChild", "ModuleAttrChild", "DottedChild", "DottedAliasChild",
        "StarChild", "ReexportChild", "ConditionalChild", "AliasAssignChild",
    }


def test_nnrag_json_corpus(git_repo: Path, tmp_path: Path, home: Path) -> None:
    corpus = tmp_path / "repo_config.json"
    corpus.write_text(json.dumps({"owner/layers": {"url": f"file://{git_repo}", "priority": 1, "paths": ["layers"]}}))
    (spec,) = load_corpus(corpus)
    assert (spec.kind, spec.name, spec.include) == ("git", "layers", ("layers",))
    nnrag.index(corpus=corpus, home=home)
    assert [b.name for b in nnrag.blocks(home=home)] == ["LayerA"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[source]]\nname = 'x'\n", "needs spec"),
        ("[[source]]\nspec = '.'\ncolour = 'red'\n", "unknown keys"),
        ("[[source]\nspec = '.'\n", "invalid TOML"),
        ("title = 'no sources'\n", "expected one or more"),
    ],
)
def test_broken_corpus_files(tmp_path: Path, text: str, message: str) -> None:
    corpus = tmp_path / "c.toml"
    corpus.write_text(text)
    with pytest.raises(nnrag.ConfigError, match=message):
        load_corpus(corpus)


def test_refresh_all_keeps_each_sources_settings(git_repo: Path, forms_repo: Path, home: Path) -> None:
    nnrag.index([parse_source(str(forms_repo), symbols=("*Child",), priority=3)], home=home)
    nnrag.index([f"git+file://{git_repo}"], home=home)
    (git_repo / "layers" / "b.py").write_text(LAYER.format(name="LayerB"))
    _git(git_repo, "add", "-A")
    _git(git_repo, "commit", "-qm", "two")
    report = nnrag.index(home=home, refresh_all=True)
    assert {s.name for s in report.sources} == {"forms_repo", "layers"}
    assert {b.name for b in nnrag.blocks(source="layers", home=home)} == {"LayerA", "LayerB"}
    assert len(nnrag.blocks(source="forms_repo", home=home)) == 10  # symbols filter kept
    assert next(s for s in nnrag.sources(home=home) if s.name == "forms_repo").priority == 3
