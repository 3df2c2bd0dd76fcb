"""Constructor arguments read off the error a guess raised: the changed keyword arguments to try
next, most specific first. Runs inside the sandbox, on the candidate's own classes and frames.

Besides the message itself, two things the candidate shows are read:

- the values its code compares a parameter with (``if name == "scse"``, ``assert mode in
  {BINARY_MODE, ...}``, ``acts[name]``), in the class or in the function the error came from;
- the attribute it reads off a guessed value (``block.expansion``, ``backbone.out_channels``),
  answered with a class of the candidate that has it, or a small torch layer that does.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import re
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Iterable, Iterator

import torch
from torch import nn

from .arguments import (CHANNEL_NAMES, AutoConfig, Passthrough, Sizes, name_words, guess_value, init_hints, instance_of,
                        is_depth, passed_through)
from .source import failing_statement, keys_off, source_tree as _tree, static_value
from .asserts import asserted_arguments, failed_condition
from .frames import IDENTIFIER, called_in_line, callee_at, candidate_frames, held_under, innermost_line, named_in_line, passed_as
from ...indexing.attributes import read_off
from .companions import having
from .shape_errors import TOO_SHORT


_UNPACKED = re.compile(r"(?:not enough|too many) values to unpack \(expected (\d+), got (\d+)\)")
_MISSING = re.compile(r"missing \d+ required (?:positional|keyword-only) arguments?: (.+)")
_WANTS_SEQUENCE = ("is not iterable", "is not subscriptable", "has no len()", "cannot unpack non-iterable",
                   "is not reversible", "must be an iterable")
_PARITY = re.compile(r"\b(?:must|should|has to) be (odd|even)\b")


_SIZE_WORDS = ("size", "resolution", "window", "patch", "grid", "shape", "kernel", "stride", "dilation", "padding")
_NOT_SEQUENCES = ("channels", "features", "classes", "heads", "chans", "chs", "dim")


def _ints(kwargs: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in kwargs.items() if isinstance(v, int) and not isinstance(v, bool)}


def _floats(value: Any) -> Any:
    """An integer, or a list or tuple of them, as floats; anything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return type(value)(float(v) for v in value)
    return value


_QUOTED = re.compile(r"'([A-Za-z_][\w\-]*)'")


def _table_keys(cls: type, kind: type) -> list[Any]:
    """Keys of a table the class defines (``arch_settings = {18: ..., 34: ...}``), smallest first."""
    for klass in cls.__mro__:
        if klass in (nn.Module, object):
            break
        for value in vars(klass).values():
            if isinstance(value, dict) and len(value) >= 2 and all(type(k) is kind for k in value):
                return sorted(value)
    return []


@dataclass(frozen=True)
class Failure:
    """A constructor call that failed, as the rules of ``REPAIR_RULES`` see it."""

    cls: type
    kwargs: dict[str, Any]
    error: BaseException
    sizes: Sizes

    @functools.cached_property
    def text(self) -> str:
        return str(self.error)

    def raised(self, *kinds: type[BaseException]) -> bool:
        return isinstance(self.error, kinds)


@dataclass(frozen=True)
class RepairRule:
    """One way an error shows which guessed arguments to change: ``repair`` yields the changes."""

    name: str
    repair: Callable[[Failure], Iterable[dict[str, Any]]]


def _asserted(f: Failure) -> Iterator[dict[str, Any]]:
    if asserted := asserted_arguments(f.cls, f.kwargs, f.error):  # ``assert depth > 1``
        yield asserted
    if flags := _asserted_flags(f):  # ``assert return_intermediate, "support return_intermediate only"``
        yield flags


def _asserted_flags(f: Failure) -> dict[str, Any]:
    """Flags off that a failed condition asks to be on: a parameter named bare in it (``assert
    flag``, ``assert self.flag and ...``), whose default or guess is ``False``."""
    found = failed_condition(f.error)
    if found is None:
        return {}
    test = found[0]
    clauses = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    try:
        defaults = {p.name: p.default for p in inspect.signature(f.cls).parameters.values()}
    except (TypeError, ValueError):
        return {}
    names = {c.id if isinstance(c, ast.Name) else c.attr for c in clauses
             if isinstance(c, ast.Name) or isinstance(c, ast.Attribute) and isinstance(c.value, ast.Name) and c.value.id == "self"}
    return {n: True for n in names if n in defaults and f.kwargs.get(n, defaults[n]) is False}


def _required_instance(f: Failure) -> Iterator[dict[str, Any]]:
    """An argument a failed ``isinstance`` check asks to be of a class ("if not isinstance(model,
    GP): raise RuntimeError(...)", ``assert isinstance(likelihood, _GaussianLikelihoodBase)``): an
    instance of it built from guesses, of a concrete subclass where it is a layer with no forward."""
    found = failed_condition(f.error)
    if found is None:
        return
    test, frame = found
    scope = {**frame.f_globals, **frame.f_locals}
    for node in ast.walk(test):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                and len(node.args) == 2):
            continue
        checked = node.args[0]
        if isinstance(checked, ast.Attribute) and isinstance(checked.value, ast.Name) and checked.value.id == "self":
            checked = ast.Name(checked.attr)  # ``self.model`` holds the argument ``model``
        if not (isinstance(checked, ast.Name) and checked.id in f.kwargs):
            continue
        try:
            wanted = static_value(node.args[1], scope)
        except Exception:
            continue
        for cls in wanted if isinstance(wanted, (list, tuple)) else [wanted]:
            if not isinstance(cls, type) or isinstance(f.kwargs[checked.id], cls):
                continue
            # a tensor (``assert isinstance(positions, torch.Tensor)``) from the number guessed for it
            made = as_tensor(f.kwargs[checked.id]) if issubclass(torch.Tensor, cls) else instance_of(cls, f.sizes, f.cls)
            if made is not None:
                yield {checked.id: made}
                break


def _table_key(f: Failure) -> Iterator[dict[str, Any]]:
    """A value that must be a key of the class's own table: ResNet(depth=...) of arch_settings."""
    if not f.raised(KeyError, ValueError, AssertionError):
        return
    for name, value in f.kwargs.items():
        if type(value) in (int, str) and (name in f.text or repr(value) in f.text) and (keys := _table_keys(f.cls, type(value))):
            yield {name: keys[0]}


def _listed_choice(f: Failure) -> Iterator[dict[str, Any]]:
    """An argument the message names, with the choices it lists: "Unsupported hidden_act 16: expected
    'gelu' or ..."; or a guessed string the message quotes among them ("relu is not in ['ReLU',
    'Tanh']"), as the choice spelt like it, else the first."""
    if not f.raised(KeyError, ValueError, AssertionError):
        return
    choices = [c for c in _QUOTED.findall(f.text) if c not in f.kwargs]
    named = [k for k, v in f.kwargs.items() if k in f.text and not (isinstance(v, str) and v in choices)]
    if choices and named:
        yield {named[0]: choices[0]}
    elif choices:
        words = set(IDENTIFIER.findall(f.text))
        given = [k for k, v in f.kwargs.items() if isinstance(v, str) and v in words and v not in choices]
        if given:
            v = f.kwargs[given[0]].lower()
            yield {given[0]: next((c for c in choices if c.lower() == v), choices[0])}


def _missing_argument(f: Failure) -> Iterator[dict[str, Any]]:
    if not (f.raised(TypeError) and (missing := _MISSING.search(f.text))):
        return
    # 'self' is missing when the constructor calls a method of a class it was given, never an argument
    names = [n for n in re.findall(r"'(\w+)'", missing.group(1)) if n not in ("self", "cls")]
    if not names or all(n in f.kwargs for n in names):
        return
    if (spread := _spread_config(f, names)) is not None:
        yield spread
        return
    hints = init_hints(f.cls)
    yield {n: guess_value(n, hints.get(n, inspect.Parameter.empty), f.sizes, f.cls) for n in names if n not in f.kwargs}


def _spread_config(f: Failure, names: list[str]) -> dict[str, Any] | None:
    """Arguments another constructor misses (``Encoder.__init__() missing 'ch', ...``) where the
    block spreads a config of its own into it (``Encoder(**ddconfig)``): that config, with them.
    They are no parameters of the block, which would refuse them; None where the block takes them."""
    try:
        params = inspect.signature(f.cls).parameters
    except (TypeError, ValueError):
        return None
    if all(n in params for n in names) or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    line = innermost_line(candidate_frames(f.cls, f.error))
    spread = [k for k in f.kwargs if isinstance(f.kwargs[k], dict) and re.search(rf"\*\*\s*{k}\b", line)]
    if not spread:
        return None
    called = re.search(r"(\w+)\.__init__\(\)", f.text)
    inner = _class_called(f, called.group(1)) if called else None
    hints = init_hints(inner) if inner is not None else {}
    config = dict(f.kwargs[spread[0]])
    config.update({n: guess_value(n, hints.get(n, inspect.Parameter.empty), f.sizes, inner) for n in names if n not in config})
    return {spread[0]: config}


def _class_called(f: Failure, name: str) -> type | None:
    """The class of that name in the block's module, if it holds one."""
    found = getattr(sys.modules.get(f.cls.__module__), name, None)
    return found if isinstance(found, type) else None


def _absent_file_unset(f: Failure) -> Iterator[dict[str, Any]]:
    """A path the constructor opens by default (``checkpoint="./checkpoints/model.pth"``, weights
    a README says to download) that the source does not hold: None, which such constructors read
    as "no weights" (``if checkpoint is not None: load``)."""
    missing = getattr(f.error, "filename", None) if isinstance(f.error, FileNotFoundError) else None
    if not isinstance(missing, str):
        return
    try:
        params = inspect.signature(f.cls).parameters.values()
    except (TypeError, ValueError):
        return
    unset = {p.name: None for p in params if f.kwargs.get(p.name, p.default) == missing}
    if unset:
        yield unset


def _parity(f: Failure) -> Iterator[dict[str, Any]]:
    """"window_length must be odd": the integers the message names, one up."""
    if m := _PARITY.search(f.text):
        odd = m.group(1) == "odd"
        named = set(IDENTIFIER.findall(f.text))
        yield {k: v + 1 for k, v in _ints(f.kwargs).items() if k in named and v % 2 != odd}


def _float_for_gradients(f: Failure) -> Iterator[dict[str, Any]]:
    """A tensor made from a guessed integer cannot require gradients: the integers the line names as floats."""
    if "floating point" in f.text and "require gradients" in f.text:
        named = named_in_line(candidate_frames(f.cls, f.error), f.kwargs)
        yield {k: _floats(v) for k, v in f.kwargs.items() if (k in named or not named) and _floats(v) is not v}


def _ints_as_sequences(f: Failure) -> Iterator[dict[str, Any]]:
    """An integer where the code iterates or indexes: plural names as lists, sizes as pairs, then any."""
    if not any(w in f.text for w in _WANTS_SEQUENCE):
        return
    ints = {k: v for k, v in _ints(f.kwargs).items() if "spatial" not in k}  # a count of axes, never a list
    yield {k: [v, v] for k, v in ints.items()  # ``num_res_blocks`` is a count, plural or not
           if k.endswith(("s", "_list")) and not k.endswith(_NOT_SEQUENCES) and not k.lower().startswith(("num", "n_"))}
    yield {k: (v, v) for k, v in ints.items() if any(w in k.lower() for w in _SIZE_WORDS)}
    yield {k: (v, v) for k, v in ints.items() if not k.lower().endswith(_NOT_SEQUENCES) and not k.lower().startswith("num")}


def _unpacked_length(f: Failure) -> Iterator[dict[str, Any]]:
    """``r1, r2, r3 = atrous_rates`` given a pair: the length it unpacks to."""
    if not (m := _UNPACKED.search(f.text)):
        return
    wanted, got = int(m.group(1)), int(m.group(2))
    named = named_in_line(candidate_frames(f.cls, f.error), f.kwargs)
    for k in sorted(f.kwargs, key=lambda k: k not in named):
        v = f.kwargs[k]
        if isinstance(v, (list, tuple)) and len(v) == got and v and 0 < wanted <= 8:
            yield {k: type(v)(list(v) + [v[-1]] * (wanted - got)) if wanted > got else type(v)(v[:wanted])}


def _indexed_past_end(f: Failure) -> Iterator[dict[str, Any]]:
    """``list index out of range`` where the class reads a guessed list at a fixed position
    (``num_blocks[3]`` of a four-stage network given a pair): each such list grown, by its last
    value, to the highest position the class's methods read off it."""
    if not (f.raised(IndexError) and re.search(r"(?:list|tuple) index out of range", f.text)):
        return
    grown: dict[str, Any] = {}
    for k, v in f.kwargs.items():
        if isinstance(v, (list, tuple)) and v and (last := _last_position(f.cls, k)) is not None and len(v) <= last <= 8:
            grown[k] = type(v)(list(v) + [v[-1]] * (last + 1 - len(v)))
    if grown:
        yield grown
    # indexed by a loop's position (``num_heads[i]`` for each stage of ``depths``): as long as the
    # longest list of the guesses, whose loop it likely is
    longest = max((len(v) for v in f.kwargs.values() if isinstance(v, (list, tuple))), default=0)
    stepped = {k: type(v)(list(v) + [v[-1]] * (longest - len(v))) for k, v in f.kwargs.items()
               if isinstance(v, (list, tuple)) and v and len(v) < longest <= 8 and _indexed_by_a_name(f.cls, k)}
    if stepped:
        yield stepped
    yield from _indexed_in_a_helper(f)


def _indexed_in_a_helper(f: Failure) -> Iterator[dict[str, Any]]:
    """Indexed where the class's code hands a guessed list to a helper that picks positions of it
    (pytorch-toolbelt's ``_take_ints(filters, layers)`` with ``layers`` defaulting to
    ``[1, 2, 3, 4]``): the list, found by identity among the innermost frame's locals, grown by its
    last value past the highest position the frame holds."""
    frames = candidate_frames(f.cls, f.error)
    if not frames:
        return
    local = frames[0].f_locals
    held = [v for v in local.values() if v is not None]
    positions = [n for v in held for n in ([v] if isinstance(v, int) else v if isinstance(v, (list, tuple)) else ())
                 if type(n) is int and 0 <= n < 8]
    grown = {k: type(v)(list(v) + [v[-1]] * (max(positions) + 1 - len(v))) for k, v in f.kwargs.items()
             if isinstance(v, (list, tuple)) and v and any(x is v for x in held) and positions and max(positions) >= len(v)}
    if grown:
        yield grown


@functools.lru_cache(maxsize=64)
def _indexed_by_a_name(cls: type, name: str) -> bool:
    """Whether the class's methods index ``name`` or ``self.name`` by a variable (``x[i]``)."""
    return any(isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and _names(node.value, name)
               for tree in _method_trees(cls) for node in ast.walk(tree))


def _names(node: ast.expr, name: str) -> bool:
    """``node`` is ``name`` or ``self.name``."""
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name) and node.value.id == "self")


@functools.lru_cache(maxsize=64)
def _last_position(cls: type, name: str) -> int | None:
    """The highest constant position the class's methods index ``name`` or ``self.name`` at."""
    found = [node.slice.value for tree in _method_trees(cls) for node in ast.walk(tree)
             if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)
             and not isinstance(node.slice.value, bool) and _names(node.value, name)]
    return max(found) if found else None


def _per_block_rates(f: Failure) -> Iterator[dict[str, Any]]:
    """A float where the code indexes per block: drop_path=[0.0] * depth."""
    if "'float' object is not subscriptable" in f.text or "'float' object is not iterable" in f.text:
        yield {k: [v] * 8 for k, v in f.kwargs.items() if isinstance(v, float)}


def _none_default_filled(f: Failure) -> Iterator[dict[str, Any]]:
    """A parameter left at ``None`` that the code calls or indexes: a layer or a sequence guessed for it."""
    if "'NoneType' object is not callable" not in f.text and "'NoneType' object is not subscriptable" not in f.text:
        return
    try:
        params = inspect.signature(f.cls).parameters.values()
    except (TypeError, ValueError):
        params = []  # type: ignore[assignment]
    yield {p.name: value for p in params if p.default is None and p.name not in f.kwargs
           and (value := guess_value(p.name, inspect.Parameter.empty, f.sizes, f.cls)) is not None
           and (isinstance(value, type) or not isinstance(value, int))}


_MODULE_LACKS = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")


def _spelled_as_the_module_spells_it(f: Failure) -> Iterator[dict[str, Any]]:
    """A guessed string the code looks up in a module ("module 'torch.nn' has no attribute
    'relu'" for ``getattr(nn, activation)``): the module's own name that differs only in case."""
    if not (f.raised(AttributeError) and (m := _MODULE_LACKS.search(f.text))):
        return
    module = sys.modules.get(m.group(1))
    names = {n.lower(): n for n in dir(module)} if module is not None else {}
    change = {k: names[v.lower()] for k, v in f.kwargs.items() if v == m.group(2) and isinstance(v, str) and v.lower() in names}
    if change:
        yield change


_NOT_DIVISIBLE = re.compile(r"\((\d+)\) must be divisible by \w+ \((\d+)\)")


def _widths_for_groups(f: Failure) -> Iterator[dict[str, Any]]:
    """"num_channels (16) must be divisible by num_groups (32)": a group norm's fixed groups over
    widths guessed smaller, or derived from them. The guessed widths, as many times wider as the
    width named needs to be a multiple."""
    if not (m := _NOT_DIVISIBLE.search(f.text)):
        return
    have, groups = int(m.group(1)), int(m.group(2))
    factor = groups // math.gcd(have, groups) if have else 0
    widths = {k: v for k, v in _ints(f.kwargs).items() if k.lower() in CHANNEL_NAMES or {"channels", "dim", "ch"} & set(name_words(k))}
    if factor > 1 and widths:
        yield {k: v * factor for k, v in widths.items()}


_LENGTH_WORDS = {"len", "length", "seq", "time", "times", "samples", "steps", "timesteps", "window", "duration",
                 "seconds", "size", "resolution", "frames"}


def _lengths_too_short(f: Failure) -> Iterator[dict[str, Any]]:
    """Guessed lengths the layers built from them consume (a signal of 16 samples under a kernel of
    25, a window of 250): eight times as long, then sixty-four times. Widths, heads and counts stay."""
    if not TOO_SHORT.search(f.text):
        return
    lengths = {k: v for k, v in f.kwargs.items() if type(v) in (int, float) and v > 0 and k.lower() not in CHANNEL_NAMES
               and _LENGTH_WORDS & set(name_words(k))}
    for factor in (8, 64):
        if lengths:
            yield {k: type(v)(v * factor) for k, v in lengths.items()}


def _refuses_a_choice(error: BaseException) -> bool:
    """An error the ``else`` of a chain of string comparisons raises: each raises its own kind
    (``raise RuntimeError('Got unexpected upsampletype ...')``, ``raise NotImplementedError``)."""
    return isinstance(error, (KeyError, ValueError, AssertionError, NotImplementedError, RuntimeError)) \
        or type(error) is Exception


def _compared_choices(f: Failure) -> Iterator[dict[str, Any]]:
    m = _NO_ATTRIBUTE.search(f.text) if f.raised(AttributeError) else None
    if _refuses_a_choice(f.error) or (m and m.group(2) in _STR_METHODS):
        yield from _choices(f.cls, f.kwargs, f.error)


def _only(kinds: tuple[type[BaseException], ...], repair: Callable[[Failure], Iterable[dict[str, Any]]]
          ) -> Callable[[Failure], Iterable[dict[str, Any]]]:
    return lambda f: repair(f) if f.raised(*kinds) else ()


# The changes a constructor's error suggests, in the order they are tried: most specific first.
REPAIR_RULES: tuple[RepairRule, ...] = (
    RepairRule("asserted relation", _asserted),
    RepairRule("off the GPU there is not", lambda f: [off] if _NO_GPU.search(f.text) and (off := _gpu_off(f.cls)) else ()),
    RepairRule("path of a file not there unset", _absent_file_unset),
    RepairRule("key of the class's table", _table_key),
    RepairRule("choice the message lists", _listed_choice),
    RepairRule("missing argument", _missing_argument),
    RepairRule("instance a check asks for", _required_instance),
    RepairRule("unset argument the message names",
               _only((AssertionError, ValueError, RuntimeError), lambda f: _named_unset(f.cls, f.kwargs, _stated(f), f.sizes))),
    RepairRule("relation the message states", _only((AssertionError, ValueError), lambda f: _relations(f.cls, f.kwargs, f.text))),
    RepairRule("option the message refuses", _only((AssertionError, ValueError), lambda f: _named_default_off(f.cls, f.kwargs, f.text))),
    RepairRule("back to its default", _only((AssertionError, ValueError), lambda f: _named_back_to_default(f.cls, f.kwargs, f.text))),
    RepairRule("optional argument unset again", _only((AssertionError, ValueError), lambda f: _named_unset_again(f.cls, f.kwargs, f.text))),
    RepairRule("parity", _parity),
    RepairRule("floats for gradients", _float_for_gradients),
    RepairRule("sequence the code expects", lambda f: _sequences(f.cls, f.kwargs, f.error)
               if any(w in f.text for w in _WANTS_SEQUENCE) or f.raised(AssertionError) else ()),
    RepairRule("integers as sequences", _ints_as_sequences),
    RepairRule("length unpacked", _unpacked_length),
    RepairRule("indexed past its end", _indexed_past_end),
    RepairRule("length the message states", _only((ValueError, AssertionError), lambda f: _lengths(f.kwargs, f.text))),
    RepairRule("per-block rates", _per_block_rates),
    RepairRule("lengths too short for the layers", _lengths_too_short),
    RepairRule("widths a group count divides", _widths_for_groups),
    RepairRule("name as the module spells it", _spelled_as_the_module_spells_it),
    RepairRule("None default filled", _none_default_filled),
    RepairRule("layer instance", lambda f: _instances(f.cls, f.kwargs, f.error)),
    RepairRule("callable", lambda f: _made_callable(f.cls, f.kwargs, f.error)),
    RepairRule("section of a stand-in config", lambda f: _config_sections(f)),
    RepairRule("attribute read off a guess", lambda f: _by_attribute(f.cls, f.kwargs, f.error, f.sizes)),
    RepairRule("list of layers", lambda f: _layer_lists(f.cls, f.kwargs, f.error)),
    RepairRule("mapping", lambda f: _mappings(f.cls, f.kwargs, f.error)),
    RepairRule("value the code compares with", _compared_choices),
)


def repairs(cls: type, kwargs: dict[str, Any], error: BaseException, sizes: Sizes) -> Iterator[dict[str, Any]]:
    """Changed keyword arguments the error suggests, most specific first."""
    yield from (change for _, change in rule_repairs(Failure(cls, kwargs, error, sizes)))


def rule_repairs(failure: Failure) -> Iterator[tuple[RepairRule, dict[str, Any]]]:
    """Each change ``REPAIR_RULES`` suggest for ``failure``, with the rule that suggests it. A
    config of keywords the block spreads into a part (``Encoder(**ddconfig)``) holds arguments
    too, of that part: the same rules repair them inside it, first where the error came from the
    part (its parameters are the config's keys), as a number of the block equal to one of the
    config's would otherwise be taken for it."""
    configs = {name: config for name, config in failure.kwargs.items()
               if isinstance(config, dict) and config and all(isinstance(k, str) for k in config)}
    frames = candidate_frames(failure.cls, failure.error) if configs else []
    code = frames[0].f_code if frames else None
    params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]) if code is not None else set()
    inside = {name for name, config in configs.items() if params & set(config)}
    for name in sorted(inside):
        yield from _in_config(failure, name, configs[name])
    for rule in REPAIR_RULES:
        for change in rule.repair(failure):
            yield rule, change
    for name in sorted(set(configs) - inside):
        yield from _in_config(failure, name, configs[name])


def _in_config(failure: Failure, name: str, config: dict[str, Any]) -> Iterator[tuple[RepairRule, dict[str, Any]]]:
    inner = Failure(failure.cls, dict(config), failure.error, failure.sizes)
    for rule in REPAIR_RULES:
        for change in rule.repair(inner):
            if (kept := {k: v for k, v in change.items() if k in config}):
                yield rule, {name: {**config, **kept}}


def _unset(default: Any) -> bool:
    return default is None or (type(default) is int and default == 0)


def _stated(f: Failure) -> str:
    """What a failure says: its message, and for an ``assert`` the statement that failed, which
    names what it checks where the message is empty (``assert input_shape is not None``)."""
    if not f.raised(AssertionError):
        return f.text
    line = innermost_line(candidate_frames(f.cls, f.error)).strip()
    return f"{f.text} {line}" if line.startswith("assert ") else f.text


def _named_unset(cls: type, kwargs: dict[str, Any], text: str, sizes: Sizes) -> Iterator[dict[str, Any]]:
    """Parameters left at a ``None`` or ``0`` default that the message names ("`depth` must be
    passed in", "depth, heads, and mlp_dim must be supplied", "pass out_features"), also those a
    ``**kwargs`` passes on to a base."""
    try:
        params = passed_through(cls, inspect.signature(cls))
    except (TypeError, ValueError):
        return
    words = set(IDENTIFIER.findall(text))
    hints = init_hints(cls)
    change = {p.name: guess_value(p.name, hints.get(p.name, p.annotation), sizes, cls) for p in params
              if p.name in words and p.name not in kwargs and _unset(p.default)}
    if change:
        yield change


_OPTION_SUFFIX = re.compile(r"_(?:cfg|config|layer|type|name|kwargs)$")


def _named_default_off(cls: type, kwargs: dict[str, Any], text: str) -> Iterator[dict[str, Any]]:
    """An option on by default that the message says the class has no use for ("There is not
    post_norm in DeformableDetrTransformerDecoder" for ``post_norm_cfg=dict(type='LN')``): off."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return
    words = set(IDENTIFIER.findall(text))
    change = {p.name: None for p in params if p.name not in kwargs and isinstance(p.default, (dict, str))
              and ((stem := _OPTION_SUFFIX.sub("", p.name)) in words and len(stem) >= 4)}
    if change:
        yield change


def _named_back_to_default(cls: type, kwargs: dict[str, Any], text: str) -> Iterator[dict[str, Any]]:
    """Guessed arguments the message names that have a plain default of their own, back at it
    ("depth should be in range [2, 5], got 1" for a guessed ``depth=1`` whose default is 5)."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return
    words = set(IDENTIFIER.findall(text))
    change = {p.name: p.default for p in params if p.name in words and p.name in kwargs
              and type(p.default) in (int, float, str) and kwargs[p.name] != p.default}
    if change:
        yield change


def _named_unset_again(cls: type, kwargs: dict[str, Any], text: str) -> Iterator[dict[str, Any]]:
    """Optional arguments (``None`` by default) that were given and that the message names, each
    unset again, the one named last first: "n_times=16 different from input_window_seconds=4 *
    sfreq=16" is a check that runs only when all three are given, and the ones named after the
    first are what it is derived from."""
    try:
        params = {p.name: p for p in inspect.signature(cls).parameters.values()}
    except (TypeError, ValueError):
        return
    if TOO_SHORT.search(text):  # what the layers consume is too short: lengthened (below), not unset
        return
    named = [w for w in dict.fromkeys(IDENTIFIER.findall(text))
             if w in kwargs and w in params and params[w].default is None and kwargs[w] is not None]
    for name in reversed(named):
        yield {name: None}


# "in_channels == 2 * out_channels", "(groups == in_channels == out_channels)", "order must be less
# than window_length", "dim_pe_out must be smaller than ... dim_emb"
_RELATION = re.compile(r"(?P<op>==|<=?|>=?|(?:less|smaller|lower|fewer)\b(?: than)?|(?:greater|larger|bigger|higher|more)\b(?: than)?)"
                       r"\s*(?:(?P<times>\d+)\s*\*\s*)?")


def _relations(cls: type, kwargs: dict[str, Any], text: str) -> Iterator[dict[str, Any]]:
    """Integer arguments the message relates, the one named first set so that the relation holds
    with the one named next (its value times the factor stated, half of it, twice it). Arguments
    left at an integer default count too."""
    try:
        defaults = {p.name: p.default for p in inspect.signature(cls).parameters.values()}
    except (TypeError, ValueError):
        defaults = {}
    ints = _ints({**defaults, **kwargs})
    named = [(m.start(), m.end(), m.group()) for m in IDENTIFIER.finditer(text) if m.group() in ints]
    for m in _RELATION.finditer(text):
        left = next((n for start, end, n in reversed(named) if end <= m.start()), None)
        right = next((n for start, end, n in named if start >= m.end()), None)
        if left is None or right is None or left == right:
            continue
        op, times, value = m.group("op"), int(m.group("times") or 1), ints[right]
        if op == "==":
            yield {left: value * times}
        elif op.startswith(("<", "less", "smaller", "lower", "fewer")):
            yield {left: max(1, value // 2)}
        else:
            yield {left: max(2, value * 2)}


# --- what the candidate's code compares a parameter with ------------------------------------

_STR_METHODS = frozenset({"lower", "upper", "casefold", "strip", "split", "rsplit", "replace", "partition",
                          "startswith", "endswith", "format", "join", "encode", "isdigit", "isalpha", "title"})
_COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _reads(node: ast.expr, name: str, owners: frozenset[str] | None = frozenset({"self"})) -> bool:
    """``name``, ``self.name`` or ``name.lower()``: an expression standing for the parameter's value
    (with ``owners=None``, ``anything.name``: an attribute of a config)."""
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
        node = node.func.value
    if isinstance(node, ast.Name):
        return owners is not None and node.id == name
    return (isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name)
            and (owners is None or node.value.id in owners))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [v for v in value if isinstance(v, str)]
        return sorted(items) if isinstance(value, (set, frozenset)) else items
    return []


def _compared(tree: ast.AST, name: str, scope: dict[str, Any], owners: frozenset[str] | None = frozenset({"self"})) -> list[str]:
    """Strings ``name`` is compared with or looked up by in ``tree``, in source order."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], _COMPARISONS):
            sides = (node.left, node.comparators[0])
            for mine, other in (sides, sides[::-1]):
                if _reads(mine, name, owners):
                    found += _strings(static_value(other, scope))
        elif isinstance(node, ast.Subscript) and _reads(node.slice, name, owners):
            found += _strings(static_value(node.value, scope))  # ``ACT2FN[name]``: a table's keys
    return list(dict.fromkeys(found))


def _related(a: str, b: str) -> bool:
    """Names that share a word, or where one word abbreviates the other (``act``, ``activation``)."""
    return any(x.startswith(y) or y.startswith(x) for x in re.findall(r"[a-z]{3,}", a.lower())
               for y in re.findall(r"[a-z]{3,}", b.lower()))


def _holding(pending: set[str], kwargs: dict[str, Any], value: Any, local: str, text: str) -> list[str]:
    """The guessed argument a local holds: the same object, or an equal number, narrowed to the
    arguments whose names relate to the local's or the message's when several hold it."""
    same = [k for k in pending if kwargs[k] is value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        same = [k for k in pending if type(kwargs[k]) is type(value) and kwargs[k] == value]
    if len(same) > 1:
        same = [k for k in same if _related(k, local) or _related(k, text)]
    return same if len(same) == 1 else []


def _choices(cls: type, kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """A string the code compares a guessed argument with: in the functions the error passed through
    (a parameter by the same name or holding the same value) and in the class's own methods. A
    parameter left at ``None`` is one too (``activation=None``, then ``if activation == "snake"``
    ... ``else: raise``)."""
    pending = set(kwargs) | _left_none(cls, kwargs)  # a guessed string too: "relu" where "snake" is asked
    configs = {k: v for k, v in kwargs.items() if isinstance(v, AutoConfig)}
    for frame in candidate_frames(cls, error):
        tree = _tree(frame.f_code)
        if tree is None:
            continue
        scope = {**frame.f_globals, **frame.f_locals}
        for local, value in frame.f_locals.items():
            owners = [k for k in pending if k == local] or _holding(pending & set(kwargs), kwargs, value, local, str(error))
            if owners and (values := [v for v in _compared(tree, local, scope) if v != value]):
                yield {owners[0]: values[0]}
        # a stand-in config's attribute this function compares (``self.task_name == "long_term_forecast"``
        # in the forward that raised), before what other methods compare it with
        for k, config in configs.items():
            for name, value in config.asked().items():
                if values := [v for v in _compared(tree, name, scope, owners=None) if v != value]:
                    yield {k: config.with_value(name, values[0])}
    module = vars(sys.modules.get(cls.__module__, sys))
    for klass in cls.__mro__:
        if klass in (nn.Module, object):
            break
        tree = _tree(klass)
        if tree is None:
            continue
        scope = {**module, **vars(sys.modules.get(klass.__module__, sys))}
        for k in sorted(pending, key=lambda k: k not in str(error)):
            if values := [v for v in _compared(tree, k, scope) if v != kwargs.get(k)]:
                yield {k: values[0]}
        # a stand-in config's attribute the code compares (``config.hidden_act == "gelu"``)
        for k, config in configs.items():
            for name, value in config.asked().items():  # a guessed name too ("relu" for an activation)
                if values := [v for v in _compared(tree, name, scope, owners=None) if v != value]:
                    yield {k: config.with_value(name, values[0])}


def _raised_here(cls: type, error: BaseException) -> bool:
    """Whether the block's own code raised ``error`` (a ``raise`` statement of its file, the
    innermost frame of the traceback), not a library it called."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frames = candidate_frames(cls, error)
    return bool(tb is not None and frames and frames[0] is tb.tb_frame
                and isinstance(failing_statement(frames[0]), ast.Raise))


def _left_none(cls: type, kwargs: dict[str, Any]) -> set[str]:
    """Parameters of the constructor not given, whose default is ``None``."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if p.default is None and p.name not in kwargs}


# --- the attribute the code reads off a guessed value ---------------------------------------

_NO_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
_CLASS_LACKS = re.compile(r"type object '(\w+)' has no attribute '(\w+)'")
_WANTS_ATTRIBUTE = re.compile(r"(?:contain|expose|have|has) an? (?:attribute '?(\w+)'?|'(\w+)' attribute)")


@functools.lru_cache(maxsize=8)
def _method_trees(cls: type) -> tuple[ast.AST, ...]:
    """The parsed methods of the class and its bases of the same file: parsed once per class, not
    once per argument and guess."""
    return tuple(t for k in cls.__mro__ if k not in (nn.Module, object) and k.__module__ == cls.__module__
                 for v in vars(k).values() if inspect.isfunction(v) and (t := _tree(v)) is not None)


def _read_off(cls: type, name: str) -> frozenset[str]:
    """Attributes the class's own methods read off argument ``name``."""
    return frozenset(read_off(_method_trees(cls), {name}))


def _config_sections(f: Failure) -> Iterator[dict[str, Any]]:
    """An attribute read off a number a stand-in config answered (``cfg.MVIT.EMBED_DIM`` where
    ``cfg.MVIT`` was 16): that entry, named in the failing line, is a section of the config."""
    m = _NO_ATTRIBUTE.search(f.text) if f.raised(AttributeError) else None
    configs = {k: v for k, v in f.kwargs.items() if isinstance(v, AutoConfig)}
    if m is None or m.group(1) not in ("int", "float", "bool", "str") or not configs:
        return
    line = innermost_line(candidate_frames(f.cls, f.error))
    for chain in re.finditer(rf"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.{m.group(2)}\b", line):
        parts = chain.group(1).split(".")
        for name, config in configs.items():
            # the chain's part the config answered first (``self.cfg.MVIT``: MVIT), and on from it
            start = next((i for i, p in enumerate(parts) if p in config.asked()), None)
            if start is not None and (made := config.with_section(parts[start:])) is not None:
                yield {name: made}
                return


def _by_attribute(cls: type, kwargs: dict[str, Any], error: BaseException, sizes: Sizes) -> Iterator[dict[str, Any]]:
    text = str(error)
    if m := _CLASS_LACKS.search(text):
        # a guessed layer class where the code wants an object that has the attribute
        # (``cutoff_fn.cutoff`` of ``cutoff_fn: Callable`` given ``nn.ReLU``)
        name, attribute = m.groups()
        guessed = [k for k, v in kwargs.items() if isinstance(v, type) and v.__name__ == name]
        frames = candidate_frames(cls, error)
        owners = [k for k in named_in_line(frames, kwargs) if k in guessed] or \
            [k for k in guessed if attribute in _read_off(cls, k)]
    elif (m := _NO_ATTRIBUTE.search(text)) and m.group(2) not in _STR_METHODS:
        kind, attribute = m.groups()
        frames = candidate_frames(cls, error)
        owners = [k for k in named_in_line(frames, kwargs) if type(kwargs[k]).__name__ == kind]
        if not owners and frames:  # read inside a class the block builds with it: ``AutoregressiveWrapper(model)``
            owners = [k for local, value in frames[0].f_locals.items() if type(value).__name__ == kind
                      for k in passed_as(frames, local, set(kwargs)) if type(kwargs[k]).__name__ == kind]
        if not owners:  # kept under another name: ``self.module = deepcopy(model)``, then ``self.module.eval()``
            owners = [k for k, v in kwargs.items() if type(v).__name__ == kind and attribute in _read_off(cls, k)]
    elif m := _WANTS_ATTRIBUTE.search(text):
        attribute = m.group(1) or m.group(2)
        owners = [k for k in kwargs if k in text]
    else:
        return
    line = None  # read once, where no value that has the attribute was offered
    for k in owners:
        offered = False
        for value in having(cls, attribute, sizes, _read_off(cls, k)):
            offered = True
            yield {k: value}
        if not offered:
            line = innermost_line(candidate_frames(cls, error)) if line is None else line
            if (tensor := _tensor_for(kwargs[k], attribute, line)) is not None:
                yield {k: tensor}
            elif _settings_read(cls, k, kwargs[k]):
                # no layer has it and no tensor: a settings object (``h.upsample_rates``,
                # ``args.d_model``, ``configs.seq_len``), standing in with a guess per setting
                yield {k: AutoConfig(sizes)}


def _settings_read(cls: type, name: str, value: Any) -> bool:
    """Whether argument ``name``, guessed as a plain ``value``, is read as a settings object: for
    several attributes, none of them a tensor's or a layer's."""
    if not isinstance(value, (int, float, str)) or isinstance(value, bool):
        return False
    read = _read_off(cls, name)
    return len(read) >= 2 and not any(hasattr(torch.Tensor, a) or hasattr(nn.Module, a) for a in read)


def _tensor_for(value: Any, attribute: str, line: str) -> torch.Tensor | None:
    """A tensor where the code reads a tensor's own attribute off a guessed number (``loc.detach()``,
    ``weights.ndimension()``, ``x.size(0)``, ``x.shape``), no layer's: a vector as long as the
    number, a scalar for a float. A tensor method read and not called in the failing line
    (``net.dim`` of a model's width) is some other object's attribute."""
    if not hasattr(torch.Tensor, attribute) or hasattr(nn.Module, attribute) or attribute.startswith("_"):
        return None
    if callable(getattr(torch.Tensor, attribute)) and not re.search(rf"\.{attribute}\s*\(", line):
        return None
    return as_tensor(value)


def as_tensor(value: Any) -> torch.Tensor | None:
    """A tensor for a number guessed where one is wanted: a positive vector as long as an integer,
    a scalar for a float; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return torch.rand(value) + 0.5 if isinstance(value, int) and 0 < value <= 4096 else torch.tensor(float(value))


_SEQUENCE_CALLS = frozenset({"len", "zip", "enumerate", "list", "tuple", "sorted", "reversed", "sum", "min", "max"})
_SEQUENCE_TYPES = frozenset({"list", "tuple", "Sequence", "Iterable", "MutableSequence"})


def _used_as_sequence(stmt: ast.stmt) -> dict[str, type]:
    """Names (``x`` or ``self.x``, as ``x``; ``config.x`` as it is) the statement takes the length
    of, iterates, indexes, looks a value up in, or checks to be a list or tuple
    (``len(in_channels)``, ``assert isinstance(depth, tuple)``), with the sequence type that
    satisfies it."""
    def name(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.attr if node.value.id == "self" else f"{node.value.id}.{node.attr}"
        return None

    found: dict[str, type] = {}
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in _SEQUENCE_CALLS:
                found.update((n, list) for a in node.args if (n := name(a)))
            elif node.func.id == "isinstance" and len(node.args) == 2:
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                types = {t.id if isinstance(t, ast.Name) else t.attr for t in kinds if isinstance(t, (ast.Name, ast.Attribute))}
                if types & _SEQUENCE_TYPES and (n := name(node.args[0])):
                    found[n] = tuple if types & _SEQUENCE_TYPES == {"tuple"} else list
        elif isinstance(node, (ast.For, ast.comprehension)) and (n := name(node.iter)):
            found.setdefault(n, list)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, (ast.Constant, ast.UnaryOp, ast.Slice, ast.Name)) \
                and (n := name(node.value)):
            found.setdefault(n, list)  # ``depths[0]``, ``pad[-1]``, ``dims[1:]``, ``num_heads[i]``
        elif isinstance(node, ast.Compare) and isinstance(node.ops[-1], (ast.In, ast.NotIn)) and (n := name(node.comparators[-1])):
            found.setdefault(n, list)  # ``if curr_res in attn_resolutions``
    return found


def _sequences(cls: type, kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """An integer argument the failing statement uses as a sequence (its length taken, iterated,
    indexed, asserted to be a list) becomes a list of two such numbers."""
    frames = candidate_frames(cls, error)
    stmt = failing_statement(frames[0]) if frames else None
    if stmt is None:
        return
    ints = _ints(kwargs)
    wanted: dict[str, type] = {}
    configs: dict[str, AutoConfig] = {}
    for local, kind in sorted(_used_as_sequence(stmt).items()):
        if "." in local:  # an entry of a stand-in config (``len(config.aspect_ratios)``)
            owner, entry = local.split(".", 1)
            config = configs.get(owner, kwargs.get(owner))
            value = config.asked().get(entry) if isinstance(config, AutoConfig) else None
            if isinstance(config, AutoConfig) and isinstance(value, (int, float)) and not isinstance(value, bool):
                configs[owner] = config.with_value(entry, kind([value, value]))
        elif local in ints:
            wanted[local] = kind
        elif local in frames[0].f_locals:
            owners = (_holding(set(ints), kwargs, frames[0].f_locals[local], local, str(error))
                      or passed_as(frames, local, set(ints)))
            wanted.update((k, kind) for k in owners)
    if wanted or configs:
        yield {**{k: kind([ints[k], ints[k]]) for k, kind in wanted.items()}, **configs}
    # a list of numbers whose items are unpacked (``for n, d in embedding_dims``): a list of pairs
    pairs = {k: [(v, v) for v in kwargs[k]] for k in _items_used_as_sequences(stmt) & set(kwargs)
             if isinstance(kwargs[k], (list, tuple)) and kwargs[k] and all(type(v) is int for v in kwargs[k])}
    if pairs:
        yield pairs


def _items_used_as_sequences(stmt: ast.stmt) -> set[str]:
    """Names (``x`` or ``self.x``) the statement iterates unpacking or indexing each item (``for a,
    b in x``, ``[nn.Embedding(n, d) for n, d in x]``, ``[loc[:3] for loc in x]``), or whose item it
    iterates (``for c in mlp_list[i]``)."""
    found: set[str] = set()
    for node in ast.walk(stmt):
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        if isinstance(node.iter, ast.Subscript) and isinstance(node.iter.value, ast.Name):
            found.add(node.iter.value.id)  # an item iterated: ``for out_channel in mlp_list[i]``
            continue
        target = node.target
        # each item unpacked, or indexed (``[loc[:3] for loc in channel_locations]``)
        if not (isinstance(target, (ast.Tuple, ast.List)) or isinstance(target, ast.Name) and any(
                isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == target.id
                for n in ast.walk(stmt))):
            continue
        it = node.iter
        if isinstance(it, ast.Name):
            found.add(it.id)
        elif isinstance(it, ast.Attribute) and isinstance(it.value, ast.Name) and it.value.id == "self":
            found.add(it.attr)
    return found


def _lengths(kwargs: dict[str, Any], text: str) -> Iterator[dict[str, Any]]:
    """``Model depth is 1, but you provide decoder_channels for 2 blocks``: a list the message names
    whose length disagrees with a depth argument's value it states, cut or grown to that depth."""
    numbers = {int(n) for n in re.findall(r"\b\d+\b", text)}
    depths = [v for k, v in _ints(kwargs).items() if is_depth(k) and v in numbers]
    for k, v in kwargs.items():
        if isinstance(v, (list, tuple)) and v and k in text and len(v) in numbers:
            for d in depths:
                if d != len(v) and 0 < d <= 8:
                    yield {k: type(v)(list(v[:d]) + [v[-1]] * (d - len(v)))}


def _layer_lists(cls: type, kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """``Argument transforms should be a sequence of callables``: a list of one stand-in layer;
    also where torch's container says so of the argument the failing line hands it
    (``nn.ModuleList(flows)``: "ModuleList.extend should be called with an iterable, but got int")."""
    text = str(error)
    if re.search(r"(?:sequence|list|iterable) of (?:callables|modules|layers|transforms|nn\.Module)", text, re.IGNORECASE):
        for k in kwargs:
            if k in text and not isinstance(kwargs[k], (list, tuple)):
                yield {k: [Passthrough()]}
    elif re.search(r"Module(?:List|Dict)\.\w+ should be called with an iterable", text):
        named = [k for k in named_in_line(candidate_frames(cls, error), kwargs) if not isinstance(kwargs[k], (list, tuple, dict))]
        if named:
            yield {k: [Passthrough()] for k in named}


def _mappings(cls: type, kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """``argument after ** must be a mapping``: the argument is a config of keywords; an empty one
    leaves every keyword at its default (``Layer(**layer_cfg)``). A number whose keys or items the
    code reads: a mapping of numbers. A list or a layer indexed by a string, or handed to
    ``nn.ModuleDict``: a mapping of named parts."""
    if "must be a mapping" in str(error):
        frames = candidate_frames(cls, error)
        for k in named_in_line(frames, kwargs):
            if isinstance(config := kwargs[k], AutoConfig):
                # an entry of a stand-in config passed on (``**config.norm_kwargs``): that entry
                entries = re.findall(rf"\*\*\s*{k}\.(\w+)", innermost_line(frames))
                if entries:
                    yield {k: functools.reduce(lambda c, e: c.with_value(e, {}), entries, config)}
            elif not isinstance(config, dict):
                yield {k: {}}
    elif (m := _DICT_METHOD.search(str(error))) or isinstance(error, KeyError) and error.args and isinstance(error.args[0], str):
        # a number guessed where the code reads a mapping (``in_channels.keys()``, ``p.items()``, ``.get``):
        # that number under each key the class reads off it, or under one name; a key the code
        # then asks of such a mapping, added
        frames = candidate_frames(cls, error)
        for k in named_in_line(frames, kwargs):
            value = kwargs[k]
            if m and isinstance(value, (int, float)) and not isinstance(value, bool):
                yield {k: {key: value for key in _keys_read_off(cls, k) or ["0"]}}
            elif not m and isinstance(value, dict) and value and error.args[0] not in value \
                    and all(isinstance(v, (int, float)) for v in value.values()):
                yield {k: {**value, error.args[0]: next(iter(value.values()))}}
    elif _KEYED.search(str(error)):
        # a mapping of named parts (``nn.ModuleDict(target_models)``, ``latent_codec["y"]``) given a
        # layer or a list: the guess under each key the class reads off it, or under one name
        frames = candidate_frames(cls, error)
        for k in named_in_line(frames, kwargs):
            value = kwargs[k]
            if isinstance(value, dict):
                continue
            part = value[0] if isinstance(value, (list, tuple)) and value else value
            part = part if isinstance(part, nn.Module) else Passthrough()
            yield {k: {key: part for key in _keys_read_off(cls, k) or ["0"]}}


_DICT_METHOD = re.compile(r"'(?:int|float)' object has no attribute '(?:keys|items|values|get)'")
# a list or a layer where the code wants a mapping of named parts
_KEYED = re.compile(r"(?:list|tuple) indices must be integers or slices, not str|ModuleDict\.?update (?:sequence element|should be called)")


def _keys_read_off(cls: type, name: str) -> list[str]:
    """The string keys the class's methods read off argument ``name`` (``latent_codec["hyper"]``,
    ``in_channels.get("level6")``)."""
    return list(dict.fromkeys(k for tree in _method_trees(cls) for k in keys_off(tree, {name})))[:8]


def _made_callable(cls: type, kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """``'int' object is not callable``: the argument builds a layer; ``nn.Identity`` takes any arguments."""
    text = str(error)
    if re.search(r"'(int|float|str)' object is not callable", text):
        frames = candidate_frames(cls, error)
        for k in called_in_line(frames, kwargs) or named_in_line(frames, kwargs):
            yield {k: nn.Identity}
    elif "not callable" in text:  # a check of its own: "The loss function is not callable."
        words = set(IDENTIFIER.findall(text))
        named = {k: Passthrough() for k, v in kwargs.items() if k in words and not callable(v)}
        if named:
            yield named
    # a guessed layer class called as a builder with more arguments than it takes:
    # ``conv_builder(inplanes, planes, midplanes, stride)`` given ``nn.ReLU``
    if m := re.search(r"(\w+)\.__init__\(\) takes .* positional arguments? but \d+ were given", text):
        for k in named_in_line(candidate_frames(cls, error), kwargs):
            if isinstance(v := kwargs[k], type) and v.__name__ == m.group(1) and v is not nn.Identity:
                yield {k: nn.Identity}


def forward_repairs(cls: type, kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """Constructor arguments a forward's error shows were guessed wrong: a number a wrapper calls
    as its inner layer (``return self.fn(x) + x``) becomes a layer that passes its input through,
    one whose attribute it reads a layer that has it, lengths its kernels outgrow longer."""
    if re.search(r"'(int|float|str)' object is not callable", str(error)):
        frames = candidate_frames(cls, error)
        # the arguments the line calls, not a number it also names (``x.chunk(chunks)`` beside ``self.fn(c)``)
        callee = callee_at(frames[0]) if frames else None
        named = [k for k in called_in_line(frames, kwargs) or named_in_line(frames, kwargs) or held_under(cls, frames, kwargs)
                 or (_stored_as(cls, callee, kwargs) or _passed_into_part(cls, frames[0], callee, kwargs) if callee else [])
                 if not callable(kwargs[k])]
        if named:
            yield {k: Passthrough() for k in named}
    yield from _by_attribute(cls, kwargs, error, Sizes())  # ``self.net.transformer`` of a wrapper given a number
    yield from _widened_to_stand_in(kwargs, error)
    if any(w in str(error) for w in _WANTS_SEQUENCE):  # ``len(self.pad)`` of a pad given as one number
        yield from _sequences(cls, kwargs, error)
    # a signal the guessed lengths made shorter than a kernel: the block built for longer ones
    yield from _lengths_too_short(Failure(cls, kwargs, error, Sizes()))
    yield from _called_classes(kwargs, error)
    yield from _shaped_like_input(kwargs, error)
    if _NO_GPU.search(str(error)) and (off := _gpu_off(cls)):  # ``use_gpu=True`` by default, and forward moves its input there
        yield off
    if _refuses_a_choice(error):
        # a guessed value forward refuses by name (``mode has to be 'batch' or 'row', but got 16``),
        # or any the block's own ``raise`` refuses (``else: raise ValueError('Only forecast tasks
        # implemented yet')`` after comparing ``configs.task_name``): a string the class compares it with
        said = {k for k, v in kwargs.items() if re.search(rf"\b{re.escape(str(v))}\b", str(error))}
        own = _raised_here(cls, error)
        yield from (c for c in _choices(cls, kwargs, error) if own or set(c) <= said)
    if isinstance(error, NameError) and not isinstance(error, UnboundLocalError) and (flipped := _flag_flipped(cls, kwargs)):
        # a path of the block's own code that names what it never defines (``einsum`` not
        # imported where ``use_flash=False`` goes): the other path a flag selects
        yield flipped


def _stored_as(cls: type, attribute: str, kwargs: dict[str, Any]) -> list[str]:
    """Arguments the class's methods store under ``attribute`` (``self.scratch.output_conv = head``):
    the argument a call of ``self.scratch.output_conv(x)`` is about, a line that names no argument."""
    return [name for name in _assigned_to(cls, attribute) if name in kwargs]


def _assigned_to(cls: type, attribute: str) -> list[str]:
    """The names the class's methods assign to an attribute ``attribute`` of anything, in order."""
    return list(dict.fromkeys(
        node.value.id for tree in _method_trees(cls) for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
        and any(isinstance(t, ast.Attribute) and t.attr == attribute for t in node.targets)))


def _passed_into_part(cls: type, frame: FrameType, attribute: str, kwargs: dict[str, Any]) -> list[str]:
    """Arguments the block hands to the part whose method ``frame`` runs, which keeps it as
    ``attribute``: ``_ResidualLayerNormAttn(size, fn_attn=self_attn)`` then ``self.fn_attn(x)``, or
    ``iResBlock(net)`` into ``def __init__(self, nnet): self.nnet = nnet``."""
    part = frame.f_locals.get("self")
    if part is None or isinstance(part, cls) or not isinstance(part, nn.Module):
        return []
    kind = type(part)
    kept = set(_assigned_to(kind, attribute))
    try:
        params = [p for p in inspect.signature(kind).parameters]
    except (TypeError, ValueError):
        return []
    found: list[str] = []
    for tree in _method_trees(cls):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == kind.__name__):
                continue
            given = [k.value for k in node.keywords if k.arg in kept]
            given += [a for i, a in enumerate(node.args) if i < len(params) and params[i] in kept and not isinstance(a, ast.Starred)]
            found += [g.id for g in given if isinstance(g, ast.Name) and g.id in kwargs]
    return list(dict.fromkeys(found))


def _widened_to_stand_in(kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """``Identity.forward() got an unexpected keyword argument 'inference_params'``, ``ReLU.forward()
    got an unexpected keyword argument 'src_mask'``: a torch layer (or layer class) guessed for an
    argument is called with more than one input; the stand-in that takes any call replaces it.
    A layer class called as a function is (``ReLU.__init__() takes from 1 to 2 positional
    arguments but 5 were given``: norse's ``activation(input, state, p, dt)``, torchdyn's
    ``vector_field(t, x, args=args)``): an instance of the stand-in replaces it."""
    m = re.search(r"\b(\w+)\.(forward|__init__)\(\) (?:got an unexpected keyword|takes (?:from )?\d+ (?:to \d+ )?positional)",
                  str(error))
    if m is None:
        return
    called = m.group(2) == "__init__"
    widened = {k: Passthrough if isinstance(v, type) and not called else Passthrough() for k, v in kwargs.items()
               if (v if isinstance(v, type) else type(v)).__name__ == m.group(1)
               and (isinstance(v, type) or not called)
               and (v if isinstance(v, type) else type(v)).__module__.startswith("torch.nn.")}
    if widened:
        yield widened


_NO_GPU = re.compile(r"NVIDIA driver|not compiled with CUDA|CUDA (?:is not|not) available|no CUDA GPUs", re.IGNORECASE)


def _flag_flipped(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The constructor's first boolean argument (given or at its default) turned over; {} if none."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return {}
    value = next(((p.name, v) for p in params if isinstance(v := kwargs.get(p.name, p.default), bool)), None)
    return {value[0]: not value[1]} if value else {}


def _gpu_off(cls: type) -> dict[str, Any]:
    """The constructor's flags that put the block on a GPU (``use_gpu``, ``cuda``), turned off, and
    its devices that default to one (``device="cuda"``), the CPU."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return {}
    off: dict[str, Any] = {p.name: False for p in params if p.default is True and re.search(r"gpu|cuda", p.name, re.IGNORECASE)}
    off.update({p.name: "cpu" for p in params if isinstance(p.default, (str, torch.device)) and "cuda" in str(p.default)})
    return off


_STATED_SIZE = re.compile(r"(?:torch\.Size\()?\[(\d+(?:, ?\d+)*)\]")


def _shaped_like_input(kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """A guessed tensor argument the input must match ("input and reference must have the same
    shape. Got [2, 16, 16] and [16]"): rebuilt with the other shape the message states."""
    stated = [tuple(int(d) for d in m.split(",")) for m in _STATED_SIZE.findall(str(error))]
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor) and (shape := tuple(value.shape)) in stated:
            other = next((s for s in stated if s != shape), None)
            if other is not None:
                yield {name: torch.rand(other, dtype=value.dtype) if value.is_floating_point() else torch.zeros(other, dtype=value.dtype)}


def _called_classes(kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """A layer class given where forward calls a function (``act=ReLU``, then ``self.act(x)``):
    the call builds a layer, which the error then names as a value (``must be Tensor, not
    ReLU``, ``'ReLU' and 'Tensor'``, a torch function's ``got (ReLU, Parameter, ...)``); an
    instance computes the activation."""
    text = str(error)
    named = {k: v for k, v in kwargs.items() if isinstance(v, type) and issubclass(v, nn.Module)
             and re.search(rf"(?:'{re.escape(v.__name__)}'|\bnot {re.escape(v.__name__)}$|\bgot \({re.escape(v.__name__)}[,)])", text)}
    instances: dict[str, Any] = {}
    for k, v in named.items():
        try:
            instances[k] = v()
        except Exception:
            continue
    if instances:
        yield instances


def _instances(cls: type, kwargs: dict[str, Any], error: BaseException) -> Iterator[dict[str, Any]]:
    """``ReLU is not a Module subclass``: a layer class passed where an instance is added, as an
    instance, then as a stand-in layer that takes whatever the block calls it with (an encoder
    cloning its ``encoder_layer`` calls each clone with masks and positions); a number or numbers
    guessed where layers are added (``int is not a Module subclass``), as stand-ins; a method
    called on a layer class passed where an instance is used (``missing ... 'self'``), the
    arguments the failing line names first."""
    text = str(error)
    missing = _MISSING.search(text) if isinstance(error, TypeError) else None
    unbound = missing is not None and "'self'" in missing.group(1)
    if not (unbound or "is not a Module subclass" in text):
        return
    named = named_in_line(candidate_frames(cls, error), kwargs)
    # an unbound call may fail in a helper whose line names no argument (PyG's ``reset(value)``), and
    # so may a layer added there (DETR's ``_get_clones(module, N)`` deep-copies ``encoder_layer``):
    # then the layer classes guessed are the ones
    if unbound:
        order = [*named, *(k for k in kwargs if k not in named)]
    else:
        order = named or [k for k, v in kwargs.items() if isinstance(v, type) and issubclass(v, nn.Module)]
    for k in order:
        v = kwargs[k]
        if isinstance(v, type) and issubclass(v, nn.Module):
            try:
                yield {k: v()}
            except Exception:
                pass
            if not unbound:
                yield {k: Passthrough()}
        elif not unbound and "int is not a Module subclass" in text:
            if type(v) is int:
                yield {k: Passthrough()}
            elif isinstance(v, (list, tuple)) and v and all(type(x) is int for x in v):
                yield {k: [Passthrough() for _ in v]}
