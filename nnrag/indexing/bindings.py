"""The names a module's top-level statements bind, read from its syntax tree: shared by the
index (what a module outside the corpus binds) and extraction (what each copied unit binds)."""

from __future__ import annotations

import ast


def target_names(target: ast.expr, out: set[str]) -> None:
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            target_names(elt, out)
    elif isinstance(target, ast.Starred):
        target_names(target.value, out)


def pattern_names(pattern: ast.pattern, out: set[str]) -> None:
    """Capture names of a ``case`` pattern (``case Point(x=a) | [a, *rest]``)."""
    for node in ast.walk(pattern):
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)


def walrus_names(stmt: ast.stmt, out: set[str]) -> None:
    """Targets of ``:=`` in a statement's own expressions: they bind in the module, also from
    inside a comprehension, but not from inside a function, lambda or class body."""
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue  # their decorators and defaults run at module level, but rarely hold a walrus
            if not isinstance(child, ast.stmt):  # nested statements are visited by bound_names
                todo.append(child)


def bound_names(stmts: list[ast.stmt], out: set[str]) -> None:
    """Names a block of module-level statements binds (not descending into defs or classes)."""
    for stmt in stmts:
        walrus_names(stmt, out)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                target_names(t, out)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target_names(stmt.target, out)
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                out.add(a.asname or a.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom):
            out.update(a.asname or a.name for a in stmt.names if a.name != "*")
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            target_names(stmt.target, out)
            bound_names(stmt.body, out)
            bound_names(stmt.orelse, out)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    target_names(item.optional_vars, out)
            bound_names(stmt.body, out)
        elif isinstance(stmt, (ast.If, ast.While)):
            bound_names(stmt.body, out)
            bound_names(stmt.orelse, out)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            bound_names(stmt.body, out)  # type: ignore[attr-defined]
            for h in stmt.handlers:  # type: ignore[attr-defined]
                if h.name:  # ``except ImportError as e``: the handler's body reads it
                    out.add(h.name)
                bound_names(h.body, out)
            bound_names(stmt.orelse, out)  # type: ignore[attr-defined]
            bound_names(stmt.finalbody, out)  # type: ignore[attr-defined]
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                pattern_names(case.pattern, out)
                bound_names(case.body, out)


def module_bindings(text: str) -> set[str] | None:
    """The names a module's top-level statements bind (in ``if``/``try``/``with`` branches too, as
    :class:`ModuleUnits` reads them); None where a star import or a syntax this Python cannot read
    leaves them open."""
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        return None
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in body):
        return None
    bound: set[str] = set()
    bound_names(body, bound)
    return bound
