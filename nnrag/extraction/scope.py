"""Which module-level names one top-level statement needs, from the compiler's own scoping.

``symtable`` applies CPython's LEGB rules (class scopes, comprehensions, ``global`` /
``nonlocal``, walrus targets) exactly as the compiler does, at a fraction of LibCST's
``ScopeProvider`` cost; LibCST is used only later, for the few statements that need renaming.

Names are split by *when* they are looked up:

- ``early``: evaluated while the statement runs (bases, decorators, default arguments, class
  bodies, runtime annotations, module-level expressions). They decide the order of definitions.
- ``late``: looked up only when a function body runs. They must exist, in any order.
- ``soft``: needed only by annotations that ``from __future__ import annotations`` keeps as strings.
"""

from __future__ import annotations

import ast
import symtable
from collections.abc import Iterator
from dataclasses import dataclass, field

_EAGER_SCOPES = {"listcomp", "setcomp", "dictcomp", "genexpr"}


@dataclass(frozen=True)
class UnitNames:
    early: frozenset[str]
    late: frozenset[str]
    soft: frozenset[str]
    # dotted attribute chains rooted at a global name, e.g. "H.make_divisible", longest first per node
    chains: frozenset[str] = field(default_factory=frozenset)
    # global names also used bare (not only as the root of an attribute chain)
    bare: frozenset[str] = field(default_factory=frozenset)
    # string constants that could name a registered class (``dict(type='DropPath')`` for a registry to build)
    strings: frozenset[str] = field(default_factory=frozenset)
    # chains read only by annotations ``from __future__ import annotations`` keeps as strings
    soft_chains: frozenset[str] = field(default_factory=frozenset)


def _global_refs(table: symtable.SymbolTable, early: bool, out_early: set[str], out_late: set[str],
                 augmented: frozenset[str] = frozenset()) -> None:
    is_module = table.get_type() == "module"
    for sym in table.get_symbols():
        name = sym.get_name()
        # ``global n; n += 1`` reads n, but symtable records an augmented target as assigned only
        read_global = not is_module and sym.is_declared_global() and name in augmented
        if not sym.is_referenced() and not read_global:
            continue
        if is_module:
            # At module level every name is global; the statement's own bindings are dropped later.
            (out_early if early else out_late).add(name)
        elif sym.is_global() and not sym.is_free():
            (out_early if early else out_late).add(name)
    for child in table.get_children():
        kind = child.get_type()
        child_early = early and (kind == "class" or (kind == "function" and child.get_name() in _EAGER_SCOPES))
        _global_refs(child, child_early, out_early, out_late, augmented)


def _class_reads_before_binding(tree: ast.AST, annotations_run: bool) -> set[str]:
    """Names a class body reads before it binds them itself (``dtype = dtype``, ``n += 1``,
    ``def device(self) -> device``): a class body looks such a name up among the module's globals,
    where symtable, which sees the class bind it, records only a local. Classes of the statement
    and the classes in their bodies, whose bodies run when the statement does. Annotations count
    only where they run (no ``from __future__ import annotations``)."""
    found: set[str] = set()
    classes = [n for n in (tree.body if isinstance(tree, ast.Module) else []) if isinstance(n, ast.ClassDef)]
    while classes:
        cls = classes.pop()
        steps = [(node, _in_class_scope(node, annotations_run)) for stmt in cls.body for node in _in_order(stmt)]
        bound_here = {name for _, (_, stores) in steps for name in stores}
        bound: set[str] = set()
        for node, (loads, stores) in steps:
            found |= (loads - bound) & bound_here
            bound |= stores
            classes += [node] if isinstance(node, ast.ClassDef) else []
    return found


def _in_order(stmt: ast.stmt) -> Iterator[ast.AST]:
    """A class-body statement as the parts that run one after another: a compound statement's
    header, then each statement of its bodies (torch-ecg's ``if cache.exists(): df_old = ...;
    df_old = df_old[cols]; del df_old`` binds before it reads, though the ``if`` as a whole both
    reads and binds ``df_old``)."""
    if isinstance(stmt, ast.If | ast.While):
        yield stmt.test
        bodies = [stmt.body, stmt.orelse]
    elif isinstance(stmt, ast.For | ast.AsyncFor):
        yield stmt.iter
        yield stmt.target
        bodies = [stmt.body, stmt.orelse]
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        yield from stmt.items
        bodies = [stmt.body]
    elif isinstance(stmt, ast.Try | ast.TryStar):
        bodies = [stmt.body, *([h] for h in stmt.handlers), stmt.orelse, stmt.finalbody]
    elif isinstance(stmt, ast.ExceptHandler):
        if stmt.type is not None:
            yield stmt.type
        if stmt.name:
            yield ast.Name(stmt.name, ast.Store())
        bodies = [stmt.body]
    else:
        yield stmt
        return
    for body in bodies:
        for inner in body:
            yield from _in_order(inner)


def _in_class_scope(stmt: ast.AST, annotations_run: bool) -> tuple[set[str], set[str]]:
    """The names a class-body statement reads and binds in the class's own scope as it runs: not
    inside the bodies of the functions, lambdas and classes it defines (their defaults,
    decorators, bases and, where they run, annotations do), nor inside comprehensions (scopes of
    their own) past their first iterable; an augmented assignment's target is read."""
    loads: set[str] = set()
    stores: set[str] = {stmt.name} if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else set()
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            loads.add(node.target.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):  # their defaults run now
            todo += [*getattr(node, "decorator_list", ()), *node.args.defaults,
                     *(d for d in node.args.kw_defaults if d is not None)]
            if annotations_run and not isinstance(node, ast.Lambda):
                todo += [a.annotation for a in _parameters(node.args) if a.annotation is not None]
                todo += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign) and not annotations_run:
            todo += [node.target, *([node.value] if node.value is not None else [])]
        elif isinstance(node, ast.ClassDef):
            todo += [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            todo.append(node.generators[0].iter)
        else:
            todo += list(ast.iter_child_nodes(node))
    return loads, stores


def _parameters(args: ast.arguments) -> list[ast.arg]:
    return [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
            *([args.kwarg] if args.kwarg else [])]


def _refs(text: str, augmented: frozenset[str]) -> tuple[set[str], set[str]]:
    early: set[str] = set()
    late: set[str] = set()
    _global_refs(symtable.symtable(text, "<unit>", "exec"), True, early, late, augmented)
    return early, late - early


class _StripAnnotations(ast.NodeTransformer):
    """Replace every annotation with ``None``: what remains is what runs."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.returns = None
        self.generic_visit(node)
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        node.annotation = ast.Constant(None)
        self.generic_visit(node)
        return node


def _names_a_type(text: str) -> bool:
    """Spelled like a registry key: a name, lower case too (``'deconv'``), or one with its scope
    (``'mmdet.CrossEntropyLoss'``)."""
    return 0 < len(text) <= 80 and all(part.isidentifier() for part in text.split("."))


def _chains(tree: ast.AST) -> tuple[set[str], dict[str, int], dict[str, int], frozenset[str], frozenset[str]]:
    """Maximal dotted chains ``a.b.c``, per root name how often it is a chain root or bare, the
    names that are targets of an augmented assignment (``n += 1``), and the string constants
    spelled like a registry key."""
    chains: set[str] = set()
    rooted: dict[str, int] = {}
    names: dict[str, int] = {}
    augmented: set[str] = set()
    strings: set[str] = set()
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _names_a_type(node.value):
            strings.add(node.value)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            augmented.add(node.target.id)
        if isinstance(node, ast.Name):
            names[node.id] = names.get(node.id, 0) + 1
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            parts = []
            cur: ast.AST = node
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
                if isinstance(cur, ast.Attribute):
                    inner.add(id(cur))
            if isinstance(cur, ast.Name):
                chains.add(".".join([cur.id, *reversed(parts)]))
                rooted[cur.id] = rooted.get(cur.id, 0) + 1
    return chains, rooted, names, frozenset(augmented), frozenset(strings)


def analyze(text: str, future_annotations: bool = False) -> UnitNames:
    """The global names a top-level statement's text refers to."""
    tree = ast.parse(text)
    chains, rooted, names, augmented, strings = _chains(tree)
    early, late = _refs(text, augmented)
    soft: set[str] = set()
    soft_chains: set[str] = set()
    if future_annotations and ("->" in text or ":" in text):
        stripped = _StripAnnotations().visit(ast.parse(text))
        s_early, s_late = _refs(ast.unparse(stripped), augmented)
        soft = (early | late) - (s_early | s_late)
        early, late = s_early, s_late - s_early
        soft_chains = chains - _chains(stripped)[0]
    class_reads = _class_reads_before_binding(tree, annotations_run=not future_annotations)
    early, late, soft = early | class_reads, late - class_reads, soft - class_reads
    used = early | late | soft
    bare = {n for n in used if names.get(n, 0) > rooted.get(n, 0)}
    return UnitNames(
        early=frozenset(early),
        late=frozenset(late),
        soft=frozenset(soft),
        chains=frozenset(c for c in chains if c.split(".", 1)[0] in used),
        bare=frozenset(bare),
        strings=strings,
        soft_chains=frozenset(soft_chains),
    )


def shadowing(text: str, name: str) -> frozenset[str]:
    """Names bound locally in the functions of ``text`` that read the module-level ``name``: a
    definition ``name`` is renamed to one of them would be shadowed there (a method that binds
    ``Activation1d = TorchActivation1d``, where the class imported as ``TorchActivation1d`` is
    called ``Activation1d``)."""
    try:
        stack = [symtable.symtable(text, "<unit>", "exec")]
    except SyntaxError:
        return frozenset()
    out: set[str] = set()
    while stack:
        table = stack.pop()
        stack += table.get_children()
        if table.get_type() == "module":
            continue
        try:
            read = table.lookup(name)
        except KeyError:
            continue
        if read.is_referenced() and (read.is_global() or read.is_free()):
            out |= {s.get_name() for s in table.get_symbols() if s.is_local()}
    return frozenset(out)
