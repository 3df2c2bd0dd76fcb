"""Model factories of a module: the zero-argument functions that build a model (``resnet18()``).

Found statically so that choosing them costs nothing: a public top-level function whose
parameters all have defaults and that either takes ``**kwargs``, a ``pretrained``/``weights``
switch, or is registered by a decorator. The smallest-sounding ones come first: the harvest
needs one real construction of each block, not the largest variant.
"""

from __future__ import annotations

import ast
import re

from . import module_tree

_SWITCHES = {"pretrained", "weights", "progress", "pretrained_cfg"}
_SMALL = re.compile(r"(?:^|_)(atto|femto|pico|nano|tiny|micro|mini|small|xs|xxs|s|t|lite|mobile|b0|18|050|0_5|x0_5|t0|s0|a0)(?:_|$)")


def _all_defaulted(args: ast.arguments) -> bool:
    positional = args.posonlyargs + args.args
    if len(args.defaults) < len(positional):
        return False
    return all(d is not None for d in args.kw_defaults)


def _returns_value(fn: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn))


def _is_factory(fn: ast.FunctionDef) -> bool:
    if fn.name.startswith("_") or not _all_defaulted(fn.args) or not _returns_value(fn):
        return False
    names = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    registered = any("register" in ast.unparse(d) for d in fn.decorator_list)
    return bool(fn.args.kwarg) or bool(names & _SWITCHES) or registered


def _rank(name: str) -> tuple[int, int, str]:
    return (0 if _SMALL.search(name.lower()) else 1, len(name), name)


def factory_functions(text: str) -> list[str]:
    """Factory names defined at the top of a module's source, smallest-sounding first."""
    tree = module_tree(text)
    if tree is None:
        return []
    found = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _is_factory(n)]
    return sorted(set(found), key=_rank)
