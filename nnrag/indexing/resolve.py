"""Static name resolution across the modules of the index.

Answers "what does the name ``X`` mean in module ``M``?" by following, in the order Python binds
them, module-level definitions, imports of every form (absolute, relative, aliased, submodule
attributes), assignments that alias another name, star imports (through ``__all__`` or the public
names) and re-exports in ``__init__`` modules. A name resolves to a definition in the index, a
module, an external dotted name (outside the corpus), or an unresolved reason.

Lookups are by module name, preferring the asking module's own source, then the other sources in
priority order.
"""

from __future__ import annotations

import builtins
import functools
import importlib.metadata
import json
import os
import sqlite3
import sys
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from .bindings import module_bindings
from .parse import COND_EXCEPT, COND_IF, COND_TRY, COND_TYPE_CHECKING, KIND_ALIAS, KIND_ASSIGN, KIND_CLASS

_COND_RANK = {COND_TYPE_CHECKING: 0, COND_EXCEPT: 1, COND_IF: 2}
_GUARDS = frozenset({COND_TRY, COND_EXCEPT, COND_IF})  # imports that may fail where they run
_MAX_DEPTH = 64


@dataclass
class DefInfo:
    qualname: str
    kind: str
    lineno: int
    end_lineno: int
    cond: str
    bases: list[str] = field(default_factory=list)
    keywords: dict[str, str] = field(default_factory=dict)
    target: str | None = None
    forward: str | None = None
    methods: list[str] = field(default_factory=list)
    abstract: list[str] = field(default_factory=list)
    calls: dict[str, list[str]] = field(default_factory=dict)
    stubs: list[str] = field(default_factory=list)
    docstring: str | None = None


class Binding(NamedTuple):
    """What a module-level name is bound to."""

    kind: str  # "def" | "module" (import a.b as c) | "from" (from m import n)
    module: str | None = None
    name: str | None = None
    definition: DefInfo | None = None
    guarded: bool = False  # an import under try/except or if: it may fail, and its fallback counts


@dataclass
class ModuleInfo:
    file_id: int
    source_id: int
    module: str
    path: str
    is_package: bool
    defs: dict[str, DefInfo] = field(default_factory=dict)  # every definition, by qualname
    namespace: dict[str, Binding] = field(default_factory=dict)  # module-level bindings
    stars: list[str] = field(default_factory=list)  # absolute modules star-imported, in order
    # star imports under ``if TYPE_CHECKING:``: in a lazy package __init__ (the module replaced in
    # sys.modules by a lazy loader) they are the only statement of what the package exports
    checking_stars: list[str] = field(default_factory=list)
    all_names: list[str] | None = None
    generated_from: str | None = None  # the template its header names (``parse.generated_from``)
    # the names modules of the same load also have where a folder is on sys.path, shared by them
    aliases: PathAliases | None = field(default=None, repr=False, compare=False)

    def canonical(self, name: str) -> str:
        """The module an absolute import of ``name`` in this module means (see :class:`PathAliases`)."""
        return self.aliases.canonical(name, self) if self.aliases is not None else name


class Ref(NamedTuple):
    """The meaning of a name: kind is class|function|assign|module|external|guarded|unresolved."""

    kind: str
    target: str  # dotted name (module.qualname for definitions), or the reason when unresolved
    module: ModuleInfo | None = None
    definition: DefInfo | None = None
    # an external name no file here is seen to bind, bound by these star imports of modules outside
    # the corpus (in the order the source imports them): a copy imports them the same way
    stars: tuple[str, ...] = ()


def absolute_module(current: str, is_package: bool, level: int, module: str | None) -> str:
    """Resolve a relative import of ``level`` dots from module ``current``."""
    if level == 0:
        return module or ""
    parts = current.split(".") if current else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: max(0, len(parts) - (level - 1))]
    base = ".".join(parts)
    if module:
        return f"{base}.{module}" if base else module
    return base


@functools.lru_cache(maxsize=1)
def _distributed_tops() -> frozenset[str]:
    """Top-level modules the installed distributions provide, read from their metadata."""
    return frozenset(importlib.metadata.packages_distributions())


class PathAliases:
    """The names a module also has where a folder above it is on ``sys.path``. Research
    repositories run with a folder of theirs on the path (``_init_paths.py`` inserting ``lib``,
    ``sys.path.append(os.path.dirname(__file__))``) and their code imports ``from config import
    config`` for ``lib/config``, while other code of theirs names the same module ``lib.config``.
    Only a folder that is not a package can be such an entry, and only for code inside it: an
    absolute import that names no module of the index, nor the standard library, nor a top-level
    module an installed distribution provides, means the module of the importer's own source
    under the nearest such folder above the importer. A folder appended to the path comes after
    the installed distributions, and a folder of the repository named as one (``torch/`` of
    filters written again for torch) imports the distribution by that name."""

    def __init__(self, modules: Iterable[ModuleInfo]) -> None:
        modules = list(modules)
        self._known = {m.module for m in modules}
        self._found: dict[tuple[int, str], list[tuple[str, str]]] = {}  # (source, alias) -> [(folder, module)]
        for m in modules:
            parts = m.module.split(".")
            for i in range(1, len(parts)):
                folder = ".".join(parts[:i])
                if folder in self._known:  # a package: what lies below it is imported through it
                    break
                self._found.setdefault((m.source_id, ".".join(parts[i:])), []).append((folder, m.module))

    def canonical(self, name: str, importer: ModuleInfo) -> str:
        """The module an absolute import of ``name`` in ``importer`` means."""
        top = name.split(".")[0]
        if not name or name in self._known or top in sys.stdlib_module_names or top in _distributed_tops():
            return name
        above = [(folder, module) for folder, module in self._found.get((importer.source_id, name), ())
                 if importer.module.startswith(folder + ".")]
        return max(above, key=lambda fm: len(fm[0]))[1] if above else name


class Resolver:
    """Resolves names over an in-memory view of the index's modules."""

    def __init__(self, modules: list[ModuleInfo], source_priority: dict[int, int], guarded: bool = False) -> None:
        """``guarded``: a name another module binds by an optional import (under try/except or if)
        resolves to that statement (``Ref("guarded")``), as the closure copies it, rather than to
        what it imports (as discovery reads a base class)."""
        self.guarded = guarded
        self.modules = modules
        self._by_name: dict[str, list[ModuleInfo]] = {}
        for m in sorted(modules, key=lambda m: (source_priority.get(m.source_id, 99), m.source_id, m.path)):
            self._by_name.setdefault(m.module, []).append(m)
        self._cache: dict[tuple[int, str], Ref] = {}

    # -- modules -------------------------------------------------------------------------
    def module(self, name: str, source_id: int) -> ModuleInfo | None:
        candidates = self._by_name.get(name)
        if not candidates:
            return None
        for m in candidates:
            if m.source_id == source_id:
                return m
        return candidates[0]

    def exported(self, mod: ModuleInfo, _seen: frozenset[int] = frozenset()) -> set[str]:
        """Names ``from mod import *`` binds: ``__all__``, else every public name, star-imported ones too."""
        if mod.all_names is not None:
            return set(mod.all_names)
        names = {n for n in mod.namespace if not n.startswith("_")}
        for star in mod.stars:
            target = self.module(star, mod.source_id)
            if target is not None and target.file_id not in _seen and target is not mod:
                names |= {n for n in self.exported(target, _seen | {mod.file_id}) if not n.startswith("_")}
        return names

    # -- names ---------------------------------------------------------------------------
    def resolve_name(self, mod: ModuleInfo, name: str, depth: int = 0) -> Ref:
        key = (mod.file_id, name)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if depth > _MAX_DEPTH:
            return Ref("unresolved", f"import cycle while resolving {name!r} in {mod.module}")
        self._cache[key] = Ref("unresolved", f"cyclic definition of {name!r} in {mod.module}")
        ref = self._resolve_name(mod, name, depth)
        self._cache[key] = ref
        return ref

    def _resolve_name(self, mod: ModuleInfo, name: str, depth: int) -> Ref:
        binding = mod.namespace.get(name)
        if binding is not None:
            if binding.kind == "def":
                d = binding.definition
                assert d is not None
                if d.kind == KIND_ALIAS and d.target and d.target != name:
                    ref = self.resolve_dotted(mod, d.target, depth + 1)
                    if ref.kind != "unresolved":
                        return ref
                    # ``roi_align = RoIAlignFunction.apply``: an attribute inherited from outside the
                    # source; the assignment itself defines the name
                return Ref(d.kind, f"{mod.module}.{d.qualname}", mod, d)
            if binding.kind == "module":
                ref = self._module_ref(binding.module or "", mod.source_id)
            else:
                ref = self.module_attr(binding.module or "", binding.name or "", mod.source_id, depth + 1)
            if self.guarded and binding.guarded and ref.kind == "external":
                # ``try: import pyg_lib`` re-exported: the guarded statement, with its fallback, is
                # what the name means; importing the module unconditionally would fail where it is absent
                return Ref("guarded", f"{mod.module}.{name}", mod)
            return ref
        outside: list[str] = []  # star-imported modules outside the corpus, the last import first
        for star in reversed(mod.stars):
            target = self.module(star, mod.source_id)
            if target is None:
                outside.append(star)
                continue
            if target is not mod and name in self.exported(target):
                ref = self.resolve_name(target, name, depth + 1)
                if ref.kind != "unresolved":
                    return ref
            if target is not mod:
                # a star import of the source's own module that star-imports one from outside
                # (tsai's ``from ..imports import *``, which does ``from fastai.imports import *``)
                outside += self._external_stars(target)
        # the index cannot list what those bind: the one whose file here binds the name; else a
        # builtin (``str`` beside ``from fastai.losses import *``); else whichever of them binds it
        found = next((star for star in outside if external_defines(star, name)), None)
        if found is not None:
            return Ref("external", f"{found}.{name}")
        if hasattr(builtins, name):
            return Ref("external", f"builtins.{name}")
        if outside:
            return Ref("external", f"{outside[0]}.{name}", stars=tuple(dict.fromkeys(reversed(outside))))
        for star in reversed(mod.checking_stars):  # a lazy package's declared exports, last
            target = self.module(star, mod.source_id)
            if target is not None and target is not mod and name in self.exported(target):
                ref = self.resolve_name(target, name, depth + 1)
                if ref.kind != "unresolved":
                    return ref
        return Ref("unresolved", f"name {name!r} is not defined or imported in {mod.module} ({mod.path})")

    def _external_stars(self, mod: ModuleInfo, _seen: frozenset[int] = frozenset()) -> list[str]:
        """Modules outside the corpus that ``mod`` star-imports, directly or through its own stars."""
        found: list[str] = []
        for star in reversed(mod.stars):
            target = self.module(star, mod.source_id)
            if target is None:
                found.append(star)
            elif target.file_id not in _seen and target is not mod:
                found += self._external_stars(target, _seen | {mod.file_id})
        return found

    def _module_ref(self, name: str, source_id: int) -> Ref:
        m = self.module(name, source_id)
        return Ref("module", name, m) if m is not None else Ref("external", name)

    def module_attr(self, modname: str, attr: str, source_id: int, depth: int = 0) -> Ref:
        """The meaning of ``modname.attr`` (``from modname import attr``)."""
        mod = self.module(modname, source_id)
        if mod is not None:
            ref = self.resolve_name(mod, attr, depth + 1)
            if ref.kind != "unresolved":
                return ref
        sub = self.module(f"{modname}.{attr}", source_id)
        if sub is not None:
            return Ref("module", sub.module, sub)
        if mod is not None:
            return Ref("unresolved", f"{modname} ({mod.path}) defines no {attr!r}")
        return Ref("external", f"{modname}.{attr}" if modname else attr)

    def resolve_dotted(self, mod: ModuleInfo, dotted: str, depth: int = 0) -> Ref:
        """The meaning of a dotted expression such as ``nn.Module`` or ``H.make_divisible``."""
        parts = dotted.split(".")
        if not all(p.isidentifier() for p in parts):
            return Ref("unresolved", f"dynamic expression {dotted!r} in {mod.module}")
        ref = self.resolve_name(mod, parts[0], depth)
        for part in parts[1:]:
            if ref.kind == "module":
                ref = self.module_attr(ref.target, part, ref.module.source_id if ref.module else mod.source_id, depth)
            elif ref.kind == "external":
                # ``import src.utils.train`` where ``src/`` is a folder without ``__init__.py``: the
                # head names no module of the index, the whole dotted name does. An installed
                # distribution's name stays its own (``torch.nn.init`` read in torch's own modules)
                longer = f"{ref.target}.{part}"
                found = None if parts[0] in _distributed_tops() else self.module(longer, mod.source_id)
                ref = Ref("module", longer, found) if found is not None else Ref("external", longer)
            elif ref.kind == KIND_CLASS and ref.module is not None and ref.definition is not None:
                inner = ref.module.defs.get(f"{ref.definition.qualname}.{part}")
                if inner is None:
                    return Ref("unresolved", f"{ref.target} has no nested definition {part!r}")
                ref = Ref(inner.kind, f"{ref.module.module}.{inner.qualname}", ref.module, inner)
            else:
                return Ref("unresolved", f"cannot take attribute {part!r} of {ref.kind} {ref.target}")
        return ref


# -- loading -------------------------------------------------------------------------------
def _rank(cond: str, kind_rank: int, lineno: int) -> tuple[int, int, int]:
    return (_COND_RANK.get(cond, 3), kind_rank, lineno)


def load_modules(conn: sqlite3.Connection, sources: Iterable[int] | None = None) -> list[ModuleInfo]:
    """Read every parsed module of the index into memory, or those of the sources of these ids (an
    extractor needs its own source and its lenders: reading all of a wide index took seconds)."""
    modules: dict[int, ModuleInfo] = {}
    ids = None if sources is None else sorted(set(sources))
    only = "" if ids is None else f" AND source_id IN ({','.join('?' * len(ids))})"
    in_files = "" if ids is None else f"file_id IN (SELECT id FROM files WHERE status='ok'{only})"
    args = ids or []
    for file_id, source_id, module, path, all_names, generated_from in conn.execute(
        "SELECT id, source_id, module, path, all_names, generated_from FROM files WHERE status='ok'" + only, args
    ):
        modules[file_id] = ModuleInfo(
            file_id=file_id,
            source_id=source_id,
            module=module or "",
            path=path,
            is_package=path.endswith("__init__.py"),
            all_names=json.loads(all_names) if all_names else None,
            generated_from=generated_from,
        )
    ranks: dict[int, dict[str, tuple[int, int, int]]] = {fid: {} for fid in modules}
    aliases = PathAliases(modules.values())
    for info in modules.values():
        info.aliases = aliases

    def bind(fid: int, name: str, binding: Binding, rank: tuple[int, int, int]) -> None:
        if name not in ranks[fid] or rank >= ranks[fid][name]:
            ranks[fid][name] = rank
            modules[fid].namespace[name] = binding

    # No ORDER BY: the rank tuple ends with the line number, so row order does not matter.
    for row in conn.execute(
        "SELECT file_id, qualname, kind, lineno, end_lineno, cond, bases, keywords, target, forward, methods,"
        " abstract, calls, stubs, docstring FROM definitions" + (f" WHERE {in_files}" if in_files else ""), args
    ):
        mod = modules.get(row["file_id"])
        if mod is None:
            continue
        if row["kind"] == KIND_CLASS:
            d = DefInfo(
                qualname=row["qualname"],
                kind=row["kind"],
                lineno=row["lineno"],
                end_lineno=row["end_lineno"],
                cond=row["cond"],
                bases=json.loads(row["bases"]) if row["bases"] else [],
                keywords=json.loads(row["keywords"]) if row["keywords"] else {},
                forward=row["forward"],
                methods=json.loads(row["methods"]) if row["methods"] else [],
                abstract=json.loads(row["abstract"]) if row["abstract"] else [],
                calls=json.loads(row["calls"]) if row["calls"] else {},
                stubs=json.loads(row["stubs"]) if row["stubs"] else [],
                docstring=row["docstring"],
            )
        else:
            d = DefInfo(row["qualname"], row["kind"], row["lineno"], row["end_lineno"], row["cond"], target=row["target"])
        mod.defs[d.qualname] = d
        if "." not in d.qualname:
            bind(row["file_id"], d.qualname, Binding("def", definition=d), _rank(d.cond, 0 if d.kind == KIND_ASSIGN else 1, d.lineno))
    for fid, module, name, asname, level, lineno, cond in conn.execute(
        "SELECT file_id, module, name, asname, level, lineno, cond FROM imports WHERE scope=''"
        + (f" AND {in_files}" if in_files else ""), args
    ):
        mod = modules.get(fid)
        if mod is None:
            continue
        rank = _rank(cond, 1, lineno)
        if name is None:  # import a.b.c [as x]
            if asname:
                bind(fid, asname, Binding("module", module=mod.canonical(module), guarded=cond in _GUARDS), rank)
            else:
                head = module.split(".")[0]
                bind(fid, head, Binding("module", module=mod.canonical(head), guarded=cond in _GUARDS), rank)
            continue
        source_module = absolute_module(mod.module, mod.is_package, level, module)
        if not level:
            source_module = mod.canonical(source_module)
        if name == "*":
            (mod.checking_stars if cond == COND_TYPE_CHECKING else mod.stars).append(source_module)
            continue
        bind(fid, asname or name, Binding("from", module=source_module, name=name, guarded=cond in _GUARDS), rank)
    return list(modules.values())


def external_defines(module: str, name: str) -> bool:
    """Whether a module outside the corpus binds ``name`` at its top level, read from its file on
    this Python's path, never imported; False where no such file is found, or where the module's
    own star imports leave what it binds open."""
    bound = _external_bindings(module)
    return bound is not None and name in bound


@functools.lru_cache(maxsize=64)  # one file lookup and parse per module, not per name
def _external_bindings(module: str) -> frozenset[str] | None:
    parts = module.split(".")
    for entry in sys.path:
        base = os.path.join(entry or ".", *parts)
        for path in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(path):
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        bound = module_bindings(fh.read())
                except OSError:
                    return None
                return frozenset(bound) if bound is not None else None
    return None
