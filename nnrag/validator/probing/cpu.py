"""Where no GPU is, code that moves its tensors or layers to one runs on the CPU.

Research code often calls ``x.cuda()`` or ``model.cuda()`` unconditionally (a loss that builds its
targets with ``torch.zeros(n).cuda()``, an example that moves its model). On a machine without a
GPU that call fails before any of the block's own arithmetic runs, though the block computes the
same on the CPU. The gate and the harvest check what a block computes, so there both calls leave
the tensor or layer where it is. Nothing changes on a machine with a GPU.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def _where_it_is(self: Any, *args: Any, **kwargs: Any) -> Any:
    return self


def install() -> None:
    """Make ``Tensor.cuda`` and ``Module.cuda`` keep their object on the CPU, if there is no GPU."""
    if torch.Tensor.cuda is _where_it_is or torch.cuda.is_available():
        return
    torch.Tensor.cuda = nn.Module.cuda = _where_it_is  # type: ignore[method-assign,assignment]
