"""Stages import / instantiate / forward / backward, run inside the sandboxed child."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import random
import re
import sys
import time
import traceback
from collections import deque
from pathlib import Path
from types import CodeType, SimpleNamespace
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch import nn

from .. import record as R
from . import cpu, weights
from .arguments import Sizes, constructor_attempts, is_depth
from .asserts import asserted_arguments_of_call
from .companions import companion_recipes, offer
from .designed import built_recording
from .repairs import forward_repairs, repairs
from .frames import candidate_frames
from .source import failing_statement, static_value
from .inputs import (FIELDS, KEYS, NONE_USED, forward_calls, given_for_none, input_shapes, make_tensor, optional_tensors, shapes,
                     short_repr, tensors)
from .shape_errors import input_repairs
from .spectra import spectrogram_inputs
from ..usage.recipes import RecipeResolver, Unrecordable, call_args, dump
from ..sandbox import SandboxViolation

_MAX_FORWARD_TRIES = 40  # forward calls per candidate, over all constructor attempts
# CPU seconds of guessing after which no new attempt starts (one under way finishes). A block whose
# guesses fail this long is a large model on wrong inputs; recorded usage serves it better.
_SEARCH_S = 5.0
_TRIES_PER_MODEL = 16
_CALLS_PER_INPUT = 6
_FORWARD_REPAIRS = 3  # blocks rebuilt with arguments a forward error shows were guessed wrong, one more each time
_REPAIRED_CALLS = (_CALLS_PER_INPUT, 2.0)  # calls and seconds for a block so rebuilt after the search's budget ran out
# Larger guessed inputs are skipped: 1088 channels at 224x224 costs ~10 s of convolutions to fail
_MAX_INPUT_ELEMENTS = 1 << 24
# Guessed arguments that would build more parameters are not built (ConVit's defaults: 12 billion)
_MAX_PARAMS = 300_000_000
_SHAPE_WORDS = ("shape", "size", "dimension", "dim", "expected", "mat1", "mat2", "channels", "match", "broadcast",
                "view", "reshape", "must be", "invalid", "out of range", "index", "too many", "not enough", "unpack")


class _Budget:
    """Forward calls and seconds left for guessing: seconds of this process's CPU, not of the
    clock, so that a verdict does not hang on how busy the machine is (two builds at once gave
    tianshou's policies half the guesses). The gate's own time limit still counts the clock."""

    def __init__(self, tries: int, seconds: float) -> None:
        self.tries = tries
        self.deadline = time.process_time() + seconds

    def left(self) -> bool:
        return self.tries > 0 and time.process_time() < self.deadline

    def renew(self, seconds: float) -> None:
        self.deadline = time.process_time() + seconds


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
        native = any(sign in text for sign in (".so", "undefined symbol", "DLL", "could not be built here", "compiled extension"))
        return R.NATIVE_EXTENSION if native else R.MISSING_DEPENDENCY
    if isinstance(e, NameError) and not isinstance(e, UnboundLocalError):
        return R.UNRESOLVED_NAME
    if isinstance(e, KeyError) and e.args and isinstance(e.args[0], str) and stage in ("import", "instantiate"):
        return R.DYNAMIC_REGISTRY  # in forward a missing key is one the input lacks (``inputs["_positions"]``)
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
    if isinstance(e, (TypeError, ValueError, IndexError, KeyError, AssertionError, AttributeError)) or any(w in text for w in _SHAPE_WORDS):
        return R.INPUT_INFERENCE
    return R.RUNTIME_ERROR


def _keep(errors: dict[str, BaseException], stage: str, e: BaseException) -> None:
    """The error a stage reports: its first (the likeliest attempt's), unless a later attempt
    stopped at a module that is not installed (monai's ``optional_import("einops")`` behind a
    guessed size that failed first): what the block needs outranks a wrong guess."""
    if _outranks(e, errors.get(stage)):
        errors[stage] = e


def _outranks(e: BaseException, first: BaseException | None) -> bool:
    """``e`` is the error to report instead of ``first``: there is none yet, or ``e`` names a
    module that is not installed and ``first`` does not."""
    return first is None or _names_missing_module(e) and not _names_missing_module(first)


def _names_missing_module(e: BaseException) -> bool:
    return isinstance(e, ImportError) and "No module named" in str(e)


def _guarded_import(e: BaseException, path: Path) -> BaseException:
    """A name the file binds only by an import a ``try`` guards (``try: from mmdet.models.builder
    import BACKBONES as det_BACKBONES``, then ``@det_BACKBONES.register_module()`` under ``if
    has_mmdet:``), undefined because that module is not installed: the missing module, as an
    import that failed says it; any other error as it is."""
    if not isinstance(e, NameError) or isinstance(e, UnboundLocalError) or not e.name:
        return e
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return e
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        for stmt in node.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name).split(".")[0] == e.name for a in stmt.names):
                top = (stmt.module if isinstance(stmt, ast.ImportFrom) else stmt.names[0].name) or ""
                top = top.split(".")[0]
                if top and importlib.util.find_spec(top) is None:
                    missing = ModuleNotFoundError(f"No module named '{top}' (the file binds {e.name} only when its "
                                                  f"guarded import of {top} succeeds)", name=top)
                    missing.__cause__ = e
                    return missing
                if top and (failed := _import_error(node, path)) is not None:
                    # installed, and the import the ``try`` swallowed fails: a release of another
                    # API (neuraloperator's ``from torch_harmonics.quadrature import
                    # _precompute_grid``); its own message names the release's folder
                    failed.__cause__ = e
                    return failed
    return e


def _import_error(guarded: ast.Try, path: Path) -> ImportError | None:
    """The error the imports a ``try`` guards raise, run again as the candidate ran them."""
    imports = [s for s in guarded.body if isinstance(s, (ast.Import, ast.ImportFrom)) and not getattr(s, "level", 0)]
    try:
        exec(compile(ast.Module(body=imports, type_ignores=[]), str(path), "exec"), {})  # noqa: S102 - the candidate's own imports
    except ImportError as failed:
        return failed
    except Exception:  # noqa: BLE001 - an import that fails otherwise says nothing of a release
        return None
    return None


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


def _importable(path: Path) -> Callable[[str], bool]:
    """Modules a recipe may import: the standard library and packages the candidate imports itself."""
    tops = set(sys.stdlib_module_names) | {"torch"}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
    return lambda module: module.split(".")[0] in tops


def _bound(cls: type, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a construction by parameter name (``argN`` where none binds)."""
    try:
        return dict(inspect.signature(cls).bind_partial(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}


def _from_usage(cls: type, hints: list[dict[str, Any]], resolve: RecipeResolver, errors: dict[str, BaseException]) -> Iterator[tuple[nn.Module, dict[str, Any], Any, dict[str, Any]]]:
    """Models built as the source's own code built them, each with its arguments by name, its
    recorded call (or None) and the recipe of its construction."""
    for entry in hints:
        try:
            with resolve.scope(entry.get("scope")):
                args, kwargs = call_args(entry["init"], resolve)
                model = cls(*args, **kwargs)
        except BaseException as e:
            _guard(e)
            _keep(errors, "instantiate", e)
            continue
        call = None
        if entry.get("call"):
            try:
                call = call_args(entry["call"], resolve)
            except BaseException as e:
                _guard(e)
        yield model, _bound(cls, args, kwargs), call, entry["init"]


def _shape_or_repr(value: Any) -> Any:
    """What a record says of one input: the shapes of its tensors, or a short text for anything else."""
    if isinstance(value, (torch.Tensor, np.ndarray, list, tuple, dict, SimpleNamespace)):
        return shapes(value)
    return short_repr(value)


def _dtype(value: Any) -> str | None:
    return str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else None


def _recipe(init: dict[str, Any] | None, kwargs: dict[str, Any], args: list[Any], kw: dict[str, Any]) -> dict[str, Any]:
    """How the block was built and called, as recipes another process rebuilds (see
    usage.recipes): the harvest runs a passing block so, to record how it builds and calls the
    blocks inside it. Empty when a value has no recipe (a layer instance the probe built)."""
    built = companion_recipes()  # layers given to it: the source's blocks, built from their own recipes
    try:
        made = init or {"args": [], "kwargs": {k: dump(v, built) for k, v in kwargs.items()}}
        return {"init": made, "call": {"args": [dump(a, {}) for a in args], "kwargs": {k: dump(v, {}) for k, v in kw.items()}}}
    except (Unrecordable, RuntimeError, TypeError, ValueError):  # a tensor whose range cannot be read
        return {}


def run(path: Path, class_name: str | None, result: dict[str, Any], progress: Callable[[str], None] = lambda s: None,
        hints: list[dict[str, Any]] | None = None, compiled: CodeType | None = None,
        companions: list[dict[str, Any]] | None = None) -> None:
    """Fill ``result`` stage by stage; raises StageFailure on the first failing stage.

    ``hints`` are usage entries recorded by the harvest (see harvest.py), tried before any guess;
    ``compiled`` is the file's code object when the caller compiled it already; ``companions``
    are constructions of other classes of the file (``{"cls": [module, qualname], "args",
    "kwargs"}`` recipes) the repairs may pass as arguments.
    """
    # the CPU generator only: torch.manual_seed would also queue a lazy CUDA seeding, formatting a
    # stack trace (~6 ms of a trivial candidate's ~40)
    torch.default_generator.manual_seed(0)
    # and Python's and numpy's global generators, which augmentations and samplers draw from: a
    # worker checks candidates one after another, and a verdict must not depend on which came first
    random.seed(0)
    np.random.seed(0)
    weights.install()
    cpu.install()
    result["stage"] = "import"
    progress("import")
    spec = importlib.util.spec_from_file_location(R.CANDIDATE_MODULE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[R.CANDIDATE_MODULE] = module
    try:
        if compiled is not None:
            exec(compiled, module.__dict__)  # what exec_module does, without compiling again
        else:
            spec.loader.exec_module(module)
    except BaseException as e:
        e = _guarded_import(e, path)
        raise StageFailure("import", classify("import", e), e) from e

    result["stage"] = "instantiate"
    progress("instantiate")
    cls = _find_class(module, path, class_name)
    offer(companions, RecipeResolver(vars(module), _importable(path)))
    result["class_name"] = cls.__qualname__
    errors: dict[str, BaseException] = {}  # the first error of each stage: the likeliest attempt's
    budget = _Budget(_MAX_FORWARD_TRIES, _SEARCH_S)

    def attempts() -> Iterator[tuple[nn.Module, dict[str, str], Any, dict[str, Any], Sizes, dict[str, Any] | None]]:
        if hints:
            resolve = RecipeResolver(vars(module), _importable(path))
            for model, bound, call, init in _from_usage(cls, hints, resolve, errors):
                result["arguments"] = "recorded"
                # a recorded construction without a recorded call: its widths size the guessed inputs
                yield model, {k: short_repr(v) for k, v in bound.items()}, call, bound, Sizes(), init
            result["arguments"] = "guessed"
            budget.renew(_SEARCH_S)
        for sizes, kwargs in constructor_attempts(cls):
            if not budget.left():
                return
            model, kwargs, error = _instantiate(cls, kwargs, sizes)
            if model is None:
                _keep(errors, "instantiate", error)  # type: ignore[arg-type]
                continue
            yield model, {k: short_repr(v) for k, v in kwargs.items()}, None, kwargs, sizes, None

    for model, shown, call, kwargs, sizes, init in attempts():
        result["init_args"] = shown
        result["stage"] = "forward"
        progress("forward")
        _set_mode(model, False)
        found = None
        if call is not None:
            try:
                with torch.no_grad():
                    found = (call[0], call[1], model(*call[0], **call[1]))
            except BaseException as e:
                _guard(e)
                _keep(errors, "forward", e)
        if found is None:
            seen: list[BaseException] = []
            found, error = _forward(model, kwargs, sizes, budget, seen)
            if found is None and error is not None:
                _keep(errors, "forward", error)
                # a guessed argument forward calls (``self.fn(x)`` of a residual wrapper given an int):
                # built again with a layer there. Any input's error may show it (the plain image,
                # after inputs of other ranks stopped earlier).
                # Each rebuilt block's error may show one more (``Deterministic(f)`` and ``Deterministic(g)``).
                changed, errors_seen = kwargs, [error, *seen]
                for _ in range(_FORWARD_REPAIRS):
                    change = next((c for e in errors_seen for c in forward_repairs(cls, changed, e)), None)
                    rebuilt, changed, _ = _instantiate(cls, {**changed, **change}, sizes) if change else (None, changed, None)
                    if rebuilt is None:
                        break
                    errors_seen = []
                    # the change an error showed is the best lead there is: its block gets a few
                    # calls of its own when the search spent the budget
                    found, again = _forward(rebuilt, changed, sizes, budget if budget.left() else _Budget(*_REPAIRED_CALLS),
                                            errors_seen)
                    if found is not None:
                        model, kwargs = rebuilt, changed
                        result["init_args"] = {k: short_repr(v) for k, v in changed.items()}
                        break
                    errors_seen = [again, *errors_seen] if again is not None else errors_seen
            if found is None:
                continue
        args, kw, out = found
        # counted after forward: lazy modules have no parameter sizes before it
        result["params"] = sum(p.numel() for p in model.parameters())
        result["submodules"] = _inventory(model)
        _record_call(result, init, kwargs, args, kw, out)
        result["weights_not_fetched"] = weights.refused()
        result["stage"] = "backward"
        progress("backward")
        result["backward"] = _backward_or_given(result, model, init, kwargs, args, kw)
        return
    stage = result["stage"]
    last = errors.get(stage)
    if last is None:
        raise StageFailure(stage, R.INPUT_INFERENCE if stage == "forward" else R.CONSTRUCTOR_ARGS, None,
                           "no input shape fits the forward signature" if stage == "forward" else "no constructor arguments fit")
    raise StageFailure(stage, classify(stage, last), last)


def _backward_or_given(result: dict[str, Any], model: nn.Module, init: Any, kwargs: dict[str, Any], args: list[Any],
                       kw: dict[str, Any]) -> bool | None:
    """:func:`_backward`; where it meets an optional input the call left at ``None`` (latent
    diffusion's checkpointed attention saves ``context=None`` for the backward pass), once more
    with the optional tensors given, the record then holding that call."""
    try:
        return _backward(model, args, kw)
    except StageFailure as failure:
        filled = optional_tensors(model, args, kw) if failure.error is not None and NONE_USED.search(str(failure.error)) else {}
        if not filled:
            raise
        try:
            with torch.no_grad():
                out = model(*args, **kw, **filled)
        except BaseException as e:
            _guard(e)
            raise failure from None
        kw = {**kw, **filled}
        _record_call(result, init, kwargs, args, kw, out)
        return _backward(model, args, kw)


def _record_call(result: dict[str, Any], init: Any, kwargs: dict[str, Any], args: list[Any], kw: dict[str, Any], out: Any) -> None:
    """What the record says of the call the block is judged by: its inputs, output and recipe."""
    result["input_shapes"] = [_shape_or_repr(a) for a in args]
    result["input_dtypes"] = [_dtype(a) for a in args]
    result["keyword_shapes"] = {k: _shape_or_repr(v) for k, v in kw.items() if v is not None}
    result["keyword_dtypes"] = {k: _dtype(v) for k, v in kw.items() if v is not None}
    result["output_shapes"] = shapes(out)
    result["recipe"] = _recipe(init, kwargs, args, kw)


def _inventory(model: nn.Module) -> dict[str, int]:
    """Counts of submodule types, outermost first (the block itself left out)."""
    counts: dict[str, int] = {}
    for sub in list(model.modules())[1:]:
        name = type(sub).__name__
        counts[name] = counts.get(name, 0) + 1
    return counts


def _forward(model: nn.Module, kwargs: dict[str, Any], sizes: Sizes, budget: _Budget,
             seen: list[BaseException] | None = None) -> tuple[Any, BaseException | None]:
    """Search inputs for one built model: the likeliest candidates first, and a candidate read off
    each error message tried next. Returns ((args, kwargs, output), None) or (None, first error);
    ``seen`` collects every error, one per message."""
    candidates = input_shapes(model, kwargs, sizes)
    channels = next((v for v in kwargs.values() if isinstance(v, int) and not isinstance(v, bool)), sizes.dim)
    queue = deque(candidates)
    tried: set[tuple[str, tuple[int, ...]]] = set()
    first: BaseException | None = None
    local = _TRIES_PER_MODEL
    while queue and local > 0 and (budget.left() or local == _TRIES_PER_MODEL):
        kind, shape = queue.popleft()
        if (kind, shape) in tried or any(d <= 0 for d in shape) or math.prod(shape) > _MAX_INPUT_ELEMENTS:
            continue
        tried.add((kind, shape))
        main = make_tensor(kind, shape)
        repaired = False
        if kind.startswith("graph") or kind in ("images", "numpy"):
            calls: Any = [([main], {})]
        elif kind.startswith((FIELDS, KEYS)):  # the other arguments as for the first field's tensor
            inner = next(iter(main.values() if isinstance(main, dict) else vars(main).values()))
            calls = (([main, *a[1:]], kw) for a, kw in forward_calls(model, inner, kwargs) if a and a[0] is inner)
        else:
            calls = forward_calls(model, main, kwargs)
        pending: deque[tuple[list[Any], dict[str, Any]]] = deque()  # calls an error asked for, tried next
        for i, (args, kw) in enumerate(_then(pending, calls)):
            if i >= _CALLS_PER_INPUT or not (budget.left() or local == _TRIES_PER_MODEL):
                break
            budget.tries -= 1
            local -= 1
            try:
                with torch.no_grad():  # a graph batch as a copy: forward may replace its attributes
                    out = model(*[_fresh(a) for a in args], **kw)
                if not isinstance(out, nn.Module):
                    return (args, kw, out), None
                # a layer built where a function was wanted (``reduce_fn=ReLU``, then
                # ``self.reduce_fn(x)``): the call made a module, not a value
                e: BaseException = TypeError(f"forward returned '{type(out).__name__}', a module, not a value")
            except BaseException as raised:
                _guard(raised)
                e = raised
            if seen is not None and len(seen) < 16 and all(str(e) != str(o) for o in seen):
                seen.append(e)
            first = e if _outranks(e, first) else first  # a missing module over the shape errors before it
            if not repaired and args and _is_main(args[0], main):  # the plain call's error, not a per-level one's
                # or, when that one's error says nothing of the main input (a companion's assert),
                # the next call's: the first that suggests a shape
                suggested = spectrogram_inputs(model, e, shape) + input_repairs(e, kind, shape, sizes, channels)
                repaired = bool(suggested)
                queue.extendleft(reversed(suggested))
            if (keyed := _with_key(args, e)) is not None:
                pending.append((keyed, kw))
            if (reshaped := _asserted_companions(model, args, kw, e, sizes)) is not None:
                pending.append(reshaped)
            if (counted := _as_numbers(args, e)) is not None:
                pending.append((counted, kw))
            if (alike := _one_size(args, e)) is not None:
                pending.append((alike, kw))
            if (joined := _joined_companions(args, kw, e)) is not None:
                pending.append(joined)
            if _sized_as_its_parent_would(model, args, e):
                pending.append((args, kw))
            # the lines are read only for an error of a None used as a value: this runs per failed call
            if NONE_USED.search(str(e)) and (given := given_for_none(model, args, kw, e, _frame_lines(model, e))) is not None:
                pending.append(given)
            if (keyed_call := _keyed_in_line(model, args, kw, e)) is not None:
                pending.append(keyed_call)
    return None, first


def _frame_lines(model: nn.Module, error: BaseException) -> str:
    """The lines of the block's own frames the error passed through, one per line."""
    return "\n".join(traceback.FrameSummary(f.f_code.co_filename, f.f_lineno, f.f_code.co_name).line or ""
                     for f in candidate_frames(type(model), error))


_NONE_OPERAND = re.compile(r"unsupported operand type\(s\) for .*'NoneType'|'NoneType' object cannot be interpreted as an integer")
# the height and width of the map a sequence of tokens lays out
_SIDE_NAMES = re.compile(r"^(?:[HW]|[hw]|height|width)$")


def _sized_as_its_parent_would(model: nn.Module, args: list[Any], error: BaseException) -> bool:
    """Swin's detection blocks take tokens and read the map's height and width off attributes their
    parent sets before each call (``blk.H, blk.W = H, W``; ``None`` until then): ``None * None``.
    Such attributes (``None`` after construction, named as a height or width, read by ``forward``)
    are set to the side of the square map the tokens lay out; True when the call is worth again."""
    main = args[0] if args else None
    if not (isinstance(error, TypeError) and _NONE_OPERAND.search(str(error)) and isinstance(main, torch.Tensor)
            and main.dim() == 3 and (side := math.isqrt(main.shape[1])) ** 2 == main.shape[1]):
        return False
    try:
        text = inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        return False
    read = set(re.findall(r"\bself\.(\w+)", text))
    unset = [name for name, value in vars(model).items() if value is None and name in read and _SIDE_NAMES.match(name)]
    for name in unset:
        setattr(model, name, side)
    return bool(unset)


def _then(pending: deque[Any], calls: Any) -> Iterator[Any]:
    """The calls, each followed by the ones its error asked for."""
    for call in calls:
        while pending:
            yield pending.popleft()
        yield call
    while pending:
        yield pending.popleft()


def _asserted_companions(model: nn.Module, args: list[Any], kw: dict[str, Any], error: BaseException,
                         sizes: Sizes) -> tuple[list[Any], dict[str, Any]] | None:
    """The call again with the arguments after the main input that a failed condition of
    ``forward`` asks another shape of (``assert target_sizes.shape[1] == 2``) made so, of the same
    kind (integer arguments stay integer)."""
    forward = getattr(type(model).forward, "__code__", None)
    if forward is None or not (wanted := asserted_arguments_of_call(error, forward, sizes.spatial)):
        return None
    try:
        bound = inspect.signature(model.forward).bind_partial(*args, **kw).arguments
    except TypeError:
        return None
    names = list(bound)
    if names and names[0] in wanted:  # the main input's shape is the input repairs' to change
        del wanted[names[0]]
    a, k, changed = list(args), dict(kw), False
    for name, shape in wanted.items():
        old = bound.get(name)
        if not isinstance(old, torch.Tensor) or math.prod(shape) > _MAX_INPUT_ELEMENTS:
            continue
        # positive values: sizes and scales (an image's height and width) as often as anything
        new = torch.rand(shape, dtype=old.dtype) + 0.5 if old.is_floating_point() else torch.randint(1, 8, shape, dtype=old.dtype)
        if name in k:
            k[name] = new
        else:
            a[names.index(name)] = new
        changed = True
    return (a, k) if changed else None


_JOINED = re.compile(r"Sizes of tensors must match except in dimension (\d+)\. Expected size (\d+) but got size (\d+)")


def _joined_companions(args: list[Any], kw: dict[str, Any], error: BaseException) -> tuple[list[Any], dict[str, Any]] | None:
    """A decoder's skip connection joined to what its layers made of the main input
    (``torch.cat((self.up(x), skip_input), 1)``: the upsampled map is twice the input's side): the
    call again with the tensors after the main input sized as the join expects, on every axis but
    the batch and the one joined along."""
    m = _JOINED.search(str(error))
    if m is None:
        return None
    along, expected, got = (int(g) for g in m.groups())

    def resized(value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.dim() <= along:
            return value
        shape = [expected if i not in (0, along) and d == got else d for i, d in enumerate(value.shape)]
        if shape == list(value.shape) or math.prod(shape) > _MAX_INPUT_ELEMENTS:
            return value
        return torch.randn(shape, dtype=value.dtype) if value.is_floating_point() else torch.zeros(shape, dtype=value.dtype)

    a, k = [*args[:1], *(resized(v) for v in args[1:])], {name: resized(v) for name, v in kw.items()}
    changed = any(x is not y for x, y in zip(a, args)) or any(k[n] is not kw[n] for n in kw)
    return (a, k) if changed else None


def _with_key(args: list[Any], error: BaseException) -> list[Any] | None:
    """A dict input that lacks the key the forward read (``input["low"]`` of a segmentation head,
    ``data["image0"]`` of a matcher): the arguments again, the dict with that key added (a copy of
    its first value)."""
    if not (isinstance(error, KeyError) and error.args and isinstance(key := error.args[0], str) and args
            and isinstance(given := args[0], dict) and given and key not in given and len(given) < 8):
        return None
    value = next(iter(given.values()))
    return [{**given, key: value.clone() if isinstance(value, torch.Tensor) else value}, *args[1:]]


_INDEXED_BY_NAME = re.compile(r"too many indices for tensor|only integers, slices|invalid data type 'str'")


def _keyed_in_line(model: nn.Module, args: list[Any], kw: dict[str, Any], error: BaseException) -> tuple[list[Any], dict[str, Any]] | None:
    """A tensor argument a part of the block reads by a string key (``cond[self.cond_key]`` of a
    conditioned layer deep in a sequence, the key kept on the part): the call again with that
    argument a dict holding it under the key, read off the failing line as its frame sees it."""
    if not (isinstance(error, (IndexError, TypeError)) and _INDEXED_BY_NAME.search(str(error))):
        return None
    frames = candidate_frames(type(model), error)
    statement = failing_statement(frames[0]) if frames else None
    if statement is None:
        return None
    scope = {**frames[0].f_globals, **frames[0].f_locals}
    for node in ast.walk(statement):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            continue
        held, key = scope.get(node.value.id), static_value(node.slice, scope)
        if not (isinstance(held, torch.Tensor) and isinstance(key, str)):
            continue
        if any(a is held for a in args) or any(v is held for v in kw.values()):
            return [{key: a} if a is held else a for a in args], {k: {key: v} if v is held else v for k, v in kw.items()}
    return None


# torch refusing a tensor where it takes a number: ``arange(i, j)`` of a bias over ``i`` queries and
# ``j`` keys, ``ones(size)``
_WANTS_NUMBER = re.compile(r"invalid combination of arguments - got \((?:\w+, )*Tensor.*expected one of:.*\(Number"
                           r"|must be (?:int|tuple of ints), (?:not|but found element of type) Tensor", re.DOTALL)


def _as_numbers(args: list[Any], error: BaseException) -> list[Any] | None:
    """The arguments again with every tensor given as a number, when torch's error says it wanted
    numbers (lengths a forward builds ranges or grids from)."""
    if not (isinstance(error, TypeError) and _WANTS_NUMBER.search(str(error))
            and any(isinstance(a, torch.Tensor) for a in args)):
        return None
    return [8 if isinstance(a, torch.Tensor) else a for a in args]


_SIZES_DIFFER = re.compile(r"[Ss]izes of tensors must match|expects each tensor to be equal size|must match the size of tensor")


def _one_size(args: list[Any], error: BaseException) -> list[Any] | None:
    """Feature maps of a pyramid given where the forward joins them as they are (a fusion of
    streams, a stack of views), when the error says their sizes differ: the arguments again, every
    map the size of the first, in the same container."""
    given = args[0] if args else None
    maps = list(given.values()) if isinstance(given, dict) else given if isinstance(given, (list, tuple)) else []
    if not (2 <= len(maps) <= 8 and all(isinstance(m, torch.Tensor) for m in maps)
            and len({m.shape for m in maps}) > 1 and _SIZES_DIFFER.search(str(error))):
        return None
    alike = [maps[0].clone() for _ in maps]
    return [dict(zip(given, alike)) if isinstance(given, dict) else type(given)(alike), *args[1:]]


def _is_main(arg: Any, main: torch.Tensor) -> bool:
    """The main input, or a loss's prediction drawn in its place (same shape and dtype)."""
    return arg is main or isinstance(arg, torch.Tensor) and arg.shape == main.shape and arg.dtype == main.dtype


def _fresh(value: Any) -> Any:
    """A graph batch as a new object over the same tensors (``batch.x = encoder(batch.x)`` in a
    forward leaves the caller's batch as it was); anything else as it is."""
    return SimpleNamespace(**vars(value)) if isinstance(value, SimpleNamespace) else value


def _instantiate(cls: type, kwargs: dict[str, Any], sizes: Sizes) -> tuple[nn.Module | None, dict[str, Any], BaseException | None]:
    """Instantiate, repairing the arguments as the errors suggest: arguments a ``**kwargs``
    pass-through needs, integers where a pair or list was wanted, layers where ``None`` was called."""
    error: BaseException | None = None
    used: set[str] = set()  # changes tried, by repr: 64.0 after 64 is a new change
    for _ in range(8):
        try:
            if (n := _oversized(cls, kwargs)) is not None:
                return None, kwargs, MemoryError(f"these arguments build {n:,} parameters; too large to probe")
            return built_recording(cls, kwargs), kwargs, None
        except BaseException as e:
            _guard(e)
            error = e
            change = next((c for c in repairs(cls, kwargs, e, sizes) if c and repr(c) not in used), None)
            if change is None:
                break
            used.add(repr(change))
            kwargs = {**kwargs, **change}
    return None, kwargs, error


def _oversized(cls: type, kwargs: dict[str, Any]) -> int | None:
    """The parameter count of an architecture too large to probe, counted on the meta device
    (no memory, no initialisation); None when it is small enough or cannot be counted there.
    Only classes with a depth argument are counted: it costs a second construction."""
    try:
        if not any(is_depth(name) for name in inspect.signature(cls).parameters):
            return None
        with torch.device("meta"):
            model = cls(**kwargs)
        n = sum(p.numel() for p in model.parameters())
    except Exception:
        return None
    return n if n > _MAX_PARAMS else None


def _set_mode(model: nn.Module, training: bool) -> None:
    """Training or evaluation mode, through the block's own ``train`` (which may keep norms frozen),
    or by the flags alone when ``train`` was redefined for something else (an explainer's
    ``train(epoch, model, x, edge_index)``)."""
    try:
        model.train(training)
    except TypeError:
        for m in model.modules():
            m.training = training


def _differentiable(a: torch.Tensor, grad: bool) -> torch.Tensor:
    a = a.detach()
    return a.requires_grad_(True).clone() if grad else a


def _backward(model: nn.Module, args: list[Any], kw: dict[str, Any]) -> bool | None:
    """One backward pass; None when nothing in the output is differentiable."""
    errors: list[BaseException] = []
    for train in (True, False):
        _set_mode(model, train)
        model.zero_grad(set_to_none=True)
        # only the first input asks for a gradient: a loss's target is data, not a variable; it is
        # a non-leaf (a clone of the leaf) so a block whose first op is in place (x.mul_) still runs
        inputs = [_differentiable(a, i == 0) if isinstance(a, torch.Tensor) and a.is_floating_point() else _fresh(a)
                  for i, a in enumerate(args)]
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


# The gate's own guessing code: an exception raised in these files (not in the candidate, nor in
# torch called with a guessed input) is a bug of the gate, never the block's failure.
_PROBE_FILES = frozenset(str(Path(__file__).with_name(n)) for n in ("probe.py", "arguments.py", "inputs.py", "shape_errors.py",
                                                                   "repairs.py", "asserts.py")) | {
    str(Path(__file__).parent / "usage" / "recipes.py")}


def raised_by_probe(e: BaseException) -> bool:
    """Whether the innermost frame of the exception is the probe's own code."""
    frames = traceback.extract_tb(e.__traceback__)
    return bool(frames) and frames[-1].filename in _PROBE_FILES and not isinstance(e, (StageFailure, SandboxViolation))


def format_failure(e: BaseException) -> str:
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    text = "".join(lines)
    return text[-3000:]
