"""What a failed ``assert``, or a guard that raised, asks for.

A bare ``assert`` says nothing in its message, but its condition is the requirement itself:
``assert in0.size()[0] == 1`` (one sample at a time), ``assert points.ndim == 3 and
points.shape[2] == 3``, ``assert x.shape[-1] == x.shape[-2] == self.roi_feat_size``, ``assert depth
> 1``. A guard is the same requirement negated: ``if n_times != round(seconds * sfreq): raise
ValueError(...)`` asks for ``n_times == round(seconds * sfreq)``. The condition is read from the
frame that failed, its numbers looked up in that frame (never a call but of a pure builtin), and
turned into the input shape or constructor argument that satisfies it.

Runs inside the sandbox, on the candidate's own frames.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable

import torch

from .source import failing_statement, source_tree, static_value

_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Div: operator.truediv, ast.Pow: operator.pow}
# builtins that compute a number from numbers and nothing else, the only calls a condition is read through
_PURE: tuple[Callable[..., Any], ...] = (round, int, abs, min, max)
_ORDER = (ast.Eq, ast.NotEq, ast.Gt, ast.GtE, ast.Lt, ast.LtE, ast.In)
_FLIPPED = {ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Lt: ast.Gt, ast.LtE: ast.GtE}
RANK = -99  # the axis a requirement on a tensor's number of dimensions names


@dataclass(frozen=True)
class Requirement:
    """One comparison of the condition: ``name`` (a tensor's axis, its rank, or a number) ``op``
    ``value``."""

    name: str
    axis: int | None  # None: the name's own value; RANK: its number of dimensions
    op: type
    value: Any


_NEGATED = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt,
            ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


def failed_condition(error: BaseException) -> tuple[ast.expr, FrameType] | None:
    """What had to hold for ``error`` not to be raised, and the frame that raised it: the
    condition of the failed ``assert``, or the negated test of the ``if`` whose body raised."""
    if error.__traceback__ is None:
        return None
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    tree = source_tree(tb.tb_frame.f_code)
    stmt = failing_statement(tb.tb_frame, tree)
    if isinstance(stmt, ast.Assert):
        return (stmt.test, tb.tb_frame) if isinstance(error, AssertionError) else None
    if not isinstance(stmt, ast.Raise) or tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and stmt in node.body:
            negated = negation(node.test)
            return (negated, tb.tb_frame) if negated is not None else None
        if isinstance(node, ast.If) and stmt in node.orelse:
            return node.test, tb.tb_frame
    return None


def negation(test: ast.expr) -> ast.expr | None:
    """``test`` negated as comparisons (De Morgan over ``and``/``or``), None where it is not one."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _NEGATED:
        return ast.Compare(test.left, [_NEGATED[type(test.ops[0])]()], test.comparators)
    if isinstance(test, ast.BoolOp):
        parts = [negation(v) for v in test.values]
        kept = [p for p in parts if p is not None]
        if isinstance(test.op, ast.And):  # not (a and b) == (not a) or (not b): any one alternative
            return ast.BoolOp(ast.Or(), kept) if kept else None
        # not (a or b) == (not a) and (not b): every part must be known
        return ast.BoolOp(ast.And(), kept) if len(kept) == len(parts) else None
    return None


def _number(node: ast.expr, scope: dict[str, Any]) -> Any:
    """An integer the expression stands for: a literal, a name or attribute looked up in ``scope``,
    arithmetic on those (through floats: ``round(seconds * sfreq)``), or a tuple of them; None for
    anything else."""
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_number(e, scope) for e in node.elts]
        return tuple(items) if all(i is not None for i in items) else None
    value = _numeric(node, scope)
    return value if isinstance(value, int) else None


def _numeric(node: ast.expr, scope: dict[str, Any]) -> int | float | None:
    """The int or float the expression stands for, None for anything else; the only calls made
    are of pure builtins on numbers (``round``, ``int``, ``abs``, ``min``, ``max``)."""
    value: Any
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _numeric(node.operand, scope)
        value = -inner if inner is not None else None
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _numeric(node.left, scope), _numeric(node.right, scope)
        try:
            value = _ARITHMETIC[type(node.op)](left, right) if left is not None and right is not None else None
        except (ArithmeticError, ValueError):
            value = None
    elif isinstance(node, ast.Call) and not node.keywords and (function := _pure(node.func, scope)) is not None:
        items = [_numeric(a, scope) for a in node.args]
        try:  # ``int(inf)``, ``round(nan)``: nothing known
            value = function(*items) if items and all(i is not None for i in items) else None
        except (ArithmeticError, ValueError, TypeError):
            value = None
    else:
        value = static_value(node, scope)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _pure(node: ast.expr, scope: dict[str, Any]) -> Callable[..., Any] | None:
    """The builtin a call's name stands for, if it is one of ``_PURE`` (not shadowed in ``scope``)."""
    if not isinstance(node, ast.Name):
        return None
    found = scope.get(node.id, getattr(builtins, node.id, None))
    return found if any(found is f for f in _PURE) else None


def _term(node: ast.expr) -> tuple[str, int | None] | None:
    """(name, axis) for ``x.shape[i]``, ``x.size(i)``, ``x.size()[i]``, ``len(x)``; (name, RANK) for
    ``x.ndim``, ``x.dim()``, ``len(x.shape)``; (name, None) for ``name`` or ``self.name``."""
    if isinstance(node, ast.Name):
        return node.id, None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.attr == "ndim":
            return node.value.id, RANK
        return (node.attr, None) if node.value.id == "self" else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(owner := node.func.value, ast.Name):
        if node.func.attr == "dim" and not node.args:
            return owner.id, RANK
        if node.func.attr == "size" and len(node.args) == 1 and isinstance(i := _constant(node.args[0]), int):
            return owner.id, i
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1:
        inner = node.args[0]
        if isinstance(inner, ast.Name):
            return inner.id, 0
        if (shape := _shape_of(inner)) is not None:
            return shape, RANK
    if isinstance(node, ast.Subscript) and isinstance(i := _constant(node.slice), int) and (shape := _shape_of(node.value)):
        return shape, i
    return None


def _shape_of(node: ast.expr) -> str | None:
    """``x`` for ``x.shape`` or ``x.size()``."""
    if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name):
        return node.value.id
    if (isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute)
            and node.func.attr == "size" and isinstance(node.func.value, ast.Name)):
        return node.func.value.id
    return None


def _constant(node: ast.expr) -> Any:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value if isinstance(node.operand.value, int) else None
    return node.value if isinstance(node, ast.Constant) else None


def requirements(test: ast.expr, scope: dict[str, Any]) -> list[list[Requirement]]:
    """The condition's comparisons, one list per alternative of an ``or`` (the first alternative
    first), each holding every comparison its ``and`` joins."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return [r for alternative in test.values for r in requirements(alternative, scope)][:3]
    clauses = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    out: list[Requirement] = []
    for clause in clauses:
        if isinstance(clause, ast.Compare):
            out += _compared(clause, scope)
    return [out] if out else []


def _compared(node: ast.Compare, scope: dict[str, Any]) -> list[Requirement]:
    """Requirements of one comparison chain: a tensor's axis or rank against a number (the other
    side's value now), else a name against a number."""
    if not all(isinstance(op, _ORDER) for op in node.ops):
        return []
    sides = [node.left, *node.comparators]
    terms = [_term(s) for s in sides]
    values = [_number(s, scope) for s in sides]
    axes = [t is not None and t[1] is not None for t in terms]
    if len(sides) > 2 and all(isinstance(op, ast.Eq) for op in node.ops):  # ``a == b == value``: every axis that value
        value = next((v for v, axis in zip(values, axes) if v is not None and not axis), None)
        return [Requirement(t[0], t[1], ast.Eq, value) for t, axis in zip(terms, axes) if axis and t is not None] \
            if value is not None else []
    out: list[Requirement] = []
    for i, op in enumerate(node.ops):
        (ta, tb), (va, vb), (axis_a, axis_b) = terms[i:i + 2], values[i:i + 2], axes[i:i + 2]
        flipped = _FLIPPED.get(type(op), type(op))
        if ta is not None and axis_a and not axis_b and vb is not None:
            out.append(Requirement(ta[0], ta[1], type(op), vb))
        elif tb is not None and axis_b and not axis_a and va is not None and not isinstance(op, ast.In):
            out.append(Requirement(tb[0], tb[1], flipped, va))
        elif ta is not None and tb is not None and axis_a and axis_b and isinstance(op, ast.Eq) \
                and (other := _value_of(tb, scope)) is not None:  # ``x.shape[1] == y.shape[1]``: the other's size
            out.append(Requirement(ta[0], ta[1], ast.Eq, other))
        elif ta is not None and not axis_a and not axis_b and vb is not None:  # ``depth > 1``
            out.append(Requirement(ta[0], None, type(op), vb))
        elif tb is not None and ta is None and not axis_b and va is not None and not isinstance(op, ast.In):
            out.append(Requirement(tb[0], None, flipped, va))
    return out


def _value_of(term: tuple[str, int | None], scope: dict[str, Any]) -> int | None:
    value = scope.get(term[0])
    if not isinstance(value, torch.Tensor) or term[1] is None:
        return None
    if term[1] == RANK:
        return value.dim()
    return value.shape[term[1]] if -value.dim() <= term[1] < value.dim() else None


def satisfying(op: type, current: int | None, value: Any) -> int | None:
    """A number close to ``current`` that makes ``current op value`` hold; None if none is known."""
    if op is ast.In:
        options = [v for v in (value if isinstance(value, tuple) else ()) if isinstance(v, int)]
        return None if not options or current in options else options[0]
    if not isinstance(value, int):
        return None
    if op is ast.Eq:
        return value
    if op is ast.NotEq:
        return current + 1 if current is not None and current == value else None
    if current is None:
        return {ast.Gt: value + 1, ast.GtE: value, ast.Lt: value - 1, ast.LtE: value}.get(op)
    return {ast.Gt: max(current, value + 1), ast.GtE: max(current, value),
            ast.Lt: min(current, value - 1), ast.LtE: min(current, value)}.get(op)


def asserted_shapes(error: BaseException, shape: tuple[int, ...], spatial: int) -> list[tuple[int, ...]]:
    """Main-input shapes that satisfy the failed assertion on the main input (the frame's tensor of
    the main input's shape), one per alternative of the condition."""
    found = failed_condition(error)
    if found is None:
        return []
    test, frame = found
    scope = {**frame.f_globals, **frame.f_locals}
    mains = {n for n, v in frame.f_locals.items() if isinstance(v, torch.Tensor) and tuple(v.shape) == shape}
    if len(mains) > 1:  # a copy of the main input in a second argument (a loss's target): the first one
        code = frame.f_code
        first = [n for n in code.co_varnames[:code.co_argcount] if n not in ("self", "cls")][:1]
        mains &= set(first) or mains
    out: list[tuple[int, ...]] = []
    for alternative in requirements(test, scope):
        new = _satisfied(shape, [r for r in alternative if r.name in mains], spatial)
        if new != shape:
            out.append(new)
    return out


def asserted_arguments_of_call(error: BaseException, code: Any, spatial: int) -> dict[str, tuple[int, ...]]:
    """Tensor arguments of the function whose code is ``code`` (a block's ``forward``) that a
    failed condition in it asks another shape of (``assert target_sizes.shape[1] == 2``), by
    parameter name, with the shape that satisfies its first alternative."""
    found = failed_condition(error)
    if found is None or found[1].f_code is not code:
        return {}
    test, frame = found
    scope = {**frame.f_globals, **frame.f_locals}
    parameters = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    out: dict[str, tuple[int, ...]] = {}
    for alternative in requirements(test, scope)[:1]:
        for name in {r.name for r in alternative if r.axis is not None and r.name in parameters}:
            value = frame.f_locals.get(name)
            if isinstance(value, torch.Tensor):
                shape = tuple(value.shape)
                if (new := _satisfied(shape, [r for r in alternative if r.name == name], spatial)) != shape:
                    out[name] = new
    return out


def _satisfied(shape: tuple[int, ...], wanted: list[Requirement], spatial: int) -> tuple[int, ...]:
    """``shape`` changed so that the axis and rank requirements ``wanted`` hold."""
    new = list(shape)
    for r in wanted:
        if r.axis is None:
            continue
        if r.axis == RANK:
            rank = satisfying(r.op, len(new), r.value)
            if rank is not None and 1 <= rank <= 6:
                new = new[:rank] if rank < len(new) else new + [spatial] * (rank - len(new))
        elif -len(new) <= r.axis < len(new) and (size := satisfying(r.op, new[r.axis], r.value)) is not None and size > 0:
            new[r.axis] = size
    return tuple(new)


def _int_items(value: Any) -> list[int] | None:
    """The numbers of a guessed list or tuple of integers, or the one of an integer; else None."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return items if items and all(isinstance(v, int) and not isinstance(v, bool) for v in items) else None


def asserted_arguments(cls: type, kwargs: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """Integer constructor arguments set so that the failed assertion on them holds (``assert depth
    > 1``, ``assert self.num_classes != -1``): arguments named as the condition names them, given
    or left at their default."""
    found = failed_condition(error)
    if found is None:
        return {}
    test, frame = found
    try:
        defaults = {p.name: p.default for p in inspect.signature(cls).parameters.values()}
    except (TypeError, ValueError):
        return {}
    scope = {**frame.f_globals, **frame.f_locals}
    change: dict[str, Any] = {}
    for alternative in requirements(test, scope)[:1]:
        for r in alternative:
            current = kwargs.get(r.name, defaults.get(r.name))
            if r.axis == 0 and r.name in defaults and (items := _int_items(current)) is not None:
                # ``assert len(input_shape) == 3``: as many of its numbers as the condition counts
                n = satisfying(r.op, len(items), r.value)
                if n is not None and 0 < n <= 8 and n != len(items):
                    change[r.name] = (tuple if isinstance(current, tuple) else list)((items * n)[:n])
                continue
            if r.axis is not None or r.name not in defaults or not isinstance(current, int) or isinstance(current, bool):
                continue
            wanted = satisfying(r.op, current, r.value)
            if r.op is ast.NotEq and wanted is not None and wanted <= 0:  # ``num_classes != -1``: a real count
                wanted = 4
            if wanted is not None and wanted != current:
                change[r.name] = wanted
    return change
