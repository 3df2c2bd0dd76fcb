"""Models described in YAML: many research repositories build their models from a YAML file that
names a class and its arguments, instantiated by a helper of their own (``target:
taming.models.vqgan.VQModel`` with ``params: {embed_dim: 256, ddconfig: {...}}``, the convention
of taming-transformers and the latent-diffusion code built on it) or by Hydra (``_target_:
pkg.Model`` beside the arguments, nested objects described the same way). Those files know the
structured arguments (a dict of encoder settings, a list of channel multipliers) no guess finds.

Files are found statically here, a few that together name every class the files name; the
harvest (see harvest.py) loads one, builds the outermost described modules with the recorder on,
and runs each once.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any, Callable

from . import covering_files, files_under

DESCRIBED_UNIT = "<described>"
_TARGET = re.compile(r"^\s*(_target_|target)\s*:\s*['\"]?([A-Za-z_][\w.]*\.[A-Za-z_]\w*)", re.M)
_MAX_FILES = 2000
_MAX_BYTES = 200_000


def described_files(root: Path) -> list[Path]:
    """YAML files of ``root``, in path order; links not followed."""
    return files_under(root, lambda folder, name: name.endswith((".yaml", ".yml")), _MAX_FILES)


def named_targets(text: str) -> set[str]:
    """The classes a YAML text names to build (the last part of each dotted target)."""
    return {m.group(2) for m in _TARGET.finditer(text)}


def choose(root: Path, limit: int) -> list[str]:
    """Up to ``limit`` YAML files (paths relative to ``root``) that together name the most
    targets: each next one names most not yet named, the shorter on a tie."""
    return covering_files(root, described_files(root), named_targets, limit, _MAX_BYTES)


def _resolve(dotted: str) -> Any:
    """The class a dotted target names, ``pkg.module.Class`` or ``pkg.module.Outer.Inner``; an
    import that fails inside the module raises as it is (what it misses is what to install)."""
    module, _, name = dotted.rpartition(".")
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        outer, _, inner = module.rpartition(".")  # not a module: a class holding the class
        return getattr(getattr(importlib.import_module(outer), inner), name)
    return getattr(loaded, name)


def _hydra(node: Any) -> Any:
    """A Hydra description built as Hydra builds it: nested descriptions first."""
    if isinstance(node, dict):
        values = {k: _hydra(v) for k, v in node.items() if k != "_target_" and not str(k).startswith("_")}
        return _resolve(node["_target_"])(**values) if "_target_" in node else values
    if isinstance(node, list):
        return [_hydra(v) for v in node]
    return node


def _outermost(node: Any) -> list[dict[str, Any]]:
    """The descriptions not inside another one, in document order."""
    if isinstance(node, dict):
        if isinstance(node.get("target"), str) or isinstance(node.get("_target_"), str):
            return [node]
        return [d for v in node.values() for d in _outermost(v)]
    if isinstance(node, list):
        return [d for v in node for d in _outermost(v)]
    return []


def run_described(path: str, wrap: Callable[[], None], exercise: Callable[[Any], str | None]) -> str | None:
    """Build the outermost modules the YAML file at ``path`` describes and run each once; the
    first error, or None when each was built and ran. A ``target`` gets its ``params`` as they
    are (the class builds what they describe itself, as the repositories' helpers leave it to);
    a ``_target_`` is built as Hydra builds it."""
    import yaml  # the harvest's environment: a repository that describes models in YAML reads them with it
    from torch import nn

    with open(path, encoding="utf-8") as f:
        document = yaml.safe_load(f)
    first: str | None = None
    built = 0
    for node in _outermost(document):
        hydra = "_target_" in node
        dotted = node["_target_"] if hydra else node["target"]
        try:
            cls = _resolve(dotted)
        except Exception as e:  # noqa: BLE001 - the other descriptions still run
            first = first or f"{dotted}: {type(e).__name__}: {e}"[:300]
            continue
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            continue  # a data module or a trainer: not a block
        wrap()  # its module is loaded: its classes record from here on
        try:
            model = _hydra(node) if hydra else cls(**(node.get("params") or {}))
        except Exception as e:  # noqa: BLE001 - what the class built before it failed is recorded
            first = first or f"{dotted}: {type(e).__name__}: {e}"[:300]
            continue
        built += 1
        first = first or exercise(model)
    return first if built or first else "no module described"
