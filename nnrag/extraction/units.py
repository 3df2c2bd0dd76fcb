"""A module's top-level statements as copyable units: what each binds, mutates and needs.

The unit of extraction is one top-level statement, copied verbatim with its decorators and the
comment lines directly above it. A compound statement (``try``/``if``/``with``) is one unit:
its branches decide together what a name means.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, replace
from functools import cached_property

from ..indexing.bindings import bound_names as _bound_names
from ..indexing.parse import branches, is_type_checking
from .scope import UnitNames, analyze


def _global_stores(node: ast.stmt) -> set[str]:
    """Names functions inside ``node`` declare ``global`` and assign."""
    out: set[str] = set()
    for fn in ast.walk(node):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            declared = {n for g in ast.walk(fn) if isinstance(g, ast.Global) for n in g.names}
            if declared:
                out |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                        and n.id in declared}
    return out


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_COMPOUND = (ast.For, ast.If, ast.Try, ast.With)


def _mutated(stmt: ast.stmt) -> str | None:
    """The module-level name a statement mutates in place (``REG[k] = v``, ``REG.update(...)``,
    ``fill(REG)``),
    also from inside a loop or a condition (``for m in (nn.ReLU, nn.GELU): MODELS.register_module(module=m)``)
    when that is the one name mutated there and not one the statement binds itself."""
    if isinstance(stmt, _COMPOUND):
        names = {n for s in branches(stmt) if (n := _mutated(s)) is not None}
        bound: set[str] = set()
        _bound_names([stmt], bound)
        names -= bound
        return names.pop() if len(names) == 1 else None
    if isinstance(stmt, ast.Assign):
        roots = {_root_name(t) for t in stmt.targets if isinstance(t, (ast.Subscript, ast.Attribute))}
        return roots.pop() if len(roots) == 1 and None not in roots else None
    if isinstance(stmt, ast.AugAssign):
        return _root_name(stmt.target)
    if isinstance(stmt, ast.Expr) and isinstance(call := stmt.value, ast.Call):
        if isinstance(call.func, ast.Attribute):
            return _root_name(call.func.value)
        if isinstance(call.func, ast.Name) and call.args and isinstance(call.args[0], ast.Name):
            # a global filled by the function it is handed (graphgym's ``cfg = CN()`` ... ``set_cfg(cfg)``)
            return call.args[0].id
    return None


def _registering(stmt: ast.stmt) -> set[str]:
    """Names whose attribute decorates a definition (``@Conv.factory_function("conv")``)."""
    found: set[str] = set()
    for d in getattr(stmt, "decorator_list", []) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []:
        func = d.func if isinstance(d, ast.Call) else d
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            found.add(func.value.id)
    return found


def _conditional_classes(stmt: ast.If | ast.Try) -> list[ast.ClassDef]:
    """Classes defined in the branches of a module-level ``if``/``try``, also nested ones."""
    out: list[ast.ClassDef] = []
    for inner in branches(stmt):
        if isinstance(inner, ast.ClassDef):
            out.append(inner)
        elif isinstance(inner, (ast.If, ast.Try)):
            out += _conditional_classes(inner)
    return out


@dataclass
class Stmt:
    index: int
    node: ast.stmt
    start: int  # first line, 1-based: leading comments and decorators included
    end: int
    binds: frozenset[str]
    type_checking: bool
    is_import: bool  # a plain ``import`` / ``from ... import`` statement
    dedent: int = 0  # a class lifted out of a conditional: the columns its lines lose


class ModuleUnits:
    """One module's text split into top-level statements."""

    def __init__(self, module: str, path: str, text: str, is_package: bool) -> None:
        self.module = module
        self.path = path
        self.text = text
        self.is_package = is_package
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        self.future: set[str] = set()
        self.stmts: list[Stmt] = []
        self.binders: dict[str, list[int]] = {}
        self.mutators: dict[str, list[int]] = {}
        prev_end = 0
        for i, node in enumerate(self.tree.body):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            start = first
            while start - 1 > prev_end and self.lines[start - 2].lstrip().startswith("#"):
                start -= 1
            end = node.end_lineno or node.lineno
            prev_end = end
            binds: set[str] = set()
            _bound_names([node], binds)
            tc = isinstance(node, ast.If) and is_type_checking(node.test)
            is_import = isinstance(node, (ast.Import, ast.ImportFrom))
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                self.future.update(a.name for a in node.names)
                continue
            st = Stmt(i, node, start, end, frozenset(binds), tc, is_import)
            self.stmts.append(st)
            for name in binds:
                self.binders.setdefault(name, []).append(len(self.stmts) - 1)
            mutated = _mutated(node)
            if mutated is not None and (not binds or isinstance(node, _COMPOUND)):
                self.mutators.setdefault(mutated, []).append(len(self.stmts) - 1)
        # ``def load(): global hub; hub = get_kernel(...)``: a global no module-level statement binds
        # exists once such a function ran; the function is what defines it
        # (a name a star import or the builtins may bind keeps its meaning: it exists before they run)
        stars = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in self.tree.body)
        bound_here = set(self.binders) | set(dir(builtins))
        for k, st in enumerate(self.stmts if not stars else ()):
            if isinstance(st.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                extra = _global_stores(st.node) - bound_here
                if extra:
                    self.stmts[k] = replace(st, binds=st.binds | extra)
                for name in sorted(extra):
                    self.binders.setdefault(name, []).append(k)
        # ``@Conv.factory_function("conv") def conv_factory(...)``: a definition a decorator of a
        # registry this module creates registers there; it comes along with the registry
        own = {name for name, ks in self.binders.items() if any(not self.stmts[k].is_import for k in ks)}
        for k, st in enumerate(self.stmts):
            for registry in _registering(st.node) & own:
                if k not in self.binders.get(registry, []):
                    self.mutators.setdefault(registry, []).append(k)
        # ``if torch_version >= 1.7: register(nn.SiLU) else: class SiLU(nn.Module): ...``: a class
        # defined only inside a branch, as a unit of its own, for a block that is that class (the
        # branch that defines it may never run where the block is checked) when only conditionals
        # bind the name; never a binder. Not where the class reads a name its conditional binds
        # (``if IS_MLU_AVAILABLE: from torchvision.ops import deform_conv2d; class
        # DeformConv2dPack_MLU``): it exists only with it
        self.lifted: dict[str, int] = {}
        plain = {name for name, ks in self.binders.items() if any(not isinstance(self.stmts[k].node, (ast.If, ast.Try)) for k in ks)}
        nested: dict[str, list[tuple[int, ast.ClassDef | None]]] = {}
        for k, st in enumerate(self.stmts):
            if isinstance(st.node, (ast.If, ast.Try)) and not st.type_checking:
                for cls in _conditional_classes(st.node):
                    reads = {n.id for n in ast.walk(cls) if isinstance(n, ast.Name)}
                    nested.setdefault(cls.name, []).append((k, cls if not reads & (st.binds - {cls.name}) else None))
        for name, found in sorted(nested.items()):
            k, cls = found[0]
            if len(found) == 1 and cls is not None and name not in plain:
                start = min([cls.lineno] + [d.lineno for d in cls.decorator_list])
                self.lifted[name] = len(self.stmts)
                self.stmts.append(Stmt(self.stmts[k].index, cls, start, cls.end_lineno or cls.lineno,
                                       frozenset({name}), False, False, cls.col_offset))
        self._names: dict[int, UnitNames] = {}
        self._texts: dict[int, str] = {}
        self._rebound: dict[str, list[int]] = {}
        self._attributes: dict[int, frozenset[str]] = {}

    def text_of(self, k: int) -> str:
        text = self._texts.get(k)
        if text is None:
            text = self._texts[k] = self._text_of(k)
        return text

    def _text_of(self, k: int) -> str:
        st = self.stmts[k]
        node = st.node
        if st.dedent:
            lines = self.lines[st.start - 1 : st.end]
            text = "".join(line[min(st.dedent, len(line) - len(line.lstrip(" \t"))):] for line in lines)
            return text if text.endswith("\n") else text + "\n"
        if node.col_offset or k in self.shared_lines:  # ``a = 1; b = 2``: copy just its own source
            return (ast.get_source_segment(self.text, node) or "") + "\n"
        text = "".join(self.lines[st.start - 1 : st.end])
        return text if text.endswith("\n") else text + "\n"

    def rebound_imports(self, name: str) -> list[int]:
        """The import statements binding ``name`` where a later statement of the module binds or
        updates it reading it as it runs (``from .tables import NAMES``, then ``NAMES.update(...)``
        or ``NAMES = OrderedDict(..., **NAMES)``): the first value, which those read. A plain
        redefinition (``def pad_at_dim``) reads nothing of it, and the import stays out."""
        found = self._rebound.get(name)
        if found is None:
            ks = [k for k in self.binders.get(name, []) if not self.stmts[k].type_checking]
            imports = [k for k in ks if self.stmts[k].is_import]
            later = [k for k in ks + self.mutators.get(name, []) if imports and not self.stmts[k].is_import and k > imports[0]]
            found = self._rebound[name] = imports if any(name in self.names(k).early for k in later) else []
        return found

    def rebound_names(self, k: int) -> frozenset[str]:
        """The names import statement ``k`` binds that the module binds again (``rebound_imports``)."""
        return frozenset(n for n in self.stmts[k].binds if k in self.rebound_imports(n))

    @cached_property
    def patches(self) -> dict[str, list[tuple[str, int]]]:
        """Statements that set an attribute on an object reached through a name, by attribute,
        with that name (``logging.Logger.warning_once = warning_once``: ``warning_once``, then
        ``logging``): where the name is an import, a patch of another package's class that the
        module's code relies on."""
        out: dict[str, list[tuple[str, int]]] = {}
        for k, st in enumerate(self.stmts):
            node = st.node
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(target := node.targets[0], ast.Attribute)
                    and (root := _root_name(target)) is not None and not isinstance(target.value, ast.Subscript)):
                out.setdefault(target.attr, []).append((root, k))
        return out

    def attributes_read(self, k: int) -> frozenset[str]:
        """The attribute names statement ``k`` reads (``logger.warning_once(...)``: ``warning_once``)."""
        got = self._attributes.get(k)
        if got is None:
            got = self._attributes[k] = frozenset(n.attr for n in ast.walk(self.stmts[k].node)
                                                  if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load))
        return got

    def names(self, k: int) -> UnitNames:
        got = self._names.get(k)
        if got is None:
            got = self._names[k] = analyze(self.text_of(k), "annotations" in self.future)
        return got

    @cached_property
    def shared_lines(self) -> set[int]:
        """Statements sharing a line with another (``a = 1; b = 2``)."""
        seen: dict[int, int] = {}
        out: set[int] = set()
        for k, st in enumerate(self.stmts):
            if st.dedent:
                continue
            if st.node.lineno in seen:
                out.update({k, seen[st.node.lineno]})
            seen[st.end] = k
        return out


def first_use(text: str, name: str) -> int:
    """1-based line of the first occurrence of ``name`` (or the chain's root) in ``text``."""
    root = name.split(".")[0]
    try:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Name) and node.id == root:
                return node.lineno
            if isinstance(node, ast.alias) and (node.asname or node.name) == root:
                return node.lineno
    except SyntaxError:
        pass
    return 1
