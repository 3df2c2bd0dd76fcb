"""New inputs read off a failed forward's error: torch's shape errors say what they expected ("to
have 64 channels", "normalized_shape=[96]", "expected 4D input"), and so do a block's own checks
("Expected shape: ['B', '1', 'H', 'W']"); retrying with that shape finds the input in one step
instead of a search.

Runs inside the sandbox, with torch already imported by the warm worker.
"""

from __future__ import annotations

import math
import re

from .arguments import Sizes
from .asserts import asserted_shapes
from .documented import Documented, dims_of, shape_of
from .inputs import FIELDS, GRAPH_NODES, KEYS

# torch's own words for an input its layers shrink to nothing (a kernel longer than the signal, a
# pooling or a window that leaves no output), and a library's for the same: the input, or the
# lengths the block was built for (``repairs``), longer
TOO_SHORT = re.compile(r"can't be greater than actual input size|Output size is too small|negative dimension"
                       # a norm layer over a map pooled to one element (a UNet of eight downsamplings)
                       r"|Expected more than 1 spatial element|Expected more than 1 value per channel"
                       r"|sizes should be greater than 0"
                       r"|expected 0 < \w+ < \d+|(?:requires|needs) at least \d+|shorter than"
                       # fewer points than a fixed count of neighbours or samples: ``topk`` of more than
                       # there are, a ball query's ``group_idx[mask]`` over its samples per centroid
                       r"|selected index k out of range|shape of the mask \[[\d, ]+\] at index \d+ does not match", re.I)


# a 2-D layer's sizes in a message of an input too small: a frame's height and width
_PLANE = re.compile(r"\(H: \d+, W: \d+\)|per channel: \(\d+ x \d+\)|Given input size: \(\d+x\d+x\d+\)")
# the length a signal's last axis needs: a reflection pad of n_fft // 2 ("padding (512, 512) at
# dimension 2 of input [1, 2, 16]"), an STFT's window ("expected 0 < n_fft < 16, but got n_fft=1024")
_NEEDS_LENGTH = re.compile(r"padding \((\d+), (\d+)\) at dimension \d+ of input|but got n_fft=(\d+)")
_CHANNELS_WANTED = re.compile(r"to have (\d+) channels|\b(?:have|has|with|expects?|supports?) (\d+) channels?\b(?! instead)"
                              r"|channel\w*(?: dimensions?)? ?(>) ?1\b")
_CHANNELS_GOT = re.compile(r"but got (\d+) channels")
_LAYER_INPUT = re.compile(r"expected input\[([\d, ]+)\]")
_NORMALIZED = re.compile(r"normalized_shape=\[([\d, ]+)\]")
_GOT_SIZE = re.compile(r"but got input of size ?\[[\d, ]*?(\d+)\]")  # its last axis
_MATMUL = re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_UNPACK = re.compile(r"(?:too many|not enough) values to unpack \(expected (\d)")
_RANK = re.compile(r"Expected (\d)D \(unbatched\) or (\d)D \(batched\) input")
_CDIST = re.compile(r"X1 and X2 must have the same number of columns\. X1: (\d+) X2: (\d+)")  # torch.cdist
_EMBED = re.compile(r"expecting embedding dimension of (\d+)")  # torch's multi-head attention
_ONE_SAMPLE = re.compile(r"\b(?:1|one) batch size|batch size (?:of |must be |should be )?(?:1|one)\b", re.IGNORECASE)
# torch's words for an operation on vectors only (``x.ger(freqs)``, ``torch.outer``, ``torch.dot``): a
# vector per sample, as noise levels and timesteps are
_VECTOR = re.compile(r"Expected 1-D argument|1D tensors expected")
_PARTS_AXIS = re.compile(r"must have a last dimension of size 2")  # real and imaginary parts, for view_as_complex
_NUMPY = re.compile(r"\b(?:numpy|np)\.ndarray\b")  # a forward that takes arrays, not tensors
_GRAPH_ATTRIBUTE = re.compile(r"'Tensor' object has no attribute '(?:x|edge_index|edge_attr|batch|num_nodes|num_graphs)'")
_FIELD = re.compile(r"'(?:Tensor|(?:types\.)?SimpleNamespace)' object has no attribute '([a-z_]\w*)'")
_MODEL_SIDE = re.compile(r"doesn't match model \((\d+)|(?:size|resolution) (?:should|must) be (\d+) ?[x*×] ?\d+")
# Shapes a block's own checks state: "Expected shape: ['B', '1', 'H', 'W']", "a shape of (*, 3, H, W)",
# "we expect BxCxHxW"
_SHAPE_SPECS = (re.compile(r"[Ee]xpected shape: \[([^\]]*)\]"), re.compile(r"shape of \(([^)]*)\)"),
                re.compile(r"shape (?:must be |should be )?[\[(]([A-Za-z\d*]+(?:, ?[A-Za-z\d*]+)+)[\])]"),
                re.compile(r"expect(?:ed|s)? (?:input of shape )?((?:[A-Z*\d]+x){2,}[A-Z*\d]+)\b"))


# ranks a block's own checks state: "Expecting 3-d, 4-d or 5-d pred", "should be 4D, got 2", "a 5D
# tensor", "pred with 3 spatial dimensions"
_STATED_RANK = re.compile(r"\b([2-6])-?[dD]\b(?! ?\()|expected ([2-6]) dims")  # the latter einops's
_SPATIAL_RANK = re.compile(r"\b([1-3]) spatial dim")
_SPATIAL_AXES = re.compile(r"number of spatial dimensions,? ([1-3])\b")


def _stated_ranks(text: str) -> list[int]:
    """Tensor ranks an error message asks for, in the order stated."""
    ranks = [int(r) + 2 for r in _SPATIAL_RANK.findall(text)] + [int(a or b) for a, b in _STATED_RANK.findall(text)]
    return list(dict.fromkeys(ranks))


def _of_rank(rank: int, ch: int, s: int) -> tuple[int, ...]:
    """A batch of ``rank`` axes: channels first, then spatial axes (smaller for volumes)."""
    return (2, ch) + (s if rank < 5 else 8,) * (rank - 2)


def _spec_shape(spec: str, ch: int, s: int) -> tuple[int, ...] | None:
    """A concrete shape for a stated one (``['B', '1', 'H', 'W']``, ``BxNxCxHxW``), its symbols
    sized as a docstring's are (:func:`nnrag.validator.documented.shape_of`)."""
    dims = dims_of([t for t in re.split(r"[,x]", spec) if t.strip(" '\"")], least=2)
    return shape_of(Documented(dims), {}, ch, s) if dims else None


_IMAGE_LIST = re.compile(r"list of (?:\w+ )?tensors", re.IGNORECASE)
_EINSUM_SIZES = re.compile(r"subscript \w has size (\d+) for operand \d+ which does not broadcast with previously seen size (\d+)")
_SIZE_MATCH = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")
_VIEW = re.compile(r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)")


def _resized(shape: tuple[int, ...], old: int, new: int) -> list[tuple[int, ...]]:
    """The shape with one dimension (past the batch) that equals ``old`` set to ``new``, each such
    dimension in turn, then all of them: a size the block's own weights or tables fix (a patch of
    19 pixels, an attention bias over 196 tokens) that the input must match."""
    where = [i for i, d in enumerate(shape) if i > 0 and d == old]
    out = [shape[:i] + (new,) + shape[i + 1:] for i in where]
    if len(where) > 1:
        out.append(tuple(new if i in where else d for i, d in enumerate(shape)))
    return out


def _refolded(shape: tuple[int, ...], old: int, new: int) -> list[tuple[int, ...]]:
    """The shape with a run of equal axes past the batch whose product is ``old`` (the tokens a
    map of 16 x 16 flattens into) set to sides whose product is ``new``: a table over a fixed
    number of tokens (a mixing matrix over 196) that the flattened map must match."""
    out = []
    for span in (2, 3):
        side = round(new ** (1 / span))
        if side ** span != new:
            continue
        for i in range(1, len(shape) - span + 1):
            run = shape[i:i + span]
            if len(set(run)) == 1 and math.prod(run) == old:
                out.append(shape[:i] + (side,) * span + shape[i + span:])
    return out


def _rescaled(shape: tuple[int, ...], wanted: int) -> list[tuple[int, ...]]:
    """``shape`` with ``wanted`` elements, reached by scaling its token axis (3 axes) or its
    spatial axes (4 or 5) to one equal side: what a ``view`` to a fixed resolution
    (``x.view(B, H, W, C)``) or a linear layer over a flattened map needs."""
    first, last = (1, 2) if len(shape) == 3 else (2, len(shape))
    axes = last - first
    scaled = math.prod(shape[first:last])
    if len(shape) not in (3, 4, 5) or not all(shape) or (wanted * scaled) % math.prod(shape):
        return []
    room = wanted * scaled // math.prod(shape)
    side = round(room ** (1 / axes))
    return [shape[:first] + (side,) * axes + shape[last:]] if side > 0 and side ** axes == room else []


def _longer(text: str, kind: str, shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
    """The input longer or larger, where the error says the block's layers consume it to nothing."""
    out: list[tuple[str, tuple[int, ...]]] = []
    if (m := _NEEDS_LENGTH.search(text)) and shape:
        # a reflection pad or an STFT longer than the signal: a signal several frames long
        need = 4 * max(int(g) for g in m.groups() if g)
        length = 1 << (need - 1).bit_length()
        if length > shape[-1]:
            out.append((kind, shape[:-1] + (length,)))
    if TOO_SHORT.search(text):
        # pooled away by a deep stack: the sizes the architecture was designed for
        if len(shape) == 3:  # a signal or a sequence: as long as the 1-D stacks are designed for
            out += [(kind, shape[:2] + (256,)), (kind, shape[:2] + (1024,))]
        elif len(shape) == 4:  # then a power of two: 224 halves to an odd side after five steps
            out += [(kind, shape[:2] + (224, 224)), (kind, shape[:2] + (256, 256))]
        elif len(shape) == 5:
            # the sizes video models take; where a 2-D layer met frames too small (frames first,
            # ``(B, T, C, H, W)``), larger frames first
            clips = [(kind, shape[:2] + (16, 112, 112)), (kind, shape[:2] + (16, 224, 224))]
            frames = [(kind, shape[:3] + (64, 64))]
            out += frames + clips if _PLANE.search(text) else clips + frames
    return out


def input_repairs(error: BaseException, kind: str, shape: tuple[int, ...], sizes: Sizes, c: int) -> list[tuple[str, tuple[int, ...]]]:
    """New input candidates read off a failed forward's error message.

    torch's shape errors say what they expected ("to have 64 channels", "normalized_shape=[96]",
    "expected 4D input"); retrying with that shape finds the input in one step instead of a search.
    """
    text = str(error)
    s, t = sizes.spatial, sizes.tokens
    ch = shape[1] if len(shape) >= 2 else c
    out: list[tuple[str, tuple[int, ...]]] = []
    if not kind.startswith((FIELDS, KEYS)):  # a dict's tensors are not the main input an assert names
        out += [(kind, asked) for asked in asserted_shapes(error, shape, s)]  # ``assert x.size(0) == 1``
    images = _IMAGE_LIST.search(text) is not None
    if images:  # "images is expected to be a list of 3d tensors of shape [C, H, W]"
        out.append(("images", (2, 3, 4 * s, 4 * s)))
    if m := _CHANNELS_WANTED.search(text):
        n = 1 if m.group(3) else int(m.group(1) or m.group(2))
        plain = len(out)
        out.append((kind, (shape[0], n) + shape[2:] if len(shape) >= 3 else (2, n, s, s)))
        got, seen = _CHANNELS_GOT.search(text), _LAYER_INPUT.search(text)
        have = int(got.group(1)) if got else 0
        layer_input = tuple(int(d) for d in seen.group(1).split(",")) if seen else ()
        # more channels than ours, in a batch like ours (an unbatched 3-D input reads as one sample)
        if (len(shape) >= 3 and have > shape[1] and (shape[1] * n) % have == 0
                and len(layer_input) == len(shape) and layer_input[0] == shape[0]):
            # the layer sees the input joined with others (``cat([moving, fixed])``): each one's
            # share of the channels it wants
            out.append((kind, (shape[0], shape[1] * n // have) + shape[2:]))
        if len(shape) >= 3 and shape[1] < have < shape[1] + n and layer_input[:1] == shape[:1]:
            # joined with a fixed number of channels of its own (a point cloud's three coordinates
            # beside its features, ``cat([xyz, points])``): ours, less what the join adds
            out.append((kind, (shape[0], n - (have - shape[1])) + shape[2:]))
        if (len(layer_input) == len(shape) >= 3 and layer_input != shape and sorted(layer_input) == sorted(shape)
                and layer_input[0] == shape[0]):
            # the layer sees our axes in another order (frames and channels of a video swapped,
            # ``x.permute(0, 2, 1, 3, 4)``; a sequence transposed for a 1-D convolution): the axis
            # of ours that became its channels, each one of that size in turn
            permuted = [(kind, shape[:i] + (n,) + shape[i + 1:]) for i in range(2, len(shape)) if shape[i] == layer_input[1]]
            # before ours set at axis 1, unless that axis could be the one it sees
            at = plain if shape[1] != layer_input[1] else len(out)
            out[at:at] = permuted
    if m := _NORMALIZED.search(text):
        ns = tuple(int(x) for x in m.group(1).split(",") if x.strip())
        out += [("float", (2, t) + ns), ("float", (2, s, s) + ns)]
        if len(ns) == 1:
            out.append(("float", (2, ns[0], s, s)))
            # the normalized width made from the channels (patches of ``p`` steps times ``c``
            # channels): the channels scaled as much as the width must be
            got = _GOT_SIZE.search(text)
            width = int(got.group(1)) if got else 0
            if len(shape) >= 3 and width > ns[0] and (shape[1] * ns[0]) % width == 0:  # fewer channels, never more
                out.append((kind, (shape[0], shape[1] * ns[0] // width) + shape[2:]))
    if m := _MATMUL.search(text):
        k = int(m.group(3))
        out += [(kind, shape[:-1] + (k,)), ("float", (2, t, k)), ("float", (2, k)), ("float", (2, k, s, s))]
        side = math.isqrt(k // shape[1]) if len(shape) == 4 and k % shape[1] == 0 else 0
        if side and side * side * shape[1] == k:  # a map flattened into a linear layer: RoI features of 256x7x7
            out.insert(0, (kind, shape[:2] + (side, side)))
        rows, cols = int(m.group(1)), int(m.group(2))
        if len(shape) >= 2 and rows == math.prod(shape[:-1]) and shape[-1] < cols < k and cols % shape[-1]:
            # ours joined with a fixed width of the block's own before the layer (a label's
            # embedding beside the noise, ``cat((self.label_emb(labels), noise), -1)``): ours,
            # less what the join adds, as with channels; a multiple of ours is ours joined with
            # its like (both directions of timm's 2-D RNN), no width of the block's own
            out.insert(0, (kind, shape[:-1] + (k - (cols - shape[-1]),)))
        if rows == shape[0] and cols and k % cols == 0 and k > cols:
            # a whole sample flattened after a stack of downsamplings: the input scaled until the
            # flattened features are as many as the linear layer was built for
            out[:0] = [(kind, r) for r in _rescaled(shape, math.prod(shape) * k // cols)]
    if m := _RANK.search(text):
        out.append(("float", _of_rank(int(m.group(2)), ch, s)))
    elif ranks := _stated_ranks(text):
        out += [("float", _of_rank(r, ch, s)) for r in ranks if r != len(shape)]
    if m := _UNPACK.search(text):
        rank = int(m.group(1))
        last = shape[-1] if shape else c
        ranked = {2: [("float", (2, last))], 3: [("float", (2, t, last)), ("float", (2, t, ch))],
                  4: [("float", (2, ch, s, s)), ("float", (2, last, s, s)), ("float", (2, s, s, last))],
                  5: [("float", (2, ch, 8, 8, 8))]}.get(rank, [])
        # a dict or an object of tensors, whose kind a plain tensor would lose: its last axis unbound
        # into that many (``cx, cy, w, h = outputs["pred_boxes"].unbind(-1)``), before the ranks
        container = kind.startswith((FIELDS, KEYS)) and shape and rank > 1
        out += ([(kind, shape[:-1] + (rank,))] if container else []) + ranked
    if (m := _CDIST.search(text)) and shape and shape[-1] == int(m.group(1)):  # distances to points of another width
        out.append((kind, shape[:-1] + (int(m.group(2)),)))
    if (m := _EMBED.search(text)) and shape:
        n = int(m.group(1))
        out += [(kind, shape[:-1] + (n,)), ("float", (2, t, n))]
    if _ONE_SAMPLE.search(text) and shape and shape[0] != 1:  # "inference only supports 1 batch size"
        out.append((kind, (1,) + shape[1:]))
    for pattern in () if images else _SHAPE_SPECS:  # a list's stated shape is its items'
        if (m := pattern.search(text)) and (stated := _spec_shape(m.group(1), ch, s)):
            boxes = "box" in text.lower() and stated[-1] in (4, 6)
            out.append(("boxes" if boxes else "float", stated))
    if (m := _SPATIAL_AXES.search(text)) and "channels" in text:  # a displacement field: one channel per axis
        out.append(("float", _of_rank(int(m.group(1)) + 2, int(m.group(1)), s)))
    if m := _MODEL_SIDE.search(text):
        side = int(m.group(1) or m.group(2))
        out += [("float", (2, ch, side, side)), ("float", (2, 3, side, side))]
    out += _longer(text, kind, shape)
    if "divisible" in text and len(shape) == 4:
        out += [("float", shape[:2] + (64, 64)), ("float", shape[:2] + (224, 224))]
    if m := _SIZE_MATCH.search(text):
        a, b = int(m.group(1)), int(m.group(2))
        # sizes a border or a stride apart come from the input itself (an unpadded convolution):
        # changing the input moves both
        if abs(a - b) > 2 and 2 * min(a, b) != max(a, b):
            out += [(kind, r) for r in _resized(shape, a, b) + _resized(shape, b, a)][:4]
            out += [(kind, r) for r in _refolded(shape, a, b) + _refolded(shape, b, a)][:2]
    if m := _EINSUM_SIZES.search(text):
        # the input's flattened tokens against a table's seen first; then the input seen first,
        # against a weight's (heads of ``einsum("bhi,hio->bho", x, weights)``)
        a, b = int(m.group(1)), int(m.group(2))
        out += [(kind, r) for r in _resized(shape, a, b) + _refolded(shape, a, b)][:3] + \
            [(kind, r) for r in _resized(shape, b, a)][:2]
    if (m := _VIEW.search(text)) and int(m.group(2)) == math.prod(shape):
        dims = [int(d) for d in m.group(1).split(",")]
        if len(dims) >= 2 and dims[0] == 0 < dims[1] and shape:
            # ``x.view(nt // n_segment, n_segment, ...)``: frames of clips folded into the batch axis,
            # fewer than one clip's: as many samples as the block's clip has frames, per sample
            out.append((kind, (shape[0] * dims[1],) + shape[1:]))
        elif -1 not in dims:
            out += [(kind, r) for r in _rescaled(shape, math.prod(dims))]
        elif (fixed := -math.prod(dims)) > 1 and shape:  # ``x.view(-1, 17)``: the last axis holds the fixed part
            tail = dims[1:]
            ours = shape[len(shape) - len(tail):] if dims[0] == -1 and 1 < len(tail) < len(shape) else ()
            differ = [i for i, (a, b) in enumerate(zip(tail, ours)) if a != b]
            if ours and len(differ) == 1:
                # ``x.view(-1, c, h, w)`` of frames (B, T, C, H, W): our trailing axes, one of them
                # set to what the view fixes
                at = len(shape) - len(tail) + differ[0]
                out.append((kind, shape[:at] + (tail[differ[0]],) + shape[at + 1:]))
            out.append((kind, shape[:-1] + (fixed,)))
    if _GRAPH_ATTRIBUTE.search(text):  # the forward reads a graph batch: node features of the current width
        out.append(("graph", (GRAPH_NODES, shape[-1] if len(shape) == 2 else ch)))
    elif (m := _FIELD.search(text)) and not kind.startswith("graph"):
        # a model output read by field (``x.last_hidden_state``): an object whose fields are inputs
        fields = kind.removeprefix(FIELDS).split(",") if kind.startswith(FIELDS) else []
        if m.group(1) not in fields and len(fields) < 4:
            out.append((FIELDS + ",".join([*fields, m.group(1)]), shape))
    if _VECTOR.search(text) and len(shape) > 1:
        out.append((kind, shape[:1]))
    if _PARTS_AXIS.search(text) and shape and shape[-1] != 2:  # ``torch.view_as_complex``: parts on a last axis
        out.append((kind, shape + (2,)))
    if "uint8" in text and kind != "uint8":  # "image must have dtype torch.uint8"
        out.append(("uint8", shape))
    if _NUMPY.search(text) and kind != "numpy":  # "Input type is not a numpy.ndarray": an image as loaded
        out.append(("numpy", shape))
    if kind == "graph" and ("Long" in text or "indices" in text or "Embedding" in text):
        out.append(("graph:long:2", shape))
    elif not kind.startswith(("long", "graph")) and ("Long" in text or "indices" in text or "Embedding" in text):
        out.append(("long:4", shape[:2] if len(shape) > 2 else shape))
    return out
