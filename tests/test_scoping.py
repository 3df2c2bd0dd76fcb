"""Scoping cases as fixture strings with exact expectations (after LibCST's test_gather_imports):
which module-level names a statement needs and when (``scope``), what each top-level statement
binds (``units``), and the exact closure extraction copies for a block (``closure``)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import nnrag
from nnrag.extraction.scope import analyze
from nnrag.extraction.units import ModuleUnits

# name: (statement, `from __future__ import annotations` in force, early, late, soft)
SCOPE_CASES: dict[str, tuple[str, bool, set[str], set[str], set[str]]] = {
    "function body names are late": ("def f(x):\n    return helper(x) * SCALE\n", False, set(), {"helper", "SCALE"}, set()),
    "a local shadows the global": ("def f(x):\n    helper = 2\n    return helper * x\n", False, set(), set(), set()),
    "defaults and decorators are early": (
        "@register\ndef f(x=DEFAULT, *, act=make_act()):\n    return body(x)\n", False,
        {"register", "DEFAULT", "make_act"}, {"body"}, set()),
    "bases, keywords and class bodies are early, methods late": (
        "class A(Base, metaclass=Meta):\n    width = WIDTH\n    def forward(self, x):\n        return op(x)\n", False,
        {"Base", "Meta", "WIDTH"}, {"op"}, set()),
    "a class-body comprehension sees module names": (
        "class A:\n    sizes = [s * SCALE for s in BASE]\n", False, {"SCALE", "BASE"}, set(), set()),
    "comprehension variables are not globals": ("TOTAL = sum(i for i in range(N))\n", False, {"sum", "range", "N"}, set(), set()),
    "a walrus target inside a comprehension is not a need": (
        "FIRST = [y := f(x) for x in DATA]\n", False, {"f", "DATA"}, set(), set()),
    "nonlocal stays in the enclosing function": (
        "def outer():\n    n = 0\n    def inner():\n        nonlocal n\n        n += k\n    return inner\n", False,
        set(), {"k"}, set()),
    "lambda defaults are early, its body late": (
        "act = lambda x, s=SCALE: gelu(x) * s\n", False, {"SCALE"}, {"gelu"}, set()),
    "annotations run at definition without the future import": (
        "def f(x: Tensor) -> Size:\n    return x\n", False, {"Tensor", "Size"}, set(), set()),
    "annotations are soft under the future import": (
        "def f(x: Tensor) -> Size:\n    return x\n", True, set(), set(), {"Tensor", "Size"}),
    "an annotated class attribute: value early, annotation soft": (
        "class A:\n    size: Size2 = DEFAULT\n", True, {"DEFAULT"}, set(), {"Size2"}),
    "a class body reads a module name before binding its own": (
        "class A(G):\n    PARAMS = PARAMS\n    n += 1\n    x = 1\n    y = x\n    def f(self):\n        return Q\n"
        "    act = lambda v, s=SCALE: v * s\n    SCALE = 2\n", False,
        {"G", "PARAMS", "n", "SCALE"}, {"Q"}, set()),
    "a class body's read before binding is no annotation": (
        "class A:\n    PARAMS = PARAMS\n    size: Size2 = 1\n", True, {"PARAMS"}, set(), {"Size2"}),
    "a nested class body too, a method's local not": (
        "class A:\n    class Meta:\n        dtype = dtype\n    def f(self):\n        dtype = 1\n        return dtype\n", False,
        {"dtype"}, set(), set()),
    "a method's annotation reads the module name the method's own name shadows later": (
        "class Boxes:\n    def to(self, device: device) -> Boxes:\n        return self\n"
        "    @property\n    def device(self) -> device:\n        return 1\n", False,
        {"device", "Boxes", "property"}, set(), set()),
    "a class body's branch binds before it reads, statement by statement": (
        "class Cached:\n    if path.exists():\n        try:\n            old = read(path)\n        except Empty as e:\n"
        "            old = blank(e)\n        old = old[COLS]\n        del old\n    for i in range(2):\n        n = i\n"
        "    k = k\n", False,
        {"path", "read", "Empty", "blank", "COLS", "range", "k"}, set(), set()),
    "under the future import that annotation is a string": (
        "class Boxes:\n    @property\n    def device(self) -> device:\n        return 1\n", True,
        {"property"}, set(), set()),
}


@pytest.mark.parametrize("case", sorted(SCOPE_CASES))
def test_scope(case: str) -> None:
    text, future, early, late, soft = SCOPE_CASES[case]
    names = analyze(text, future)
    assert (set(names.early), set(names.late), set(names.soft)) == (early, late, soft)


def test_scope_global_augmented_in_a_function() -> None:
    # symtable records an augmented target as assigned only; it is read all the same
    assert set(analyze("def bump():\n    global COUNT\n    COUNT += 1\n").late) == {"COUNT"}
    assert set(analyze("def reset():\n    global COUNT\n    COUNT = 0\n").late) == set()  # binds, reads nothing


def test_scope_attribute_chains() -> None:
    names = analyze("def f():\n    return H.make_divisible(8) + H.x.y + F\n")
    assert set(names.late) == {"H", "F"}
    assert set(names.chains) == {"H.make_divisible", "H.x.y"}
    assert set(names.bare) == {"F"}  # H is used only as the root of chains


UNITS_MODULE = '''\
from __future__ import annotations
import torch.nn as nn
from .helpers import a, b as c
# a comment that belongs to the class
@dec
class A(nn.Module):
    pass
X, (Y, *Z) = 1, (2, 3, 4)
for i in range(3):
    K = i
with open(p) as fh:
    pass
try:
    import fast
except ImportError:
    fast = None
REG["a"] = A
REG.update(b=1)
if TYPE_CHECKING:
    from typing import Any
a = 1; b = 2
'''

# per top-level statement after the __future__ import: (first line, last line, binds, under TYPE_CHECKING, import)
UNITS_EXPECTED = [
    (2, 2, {"nn"}, False, True),
    (3, 3, {"a", "c"}, False, True),
    (4, 7, {"A"}, False, False),  # the comment above the decorator comes with the class
    (8, 8, {"X", "Y", "Z"}, False, False),
    (9, 10, {"i", "K"}, False, False),
    (11, 12, {"fh"}, False, False),
    (13, 16, {"fast"}, False, False),
    (17, 17, set(), False, False),
    (18, 18, set(), False, False),
    (19, 20, {"Any"}, True, False),
    (21, 21, {"a"}, False, False),
    (21, 21, {"b"}, False, False),
]


# binding forms beyond assignment and import: statement -> the names it binds at module level
BINDING_CASES: dict[str, tuple[str, set[str]]] = {
    "except as": ("try:\n    import torch_scatter\nexcept ImportError as e:\n    WHY = str(e)\n", {"torch_scatter", "e", "WHY"}),
    "with as, tuple target": ("with open(p) as (a, b):\n    pass\n", {"a", "b"}),
    "for target and body": ("for i, (k, v) in enumerate(D):\n    T = k\n", {"i", "k", "v", "T"}),
    "walrus in a comprehension": ("FIRST = [y := f(x) for x in DATA]\n", {"FIRST", "y"}),
    "walrus in an if": ("if (m := re.match(P, S)) is not None:\n    G = m.group(0)\n", {"m", "G"}),
    "walrus inside a lambda stays local": ("f = lambda x: (z := x)\n", {"f"}),
    "match captures": (
        "match CONFIG:\n    case {'act': act, **rest}:\n        A = act\n    case [first, *others] | (first, *others):\n"
        "        A = first\n    case Point(x=px) as point:\n        A = px\n",
        {"act", "rest", "first", "others", "px", "point", "A"}),
    "del binds nothing": ("del helper\n", set()),
}


@pytest.mark.parametrize("case", sorted(BINDING_CASES))
def test_binding_forms(case: str) -> None:
    text, binds = BINDING_CASES[case]
    (stmt,) = ModuleUnits("pkg.m", "pkg/m.py", text, is_package=False).stmts
    assert set(stmt.binds) == binds


def test_units_split_a_module_into_statements() -> None:
    mu = ModuleUnits("pkg.m", "pkg/m.py", UNITS_MODULE, is_package=False)
    assert mu.future == {"annotations"}
    got = [(s.start, s.end, set(s.binds), s.type_checking, s.is_import) for s in mu.stmts]
    assert got == UNITS_EXPECTED
    assert mu.mutators == {"REG": [7, 8]}  # registries filled in place come with the registry
    assert mu.text_of(2).startswith("# a comment that belongs to the class\n@dec\n")
    assert (mu.text_of(10), mu.text_of(11)) == ("a = 1\n", "b = 2\n")  # one line, two statements


def test_a_class_only_a_conditional_defines_is_lifted_once() -> None:
    lifted = "if OLD:\n    class A:\n        pass\ntry:\n    from x import B\nexcept ImportError:\n    class B:\n        pass\n"
    mu = ModuleUnits("m", "m.py", lifted, is_package=False)
    assert sorted(mu.lifted) == ["A", "B"] and mu.text_of(mu.lifted["B"]) == "class B:\n    pass\n"
    assert all(k < 2 for ks in mu.binders.values() for k in ks)  # never a binder of other statements
    kept = [  # rebound at the top level, defined in two branches, reading what its branch imports
        "if OLD:\n    class A:\n        pass\nA = wrap(A)\n",
        "if OLD:\n    class A:\n        pass\nelse:\n    class A:\n        x = 1\n",
        "if FAST:\n    from fast import op\n    class A:\n        f = op\n",
    ]
    for text in kept:
        assert ModuleUnits("m", "m.py", text, is_package=False).lifted == {}, text


# Closure cases: the files of a small package (dedented), the block, then exactly what its
# standalone file holds: top-level definitions in output order and import statements.
CLOSURE_CASES: dict[str, tuple[dict[str, str], str, list[str], set[str]]] = {
    # a class built by the name a string gives it, looked up in the module's globals (NVlabs' edm)
    "looked_up_in_globals": ({"m.py": """
        import torch.nn as nn
        class SongUNet(nn.Module):
            def forward(self, x):
                return x
        class Unused(nn.Module):
            def forward(self, x):
                return x
        class Precond(nn.Module):
            def __init__(self, model_type='SongUNet'):
                super().__init__()
                self.model = globals()[model_type]()
            def forward(self, x):
                return self.model(x)
        """}, "Precond", ["SongUNet", "Precond"], {"import torch.nn as nn"}),
    # a class imported into the module and evaluated by the name a config of another module gives
    # (BiRefNet's ``eval(self.config.dec_blk)``, RT-DETR's ``eval(block_type)``)
    "evaluated_by_a_configured_name": ({"blocks.py": """
        import torch.nn as nn
        class BasicDecBlk(nn.Module):
            def forward(self, x):
                return x
        class ResBlk(nn.Module):
            def forward(self, x):
                return x
        """, "config.py": """
        class Config:
            def __init__(self):
                self.dec_blk = ['BasicDecBlk', 'ResBlk'][0]
        """, "m.py": """
        import torch.nn as nn
        from .blocks import BasicDecBlk, ResBlk
        from .config import Config
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.config = Config()
                self.block = eval(self.config.dec_blk)()
            def forward(self, x):
                return self.block(x)
        """}, "Decoder", ["Config", "Decoder", "BasicDecBlk", "ResBlk"], {"import torch.nn as nn"}),
    "shadowed": ({"m.py": """
        import torch.nn as nn
        scale = 2.0
        def helper(x):
            return x
        class Shadowed(nn.Module):
            def forward(self, x):
                helper = lambda y: y * 3
                scale = 1.0
                return helper(x) * scale
        """}, "Shadowed", ["Shadowed"], {"import torch.nn as nn"}),
    "default_and_decorator": ({"m.py": """
        import torch.nn as nn
        REGISTRY = {}
        def register(cls):
            REGISTRY[cls.__name__] = cls
            return cls
        DIM = 8
        @register
        class Decorated(nn.Module):
            def __init__(self, dim=DIM):
                super().__init__()
                self.fc = nn.Linear(dim, dim)
            def forward(self, x):
                return self.fc(x)
        """}, "Decorated", ["REGISTRY", "register", "DIM", "Decorated"], {"import torch.nn as nn"}),
    "global_filled_by_a_function": ({"m.py": """
        import torch.nn as nn
        class Settings(dict):
            __getattr__ = dict.__getitem__
        cfg = Settings()
        def set_cfg(c):
            c["width"] = 4
        def unrelated(x):
            return x
        set_cfg(cfg)
        unrelated(3)
        class ReadsSettings(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(cfg.width, cfg.width)
            def forward(self, x):
                return self.fc(x)
        """}, "ReadsSettings", ["Settings", "cfg", "set_cfg", "", "ReadsSettings"], {"import torch.nn as nn"}),
    "free_name_in_a_branch_not_taken": ({"m.py": """
        import torch
        import torch.nn as nn
        class FreeName(nn.Module):
            flash = True
            def forward(self, q, k):
                if self.flash:
                    return torch.nn.functional.scaled_dot_product_attention(q, k, k)
                return einsum("b i d, b j d -> b i j", q, k)
        """}, "FreeName", ["FreeName"], {"import torch", "import torch.nn as nn"}),
    "star_with_all": ({"base.py": """
        import torch.nn as nn
        __all__ = ["Norm"]
        class Norm(nn.LayerNorm):
            pass
        class NotExported(nn.Module):
            def forward(self, x):
                return x
        """, "m.py": """
        from .base import *
        class Starred(Norm):
            def forward(self, x):
                return super().forward(x)
        """}, "Starred", ["Norm", "Starred"], {"import torch.nn as nn"}),
    "conditional_import": ({"m.py": """
        import torch.nn as nn
        try:
            from torch.nn import RMSNorm as Norm
        except ImportError:
            Norm = nn.LayerNorm
        class Conditional(nn.Module):
            def __init__(self, d=4):
                super().__init__()
                self.norm = Norm(d)
            def forward(self, x):
                return self.norm(x)
        """}, "Conditional", ["Norm", "Conditional"], {"import torch.nn as nn"}),
    "class_attribute_and_comprehension": ({"m.py": """
        import torch.nn as nn
        WIDTHS = (4, 8)
        SCALE = 2
        class Scoped(nn.Module):
            dims = [w * SCALE for w in WIDTHS]
            def forward(self, x):
                WIDTHS = None
                return x
        """}, "Scoped", ["WIDTHS", "SCALE", "Scoped"], {"import torch.nn as nn"}),
    # PyG's typing.py: a failed optional import is reported with the exception it caught
    "except_as": ({"m.py": """
        import warnings
        import torch.nn as nn
        try:
            import torch_scatter
            WITH_SCATTER = True
        except ImportError as e:
            warnings.warn(f"no torch_scatter: {e}")
            WITH_SCATTER = False
        class ExceptAs(nn.Module):
            def forward(self, x):
                return x * 2 if WITH_SCATTER else x
        """}, "ExceptAs", ["WITH_SCATTER,e,torch_scatter", "ExceptAs"], {"import torch.nn as nn", "import warnings"}),
    # torch_geometric.typing / edge_index: `e` bound by two try statements and a dict filled by
    # successive subscripts; each statement needs the earlier ones only (no cycle), so the class a
    # later NamedTuple annotates with at class creation still comes first
    "rebound_names": ({"m.py": """
        import warnings
        from typing import NamedTuple, Optional
        import torch.nn as nn
        try:
            import torch_scatter
            WITH_SCATTER = True
        except ImportError as e:
            warnings.warn(f"no torch_scatter: {e}")
            WITH_SCATTER = False
        try:
            import torch_sparse
            WITH_SPARSE = True
        except ImportError as e:
            warnings.warn(f"no torch_sparse: {e}")
            WITH_SPARSE = False
        urls = {}
        urls["a"] = "https://example.org/a.pt"
        urls["b"] = urls["a"].replace("a", "b")
        class Edge(nn.Module):
            def forward(self, x):
                return x if WITH_SCATTER or WITH_SPARSE else x * len(urls)
            def sort(self) -> 'SortReturn':
                return SortReturn(self, None)
        class SortReturn(NamedTuple):
            values: Edge
            indices: Optional[int]
        """}, "Edge", ["WITH_SCATTER,e,torch_scatter", "WITH_SPARSE,e,torch_sparse", "urls", "", "", "Edge", "SortReturn"],
        {"import torch.nn as nn", "import warnings", "from typing import NamedTuple", "from typing import Optional"}),
    # mmcv fills mmengine's MODELS registry by calls in its own modules: a copied module's statements
    # that fill a registry another module defines come along with the registry
    "foreign_registry": ({"reg.py": """
        class Registry(dict):
            def register(self, name, module):
                self[name] = module
        MODELS = Registry()
        def build(name):
            return MODELS[name]()
        """, "layers.py": """
        import torch.nn as nn
        from .reg import MODELS, build
        MODELS.register("relu", module=nn.ReLU)
        MODELS["gelu"] = nn.GELU
        for act in (nn.SiLU, nn.Tanh):
            MODELS.register(act.__name__, module=act)
        def make_act(name="relu"):
            return build(name)
        """, "m.py": """
        import torch.nn as nn
        from .layers import make_act
        class UsesRegistry(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = make_act()
                self.other = make_act("gelu")
                self.loop = make_act("SiLU")
            def forward(self, x):
                return self.loop(self.other(self.act(x)))
        """}, "UsesRegistry", ["Registry", "MODELS", "build", "", "", "act", "make_act", "UsesRegistry"],
        {"import torch.nn as nn"}),
    # a registry filled by class decorators builds a class from a string no import names
    # (mmcv's ``dict(type='DropPath')``): the class registered under that name comes along
    "registry_by_name": ({"reg.py": """
        class Registry(dict):
            def register_module(self):
                def add(cls):
                    self[cls.__name__] = cls
                    return cls
                return add
            def build(self, cfg):
                cfg = dict(cfg)
                return self[cfg.pop("type")](**cfg)
        MODELS = Registry()
        """, "drop.py": """
        import torch.nn as nn
        from .reg import MODELS
        @MODELS.register_module()
        class DropPath(nn.Module):
            def __init__(self, p=0.1):
                super().__init__()
                self.p = p
            def forward(self, x):
                return x
        @MODELS.register_module()
        class Unused(nn.Module):
            def forward(self, x):
                return x
        @MODELS.register_module()
        class Broken(nn.Module):  # cannot be copied: left out, and DropPath with it never
            scale = defined_nowhere
        """, "m.py": """
        import torch.nn as nn
        from .reg import MODELS
        class BuildsByName(nn.Module):
            def __init__(self, drop=dict(type="DropPath", p=0.2)):
                super().__init__()
                self.drop = MODELS.build(drop)
            def forward(self, x):
                return self.drop(x)
        """}, "BuildsByName", ["Registry", "MODELS", "BuildsByName", "DropPath"], {"import torch.nn as nn"}),
    # a class a string names stays, although the registry it fills has another filler that cannot
    # be copied (which is left out)
    "registry_failing_sibling": ({"reg.py": """
        class Registry(dict):
            def register_module(self, module=None):
                def add(cls):
                    self[cls.__name__] = cls
                    return cls
                return add if module is None else add(module)
            def build(self, cfg):
                cfg = dict(cfg)
                return self[cfg.pop("type")](**cfg)
        MODELS = Registry()
        """, "acts.py": """
        import torch.nn as nn
        from .reg import MODELS
        def act():
            return nn.ReLU()
        MODELS.register_module(module=defined_nowhere)
        """, "drop.py": """
        import torch.nn as nn
        from .reg import MODELS
        @MODELS.register_module()
        class Swish(nn.Module):
            def forward(self, x):
                return x
        """, "m.py": """
        import torch.nn as nn
        from .reg import MODELS
        from .acts import act
        from . import drop
        class BuildsSwish(nn.Module):
            def __init__(self, cfg=dict(type="Swish")):
                super().__init__()
                self.act = MODELS.build(cfg)
                self.relu = act()
            def forward(self, x):
                return self.relu(self.act(x))
        """}, "BuildsSwish", ["act", "Registry", "MODELS", "BuildsSwish", "Swish"], {"import torch.nn as nn"}),
    # a registry string names a class registered by a statement of a module the block never
    # imports (mmdet's ``MODELS.register_module('Linear', module=nn.Linear)``), or by a decorator
    # under a name other than the class's (``@MODELS.register_module('deconv')``): both come along
    "registry_by_statement": ({"reg.py": """
        class Registry(dict):
            def register_module(self, name=None, module=None):
                def add(cls):
                    self[name or cls.__name__] = cls
                    return cls
                return add if module is None else add(module)
            def build(self, cfg):
                cfg = dict(cfg)
                return self[cfg.pop("type")](**cfg)
        MODELS = Registry()
        """, "layers.py": """
        import torch.nn as nn
        from .reg import MODELS
        MODELS.register_module('Linear', module=nn.Linear)
        MODELS.register_module('Unused', module=nn.Identity)  # a filler of a copied module: comes along
        @MODELS.register_module('deconv')
        class ConvTranspose2d(nn.ConvTranspose2d):
            pass
        """, "m.py": """
        import torch.nn as nn
        from .reg import MODELS
        class BuildsRegistered(nn.Module):
            def __init__(self, fc=dict(type="Linear", in_features=4, out_features=2),
                         up=dict(type="deconv", in_channels=1, out_channels=1, kernel_size=2)):
                super().__init__()
                self.fc = MODELS.build(fc)
                self.up = MODELS.build(up)
            def forward(self, x):
                return self.fc(x)
        """}, "BuildsRegistered", ["Registry", "MODELS", "BuildsRegistered", "", "", "ConvTranspose2d"],
        {"import torch.nn as nn"}),
    # a module loaded by a name computed at run time (a compiled extension) that is absent: the
    # file imports, and only what uses it fails, with the original ImportError
    "computed_load": ({"ext_loader.py": """
        import importlib
        def load_ext(name):
            return importlib.import_module("computed_load." + name)
        def optional(name):
            try:
                return importlib.import_module(name)
            except ImportError:
                return None
        """, "m.py": """
        import torch.nn as nn
        from importlib import import_module
        from .ext_loader import load_ext, optional
        ext_module = load_ext("_ext")
        class Locations:
            def __init__(self):
                import_module("computed_load.registered")  # fills a registry; the copy has what it needs
        class UsesExt(nn.Module):
            def __init__(self):
                super().__init__()
                Locations()
                self.fallback = optional("computed_load.absent")
            def forward(self, x, fast=False):
                return ext_module.op(x) if fast else x
        """}, "UsesExt", ["_Unavailable", "load_ext", "optional", "ext_module", "Locations", "UsesExt"],
        {"import importlib", "from importlib import import_module", "import torch.nn as nn"}),
    # the same load in a branch of a module-level ``if``, checked by the loader (mmcv's ops/info.py),
    # reached through a lazy import: the copy imports, and only a call that uses it fails
    "computed_load_in_branch": ({"ext_loader.py": """
        import importlib
        def load_ext(name, funcs):
            ext = importlib.import_module("computed_load_in_branch." + name)
            for fun in funcs:
                assert hasattr(ext, fun), fun
            return ext
        """, "info.py": """
        import sys
        if sys.platform == "parrots":
            def version():
                return "parrots"
        else:
            from .ext_loader import load_ext
            ext_module = load_ext("_ext", ["version"])
            def version():
                return ext_module.version()
        """, "m.py": """
        import torch.nn as nn
        class Reports(nn.Module):
            def forward(self, x, report=False):
                if report:
                    from .info import version
                    return version()
                return x
        """}, "Reports", ["_Unavailable", "load_ext_ext_loader", "ext_module,load_ext,version", "Reports"],
        {"import importlib", "import sys", "import torch.nn as nn"}),
    # an import inside a function of a module the source no longer has (mmdet 3 still names
    # mmdet 2's ``mmdet.core.export`` in an ONNX branch) fails there, as in the original
    "absent_lazy_import": ({"m.py": """
        import torch.nn as nn
        class OnnxBranch(nn.Module):
            def forward(self, x, export=False):
                if export:
                    from .core.export import clip_for_onnx
                    return clip_for_onnx(x)
                return x
        """}, "OnnxBranch", ["OnnxBranch"], {"import torch.nn as nn"}),
    # a counter the block bumps through `global`
    "global_counter": ({"m.py": """
        import torch.nn as nn
        CALLS = 0
        class Counted(nn.Module):
            def forward(self, x):
                global CALLS
                CALLS += 1
                return x
        """}, "Counted", ["CALLS", "Counted"], {"import torch.nn as nn"}),
    # a default chosen by structural pattern matching at import time
    "match_default": ({"m.py": """
        import torch.nn as nn
        MODE = ("relu", 0.1)
        match MODE:
            case ("relu", slope):
                ACT = nn.ReLU
            case (_, slope):
                ACT = nn.GELU
        class Matched(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = ACT()
            def forward(self, x):
                return self.act(x) * slope
        """}, "Matched", ["MODE", "ACT,slope", "Matched"], {"import torch.nn as nn"}),
    # transformers' activations: a module-level call runs a function that reads a later-defined
    # global; the call must come after everything the function reads when it runs
    "import_time_call": ({"acts.py": """
        import torch.nn as nn
        def get_activation(name):
            return ACT2FN[name]()
        class ClassInstantier(dict):
            def __getitem__(self, key):
                return super().__getitem__(key)
        ACT2CLS = {"relu": nn.ReLU, "gelu": nn.GELU}
        ACT2FN = ClassInstantier(ACT2CLS)
        gelu = get_activation("gelu")
        """, "m.py": """
        import torch.nn as nn
        from .acts import ACT2FN, get_activation, gelu
        class UsesActs(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = get_activation("relu")
            def forward(self, x):
                return self.act(x) + gelu(x) + ACT2FN["relu"](x)
        """}, "UsesActs", ["get_activation", "ClassInstantier", "ACT2CLS", "ACT2FN", "gelu", "UsesActs"],
        {"import torch.nn as nn"}),
    # torchvision's tv_tensors: a module of the source imported inside a method, read by attribute
    "lazy_module_import": ({"functional.py": """
        import torch
        def resize(x, size):
            return torch.nn.functional.interpolate(x, size=size)
        def unused(x):
            return x
        """, "m.py": """
        import torch.nn as nn
        class LazyResize(nn.Module):
            def forward(self, x):
                from . import functional as F
                return F.resize(x, 4)
        """}, "LazyResize", ["resize", "LazyResize"], {"import torch", "import torch.nn as nn", "import types"}),
    # transformers' lazy package __init__: the module is replaced in sys.modules at run time; its
    # star imports under TYPE_CHECKING are the only statement of what it exports
    "lazy_package": ({"lazy/__init__.py": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .layers import *
        else:
            import sys
            sys.modules[__name__] = object()
        """, "lazy/layers.py": """
        import torch.nn as nn
        __all__ = ["Scale"]
        class Scale(nn.Module):
            def forward(self, x):
                return x * 2
        """, "m.py": """
        from .lazy import Scale
        class UsesLazy(Scale):
            pass
        """}, "UsesLazy", ["Scale", "UsesLazy"], {"import torch.nn as nn"}),
    # mmcv's ops: a function bound to an attribute its class inherits from torch
    "inherited_attribute_alias": ({"fn.py": """
        import torch
        class ScaleFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, grad):
                return grad * 2
        scale = ScaleFn.apply
        """, "m.py": """
        import torch.nn as nn
        from .fn import scale
        class UsesApply(nn.Module):
            def forward(self, x):
                return scale(x)
        """}, "UsesApply", ["ScaleFn", "scale", "UsesApply"], {"import torch", "import torch.nn as nn"}),
    # PyG's resolvers: a registry read by introspecting a module imported inside a function
    "lazy_module_as_registry": ({"aggr.py": """
        import torch.nn as nn
        class Aggregation(nn.Module):
            def forward(self, x):
                return x
        class SumAggregation(Aggregation):
            def forward(self, x):
                return x.sum(0)
        """, "m.py": """
        import torch.nn as nn
        def resolve(query):
            from . import aggr
            found = [a for a in vars(aggr).values() if isinstance(a, type) and issubclass(a, aggr.Aggregation)]
            return {a.__name__: a for a in found}[query]()
        class UsesRegistry(nn.Module):
            def __init__(self):
                super().__init__()
                self.agg = resolve("SumAggregation")
            def forward(self, x):
                return self.agg(x)
        """}, "UsesRegistry", ["Aggregation", "SumAggregation", "resolve", "UsesRegistry"],
        {"import torch.nn as nn", "import types"}),
    # PyG's typing.py: an optional import re-exported to other modules keeps its guard
    "guarded_reexport": ({"optional.py": """
        try:
            import not_installed_anywhere
            WITH_LIB = True
        except ImportError:
            not_installed_anywhere = None
            WITH_LIB = False
        """, "m.py": """
        import torch.nn as nn
        from .optional import WITH_LIB, not_installed_anywhere
        class Guarded(nn.Module):
            def forward(self, x):
                return not_installed_anywhere.op(x) if WITH_LIB else x
        """}, "Guarded", ["WITH_LIB,not_installed_anywhere", "Guarded"], {"import torch.nn as nn"}),
    # the same guarded import read as an attribute of its module, beside a class of that name
    "guarded_attribute": ({"optional.py": """
        try:
            from not_installed_anywhere import Image
        except ImportError:
            Image = None
        """, "m.py": """
        import torch.nn as nn
        from . import optional
        class Image(nn.Module):
            def forward(self, x):
                return x
        class GuardedAttr(nn.Module):
            def __init__(self):
                super().__init__()
                self.img = Image()
            def forward(self, x):
                return x if optional.Image is None else self.img(x)
        """}, "GuardedAttr", ["Image_m", "GuardedAttr", "Image"], {"import torch.nn as nn"}),
    # PyG's node loader: a submodule read through a package imported inside a method
    "lazy_package_chain": ({"dist/__init__.py": """
        from . import utils
        """, "dist/utils.py": """
        def filter_store(x):
            return x * 2
        """, "m.py": """
        import torch.nn as nn
        class Chained(nn.Module):
            def forward(self, x):
                from . import dist
                return dist.utils.filter_store(x)
        """}, "Chained", ["filter_store", "Chained"], {"import torch.nn as nn", "import types"}),
    # kornia's AutoAugment: a module of the source imported at module level, read by name at run time
    "module_as_value": ({"ops.py": """
        import torch.nn as nn
        def double(x):
            return x * 2
        def negate(x):
            return -x
        """, "m.py": """
        import torch.nn as nn
        from . import ops
        class ByName(nn.Module):
            def __init__(self, op="negate"):
                super().__init__()
                self.op = op
            def forward(self, x):
                return getattr(ops, self.op)(x)
        """}, "ByName", ["double", "negate", "ByName", "ops"], {"import torch.nn as nn", "import types"}),
    # monai's layer factories: functions a decorator of the registry object registers there;
    # one that cannot be copied is left out (mmengine's checkpoint loaders read mmengine.__path__)
    "decorator_registry": ({"factories.py": """
        import torch.nn as nn
        class LayerFactory:
            def __init__(self):
                self.factories = {}
            def factory_function(self, name):
                def register(fn):
                    self.factories[name.upper()] = fn
                    return fn
                return register
            def __getattr__(self, key):
                if key in self.factories:
                    return key
                raise AttributeError(key)
            def __getitem__(self, args):
                return self.factories[args[0]](args[1])
        Conv = LayerFactory()
        @Conv.factory_function("conv")
        def conv_factory(dim):
            return (nn.Conv1d, nn.Conv2d)[dim - 1]
        @Conv.factory_function(defined_nowhere)
        def broken_factory(dim):  # its decorator needs a name bound nowhere when it runs: left out, the registry lacks it
            return dim
        """, "m.py": """
        import torch.nn as nn
        from .factories import Conv
        class UsesFactory(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = Conv[Conv.CONV, 2](1, 1, 1)
            def forward(self, x):
                return self.conv(x)
        """}, "UsesFactory", ["LayerFactory", "Conv", "conv_factory", "UsesFactory"], {"import torch.nn as nn"}),
    # transformers' lazy model packages: a package used as a value binds ``sys`` by a guarded
    # import beside its lazy module; only its definitions are the package's exports
    "lazy_package_guarded_import": ({"lazyp/__init__.py": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .layers import Double
        else:
            import sys
            sys.modules[__name__] = object()
        def factor():
            return 2
        """, "lazyp/layers.py": """
        import torch.nn as nn
        class Double(nn.Module):
            def forward(self, x):
                return x * 2
        """, "m.py": """
        import torch.nn as nn
        def scale():
            from . import lazyp
            return vars(lazyp)["factor"]()
        class ScalesByPackage(nn.Module):
            def forward(self, x):
                return x * scale()
        """}, "ScalesByPackage", ["factor", "Double", "scale", "ScalesByPackage"], {"import torch.nn as nn", "import types"}),
    # transformers' docstring helpers: ``getattr(auto_module.modeling_auto, name)`` reads a submodule
    # of a package imported inside a function as a value: the submodule's definitions are copied
    "lazy_package_submodule_as_value": ({"autop/__init__.py": """
        from . import tables
        """, "autop/tables.py": """
        NAMES = {"double": "two"}
        def two():
            return 2
        """, "m.py": """
        import torch.nn as nn
        def factor(key):
            from . import autop
            return getattr(autop.tables, autop.tables.NAMES[key])()
        class FactorFromTable(nn.Module):
            def forward(self, x):
                return x * factor("double")
        """}, "FactorFromTable", ["NAMES", "two", "factor", "FactorFromTable"], {"import torch.nn as nn", "import types"}),
    # transformers' dynamic module helper: ``import transformers.utils`` in a function, then
    # ``hasattr(transformers.utils.import_utils, name)``: a submodule two levels down used as a value
    "lazy_package_nested_submodule_as_value": ({"deep/__init__.py": """
        """, "deep/utils/__init__.py": """
        from . import tools
        """, "deep/utils/tools.py": """
        def ready():
            return True
        LIMIT = 3
        """, "m.py": """
        import torch.nn as nn
        def check(name):
            from . import deep
            return hasattr(deep.utils.tools, name) and deep.utils.tools.LIMIT > 2
        class Checks(nn.Module):
            def forward(self, x):
                return x * check("ready")
        """}, "Checks", ["ready", "LIMIT", "check", "Checks"], {"import torch.nn as nn", "import types"}),
    # transformers' kernel hubs: ``def load(): global hub; hub = ...`` is the only binding of a
    # global other functions read; the function comes along as its definition
    "global_in_function": ({"m.py": """
        import torch.nn as nn
        def unrelated():
            return 0
        def load(factor=3):
            global backend
            backend = factor
        def use(x):
            return x * backend
        class UsesGlobal(nn.Module):
            def forward(self, x):
                return use(x)
        """}, "UsesGlobal", ["backend,load", "use", "UsesGlobal"], {"import torch.nn as nn"}),
    "renamed_optional_import": ({"a.py": """
        try:
            from json import JSONDecoder
        except ImportError:
            JSONDecoder = None
        def decoder():
            return JSONDecoder
        """, "m.py": """
        import torch.nn as nn
        from .a import decoder
        try:
            from json import JSONEncoder as JSONDecoder
        except ImportError:
            JSONDecoder = None
        class TwoOptional(nn.Module):
            def forward(self, x):
                return x if (decoder().__name__, JSONDecoder.__name__) == ("JSONDecoder", "JSONEncoder") else None
        """}, "TwoOptional", ["JSONDecoder_a", "decoder", "JSONDecoder", "TwoOptional"], {"import torch.nn as nn"}),
    "nested_class": ({"m.py": """
        import torch.nn as nn
        def act():
            return nn.ReLU()
        class Outer(nn.Module):
            class Inner(nn.Module):
                def forward(self, x):
                    return act()(x)
            def forward(self, x):
                return self.Inner()(x)
        """}, "Outer.Inner", ["act", "Outer"], {"import torch.nn as nn"}),
    # the block is the class the branch defines, whichever branch runs where it is checked
    "conditional_class_lifted": ({"m.py": """
        import torch
        import torch.nn as nn
        VERSION = (2, 0)
        if VERSION >= (1, 7):
            Swish = nn.SiLU
        else:
            @torch.jit.ignore
            class Swish(nn.Module):
                \"\"\"x * sigmoid(x).
        For torch before 1.7.\"\"\"
                def forward(self, x):
                    return x * torch.sigmoid(x)
        """}, "Swish", ["Swish"], {"import torch", "import torch.nn as nn"}),
    # a class that reads what its branch imports exists only with it: the conditional, once
    "conditional_class_reading_its_branch": ({"m.py": """
        import torch.nn as nn
        AVAILABLE = True
        if AVAILABLE:
            from .fast import fast_op
            class Fast(nn.Module):
                def forward(self, x):
                    return fast_op(x)
        """, "fast.py": """
        def fast_op(x):
            return x
        """}, "Fast", ["fast_op_fast", "AVAILABLE", "Fast,fast_op"], {"import torch.nn as nn"}),
}


def _layout(code: str) -> tuple[list[str], set[str]]:
    """The copied statements of a standalone file, each as the names it binds (comma-joined, sorted),
    and its import statements."""
    units = ModuleUnits("out", "out.py", code, is_package=False)
    imports = {ast.unparse(s.node) for s in units.stmts if s.is_import}
    return [",".join(sorted(s.binds)) for s in units.stmts if not s.is_import and not s.dedent], imports


@pytest.fixture(scope="module")
def cases_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src") / "scoping"
    for case, (files, _, _, _) in CLOSURE_CASES.items():
        package = root / case
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        for name, text in files.items():
            (package / name).parent.mkdir(parents=True, exist_ok=True)
            (package / name).write_text(textwrap.dedent(text).lstrip("\n"))
    home = tmp_path_factory.mktemp("home")
    nnrag.index([str(root)], home=home)
    return home


@pytest.mark.parametrize("case", sorted(CLOSURE_CASES))
def test_closure(cases_home: Path, case: str) -> None:
    _, block, want_defs, want_imports = CLOSURE_CASES[case]
    result = nnrag.extract(f"{case}.m.{block}", home=cases_home)
    assert result.ok, result.issues
    assert _layout(result.code) == (want_defs, want_imports)
    assert "NotExported" not in result.code and "def helper" not in result.code
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():  # except_as warns by design
        warnings.simplefilter("ignore")
        exec(compile(result.code, f"{case}.py", "exec"), namespace)  # the file runs at import as written
    assert block.split(".")[0] in namespace
    if case == "lazy_package_submodule_as_value":  # the name read from the table is found at run time
        import torch
        assert namespace["FactorFromTable"]()(torch.ones(1)).item() == 2.0  # type: ignore[operator]
    if case == "global_in_function":  # as in the original module: the global exists once load() ran
        import torch
        namespace["load"]()  # type: ignore[operator]
        assert namespace["UsesGlobal"]()(torch.ones(1)).item() == 3.0  # type: ignore[operator]
    if case == "lazy_package_nested_submodule_as_value":
        import torch
        assert namespace["Checks"]()(torch.ones(1)).item() == 1.0  # type: ignore[operator]
    if case == "lazy_module_as_registry":  # the registry still finds its classes
        assert type(namespace["UsesRegistry"]().agg).__name__ == "SumAggregation"  # type: ignore[operator]
    if case == "lazy_package_chain":  # the submodule's function, reached through the package
        import torch

        assert namespace["Chained"]()(torch.ones(1)).item() == 2  # type: ignore[operator]
    if case == "module_as_value":  # the function the string names, found on the module's stand-in
        import torch

        assert namespace["ByName"]()(torch.ones(1)).item() == -1  # type: ignore[operator]
    if case == "registry_by_statement":  # both strings build what the original registry held
        block = namespace["BuildsRegistered"]()  # type: ignore[operator]
        assert (type(block.fc).__name__, type(block.up).__name__) == ("Linear", "ConvTranspose2d")
    if case == "decorator_registry":  # the factory the decorator registered builds the layer
        assert type(namespace["UsesFactory"]().conv).__name__ == "Conv2d"  # type: ignore[operator]
    if case == "absent_lazy_import":  # the branch that imports it fails as the original does
        import torch

        with pytest.raises(ImportError, match="core is not a Python module"):
            namespace["OnnxBranch"]()(torch.ones(1), export=True)  # type: ignore[operator]
    if case == "registry_by_name":  # the registry builds the class the string names
        assert namespace["BuildsByName"]().drop.p == 0.2 and "Unused" not in result.code and "Broken" not in result.code  # type: ignore[operator]
    if case == "computed_load":
        import torch

        assert namespace["UsesExt"]()(torch.ones(1)).item() == 1  # type: ignore[operator]
        assert namespace["UsesExt"]().fallback is None  # type: ignore[operator]  # the optional import's own fallback
        with pytest.raises(ModuleNotFoundError, match="computed_load"):
            namespace["UsesExt"]()(torch.ones(1), fast=True)  # type: ignore[operator]
    if case == "computed_load_in_branch":
        import torch

        assert namespace["Reports"]()(torch.ones(1)).item() == 1  # type: ignore[operator]
        with pytest.raises(ModuleNotFoundError, match="computed_load_in_branch"):
            namespace["Reports"]()(torch.ones(1), report=True)  # type: ignore[operator]
    if case == "registry_failing_sibling":
        assert type(namespace["BuildsSwish"]().act).__name__ == "Swish"  # type: ignore[operator]
    if case == "renamed_optional_import":  # each module's import binds its own (renamed) name
        import torch

        assert namespace["TwoOptional"]()(torch.ones(1)) is not None  # type: ignore[operator]
    if case == "conditional_class_lifted":  # the class, dedented, its docstring kept as written
        import torch

        assert namespace["Swish"]()(torch.zeros(1)).item() == 0 and "VERSION" not in result.code  # type: ignore[operator]
        assert '"""x * sigmoid(x).\nFor torch before 1.7."""' in result.code
    if case == "foreign_registry":  # filled by the copied statements, the loop's too
        assert type(namespace["UsesRegistry"]().loop).__name__ == "SiLU"  # type: ignore[operator]


def test_a_definition_time_cycle_keeps_its_statements_in_place_and_orders_the_rest() -> None:
    from nnrag.extraction.order import order_units
    from nnrag.extraction.plan import UnitPlan

    def plan(pos: int, early: set[int]) -> UnitPlan:
        return UnitPlan(("m", pos), "", frozenset(), early={("m", e) for e in early})

    # 3 and 4 need each other at definition time; 5 needs the cycle, 1 needs 2 (written later)
    units = {("m", 1): plan(1, {2}), ("m", 2): plan(2, set()), ("m", 3): plan(3, {4, 2}), ("m", 4): plan(4, {3}),
             ("m", 5): plan(5, {4}), ("m", 0): plan(0, {5})}
    order, cyclic = order_units(units, ("m", 0))
    assert cyclic and [k[1] for k in order] == [2, 1, 3, 4, 5, 0]


def test_a_large_submodule_used_as_a_value_is_refused_with_its_size(tmp_path: Path) -> None:
    """``getattr(pkg.tables, name)`` on a submodule of 70 definitions: copying them all made 4 MB
    files of a language-model library; the block is refused and the reason says why."""
    root = tmp_path / "src" / "bigtables"
    (root / "pkg").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("from . import tables\n")
    (root / "pkg" / "tables.py").write_text("".join(f"def f{i}():\n    return {i}\n" for i in range(70)))
    (root / "m.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        def pick(name):
            from . import pkg
            return getattr(pkg.tables, name)()
        class Picks(nn.Module):
            def forward(self, x):
                return x * pick("f3")
        """))
    home = tmp_path / "home"
    nnrag.index([str(root.parent)], home=home)
    result = nnrag.extract("bigtables.m.Picks", home=home)
    assert not result.ok
    assert any("bigtables.pkg.tables is used as a value through a lazy import: its 70 definitions" in str(i)
               for i in result.issues), result.issues


def test_a_block_whose_closure_cannot_be_copied_imports_the_rest_of_its_installed_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block of the test above, its package installed this time: its own module is copied and
    the rest imported from the package, and the file says so and passes the gate."""
    from nnrag.validator.gate import Gate

    src = tmp_path / "src"
    root = src / "bigtables"
    (root / "pkg").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("from . import tables\n")
    (root / "pkg" / "tables.py").write_text("".join(f"def f{i}():\n    return {i}\n" for i in range(70)))
    (root / "scale.py").write_text("FACTOR = 2\n")
    (root / "m.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from .scale import FACTOR
        def pick(name):
            from . import pkg
            return getattr(pkg.tables, name)()
        class Picks(nn.Module):
            def forward(self, x):
                return x * pick("f3") * FACTOR
        """))
    home = tmp_path / "home"
    nnrag.index([str(src)], home=home)
    from nnrag.extraction import requirements

    # only a folder on sys.path: no installed distribution, nothing to import the rest from
    monkeypatch.syspath_prepend(str(src))
    assert not nnrag.extract("bigtables.m.Picks", home=home).ok
    # installed: a distribution's metadata beside the package, where extraction runs
    info = tmp_path / "site" / "bigtables-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bigtables\nVersion: 0.1\n")
    (info / "top_level.txt").write_text("bigtables\n")
    monkeypatch.syspath_prepend(str(info.parent))
    requirements._packages.cache_clear()
    assert requirements.distributed("bigtables") and not requirements.distributed("antigravity")
    result = nnrag.extract("bigtables.m.Picks", home=home)
    assert result.ok, result.issues
    assert "# imports: the rest of bigtables" in result.code and (result.imports or "").startswith("the rest of bigtables")
    assert "bigtables.pkg.tables is used as a value through a lazy import" in result.code
    assert "from bigtables.scale import FACTOR" in result.code and "FACTOR = 2" not in result.code
    assert "def pick(name):" in result.code and "def f3" not in result.code
    assert list(result.files) == ["bigtables/m.py"]
    with Gate(1) as gate:
        record = gate.check_code(result.code, result.class_name, paths=[str(src)])
    assert record.ok, record.message
    from nnrag.db import connect
    from nnrag.extraction.block import Extractors
    from nnrag.indexing.lookup import resolve_block
    from nnrag.workspace import Workspace

    with connect(Workspace.resolve(home)) as db:  # what a build's workers would preload for it
        _, assembled, _ = Extractors(db.conn).extract(resolve_block(db.conn, "bigtables.m.Picks", None))
    assert assembled is not None and assembled.package_modules == ("bigtables.scale",)
    report = nnrag.vendor(["bigtables.m.Picks"], tmp_path / "proj" / "blocks", home=home, check=False)
    vendored = (tmp_path / "proj" / "blocks" / f"{report.blocks[0].module.rsplit('.', 1)[-1]}.py").read_text()
    assert "# imports: the rest of bigtables" in vendored and "from bigtables.scale import FACTOR" in vendored
    requirements._packages.cache_clear()  # the distribution goes with the test's sys.path


def test_a_name_imported_then_rebound_in_its_module_starts_from_the_import(tmp_path: Path) -> None:
    """``from .tables import NAMES``, ``NAMES.update(...)``, ``NAMES = dict(..., **NAMES)``: the
    module's statements read the imported table, so the copy binds the module's name to it first
    (without that the update ran on an unbound name: 294 language-model blocks failed to import)."""
    root = tmp_path / "src" / "rebound"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "tables.py").write_text('NAMES = {"a": 1}\nOTHER = 5\n')
    (root / "mapping.py").write_text(textwrap.dedent("""
        from .tables import NAMES, OTHER
        NAMES.update({"b": 2})
        NAMES = dict(**{"z": 0}, **NAMES)
        """))
    (root / "m.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from .tables import NAMES as BASE
        from .mapping import NAMES
        class Counts(nn.Module):
            def forward(self, x):
                return x * (len(NAMES) + 10 * len(BASE))
        """))
    home = tmp_path / "home"
    nnrag.index([str(root.parent)], home=home)
    result = nnrag.extract("rebound.m.Counts", home=home)
    assert result.ok, result.issues
    assert "OTHER" not in result.code and "import NAMES" not in result.code
    record = nnrag.validate(code=result.code, class_name="Counts")
    assert record.ok, record.message
    (tmp_path / "counts.py").write_text(result.code)
    run = subprocess.run([sys.executable, "-c", "import torch, counts; print(counts.Counts()(torch.ones(1)).item())"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "23.0", run.stderr  # NAMES: z, a, b; BASE (the same dict): a, b


def test_a_call_at_import_time_follows_what_the_function_reads_despite_a_cycle_elsewhere(tmp_path: Path) -> None:
    """``g = get("a")`` needs the table ``get`` reads when it runs. Two functions elsewhere in the
    closure reading each other's results in branches never taken make the graph of such needs
    cyclic; that cycle kept its statements in source order and no longer dropped every other
    such need (19 language-model blocks failed to import on ``ACT2FN``)."""
    root = tmp_path / "src" / "calls"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "kinds.py").write_text("class Kind:\n    size = 3\n")
    (root / "acts.py").write_text(textwrap.dedent("""
        from .kinds import Kind
        def first(flag=False):
            return LATER if flag else 1
        def second(flag=False):
            return EARLY if flag else 2
        def get(name):
            return TABLE[name]
        EARLY = first()
        LATER = second()
        TABLE = {"a": Kind}
        g = get("a")
        """))
    (root / "m.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from .acts import g, EARLY
        class Sized(nn.Module):
            def forward(self, x):
                return x * (g.size + EARLY)
        """))
    home = tmp_path / "home"
    nnrag.index([str(root.parent)], home=home)
    result = nnrag.extract("calls.m.Sized", home=home)
    assert result.ok, result.issues
    assert result.code.index("TABLE = {") < result.code.index('g = get("a")')
    assert result.code.index("EARLY = first()") < result.code.index("LATER = second()")
    record = nnrag.validate(code=result.code, class_name="Sized")
    assert record.ok, record.message


def test_a_metaclass_runs_as_its_class_is_made_so_what_it_reads_comes_first(tmp_path: Path) -> None:
    """A metaclass's ``__init__`` calls a function its module defines after the classes that use
    it (braindecode's models): the function, and what it reads, must come before those classes."""
    root = tmp_path / "src" / "metas"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "m.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        class Tracking(type):
            def __init__(cls, name, bases, ns):
                super().__init__(name, bases, ns)
                track(cls)
        class Base(nn.Module, metaclass=Tracking):
            pass
        class Scaled(Base):
            def forward(self, x):
                return x * 2
        def track(cls):
            SEEN.append(cls.__name__)
        SEEN = []
        """))
    home = tmp_path / "home"
    nnrag.index([str(root.parent)], home=home)
    result = nnrag.extract("metas.m.Scaled", home=home)
    assert result.ok, result.issues
    assert max(result.code.index("SEEN = []"), result.code.index("def track")) < result.code.index("class Base")
    record = nnrag.validate(code=result.code, class_name="Scaled")
    assert record.ok, record.message


def test_a_patch_of_an_imported_class_comes_with_the_code_that_reads_it(tmp_path: Path) -> None:
    """``logging.Logger.note_once = note_once`` in the module that makes the logger: the block calls
    ``logger.note_once``, so the patch is copied with it (18 language-model blocks failed without
    their library's ``warning_once``); a patch of an attribute nothing reads stays out."""
    root = tmp_path / "src" / "patching"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "log.py").write_text(textwrap.dedent("""
        import logging
        def note_once(self, msg):
            return len(msg)
        logging.Logger.note_once = note_once
        logging.Logger.never_read = note_once
        logger = logging.getLogger("patching")
        """))
    (root / "m.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from .log import logger
        class Noted(nn.Module):
            def forward(self, x):
                return x * logger.note_once("abc")
        """))
    home = tmp_path / "home"
    nnrag.index([str(root.parent)], home=home)
    result = nnrag.extract("patching.m.Noted", home=home)
    assert result.ok, result.issues
    assert "logging.Logger.note_once = note_once" in result.code and "never_read" not in result.code
    record = nnrag.validate(code=result.code, class_name="Noted")
    assert record.ok, record.message


# Statements renamed by splicing and by LibCST: (text, renames, chains). Each form of binding and
# scope the splice models (an f-string naming a renamed name too), and a form it leaves to LibCST.
_RENAME_CASES = [
    ("class A(Base):\n    X = X\n    def f(self, Base=Base):\n        return Base, X, [Base for Base in range(2)]\n",
     {"Base": "Base_2", "X": "X_2", "A": "A_2"}, {}),
    ("class A(Base):\n    Y = 1\n    def f(self, Base=Base):\n        return Base, Y, [Base for Base in range(2)]\n",
     {"Base": "Base_2", "Y": "Y_2", "A": "A_2"}, {}),
    ("def f(a=lambda z: z + K, *, b=[i for i in K]):\n    g = (j * K for j in K)\n    K2 = K\n    return a, b, g\n",
     {"K": "K_3", "f": "f_3"}, {}),
    ("try:\n    from .x import a, b as c\nexcept ImportError:\n    a = None\n    import os.path\n",
     {"a": "a_x", "c": "c_x", "os": "os_2"}, {}),
    ("@REG.register()\nclass Net(nn.Module):\n    act = H.make_act(nn.ReLU)\n    def forward(self, x):\n        return H.make_act.inner(x) + H.size\n",
     {"REG": "REG_m", "nn": "nn_t"}, {"H.make_act": "make_act", "H.size": "SIZE"}),
    ("def f(x):\n    def g():\n        nonlocal_ = x\n        return zip(nonlocal_, N)\n    return g\n", {"zip": "zip_moves", "N": "N_2"}, {}),
    ("def é(x):\n    return 'ü' + x + N\n", {"N": "N_2"}, {}),
    ("def f(x):\n    return f'{N}' + x\n", {"N": "N_2"}, {}),
]


@pytest.mark.parametrize("case", range(len(_RENAME_CASES)))
def test_splicing_renames_as_libcst_does(case: int) -> None:
    from nnrag.extraction.rename import with_libcst
    from nnrag.extraction.splice import spliced

    text, renames, chains = _RENAME_CASES[case]
    slow = with_libcst(text, tuple(sorted(renames.items())), tuple(sorted(chains.items())))
    fast = spliced(text, renames, chains)
    if "X = X" in text:
        assert fast is None  # a renamed name a class body reads and binds: LibCST does it
    else:
        assert fast == slow, (fast, slow)
    assert slow != text or not renames


def _indexed(tmp_path: Path, files: dict[str, str]) -> Path:
    """A home indexing a repository of ``files`` (path -> text)."""
    root = tmp_path / "repo"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    home = tmp_path / "home"
    nnrag.index([str(root)], home=home)
    return home


def test_names_behind_star_imports_of_modules_outside_the_corpus(tmp_path: Path) -> None:
    """A builtin in a file that star-imports an installed module is the builtin, unless that
    module binds the name (before, ``len`` became ``from collections import len``); a name that a
    star import of the source's own module brings in from outside (tsai's ``from ..imports
    import *``, which star-imports fastai) is imported from there, not left undefined."""
    home = _indexed(tmp_path, {
        "spkg/__init__.py": "", "spkg/imports.py": "from json import *\n",
        "spkg/layers.py": "from collections import *\nfrom .imports import *\nimport torch.nn as nn\n\n\n"
                          "class Counts(nn.Module):\n    def forward(self, x):\n"
                          "        kept = OrderedDict(a=len(loads('[1, 2]')))\n        return x * abs(-kept['a'])\n"})
    result = nnrag.extract("spkg.layers.Counts", home=home)
    assert result.ok, result.issues
    code = result.code
    assert "from json import loads" in code and "from collections import OrderedDict" in code
    assert "import len" not in code and "import abs" not in code
    validated = nnrag.validate(code=code, class_name="Counts")
    assert validated.ok, validated.message


def test_a_name_no_file_here_is_seen_to_bind_keeps_the_star_imports_that_bind_it(tmp_path: Path) -> None:
    """``torch.nn`` binds ``Identity`` through star imports of its own, so its file does not say
    which star import of the block's module brings the name in (tsai star-imports fastai's modules,
    which are not installed where the index runs): the copy star-imports the same modules, in the
    source's order, instead of naming one of them (before: ``from json import Identity``)."""
    home = _indexed(tmp_path, {
        "cpkg/__init__.py": "", "cpkg/imports.py": "from torch.nn import *\n",
        "cpkg/layers.py": "from .imports import *\nfrom json import *\nimport torch.nn as nn\n\n\n"
                          "class Kept(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                          "        self.inner = Identity()\n\n    def forward(self, x):\n"
                          "        return self.inner(x) * len(loads('[1, 2]'))\n"})
    result = nnrag.extract("cpkg.layers.Kept", home=home)
    assert result.ok, result.issues
    code = result.code
    assert "from torch.nn import *\nfrom json import *\n" in code, code
    assert "import Identity" not in code and "from json import loads" in code
    validated = nnrag.validate(code=code, class_name="Kept")
    assert validated.ok, validated.message


def test_a_try_that_binds_a_name_the_block_reads_and_fills_a_registry_is_kept_with_its_issues(tmp_path: Path) -> None:
    """The ``try`` imports an optional module the block reads (``slayer``) and fills a registry of
    the module. A statement that fills a registry is left out when it cannot be copied; one that
    also binds a name the copied code reads, or holds the block itself, is needed, and its issue
    is the block's (before: the extractor failed with a KeyError on the name's missing statement,
    or found no statement for the block)."""
    home = _indexed(tmp_path, {"optional.py": (
        "import torch.nn as nn\n\nREGISTRY = {}\n\n\nclass Head(nn.Module):\n    def forward(self, x):\n"
        "        if x.is_cuda:\n            return optlib.run(x)\n        return x\n\n\n"
        "try:\n    import optlib\n\n    REGISTRY['fast'] = optlib.fast if FAST else None\n\n"
        "    class FastHead(nn.Module):\n        def forward(self, x):\n            return optlib.run(x)\n"
        "except ImportError:\n    pass\n")})
    for name in ("Head", "FastHead"):  # the block outside the ``try``, and one inside it (before: StopIteration)
        result = nnrag.extract(f"optional.{name}", home=home)
        assert not result.ok
        assert [(i.code, i.name) for i in result.issues] == [("unresolved-name", "FAST")], (name, result.issues)


def test_a_module_read_as_a_value_when_its_importer_runs_is_bound_before_that_statement(tmp_path: Path) -> None:
    """``IDS = {getattr(kinds, n): i for i, n in enumerate(NAMES)}`` at module level reads a module of
    the source as a value while the module is imported: its namespace is bound just before that
    statement, after the definitions it holds (before: "used as a value at import time")."""
    home = _indexed(tmp_path, {
        "vpkg/__init__.py": "",
        "vpkg/kinds.py": "import torch\n\n\nclass Sig:\n    fn = staticmethod(torch.sigmoid)\n\n\n"
                         "class Tan:\n    fn = staticmethod(torch.tanh)\n",
        "vpkg/dispatch.py": "from vpkg import kinds\n\nNAMES = ('Sig', 'Tan')\n"
                            "IDS = {getattr(kinds, n): i for i, n in enumerate(NAMES)}\n",
        "vpkg/layer.py": "import torch.nn as nn\n\nfrom .dispatch import IDS\nfrom .kinds import Tan\n\n\n"
                         "class Coded(nn.Module):\n    def forward(self, x):\n        return Tan.fn(x) * IDS[Tan]\n"})
    result = nnrag.extract("vpkg.layer.Coded", home=home)
    assert result.ok, result.issues
    code = result.code
    assert code.index("kinds = types.SimpleNamespace(Sig=Sig, Tan=Tan)") < code.index("IDS = {getattr(kinds, n)"), code
    validated = nnrag.validate(code=code, class_name="Coded")
    assert validated.ok, validated.message


def test_a_top_level_extension_a_setup_script_of_the_source_builds_is_native_not_a_distribution(tmp_path: Path) -> None:
    """The DETR family's ``ops/setup.py`` builds ``MultiScaleDeformableAttention`` from C++/CUDA
    (``extension = CUDAExtension`` ... ``extension("MultiScaleDeformableAttention", ...)``) and its
    Python imports it as a top-level module: a block that needs it fails as native-extension,
    naming the script (before: a requirement pip was asked for, missing-dependency); a block of
    the same file that does not need it is copied without it."""
    home = _indexed(tmp_path, {
        "det/__init__.py": "",
        "det/ops/setup.py": "from torch.utils.cpp_extension import CppExtension, CUDAExtension\n"
                            "from setuptools import setup\n\nextension = CppExtension\nif True:\n    extension = CUDAExtension\n"
                            "setup(name='msda', ext_modules=[extension('MultiScaleDeformableAttention', ['src/a.cpp'])],\n"
                            "      install_requires=['torch'])\n",
        "det/ops/func.py": "import torch\nimport torch.nn as nn\nimport MultiScaleDeformableAttention as MSDA\n\n\n"
                           "class Deform(nn.Module):\n    def forward(self, x):\n        return MSDA.forward(x)\n\n\n"
                           "class Plain(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"})
    needs = nnrag.extract("det.ops.func.Deform", home=home)
    assert [(i.code, i.name) for i in needs.issues] == [("native-extension", "MSDA")], needs.issues
    assert "det/ops/setup.py" in needs.issues[0].message
    plain = nnrag.extract("det.ops.func.Plain", home=home)
    assert plain.ok and "MultiScaleDeformableAttention" not in plain.code


def test_a_guarded_import_of_an_extension_the_source_builds_stands_in_until_called(tmp_path: Path) -> None:
    """``try: import MultiScaleDeformableAttention as MSDA`` / ``except ModuleNotFoundError: raise
    ModuleNotFoundError("Please compile ...")``: the import re-raises, so the block never imported
    (and pip was asked for the name). The import becomes a stand-in that raises where it is
    called: the layer whose forward falls back to PyTorch on the CPU passes; one that needs the op
    fails there as native-extension."""
    home = _indexed(tmp_path, {
        "det/__init__.py": "",
        "det/ops/setup.py": "from torch.utils.cpp_extension import CUDAExtension\nfrom setuptools import setup\n\n"
                            "setup(name='msda', ext_modules=[CUDAExtension('MultiScaleDeformableAttention', ['src/a.cu'])])\n",
        "det/ops/func.py": "import torch\nimport torch.nn as nn\n\ntry:\n    import MultiScaleDeformableAttention as MSDA\n"
                           "except ModuleNotFoundError as e:\n    raise ModuleNotFoundError('Please compile the op: sh make.sh')\n\n\n"
                           "class Sampled(nn.Module):\n    def __init__(self, dim=8):\n        super().__init__()\n"
                           "        self.proj = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        try:\n"
                           "            out = MSDA.ms_deform_attn_forward(x)\n        except Exception:\n"
                           "            out = torch.tanh(x)  # on the CPU\n        return self.proj(out)\n\n\n"
                           "class OpOnly(nn.Module):\n    def __init__(self, dim=8):\n        super().__init__()\n"
                           "        self.proj = nn.Linear(dim, dim)\n\n    def forward(self, x):\n"
                           "        return self.proj(MSDA.ms_deform_attn_forward(x))\n"})
    sampled = nnrag.extract("det.ops.func.Sampled", home=home)
    assert sampled.ok, sampled.issues
    assert "import MultiScaleDeformableAttention" not in sampled.code
    assert not any("MultiScaleDeformableAttention" in r for r in sampled.requirements), sampled.requirements
    assert nnrag.validate(code=sampled.code, class_name="Sampled").ok
    only = nnrag.validate(code=nnrag.extract("det.ops.func.OpOnly", home=home).code, class_name="OpOnly")
    assert (only.ok, only.code) == (False, "native-extension"), only.message


def test_a_folder_named_like_a_distribution_and_an_alias_a_function_binds_again(tmp_path: Path) -> None:
    """Filters written again for torch live in ``activations/torch/`` (``activations/`` no package):
    their ``import torch`` is the distribution, not the folder, as where the repository's folder is
    appended to ``sys.path`` after it. And the class imported as ``TorchAct`` is called ``Act``,
    a name a method binds locally (``Act = TorchAct``): the copy names it otherwise there."""
    home = _indexed(tmp_path, {
        "activations/torch/__init__.py": "from .act import *\n",
        "activations/torch/act.py": "import torch\nimport torch.nn as nn\n\n\n"
                                    "class Act(nn.Module):\n    def forward(self, x):\n"
                                    "        return x + torch.sin(x) ** 2\n",
        "model.py": "import torch.nn as nn\nfrom activations.torch.act import Act as TorchAct\n\n\n"
                    "class Block(nn.Module):\n    def __init__(self, dim=4, fused=False):\n        super().__init__()\n"
                    "        if fused:\n            Act = nn.Identity\n        else:\n            Act = TorchAct\n"
                    "        self.act = Act()\n        self.proj = nn.Linear(dim, dim)\n\n"
                    "    def forward(self, x):\n        return self.proj(self.act(x))\n"})
    for name in ("activations.torch.act.Act", "model.Block"):
        result = nnrag.extract(name, home=home)
        assert result.ok, result.issues
        validated = nnrag.validate(code=result.code, class_name=result.class_name)
        assert validated.ok, (name, validated.message)


def test_a_guarded_import_of_a_module_resting_on_an_unbuilt_extension_takes_the_fallback(tmp_path: Path) -> None:
    """S4's kernels: ``try: from extensions.kernels.vandermonde import log_vandermonde_cuda`` /
    ``except: has_cuda_extension = False``, and that module imports ``structured_kernels``, which
    its ``setup.py`` compiles. The copy raises the ImportError inside the ``try`` (no stand-in that
    would set the flag), and the block runs its pure PyTorch path."""
    home = _indexed(tmp_path, {
        "extensions/kernels/setup.py": "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\n"
                                       "setup(name='k', ext_modules=[CUDAExtension('structured_kernels', ['v.cpp'])])\n",
        "extensions/kernels/vandermonde.py": "from structured_kernels import vand_fwd\n\n\n"
                                             "def log_vandermonde_cuda(v, x):\n    return vand_fwd(v, x)\n",
        "kernels.py": "import torch\nimport torch.nn as nn\n\ntry:\n"
                      "    from extensions.kernels.vandermonde import log_vandermonde_cuda\n    has_cuda_extension = True\n"
                      "except ImportError:\n    has_cuda_extension = False\n\n\n"
                      "class Kernel(nn.Module):\n    def __init__(self, dim=4):\n        super().__init__()\n"
                      "        self.v = nn.Parameter(torch.randn(dim))\n\n    def forward(self, x):\n"
                      "        if has_cuda_extension:\n            return log_vandermonde_cuda(self.v, x)\n"
                      "        return x * torch.exp(self.v)\n"})
    result = nnrag.extract("kernels.Kernel", home=home)
    assert result.ok, result.issues
    assert "raise ImportError(" in result.code and "_Unavailable" not in result.code
    validated = nnrag.validate(code=result.code, class_name=result.class_name)
    assert validated.ok, validated.message


def test_a_dotted_import_through_a_folder_without_init_reaches_the_module(tmp_path: Path) -> None:
    """S4's ``import src.utils.train`` then ``src.utils.train.get_logger(__name__)``, ``src/``
    having no ``__init__.py``: the head names no module of the index, the dotted name does; the
    copy holds the function, and ``src`` is no distribution to install."""
    home = _indexed(tmp_path, {
        "src/utils/__init__.py": "",
        "src/utils/train.py": "import logging\n\n\ndef get_logger(name):\n    return logging.getLogger(name)\n",
        "src/models/__init__.py": "",
        "src/models/kernel.py": "import torch.nn as nn\n\nimport src.utils.train\nlog = src.utils.train.get_logger(__name__)\n\n\n"
                                "class Kernel(nn.Module):\n    def __init__(self, dim=4):\n        super().__init__()\n"
                                "        self.proj = nn.Linear(dim, dim)\n\n    def forward(self, x):\n"
                                "        log.debug('kernel')\n        return self.proj(x)\n"})
    result = nnrag.extract("src.models.kernel.Kernel", home=home)
    assert result.ok, result.issues
    assert "def get_logger" in result.code and "src" not in {r.split("=")[0] for r in result.requirements}
    validated = nnrag.validate(code=result.code, class_name=result.class_name)
    assert validated.ok, validated.message


def test_a_dotted_name_of_an_installed_distribution_stays_its_own_in_a_corpus_holding_its_modules(tmp_path: Path) -> None:
    """A corpus holding a copy of an installed distribution's modules (torch's own ``torch/nn``
    folder as a source): ``packaging.version.parse(...)`` after ``import packaging.version`` is the
    installed distribution's function, not a copy of the corpus's module of that name."""
    home = _indexed(tmp_path, {
        "packaging/version.py": "def parse(text):\n    return text\n",
        "blocks.py": "import torch.nn as nn\nimport packaging.version\n\n\nclass Versioned(nn.Module):\n"
                     "    def forward(self, x):\n        return x * (packaging.version.parse('2.0').major or 1)\n"})
    result = nnrag.extract("blocks.Versioned", home=home)
    assert result.ok, result.issues
    assert "packaging.version.parse('2.0')" in result.code and "def parse" not in result.code
