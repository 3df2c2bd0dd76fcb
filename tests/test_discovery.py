"""Discovery over the import-forms fixture: the exact set of blocks, and why others are not."""

from __future__ import annotations

from pathlib import Path

import pytest

import nnrag
from nnrag.indexing.parse import parse_bytes
from nnrag.indexing.resolve import absolute_module

EXPECTED_BLOCKS = {
    # pkg/abstract.py
    "pkg.abstract.ConcreteFromAbstract",  # implements an abstract forward
    "pkg.abstract.Diamond",  # C3 MRO finds DiamondRight.forward before the abstract one
    "pkg.abstract.DiamondRight",
    "pkg.abstract.ForwardAssigned",  # forward = function
    "pkg.abstract.ImplementsExtra",  # implements the last abstract method
    "pkg.abstract.SequentialChild",  # nn.Sequential has a forward
    "pkg.abstract.CheckedNorm2d",  # implements the check its base's forward calls
    "pkg.abstract.OwnForward",  # its own forward does not call the base's stub
    "pkg.abstract.ModeDispatch",  # calls its stub in one branch only
    "pkg.abstract.HookedFlip",  # implements the hook its bases' forward reaches through two calls
    "pkg.abstract.OptionalHook",  # its stubs are never called, or only where NotImplementedError is caught
    "pkg.abstract.PassingBase",  # abstract methods without ABCMeta are optional hooks
    "pkg.abstract.PassingConv",  # inherits those hooks and never calls them
    # pkg/base.py, pkg/layers/core.py, pkg/blocks/conv.py
    "pkg.base.WithForward",
    "pkg.layers.core.StarBase",
    "pkg.layers.core._Hidden",
    "pkg.blocks.conv.ConvBlock",  # forward inherited from torch.nn.Conv2d (external)
    # pkg/blocks/forms.py: one class per import form
    "pkg.blocks.forms.RelativeChild",  # from ..base import WithForward; forward from another file
    "pkg.blocks.forms.AliasedChild",  # from pkg.base import Base as AliasedBase
    "pkg.blocks.forms.ModuleAttrChild",  # from .. import base as base_mod; base_mod.WithForward
    "pkg.blocks.forms.DottedChild",  # import pkg.layers.core; pkg.layers.core.StarBase
    "pkg.blocks.forms.DottedAliasChild",  # import pkg.layers.core as core_alias
    "pkg.blocks.forms.StarChild",  # from pkg import * -> pkg: from .layers import * -> __all__
    "pkg.blocks.forms.ReexportChild",  # re-export with alias in pkg/__init__.py
    "pkg.blocks.forms.ConditionalChild",  # try: from torch.nn import RMSNorm as Norm
    "pkg.blocks.forms.AliasAssignChild",  # Alias = WithForward
    "pkg.blocks.forms.Outer",
    "pkg.blocks.forms.Outer.Inner",  # nested class
    "pkg.blocks.broken_star.ViaStar",
}

NOT_BLOCKS = {
    "pkg.base.Base": "Module without forward",
    "pkg.abstract.AbstractForward": "abstract forward",
    "pkg.abstract.NotImplementedForward": "forward only raises NotImplementedError",
    "pkg.abstract.StillAbstract": "an abstract method is left",
    "pkg.abstract.CheckedNorm": "forward calls a method that only raises NotImplementedError",
    "pkg.abstract.HookBase": "forward reaches a hook bound to a module stub through another method",
    "pkg.abstract.HookMiddle": "the inherited forward reaches a stub through methods of the subclass",
    "pkg.abstract.ListOnly": "nn.ModuleList has no forward",
    "pkg.abstract.DiamondLeft": "inherits only the abstract forward",
    "pkg.abstract.NotAModule": "not an nn.Module",
    "pkg.abstract.TypeOnly": "defined under `if TYPE_CHECKING:`, so it never exists at run time",
    "pkg.abstract.ReachesHook": "forward calls an unimplemented abstract method",
    "pkg.abstract.MetaAbstract": "an abstract method is left under ABCMeta",
    "pkg.blocks.forms.AliasedNoForward": "Module without forward",
    "pkg.blocks.forms.Plain": "not an nn.Module",
    "pkg.blocks.broken_star.NotViaStar": "private name not bound by a star import",
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    nnrag.index([str(Path(__file__).parent / "fixtures" / "forms_repo")], home=home)
    return home


def test_exact_blocks(indexed: Path) -> None:
    found = {b.qualname for b in nnrag.blocks(home=indexed)}
    assert found == EXPECTED_BLOCKS
    assert not found & set(NOT_BLOCKS)


def test_block_records(indexed: Path) -> None:
    (child,) = nnrag.blocks("RelativeChild", home=indexed)
    assert child.source == "forms_repo"
    assert child.path == "pkg/blocks/forms.py"
    assert child.id == "forms_repo:pkg.blocks.forms.RelativeChild"
    assert child.bases == ("pkg.blocks.forms.RelativeChild", "pkg.base.WithForward", "torch.nn.Module")
    (conv,) = nnrag.blocks("ConvBlock", home=indexed)
    assert conv.bases == ("pkg.blocks.conv.ConvBlock", "torch.nn.Conv2d", "torch.nn.Module")
    assert conv.category == "convolution"
    (star,) = nnrag.blocks("StarChild", home=indexed)
    assert star.bases[1] == "pkg.layers.core.StarBase"
    assert star.line == len(
        (Path(__file__).parent / "fixtures/forms_repo/pkg/blocks/forms.py").read_text().split("class StarChild")[0].splitlines()
    ) + 1


def test_patterns_and_filters(indexed: Path) -> None:
    assert {b.name for b in nnrag.blocks("Diamond*", home=indexed)} == {"Diamond", "DiamondRight"}
    assert {b.name for b in nnrag.blocks("forms_repo/diamond", home=indexed)} == {"Diamond"}
    assert nnrag.blocks("other/Diamond", home=indexed) == []
    assert all(b.category == "convolution" for b in nnrag.blocks(category="convolution", home=indexed))
    with pytest.raises(nnrag.NotFoundError, match="no source named 'nope'"):
        nnrag.blocks(source="nope", home=indexed)


def test_matches_runtime_introspection(indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python itself agrees with static discovery on every importable module of the fixture."""
    from nnrag.evals.check_discovery import runtime_blocks
    from nnrag.sourcing.globs import PathFilter

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures" / "forms_repo"))
    runtime, failed = runtime_blocks("pkg", PathFilter())
    assert failed == ["pkg.blocks.broken_star"]  # NameError: _Hidden, as static discovery says
    static = {q for q in EXPECTED_BLOCKS if not q.startswith("pkg.blocks.broken_star")}
    assert runtime == static


@pytest.mark.parametrize(
    ("current", "is_package", "level", "module", "expected"),
    [
        ("a.b.c", False, 1, "d", "a.b.d"),
        ("a.b.c", False, 2, "d", "a.d"),
        ("a.b.c", False, 1, None, "a.b"),
        ("a.b", True, 1, "d", "a.b.d"),
        ("a.b", True, 2, None, "a"),
        ("x", False, 0, "torch.nn", "torch.nn"),
    ],
)
def test_relative_imports(current: str, is_package: bool, level: int, module: str | None, expected: str) -> None:
    assert absolute_module(current, is_package, level, module) == expected


def test_import_records_every_form() -> None:
    source = b"""
import a.b.c
import a.b as ab
from . import sibling as sib
from ..pkg import name as alias
from m import *
try:
    import fast
except ImportError:
    import slow as fast
if TYPE_CHECKING:
    from typing_only import T
if sys.version_info > (3, 10):
    from new import thing
class K:
    import inside_class
    def forward(self):
        import lazy
"""
    parsed = parse_bytes("f.py", source)
    rows = {(i.module, i.name, i.asname, i.level, i.cond, i.scope) for i in parsed.imports}
    assert rows == {
        ("a.b.c", None, None, 0, "", ""),
        ("a.b", None, "ab", 0, "", ""),
        (None, "sibling", "sib", 1, "", ""),
        ("pkg", "name", "alias", 2, "", ""),
        ("m", "*", None, 0, "", ""),
        ("fast", None, None, 0, "try", ""),
        ("slow", None, "fast", 0, "except", ""),
        ("typing_only", "T", None, 0, "type_checking", ""),
        ("new", "thing", None, 0, "if", ""),
        ("inside_class", None, None, 0, "", "K"),
        ("lazy", None, None, 0, "", "K.forward"),
    }


def test_definitions_record_bases_decorators_docstrings() -> None:
    parsed = parse_bytes(
        "f.py",
        b'@register("x")\nclass A(nn.Module, metaclass=ABCMeta):\n    """Doc."""\n    @abstractmethod\n    def forward(self):\n        ...\n',
    )
    (a,) = parsed.definitions
    assert (a.qualname, a.kind, a.bases, a.keywords, a.decorators, a.docstring) == (
        "A",
        "class",
        ["nn.Module"],
        {"metaclass": "ABCMeta"},
        ["register"],
        "Doc.",
    )
    assert (a.forward, a.abstract, a.lineno, a.end_lineno) == ("abstract", ["forward"], 2, 6)


def test_definitions_under_the_main_guard_are_not_the_modules() -> None:
    """What ``if __name__ == "__main__":`` defines never exists when the module is imported (a
    demo's mock layer): neither a block nor a name the closure could copy; its ``else`` does."""
    parsed = parse_bytes(
        "f.py",
        b"import torch\nclass A(nn.Module):\n    def forward(self, x):\n        return x\n"
        b"if __name__ == '__main__':\n    import numpy\n    class Mock(nn.Module):\n        def forward(self, x):\n"
        b"            return x\n    helper = 1\nelse:\n    other = 2\n"
        b"if '__main__' == __name__:\n    class Mock2(nn.Module):\n        pass\n",
    )
    assert [d.qualname for d in parsed.definitions] == ["A", "other"]
    assert [i.module for i in parsed.imports] == ["torch"]


def test_classes_of_a_template_that_a_generated_file_defines_are_not_blocks(tmp_path: Path) -> None:
    """A file generated from another says so in its header (transformers writes ``modeling_x.py``
    from ``modular_x.py``): the template's classes that the generated file defines are copies and
    are left out; a class only the template has stays a block."""
    folder = tmp_path / "gen" / "lib" / "models" / "x"
    folder.mkdir(parents=True)
    for package in (tmp_path / "gen" / "lib", tmp_path / "gen" / "lib" / "models", folder):
        (package / "__init__.py").write_text("")
    layer = "import torch.nn as nn\n\n\nclass {}(nn.Module):\n    def forward(self, x):\n        return x\n"
    (folder / "modular_x.py").write_text(layer.format("XLayer") + "\n\n" + layer.format("XOnlyHere").split("\n", 3)[3])
    (folder / "modeling_x.py").write_text("# This file was automatically generated from src/lib/models/x/modular_x.py.\n"
                                          "# Do NOT edit this file manually.\n" + layer.format("XLayer"))
    home = tmp_path / "home"
    nnrag.index([str(tmp_path / "gen")], home=home)
    assert {b.qualname for b in nnrag.blocks(home=home)} == {"lib.models.x.modeling_x.XLayer",
                                                            "lib.models.x.modular_x.XOnlyHere"}
    assert nnrag.stats(home=home).template_copies == 1
