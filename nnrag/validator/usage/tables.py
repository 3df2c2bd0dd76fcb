"""Registry tables: module-level dicts that name a class beside the keyword arguments it is built
with, one entry per variant (segmentation_models_pytorch's ``vgg_encoders = {"vgg11": {"encoder":
VGGEncoder, "params": {"out_channels": [...], "config": cfg["A"]}}, ...}``). Such a class is built
only through the table (``get_encoder(name)``), so no factory, example or config reaches it, and
its arguments (a layer configuration list, a network's global parameters) cannot be guessed.

A harvest unit named ``<tables>`` imports the module and builds the first entry of each class its
tables name, with the recorder on; the entries are found in the source text first, so planning
costs no import.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any, Callable

from . import module_tree

TABLE_UNIT = "<tables>"


def _is_entry(node: ast.expr) -> bool:
    """A dict literal holding a bare name (the class) and a dict literal of string keys (its arguments)."""
    if not isinstance(node, ast.Dict):
        return False
    values = node.values
    return (any(isinstance(v, (ast.Name, ast.Attribute)) for v in values)
            and any(isinstance(v, ast.Dict) and v.keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                              for k in v.keys) for v in values))


def table_names(text: str) -> list[str]:
    """Module-level names bound to a table: a dict literal whose values are such entries."""
    if "{" not in text:
        return []
    tree = module_tree(text)
    if tree is None:
        return []
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Dict) and value.values and any(_is_entry(v) for v in value.values):
                found.append(node.targets[0].id)
    return found


def _entry(value: Any) -> tuple[type, dict[str, Any]] | None:
    """The module class of one table entry and the dict of its keyword arguments: the one whose
    keys the constructor takes (beside it an entry may hold settings of its own: weights' sources);
    through ``**kwargs`` too, when it also names one of the constructor's own parameters."""
    from torch import nn  # here, not at the top: planning (in the build process) must not import torch

    if not isinstance(value, dict):
        return None
    classes = [v for v in value.values() if inspect.isclass(v) and issubclass(v, nn.Module)]
    if len(classes) != 1:
        return None
    try:
        params = inspect.signature(classes[0]).parameters
    except (TypeError, ValueError):
        return None
    passes_on = any(p.kind == p.VAR_KEYWORD for p in params.values())
    scored = []
    for v in value.values():
        if isinstance(v, dict) and v and all(isinstance(k, str) and k.isidentifier() for k in v):
            named = sum(k in params for k in v)
            if named == len(v) or (passes_on and named):
                scored.append((named, v))
    best = sorted(scored, key=lambda x: -x[0])
    if not best or (len(best) > 1 and best[0][0] == best[1][0]):
        return None
    return classes[0], best[0][1]


def run_tables(module: Any, exercise: Callable[[Any], str | None]) -> str | None:
    """Build the first entry of each class the module's tables name and run it once (``exercise``);
    the first error, or None when every class was built and ran."""
    try:
        names = table_names(inspect.getsource(module))
    except (OSError, TypeError):
        return "no source"
    built: set[type] = set()
    first: str | None = None
    for name in names:
        table = getattr(module, name, None)
        for value in table.values() if isinstance(table, dict) else ():
            found = _entry(value)
            if found is None or found[0] in built:
                continue
            cls, params = found
            built.add(cls)
            try:
                error = exercise(cls(**params))
            except Exception as e:
                error = f"{cls.__name__}: {type(e).__name__}: {e}"[:300]
            first = first or error
    return first if built else "no table entries"
