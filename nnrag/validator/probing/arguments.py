"""Guesses for constructor arguments: from parameter names, annotations and dataclass configs,
shallow variants of whole architectures first.

Everything here runs inside the sandbox, with torch already imported by the warm worker.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import enum
import inspect
import re
import sys
import typing
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, Callable, Iterator

import torch
from torch import nn

from .frames import callee_of
from .source import failing_statement, source_tree, statement_at

_WORDS = re.compile(r"[a-z]+|\d+")


@dataclass(frozen=True)
class Sizes:
    """One consistent set of small sizes used for every guess of one attempt."""

    dim: int = 16
    heads: int = 2
    spatial: int = 16
    tokens: int = 16


SIZE_VARIANTS = (
    Sizes(), Sizes(dim=32, heads=4, spatial=32), Sizes(dim=3, heads=1, spatial=32), Sizes(dim=64, heads=4, spatial=32),
    Sizes(dim=128, heads=4, spatial=16),  # group norms of 32 groups behind a 4x bottleneck
)

CHANNEL_NAMES = {  # arguments that set a width
    "channels", "in_channels", "out_channels", "in_chans", "in_chs", "out_chs", "chs", "in_ch", "out_ch", "dim",
    "in_dim", "out_dim", "dim_in", "dim_out", "num_features", "num_channels", "hidden_size", "hidden_dim",
    "hidden_features", "hidden_channels", "embed_dim", "d_model", "in_features", "out_features", "inplanes",
    "planes", "inp", "oup", "in_planes", "out_planes", "width", "c1", "c2", "c_in", "c_out", "n_embd", "features",
    "n_chans", "n_channels", "num_chans",
    "input_dim", "output_dim", "input_size", "hidden", "nin", "nout", "in_size", "out_size", "d_in", "d_out",
    "filters", "in_filters", "out_filters", "input_channels", "output_channels", "ch", "c", "num_feat", "nf",
    "mid_channels", "mid_chs", "inner_dim", "embedding_dim", "model_dim", "feat_dim", "num_hidden", "in_feat",
    "out_feat", "dims", "channel", "in_c", "out_c", "emb_dim", "dim_head", "head_dim", "key_dim", "value_dim",
}


class Passthrough(nn.Identity):  # named as record.STAND_IN says
    """A stand-in layer: returns its first input whatever else it is given (a wrapped block called
    as ``block(x, mask)``), still an ``nn.Identity`` to code that checks. A caller that takes
    several results from it (``out, attn = self.attention(q, k, v)``, ``z, log_det = flow(z)``,
    ``self.attention(x, x, x)[0]``) gets its input first, then zeros, which add to what they are
    added to."""

    def forward(self, input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - nn.Identity's name
        results = results_taken(_caller())
        if results == 1:
            return input
        rest = input.new_zeros(()) if isinstance(input, torch.Tensor) else None
        return (input, *[rest] * (results - 1))


def _caller() -> FrameType | None:
    """The frame of the code that called a layer, above torch's own call machinery."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == nn.Module.__call__.__code__.co_filename:
        frame = frame.f_back  # type: ignore[assignment]
    return frame


def results_taken(frame: FrameType | None) -> int:
    """How many results the statement a frame stopped at takes from the call it makes: as many
    as the names it unpacks them into, two where it indexes the result, else one."""
    return _results_at(frame.f_code, frame.f_lasti, frame.f_lineno) if frame is not None else 1


@functools.lru_cache(maxsize=1024)  # a stand-in layer asks it on every call it answers
def _results_at(code: CodeType, lasti: int, lineno: int) -> int:
    stmt = statement_at(code, lineno)
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and isinstance(stmt.targets[0], (ast.Tuple, ast.List)):
        return len(stmt.targets[0].elts)
    if isinstance(stmt, (ast.Assign, ast.Expr, ast.Return, ast.AugAssign)) and isinstance(stmt.value, ast.Subscript) \
            and isinstance(stmt.value.value, ast.Call):
        return 2
    # indexed inside another call (``self.dropout(self.attention(q, k, v)[0])``): the call the
    # caller's instruction is at, by the name it calls
    callee = callee_of(code, lasti) if stmt is not None else None
    if callee and any(isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
                      and getattr(node.value.func, "attr", getattr(node.value.func, "id", None)) == callee
                      for node in ast.walk(stmt)):
        return 2
    return 1


def held_int(module: nn.Module, names: tuple[str, ...], low: int = 1, high: int | None = None) -> int | None:
    """The first size in ``[low, high]`` the built block or a layer of it keeps under one of
    ``names`` (``n_fft``, ``n_levels``, ``head_dim``): read off instance attributes only, so no
    property of the candidate runs."""
    for m in module.modules():
        for name in names:
            value = vars(m).get(name)
            if type(value) is int and low <= value and (high is None or value <= high):
                return value
    return None


def name_words(name: str) -> list[str]:
    return _WORDS.findall(name.lower())


def _class_of(annotation: Any) -> type | None:
    """The concrete class an annotation names: ``Type[X]``, a dataclass, or the first of a Union."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Union or (origin is not None and "UnionType" in str(origin)):
        for a in args:
            found = _class_of(a)
            if found is not None:
                return found
        return None
    if origin is type and args and isinstance(args[0], type) and args[0] is not nn.Module:
        return _public_subclass(args[0])
    return None


def _public_subclass(cls: type) -> type:
    """A class an annotation names, or where it names a private base (``Type[_ConvNd]``,
    ``Type[_DropoutNd]``: what nnU-Net's networks take for their layers), its public subclass for
    images (``Conv2d``): a base is never what such code builds with."""
    if not cls.__name__.startswith("_"):
        return cls
    found, todo = [], list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        todo += sub.__subclasses__()
        if not sub.__name__.startswith("_") and not inspect.isabstract(sub) and "Lazy" not in sub.__name__ \
                and sub.__module__.split(".")[:2] == cls.__module__.split(".")[:2]:  # torch.nn's, not its quantized ones
            found.append(sub)
    return min(found, key=lambda c: ("2d" not in c.__name__.lower(), len(c.__name__), c.__name__), default=cls)


def _enum_member(annotation: Any) -> Any:
    """The first member of an Enum annotation (or of the first Enum in a Union), else None."""
    if typing.get_origin(annotation) is typing.Union:
        return next((m for a in typing.get_args(annotation) if (m := _enum_member(a)) is not None), None)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return next(iter(annotation), None)
    return None


def _unset(default: Any) -> bool:
    """A negative integer default of a config field means "set me" (``dim_in: int = -1``)."""
    return type(default) is int and default < 0


def _dataclass_value(annotation: Any, s: Sizes, depth: int) -> Any:
    """A small instance of a dataclass annotation (a model's config): required fields guessed by
    name, and so are sizes and counts whose defaults build the full model (``hidden_size: int =
    1152``, ``num_hidden_layers: int = 27``), as the stand-in config guesses them; nested configs
    small too (``vision_config: Optional[MoonViTConfig] = None``)."""
    if depth > 2 or not (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)):
        return None
    try:
        hints = typing.get_type_hints(annotation)
    except Exception:
        hints = {}
    values: dict[str, Any] = {}
    # a config that names the classes of its nested configs (``sub_configs = {"vision_config":
    # VisionConfig}``, with the field typed ``dict | None = None``) would build them full size
    declared = {k: v for k, v in (getattr(annotation, "sub_configs", None) or {}).items()
                if isinstance(k, str) and dataclasses.is_dataclass(v)}
    for f in dataclasses.fields(annotation):
        if not f.init:
            continue
        kind = hints.get(f.name, f.type)
        if f.name in declared:
            kind = declared[f.name]
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            values[f.name] = guess_value(f.name, kind, s, depth=depth + 1)
        elif _unset(f.default):
            # ``dim_in: int = -1`` is "set me"; ``feature_layer: int = -2`` an index from the end,
            # kept when the name suggests no integer
            guessed = guess_value(f.name, kind, s, depth=depth + 1)
            if type(guessed) is int:
                values[f.name] = guessed
        elif (nested := _dataclass_value(_class_in(kind), s, depth + 1)) is not None:
            values[f.name] = nested
        elif is_depth(f.name) and (shallow := _shallow(f.default)) is not None:
            values[f.name] = shallow
        elif type(f.default) is int and f.default > 1 and not _capacity(f.name):
            guessed = guess_value(f.name, kind, s, depth=depth + 1)
            if type(guessed) is int:
                values[f.name] = guessed
    # token ids are bounds, kept (``pad_token_id = 151329``); a vocabulary guessed smaller than they
    # are makes the embedding refuse its padding index, so the config keeps its own vocabularies then
    ids = [f.default for f in dataclasses.fields(annotation) if f.name.endswith("token_id") and type(f.default) is int]
    if ids:
        values = {k: v for k, v in values.items() if not ("vocab" in k and type(v) is int and v <= max(ids))}
    made = _built(annotation, values)
    if made is None and (deep := {k: v for k, v in values.items() if not is_depth(k)}) != values:
        # a config that derives parts from its depth refuses one layer (Zamba's layer types start
        # with three fixed ones and must number ``num_hidden_layers``): its own depths, the widths
        # still small, so that the widths it derives (``attention_hidden_size``) agree
        made = _built(annotation, deep)
    return made


def _built(annotation: type, values: dict[str, Any]) -> Any:
    try:
        return annotation(**values)
    except Exception:
        return None


def _class_in(annotation: Any) -> Any:
    """``X`` of ``Optional[X]``, else the annotation itself."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 else annotation


_INDEX_WORDS = ("ind", "idx", "index", "id")  # a name ending so is a position: ``prev_layer_ind``, ``pad_token_id``


def _capacity(name: str) -> bool:
    """A bound rather than a size (``max_position_embeddings``, ``pad_token_id``): cheap, and what
    indexes or positions must stay below. Bucket counts too (``relative_attention_num_buckets``):
    a small table, and code that computes the buckets may hard-code the default (MPNet's 32)."""
    w = name_words(name)
    return bool(w) and (w[0] == "max" or "position" in w or "positions" in w or w[-1] in _INDEX_WORDS
                        or "buckets" in w)


def _parameters(cls: type) -> tuple[inspect.Signature, list[inspect.Parameter], dict[str, Any]] | None:
    """The signature, the parameters a keyword can fill, and the evaluated annotations of ``cls``."""
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    hints = init_hints(cls)
    usable = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not usable:  # ``def __init__(self, *args, **kwargs): super().__init__(*args, **kwargs)``:
        # a subclass that names nothing itself takes what its bases' constructors take
        usable = passed_through(cls, sig)
        for base, _ in _kwargs_reach(cls, sig):
            hints = {**init_hints(base), **hints}
    return sig, usable, hints


def init_hints(cls: type) -> dict[str, Any]:
    """The evaluated annotations of ``cls.__init__`` (also where a decorator hides its signature)."""
    try:
        return typing.get_type_hints(cls.__init__)
    except Exception:
        return _each_hint(cls.__init__)


def _each_hint(function: Any) -> dict[str, Any]:
    """The annotations of ``function`` evaluated one by one in its module (the candidate's own code,
    already running in the sandbox), leaving out those that fail."""
    scope = getattr(function, "__globals__", {})
    hints: dict[str, Any] = {}
    for name, text in getattr(function, "__annotations__", {}).items():
        if not isinstance(text, str):
            hints[name] = text
            continue
        try:
            hints[name] = eval(text, dict(scope))  # noqa: S307 - an annotation of the candidate, in its sandbox
        except Exception:
            continue
    return hints


def _guess_required(cls: type, usable: list[inspect.Parameter], hints: dict[str, Any], s: Sizes, depth: int = 0) -> dict[str, Any]:
    return {p.name: guess_value(p.name, hints.get(p.name, p.annotation), s, cls, depth)
            for p in usable if p.default is inspect.Parameter.empty}


def instance_of(cls: type, s: Sizes, owner: type | None = None) -> Any:
    """An instance of ``cls`` built from guesses (of a concrete subclass where ``cls`` is a layer
    without a forward of its own, of an implementation where it is an interface), or None."""
    if issubclass(cls, nn.Module):
        return _module_value(cls, s, 1, owner)
    top = cls.__module__.split(".")[0]
    if top in sys.stdlib_module_names or top in ("builtins", "torch", "numpy"):  # values, not a code's own objects
        return None
    if inspect.isabstract(cls) or unimplemented(cls):  # an interface (``space: Space``): a subclass that implements it
        made = next((made for sub in _implementations(cls) if (made := _guessed(sub, s, 1)) is not None), None)
        if made is not None or inspect.isabstract(cls):
            return made
    return _guessed(cls, s, 1)


def _implementations(cls: type) -> list[type]:
    """Public subclasses of ``cls`` that are not abstract, nearest first, at most eight."""
    found, todo = [], list(cls.__subclasses__())
    while todo and len(found) < 8:
        sub = todo.pop(0)
        todo += sub.__subclasses__()
        if not inspect.isabstract(sub) and not unimplemented(sub) and not sub.__name__.startswith("_"):
            found.append(sub)
    return found


def unimplemented(cls: type) -> bool:
    """Whether ``cls`` is abstract by convention rather than by ``abc``: a method of its own, or a
    layer's ``forward``, only raises ``NotImplementedError`` (gymnasium's ``Space.sample``, a
    flow's or kernel's ``forward``), so an instance fails as soon as it is used."""
    if issubclass(cls, nn.Module):  # torch's own missing forward first: no source read
        return cls.forward is nn.Module.forward or _only_raises_unimplemented(cls.forward)
    return any(_only_raises_unimplemented(v) for k, v in vars(cls).items() if inspect.isfunction(v) and not k.startswith("_"))


def _only_raises_unimplemented(function: Any) -> bool:
    tree = source_tree(function) if inspect.isfunction(function) else None
    body = tree.body[0].body if tree is not None and tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    body = [b for b in body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _module_value(cls: type, s: Sizes, depth: int, owner: type | None = None) -> Any:
    if unimplemented(cls):  # an abstract base (``loss: _Loss``): a concrete subclass
        made = next((made for sub in _concrete(cls, owner) if (made := _module_value(sub, s, depth)) is not None), None)
        if made is not None:
            return made
    return _guessed(cls, s, depth)


def _guessed(cls: type, s: Sizes, depth: int) -> Any:
    """``cls`` called with guesses for its required parameters, or None where that fails."""
    found = _parameters(cls)
    if found is None:
        return None
    _, usable, hints = found
    try:
        return cls(**_guess_required(cls, usable, hints, s, depth + 1))
    except Exception:
        return None


def _concrete(cls: type, owner: type | None) -> list[type]:
    """Public subclasses of ``cls`` that implement ``forward``, those of the owner's module first;
    never the owner (a wrapper of losses is a loss, and would wrap itself)."""
    found, todo = [], list(cls.__subclasses__())
    while todo and len(found) < 32:
        sub = todo.pop(0)
        todo += sub.__subclasses__()
        if not unimplemented(sub) and not sub.__name__.startswith("_") \
                and not (owner is not None and issubclass(sub, owner)):
            found.append(sub)
    home = getattr(owner, "__module__", None)
    return sorted(found, key=lambda sub: sub.__module__ != home)[:8]


def _by_annotation(annotation: Any, s: Sizes) -> tuple[bool, Any]:
    if annotation is inspect.Parameter.empty:
        return False, None
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Union and args:
        # a plain number where the union admits one (``Union[Tensor, float, Tuple[float, float]]``):
        # the simplest value every such parameter accepts
        return _by_annotation(next((a for a in (float, int) if a in args), args[0]), s)
    if annotation is bool or annotation == "bool":
        return True, False
    if annotation is int or annotation == "int":
        return True, s.dim
    if annotation is float or annotation == "float":
        return True, 0.1
    if annotation is str or annotation == "str":
        return False, None
    if (origin in (tuple, typing.Tuple) or annotation is tuple) and args[:2] == [float, float]:
        return True, (0.1, 0.5)  # a range: low below high, inside the usual bounds of a probability or angle
    if origin in (tuple, typing.Tuple) or annotation is tuple:
        return True, (s.dim, s.dim)
    if (origin in (list, typing.List) and args and ("Callable" in str(args[0]) or isinstance(args[0], type) and issubclass(args[0], nn.Module))):
        return True, [Passthrough(), Passthrough()]  # ``transforms: List[Callable]``
    if origin in (list, typing.List) or annotation is list:
        return True, [s.dim, s.dim]
    if isinstance(annotation, type) and issubclass(annotation, nn.Module):
        return True, Passthrough()
    if annotation is torch.Tensor:
        return True, torch.randn(s.dim)
    if origin is not None and "Callable" in str(origin):
        params, result = (args[0], args[1]) if len(args) == 2 and isinstance(args[0], list) else (None, None)
        if params and all(p in (int, float) for p in params) and result in (int, float):
            return True, float  # a function of a number to a number (``Schedule = Callable[[float], float]``)
        return True, nn.ReLU
    return False, None


def guess_value(name: str, annotation: Any, s: Sizes, owner: type | None = None, depth: int = 0) -> Any:
    """A small, consistent value for a required constructor argument."""
    return _as_annotated(_guess(name, annotation, s, owner, depth), annotation)


def _as_annotated(value: Any, annotation: Any) -> Any:
    """An integer guessed by name, as the pair an annotation asks for (``window_size: list[int]``
    gets ``[4, 4]``: code that copies or indexes it fails on an int, and on a tuple ``.copy()``)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return value
    if annotation is float:
        return float(value)
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Union:
        if not args or int in args:
            return value
        if float in args:  # ``factor: Union[Tensor, float]``: code that checks for float refuses an int
            return float(value)
        annotation = args[0]
        origin, args = typing.get_origin(annotation), list(typing.get_args(annotation))
    if origin is list and args[:1] == [int]:
        return [value, value]
    if origin is tuple and args[:1] == [int]:
        return (value, value)
    return value


def _admits_str(annotation: Any) -> bool:
    """An annotation a string satisfies (``str``, ``tuple | str``, ``Union[Tuple, str]``), or none."""
    if annotation is inspect.Parameter.empty or annotation is str:
        return True
    if isinstance(annotation, str):
        return "str" in annotation
    return str in typing.get_args(annotation)


@dataclass(frozen=True)
class Asked:
    """A required constructor parameter, as the rules of ``ARGUMENT_RULES`` see it."""

    name: str
    annotation: Any  # a plain name the module binds resolved, else as written
    sizes: Sizes
    owner: type | None  # the class being built
    depth: int  # how deep inside guesses for an enclosing constructor

    @property
    def n(self) -> str:
        return self.name.lower()

    @property
    def w(self) -> list[str]:
        return name_words(self.name)


NOT_MINE = object()  # a rule's answer when the parameter is not one it fills


@dataclass(frozen=True)
class ArgumentRule:
    """One guess for a required constructor argument: ``guess`` gives its value, or ``NOT_MINE``."""

    name: str
    guess: Callable[[Asked], Any]


def _when(test: Callable[[Asked], bool], value: Callable[[Asked], Any]) -> Callable[[Asked], Any]:
    return lambda a: value(a) if test(a) else NOT_MINE


def _fixed(test: Callable[[Asked], bool], value: Any) -> Callable[[Asked], Any]:
    return lambda a: value if test(a) else NOT_MINE


def _named_class(a: Asked) -> Any:
    cls = _class_of(a.annotation)  # ``block: Type[Bottleneck]`` names the very class to pass
    return cls if cls is not None else NOT_MINE


def _config_dataclass(a: Asked) -> Any:
    made = _dataclass_value(a.annotation, a.sizes, a.depth)
    return made if made is not None else NOT_MINE


def _annotated_layer(a: Asked) -> Any:
    """``encoder_layer: TransformerEncoderLayer``: one built from guesses too."""
    t = a.annotation
    if not (a.depth < 2 and isinstance(t, type) and issubclass(t, nn.Module) and t is not nn.Module):
        return NOT_MINE
    made = _module_value(t, a.sizes, a.depth, a.owner)
    return made if made is not None else NOT_MINE


def _annotated_object(a: Asked) -> Any:
    """``in_type: FieldType``, ``observation_space: Space``: an object of the class the annotation
    names (an implementation of it, where it is an interface) built from guesses too."""
    t = a.annotation
    if not (a.depth < 2 and isinstance(t, type) and not issubclass(t, (nn.Module, enum.Enum, torch.Tensor))
            and not dataclasses.is_dataclass(t)):
        return NOT_MINE
    made = instance_of(t, a.sizes, a.owner)
    return made if made is not None else NOT_MINE


def _enum(a: Asked) -> Any:
    member = _enum_member(a.annotation)  # ``mask_type: MaskLevelType``: its first member
    return member if member is not None else NOT_MINE


def _literal(a: Asked) -> Any:
    if typing.get_origin(a.annotation) is typing.Literal and typing.get_args(a.annotation):
        return typing.get_args(a.annotation)[0]  # ``mode: Literal["bilinear", "nearest"]``
    return NOT_MINE


def _layer_by_string(a: Asked) -> Any:
    """A layer named by a string (MONAI's ``norm_name="batch"``, ``act=("relu", {...})``); a bare
    ``norm``/``act`` only where annotated so, else it is a layer class."""
    n, w = a.n, a.w
    named = n.endswith("_name") or n in ("norm", "act") and a.annotation is not inspect.Parameter.empty
    if ("norm" in w or "act" in w) and named and _admits_str(a.annotation):
        return "batch" if "norm" in w else "relu"
    return NOT_MINE


FEATURE_LEVELS = 3  # the maps of a feature pyramid a multi-level block is given
_LEVEL_COUNT_NAMES = frozenset({"num_levels", "n_levels", "num_feature_levels", "num_outs"})

_CONFIG_NAMES = ("config", "cfg", "args", "opt", "opts", "hparams", "params", "conf", "configs", "hp")


def _config(a: Asked) -> Any:
    """A class that declares its config class (``config_class = PhiConfig``, as language-model
    libraries do where ``__init__(self, config)`` is inherited unannotated) gets a small one; any
    other config a stand-in that answers every attribute."""
    if a.n not in _CONFIG_NAMES:
        return NOT_MINE
    declared = _dataclass_value(getattr(a.owner, "config_class", None), a.sizes, a.depth) if a.n == "config" else None
    return declared if declared is not None else AutoConfig(a.sizes)


def _heads(a: Asked) -> bool:
    n, w = a.n, a.w
    return bool({"head", "heads"} & set(w)) and ("num" in w or "n" in w or n in ("heads", "nhead", "n_heads")) \
        or n in ("heads", "nhead", "num_head")


def _ratio(a: Asked) -> Any:
    if "ratio" not in a.n:
        return NOT_MINE
    if a.n.startswith("sr") or a.annotation is int:  # spatial-reduction ratios are integer strides
        return 1
    return 2.0 if "mlp" in a.n or "expan" in a.n else 0.25


def _layer_class(a: Asked) -> Any:
    n, w = a.n, a.w
    if not (n.endswith(("layer", "layer_cl")) or n in ("act", "activation", "act_fn", "nonlinearity")):
        return NOT_MINE
    if "conv" in w:
        return nn.Conv2d
    if "norm" in n:
        return nn.LayerNorm if n.endswith("_cl") or "ln" in w else nn.BatchNorm2d
    return nn.ReLU


def _bottleneck_planes(a: Asked) -> Any:
    """Residual blocks widen ``planes`` by ``expansion``; the identity path needs inplanes == planes * expansion."""
    expansion = getattr(a.owner, "expansion", 1) if a.n == "planes" and a.owner is not None else 1
    if isinstance(expansion, int) and 1 < expansion <= a.sizes.dim:
        return a.sizes.dim // expansion
    return NOT_MINE


def _width(a: Asked) -> bool:
    w = a.w
    return "num" in w or "n" in w or a.n in CHANNEL_NAMES \
        or any(x in w for x in ("channels", "chans", "dim", "features", "size", "width", "planes"))


_RATE_NAMES = ("sfreq", "fs", "srate", "sample_rate", "sampling_rate", "sample_freq", "sampling_freq", "sampling_frequency")


def _sampling_rate(a: Asked) -> bool:
    return a.n in _RATE_NAMES or bool({"sample", "sampling"} & set(a.w)) and bool({"rate", "freq", "frequency"} & set(a.w))


def _by_annotation_rule(a: Asked) -> Any:
    found, value = _by_annotation(a.annotation, a.sizes)
    return value if found else NOT_MINE


# The guesses for a required constructor argument, in the order they are tried: what the
# annotation names first, then what the parameter's name says, then the annotation's plain type.
ARGUMENT_RULES: tuple[ArgumentRule, ...] = (
    ArgumentRule("class named by annotation", _named_class),
    ArgumentRule("config dataclass", _config_dataclass),
    ArgumentRule("layer by annotation", _annotated_layer),
    ArgumentRule("object by annotation", _annotated_object),
    ArgumentRule("enum member", _enum),
    ArgumentRule("literal", _literal),
    ArgumentRule("activation named by string",
                 _fixed(lambda a: a.annotation in (str, "str") and ("act" in a.w or "activation" in a.w), "relu")),
    ArgumentRule("layer named by string", _layer_by_string),
    ArgumentRule("config object", _config),
    # ``norm_kwargs``, ``conv_kwargs``: keywords passed on with ``**``; none leaves their defaults
    ArgumentRule("keyword arguments", _when(lambda a: bool(a.w) and a.w[-1] == "kwargs", lambda a: {})),
    ArgumentRule("heads", _when(_heads, lambda a: a.sizes.heads)),
    # ``spatial_dims``: images; a layer factory indexes its 1-D/2-D/3-D classes with it
    ArgumentRule("spatial dimensions", _fixed(lambda a: "spatial" in a.w and ("dims" in a.w or "dim" in a.w or "ndim" in a.w)
                                              or a.n in ("ndim", "n_dim", "num_spatial_dims"), 2)),
    ArgumentRule("groups", _fixed(lambda a: "group" in a.n, 1)),
    ArgumentRule("kernel size", _fixed(lambda a: "kernel" in a.n or a.n in ("k", "ks", "ksize"), 3)),
    # ``dim_split``, ``concat_axis``: an axis index, never a width
    ArgumentRule("axis", _fixed(lambda a: "axis" in a.w or "dim" in a.w and bool({"split", "concat", "cat", "stack", "reduce"} & set(a.w)), 1)),
    # ``prev_layer_ind``, ``padding_idx``: a position, the first is always there
    ArgumentRule("position index", _fixed(lambda a: bool(a.w) and a.w[-1] in _INDEX_WORDS and "num" not in a.w, 0)),
    ArgumentRule("stride", _fixed(lambda a: "stride" in a.n, 1)),
    ArgumentRule("dilation", _fixed(lambda a: "dilation" in a.n, 1)),
    ArgumentRule("padding", _fixed(lambda a: "padding" in a.n or a.n == "pad", 1)),
    ArgumentRule("classes", _fixed(lambda a: "class" in a.n, 10)),
    ArgumentRule("ratio", _ratio),
    ArgumentRule("reduction", _fixed(lambda a: "reduction" in a.n or a.n in ("r", "reduce"), 4)),
    ArgumentRule("expansion", _fixed(lambda a: "expan" in a.n or "mult" in a.n, 2)),
    ArgumentRule("dropout", _fixed(lambda a: "drop" in a.n or a.n in ("p", "dropout", "attn_drop", "proj_drop"), 0.0)),
    # ``assert 0 <= prob < 1``: a probability, never a width
    ArgumentRule("probability", _when(lambda a: "prob" in a.w or "probability" in a.w, lambda a: 1.0 if "keep" in a.w else 0.5)),
    ArgumentRule("epsilon", _fixed(lambda a: a.n in ("eps", "epsilon") or "eps" in a.w, 1e-5)),
    ArgumentRule("momentum", _fixed(lambda a: "momentum" in a.n, 0.1)),
    ArgumentRule("per-stage depths", _when(lambda a: "depths" in a.n or a.n == "layers"
                                           or a.n == "num_blocks" and "list" in str(a.annotation).lower(), lambda a: [1, 1, 1, 1])),
    # ``num_res_blocks``, ``n_enc_layers``: a count of repeated blocks, as shallow as it goes
    ArgumentRule("depth", _fixed(lambda a: a.n in ("depth", "num_layers", "n_layers", "nlayers", "num_blocks", "blocks",
                                                   "n_blocks", "repeats", "layer_num", "levels")
                                 or is_depth(a.n) and a.n.startswith(("num", "n_")), 1)),
    # ``num_levels``, ``num_outs``: the pyramid levels a head or neck takes, as many as the feature
    # maps the input inference gives it
    ArgumentRule("pyramid levels", _fixed(lambda a: a.n in _LEVEL_COUNT_NAMES, FEATURE_LEVELS)),
    # a rate in Hz must exceed twice every frequency the block filters at (EEG band-passes below
    # 40 Hz, audio mel bands); a width guessed there puts them above the Nyquist frequency
    ArgumentRule("sampling rate", _fixed(_sampling_rate, 128)),
    ArgumentRule("patch size", _fixed(lambda a: "patch" in a.n, 4)),
    ArgumentRule("window size", _fixed(lambda a: "window" in a.n, 4)),
    ArgumentRule("shift size", _fixed(lambda a: a.n == "shift_size", 2)),  # half a window
    ArgumentRule("dtype", _fixed(lambda a: a.n == "dtype" or a.n.endswith("_dtype"), torch.float32)),
    # a number would be a CUDA device's index: ``tensor.to(device)`` with no GPU fails
    ArgumentRule("device", _when(lambda a: bool(a.w) and a.w[-1] in ("device", "devices") or a.n == "device_ids",
                                 lambda a: torch.device("cpu") if a.w[-1] == "device" else [torch.device("cpu")])),
    # a sample's shape, channels first (MONAI's classifiers and autoencoders)
    ArgumentRule("sample shape", _when(lambda a: a.n == "in_shape", lambda a: (a.sizes.dim, a.sizes.spatial, a.sizes.spatial))),
    ArgumentRule("spatial size", _when(lambda a: a.n in ("img_size", "image_size", "resolution", "input_resolution", "feat_size",
                                                         "size", "img_shape", "grid_size"), lambda a: a.sizes.spatial)),
    ArgumentRule("vocabulary", _fixed(lambda a: "vocab" in a.n or "num_embeddings" in a.n or "num_tokens" in a.n
                                      or "n_token" in a.n, 32)),
    ArgumentRule("sequence length", _when(lambda a: "len" in a.w or "seq" in a.w or "length" in a.w or "positions" in a.n,
                                          lambda a: a.sizes.tokens)),
    ArgumentRule("scale factor", _fixed(lambda a: "scale" in a.n or "factor" in a.n, 2)),
    ArgumentRule("affine switch", _fixed(lambda a: a.n in ("bias", "affine", "elementwise_affine", "batch_first"), True)),
    ArgumentRule("optional feature", _fixed(lambda a: "inplace" in a.n or a.n.startswith(("use_", "is_", "has_", "with_", "enable")), False)),
    ArgumentRule("layer class", _layer_class),
    ArgumentRule("bottleneck planes", _bottleneck_planes),
    ArgumentRule("width", _when(_width, lambda a: a.sizes.dim)),
    ArgumentRule("by annotation", _by_annotation_rule),
    ArgumentRule("anything else", lambda a: a.sizes.dim),
)


def guess_argument(asked: Asked) -> tuple[ArgumentRule, Any]:
    """The first rule of ``ARGUMENT_RULES`` that fills the parameter ``asked``, and the value."""
    for rule in ARGUMENT_RULES:
        value = rule.guess(asked)
        if value is not NOT_MINE:
            return rule, value
    raise AssertionError("the last rule fills every parameter")  # pragma: no cover


def _guess(name: str, annotation: Any, s: Sizes, owner: type | None, depth: int) -> Any:
    if isinstance(annotation, str) and owner is not None and annotation.isidentifier():
        # an annotation get_type_hints could not evaluate as a whole: resolve the plain name alone
        annotation = vars(sys.modules.get(owner.__module__, typing)).get(annotation, annotation)
    return guess_argument(Asked(name, annotation, s, owner, depth))[1]


class AutoConfig:
    """A stand-in config object: any attribute or key gets the guess its name suggests."""

    def __init__(self, sizes: Sizes) -> None:
        self._sizes = sizes
        self._values: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._values:
            self._values[name] = _config_value(name, self._sizes)
        return self._values[name]

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return default if default is not None else getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return True

    def __repr__(self) -> str:
        return f"AutoConfig({self._values})"

    def asked(self) -> dict[str, Any]:
        """The attributes the code has read so far, with the values they got."""
        return dict(self._values)

    def with_value(self, name: str, value: Any) -> "AutoConfig":
        copy = AutoConfig(self._sizes)
        copy._values = {**self._values, name: value}
        return copy

    def with_section(self, path: list[str]) -> "AutoConfig | None":
        """A copy in which the entry ``path`` leads to (``["MVIT"]``, ``["MODEL", "HEAD"]``), a plain
        value so far, is a section: a stand-in config of its own (yacs nodes, nested config dicts).
        None when the path does not lead through this config's sections to a plain value."""
        head, rest = path[0], path[1:]
        if head not in self._values:
            return None
        value = self._values[head]
        if not rest:
            return None if isinstance(value, AutoConfig) else self.with_value(head, AutoConfig(self._sizes))
        inner = value.with_section(rest) if isinstance(value, AutoConfig) else None
        return self.with_value(head, inner) if inner is not None else None


def _config_value(name: str, s: Sizes) -> Any:
    """What a config holds under ``name``: a private attribute is state the library sets on its own
    configs (``_attn_implementation``), unset on one built by hand; an activation is named by a
    string (``hidden_act = "gelu"``, ``act_type = "relu"``), as a config is written to be saved; a nested config
    (``vision_config``) is a stand-in config too; else the argument guess."""
    if name.startswith("_"):
        return None
    w = name_words(name)
    if w and w[-1] in ("act", "activation") or name.endswith("activation_function") \
            or len(w) > 1 and w[-1] in ("type", "name") and {"act", "activation"} & set(w):  # ``head_act_type``
        return guess_value(name, str, s)  # the name a ``str`` activation argument gets
    if w and w[-1] in ("config", "cfg"):
        return AutoConfig(s)
    return guess_value(name, inspect.Parameter.empty, s)


_DEPTH_NAMES = {
    "depth", "depths", "layers", "num_layers", "n_layers", "nlayers", "num_blocks", "n_blocks", "stage_blocks",
    "num_encoder_layers", "num_decoder_layers", "n_layer", "num_hidden_layers", "block_depths", "layer_nums",
}


def is_depth(name: str) -> bool:
    n = name.lower()
    return n in _DEPTH_NAMES or n.endswith(("_depths", "_layers", "_blocks")) or n in ("stages", "stage_depths")


def passed_through(cls: type, sig: inspect.Signature) -> list[inspect.Parameter]:
    """Parameters of ``cls`` and, when it takes ``**kwargs``, of the bases it passes them to."""
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    names = {p.name for p in params}
    for _, more in _kwargs_reach(cls, sig):
        params += [p for p in more if p.name not in names and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        names |= {p.name for p in params}
    return params


def _kwargs_reach(cls: type, sig: inspect.Signature) -> Iterator[tuple[type, list[inspect.Parameter]]]:
    """The bases whose constructors ``cls``'s ``**kwargs`` reach, nearest first, with their
    parameters: the nearest one, and past it only while each passes ``**kwargs`` on too (torch's
    ``Conv1d`` takes ``in_channels``; the ``transposed`` it gives ``_ConvNd`` is no argument of its)."""
    passes = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    for base in cls.__mro__[1:]:
        if not passes:
            return
        # a builtin __init__ (object's) has nothing to pass through, and reading its signature
        # copies sys.modules, which in a forked child copies the page of every module
        if base is nn.Module or not inspect.isfunction(init := vars(base).get("__init__")):
            continue
        try:
            more = list(inspect.signature(init).parameters.values())[1:]
        except (TypeError, ValueError):
            return
        yield base, more
        passes = any(p.kind == p.VAR_KEYWORD for p in more)


_IMAGE_SIDES = {"img_size", "image_size", "input_size", "input_resolution", "resolution", "img_res", "image_res"}
_SMALL_SIDE = 64  # a multiple of the usual patch sizes (4, 8, 16, 32)


def _shallow(value: Any) -> Any:
    """The one-block version of a depth default (12 -> 1, (3, 4, 6, 3) -> (1, 1, 1, 1)), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 1:
        return 1
    if (isinstance(value, (tuple, list)) and value and any(v > 1 for v in value if isinstance(v, int))
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)):
        return type(value)(1 for _ in value)
    return None


_DOWNLOAD_FLAGS = {"pretrained", "load_pretrained", "use_pretrained", "pretrain", "download", "pretrained_weights"}


def _names_weights(name: str) -> bool:
    n = name.lower()
    return (n == "weights" or n.endswith("_weights")) and not n.startswith(("class", "loss", "sample"))


def constructor_attempts(cls: type) -> Iterator[tuple[Sizes, dict[str, Any]]]:
    """Keyword arguments to try, most likely first (see :func:`_attempts`). The gate checks the
    architecture: weights a constructor downloads by default (``pretrained=True``) are not fetched,
    which the sandbox would refuse anyway."""
    found = _parameters(cls)
    if found is None:
        yield Sizes(), {}
        return
    params = found[0].parameters.values()
    off: dict[str, Any] = {p.name: False for p in params if p.name.lower() in _DOWNLOAD_FLAGS and p.default is True}
    # a flag naming the weights to fetch (``pretrained="outdoor"``): None fetches none
    off |= {p.name: None for p in params if p.name.lower() in _DOWNLOAD_FLAGS and isinstance(p.default, str) and p.default}
    # named weights to load by default (``encoder_weights="imagenet"``): None builds the architecture alone
    off |= {p.name: None for p in params if _names_weights(p.name) and isinstance(p.default, str) and p.default}
    for sizes, kwargs in _attempts(cls, *found):
        yield sizes, {**kwargs, **off}


def _attempts(cls: type, sig: inspect.Signature, usable: list[inspect.Parameter],
              hints: dict[str, Any]) -> Iterator[tuple[Sizes, dict[str, Any]]]:
    """Keyword arguments to try, most likely first.

    A shallow variant (one block per stage) comes first: a whole architecture proves the same code
    paths with one block as with twelve, at a fraction of the time and memory. Then the defaults
    with each size variant, then variants that fill one ``None`` default each, for classes whose
    ``None`` defaults mean "the caller must choose" (``Upsample(size=None, scale_factor=None)``),
    and one that fills every such width at once.
    """
    shallow = {p.name: v for p in passed_through(cls, sig) if is_depth(p.name) and (v := _shallow(p.default)) is not None}
    # and at a small resolution: a ViT at its 1024-pixel default attends over 4096 tokens
    shallow |= {p.name: _SMALL_SIDE for p in passed_through(cls, sig) if p.name.lower() in _IMAGE_SIDES
                and isinstance(p.default, int) and not isinstance(p.default, bool) and p.default > 4 * _SMALL_SIDE}
    seen: list[dict[str, Any]] = []

    def fresh(kwargs: dict[str, Any]) -> bool:
        if any(_same(kwargs, k) for k in seen):
            return False
        seen.append(kwargs)
        return True

    first: dict[str, Any] = {}
    for i, sizes in enumerate(SIZE_VARIANTS):
        kwargs = _guess_required(cls, usable, hints, sizes)
        if i == 0:
            first = kwargs
            if shallow and fresh({**kwargs, **shallow}):
                yield sizes, {**kwargs, **shallow}
        if fresh(kwargs):
            yield sizes, kwargs
    widths: dict[str, Any] = {}
    for p in [p for p in usable if p.default is None][:4]:
        value = guess_value(p.name, hints.get(p.name, p.annotation), SIZE_VARIANTS[0], cls)
        if value is not None and p.name.lower() in CHANNEL_NAMES:
            widths[p.name] = value
        if value is not None and fresh({**first, p.name: value}):
            yield SIZE_VARIANTS[0], {**first, p.name: value}
    if len(widths) > 1 and fresh({**first, **widths}):  # ``in_channels=None, out_channels=None``: both chosen
        yield SIZE_VARIANTS[0], {**first, **widths}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(type(a[k]) is type(b[k]) and repr(a[k]) == repr(b[k]) for k in a)
