"""Renaming one statement by splicing: the compiler's own scoping (``symtable``) says which names
refer to module-level bindings, the syntax tree (``ast``) says where each is, and the new names
are written over the old ones in the text. Everything else stays byte for byte.

It gives what the LibCST renamer of :mod:`nnrag.extraction.rename` gives, at a small fraction of
its cost (LibCST's scope analysis took 0.2-2 s for a large class, and 76% of mmdet's extraction).
Where a statement holds something it does not model as that renamer does (a renamed name a class
body both reads and binds, whose meaning LibCST decides statement by statement; a ``global``
declaration of one; a ``match`` statement; a scope it cannot pair with the compiler's), or where a
position it computed does not hold the name it replaces, it answers None and the LibCST renamer
does the statement. Names inside f-strings are spliced too: every position is checked against
the text before it is written over.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from typing import Iterator

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp)
_COMPREHENSION_NAMES = {ast.ListComp: "listcomp", ast.SetComp: "setcomp", ast.DictComp: "dictcomp", ast.GeneratorExp: "genexpr"}
_BUILTINS = frozenset(dir(builtins))
_DEF = re.compile(rb"(?:async\s+)?def\s+(\w+)|class\s+(\w+)")


class _Unmodelled(Exception):
    """The statement holds a form the splicer leaves to LibCST."""


def spliced(text: str, renames: dict[str, str], chains: dict[str, str]) -> str | None:
    """``text`` with module-level ``renames`` and module-attribute ``chains`` replaced; None where
    the LibCST renamer must do it."""
    try:
        tree = ast.parse(text)
        table = symtable.symtable(text, "<unit>", "exec")
        edits = list(_edits(tree, table, text.encode(), renames, chains))
    except (SyntaxError, ValueError, KeyError, _Unmodelled):
        return None
    return _apply(text, edits)


def _edits(tree: ast.Module, table: symtable.SymbolTable, data: bytes, renames: dict[str, str],
           chains: dict[str, str]) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(start, end, old, new) byte spans of the text to replace, none inside another."""
    lines = data.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        return starts[lineno - 1] + col

    def span(node: ast.AST) -> tuple[int, int]:
        return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined, arg-type]

    wanted = set(renames) | {c.split(".", 1)[0] for c in chains}
    # a builtin's name the statement does not bind at module level means the builtin, as LibCST's
    # scopes read it (``zip`` in a function of a module that imports six.moves' ``zip``)
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    builtin = _BUILTINS - bound

    def module_binding(scope: symtable.SymbolTable, name: str, load: bool = True) -> bool:
        if scope.get_type() == "class" and load and scope.lookup(name).is_local():
            # read in a class body that binds it too: the module's binding until the class binds
            # its own, in an order LibCST's scopes decide statement by statement
            raise _Unmodelled("a renamed name a class body reads and binds")
        return name not in builtin and _global(scope, name)

    whole: list[tuple[int, int]] = []  # spans a chain replaced whole: what lies inside goes with it
    for node, scope in _with_scopes(tree, table):
        module_level = scope.get_type() == "module"
        if isinstance(node, (ast.Global, ast.Nonlocal)) and set(node.names) & wanted:
            raise _Unmodelled("a renamed name declared global")
        elif isinstance(node, ast.ExceptHandler) and module_level and node.name in renames:
            raise _Unmodelled("a renamed name bound by except ... as")
        elif isinstance(node, (ast.MatchAs, ast.MatchStar, ast.MatchMapping)):
            raise _Unmodelled("a match statement")
        elif isinstance(node, ast.Attribute) and chains:
            dotted = _dotted(node)
            if dotted is not None and dotted[0] in chains and module_binding(scope, dotted[1].id):
                start, end = span(node)
                if not any(s <= start and end <= e for s, e in whole):
                    whole.append((start, end))
                    yield start, end, data[start:end], chains[dotted[0]].encode()
        elif isinstance(node, ast.Name) and node.id in renames and module_binding(scope, node.id, isinstance(node.ctx, ast.Load)):
            start, end = span(node)
            if not any(s <= start and end <= e for s, e in whole):
                yield start, end, node.id.encode(), renames[node.id].encode()
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and module_level and node.name in renames:
            found = _DEF.match(data, offset(node.lineno, node.col_offset))
            if found is None:
                raise _Unmodelled("a definition's name not where its node starts")
            group = 1 if found.group(1) is not None else 2
            yield found.start(group), found.end(group), node.name.encode(), renames[node.name].encode()
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and module_level:
            for alias in node.names:
                bound = alias.asname or alias.name
                if bound in renames and alias.name != "*":
                    start, end = span(alias)
                    yield start, end, data[start:end], f"{alias.name} as {renames[bound]}".encode()


def _apply(text: str, edits: list[tuple[int, int, bytes, bytes]]) -> str | None:
    """The edits written over the text; None where one does not find the text it replaces."""
    data = text.encode()
    out, last = [], 0
    for start, end, old, new in sorted(set(edits)):
        if start < last or data[start:end] != old:
            return None
        out += [data[last:start], new]
        last = end
    out.append(data[last:])
    return b"".join(out).decode()


def _dotted(node: ast.expr) -> tuple[str, ast.Name] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)]), node


def _global(scope: symtable.SymbolTable, name: str) -> bool:
    """Whether ``name`` read or bound in ``scope`` is the module's binding."""
    if scope.get_type() == "module":
        return True
    try:
        return scope.lookup(name).is_global()
    except KeyError:
        return True  # a name a scope only names through a nested one reaches the module


def _with_scopes(tree: ast.Module, table: symtable.SymbolTable) -> Iterator[tuple[ast.AST, symtable.SymbolTable]]:
    """Every node with the scope it runs in: a definition's decorators, defaults and annotations
    in the enclosing scope, its body in its own; a comprehension's first iterable outside it."""
    todo: list[tuple[ast.AST, symtable.SymbolTable]] = [(tree, table)]
    children: dict[int, dict[tuple[str, int], list[symtable.SymbolTable]]] = {}

    def child(parent: symtable.SymbolTable, node: ast.AST) -> symtable.SymbolTable:
        by_key = children.get(id(parent))
        if by_key is None:
            by_key = children[id(parent)] = {}
            for c in parent.get_children():
                by_key.setdefault((c.get_name(), c.get_lineno()), []).append(c)
        name = _COMPREHENSION_NAMES.get(type(node)) or ("lambda" if isinstance(node, ast.Lambda) else node.name)  # type: ignore[attr-defined]
        found = by_key.get((name, node.lineno))  # type: ignore[attr-defined]
        if not found:
            raise _Unmodelled(f"no scope {name} at line {node.lineno}")  # type: ignore[attr-defined]
        if len(found) > 1 and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            raise _Unmodelled("two scopes of one kind on one line")
        scope = found.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = [p.arg for p in (*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs,
                                       *([a.kwarg] if a.kwarg else []))]
            if sorted(scope.get_parameters()) != sorted(params):  # type: ignore[attr-defined]
                raise _Unmodelled("a function scope paired with another's parameters")
        return scope

    while todo:
        node, scope = todo.pop()
        yield node, scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = child(scope, node)
            a = node.args
            outside: list[ast.AST] = [*node.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None)]
            outside += [p.annotation for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                                                *([a.kwarg] if a.kwarg else [])) if p.annotation is not None]
            outside += [node.returns] if node.returns is not None else []
            todo += [(n, scope) for n in outside] + [(n, inner) for n in node.body]
        elif isinstance(node, ast.Lambda):
            inner = child(scope, node)
            a = node.args
            todo += [(n, scope) for n in (*a.defaults, *(d for d in a.kw_defaults if d is not None))]
            todo.append((node.body, inner))
        elif isinstance(node, ast.ClassDef):
            inner = child(scope, node)
            todo += [(n, scope) for n in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords))]
            todo += [(n, inner) for n in node.body]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inner = child(scope, node)
            first, *rest = node.generators
            todo.append((first.iter, scope))
            todo += [(first.target, inner), *((n, inner) for n in first.ifs)]
            for gen in rest:
                todo += [(gen.target, inner), (gen.iter, inner), *((n, inner) for n in gen.ifs)]
            todo += [(n, inner) for n in ((node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,))]
        else:
            todo += [(n, scope) for n in ast.iter_child_nodes(node)]
