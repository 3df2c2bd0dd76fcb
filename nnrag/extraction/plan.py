"""What a closure is made of: the targets a name can mean, the plan of each copied statement,
and the closure itself (the statements, their order, imports and issues)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union


@dataclass(frozen=True, order=True)
class DefTarget:
    """A module-level name of the source, bound by one or more copied statements."""

    module: str
    name: str


@dataclass(frozen=True)
class ExtImport:
    """An import statement kept as written: ``import module [as asname]`` or ``from module import name [as asname]``."""

    module: str
    name: str | None = None
    asname: str | None = None
    # ``name`` is bound by these star imports together (modules outside the corpus whose files
    # are not here to say which binds it: tsai's chain of ``from fastai.* import *``): at module
    # level the copy star-imports them as the source does; inside a function, where a star import
    # is not allowed, it imports the name from the last of them
    stars: tuple[str, ...] = ()

    @property
    def binds(self) -> str:
        if self.asname:
            return self.asname
        return self.name if self.name is not None else self.module.split(".")[0]

    @property
    def top(self) -> str:
        return self.module.split(".")[0]

    def render(self, asname: str | None = None) -> str:
        alias = asname if asname is not None else self.asname
        suffix = f" as {alias}" if alias else ""
        if self.name is None:
            return f"import {self.module}{suffix}"
        return f"from {self.module} import {self.name}{suffix}"


@dataclass(frozen=True)
class ModTarget:
    """A module of the source used as a namespace (``H.make_divisible``)."""

    module: str
    # the import as written, kept when the module is only a folder of the source (``import torch``
    # where the source holds just ``torch/nn``) and an attribute chain leads out of the source
    fallback: ExtImport | None = None


@dataclass(frozen=True)
class Namespace:
    """A module of the source imported inside a statement (``from . import functional as F`` in a
    method): bound to an object holding the attributes the statement reads (``F.resize``)."""

    module: str
    attrs: tuple[tuple[str, "Target"], ...]  # a submodule read through it is a Namespace itself

    def leaves(self) -> Iterator["Target"]:
        """The definitions and imports it holds, also through nested namespaces."""
        for _, target in self.attrs:
            if isinstance(target, Namespace):
                yield from target.leaves()
            else:
                yield target


@dataclass(frozen=True)
class Missing:
    code: str
    message: str
    # no file of the source provides the module at all: an import of it inside a function fails
    # there in the original too, so the copy keeps that failure for when (if ever) it runs
    absent: bool = False
    # the module binds the name nowhere (``einsum`` used without an import, in a branch the code
    # does not take): Python raises NameError only when that code runs, and so does the copy
    unbound: bool = False
    # the import itself fails in the copy, as it does where the source was never built (a module
    # of the source that imports an unbuilt extension at its top): no stand-in for it, an
    # ImportError for the ``except`` that guards it
    fails_import: bool = False


Target = Union[DefTarget, ExtImport, ModTarget, Namespace, Missing]
UnitKey = tuple[str, int]  # (module, statement position in ModuleUnits.stmts)
_TYPE_ONLY = Missing("type-only", "bound only under `if TYPE_CHECKING`")
NAMESPACE_IMPORT = ExtImport("types")  # for the SimpleNamespace a lazy in-source module import becomes


@dataclass(frozen=True)
class ClosureIssue:
    """A name the closure could not follow: the name, where it is used, and why."""

    code: str
    name: str
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}: {self.message}"


@dataclass
class UnitPlan:
    key: UnitKey
    text: str
    binds: frozenset[str]
    refs: dict[str, Target] = field(default_factory=dict)
    builtins: set[str] = field(default_factory=set)  # builtin names it uses (never shadowed)
    chains: dict[str, tuple[Target, str]] = field(default_factory=dict)  # "H.f.x" -> (DefTarget f, ".x")
    # in-source imports inside the statement (lazy or conditional), replaced when assembling:
    # (first line, last line, indent) relative to ``text``, and the (local name, target) pairs
    rewrites: list[tuple[int, int, str, list[tuple[str, Target]]]] = field(default_factory=list)
    early: set[UnitKey] = field(default_factory=set)
    late: set[UnitKey] = field(default_factory=set)
    imports: set[ExtImport] = field(default_factory=set)  # the import statements it needs
    # in-source modules imported at module level that it uses as values (``getattr(ops, name)``),
    # bound after every copied statement to an object holding what each module exports
    values: dict[str, Namespace] = field(default_factory=dict)
    # of ``values``, those the statement reads as it runs (``getattr(surrogate, name)`` at module
    # level): bound just before it, after what they hold
    early_values: set[str] = field(default_factory=set)
    # a module-level assignment that loads a module by a name computed at run time (mmcv's
    # ``ext_module = load_ext('_ext', ...)``, a compiled extension): where that module is absent the
    # name is bound to a stand-in that raises the ImportError when used, so what never uses it runs
    deferred: bool = False
    # an import statement whose names the module binds again: copied as an assignment of each to
    # what it imports (``NAMES = NAMES_tables``), the first binding the later ones read
    aliases: dict[str, DefTarget | ExtImport] = field(default_factory=dict)


@dataclass
class Closure:
    source: str
    module: str
    qualname: str
    units: dict[UnitKey, UnitPlan]
    order: list[UnitKey]
    targets: dict[DefTarget, list[UnitKey]]
    issues: list[ClosureIssue]
    files: dict[str, str]  # path -> sha1 of every contributing file
    future: set[str]
    cyclic: bool = False
    lenders: list[str] = field(default_factory=list)  # other sources whose code was copied
    module_sources: dict[str, str] = field(default_factory=dict)  # copied module -> its source
    functions: set[UnitKey] = field(default_factory=set)  # the statements that define a function
    free: list[ClosureIssue] = field(default_factory=list)  # names bound nowhere, left free where only run-time code uses them
    # where copying every definition stopped at this issue, the block's own module copied and the
    # rest of its package imported from the installed distribution instead (``Extractor.importing``)
    imported_for: ClosureIssue | None = None
