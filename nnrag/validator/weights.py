"""Weights a block fetches while it is built are not part of its architecture.

Blocks that load pretrained weights whatever their arguments (a descriptor that builds its
network and then loads ``torch.hub.load_state_dict_from_url(url)``, a perceptual loss on a
pretrained backbone) would stop at the sandbox's closed network. The gate checks the architecture,
as it does with ``pretrained=False`` where a switch exists: a download of a state dict is answered
with no weights, without any request, the load that follows keeps the random initialisation, and
the record lists what was asked for. Runs inside the sandbox child, before the candidate is imported.
"""

from __future__ import annotations

import sys
from typing import Any

import torch.hub
from torch import nn

_refused: list[str] = []


class NoWeights(dict):  # type: ignore[type-arg]
    """An empty state dict standing for one that was not fetched; any key of it reads as another
    (``checkpoint["state_dict"]``, ``checkpoint.get("model")``)."""

    def __getitem__(self, key: Any) -> "NoWeights":
        return NoWeights()

    def get(self, key: Any, default: Any = None) -> "NoWeights":
        return NoWeights()


def _not_fetched(url: str, *args: Any, **kwargs: Any) -> NoWeights:
    _refused.append(str(url))
    return NoWeights()


def install() -> None:
    """Answer downloads of state dicts with :class:`NoWeights`, also where a module bound the
    download function before (``from torch.hub import load_state_dict_from_url``), and let a load
    of no weights after such a download keep the module as it is. What an earlier check in this
    process asked for is forgotten."""
    _refused.clear()
    fetch = torch.hub.load_state_dict_from_url
    if fetch is _not_fetched:
        return
    for module in list(sys.modules.values()):
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is fetch:
                setattr(module, name, _not_fetched)
    load = nn.Module.load_state_dict

    def load_state_dict(self: nn.Module, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        if _refused and not len(state_dict):  # what a refused download left (keys renamed or filtered: still none)
            strict = False
        return load(self, state_dict, strict=strict, assign=assign)

    nn.Module.load_state_dict = load_state_dict  # type: ignore[method-assign,assignment]


def refused() -> list[str]:
    """The addresses of the state dicts asked for and not fetched, in order, without repeats."""
    return list(dict.fromkeys(_refused))
