"""The inputs of multi-scale deformable attention, made to agree with each other.

Deformable DETR's attention and every encoder, decoder and layer built on it (DINO, Mask DINO,
Grounding DINO, ViT-Adapter, Mask2Former's pixel decoder) take feature maps of several levels
flattened into one sequence, with what says how to cut it back: the levels' sides
(``spatial_shapes``, a ``(levels, 2)`` integer tensor), where each level starts in the sequence
(``level_start_index``), the share of each map that is not padding (``valid_ratios``) and points
in ``[0, 1]`` per query and level (``reference_points``). The layers check that the sequence is
as long as the sides say; random tensors of the probe's sizes never are. The block's own layers
say how many levels and how wide (``n_levels``, ``d_model``); the arguments are told apart by
their names, which the family shares.

Runs inside the sandbox, with torch already imported by the warm worker.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Iterator

import torch
from torch import nn

_SHAPES = re.compile(r"spatial_shapes$")
_STARTS = re.compile(r"level_start_index$")
_RATIOS = re.compile(r"valid_ratios$")
_POINTS = re.compile(r"reference_points$|refpoints")
_PADDING = re.compile(r"padding_mask$|^mask_flatten$")
# the queries' side of a decoder (``tgt``, ``query``, their positions); the rest is the memory
_QUERY_SIDE = re.compile(r"^(?:tgt|query|queries)(?:_|$)|^(?:tgt|query)_?pos")
_MEMORY = re.compile(r"^(?:src|memory|value|key|input_flatten|feat|feats|x)(?:_flatten)?$|^(?:src|memory|key)_?pos$|^pos$"
                     r"|^pos_embed$|^lvl_pos_embed_flatten$")
_LEVELS = ("n_levels", "num_levels", "num_feature_levels", "n_feat_levels", "num_feat_levels")
_WIDTHS = ("d_model", "embed_dims", "embed_dim", "hidden_dim")
_QUERIES = 8


def _first_int(module: nn.Module, names: tuple[str, ...]) -> int | None:
    for m in module.modules():
        for name in names:
            value = getattr(m, name, None)
            if type(value) is int and value > 0:
                return value
    return None


def takes_levels(params: list[inspect.Parameter]) -> bool:
    """Whether ``forward`` takes the sides of flattened levels (``spatial_shapes``)."""
    return any(_SHAPES.search(p.name.lower()) for p in params)


def multiscale_calls(module: nn.Module, params: list[inspect.Parameter], batch: int) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    """Calls whose every argument the family names agrees with the others: batch first, then
    with sequences first (``(length, batch, width)``, as torch's attention and older layers take
    them) and the reference points batch first or queries first; points per level, then boxes,
    then one per query."""
    levels = _first_int(module, _LEVELS) or 4
    width = _first_int(module, _WIDTHS) or next((m.in_features for m in module.modules() if isinstance(m, nn.Linear)), 16)
    sides = [2 ** (levels - i) for i in range(levels)]  # 16, 8, 4, 2 for four levels
    shapes = torch.tensor([[s, s] for s in sides], dtype=torch.long)
    starts = torch.cat([shapes.new_zeros(1), (shapes[:, 0] * shapes[:, 1]).cumsum(0)[:-1]])
    length = int((shapes[:, 0] * shapes[:, 1]).sum())
    names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    decoder = any(_QUERY_SIDE.search(n.lower()) for n in names)
    queries = _QUERIES if decoder else length
    per_level, boxes, centres = (batch, queries, levels, 2), (batch, queries, 4), (batch, queries, 2)
    # (sequences first, points queries first, points): the family's conventions, commonest first
    variants = ((False, False, per_level), (True, False, per_level), (True, True, per_level), (False, False, boxes),
                (True, True, boxes), (False, False, centres), (True, False, boxes))
    for sequence_first, points_first, points in variants:
        values: dict[str, Any] = {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            n = p.name.lower()
            value = _value(n, shapes, starts, points, batch, queries, length, levels, width, sequence_first,
                           points_first)
            if value is None and p.default is p.empty:
                value = _tokens(batch, queries if _QUERY_SIDE.search(n) else length, width, sequence_first)
            if value is not None:
                values[p.name] = value
        yield _placed(params, values)


def _placed(params: list[inspect.Parameter], values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional while every positional parameter before has a value, by keyword after."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    positional = True
    for p in params:
        if p.name not in values:
            positional = positional and p.kind == p.KEYWORD_ONLY
            continue
        if positional and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            args.append(values[p.name])
        else:
            kwargs[p.name] = values[p.name]
    return args, kwargs


def _tokens(batch: int, length: int, width: int, sequence_first: bool) -> torch.Tensor:
    return torch.randn(length, batch, width) if sequence_first else torch.randn(batch, length, width)


def _value(n: str, shapes: torch.Tensor, starts: torch.Tensor, points: tuple[int, ...], batch: int,
           queries: int, length: int, levels: int, width: int, sequence_first: bool, points_first: bool) -> Any:
    """The value the family's argument ``n`` takes, or None where its name is not one of theirs."""
    if _SHAPES.search(n):
        return shapes.clone()
    if _STARTS.search(n):
        return starts.clone()
    if _RATIOS.search(n):
        return torch.ones(batch, levels, 2)
    if _POINTS.search(n):
        drawn = torch.rand(points) * 0.5 + 0.25
        return drawn.transpose(0, 1).contiguous() if points_first else drawn
    if _PADDING.search(n):
        return torch.zeros(batch, queries if n.startswith(("tgt", "query")) else length, dtype=torch.bool)
    if _QUERY_SIDE.search(n):
        return _tokens(batch, queries, width, sequence_first)
    if _MEMORY.search(n):
        return _tokens(batch, length, width, sequence_first)
    return None
