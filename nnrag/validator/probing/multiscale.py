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
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from .arguments import held_int

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


@dataclass(frozen=True)
class _Layout:
    """Levels flattened into one sequence, and the queries that attend to them: what every
    argument of one call is made from."""

    batch: int
    levels: int
    width: int
    decoder: bool  # queries of their own (``tgt``, ``query``), else the tokens attend to each other

    @property
    def shapes(self) -> torch.Tensor:  # 16, 8, 4, 2 pixels a side for four levels
        return torch.tensor([[2 ** (self.levels - i)] * 2 for i in range(self.levels)], dtype=torch.long)

    @property
    def length(self) -> int:
        return int(self.shapes.prod(1).sum())

    @property
    def queries(self) -> int:
        return _QUERIES if self.decoder else self.length

    def tokens(self, length: int, sequence_first: bool) -> torch.Tensor:
        return torch.randn(length, self.batch, self.width) if sequence_first else torch.randn(self.batch, length, self.width)


def takes_levels(params: list[inspect.Parameter]) -> bool:
    """Whether ``forward`` takes the sides of flattened levels (``spatial_shapes``)."""
    return any(_SHAPES.search(p.name.lower()) for p in params)


def multiscale_calls(module: nn.Module, params: list[inspect.Parameter], batch: int) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    """Calls whose every argument the family names agrees with the others: batch first, then
    with sequences first (``(length, batch, width)``, as torch's attention and older layers take
    them) and the reference points batch first or queries first; points per level, then boxes,
    then one per query. Six calls: as many as an input gets."""
    levels = held_int(module, _LEVELS) or 4
    width = held_int(module, _WIDTHS) or next((m.in_features for m in module.modules() if isinstance(m, nn.Linear)), 16)
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    layout = _Layout(batch, levels, width, decoder=any(_QUERY_SIDE.search(p.name.lower()) for p in named))
    per_level, boxes, centres = (levels, 2), (4,), (2,)
    # (sequences first, points queries first, points): the family's conventions, commonest first
    for sequence_first, points_first, points in ((False, False, per_level), (True, False, per_level), (True, True, per_level),
                                                 (False, False, boxes), (True, True, boxes), (False, False, centres)):
        values: dict[str, Any] = {}
        for p in named:
            n = p.name.lower()
            value = _value(n, layout, points, sequence_first, points_first)
            if value is None and p.default is p.empty:
                value = layout.tokens(layout.queries if _QUERY_SIDE.search(n) else layout.length, sequence_first)
            if value is not None:
                values[p.name] = value
        yield _as_call(params, values)


def _as_call(params: list[inspect.Parameter], values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
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


def _value(n: str, layout: _Layout, points: tuple[int, ...], sequence_first: bool, points_first: bool) -> Any:
    """The value the family's argument ``n`` takes, or None where its name is not one of theirs."""
    if _SHAPES.search(n):
        return layout.shapes
    if _STARTS.search(n):
        areas = layout.shapes.prod(1)
        return torch.cat([areas.new_zeros(1), areas.cumsum(0)[:-1]])
    if _RATIOS.search(n):
        return torch.ones(layout.batch, layout.levels, 2)
    if _POINTS.search(n):
        drawn = torch.rand(layout.batch, layout.queries, *points) * 0.5 + 0.25
        return drawn.transpose(0, 1).contiguous() if points_first else drawn
    if _PADDING.search(n):
        return torch.zeros(layout.batch, layout.queries if n.startswith(("tgt", "query")) else layout.length, dtype=torch.bool)
    if _QUERY_SIDE.search(n):
        return layout.tokens(layout.queries, sequence_first)
    if _MEMORY.search(n):
        return layout.tokens(layout.length, sequence_first)
    return None
