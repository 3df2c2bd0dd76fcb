"""Dependency closure and assembly on the closure fixture repository: the exact closure of each case."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import nnrag
from conftest import FIXTURES

TORCH_NN = "import torch.nn as nn"

# block -> (top-level definitions in output order, import statements, extra checks on the text)
CASES: dict[str, tuple[list[str], set[str], list[str]]] = {
    # same-module function and constant, through a function body
    "SameModule": (["SCALE", "_hidden", "SameModule"], {TORCH_NN}, []),
    # absolute import, module alias (import cpkg.helpers as hp; hp.make_divisible), aliased from-import
    "AbsoluteAndAlias": (
        ["DEFAULT_EPS", "make_divisible", "AbsoluteAndAlias"],
        {TORCH_NN},
        ["make_divisible(dim) + make_divisible(dim, 4)", "self.eps = DEFAULT_EPS"],
    ),
    # module alias used as attribute: from . import helpers as H; H.make_divisible
    "ModuleAttr": (["make_divisible", "ModuleAttr"], {TORCH_NN}, ["nn.Linear(dim, make_divisible(dim))"]),
    # a string annotation naming what its module does not define costs nothing
    "StaleAnnotation": (["make_divisible", "StaleAnnotation"], {TORCH_NN}, ["-> H.RemovedLongAgo:"]),
    # star import through a package __init__ with __all__, base class from it
    "StarAndBase": (["LayerNorm2d", "StarAndBase"], {TORCH_NN}, []),
    # re-export in cpkg/__init__.py, aliased on import
    "Reexport": (["make_divisible", "Reexport"], {TORCH_NN}, ["nn.Linear(dim, make_divisible(dim))"]),
    # decorator, default arguments (a call and a dict), module-level assignment built from a function
    "Decorated": (
        ["WIDTHS", "_ntuple", "to_2tuple", "register", "Decorated"],
        {TORCH_NN, "import collections.abc", "from itertools import repeat", "from torch import Tensor"},
        ["@register\nclass Decorated"],
    ),
    # class attributes: a try/except ImportError import, a registry filled in place, an aliased re-export
    "ClassAttr": (
        ["Norm", "_ACT_LAYERS", "get_act", "ClassAttr"],
        {TORCH_NN},
        ["try:\n    from torch.nn import RMSNorm as Norm\nexcept ImportError:", '_ACT_LAYERS["gelu"] = nn.GELU',
         "acts = [get_act(n) for n in"],
    ),
    # a TYPE_CHECKING import used only in a string annotation is not copied
    "TypeOnly": (["TypeOnly"], {TORCH_NN, "import torch"}, []),
    # a class of the source only the block's own string annotations name (its dataclass config)
    "Configured": (["BlockConfig", "Configured"], {TORCH_NN, "from dataclasses import dataclass", "from torch import Tensor"},
                   ["    width: int = 8"]),
    # two helpers named _ntuple from different modules: both kept, one renamed everywhere
    "Collide": (
        ["_ntuple_helpers", "to_2tuple", "_ntuple", "triple", "Collide"],
        {TORCH_NN, "import collections.abc", "from itertools import repeat"},
        ["def _ntuple_helpers(n):", "to_2tuple = _ntuple_helpers(2)", "return _ntuple(3)(x)"],
    ),
    # an import cycle between two modules terminates
    "Cyclic": (["pong", "ping", "Cyclic"], {TORCH_NN}, ["return ping(n - 1)", "else pong(n - 1)"]),
    # a relative import inside a method becomes a binding of the copied definition
    "LazyImport": (["make_divisible", "LazyImport"], {TORCH_NN}, ["        md = make_divisible\n"]),
    # class-body comprehension sees module names; a local of the same name does not pull anything
    "Scoping": (["SCALE", "WIDTHS", "Scoping"], {TORCH_NN}, []),
    # an annotation evaluated at definition time (no __future__ import in that module)
    "RuntimeAnnotation": (["RuntimeAnnotation"], {TORCH_NN, "from builtins import tuple as Size2"}, []),
}


def _layout(code: str) -> tuple[list[str], set[str]]:
    tree = ast.parse(code)
    defs: list[str] = []
    imports: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                imports.add(ast.unparse(node))
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defs.append(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            defs.append(node.targets[0].id)
        elif isinstance(node, ast.Try):
            defs.append(node.body[0].names[0].asname)  # type: ignore[attr-defined]
    return [d for i, d in enumerate(defs) if d not in defs[:i]], imports


@pytest.fixture(scope="module")
def closure_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    repo = tmp_path_factory.mktemp("src") / "closure_repo"
    shutil.copytree(FIXTURES / "closure_repo", repo)
    nnrag.index([str(repo)], home=home)
    return home


@pytest.mark.parametrize("block", sorted(CASES))
def test_closure_is_exact(closure_home: Path, block: str) -> None:
    result = nnrag.extract(block, home=closure_home)
    assert result.ok, result.issues
    defs, imports = _layout(result.code)
    want_defs, want_imports, snippets = CASES[block]
    assert defs == want_defs
    assert imports == want_imports
    for snippet in snippets:
        assert snippet in result.code
    assert [r.split("==")[0] for r in result.requirements] == ["torch"]
    assert "def unused_helper" not in result.code
    assert "NotExported" not in result.code


def test_output_is_deterministic_with_provenance(closure_home: Path) -> None:
    first = nnrag.extract("Collide", home=closure_home).code
    second = nnrag.extract("cpkg.blocks.Collide", home=closure_home).code
    assert first == second
    header = first.split("\nfrom __future__")[0]
    assert "# nnrag block: closure_repo:cpkg.blocks.Collide" in header
    assert "cpkg/helpers.py  sha1:" in header and "cpkg/other/helpers.py  sha1:" in header
    assert f"nnrag {nnrag.__version__}" in header


def test_modules_evicted_between_blocks_are_parsed_again_to_the_same_files(
        closure_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An extractor keeps a bounded number of parsed modules from one block to the next; one
    that keeps a single module makes every file exactly as one that keeps them all."""
    from nnrag.db import connect
    from nnrag.extraction import parsed
    from nnrag.extraction.block import Extractors
    from nnrag.indexing.lookup import resolve_block
    from nnrag.workspace import Workspace

    def files(keep: int) -> tuple[list[str], int]:
        monkeypatch.setattr(parsed, "KEEP_MODULES", keep)
        with connect(Workspace.resolve(closure_home)) as db:
            extractors = Extractors(db.conn)
            made = [extractors.extract(resolve_block(db.conn, block, None))[1] for block in sorted(CASES) * 2]
            held = len(next(iter(extractors._by_source.values()))[0]._units)
        return [a.code if a else "" for a in made], held

    everything, held_all = files(1000)
    one, held_one = files(1)
    assert held_one < held_all, (held_one, held_all)  # modules were dropped between blocks
    assert one == everything and all(everything)


def test_blocks_extracted_on_several_processes_are_the_files_one_process_makes(
        closure_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build extracts on one process per CPU, a source's blocks in runs; the files, their
    order and the issues of a block that cannot be extracted are those of one process."""
    from nnrag.db import connect
    from nnrag.extraction import many
    from nnrag.indexing.lookup import BlockRef, resolve_block
    from nnrag.workspace import Workspace

    monkeypatch.setattr(many, "_RUN", 2)  # runs of two blocks: the few fixture blocks make several runs
    workspace = Workspace.resolve(closure_home)
    with connect(workspace) as db:
        refs = [resolve_block(db.conn, block, None) for block in sorted(CASES)] * 2
        refs.append(BlockRef(refs[0].source, "cpkg.missing", "Gone", "layer"))  # its module is not indexed
        one = list(many.extract_many(db.conn, workspace, refs, processes=1))
        two = list(many.extract_many(db.conn, workspace, refs, processes=2))
    assert len(one) == len(refs) >= 4 * many._RUN
    assert [x.ref for x in two] == refs
    assert [x.assembled.code if x.assembled else "" for x in two] == [x.assembled.code if x.assembled else "" for x in one]
    assert all(x.assembled for x in one[:-1]) and one[-1].assembled is None
    assert two[-1].issues and [i.code for i in two[-1].issues] == [i.code for i in one[-1].issues]
    assert [x.files for x in two] == [x.files for x in one]
    # processes that cannot start (here: they open a home with no index) leave the blocks to this one
    with connect(workspace) as db:
        alone = list(many.extract_many(db.conn, Workspace.resolve(tmp_path), refs, processes=2))
    assert [x.assembled.code if x.assembled else "" for x in alone] == [x.assembled.code if x.assembled else "" for x in one]


def test_unresolved_name_and_native_extension_are_structured_errors(tmp_path: Path) -> None:
    repo = tmp_path / "failing_repo"
    shutil.copytree(FIXTURES / "failing_repo", repo)
    home = tmp_path / "home"
    nnrag.index([str(repo)], home=home)
    # a name bound nowhere that only forward uses is left free, as the original leaves it, and reported
    unresolved = nnrag.extract("UnresolvedName", home=home)
    assert unresolved.ok and "return undefined_thing(x)" in unresolved.code
    (issue,) = unresolved.free
    assert (issue.code, issue.name, issue.path, issue.line) == ("unresolved-name", "undefined_thing", "fpkg/missing.py", 12)
    # one the module needs when it is imported is an error
    (issue,) = nnrag.extract("ImportTimeName", home=home).issues
    assert (issue.code, issue.name, issue.path, issue.line) == ("unresolved-name", "undefined_at_import", "fpkg/missing.py", 16)
    native = nnrag.extract("NativeBlock", home=home)
    assert [i.code for i in native.issues] == ["native-extension"]
    assert "fpkg._native" in native.issues[0].message


def test_ambiguous_and_unknown_names(closure_home: Path, tmp_path: Path) -> None:
    with pytest.raises(nnrag.NotFoundError, match="no block named"):
        nnrag.extract("NoSuchBlock", home=closure_home)
    other = tmp_path / "copy"
    shutil.copytree(FIXTURES / "closure_repo", other)
    nnrag.index([str(other)], home=closure_home)
    try:
        with pytest.raises(nnrag.NotFoundError, match="matches 2 blocks"):
            nnrag.extract("SameModule", home=closure_home)
        assert nnrag.extract("SameModule", source="copy", home=closure_home).block_id == "copy:cpkg.blocks.SameModule"
    finally:
        nnrag.forget("copy", home=closure_home)


def test_a_module_in_a_declared_encoding_is_copied_as_its_text(tmp_path: Path) -> None:
    """A file declaring latin-1 (PEP 263) is indexed in that encoding; its block is copied the same way."""
    repo = tmp_path / "repo" / "encpkg"
    repo.mkdir(parents=True)
    (repo / "__init__.py").write_text("")
    (repo / "blocks.py").write_bytes(
        "# -*- coding: latin-1 -*-\nfrom torch import nn\n\nLABEL = 'caf\xe9'\n\n\n"
        "class Labelled(nn.Module):\n    def forward(self, x):\n        return x if LABEL else -x\n".encode("latin-1"))
    home = tmp_path / "home"
    nnrag.index([str(tmp_path / "repo")], home=home)
    code = nnrag.extract("Labelled", home=home).code
    assert "LABEL = 'caf\xe9'" in code


def test_the_extraction_key_follows_the_sources_a_block_can_draw_on(tmp_path: Path) -> None:
    """Each source's key covers its files and those of the sources lending it a package it imports:
    a change to an unrelated source leaves it, a change to its lender does not."""
    from nnrag.db import connect
    from nnrag.extraction.key import extraction_keys
    from nnrag.workspace import Workspace

    repos = {name: tmp_path / name for name in ("closure_repo", "lender_repo", "borrower_repo")}
    for name, path in repos.items():
        shutil.copytree(FIXTURES / name, path)
    home = tmp_path / "home"
    nnrag.index([str(p) for p in repos.values()], home=home)

    def keys(prefer: str = "installed") -> dict[str, str]:
        with connect(Workspace.resolve(home)) as db:
            return extraction_keys(db.conn, prefer)

    first = keys()
    assert set(first) == set(repos) and keys() == first
    assert all(keys("corpus")[s] != first[s] for s in repos)
    helper = next(repos["closure_repo"].rglob("helpers.py"))
    helper.write_text(helper.read_text() + "\nEXTRA = 1\n")  # any file of the source, used or not
    nnrag.index([str(p) for p in repos.values()], home=home)
    second = keys()
    assert second["closure_repo"] != first["closure_repo"]
    assert (second["lender_repo"], second["borrower_repo"]) == (first["lender_repo"], first["borrower_repo"])
    ops = repos["lender_repo"] / "baselib" / "ops.py"
    ops.write_text(ops.read_text() + "\nEXTRA = 1\n")
    nnrag.index([str(p) for p in repos.values()], home=home)
    third = keys()
    assert third["lender_repo"] != second["lender_repo"] and third["borrower_repo"] != second["borrower_repo"]
    assert third["closure_repo"] == second["closure_repo"]


def test_a_folder_the_repository_puts_on_sys_path_names_its_modules_too(tmp_path: Path) -> None:
    """``lib/`` is on sys.path when the repository's tools run (``_init_paths.py``), so its code
    writes ``from config import config`` for ``lib/config`` while ``hubconf.py`` names the same
    module ``lib.config``: both mean the module of the source, never a distribution named ``config``."""
    import torch

    repo = tmp_path / "pathroot_repo"
    shutil.copytree(FIXTURES / "pathroot_repo", repo)
    home = tmp_path / "home"
    nnrag.index([str(repo)], home=home)
    for block, used in (("PathNet", 'nn.Linear(config["width"], config["classes"])'),
                        ("PathLoss", 'self.weight = config["classes"]')):
        result = nnrag.extract(block, home=home)
        assert result.ok, result.issues
        assert [r.split("==")[0] for r in result.requirements] == ["torch"], result.requirements
        assert 'config = {"width": 8, "classes": 3}' in result.code and used in result.code
        namespace: dict[str, object] = {}
        exec(compile(result.code, block, "exec"), namespace)  # the fixture's own code, trusted here
        assert isinstance(namespace[block](), torch.nn.Module)  # type: ignore[operator]
