"""A candidate's own source read at run time: the statement a frame stopped at, and the values
of names and attributes it reads, looked up without calling anything.

Everything here runs inside the sandbox.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import textwrap
from types import CodeType, FrameType
from typing import Any


@functools.lru_cache(maxsize=256)  # one parse per function: the probe reads the same forward per input tried
def source_tree(obj: Any) -> ast.AST | None:
    """The parsed source of a function, class or code object; None where it has none (built-ins,
    exec'd code). Shared between callers: read it, never change it."""
    try:
        if isinstance(obj, CodeType):
            # read by its file and first line: inspect.getsource would look for the code's module
            # through every module loaded, touching each, which in a forked candidate copies their
            # pages (tens of MB, after a candidate that used its memory up to the limit)
            lines = linecache.getlines(obj.co_filename)
            if not lines:
                return None
            text = "".join(inspect.getblock(lines[obj.co_firstlineno - 1:]))
        else:
            text = inspect.getsource(obj)
        return ast.parse(textwrap.dedent(text))
    except (OSError, TypeError, SyntaxError, IndentationError, IndexError):
        return None


def failing_statement(frame: FrameType, tree: ast.AST | None = None) -> ast.stmt | None:
    """The innermost statement of a frame's function that holds the line the frame stopped at
    (in ``tree``, the function's parsed source, when the caller has it)."""
    if tree is None:
        return statement_at(frame.f_code, frame.f_lineno)
    return _innermost(tree, frame.f_lineno - frame.f_code.co_firstlineno + 1)


@functools.lru_cache(maxsize=1024)  # a stand-in layer asks it on every call, a repair on every error
def statement_at(code: CodeType, lineno: int) -> ast.stmt | None:
    tree = source_tree(code)
    return _innermost(tree, lineno - code.co_firstlineno + 1) if tree is not None else None


def _innermost(tree: ast.AST, line: int) -> ast.stmt | None:
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found = node if found is None or node.lineno >= found.lineno else found
    return found


def static_value(node: ast.expr, scope: dict[str, Any]) -> Any:
    """A literal, or a name or dotted attribute looked up in ``scope``: never a call."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [static_value(e, scope) for e in node.elts]
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = static_value(node.value, scope)
        try:
            return None if owner is None else getattr(owner, node.attr, None)
        except Exception:  # noqa: BLE001 - the candidate's own property failing: nothing known
            return None
    return None


def keys_off(tree: ast.AST, names: set[str]) -> list[str]:
    """The string keys ``tree`` reads off the names ``names`` (``outputs["pred_logits"]``,
    ``x.get("encoder_cont")``), in source order, at most eight."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names:
            key = node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and isinstance(node.func.value, ast.Name) and node.func.value.id in names and node.args):
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.isidentifier():
            found.append(key.value)
    return list(dict.fromkeys(found))[:8]
