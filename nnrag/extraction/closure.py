"""The dependency closure of a block: every top-level statement of its source it needs, transitively.

Each statement's global names come from :mod:`nnrag.extraction.scope` (the compiler's scoping);
each name is then followed in its module: to the statements that bind it there (definitions,
assignments, compound ``try``/``if`` statements, plus statements that fill a registry in place),
through imports of every form with :class:`~nnrag.indexing.resolve.Resolver`, or out of the
source, where it stays an import statement. Dependencies always come from the block's own source:
a name from another source, indexed or not, is an external import.
"""

from __future__ import annotations

import ast
import copy
import sqlite3
from dataclasses import replace
from pathlib import Path

from ..errors import NATIVE_EXTENSION, UNRESOLVED_NAME
from ..indexing.resolve import ModuleInfo, Ref, Resolver, absolute_module, load_modules
from .fillers import without_failing_fillers
from ..sourcing.spec import KIND_PYPI
from .lending import imported_lenders
from .native import declared_extensions, is_extension, loads_library_by_path, ships_extension_sources
from .order import order_units
from .patches import Patches
from .registries import RegistryNames
from .plan import (
    Closure,
    ClosureIssue,
    DefTarget,
    ExtImport,
    Missing,
    ModTarget,
    NAMESPACE_IMPORT,
    Namespace,
    Target,
    UnitKey,
    UnitPlan,
    _TYPE_ONLY,
)
from .requirements import distributed, installed
from .parsed import ParsedModules
from .scope import UnitNames
from .units import ModuleUnits, first_use
from .unavailable import builds_extension, deferrable, loads_by_name

MODULE_DUNDERS = frozenset(
    {"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__", "__path__",
     "__annotations__", "__dict__", "__debug__", "__cached__"}
)

_SUBMODULE_DEPTH = 4  # submodules read through a lazily imported package, levels down
# A submodule used as a value brings every definition it exports; past this many (a library's
# model-class tables, its import utilities: 105 and 272 definitions, a 4 MB file that still fails)
# the block is refused with that reason instead.
_VALUE_EXPORTS = 64


class Extractor(RegistryNames):
    """Computes closures for the blocks of one source, caching parsed modules across blocks.

    A package the source imports but does not hold is copied from another indexed source that
    does (the lowest ``priority`` wins: mmdet's blocks take ``mmcv`` from an indexed mmcv), unless
    an installed distribution provides it and ``prefer`` is ``installed``: then it stays an import.
    """

    def __init__(self, conn: sqlite3.Connection, source: str, prefer: str = "installed") -> None:
        row = conn.execute("SELECT id, root, kind FROM sources WHERE name=?", (source,)).fetchone()
        if row is None:
            raise KeyError(source)
        self.conn = conn
        self.source = source
        self.source_id: int = row["id"]
        self.root = Path(row["root"]) if row["root"] else None
        lent = imported_lenders(conn, self.source_id, prefer)  # what its code reaches, as its extraction key says
        everything = load_modules(conn, {self.source_id, *lent.values()})
        own = [m for m in everything if m.source_id == self.source_id]
        others = conn.execute("SELECT id, name, root, priority, kind FROM sources WHERE id != ? ORDER BY priority, name",
                              (self.source_id,)).fetchall()
        self.roots = {self.source_id: self.root, **{o["id"]: Path(o["root"]) if o["root"] else None for o in others}}
        self.names = {self.source_id: source, **{o["id"]: o["name"] for o in others}}
        self.kinds = {self.source_id: row["kind"], **{o["id"]: o["kind"] for o in others}}
        modules = own + [m for m in everything if lent.get(m.module.split(".")[0]) == m.source_id]
        priority = {self.source_id: -1, **{o["id"]: o["priority"] for o in others}}
        self.resolver = Resolver(modules, priority, guarded=True)
        self.infos: dict[str, ModuleInfo] = {}
        for m in modules:
            self.infos.setdefault(m.module, m)
        ids = sorted({self.source_id, *lent.values()})
        self._sha1 = {
            r["id"]: r["sha1"] for r in conn.execute(
                f"SELECT id, sha1 FROM files WHERE source_id IN ({','.join('?' * len(ids))}) AND status='ok'", ids)
        }
        self._units = ParsedModules(self._parse)
        self._bind_cache: dict[tuple[str, str], Target | None] = {}
        self._nested: dict[tuple[str, int], list[tuple[int, int, str, list[tuple[str, Target]], bool]]] = {}
        # Every standalone file imports torch anyway: blocks of torch itself keep importing the rest
        # of torch instead of copying it (a copied Conv3d would carry 3,700 lines of torch.nn).
        self.inline = not all(m.module == "torch" or m.module.startswith("torch.") for m in own)
        self._home = ""
        self._importing: Extractor | None = None
        self._native: dict[str, bool] = {}
        self._loads: dict[UnitKey, bool] = {}  # per statement: a large source's closures share thousands
        self._namespaces: dict[tuple[str, int, str, ModTarget, str], Namespace | Missing] = {}

    def importing(self, module: str) -> "Extractor | None":
        """This source's extractor that copies only a block's own module and imports the rest of the
        package, as torch's blocks do: the fallback where a closure cannot be copied (lazy-import
        tables: 6,768 transformers blocks). None where this one already imports, or where no
        installed distribution provides the package (the file could not run). Shares parsed modules."""
        if not self.inline or not distributed(module.split(".")[0]):
            return None
        if self._importing is None:
            sibling = copy.copy(self)
            sibling.inline = False
            sibling._home, sibling._bind_cache, sibling._nested, sibling._loads = "", {}, {}, {}
            sibling._namespaces = {}
            self._importing = sibling
        return self._importing

    # -- modules ------------------------------------------------------------------------
    def units_of(self, module: str) -> ModuleUnits:
        return self._units.get(module)

    def _parse(self, module: str) -> ModuleUnits:
        info = self.infos[module]
        return ModuleUnits(module, info.path, self.text_of(module), info.is_package)

    def sha1_of(self, module: str) -> str:
        return self._sha1[self.infos[module].file_id]

    def file_of(self, module: str) -> str:
        """The module's path, prefixed by its source when another source lends it (``mmcv:mmcv/ops/nms.py``)."""
        info = self.infos[module]
        return info.path if info.source_id == self.source_id else f"{self.names[info.source_id]}:{info.path}"

    def lenders(self, modules: set[str]) -> list[str]:
        """The other sources whose modules are among ``modules``."""
        return sorted({self.names[self.infos[m].source_id] for m in modules if self.infos[m].source_id != self.source_id})

    def _inside(self, dotted: str) -> str | None:
        """The longest proper prefix of ``dotted`` that is a module of this source, if any."""
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in self.infos:
                return prefix
        return None

    def _released_compiled(self, dotted: str, owner: str) -> bool:
        """Whether ``dotted`` (under module ``owner``) is a compiled module that the distribution of
        a PyPI source ships built for this platform (compressai's ``_CXX``): the copy imports it from
        that release, which the block's environment installs, as it would import any distribution."""
        info = self.infos[owner]
        root = self.roots.get(info.source_id)
        tail = dotted[len(owner) + 1:].split(".")[0]
        return self.kinds.get(info.source_id) == KIND_PYPI and root is not None \
            and is_extension((root / info.path).parent, tail)

    def _missing_module(self, dotted: str, owner: str) -> Missing:
        """``dotted`` lies inside the source (under module ``owner``) but no Python file provides it."""
        tail = dotted[len(owner) + 1 :].split(".")[0]
        missing = f"{owner}.{tail}"
        owner_info = self.infos[owner]
        root = self.roots.get(owner_info.source_id)
        if root is not None:
            folder = (root / owner_info.path).parent
            if is_extension(folder, tail):
                return Missing(NATIVE_EXTENSION, f"{missing} is a compiled extension module, not Python source")
            if ships_extension_sources(folder):
                return Missing(NATIVE_EXTENSION, f"{missing} is an extension module compiled from the C++/CUDA sources "
                                                 "beside it, which could not be built here")
        return Missing(UNRESOLVED_NAME, f"{missing} is not a Python module of source {self.source}", absent=True)

    def _builds(self, module: str) -> bool:
        """Whether a ``setup.py`` of the source builds the top-level module of ``module``: an import
        of it inside a statement (``try: import MultiScaleDeformableAttention as MSDA``, which
        re-raises with build instructions) is rewritten to a stand-in like an in-source one."""
        return self._built_here(module.split(".")[0]) is not None

    def _built_here(self, top: str) -> Missing | None:
        """``import MultiScaleDeformableAttention as MSDA``: a top-level extension module that a
        ``setup.py`` of the source builds, not a distribution of any index (pip was asked for it
        before); never built in a checkout."""
        root = self.roots.get(self.source_id)
        script = declared_extensions(root).get(top) if root is not None else None
        if script is None:
            return None
        return Missing(NATIVE_EXTENSION, f"{top} is an extension module that {script} of source {self.source} "
                                         "compiles from C++/CUDA sources, which could not be built here")

    def _rests_on_extension(self, module: str) -> Missing | None:
        """What makes ``module``, one of the source's, fail on import where its compiled extension
        was never built: an import at its top of such an extension, none where it has none."""
        if module not in self.infos:
            return None
        mu = self.units_of(module)
        for name, ks in sorted(mu.binders.items()):
            if any(mu.stmts[k].is_import for k in ks):  # statements of the module's top, never guarded
                target = self.bind(mu, name)
                if isinstance(target, Missing) and target.code == NATIVE_EXTENSION:
                    return target
        return None

    # -- names --------------------------------------------------------------------------
    def bind(self, mu: ModuleUnits, name: str) -> Target | None:
        """What ``name`` means at module level of ``mu``; None for builtins."""
        key = (mu.module, name)
        if key in self._bind_cache:
            return self._bind_cache[key]
        self._bind_cache[key] = None  # cycles through aliases terminate
        target = self.keep_import(self._bind(mu, name), name)
        self._bind_cache[key] = target
        return target

    def loads_native(self, module: str) -> bool:
        """Whether ``module`` loads a compiled library its package ships (torchvision's
        ``extension`` loads ``_C_stable.so`` from its own folder, and ``torchvision.ops`` asks it
        whether that worked). A copy, away from that folder, finds no library and every op fails;
        so where an installed distribution provides the package, the module stays an import of it."""
        known = self._native.get(module)
        if known is None:
            info = self.infos.get(module)
            root = self.roots.get(info.source_id) if info else None
            known = bool(info and root and installed(module.split(".")[0])
                          and loads_library_by_path(self.text_of(module), (root / info.path).parent))
            self._native[module] = known
        return known

    def keep_import(self, target: Target | None, local: str) -> Target | None:
        """Without inlining, only the block's own module is copied; the rest stays imported. A
        module that loads a compiled library from its folder stays imported too (``loads_native``)."""
        if not isinstance(target, (DefTarget, ModTarget)) or (self.inline and not self.loads_native(target.module)):
            return target
        if isinstance(target, DefTarget) and target.module != self._home:
            return ExtImport(target.module, target.name, local if local != target.name else None)
        if isinstance(target, ModTarget) and target.module != self._home and target.module in self.infos:
            head = target.module.split(".")[0]
            return ExtImport(target.module, None, None if local == head and target.module == head else local)
        return target

    def _bind(self, mu: ModuleUnits, name: str) -> Target | None:
        if name in MODULE_DUNDERS:
            return None
        all_binders = mu.binders.get(name, [])
        binders = [k for k in all_binders if not mu.stmts[k].type_checking]
        if all_binders and not binders:
            return _TYPE_ONLY
        if any(not mu.stmts[k].is_import for k in binders):
            return DefTarget(mu.module, name)
        if binders:
            node = mu.stmts[binders[-1]].node
            assert isinstance(node, (ast.Import, ast.ImportFrom))
            return self.import_target(mu, node, name)
        ref = self.resolver.resolve_name(self.infos[mu.module], name)
        if ref.kind == "external" and ref.target == f"builtins.{name}":
            return None
        target = self.from_ref(ref, name)
        return replace(target, unbound=True) if isinstance(target, Missing) and ref.kind == "unresolved" else target

    def import_target(self, mu: ModuleUnits, node: ast.Import | ast.ImportFrom, local: str) -> Target:
        """What the ``local`` name bound by one import statement of ``mu`` means."""
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname == local or (a.asname is None and a.name.split(".")[0] == local):
                    dotted = self.infos[mu.module].canonical(a.name if a.asname else local)
                    if dotted in self.infos:
                        return ModTarget(dotted)
                    owner = self._inside(dotted)
                    if owner is not None:
                        return self._missing_module(dotted, owner)
                    if not a.asname and any(m.startswith(local + ".") for m in self.infos):
                        return ModTarget(local, ExtImport(a.name))  # a folder of the source
                    return self._built_here(a.name.split(".")[0]) or ExtImport(a.name, None, a.asname)
            raise LookupError(local)
        module = self._absolute(mu, node)
        for a in node.names:
            if (a.asname or a.name) != local:
                continue
            if node.level or module in self.infos or self._inside(module) is not None:
                # parsed for this: the index records an import in a ``try`` as an import, not as the
                # module's own binding (measured: 200 s against 191 s for 300 blocks)
                if module in self.infos and self.units_of(module).rebound_imports(a.name):
                    return DefTarget(module, a.name)  # what the module makes of it, as ``bind`` reads it there
                ref = self.resolver.module_attr(module, a.name, self.source_id)
                if ref.kind == "unresolved" and module in self.infos and a.name not in self.infos[module].namespace \
                        and not self.infos[module].stars:
                    # ``from . import deform_conv_ext``: neither a name of the package nor a file of it
                    if self._released_compiled(f"{module}.{a.name}", module):
                        return ExtImport(module, a.name, a.asname)
                    return self._missing_module(f"{module}.{a.name}", module)
                return self.from_ref(ref, local)
            if any(m.startswith(module + ".") for m in self.infos):
                sub = f"{module}.{a.name}"
                return ModTarget(sub) if sub in self.infos else self.from_ref(self.resolver.module_attr(module, a.name, self.source_id), local)
            return self._built_here(module.split(".")[0]) or ExtImport(module, a.name, a.asname)
        raise LookupError(local)

    def _absolute(self, mu: ModuleUnits, node: ast.ImportFrom) -> str:
        """The module a ``from ... import`` of ``mu`` reads, as the index names it."""
        module = absolute_module(mu.module, mu.is_package, node.level, node.module)
        return module if node.level else self.infos[mu.module].canonical(module)

    def from_ref(self, ref: Ref, local: str) -> Target:
        if ref.kind == "module":
            return ModTarget(ref.target)
        if ref.kind == "guarded":  # the guarded import statement of that module, copied as written
            assert ref.module is not None
            return DefTarget(ref.module.module, ref.target.rsplit(".", 1)[-1])
        if ref.kind == "unresolved":
            return Missing(UNRESOLVED_NAME, ref.target)
        if ref.kind == "external":
            owner = self._inside(ref.target)
            if owner is not None and not self._released_compiled(ref.target, owner):
                return self._missing_module(ref.target, owner)
            if (built := self._built_here(ref.target.split(".")[0])) is not None:
                return built
            if "." not in ref.target:
                return ExtImport(ref.target, None, local if local != ref.target else None)
            module, attr = ref.target.rsplit(".", 1)
            return ExtImport(module, attr, local if local != attr else None, ref.stars)
        assert ref.module is not None and ref.definition is not None
        return DefTarget(ref.module.module, ref.definition.qualname.split(".")[0])

    def units_for(self, target: DefTarget, lift: bool = False) -> list[UnitKey]:
        """The statements that bind or fill ``target``; with ``lift``, a class defined only in a
        branch of an ``if``/``try`` is its own statement instead of the whole conditional."""
        mu = self.units_of(target.module)
        ks = [k for k in mu.binders.get(target.name, []) if not mu.stmts[k].type_checking and not mu.stmts[k].is_import]
        if lift and target.name in mu.lifted:
            ks = [mu.lifted[target.name]]
        ks += mu.rebound_imports(target.name) + mu.mutators.get(target.name, [])
        return [(target.module, k) for k in sorted(set(ks))]

    # -- closure ------------------------------------------------------------------------
    def closure(self, module: str, qualname: str, registered: frozenset[str] = frozenset(),
                classes: frozenset[tuple[str, str]] = frozenset()) -> Closure:
        """The statements that define ``qualname`` of ``module`` and everything they need.
        ``registered``: names a registry of the copied code will be asked to build beyond those
        the copied code spells (the types of configs it was seen built with); ``classes``:
        ``(module, qualname)`` of definitions to copy beside it (classes it was seen built
        with, ``block=BasicBlock``), those of modules this source or its lenders hold."""
        self._units.block_done()
        if not self.inline and module != self._home:
            self._bind_cache.clear()
        self._home = module
        return ClosureWalk(self, module, qualname, registered, classes).run()

    def defer_computed_loads(self, units: dict[UnitKey, UnitPlan]) -> None:
        """Mark as ``deferred`` the module-level assignments that load a module by a name computed at
        run time or compile an extension, themselves or by calling a copied function that does
        (``load_ext``). A class is no such function: calling it runs ``__init__``, not the method
        that loads."""
        node_of = {k: self.units_of(k[0]).stmts[k[1]].node for k in units}
        self._loads.update((k, not isinstance(n, ast.ClassDef) and (loads_by_name(n) or builds_extension(n, units[k].refs)))
                           for k, n in node_of.items() if k not in self._loads)
        loaders = {k for k in node_of if self._loads[k]}
        for k, p in units.items():
            if (k in loaders or p.early & loaders) and deferrable(node_of[k]):
                p.deferred = True

    def chain(self, mu: ModuleUnits, chain: str) -> tuple[Target, str]:
        parts = chain.split(".")
        info = self.infos[mu.module]
        for i in range(2, len(parts) + 1):
            ref = self.resolver.resolve_dotted(info, ".".join(parts[:i]))
            if ref.kind == "module":
                continue
            rest = "".join("." + p for p in parts[i:])
            if ref.definition is None:  # external, unresolved, or a guarded import re-exported
                return self.from_ref(ref, parts[i - 1]), rest
            assert ref.module is not None
            top, _, inner = ref.definition.qualname.partition(".")
            return DefTarget(ref.module.module, top), ("." + inner if inner else "") + rest
        return Missing(UNRESOLVED_NAME, f"module {chain} is used as a value"), ""

    def namespace(self, mu: ModuleUnits, k: int, local: str, t: ModTarget) -> Namespace | Missing:
        """What a statement reads of a module it imports as ``local``; the same for every block that
        copies the statement (what stays imported depends on the block's module only without inlining)."""
        key = (mu.module, k, local, t, "" if self.inline else self._home)
        found = self._namespaces.get(key)
        if found is None:
            nodes = list(ast.walk(mu.stmts[k].node))
            found = self._module_reads(t.module, [n for n in nodes if isinstance(n, ast.Name) and n.id == local], nodes)
            self._namespaces[key] = found
        return found

    def _module_reads(self, module: str, refs: list[ast.AST], nodes: list[ast.AST], depth: int = 0) -> Namespace | Missing:
        """What ``nodes`` read of ``module`` through the expressions ``refs`` (each evaluating to it):
        each ``ref.attr`` as a copied definition or an import, a submodule as a namespace of its own
        (``dist.utils.filter_dist_store``, ``transformers.utils.import_utils``); where the module
        itself is used as a value (``vars(aggr)``, ``getattr(auto.modeling_auto, name)``), every
        definition it exports."""
        reads = [n for n in nodes if isinstance(n, ast.Attribute) and any(n.value is r for r in refs)]
        attrs: dict[str, Target] = {}
        for attr in dict.fromkeys(n.attr for n in reads):
            ref = self.resolver.module_attr(module, attr, self.source_id)
            target: Target = self.keep_import(self.from_ref(ref, attr), attr)
            if isinstance(target, ModTarget) and depth < _SUBMODULE_DEPTH:
                target = self._module_reads(target.module, [n for n in reads if n.attr == attr], nodes, depth + 1)
                if isinstance(target, Missing):  # said where it happened, one level down
                    return target
            attrs[attr] = target
        if any(not any(n.value is r for n in reads) for r in refs):  # used as a value
            exports = self.exports(module, set(attrs))
            if depth and len(exports) > _VALUE_EXPORTS:
                return Missing(UNRESOLVED_NAME, f"{module} is used as a value through a lazy import: its "
                                                f"{len(exports)} definitions are more than a block file copies ({_VALUE_EXPORTS})")
            attrs.update(exports)
        for attr, target in attrs.items():
            if isinstance(target, (Missing, ModTarget)):
                why = target.message if isinstance(target, Missing) else "a module"
                return Missing(UNRESOLVED_NAME, f"{module}.{attr} ({why}) is read through a lazy import")
        return Namespace(module, tuple(sorted(attrs.items())))

    def exports(self, module: str, skip: set[str]) -> dict[str, Target]:
        """Every definition ``module`` exports, for code that uses the module itself as a value
        (what it merely imports is left out)."""
        info = self.infos.get(module)
        found: dict[str, Target] = {}
        for name in sorted(self.resolver.exported(info)) if info is not None else []:
            if name not in skip:
                ref = self.resolver.module_attr(module, name, self.source_id)
                if ref.kind == "guarded":  # an import under if/try (``import sys`` beside a lazy module)
                    continue
                t = self.keep_import(self.from_ref(ref, name), name)
                if isinstance(t, DefTarget):
                    found[name] = t
        return found

    def nested_imports(self, mu: ModuleUnits, k: int) -> list[tuple[int, int, str, list[tuple[str, Target]], bool]]:
        """In-source imports inside a copied statement, with what each bound name means, and whether
        the import runs with the statement (in a branch of a module-level ``if``/``try``) rather than
        when a function it defines is called."""
        cached = self._nested.get((mu.module, k))
        if cached is not None:
            return cached
        st = mu.stmts[k]
        out: list[tuple[int, int, str, list[tuple[str, Target]], bool]] = []
        has_import = any("import" in line for line in mu.lines[st.start - 1 : st.end])
        guarded = isinstance(st.node, ast.Try)  # the imports of a module-level ``try`` that catches their failure
        in_functions = {id(n) for f in (ast.walk(st.node) if has_import else ())
                        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                        for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(st.node) if has_import else ():
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node is st.node:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.module == "__future__":
                    continue
                module = self._absolute(mu, node)
                inside = node.level > 0 or module in self.infos or self._inside(module) is not None
                inside = inside or any(m.startswith(module + ".") for m in self.infos) or self._builds(module)
                locals_ = [a.asname or a.name for a in node.names if a.name != "*"]
            else:
                names = [self.infos[mu.module].canonical(a.name) for a in node.names]
                inside = any(n in self.infos or self._inside(n) or n.split(".")[0] in self.infos or self._builds(n)
                             for n in names)
                locals_ = [a.asname or a.name.split(".")[0] for a in node.names]
            if not inside:
                continue
            pairs = [(local, self.keep_import(self.import_target(mu, node, local), local)) for local in locals_]
            if guarded and isinstance(node, ast.ImportFrom) and (native := self._rests_on_extension(module)) is not None:
                # ``try: from extensions.kernels.vandermonde import log_vandermonde_cuda`` / ``except:
                # has_cuda_extension = False``: a module of the source that imports a compiled
                # extension at its top fails to import in the copy, as it does where it was never built
                failing = replace(native, message=f"{module} imports a compiled extension: {native.message}", fails_import=True)
                pairs = [(local, failing) for local in locals_]
            first = node.lineno - st.start
            last = (node.end_lineno or node.lineno) - st.start
            line = mu.lines[node.lineno - 1]
            indent = line[st.dedent : len(line) - len(line.lstrip())]
            out.append((first, last, indent, pairs, id(node) not in in_functions))
        self._nested[(mu.module, k)] = out
        return out


class ClosureWalk:
    """One block's closure, computed: a worklist walk from the statements that define the block
    through every statement they need. Each statement taken off the worklist is planned once (its
    names bound in its module, each binding linked as an early or late dependency, in-source imports
    inside it noted for rewriting); statements that fill a registry or patch a class the copied code
    uses join the walk when it would otherwise end. The walk owns the collections it grows; the
    :class:`Extractor` answers what names mean and is shared by every block of a source."""

    def __init__(self, ex: Extractor, module: str, qualname: str, registered: frozenset[str],
                 classes: frozenset[tuple[str, str]]) -> None:
        self.ex = ex
        self.module, self.qualname, self.classes = module, qualname, classes
        self.top = DefTarget(module, qualname.split(".")[0])
        self.targets: dict[DefTarget, list[UnitKey]] = {}
        self.units: dict[UnitKey, UnitPlan] = {}
        self.issues: list[ClosureIssue] = []
        self.issue_keys: list[UnitKey] = []  # the statement each issue was found in
        self.pending: list[UnitKey] = []
        # statements of a copied module that fill a registry another module defines
        # (``MODELS.register_module('Conv2d', module=nn.Conv2d)`` in mmcv, MODELS from mmengine)
        self.foreign: dict[DefTarget, list[UnitKey]] = {}
        self.visited: set[str] = set()
        self.tops: set[str] = set()  # top-level packages of the statements copied so far
        self.fillers: set[UnitKey] = set()  # statements that only fill a registry, in this module or another
        self.free: list[tuple[UnitKey, ClosureIssue]] = []  # names bound nowhere that only run-time code uses
        self.patches = Patches()
        self.strings: set[str] = set(registered)  # class-like string constants of the statements copied
        self.evaluating: set[str] = set()  # modules whose copied statements look names up at run time
        self.named: list[UnitKey] = []  # definitions of the classes copied strings name: needed, never fillers
        self.statements: set[UnitKey] = set()  # registering statements copied for a string
        self.own: frozenset[UnitKey] = frozenset()  # the statements defining the block itself

    # -- the worklist -------------------------------------------------------------------
    def want(self, t: DefTarget) -> list[UnitKey]:
        """The statements binding ``t``, queued the first time it is wanted."""
        if t not in self.targets:
            self.targets[t] = self.ex.units_for(t, lift=t == self.top) + self.foreign.get(t, [])
            self.fillers.update((t.module, k) for k in self.ex.units_of(t.module).mutators.get(t.name, []))
            self.fillers.update(self.foreign.get(t, []))
            self.pending.extend(self.targets[t])
        return self.targets[t]

    def visit(self, mu: ModuleUnits) -> None:
        """The first statement copied from ``mu``: its patches and the registries it fills elsewhere."""
        self.visited.add(mu.module)
        self.patches.add(mu, lambda root: isinstance(self.ex.bind(mu, root), ExtImport))
        for name, ks in mu.mutators.items():
            t = self.ex.bind(mu, name)
            if not isinstance(t, DefTarget) or t.module == mu.module:
                continue
            keys = [(mu.module, k) for k in ks]
            self.fillers.update(keys)
            self.foreign.setdefault(t, []).extend(keys)
            if t in self.targets:
                self.targets[t].extend(keys)
                self.pending.extend(keys)

    def by_name(self) -> bool:
        """Classes a registry builds from a copied string (``dict(type='DropPath')``, or
        ``'mmdet.CrossEntropyLoss'`` with the registry's scope), registered by a decorator or a
        statement in a package the copied code comes from (not in every source that happens
        to define the name); and those a module that evaluates names binds under such a string.
        True when that adds statements to copy."""
        ex = self.ex
        # a module whose copied code looks a name up at run time (``globals()[model_type]``,
        # ``eval(self.config.dec_blk)``): what it binds under a name a copied string spells
        for module in sorted(self.evaluating):
            mu = ex.units_of(module)
            for text in sorted(t for t in self.strings if t.isidentifier() and t in mu.binders):
                t = ex.bind(mu, text)
                if isinstance(t, DefTarget) and t not in self.targets:
                    self.want(t)
                    self.named.extend(ex.units_for(t))
        for text in sorted(self.strings):
            name = text.rsplit(".", 1)[-1]
            # the name a decorator gives, then a registering statement, then a class's own name
            # (mmcv registers its Conv2d class as 'Conv', and nn.Conv2d as 'Conv2d')
            t = ex.aliases.get(name)
            key = ex.registrations.get(name) if t is None else None
            if t is None and key is None:
                t = ex.registered.get(name)
            if t is not None and t not in self.targets and t.module.split(".")[0] in self.tops:
                self.want(t)
                self.named.extend(ex.units_for(t))
            elif key is not None and key not in self.statements and key[0].split(".")[0] in self.tops:
                self.statements.add(key)  # the registering statement, with what it needs
                self.pending.append(key)
                self.named.append(key)
        return bool(self.pending)

    def patched(self) -> bool:
        """True when a patch of a class the copied code reads joins the walk."""
        found = self.patches.needed(self.units, self.ex.units_of)
        self.fillers.update(found)
        self.pending.extend(found)
        return bool(found)

    def run(self) -> Closure:
        self.own = frozenset(self.want(self.top))
        for module_name, name in sorted(self.classes):
            if module_name in self.ex.infos:
                self.named.extend(self.want(DefTarget(module_name, name.split(".")[0])))
        while self.pending or self.by_name() or self.patched():
            key = self.pending.pop()
            if key not in self.units:
                self.plan(key)
        if self.issues:
            self.prune()
        return self.closure()

    # -- one statement ------------------------------------------------------------------
    def plan(self, key: UnitKey) -> None:
        """Plan the statement ``key``: bind each name it uses and link what it needs."""
        ex = self.ex
        mu = ex.units_of(key[0])
        if mu.module not in self.visited and ex.inline:
            self.visit(mu)
        st = mu.stmts[key[1]]
        names = mu.names(key[1])
        plan = UnitPlan(key, mu.text_of(key[1]), st.binds if not st.is_import else mu.rebound_names(key[1]))
        self.units[key] = plan
        if st.is_import:
            self._rebound_imports(mu, st.node, plan, names)  # type: ignore[arg-type]
        self._global_names(mu, plan, names)
        self.tops.add(key[0].split(".")[0])
        if ex.inline:
            self.strings.update(names.strings)
            if "globals()" in plan.text or "eval(" in plan.text:
                self.evaluating.add(mu.module)
        self.nested_imports(mu, plan, names)

    def issue(self, mu: ModuleUnits, plan: UnitPlan, names: UnitNames, name: str, missing: Missing) -> None:
        line = mu.stmts[plan.key[1]].start + first_use(plan.text, name) - 1
        found = ClosureIssue(missing.code, name, mu.path, line, missing.message)
        if missing.unbound and name not in names.early:  # left free, as the original leaves it
            self.free.append((plan.key, found))
            return
        self.issues.append(found)
        self.issue_keys.append(plan.key)

    def link(self, plan: UnitPlan, t: Target, early: bool) -> None:
        """Record what ``t`` needs copied (or imported) as a dependency of ``plan``'s statement."""
        key = plan.key
        if isinstance(t, DefTarget):
            # a name the statement binds or fills itself (``except ImportError as e``,
            # ``urls["a"] = ...``) means its definition or an earlier statement of the same
            # module, never a later one, nor what other modules fill it with
            deps = self.want(t)
            own = key in deps or (t.module == key[0] and t.name in plan.binds)
            for dep in deps:
                later = dep[0] == key[0] and dep[1] > key[1]
                elsewhere = dep[0] != key[0] and dep[0] != t.module
                if dep != key and not (own and (later or elsewhere)):
                    (plan.early if early else plan.late).add(dep)
        elif isinstance(t, ExtImport):
            plan.imports.add(t)

    def _rebound_imports(self, mu: ModuleUnits, node: ast.Import | ast.ImportFrom, plan: UnitPlan,
                         names: UnitNames) -> None:
        """An import statement whose names the module binds again: each name linked to what it imports."""
        for local in sorted(plan.binds):
            t = self.ex.keep_import(self.ex.import_target(mu, node, local), local)
            if isinstance(t, Missing):
                self.issue(mu, plan, names, local, t)
            elif isinstance(t, (DefTarget, ExtImport)):
                plan.aliases[local] = t
                self.link(plan, t, True)
            else:
                self.issue(mu, plan, names, local,
                           Missing(UNRESOLVED_NAME, f"module {t.module} is imported, then rebound"))  # type: ignore[union-attr]

    def _global_names(self, mu: ModuleUnits, plan: UnitPlan, names: UnitNames) -> None:
        """Each global name the statement uses, bound in its module and linked."""
        for name in sorted(names.early | names.late | names.soft):
            t = self.ex.bind(mu, name)
            if t is None:
                if name not in MODULE_DUNDERS:
                    plan.builtins.add(name)
                continue
            if t is _TYPE_ONLY:
                continue
            soft = name not in names.early and name not in names.late
            # a string annotation is never evaluated: nothing to copy, except where the block
            # itself names what a user builds it from or calls it with (``config: BlockConfig``,
            # a dataclass of the source): without it the file cannot be used, nor the probe guess it
            if soft and not isinstance(t, ExtImport) and not (plan.key in self.own and isinstance(t, DefTarget)):
                continue
            if isinstance(t, Missing):
                self.issue(mu, plan, names, name, t)
                continue
            plan.refs[name] = t
            if isinstance(t, ModTarget):
                self._module_name(mu, plan, names, name, t)
            else:
                self.link(plan, t, name in names.early)

    def _module_name(self, mu: ModuleUnits, plan: UnitPlan, names: UnitNames, name: str, t: ModTarget) -> None:
        """A name bound to a module of the source: used as a value, or read through attribute chains."""
        if name in names.bare:  # ``getattr(ops, name)`` when the statement runs, or as it runs
            value = Namespace(t.module, tuple(sorted(self.ex.exports(t.module, set()).items())))
            plan.values[name] = value
            plan.imports.add(NAMESPACE_IMPORT)
            early = name in names.early
            if early:
                plan.early_values.add(name)
            for leaf in value.leaves():
                self.link(plan, leaf, early)
        for chain in sorted(c for c in names.chains if c.split(".", 1)[0] == name):
            resolved = self.ex.chain(mu, chain)
            if t.fallback is not None and isinstance(resolved[0], (ExtImport, Missing)):
                plan.imports.add(t.fallback)
                continue
            if isinstance(resolved[0], Missing):
                # an annotation kept as a string is never evaluated: naming nothing costs nothing
                # (gpytorch's ``-> exact_prediction_strategies.PredictionStrategy``)
                if chain not in names.soft_chains:
                    self.issue(mu, plan, names, chain, resolved[0])
                continue
            plan.chains[chain] = resolved
            self.link(plan, resolved[0], name in names.early)

    def nested_imports(self, mu: ModuleUnits, plan: UnitPlan, names: UnitNames) -> None:
        """In-source imports inside the statement (lazy or conditional), kept for rewriting."""
        for first, last, indent, pairs, runs_now in self.ex.nested_imports(mu, plan.key[1]):
            kept: list[tuple[str, Target]] = []
            for local, t in pairs:
                if isinstance(t, Missing):
                    if t.code == UNRESOLVED_NAME and not t.absent:
                        self.issue(mu, plan, names, local, t)
                elif isinstance(t, ModTarget):
                    t = self.ex.namespace(mu, plan.key[1], local, t)
                    if isinstance(t, Missing):
                        self.issue(mu, plan, names, local, t)
                        continue
                    plan.imports.add(NAMESPACE_IMPORT)
                    for attr_target in t.leaves():
                        if isinstance(attr_target, ExtImport):
                            plan.imports.add(attr_target)
                        else:
                            self.link(plan, attr_target, runs_now)
                elif isinstance(t, DefTarget):
                    self.link(plan, t, runs_now)
                kept.append((local, t))
            plan.rewrites.append((first, last, indent, kept))

    # -- the result ---------------------------------------------------------------------
    def prune(self) -> None:
        """Leave out registry fillers and patches that cannot be copied, with what only they need."""
        # a statement that binds a name the copied code reads (the block's own among them) is
        # needed, whatever registry it fills too (a ``try`` that imports ``slayer``, defines the
        # block and registers classes)
        binding = {(t.module, k) for t in self.targets if t.module in self.ex.infos
                   for k in self.ex.units_of(t.module).binders.get(t.name, [])}
        kept = without_failing_fillers(self.units, self.targets[self.top] + self.named, self.fillers - binding,
                                       set(self.issue_keys))
        self.issues = [i for i, k in zip(self.issues, self.issue_keys) if k in kept]
        self.units = {k: p for k, p in self.units.items() if k in kept}
        for p in self.units.values():
            p.early &= kept
            p.late &= kept
        self.targets = {t: [k for k in ks if k in kept] for t, ks in self.targets.items()}

    def metaclasses(self) -> dict[UnitKey, set[UnitKey]]:
        """Per class statement, the copied class statements its ``metaclass=`` names: their methods
        run when the class is made (braindecode's metaclass ``__init__`` calls a function the
        module defines further down), so what they read is needed before the class."""
        out: dict[UnitKey, set[UnitKey]] = {}
        for k, plan in self.units.items():
            node = self.ex.units_of(k[0]).stmts[k[1]].node
            if not isinstance(node, ast.ClassDef):
                continue
            names = {n.id for kw in node.keywords if kw.arg == "metaclass" for n in ast.walk(kw.value) if isinstance(n, ast.Name)}
            found = {d for name in names if isinstance(t := plan.refs.get(name), DefTarget)
                     for d in self.targets.get(t, []) if d in plan.early}
            if found:
                out[k] = found
        return out

    def closure(self) -> Closure:
        ex, units = self.ex, self.units
        # Successive bindings of one name keep their order.
        for keys in self.targets.values():
            for a, b in zip(keys, keys[1:]):
                units[b].early.add(a)
        functions = {k for k in units if isinstance(ex.units_of(k[0]).stmts[k[1]].node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        ex.defer_computed_loads(units)
        order, cyclic = order_units(units, next(iter(self.targets[self.top])), functions, self.metaclasses())
        used = {k[0] for k in units}
        files = {ex.file_of(m): ex.sha1_of(m) for m in sorted(used)}
        future = set().union(*(ex.units_of(m).future for m in used))
        return Closure(ex.source, self.module, self.qualname, units, order, self.targets, self.issues, files, future, cyclic,
                       ex.lenders(used), {m: ex.names[ex.infos[m].source_id] for m in sorted(used)}, functions,
                       [found for k, found in self.free if k in units])
