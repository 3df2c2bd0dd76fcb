"""Which constructor argument a failure's traceback points to: the frames of the candidate's own
files, and the arguments the failing line names, calls, holds under a wrapper, or passed on to a
helper whose parameter failed. Runs inside the sandbox, on live frames."""

from __future__ import annotations

import ast
import functools
import itertools
import linecache
import re
import sys
import traceback
from types import CodeType, FrameType
from typing import Any

from torch import nn

from .source import failing_statement

IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def candidate_frames(cls: type, error: BaseException) -> list[FrameType]:
    """Frames of the traceback in the file that defines ``cls`` or one of its bases (torchvision's
    ``ResNet`` under an encoder built on it), innermost first."""
    paths = {getattr(sys.modules.get(k.__module__), "__file__", None) for k in cls.__mro__
             if k not in (nn.Module, object) and not k.__module__.startswith("torch.")} - {None}
    frames, tb = [], error.__traceback__
    while tb is not None:
        # a comprehension runs as a frame of its own before Python 3.12 (PEP 709 inlines it), of
        # no statement: the statement that holds it is its caller's
        if tb.tb_frame.f_code.co_filename in paths and tb.tb_frame.f_code.co_name not in _COMPREHENSIONS:
            frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames[::-1]


_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def innermost_line(frames: list[FrameType]) -> str:
    """The innermost candidate line of the traceback ("" without one); the whole statement where
    a simple statement spans several lines (``self.layers = nn.ModuleList(`` with the argument it
    copies on the next line, as formatters split long calls)."""
    if not frames:
        return ""
    frame = frames[0]
    line = traceback.FrameSummary(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name).line or ""
    stmt = failing_statement(frame)
    if stmt is not None and (stmt.end_lineno or stmt.lineno) > stmt.lineno and not hasattr(stmt, "body"):
        return ast.unparse(stmt)
    return line


def named_in_line(frames: list[FrameType], kwargs: dict[str, Any]) -> list[str]:
    """Arguments named in the innermost candidate line of the traceback."""
    words = set(re.findall(r"\w+", innermost_line(frames)))
    return [k for k in kwargs if k in words]


def called_in_line(frames: list[FrameType], kwargs: dict[str, Any]) -> list[str]:
    """Arguments the innermost candidate line calls (``self.fn(c)`` in ``[self.fn(c) for c in
    chunks]``): of the arguments it names, the one an ``'int' object is not callable`` is about.
    Where the frame's position names the very call it stopped at (``BatchNorm(reduction_dim)``
    inside an ``nn.Sequential(...)`` that also passes ``in_dim``), only that call's callee."""
    if frames and (callee := callee_at(frames[0])) is not None:
        return [k for k in kwargs if k == callee]
    called = set(re.findall(r"(\w+)\s*\(", innermost_line(frames)))
    return [k for k in kwargs if k in called]


def callee_at(frame: FrameType) -> str | None:
    """The name a frame's current instruction calls (``BatchNorm`` of ``BatchNorm(c)``, ``fn``
    of ``self.fn(x)``), read from the instruction's source position; None where that position is
    not a call of a name."""
    return callee_of(frame.f_code, frame.f_lasti)


@functools.lru_cache(maxsize=1024)  # a stand-in layer asks it on every call it answers
def callee_of(code: CodeType, lasti: int) -> str | None:
    try:
        line, end, col, end_col = next(itertools.islice(code.co_positions(), lasti // 2, None))
    except (StopIteration, ValueError):
        return None
    if None in (line, end, col, end_col):
        return None
    lines = linecache.getlines(code.co_filename)[line - 1:end]
    if not lines:
        return None
    lines[-1] = lines[-1][:end_col] if len(lines) > 1 else lines[-1][col:end_col]
    if len(lines) > 1:
        lines[0] = lines[0][col:]
    try:
        node = ast.parse("".join(lines).strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def held_under(cls: type, frames: list[FrameType], kwargs: dict[str, Any]) -> list[str]:
    """Arguments named like the block's attribute that holds the innermost frame's layer: in
    ``self.f = Deterministic(f)`` the wrapper's own forward calls the number (``self.net(x)``), a
    line that names no argument of the block."""
    inner = frames[0].f_locals.get("self") if frames else None
    block = next((held for frame in frames if isinstance(held := frame.f_locals.get("self"), cls)), None)
    if not isinstance(inner, nn.Module) or not isinstance(block, nn.Module) or inner is block:
        return []
    return [k for path, module in block.named_modules() if module is inner
            and (k := path.rsplit(".", 1)[-1]) in kwargs]


def passed_as(frames: list[FrameType], local: str, names: set[str]) -> list[str]:
    """The arguments named in what the caller passed for the parameter ``local`` of the innermost
    function (``_create_final_conv(out, dims, self.final_conv_channels)`` for ``channels``): the
    argument a helper's parameter holds when several hold an equal number."""
    if len(frames) < 2 or (stmt := failing_statement(frames[1])) is None:
        return []
    code = frames[0].f_code
    params = code.co_varnames[:code.co_argcount]
    called = {code.co_name}
    if code.co_name == "__init__" and "self" in frames[0].f_locals:  # a class built inside: ``Wrapper(model)``
        called.add(type(frames[0].f_locals["self"]).__name__)
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in called:
            at = params.index(local) - (1 if params[:1] == ("self",) else 0) if local in params else -1
            given = (node.args[at] if 0 <= at < len(node.args) and not isinstance(node.args[at], ast.Starred)
                     else next((k.value for k in node.keywords if k.arg == local), None))
            if given is not None:
                words = set(IDENTIFIER.findall(ast.unparse(given)))
                return [k for k in names if k in words]
    return []
