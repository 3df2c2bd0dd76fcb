"""What a class's source says about attributes: those it assigns on ``self``, those it binds in
its body, and those it reads off values it was given. Used on the index's parsed files (which
blocks of a source define what a wrapper reads) and, in the sandbox, on a live class's source
(which argument a wrapper reads it off)."""

from __future__ import annotations

import ast
from typing import Iterable


def _on_self(node: ast.expr) -> str | None:
    """``attr`` for ``self.attr``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def assigned_on_self(tree: ast.AST) -> set[str]:
    """Attributes stored as ``self.<name>`` anywhere in ``tree`` (an ``__init__``), or registered
    under a name as a buffer or parameter (``self.register_buffer("cutoff", ...)``)."""
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
            and _on_self(n) is not None} | {
        n.args[0].value for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _REGISTERS
        and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)}


_REGISTERS = ("register_buffer", "register_parameter", "add_module", "register_module")


def defined_by(node: ast.ClassDef) -> set[str]:
    """Attributes a class binds in its body or assigns as ``self.<name>`` in ``__init__``."""
    names: set[str] = set()
    for statement in node.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(statement, ast.FunctionDef) and statement.name == "__init__":
            names |= assigned_on_self(statement)
    return names


def _copied(node: ast.expr) -> ast.expr:
    """``net`` for ``deepcopy(net)``, ``copy.deepcopy(net)`` and ``copy.copy(net)`` (an EMA wrapper
    keeps a copy of the model it is given), else ``node``."""
    if (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("deepcopy", "copy")):
        return node.args[0]
    return node


def read_off(trees: Iterable[ast.AST], names: set[str]) -> set[str]:
    """Attributes read off the values ``names`` hold in the functions ``trees``: ``net.x``, and
    ``self.alias.x`` where one of them stored it (or a copy of it) as ``self.alias = net``."""
    trees = list(trees)
    held = {alias for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(value := _copied(n.value), ast.Name) and value.id in names
            for t in n.targets if (alias := _on_self(t)) is not None} | names
    return {n.attr for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Attribute) and (
        isinstance(n.value, ast.Name) and n.value.id in names or _on_self(n.value) in held)}


def constructor_arguments(node: ast.ClassDef) -> set[str]:
    """The names of a class's ``__init__`` parameters, ``self`` left out."""
    init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    return {a.arg for a in (*init.args.args[1:], *init.args.kwonlyargs)} if init is not None else set()
