"""Compiled code a source ships beside its Python: extension modules (``mmcv/_ext.so``), which a
standalone file cannot hold, and Python modules that load a compiled library by its path
(torchvision's ``extension`` loading ``_C_stable.so`` from its own folder), which a copy away from
that folder cannot load."""

from __future__ import annotations

import functools
import importlib.machinery
import re
from pathlib import Path

_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES) + (".so", ".pyd")
# ``torch.ops.load_library(path)``, ``ctypes.CDLL(path)``, a finder of extension files
_LOADS_BY_PATH = re.compile(r"\b(?:load_library|CDLL|ExtensionFileLoader)\b")


def is_extension(folder: Path, name: str) -> bool:
    """Whether ``folder`` holds a compiled extension module ``name`` (``_ext.cpython-311-...so``)."""
    return any(p.name.endswith(_SUFFIXES) for p in folder.glob(f"{name}.*"))


_COMPILED_SOURCES = (".c", ".cc", ".cpp", ".cxx", ".cu")


@functools.lru_cache(maxsize=256)  # asked once per missing module of a folder, by every block
def ships_extension_sources(folder: Path) -> bool:
    """Whether ``folder`` (or one below: ``src/``, ``csrc/``) holds C, C++ or CUDA sources, which its
    ``setup.py`` compiles into the extension modules its Python imports (BasicSR's
    ``from . import deform_conv_ext``); a checkout that was never built has only these."""
    return any(p.suffix in _COMPILED_SOURCES for p in folder.rglob("*.c*"))


def loads_library_by_path(text: str, folder: Path) -> bool:
    """Whether a module's ``text`` loads a compiled library by path and its ``folder`` (or one
    below) ships one: the library it loads is there, and a copy elsewhere would find none."""
    return bool(_LOADS_BY_PATH.search(text)) and any(p.name.endswith(_SUFFIXES) for p in folder.rglob("*.*"))
