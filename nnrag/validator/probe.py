"""Stages import / instantiate / forward / backward, run inside the sandboxed child."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from . import record as R
from .infer import constructor_attempts, forward_args, guess_value, input_shapes, make_tensor, shapes, short_repr, tensors
from .sandbox import SandboxViolation

_MAX_FORWARD_TRIES = 24
_SHAPE_WORDS = ("shape", "size", "dimension", "dim", "expected", "mat1", "mat2", "channels", "match", "broadcast",
                "view", "reshape", "must be", "invalid", "out of range", "index", "too many", "not enough", "unpack")


class StageFailure(Exception):
    def __init__(self, stage: str, code: str, error: BaseException | None, message: str = "") -> None:
        super().__init__(message or (f"{type(error).__name__}: {error}" if error else ""))
        self.stage = stage
        self.code = code
        self.error = error


def _is_memory(e: BaseException) -> bool:
    return isinstance(e, MemoryError) or "can't allocate memory" in str(e) or "not enough memory" in str(e)


def classify(stage: str, e: BaseException) -> str:
    """The taxonomy code for an exception raised at ``stage``."""
    if isinstance(e, SandboxViolation):
        return R.SANDBOX_VIOLATION
    if _is_memory(e):
        return R.MEMORY
    if isinstance(e, ModuleNotFoundError):
        return R.MISSING_DEPENDENCY
    if isinstance(e, ImportError):
        text = str(e)
        return R.NATIVE_EXTENSION if (".so" in text or "undefined symbol" in text or "DLL" in text) else R.MISSING_DEPENDENCY
    if isinstance(e, NameError) and not isinstance(e, UnboundLocalError):
        return R.UNRESOLVED_NAME
    if isinstance(e, KeyError) and e.args and isinstance(e.args[0], str):
        return R.DYNAMIC_REGISTRY
    if isinstance(e, RecursionError):
        return R.RUNTIME_ERROR
    if stage == "import":
        return R.IMPORT_ERROR
    if stage == "instantiate":
        return R.CONSTRUCTOR_ARGS
    if stage == "backward":
        return R.BACKWARD_ERROR
    if isinstance(e, NotImplementedError):
        return R.RUNTIME_ERROR
    text = str(e).lower()
    if isinstance(e, (TypeError, ValueError, IndexError, AssertionError, AttributeError)) or any(w in text for w in _SHAPE_WORDS):
        return R.INPUT_INFERENCE
    return R.RUNTIME_ERROR


def _guard(e: BaseException) -> None:
    """Some failures end the candidate whatever stage or attempt they happen in."""
    if isinstance(e, SandboxViolation) or _is_memory(e):
        raise e


def _class_name_from_header(path: Path) -> str | None:
    with open(path, encoding="utf-8", errors="replace") as f:
        for _, line in zip(range(12), f):
            if line.startswith("# class: "):
                return line[len("# class: ") :].strip()
    return None


def _find_class(module: Any, path: Path, class_name: str | None) -> type:
    name = class_name or _class_name_from_header(path)
    if name:
        obj: Any = module
        for part in name.split("."):
            obj = getattr(obj, part, None)
        if not (isinstance(obj, type) and issubclass(obj, nn.Module)):
            raise StageFailure("instantiate", R.CLASS_NOT_FOUND, None, f"{path.name} defines no nn.Module class {name!r}")
        return obj
    # No name given: the last top-level nn.Module subclass defined in the file.
    order = [n.name for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.ClassDef)]
    for n in reversed(order):
        obj = getattr(module, n, None)
        if isinstance(obj, type) and issubclass(obj, nn.Module) and obj.__module__ == module.__name__:
            return obj
    raise StageFailure("instantiate", R.CLASS_NOT_FOUND, None, f"{path.name} defines no nn.Module subclass")


def run(path: Path, class_name: str | None, result: dict[str, Any], progress: Callable[[str], None] = lambda s: None) -> None:
    """Fill ``result`` stage by stage; raises StageFailure on the first failing stage."""
    torch.manual_seed(0)
    result["stage"] = "import"
    progress("import")
    spec = importlib.util.spec_from_file_location("nnrag_candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["nnrag_candidate"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        raise StageFailure("import", classify("import", e), e) from e

    result["stage"] = "instantiate"
    progress("instantiate")
    cls = _find_class(module, path, class_name)
    result["class_name"] = cls.__qualname__
    last: BaseException | None = None
    last_stage = "instantiate"
    tries = 0
    for sizes, kwargs in constructor_attempts(cls):
        model, kwargs, error = _instantiate(cls, kwargs, sizes)
        if model is None:
            last = error
            continue
        result["init_args"] = {k: short_repr(v) for k, v in kwargs.items()}
        result["stage"] = last_stage = "forward"
        progress("forward")
        model.eval()
        for kind, shape in input_shapes(model, kwargs, sizes):
            tries += 1
            if tries > _MAX_FORWARD_TRIES:
                break
            main = make_tensor(kind, shape)
            call = forward_args(model, main)
            if call is None:
                continue
            args, kw = call
            try:
                with torch.no_grad():
                    out = model(*args, **kw)
            except BaseException as e:
                _guard(e)
                last = e
                continue
            # counted after forward: lazy modules have no parameter sizes before it
            result["params"] = sum(p.numel() for p in model.parameters())
            result["input_shapes"] = [shapes(a) if isinstance(a, torch.Tensor) else short_repr(a) for a in args]
            result["output_shapes"] = shapes(out)
            result["stage"] = "backward"
            progress("backward")
            result["backward"] = _backward(model, args, kw)
            return
    if last is None:
        raise StageFailure(last_stage, R.INPUT_INFERENCE if last_stage == "forward" else R.CONSTRUCTOR_ARGS, None,
                           "no input shape fits the forward signature")
    raise StageFailure(last_stage, classify(last_stage, last), last)


_MISSING = re.compile(r"missing \d+ required (?:positional|keyword-only) arguments?: (.+)")
_WANTS_SEQUENCE = ("is not iterable", "is not subscriptable", "has no len()", "cannot unpack non-iterable")


def _instantiate(cls: type, kwargs: dict[str, Any], sizes: Any) -> tuple[nn.Module | None, dict[str, Any], BaseException | None]:
    """Instantiate, adding arguments a ``**kwargs`` pass-through turns out to need and
    turning integers into pairs where the error says a sequence was wanted."""
    error: BaseException | None = None
    listified = False
    for _ in range(4):
        try:
            return cls(**kwargs), kwargs, None
        except BaseException as e:
            _guard(e)
            error = e
            text = str(e)
            missing = _MISSING.search(text) if isinstance(e, TypeError) else None
            names = re.findall(r"'(\w+)'", missing.group(1)) if missing else []
            if names and not all(n in kwargs for n in names):
                kwargs = {**kwargs, **{n: guess_value(n, inspect.Parameter.empty, sizes) for n in names if n not in kwargs}}
            elif not listified and any(w in text for w in _WANTS_SEQUENCE):
                listified = True
                plural = {k: [v, v] for k, v in kwargs.items() if isinstance(v, int) and not isinstance(v, bool) and
                          (k.endswith(("s", "_list")) and not k.endswith(("channels", "features", "classes", "heads", "chans")))}
                if not plural:
                    break
                kwargs = {**kwargs, **plural}
            else:
                break
    return None, kwargs, error


def _backward(model: nn.Module, args: list[Any], kw: dict[str, Any]) -> bool | None:
    """One backward pass; None when nothing in the output is differentiable."""
    errors: list[BaseException] = []
    for train in (True, False):
        model.train(train)
        model.zero_grad(set_to_none=True)
        inputs = [a.detach().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        try:
            out = model(*inputs, **kw)
            diff = [t for t in tensors(out) if t.requires_grad and t.is_floating_point()]
            if not diff:
                return None
            sum(t.float().sum() for t in diff).backward()  # type: ignore[union-attr]
            return True
        except BaseException as e:
            _guard(e)
            errors.append(e)
    raise StageFailure("backward", classify("backward", errors[0]), errors[0])


def format_failure(e: BaseException) -> str:
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    text = "".join(lines)
    return text[-3000:]
