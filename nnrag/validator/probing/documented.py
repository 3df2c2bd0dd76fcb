"""Forward inputs as the block's docstring states them.

Libraries document each argument's shape where the signature cannot: kornia's ``laf: :math:`(B,
N, 2, 3)```, ``img: :math:`(B, 1, H, W)```; mmdet's ``hidden_states (Tensor): ... has shape
(num_decoder_layers, bs, num_queries, dim)``. A forward that takes several tensors of different
shapes gets each its own documented shape, a symbol standing for one size wherever it appears:
the sizes the main input was given bind the symbols of its own documented shape, so that
``(B, N, 2, 3)`` and ``(B, 1, H, W)`` share ``B``.

Everything here runs inside the sandbox, on the candidate's own class.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from torch import nn

from .arguments import CHANNEL_NAMES

# "shape (N, 4)", "shape of (B, C)", "with shape [B, N]", ":math:`(B, 1, H, W)`", "size (bs, dim)",
# "shape ``(B, C)``", "tensor of dimension [batch_size x 2]"; in a type, torchvision's "Tensor[N, 4]"
_SHAPE = re.compile(r"(?::math:`|\bshape\b(?:\s+of)?:?|\bsize\b:?|\bdim(?:ension)?s?\b:?)\s*`{0,2}[(\[]([^()\[\]`]{1,80})[)\]]")
# "(B, C, H, W)", and "[batch_size x 2]", "B × C" as papers write them
_DIM_SEPARATOR = re.compile(r",|\s[x×]\s")
_TYPED = re.compile(r"Tensor\[([^()\[\]]{1,80})\]")
# unbracketed, as papers write them: "Should be shape B x embedding_dim x h x w", "of size
# batch_size x num_features x height x width", "has shape KxHxW" (one-letter symbols run together)
_SYMBOL = r"(?:[A-Za-z_]\w*|\d+)"
_BARE = re.compile(rf"\b(?:shape|size)\b(?:\s+of)?:?\s+({_SYMBOL}(?:\s+[x×]\s+{_SYMBOL}){{1,5}}|[A-Z0-9](?:x[A-Z0-9]){{1,5}})\b")
# "positional encoding with the same shape as image_embedding", "the shape of image_embeddings"
_SAME = re.compile(r"\b(?:same\s+(?:shape|size)\s+as|(?:shape|size)\s+of)\s+(?:the\s+)?`{0,2}(\w+)")
# an argument's entry: ``name (type): text`` (Google) or ``name : type`` (numpy), at the start of a line
_ENTRY = re.compile(r"^(\s*)\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:(?!:)\s*(.*)$")
_BATCH = {"b", "bs", "batch", "batch_size", "n_batch", "num_imgs", "num_images", "b1", "b2"}
# the constructor's width names, and the symbols shapes write for them
_CHANNELS = CHANNEL_NAMES | {"c", "ch", "d", "f", "dims", "embed_dims", "feat_dim", "emb_dim"}
_SPATIAL = {"h", "w", "height", "width", "hh", "ww", "h_in", "w_in", "d_in"}
_INTEGER_WORDS = re.compile(r"\b(?:long|int64|integer|indices|index|labels?)\b", re.IGNORECASE)
_OTHER = 4  # a size the docstring names but nothing fixes: number of queries, points, keypoints


@dataclass(frozen=True)
class Documented:
    """One argument's documented input: its shape symbols, whether a list of such tensors, and
    whether integer-valued."""

    dims: tuple[str, ...]
    is_list: bool = False
    integer: bool = False

    @property
    def kind(self) -> str:
        """The input kind :func:`nnrag.validator.inputs.make_tensor` makes for it."""
        return "long:2" if self.integer else "float"


def _entries(doc: str, names: set[str]) -> dict[str, tuple[str, str]]:
    """Per argument in ``names``: (its type text, its description), from a Google or numpy docstring."""
    out: dict[str, tuple[str, str]] = {}
    current: str | None = None
    indent = 0
    for line in doc.splitlines():
        m = _ENTRY.match(line)
        if m and m.group(2) in names and (current is None or len(m.group(1)) <= indent):
            current, indent = m.group(2), len(m.group(1))
            out[current] = (m.group(3) or "", m.group(4))
            continue
        if current is not None:
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                current = None  # the next entry or section
            else:
                kind, text = out[current]
                out[current] = (kind, f"{text} {line.strip()}")
    return out


def dims_of(tokens: list[str], least: int = 1) -> tuple[str, ...] | None:
    """The symbols of a written shape (``['B', '1', 'H', 'W']``, ``(*, 3, H, W)``), or None for an
    expression (``N + 1``) or prose in brackets."""
    tokens = [t.strip(" '\"") for t in tokens]
    if not least <= len(tokens) <= 6 or not all(t.isdigit() or t.isidentifier() or t[:1] == "*" or t == "..."
                                                 for t in tokens):
        return None
    return tuple(tokens)


def documented_inputs(module: nn.Module) -> dict[str, Documented]:
    """The arguments of ``module.forward`` whose shape its docstring states (or the class's)."""
    return _documented(type(module))


@functools.lru_cache(maxsize=64)  # read once per class, not once per tried input
def _documented(cls: type) -> dict[str, Documented]:
    forward = cls.forward
    try:
        names = set(inspect.signature(forward).parameters) - {"self"}
    except (TypeError, ValueError):
        return {}
    out: dict[str, Documented] = {}
    alike: dict[str, str] = {}  # an argument documented as shaped like another
    for doc in (inspect.getdoc(forward), inspect.getdoc(cls)):
        for name, (kind, text) in _entries(doc or "", names).items():
            dims = _written_shape(kind, text)
            if dims is None or name in out:
                if (same := _SAME.search(text)) and same.group(1) in names - {name}:
                    alike.setdefault(name, same.group(1))
                continue
            listed = kind.lower().startswith(("list", "tuple", "sequence")) or text.lower().startswith("list of")
            out[name] = Documented(dims, listed, bool(_INTEGER_WORDS.search(f"{kind} {text[:80]}")))
    for name, other in alike.items():
        if name not in out and other in out:
            out[name] = out[other]
    return out


def _written_shape(kind: str, text: str) -> tuple[str, ...] | None:
    """The shape an argument's entry writes, bracketed or bare, or None."""
    if m := _SHAPE.search(text) or _TYPED.search(kind) or _TYPED.search(text[:40]):
        return dims_of(_DIM_SEPARATOR.split(m.group(1)))
    if m := _BARE.search(text):
        written = m.group(1)
        return dims_of(_DIM_SEPARATOR.split(written) if " " in written else written.split("x"), least=2)
    return None


def _size(symbol: str, bound: dict[str, int], channels: int, spatial: int, dims: tuple[str, ...]) -> int:
    if symbol.isdigit():
        return int(symbol)
    key = symbol.lower()
    if key not in bound:
        if key in _BATCH or key[:1] == "*" or key == "...":
            bound[key] = 2
        elif key == "d" and "c" in {d.lower() for d in dims}:  # (B, C, D, H, W): D is a depth
            bound[key] = 8
        elif key in _SPATIAL:  # before the widths: ``width`` is a side here
            bound[key] = spatial
        elif key in _CHANNELS:
            bound[key] = channels
        elif key == "n":  # a batch in (N, C, H, W), a count of items elsewhere
            bound[key] = 2 if len(dims) == 4 else _OTHER
        else:
            bound[key] = _OTHER
    return bound[key]


def shape_of(doc: Documented, bound: dict[str, int], channels: int, spatial: int) -> tuple[int, ...]:
    """The concrete shape a documented input stands for, binding its new symbols in ``bound``."""
    return tuple(_size(s, bound, channels, spatial, doc.dims) for s in doc.dims)


def bind(doc: Documented, shape: tuple[int, ...]) -> dict[str, int]:
    """The symbols of ``doc`` that a tensor of ``shape`` (the main input) fixes."""
    if len(doc.dims) != len(shape):
        return {}
    return {s.lower(): n for s, n in zip(doc.dims, shape) if not s.isdigit() and s[:1] != "*" and s != "..."}
