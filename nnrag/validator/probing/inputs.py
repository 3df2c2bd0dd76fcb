"""Guesses for forward inputs: from the first layer, the constructor's arguments and torch's own
shape errors; loss targets, regions of interest and other companions of the main input.

Everything here runs inside the sandbox, with torch already imported by the warm worker.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import math
import re
import typing
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Literal

import numpy as np
import torch
from torch import nn

from .arguments import CHANNEL_NAMES, FEATURE_LEVELS, Sizes, held_int, name_words
from .designed import shown_input
from .documented import bind, documented_inputs, shape_of
from .source import keys_off, source_tree
from .multiscale import multiscale_calls, takes_levels
from .spectra import COMPLEX

_LAYER_KINDS = {
    "_ConvNd": "conv", "Embedding": "embedding", "EmbeddingBag": "embedding", "Linear": "linear",
    "LayerNorm": "layernorm", "_NormBase": "norm", "_BatchNorm": "norm", "_InstanceNorm": "norm",
    "GroupNorm": "norm", "MultiheadAttention": "mha", "RNNBase": "rnn",
}


# What the input guesses read of each kind of layer, and the type it must have.
_LAYER_ATTRS = {
    "conv": (("in_channels", int), ("kernel_size", tuple)), "embedding": (("num_embeddings", int),),
    "linear": (("in_features", int),), "layernorm": (("normalized_shape", (tuple, list)),), "norm": (),
    "mha": (("embed_dim", int),), "rnn": (("input_size", int),),
}


def layer_kind(module: nn.Module) -> str | None:
    """What kind of layer a module is, by its class names (a block of torch itself defines its own
    copy of ``Conv2d`` or ``Embedding``, which ``isinstance`` against torch's would miss), when it
    also has what such a layer has: a repository's own ``Linear`` may have no ``in_features``."""
    for klass in type(module).__mro__:
        kind = _LAYER_KINDS.get(klass.__name__)
        if kind is not None:
            attrs = _LAYER_ATTRS[kind]
            return kind if all(isinstance(getattr(module, a, None), typ) for a, typ in attrs) else None
    return None


def is_loss(module: nn.Module) -> bool:
    return any(k.__name__ == "_Loss" or k.__name__.endswith("Loss") for k in type(module).__mro__)


def _first_layer(module: nn.Module) -> tuple[str, nn.Module] | None:
    """The layer the main input meets first: the one ``forward`` hands it to, where that says what
    it takes (RAFT's motion encoder builds its correlation branch first and takes the flow
    first); else the first layer the block holds."""
    main = _main_argument(module)
    given = _layer_taking(module, main, depth=3) if main is not None else None
    if given is not None and given is not module and (found := _first_in(given)) is not None and found[0] != "weight":
        return found
    for m in module.modules():  # the module itself first: an Embedding is its own first layer
        kind = layer_kind(m)
        if kind is not None:
            return kind, m
    return None


def _spatial_hint(kwargs: dict[str, Any], cls: type) -> list[int]:
    sizes: list[int] = []
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = {}
    for key in ("img_size", "image_size", "input_size", "resolution", "input_resolution", "img_shape"):
        value = kwargs.get(key, params[key].default if key in params else None)
        if isinstance(value, (tuple, list)) and value and isinstance(value[-1], int):
            value = value[-1]
        if isinstance(value, int) and 4 <= value <= 512:
            sizes.append(value)
    return sizes


_CONTEXT_NAMES = ("max_seq_len", "seq_len", "context_length", "block_size", "max_length")


def _context_lengths(module: nn.Module) -> list[int]:
    """Sequence lengths a token model states (``max_seq_len`` of it or of the model it wraps):
    some forwards take exactly that many tokens (``assert n == self.max_seq_len``)."""
    found = [v for m in (module, *module.children()) for k in _CONTEXT_NAMES
             if isinstance(v := vars(m).get(k), int) and not isinstance(v, bool) and 1 < v <= 2048]
    return list(dict.fromkeys(found))


_SAMPLE_WORDS = {"times", "samples", "len", "length", "seq", "timesteps", "steps", "frames"}


def _signal_lengths(kwargs: dict[str, Any]) -> list[int]:
    """Lengths the constructor was given for its input signal or sequence (``n_times``,
    ``seq_len``, ``num_samples``): a block whose layers were sized for them takes that many."""
    found = [v for k, v in kwargs.items() if type(v) is int and 4 <= v <= 8192 and k.lower() not in CHANNEL_NAMES
             and _SAMPLE_WORDS & set(name_words(k))]
    return list(dict.fromkeys(found))


GRAPH_NODES = 8  # nodes of the random graph a message-passing layer gets
_GRAPH_ARGS = ("edge_index", "edges", "adj", "adj_t")


def takes_graph(module: nn.Module) -> bool:
    """Whether ``forward`` takes a graph's connectivity (PyG's ``MessagePassing`` layers and the like)."""
    try:
        return any(p in _GRAPH_ARGS for p in inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return False


def input_shapes(module: nn.Module, kwargs: dict[str, Any], sizes: Sizes) -> list[tuple[str, tuple[int, ...]]]:
    """Candidate (kind, shape) pairs for the main input, most likely first."""
    c = next((v for k, v in kwargs.items() if k.lower() in CHANNEL_NAMES and isinstance(v, int)), sizes.dim)
    s = sizes.spatial
    hw = _spatial_hint(kwargs, type(module))
    out: list[tuple[str, tuple[int, ...]]] = []
    documented = documented_inputs(module)
    main = _main_argument(module)
    if main is not None and (keys := keys_read(module, main)):  # read by key: a dict of tensors, first
        out += [(KEYS + ",".join(keys), shape) for shape in ((2, sizes.tokens, c), (2, c, s, s), (2, c))]
    if main in documented and not documented[main].is_list:  # the shape its docstring states, first
        out.append((documented[main].kind, shape_of(documented[main], {}, c, s)))
    if (shown := shown_input(module)) and len(shown) > 1:  # the constructor ran it on this shape
        out += [("float", (2,) + shown[1:]), ("float", shown)]  # a batch of two first: batch norms train on it
    found = _first_layer(module)
    kind, first = found if found else ("", None)
    # built for signals of this many samples: channels first, then last; after what a first 2-D or
    # 3-D convolution takes, whose input is no signal of that rank
    signals = [("float", shape) for n in _signal_lengths(kwargs) for shape in ((2, c, n), (2, n, c))]
    images_first = kind == "conv" and len(first.kernel_size) > 1
    if not images_first:
        out += signals
    if takes_graph(module):  # node features [N, F]: F from the first linear layer, else the channels
        width = first.in_features if kind == "linear" else c
        out += [("float", (GRAPH_NODES, width)), ("float", (GRAPH_NODES, c))]
    if is_loss(module):
        out += [("float", (2, c)), ("float", (2, c, s, s)), ("float", (2, c, s))]
    if kind == "conv":
        rank = len(first.kernel_size)
        cin = first.in_channels
        for side in hw + [s, 32, 64]:
            out.append(("float", (2, cin) + (side if rank < 3 else min(side, 16),) * rank))
        if images_first:
            out += signals
    elif kind == "embedding":
        out += [(f"long:{first.num_embeddings}", (2, sizes.tokens)), (f"long:{first.num_embeddings}", (2 * sizes.tokens,))]
        out += [(f"long:{first.num_embeddings}", (2, n)) for n in _context_lengths(module) if n != sizes.tokens]
        # one sequence last: a classifier that pools at the last non-padding token refuses a batch
        # when its config names no padding token
        out.append((f"long:{first.num_embeddings}", (1, sizes.tokens)))
        # several sequences per sample: a multiple-choice head flattens (B, choices, T) and scores each
        out.append((f"long:{first.num_embeddings}", (2, 2, sizes.tokens)))
    elif kind == "linear":
        out += [("float", (2, sizes.tokens, first.in_features)), ("float", (2, first.in_features))]
        out += [("float", (2, first.in_features, s, s))]
    elif kind == "layernorm":
        shape = tuple(first.normalized_shape)
        out += [("float", (2, sizes.tokens) + shape), ("float", (2,) + shape), ("float", (2, s) + shape)]
        if len(shape) == 1:
            out.append(("float", (2, shape[0], s, s)))
    elif kind == "norm":
        ch = getattr(first, "num_channels", None) or getattr(first, "num_features", c)
        out += [("float", (2, ch, s, s)), ("float", (2, ch)), ("float", (2, ch, s)), ("float", (2, ch, 8, 8, 8))]
    elif kind == "mha":
        out.append(("float", (2, sizes.tokens, first.embed_dim)))
    elif kind == "rnn":
        out.append(("float", (2, sizes.tokens, first.input_size)))
    for side in hw:
        out += [("float", (2, c, side, side)), ("float", (2, 3, side, side))]
    out += [
        ("float", (2, c, s, s)), ("float", (2, sizes.tokens, c)), ("float", (2, c)), ("float", (2, c, s)),
        ("float", (2, 3, 32, 32)), ("float", (2, c, 8, 8, 8)), ("float", (2, 3, 64, 64)), ("float", (2, 3, 224, 224)),
        ("float", (2, 1, 32, 32)),
    ]
    seen: set[tuple[str, tuple[int, ...]]] = set()
    return [x for x in out if not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]


def _main_argument(module: nn.Module) -> str | None:
    """The argument of ``forward`` the main input is given as: the first positional one without a
    default, as :func:`forward_calls` fills it."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    return next((p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)), None)


def _with_documented(module: nn.Module, main: torch.Tensor, main_name: str | None, args: list[Any],
                     kwargs: dict[str, Any], where: dict[str, tuple[bool, int | str]]) -> tuple[list[Any], dict[str, Any]] | None:
    """The call with each companion of the main input made as the docstring states its shape,
    the symbols the main input (argument ``main_name``) fixes shared (``laf (B, N, 2, 3)`` beside
    ``img (B, 1, H, W)``)."""
    documented = documented_inputs(module)
    companions = [name for name in where if name in documented]
    if not companions:
        return None
    channels, spatial = 16, 16
    if main_name in documented:
        bound = bind(documented[main_name], tuple(main.shape))
    else:  # an undocumented main input still tells the channels of a map or of tokens
        bound = {}
        channels = main.shape[1] if main.dim() in (4, 5) else main.shape[-1] if main.dim() == 3 else 16
        spatial = main.shape[-1] if main.dim() in (4, 5) else 16
    a, kw = list(args), dict(kwargs)
    for name in companions:
        doc = documented[name]
        shape = shape_of(doc, bound, channels, spatial)
        value = [make_tensor(doc.kind, shape) for _ in range(2)] if doc.is_list else make_tensor(doc.kind, shape)
        keyword, at = where[name]
        if keyword:
            kw[at] = value  # type: ignore[index]
        else:
            a[at] = value  # type: ignore[index]
    return a, kw


def ring_edges(nodes: int) -> torch.Tensor:
    """A ring both ways plus self-loops, ``[2, 3 * nodes]``: every node has neighbours."""
    ring = torch.arange(nodes)
    return torch.cat([torch.stack([ring, (ring + 1) % nodes]), torch.stack([(ring + 1) % nodes, ring]),
                      torch.stack([ring, ring])], dim=1)


def make_graph(nodes: int, features: int, categories: int = 0) -> SimpleNamespace:
    """One small graph as a batch object (``batch.x``, ``batch.edge_index``, ...), for blocks whose
    forward reads a graph's attributes rather than taking tensors; with ``categories``, node and
    edge features are integer codes below it (atom and bond types an embedding encodes)."""
    edges = ring_edges(nodes)

    def features_of(n: int) -> torch.Tensor:
        return torch.randint(0, categories, (n, features)) if categories else torch.randn(n, features)

    return SimpleNamespace(x=features_of(nodes), edge_index=edges, edge_attr=features_of(edges.shape[1]),
                           batch=torch.zeros(nodes, dtype=torch.long), y=torch.randint(0, 2, (nodes,)),
                           num_nodes=nodes, num_graphs=1, ptr=torch.tensor([0, nodes]))


_DATA_SAMPLES = ("data_samples", "batch_data_samples")
_IMAGE_METAS = ("img_metas", "batch_img_metas", "image_metas")


class DataSample(SimpleNamespace):
    """One image's meta information as OpenMMLab's data samples carry it: read as attributes
    (``sample.img_shape``), through ``metainfo`` (``sample.metainfo['img_shape']``) and ``get``
    (``sample.get('proposals')`` is None: nothing was predicted before)."""

    @property
    def metainfo(self) -> dict[str, Any]:
        return dict(vars(self))

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __contains__(self, key: str) -> bool:
        return hasattr(self, key)


def image_metas(main: torch.Tensor) -> list[dict[str, Any]]:
    """The meta information of each image of a batch that was not resized or padded."""
    shape = tuple(main.shape[-2:]) if main.dim() == 4 else (64, 64)
    return [dict(img_shape=shape, ori_shape=shape, pad_shape=shape, batch_input_shape=shape,
                 scale_factor=(1.0, 1.0), flip=False) for _ in range(main.shape[0] if main.dim() == 4 else 1)]


def _annotations(name: str, main: torch.Tensor) -> Any:
    """Per-image meta information for a ``data_samples`` or ``img_metas`` parameter, else None.
    Tried also where the parameter is optional: a detector called without them fails in its
    post-processing (image shapes, the mask of padded pixels)."""
    if name in _DATA_SAMPLES:
        return [DataSample(**meta) for meta in image_metas(main)]
    if name in _IMAGE_METAS:
        return image_metas(main)
    return None


FIELDS = "fields:"  # the kind of an input read by field, as a model's output object is
KEYS = "keys:"  # the kind of an input read by key, as a detector's outputs dict is


def keys_read(module: nn.Module, name: str) -> list[str]:
    """The string keys ``forward`` reads off its argument ``name`` (``outputs["pred_logits"]``,
    ``x.get("encoder_cont")``, ``cond[self.cond_key]`` where the block keeps the key), in source
    order: an argument read so is a dict of tensors."""
    tree = source_tree(type(module).forward)
    if tree is None:
        return []
    kept = [key for node in ast.walk(tree) if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and node.value.id == name and isinstance(node.slice, ast.Attribute) and isinstance(node.slice.value, ast.Name)
            and node.slice.value.id == "self" and isinstance(key := getattr(module, node.slice.attr, None), str)
            and key.isidentifier()]
    return list(dict.fromkeys(keys_off(tree, {name}) + kept))


def element_keys_read(module: nn.Module, name: str) -> list[str]:
    """The string keys ``forward`` reads off the elements of its argument ``name`` (``[v["labels"]
    for v in targets]``): an argument read so is a list of dicts, one per sample."""
    tree = source_tree(type(module).forward)
    if tree is None:
        return []
    elements = {node.target.id for node in ast.walk(tree) if isinstance(node, (ast.For, ast.comprehension))
                and isinstance(node.iter, ast.Name) and node.iter.id == name and isinstance(node.target, ast.Name)}
    return keys_off(tree, elements) if elements else []


_LABEL_KEY = re.compile(r"label|class|cls|categor|(?:^|_)ids?$", re.IGNORECASE)
_BOX_KEY = re.compile(r"box|bbox", re.IGNORECASE)
_MASK_KEY = re.compile(r"(?:^|_)masks?$", re.IGNORECASE)


def _mask_of(shape: tuple[int, ...]) -> torch.Tensor:
    """A padding mask beside a batch of ``shape``, masking nothing: one flag per pixel of an image
    batch (channels left out, as DETR's ``NestedTensor(tensors, mask)`` holds it), per token of a
    sequence batch (features left out)."""
    kept = shape[:1] + shape[2:] if len(shape) == 4 else shape[:-1]
    return torch.zeros(kept, dtype=torch.bool)


def _field_value(name: str, shape: tuple[int, ...], masks: bool) -> torch.Tensor:
    """What an input object holds under ``name`` beside a batch of ``shape``: valid boxes, with
    ``masks`` a padding mask that masks nothing (an input's ``mask``; a model's ``pred_masks`` are
    logits), else a tensor of the shape."""
    if _BOX_KEY.search(name) and shape:
        return _boxes_of(shape[:-1])
    if masks and _MASK_KEY.search(name) and shape:
        return _mask_of(shape)
    return torch.randn(shape)


def keyed_value(key: str, lead: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """What a dict of targets holds under ``key``: class labels as integers, boxes as four
    coordinates in [0, 1] (centre and size or corners alike), anything else like ``like``."""
    if _LABEL_KEY.search(key):
        return torch.randint(0, 2, lead)
    if _BOX_KEY.search(key):
        return _boxes_of(lead)
    return like.clone()


def _boxes_of(lead: tuple[int, ...]) -> torch.Tensor:
    """Boxes of four coordinates in [0, 1] that are valid read either way: as centre and size
    (the size positive) and as corners (the far corner beyond the near one)."""
    near = torch.rand(lead + (2,)) * 0.5
    return torch.cat([near, near + 0.1 + 0.4 * torch.rand_like(near)], dim=-1)


def make_tensor(kind: str, shape: tuple[int, ...]) -> Any:
    """The input a candidate (kind, shape) stands for: a tensor, for ``graph`` a graph batch of
    ``shape = (nodes, features)``, for ``images`` a list of ``shape[0]`` images, for ``boxes``
    boxes of ``shape[-1]`` corner coordinates (x1, y1, x2, y2 or with z)."""
    if kind.startswith("graph"):  # "graph", or "graph:long:K" with integer features
        return make_graph(*shape, categories=int(kind.rsplit(":", 1)[1]) if ":" in kind else 0)
    if kind == "images":  # a list of images of their own sizes, as detection models take them
        return list(torch.randn(shape).unbind(0))
    if kind == "boxes":  # corners in [0, 1], each box's far corner beyond its near one
        near = torch.rand(shape[:-1] + (shape[-1] // 2,)) * 0.5
        return torch.cat([near, near + 0.1 + 0.4 * torch.rand_like(near)], dim=-1)
    if kind.startswith(FIELDS):  # "fields:tensors,mask": one value per field
        return SimpleNamespace(**{name: _field_value(name, shape, True) for name in kind.removeprefix(FIELDS).split(",")})
    if kind.startswith(KEYS):  # "keys:pred_logits,pred_boxes": one value per key, boxes valid ones
        return {name: _field_value(name, shape, False) for name in kind.removeprefix(KEYS).split(",")}
    if kind == COMPLEX:  # a spectrogram's complex values
        return torch.randn(shape, dtype=torch.cfloat)
    if kind == "uint8":  # an image as stored: bytes
        return torch.randint(0, 256, shape, dtype=torch.uint8)
    if kind == "numpy":  # an image as loaded, values in [0, 1]
        return torch.rand(shape).numpy()
    if kind.startswith("long"):
        high = int(kind.split(":")[1]) if ":" in kind else 8
        return torch.randint(0, max(1, high), shape)
    return torch.randn(shape)


# an index into the rows of the main input (not ``edge_index``, a pair of rows)
_INDEX_NAME = re.compile(r"(?:idx|index)_\w+|\w+_idx|(?!edge_)\w+_index")

_TARGET_NAMES = {"target", "targets", "label", "labels", "y", "gt", "y_true", "truth", "ground_truth", "tgt"}
# Optional arguments (default None) that a transformer layer's forward uses as tensors like its
# main input: DETR-style decoder layers take ``key``, ``query_pos``, ``key_pos``, ``ref_sine_embed``
_TENSOR_WORDS = re.compile(r"pos|embed|emb$|key|value|query|memory|context|ref|cond|feat|hidden|skip|enc|src|state")
_POSITION_IDS = re.compile(r"pos(?:ition)?_ids")
_CACHE = re.compile(r"past|cache")


_TENSOR_PAIR = re.compile(r"(?:typing\.)?[Tt]uple\[(?:torch\.)?(?:Float)?Tensor, ?(?:torch\.)?(?:Float)?Tensor\]")
_ROTARY_WIDTHS = ("rotary_ndims", "rotary_dim", "rotary_emb_dim", "head_dim", "head_size", "attention_head_size")


def _rotary_pair(module: nn.Module, main: torch.Tensor, param: inspect.Parameter) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(cos, sin)`` of rotary position angles, (B, T, width), for a ``position_embeddings: tuple[
    Tensor, Tensor]`` over tokens (B, T, C): the model computes them once for all its layers, so a
    layer or attention block alone is handed them. The width is the first rotary or head width the
    block or its parts keep; None where the parameter is no such pair."""
    if "position" not in param.name.lower() or main.dim() != 3 or not _TENSOR_PAIR.search(annotation_text(param)):
        return None
    width = held_int(module, _ROTARY_WIDTHS)
    if width is None:
        return None
    angles = torch.rand(main.shape[0], main.shape[1], width)
    return angles.cos(), angles.sin()


def _one_image(pair: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary ``(cos, sin)`` of one image, (T, width): what a vision attention that adds the
    batch axis itself takes (MLCD's)."""
    return pair[0][0], pair[1][0]


def _none_filled(module: nn.Module, params: list[inspect.Parameter], main: torch.Tensor, taken: set[str]) -> dict[str, Any]:
    """Values for the optional parameters named like tensors of the main input's kind: a copy of
    the main input, positions along its second axis for ``position_ids``, rotary angles for a pair
    of position embeddings. Masks stay None, and so do caches of earlier steps (``past_key_values``,
    ``cache_params``): state with methods of its own, not a tensor."""
    filled: dict[str, Any] = {}
    for p in params:
        n = p.name.lower()
        if p.default is not None or p.name in taken or "mask" in n or _CACHE.search(n) \
                or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if (pair := _rotary_pair(module, main, p)) is not None:
            filled[p.name] = pair
        elif _POSITION_IDS.fullmatch(n) and main.dim() >= 2:
            filled[p.name] = torch.arange(main.shape[1]).expand(main.shape[0], -1)
        elif _TENSOR_WORDS.search(n) and main.is_floating_point():
            filled[p.name] = main.clone()
    return filled


def _target_variants(main: torch.Tensor) -> list[torch.Tensor]:
    """Targets a loss may want: like the input, class indices, signs, per-sample signs."""
    n = main.shape[0] if main.dim() else 1
    classes = main.shape[1] if main.dim() >= 2 else 2
    return [
        # probabilities like the input; float ones for integer inputs (token ids), which rand_like refuses
        torch.rand_like(main) if main.is_floating_point() else torch.rand(main.shape),
        torch.randint(0, classes, (n,) + tuple(main.shape[2:])),
        torch.randint(0, 2, main.shape).float() * 2 - 1,
        torch.randint(0, 2, (n,)).float() * 2 - 1,
        torch.randint(0, classes, tuple(main.shape)),
    ]


def _rois(images: torch.Tensor, per_image: int = 2) -> torch.Tensor:
    """Regions of interest in torchvision's ``Tensor[K, 5]`` form: image index, then x1, y1, x2, y2
    inside the image (the top-left quarter and the whole image)."""
    h, w = images.shape[-2:]
    rows = [[float(i), 0.0, 0.0, (w - 1) / 2, (h - 1) / 2] for i in range(images.shape[0])]
    rows += [[float(i), 0.0, 0.0, float(w - 1), float(h - 1)] for i in range(images.shape[0])]
    return torch.tensor(rows[: images.shape[0] * per_image], dtype=images.dtype)


# Names of a forward argument that holds one feature map per pyramid level.
_LEVEL_NAMES = {"feats", "features", "inputs", "xs", "x_list", "mlvl_feats", "multi_level_feats", "feature_maps",
                "fmaps", "in_feats", "feats_list", "inputs_list", "multi_feats"}
_MAPPING_TYPES = ("Dict[", "dict[", "Mapping[", "OrderedDict")
_SEQUENCE_TYPES = ("List[", "Tuple[", "Sequence[", "list[", "tuple[") + _MAPPING_TYPES


_SHAPE_TYPES = ("Size", "[int, ...]")
_INT_TUPLE = re.compile(r"\b[Tt]uple\[int(?:, ?int)+\]")


# a list and nothing else (``Union[Tensor, List[Tensor]]`` takes the tensor)
_TENSOR_LIST = re.compile(r"(?:typing\.)?(?:[Ll]ist|Sequence)\[(?:torch\.)?Tensor\]$")


def annotation_text(param: inspect.Parameter) -> str:
    """A parameter's annotation as written (a string under ``from __future__ import annotations``)
    or as its repr; ``inspect._empty`` when it has none."""
    return param.annotation if isinstance(param.annotation, str) else repr(param.annotation)


def int_tuple_length(param: inspect.Parameter) -> int:
    """The length of a fixed-length integer tuple a forward argument takes (``size: Tuple[int,
    int]``, a grid's sides), else 0."""
    annotation = annotation_text(param)
    found = _INT_TUPLE.search(annotation) if param.annotation is not inspect.Parameter.empty else None
    return found.group().count("int") if found else 0


def takes_shape(param: inspect.Parameter) -> bool:
    """Whether a forward argument is a shape (``batch_shape: Tuple[int, ...]``, ``torch.Size``),
    not a tensor."""
    annotation = annotation_text(param)
    return param.annotation is not inspect.Parameter.empty and any(t in annotation for t in _SHAPE_TYPES) \
        or param.name.endswith("_shape") and param.annotation is inspect.Parameter.empty


def level_channels(module: nn.Module, init: dict[str, Any]) -> list[int] | None:
    """The input channels of each level of a multi-level block (an FPN's ``in_channels_list``),
    from its constructor arguments or attributes."""
    for source in (init, vars(module)):
        for name, value in source.items():
            if ("channel" in name or name.startswith("in_")) and isinstance(value, (list, tuple)) and len(value) >= 2 \
                    and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
                return list(value)
    return None


_MOST_LEVELS = 8
_MOST_LEVEL_ELEMENTS = 1 << 24  # as the probe's largest input


def feature_levels(module: nn.Module, param: inspect.Parameter, main: torch.Tensor, init: dict[str, Any]) -> Any:
    """One map per level, each half the size of the one before, for a forward argument that takes
    a list, tuple or dict of feature maps (FPN necks, detection heads); None for any other."""
    annotation = annotation_text(param)
    typed = param.annotation is not inspect.Parameter.empty and any(t in annotation for t in _SEQUENCE_TYPES)
    channels = level_channels(module, init)
    if main.dim() != 4 or takes_shape(param) or not (typed or param.name.lower() in _LEVEL_NAMES or (channels and param.name == "x")):
        return None
    channels = channels or [main.shape[1]] * FEATURE_LEVELS
    # as many levels as a pyramid has: a longer list of widths (a per-stage plan of 32 convolutions)
    # would ask for maps of 2**32 pixels a side
    if len(channels) > _MOST_LEVELS or math.prod(channels) == 0:
        return None
    side = max(main.shape[-1], 2 ** len(channels))
    if sum(main.shape[0] * c * (side >> i) ** 2 for i, c in enumerate(channels)) > _MOST_LEVEL_ELEMENTS:
        return None
    maps = [torch.randn(main.shape[0], c, max(side >> i, 1), max(side >> i, 1)) for i, c in enumerate(channels)]
    if any(t in annotation for t in _MAPPING_TYPES):
        return dict((str(i), m) for i, m in enumerate(maps))
    return tuple(maps) if "uple[" in annotation else maps


@dataclass
class Filling:
    """What the rules filling one call's parameters share."""

    module: nn.Module
    main: torch.Tensor  # the main input, already placed
    given: int = 0  # positional arguments placed so far
    tokens_side: int | None = None  # a token grid's side, once one parameter asked for it


_NOT_MINE = object()  # a rule's answer when the parameter is not one it fills


@dataclass(frozen=True)
class InputRule:
    """One guess for a required ``forward`` parameter after the main input: ``fill`` gives its
    value, or ``_NOT_MINE``. ``role`` says what else the probe does with it: a mask is tried all
    kept next, a rotary pair also per position, a target also in other forms."""

    name: str
    fill: Callable[[Filling, inspect.Parameter, str], Any]  # (shared state, parameter, its name in lower case)
    role: Literal["value", "mask", "rotary", "target"] = "value"


def _edges(f: Filling, p: inspect.Parameter, n: str) -> Any:
    return ring_edges(f.main.shape[0]) if n in ("edge_index", "edges") else _NOT_MINE


def _adjacency(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A dense adjacency of the same ring as ``_edges``."""
    if n not in ("adj", "adj_t"):
        return _NOT_MINE
    nodes = f.main.shape[0]
    return ((torch.eye(nodes) + torch.eye(nodes).roll(1, 0) + torch.eye(nodes).roll(-1, 0)) > 0).float()


def _edge_values(f: Filling, p: inspect.Parameter, n: str) -> Any:
    if n not in ("edge_weight", "edge_attr") or not f.given or f.main.dim() != 2:
        return _NOT_MINE
    edges = 3 * f.main.shape[0]
    dim = getattr(f.module, "edge_dim", None)
    return torch.rand(edges) if n == "edge_weight" else torch.rand(edges, dim if isinstance(dim, int) else f.main.shape[1])


def _grid_side(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A token grid's height or width, one side for all of them: H * W tokens."""
    if n not in ("h", "w", "height", "width", "hh", "ww"):
        return _NOT_MINE
    f.tokens_side = f.tokens_side or int(round(f.main.shape[1] ** 0.5)) if f.main.dim() == 3 else 4
    return f.tokens_side


def _grid_shape(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A token sequence's grid: (H, W) with H * W tokens."""
    if not (n in ("hw_shape", "hw", "size", "feat_size", "shape", "x_size", "spatial_shape")
            or n == "input_size" and f.main.dim() == 3):
        return _NOT_MINE
    side = int(round(f.main.shape[1] ** 0.5)) if f.main.dim() == 3 else 4
    return (side, side)


def _int_tuple(f: Filling, p: inspect.Parameter, n: str) -> Any:
    length = int_tuple_length(p)
    return (min(f.main.shape[-1], 16),) * length if length else _NOT_MINE


def _row_count(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """Rows a scatter writes: one per input row."""
    return f.main.shape[0] if n in ("dim_size", "num_nodes", "num_segments", "num_groups") else _NOT_MINE


def _flag(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A flag (``multimask_output: bool``), never a mask."""
    return False if p.annotation in (bool, "bool") else _NOT_MINE


def _truth_value(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A parameter ``forward`` tests for truth as it is (``if train and use_dropout``, ``a if
    target_is_real else b``, ``not is_disc``): a flag, off. A tensor there is ambiguous."""
    tree = source_tree(type(f.module).forward)
    return False if tree is not None and p.name in _tested_bare(tree) else _NOT_MINE


def _tested_bare(tree: ast.AST) -> set[str]:
    """Names used bare as a condition: an ``if``/``while``/ternary test, an operand of ``and``,
    ``or`` or ``not``."""
    tests: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests.append(node.test)
        elif isinstance(node, ast.BoolOp):
            tests += node.values
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            tests.append(node.operand)
    return {t.id for t in tests if isinstance(t, ast.Name)}


def _annotated_number(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A parameter annotated as a number (``step: Union[int, Tensor]``, ``scale: float``) gets the
    number: 1, or 1.0 where only a float is admitted."""
    kinds = set(typing.get_args(p.annotation)) if typing.get_origin(p.annotation) is typing.Union else {p.annotation}
    if int in kinds or "int" in kinds:
        return 1
    return 1.0 if float in kinds or "float" in kinds else _NOT_MINE


def _mask(f: Filling, p: inspect.Parameter, n: str) -> Any:
    return None if "mask" in n else _NOT_MINE


def _row_index(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A graph's batch vector, a scatter's target index, DimeNet's ``i``/``idx_kj`` into the rows."""
    if not (n in ("batch", "index", "idx") or _INDEX_NAME.fullmatch(n) or n in ("i", "j", "k") and "Tensor" in str(p.annotation)
            and not _attends(f.module)):
        return _NOT_MINE
    return torch.zeros(f.main.shape[0], dtype=torch.long)


def _attends(module: nn.Module) -> bool:
    """Whether ``forward`` takes an attention's queries, keys and values (``q, k, v``): its ``k``
    holds keys, not indices."""
    try:
        names = set(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return False
    return {"q", "v"} <= names


def _timestep(f: Filling, p: inspect.Parameter, n: str) -> Any:
    return torch.rand(f.main.shape[0]) if n in ("t", "timestep", "timesteps", "time", "noise_level", "sigma") else _NOT_MINE


def _boxes(f: Filling, p: inspect.Parameter, n: str) -> Any:
    return _rois(f.main) if n in ("boxes", "rois") and f.main.dim() == 4 else _NOT_MINE


def _unpool_indices(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """Index 0 is a valid position in any unpooled output."""
    return torch.zeros(f.main.shape, dtype=torch.long) if n == "indices" else _NOT_MINE


def _variance(f: Filling, p: inspect.Parameter, n: str) -> Any:
    if n not in ("var", "variance", "std"):
        return _NOT_MINE
    return torch.rand_like(f.main) + 0.1 if f.main.is_floating_point() else f.main.clone()


def _rotary(f: Filling, p: inspect.Parameter, n: str) -> Any:
    pair = _rotary_pair(f.module, f.main, p)
    return _NOT_MINE if pair is None else pair


_STATE_NAME = re.compile(r"(?:^|_)(?:state|states|hidden|hx|h0|hc|memory|mems)$")
# what recurrent blocks call the method that makes their state for a batch (S4's cells'
# ``default_state(*batch_shape)``, the ``init_hidden(batch_size)`` of language models)
_STATE_MAKERS = ("default_state", "init_hidden", "init_state", "initial_state", "zero_state", "get_initial_state",
                 "init_hidden_state", "initial_hidden")


def _own_state(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """A recurrent block's state (``state``, ``hidden``, or a cell's bare ``h``), made by its own
    method for the main input's batch."""
    makers = [m for name in _STATE_MAKERS if callable(m := getattr(f.module, name, None))]
    if not makers or not (_STATE_NAME.search(n) or n in ("h", "c")):
        return _NOT_MINE
    batch = f.main.shape[0] if f.main.dim() else 1
    for method in makers:
        try:
            return method(batch)
        except Exception:  # noqa: BLE001 - a maker of other arguments (a batch shape and a device by keyword, none)
            try:
                return method()
            except Exception:  # noqa: BLE001
                continue
    return _NOT_MINE


def _earlier_outputs(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """``prev_layers: list[Tensor]``: earlier outputs like the input."""
    return [f.main.clone(), f.main.clone()] if _TENSOR_LIST.match(annotation_text(p)) else _NOT_MINE


def _target(f: Filling, p: inspect.Parameter, n: str) -> Any:
    return f.main.clone() if n in _TARGET_NAMES else _NOT_MINE


def _keyed(f: Filling, p: inspect.Parameter, n: str) -> Any:
    if keys := keys_read(f.module, p.name):  # per batch: ``targets["class"][b]``
        return {k: keyed_value(k, tuple(f.main.shape[:2]), f.main) for k in keys}
    if keys := element_keys_read(f.module, p.name):  # per sample, two objects each: DETR's targets
        return [{k: keyed_value(k, (2,), f.main[i]) for k in keys} for i in range(f.main.shape[0] if f.main.dim() else 1)]
    return _NOT_MINE


def _for_its_layer(f: Filling, p: inspect.Parameter, n: str) -> Any:
    """An argument ``forward`` hands straight to a layer of the block (``self.modulation(style)``,
    ``self.y_embedder(y)``, ``self.convc1(corr)``, or on to a part that does:
    ``self.modulated_conv(x, style)``) gets what that layer takes: class indices per sample for
    an embedding table; for a convolution, maps of its input channels the size of the main
    input's; for a linear map, rows of its input width, one per sample beside an image (a style or
    condition vector), per token beside tokens. A layer of another kind gets none of these."""
    layer = _layer_taking(f.module, p.name, depth=3)
    found = _first_in(layer) if layer is not None else None
    batch = f.main.shape[0] if f.main.dim() else 1
    if found is None:
        return _NOT_MINE
    kind, first = found
    if kind == "embedding":
        return torch.randint(0, first.num_embeddings, (batch,))
    if kind == "conv":
        rank = len(first.kernel_size)
        spatial = tuple(f.main.shape[2:]) if f.main.dim() == rank + 2 else (16,) * rank
        return torch.randn(batch, first.in_channels, *spatial)
    width = first.in_features if kind == "linear" else first.weight.shape[1]
    return torch.randn(*f.main.shape[:2], width) if f.main.dim() == 3 else torch.randn(batch, width)


def _first_in(layer: nn.Module) -> tuple[str, nn.Module] | None:
    """The first layer in ``layer`` (itself first) that says what it takes: a convolution, a linear
    map, an embedding table (``layer_kind``), or one with a 2-D weight of its own (StyleGAN's
    ``EqualLinear``), as ``("weight", it)``."""
    for m in layer.modules():
        kind = layer_kind(m)
        if kind in ("conv", "linear", "embedding"):
            return kind, m
        if kind is None and isinstance(getattr(m, "weight", None), nn.Parameter) and m.weight.dim() == 2:
            return "weight", m
        if kind is not None:
            return None
    return None


def _layer_taking(module: nn.Module, name: str, depth: int, method: Any = None, hops: int = 2) -> nn.Module | None:
    """The layer whose input ``forward``'s argument ``name`` is: the layer (or ``nn.Sequential``)
    ``self.<attr>`` that ``forward`` first calls with it, and where that is a part of its own, the
    layer that part's ``forward`` hands that parameter to (``depth`` parts down), or a method of
    the block's own it is handed to first (``self._residual(x, s)``, ``method``; ``hops`` such
    methods deep, which are no parts); None where none takes it as it is."""
    tree = source_tree(method or type(module).forward)
    if tree is None:
        return None
    # where the argument is made into something else first (``feats = rearrange(feats, ...)``),
    # a layer called with that name after takes what it became; a method of the block that keeps
    # its kind (``labels = self.token_drop(labels)``) is no such change. Inside a branch, only a
    # value computed by a call counts (``if self.num_spk_embs: c = self.emb(c_idx)``, an embedding
    # of what was indices; timm's ``x = torch.cat([v, h], -1)`` of twice the width); an item
    # picked there (BigGAN's ``if self.hier: z = zs[0]``) is what the layer after it takes either way
    always = {id(node) for node in _unconditional(tree)}
    reshaped = min((node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
                    and not (isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
                             and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == "self")
                    and (id(node) in always or any(isinstance(n, ast.Call) for n in ast.walk(node.value)))),
                   default=None)
    calls = [(node, i) for node in ast.walk(tree) if isinstance(node, ast.Call)
             and (reshaped is None or node.lineno <= reshaped)
             for i, arg in enumerate(node.args) if isinstance(arg, ast.Name) and arg.id == name]
    looped = _loop_layers(tree)
    for call, position in sorted(calls, key=lambda c: (c[0].lineno, c[0].col_offset)):
        func = call.func
        if isinstance(func, ast.Name) and func.id in looped:  # ``for n1, c1 in zip(self.norms, self.convs): n1(x, s)``
            layers = getattr(module, looped[func.id], None)
            layer = layers[0] if isinstance(layers, (nn.ModuleList, nn.Sequential)) and len(layers) else None
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            layer = getattr(module, func.attr, None)
            defined = getattr(type(module), func.attr, None)
            if inspect.isfunction(defined) and hops > 0:  # a method of the block: the layer it hands the argument to
                names = list(inspect.signature(defined).parameters)[1:]
                if position < len(names) and (found := _layer_taking(module, names[position], depth, defined, hops - 1)) is not None:
                    return found
        else:
            continue
        if not isinstance(layer, nn.Module):
            continue  # a method of the block (``self.token_drop(labels)``): a layer may take it after
        if layer_kind(layer) is not None or isinstance(layer, nn.Sequential):
            return layer if position == 0 else None
        try:
            params = [q.name for q in inspect.signature(layer.forward).parameters.values()
                      if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            return None
        # a part of its own: the layer its forward hands that parameter to, none where it
        # transforms it first (a point-cloud part rearranging its features before its convolution);
        # a part that is a layer by its own 2-D weight (StyleGAN2's ``EqualLinear``) takes it itself
        deeper = _layer_taking(layer, params[position], depth - 1) if depth > 1 and position < len(params) else None
        own = isinstance(getattr(layer, "weight", None), nn.Parameter) and layer.weight.dim() == 2
        return layer if deeper is None and position == 0 and own else deeper
    return None


def _unconditional(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function that run on every call: not inside a branch, a loop or a ``try``
    (BigGAN's generator splits ``z`` only ``if self.hier``; its linear layer takes it either way)."""
    function = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    pending: list[ast.stmt] = list(function.body) if function is not None else []
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.FunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            pending += stmt.body
            continue
        yield from ast.walk(stmt)


def _loop_layers(tree: ast.AST) -> dict[str, str]:
    """Loop variables that run over a list of the block's layers, with the attribute that holds
    them: ``for layer in self.layers``, ``for i, layer in enumerate(self.layers)``, ``for c1, n1 in
    zip(self.convs, self.norms)``."""
    found: dict[str, str] = {}

    def attribute(node: ast.expr) -> str | None:
        ok = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
        return node.attr if ok else None  # type: ignore[union-attr]

    for node in ast.walk(tree):
        if not isinstance(node, ast.For):
            continue
        target, it = node.target, node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" and it.args \
                and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target, it = target.elts[1], it.args[0]
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip" and isinstance(target, ast.Tuple):
            pairs = list(zip(target.elts, it.args))
        else:
            pairs = [(target, it)]
        for name, source in pairs:
            if isinstance(name, ast.Name) and (attr := attribute(source)) is not None:
                found[name.id] = attr
    return found


def _like_main(f: Filling, p: inspect.Parameter, n: str) -> Any:
    return f.main.clone()


# The probe's guesses for a required ``forward`` parameter after the main input, in the order
# they are tried: the first rule that fills it gives its value.
INPUT_RULES: tuple[InputRule, ...] = (
    InputRule("state the block makes", _own_state),  # before a grid's side: a cell's ``h`` is its state
    InputRule("graph edges", _edges),
    InputRule("dense adjacency", _adjacency),
    InputRule("edge weights or attributes", _edge_values),
    InputRule("token grid side", _grid_side),
    InputRule("token grid shape", _grid_shape),
    InputRule("tuple of ints", _int_tuple),
    InputRule("rows a scatter writes", _row_count),
    InputRule("flag", _flag),
    InputRule("truth value", _truth_value),
    InputRule("number by annotation", _annotated_number),
    InputRule("mask", _mask, "mask"),
    InputRule("row index", _row_index),
    InputRule("diffusion timestep", _timestep),
    InputRule("boxes", _boxes),
    InputRule("unpooling indices", _unpool_indices),
    InputRule("variance", _variance),
    InputRule("rotary pair", _rotary, "rotary"),
    InputRule("earlier outputs", _earlier_outputs),
    InputRule("dicts of the keys forward reads", _keyed),  # DETR's ``targets``: dicts, not a tensor
    InputRule("what the layer it is handed to takes", _for_its_layer),
    InputRule("target", _target, "target"),
    InputRule("like the main input", _like_main),
)


def fill(filling: Filling, param: inspect.Parameter, name: str) -> tuple[InputRule, Any]:
    """The first rule of ``INPUT_RULES`` that fills ``param`` (``name``: its name in lower case), and the value."""
    for rule in INPUT_RULES:
        value = rule.fill(filling, param, name)
        if value is not _NOT_MINE:
            return rule, value
    raise AssertionError("the last rule fills every parameter")  # pragma: no cover


def forward_calls(module: nn.Module, main: torch.Tensor, init: dict[str, Any] | None = None) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    """Arguments for ``forward`` given the main input, the likeliest fill first, then other targets.
    ``init``: the constructor's arguments (an FPN's per-level channels)."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        yield [main], {}
        return
    if main.dim() == 3 and takes_levels(params):  # flattened levels, with their sides and starts
        yield from multiscale_calls(module, params, main.shape[0])
    first = next((p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)), None)
    levels = feature_levels(module, first, main, init or {}) if first is not None else None
    if levels is not None:
        yield [levels], {}
    if first is not None and takes_shape(first):  # parameter generators draw for a batch shape
        yield [main.shape], {}
    if first is not None and (length := int_tuple_length(first)):  # a grid's sides: positional encodings
        yield [(min(main.shape[-1], 16),) * length], {}
    if is_loss(module) and main.is_floating_point() and (main.min() < 0 or main.max() > 1):
        main = torch.rand_like(main)  # a probability-like prediction; values already in [0, 1] (boxes) kept
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    targets: list[tuple[bool, int | str]] = []  # (is keyword, position or name)
    masks: list[tuple[bool, int | str]] = []  # required masks, given None first
    optional: dict[str, Any] = {}  # meta information for parameters that default to None
    where: dict[str, tuple[bool, int | str]] = {}  # companions of the main input: (is keyword, position or name)
    rotary: list[tuple[bool, int | str]] = []  # where rotary (cos, sin) pairs go, as ``targets``
    per_position: tuple[torch.Tensor, torch.Tensor] | None = None  # one image's angles, (T, width)
    main_name: str | None = None  # the argument the main input is given as
    # rows for a linear layer given one per token beside a 3-D input, and one per sample instead
    per_token: list[tuple[tuple[bool, int | str], torch.Tensor]] = []
    filling = Filling(module, main)
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if i == 0 and p.kind == p.VAR_POSITIONAL:
                args.append(main)
            continue
        n = p.name.lower()
        if args and (annotations := _annotations(n, main)) is not None:
            if p.default is not inspect.Parameter.empty:
                optional[p.name] = annotations
            elif p.kind == p.KEYWORD_ONLY:
                kwargs[p.name] = annotations
            else:
                args.append(annotations)
            continue
        if p.default is not inspect.Parameter.empty:
            continue
        if not args and p.kind != p.KEYWORD_ONLY:
            args.append(main)
            main_name = p.name
            continue
        filling.given = len(args)
        rule, value = fill(filling, p, n)
        at = (p.kind == p.KEYWORD_ONLY, p.name if p.kind == p.KEYWORD_ONLY else len(args))
        if rule.role == "mask":
            masks.append(at)
        elif rule.role == "rotary":
            per_position = _one_image(value)
            rotary.append(at)
        elif rule.role == "target":
            targets.append(at)
        elif rule.fill is _for_its_layer and main.dim() == 3 and isinstance(value, torch.Tensor) and value.dim() == 3:
            per_token.append((at, value[:, 0].clone()))
        where[p.name] = at
        if p.kind == p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    if not args and not kwargs:
        if not (params and all(p.kind == p.KEYWORD_ONLY for p in params)):
            yield [], {}
        if first is not None and first.default is not first.empty and first.annotation not in (bool, "bool") \
                and "mask" not in first.name.lower():  # a flag or a mask is never the input, as above
            # every argument optional (a language model's ``input_ids=None, inputs_embeds=None``,
            # which refuses a call without either): the main input as the first
            yield [main], {}
        return
    yield args, kwargs
    if per_token:  # a 3-D input of channels by steps (an AdaIN's ``x``) beside one style vector per sample
        vectors = (list(args), dict(kwargs))
        for at, vector in per_token:
            vectors = _placed(*vectors, [at], vector)
        yield vectors
    bound = {p.name for p in params[:len(args)]} | set(kwargs) | set(optional)
    # a loss whose mask of valid elements defaults to None yet is used (``mask[..., 1:, 1:]``): all
    # valid, next, as the calls an input gets are few
    unmasked = [(True, p.name) for p in params if p.default is None and _MASK_KEY.search(p.name) and p.name not in bound]
    if unmasked and is_loss(module):
        yield _placed(args, {**kwargs, **optional}, unmasked, torch.ones(main.shape, dtype=torch.bool))
    if per_position is not None:  # vision attention blocks (MLCD's) add the batch axis to the angles themselves
        yield _placed(args, kwargs, rotary, per_position)
    if documented := _with_documented(module, main, main_name, args, kwargs, where):
        yield documented
    if optional:  # a detector that post-processes fails without them; a model that stacks labels, with
        yield args, {**kwargs, **optional}
    filled = _none_filled(module, params, main, bound)
    if filled:
        yield args, {**kwargs, **optional, **filled}
        # only rotary pairs are tuples here: given per position too, as a required pair is
        if pairs := {name: _one_image(v) for name, v in filled.items() if isinstance(v, tuple)}:
            yield args, {**kwargs, **optional, **filled, **pairs}
    if masks:  # a required mask the forward uses (``torch.where(mask, ...)``): everything kept
        kept = torch.ones(main.shape[:2] if main.dim() == 3 else main.shape, dtype=torch.bool)  # tokens: (B, T)
        yield _placed(args, {**kwargs, **optional, **filled}, masks, kept)
        if main.dim() == 3:  # or a dense map's (B, H, W): the valid pixels of a depth loss
            yield _placed(args, {**kwargs, **optional, **filled}, masks, torch.ones(main.shape, dtype=torch.bool))
    for target in _target_variants(main) if targets else []:
        yield _placed(args, kwargs, targets, target)
    # a loss whose targets default to None yet are required (metric-learning losses' ``labels=None``)
    late = [(True, p.name) for p in params if p.default is None and p.name.lower() in _TARGET_NAMES and p.name not in bound]
    if late and is_loss(module):
        one_class = torch.zeros(main.shape[0] if main.dim() else 1, dtype=torch.long)  # below any class count
        for target in (one_class, *_target_variants(main)):
            yield _placed(args, {**kwargs, **optional}, late, target)


NONE_USED = re.compile(r"'NoneType' object (?:has no attribute|is not (?:subscriptable|iterable))"
                        r"|unsupported operand type\(s\) for .*'NoneType'"
                        r"|argument '\w+' \(position \d+\) must be Tensor, not NoneType")  # torch's functions given it


def given_for_none(module: nn.Module, args: list[Any], kwargs: dict[str, Any], error: BaseException,
                   lines: str) -> tuple[list[Any], dict[str, Any]] | None:
    """The call again with the ``forward`` parameters left at their default ``None`` that the
    failing ``lines`` (of the block's frames, outermost to innermost) use as values, filled as
    required ones are: a diffusion UNet's ``timesteps=None`` read for its device, the index
    tensor an encoder's ``idxs=None`` embeds. None when the error is not of a None so used."""
    if not NONE_USED.search(str(error)) or not args or not isinstance(args[0], torch.Tensor):
        return None
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    words = set(re.findall(r"\w+", lines))
    bound = {p.name for p in params[:len(args)]} | set(kwargs)
    filling = Filling(module, args[0], given=len(args))
    added: dict[str, Any] = {}
    for p in params:
        if p.default is None and p.name not in bound and p.name in words and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            _, value = fill(filling, p, p.name.lower())
            if value is not None:
                added[p.name] = value
    return (args, {**kwargs, **added}) if added else None


def optional_tensors(module: nn.Module, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The optional ``forward`` parameters named like tensors of the main input's kind that the
    call leaves at ``None`` (``context``, ``cond``), filled as :func:`forward_calls` fills them."""
    if not args or not isinstance(args[0], torch.Tensor):
        return {}
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return {}
    bound = {p.name for p in params[:len(args)]} | {k for k, v in kwargs.items() if v is not None}
    return _none_filled(module, params, args[0], bound)


def _placed(args: list[Any], kwargs: dict[str, Any], where: list[tuple[bool, int | str]], value: Any) -> tuple[list[Any], dict[str, Any]]:
    """Copies of the arguments with ``value`` at each (is keyword, position or name) of ``where``."""
    a, kw = list(args), dict(kwargs)
    for keyword, at in where:
        if keyword:
            kw[at] = value  # type: ignore[index]
        else:
            a[at] = value  # type: ignore[index]
    return a, kw


def shapes(value: Any, depth: int = 0) -> Any:
    """Shapes of every tensor in a (nested) output, in a JSON-friendly structure."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return list(value.shape)
    if depth > 4:
        return None
    if isinstance(value, (dict, SimpleNamespace)):
        items = value.items() if isinstance(value, dict) else vars(value).items()
        return {str(k): shapes(v, depth + 1) for k, v in itertools.islice(items, 16)}
    if isinstance(value, (list, tuple)):
        return [shapes(v, depth + 1) for v in value[:16]]
    return type(value).__name__


def tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if depth > 4:
        return []
    items: Any = (value.values() if isinstance(value, dict) else vars(value).values() if isinstance(value, SimpleNamespace)
                  else value if isinstance(value, (list, tuple)) else [])
    return [t for v in items for t in tensors(v, depth + 1)]


def short_repr(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}"
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
