"""A one-paragraph summary of a block from what is known of it: the docstring's first sentence,
its category, the layers it is built from, and what the probe saw it do to its input's shape."""

from __future__ import annotations

from typing import Any

from .model import ShapeProbe, Submodule

# Container and wrapper types that say nothing about what a block computes.
_PLUMBING = {"Sequential", "ModuleList", "ModuleDict", "Identity", "ParameterList", "ParameterDict"}
_CATEGORY_PHRASE = {
    "loss": "Loss function",
    "attention": "Attention layer",
    "normalization": "Normalization layer",
    "pooling": "Pooling layer",
    "activation": "Activation",
    "graph layer": "Graph neural network layer",
    "transformer block": "Transformer block",
    "convolution": "Convolutional block",
    "architecture": "Network architecture",
    "embedding": "Embedding layer",
    "recurrent": "Recurrent layer",
    "utility": "Module",
}


def _dims(shape: Any) -> list[int] | None:
    if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
        return shape
    return None


def _first(shape: Any) -> Any:
    """The first tensor's shape in a nested output: a shape, a list of shapes, or a dict of them."""
    while True:
        if isinstance(shape, dict):
            shape = next(iter(shape.values()), None)
        elif isinstance(shape, list) and shape and not isinstance(shape[0], int):
            shape = shape[0]
        else:
            return shape


def _scale(before: int, after: int) -> str | None:
    """How one spatial size changed: "halves", "downsamples by 4x", ...; None when it did not."""
    if before == after:
        return None
    if after and before % after == 0:
        k = before // after
        return "halves" if k == 2 else f"downsamples by {k}x"
    if before and after % before == 0:
        k = after // before
        return "doubles" if k == 2 else f"upsamples by {k}x"
    return "changes"


def shape_behaviour(probe: ShapeProbe | None) -> str | None:
    """How the first output's shape relates to the first input's, in words."""
    if probe is None or not probe.inputs:
        return None
    x, y = _dims(probe.inputs[0]), _dims(_first(probe.outputs))
    if x is None or y is None:
        return None
    if y == []:
        return "reduces its input to a scalar"
    if x == y:
        return "keeps the input shape"
    parts: list[str] = []
    if len(x) == len(y) >= 3:
        if x[1] != y[1]:
            parts.append(f"maps {x[1]} to {y[1]} channels" if len(x) >= 4 else f"maps {x[1]} to {y[1]} positions")
        if len(x) >= 4:
            spatial = [_scale(a, b) for a, b in zip(x[2:], y[2:])]
            if all(s is None for s in spatial):
                parts.append("keeps spatial size")
            elif len(set(spatial)) == 1 and spatial[0] and spatial[0] != "changes":
                verb, _, factor = spatial[0].partition(" by ")
                parts.append(f"{verb} spatial size" + (f" by {factor}" if factor else ""))
            else:
                parts.append(f"changes spatial size {x[2:]} to {y[2:]}")
        elif x[-1] != y[-1]:
            parts.append(f"maps width {x[-1]} to {y[-1]}")
    elif len(y) == 2 and len(x) > 2:
        parts.append(f"reduces a {len(x)}-D input to {y[1]} features per sample")
    elif len(y) > len(x):
        parts.append(f"expands a {len(x)}-D input to {len(y)}-D")
    if not parts:
        parts.append(f"maps shape {x} to {y}")
    return ", ".join(parts)


def structure(submodules: list[Submodule], limit: int = 6) -> str | None:
    shown = [s for s in submodules if s.type not in _PLUMBING][:limit]
    if not shown:
        return None
    return ", ".join(f"{s.type} x{s.count}" if s.count > 1 else s.type for s in shown)


def summarize(category: str | None, sentence: str | None, submodules: list[Submodule], probe: ShapeProbe | None,
              ndim: int | None = None) -> str:
    """``sentence`` (the docstring's first sentence) when there is one, then what structure says."""
    phrase = _CATEGORY_PHRASE.get(category or "utility", "Module")
    if ndim in (1, 2, 3) and category in ("convolution", "pooling", "normalization"):
        phrase = f"{ndim}-D {phrase[0].lower()}{phrase[1:]}"
    built = structure(submodules)
    shape = shape_behaviour(probe)
    generated = phrase + (f" built from {built}" if built else "") + (f"; {shape}" if shape else "") + "."
    return f"{sentence} {generated}" if sentence else generated
