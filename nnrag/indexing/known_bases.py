"""Well-known ``nn.Module`` classes that live outside the indexed corpus.

A class deriving from ``torch.nn.Conv2d`` is a block even when torch is not indexed. The table
for ``torch.nn`` is generated from torch itself (``python -m nnrag.indexing.known_bases``) and
shipped as data, so discovery never imports torch. Entries map a dotted name to whether the class
has a ``forward`` of its own (``nn.ModuleList`` is a Module without one).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

_DATA = Path(__file__).with_name("data") / "torch_nn_bases.json"

# The roots: every block derives from one of these names.
MODULE_ROOTS = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.modules.Module"})

# Widely used bases from other libraries: name -> has a concrete forward.
_OTHER_LIBRARIES: dict[str, bool] = {
    "mmengine.model.BaseModule": False,
    "mmengine.model.base_module.BaseModule": False,
    "mmengine.model.BaseModel": False,
    "mmengine.model.Sequential": True,
    "mmengine.model.ModuleList": False,
    "mmengine.model.ModuleDict": False,
    "mmcv.runner.BaseModule": False,
    "mmcv.runner.base_module.BaseModule": False,
    "mmcv.runner.Sequential": True,
    "mmcv.runner.ModuleList": False,
    "mmcv.cnn.ConvModule": True,
    "mmcv.cnn.bricks.ConvModule": True,
    "torch_geometric.nn.MessagePassing": False,
    "torch_geometric.nn.conv.MessagePassing": False,
    "torch_geometric.nn.conv.message_passing.MessagePassing": False,
    "pytorch_lightning.LightningModule": False,
    "lightning.pytorch.LightningModule": False,
    "lightning.LightningModule": False,
    "transformers.PreTrainedModel": False,
    "transformers.modeling_utils.PreTrainedModel": False,
    "einops.layers.torch.Rearrange": True,
    "einops.layers.torch.Reduce": True,
    "einops.layers.torch.EinMix": True,
    "torch.jit.ScriptModule": False,
}


@lru_cache(maxsize=1)
def _table() -> dict[str, bool]:
    table = dict(json.loads(_DATA.read_text(encoding="utf-8")))
    table.update(_OTHER_LIBRARIES)
    return table


def lookup(dotted: str) -> bool | None:
    """Whether ``dotted`` names a known Module class: None if unknown, else has-forward."""
    table = _table()
    if dotted in table:
        return table[dotted]
    if dotted.startswith("torch.nn."):
        # torch.nn re-exports every public class; private paths vary across versions.
        short = "torch.nn." + dotted.rsplit(".", 1)[-1]
        if short in table:
            return table[short]
    return None


def generate() -> dict[str, bool]:
    """Build the table from the installed torch (development only)."""
    import importlib
    import inspect
    import pkgutil

    import torch.nn as nn

    found: dict[str, bool] = {}

    def visit(modname: str) -> None:
        try:
            module = importlib.import_module(modname)
        except Exception:  # noqa: BLE001 - optional submodules may fail to import
            return
        for attr, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, nn.Module):
                found[f"{modname}.{attr}"] = value.forward is not nn.Module.forward
                found.setdefault(f"{value.__module__}.{value.__qualname__}", value.forward is not nn.Module.forward)

    visit("torch.nn")
    for info in pkgutil.walk_packages(nn.__path__, "torch.nn."):
        visit(info.name)
    return dict(sorted(found.items()))


if __name__ == "__main__":  # pragma: no cover
    _DATA.parent.mkdir(exist_ok=True)
    _DATA.write_text(json.dumps(generate(), indent=0) + "\n", encoding="utf-8")
    print(f"wrote {_DATA}")
