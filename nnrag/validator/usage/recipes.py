"""Recipes: JSON descriptions of constructor arguments and forward inputs seen in real use.

A recipe says how to rebuild a value in another process: literals as they are, tensors by shape,
dtype and range (fresh random values), classes and functions by module and qualified name,
``functools.partial`` and config objects by their parts, and module instances by the recipe of
their own construction. Rebuilding happens in the candidate's namespace, so a block file proves
itself with the names it defines, never with the source package's.

Runs inside the sandbox (torch imported).
"""

from __future__ import annotations

import builtins
import collections
import enum
import functools
import importlib
import math
import types
from collections import OrderedDict
from contextlib import nullcontext
from typing import Any, Callable, ContextManager

import torch
from torch import nn

_MAX_DEPTH = 8
_MAX_ITEMS = 256
_MAX_VALUES = 64  # integer tensors up to this size are recorded by value


class Unrecordable(Exception):
    """A value with no recipe (an open file, a lambda, a tensor subclass...)."""


def ref(obj: Any) -> list[str]:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise Unrecordable(f"no importable name for {obj!r}")
    return [module, qualname]


def dump(value: Any, instances: dict[int, dict[str, Any]], depth: int = 0) -> Any:
    """The recipe of ``value``; ``instances`` maps id(module) to the recipe of its construction."""
    if depth > _MAX_DEPTH:
        raise Unrecordable("nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return {"v": value}
    if isinstance(value, float):
        return {"v": value} if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor and not isinstance(value, nn.Parameter):
            raise Unrecordable(f"tensor subclass {type(value).__name__}")
        info: dict[str, Any] = {"tensor": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
        if value.numel():
            v = value.detach()
            parts = torch.view_as_real(v) if v.is_complex() else v  # a complex one's range: of its parts
            info["lo"], info["hi"] = float(parts.min()), float(parts.max())
            if not v.is_floating_point() and not v.is_complex() and v.dtype != torch.bool and v.numel() <= _MAX_VALUES:
                # sizes and offsets (a detector's level shapes and start indices) must be these values
                info["values"] = v.flatten().tolist()
        return info
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": "cpu"}
    if isinstance(value, nn.Module):
        made = instances.get(id(value))
        if made is None:
            raise Unrecordable(f"{type(value).__name__} instance built before recording")
        return {"module": made}
    if isinstance(value, (set, frozenset)):  # a data sample's field names
        if len(value) > _MAX_ITEMS or not all(isinstance(v, (str, int)) for v in value):
            raise Unrecordable("set too long or of complex items")
        return {"set": sorted(value, key=repr)}
    if isinstance(value, (tuple, list)):
        if len(value) > _MAX_ITEMS:
            raise Unrecordable("sequence too long")
        items = [dump(v, instances, depth + 1) for v in value]
        if isinstance(value, tuple) and isinstance(fields := getattr(type(value), "_fields", None), tuple):
            # a named tuple (EfficientNet's ``BlockArgs``): read by field as well as by position
            named: dict[str, Any] = {"tuple": items, "fields": list(fields)}
            try:
                named["type"] = ref(type(value))
            except Unrecordable:
                pass
            return named
        return {"tuple": items} if isinstance(value, tuple) else {"list": items}
    if isinstance(value, dict):
        if len(value) > _MAX_ITEMS or not all(isinstance(k, (str, int)) for k in value):
            raise Unrecordable("dict too long or with complex keys")
        items = {"dict": [[k, dump(v, instances, depth + 1)] for k, v in value.items()]}
        if type(value) not in (dict, OrderedDict):  # a config dict (mmengine's ``ConfigDict``): read by attribute too
            try:
                items["type"] = ref(type(value))
            except Unrecordable:
                pass
        return items
    if isinstance(value, enum.Enum):
        return {"enum": ref(type(value)), "name": value.name}
    if isinstance(value, functools.partial):
        return {"partial": dump(value.func, instances, depth + 1), "args": [dump(a, instances, depth + 1) for a in value.args],
                "kwargs": {k: dump(v, instances, depth + 1) for k, v in value.keywords.items()}}
    if isinstance(value, type) or callable(value) and hasattr(value, "__qualname__"):
        return {"ref": ref(value)}
    state = getattr(value, "__dict__", None)
    if isinstance(state, dict) and type(value).__module__ not in ("builtins",) and len(state) <= _MAX_ITEMS:
        return {"object": ref(type(value)), "state": {k: dump(v, instances, depth + 1) for k, v in state.items()}}
    raise Unrecordable(f"no recipe for {type(value).__name__}")


class RecipeResolver:
    """Looks names up in the candidate's namespace first; imports only packages the candidate
    itself imports (torch, the standard library), never the package the block was taken from."""

    def __init__(self, namespace: dict[str, Any], importable: Callable[[str], bool]) -> None:
        self.namespace = namespace
        self.importable = importable

    def scope(self, name: str | None) -> ContextManager[Any]:
        """The registry scope a recipe was recorded in (a config's ``default_scope='mmdet'``), as
        the default scope again: mmengine's root registry builds a package's registered types
        (``data_preprocessor=dict(type='DetDataPreprocessor')``) only under that package's scope.
        Entered through any registry the candidate holds; nothing to do where it holds none."""
        registry = next((v for v in self.namespace.values() if not isinstance(v, type)
                         and callable(getattr(type(v), "switch_scope_and_registry", None))), None)
        return registry.switch_scope_and_registry(name) if name and registry is not None else nullcontext()

    def __call__(self, module: str, qualname: str) -> Any:
        head, *rest = qualname.split(".")
        obj = self.namespace.get(head)
        if obj is not None:
            for part in rest:
                obj = getattr(obj, part)
            return obj
        if module == "builtins":
            return getattr(builtins, qualname)
        if not self.importable(module):
            raise Unrecordable(f"{module}.{qualname} is neither defined in the file nor importable beside it")
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj


def load(recipe: Any, resolve: RecipeResolver) -> Any:
    """Rebuild a value from its recipe."""
    if "v" in recipe:
        return recipe["v"]
    if "float" in recipe:
        return float(recipe["float"])
    if "tensor" in recipe:
        return _tensor(recipe)
    if "dtype" in recipe:
        return getattr(torch, recipe["dtype"])
    if "device" in recipe:
        return torch.device("cpu")
    if "tuple" in recipe:
        items = tuple(load(r, resolve) for r in recipe["tuple"])
        if "fields" not in recipe:
            return items
        if "type" in recipe:
            try:
                return resolve(*recipe["type"])(*items)
            except Exception:  # the file lacks the class (or its own code failed): one with the same fields
                pass
        name = recipe["type"][1].rpartition(".")[2] if "type" in recipe else "Record"
        return collections.namedtuple(name, recipe["fields"], rename=True)(*items)
    if "list" in recipe:
        return [load(r, resolve) for r in recipe["list"]]
    if "set" in recipe:
        return set(recipe["set"])
    if "dict" in recipe:
        items = OrderedDict((k, load(v, resolve)) for k, v in recipe["dict"])
        if "type" not in recipe:
            return items
        try:
            return resolve(*recipe["type"])(items)
        except Exception:  # not part of the block (any error of foreign code): keys read as attributes still work
            return AttributeDict(items)
    if "enum" in recipe:
        return getattr(resolve(*recipe["enum"]), recipe["name"])
    if "partial" in recipe:
        return functools.partial(load(recipe["partial"], resolve), *(load(a, resolve) for a in recipe["args"]),
                                 **{k: load(v, resolve) for k, v in recipe["kwargs"].items()})
    if "ref" in recipe:
        return resolve(*recipe["ref"])
    if "module" in recipe:
        return construct(recipe["module"], resolve)
    if "object" in recipe:
        state = {k: load(v, resolve) for k, v in recipe["state"].items()}
        try:
            cls = resolve(*recipe["object"])
        except (Unrecordable, AttributeError):
            # the caller's settings class is not part of the block: an object with the same
            # attributes is what the block reads
            return types.SimpleNamespace(**state)
        obj = cls.__new__(cls)
        obj.__dict__.update(state)
        return obj
    raise Unrecordable(f"unknown recipe {sorted(recipe)}")


class AttributeDict(OrderedDict):
    """A dict whose keys also read as attributes, as those of the config dict it stands for."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def call_args(recipe: dict[str, Any], resolve: RecipeResolver) -> tuple[list[Any], dict[str, Any]]:
    return [load(a, resolve) for a in recipe["args"]], {k: load(v, resolve) for k, v in recipe["kwargs"].items()}


def construct(recipe: dict[str, Any], resolve: RecipeResolver) -> Any:
    cls = resolve(*recipe["cls"])
    args, kwargs = call_args(recipe, resolve)
    return cls(*args, **kwargs)


def _tensor(recipe: dict[str, Any]) -> torch.Tensor:
    shape = tuple(recipe["tensor"])
    dtype = getattr(torch, recipe["dtype"], torch.float32)
    if "values" in recipe:
        return torch.tensor(recipe["values"], dtype=dtype).reshape(shape)
    lo, hi = recipe.get("lo", 0.0), recipe.get("hi", 1.0)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(int(lo), int(hi) + 1, shape, dtype=dtype)
    if lo >= 0 and hi <= 1:
        return torch.rand(shape, dtype=dtype)
    if lo >= 0:  # sizes, variances, box coordinates: non-negative values within the seen range
        return torch.rand(shape, dtype=dtype) * (hi - lo) + lo
    return torch.randn(shape, dtype=dtype)
