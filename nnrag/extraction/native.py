"""Compiled code a source ships beside its Python: extension modules (``mmcv/_ext.so``), which a
standalone file cannot hold, and Python modules that load a compiled library by its path
(torchvision's ``extension`` loading ``_C_stable.so`` from its own folder), which a copy away from
that folder cannot load."""

from __future__ import annotations

import ast
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


_EXTENSION_CALL = re.compile(r"Extension$")


@functools.lru_cache(maxsize=32)  # one scan of a source's setup scripts, asked by each of its blocks
def declared_extensions(root: Path) -> dict[str, str]:
    """Top-level extension modules the source's ``setup.py`` files build from C, C++ or CUDA, with the
    script that declares each: the DETR family's ``ops/setup.py`` builds
    ``MultiScaleDeformableAttention`` (``extension("MultiScaleDeformableAttention", sources, ...)``,
    ``extension`` being ``CppExtension`` or ``CUDAExtension``), which its code then imports as a
    module of its own. Read as data: nothing of the scripts runs."""
    found: dict[str, str] = {}
    for script in sorted(root.rglob("setup.py")):
        try:
            text = script.read_text(encoding="utf-8", errors="replace")
            tree = ast.parse(text) if "Extension" in text else None
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        if tree is None:
            continue
        # names bound to an extension class (``extension = CUDAExtension``)
        aliases = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _callee(node.value)
                   and _EXTENSION_CALL.search(_callee(node.value)) for t in node.targets if isinstance(t, ast.Name)}
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            callee = _callee(call.func)
            if not (callee and (_EXTENSION_CALL.search(callee) or callee in aliases)):
                continue
            named = [k.value for k in call.keywords if k.arg == "name"] + call.args[:1]
            for value in named:
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.isidentifier():
                    found.setdefault(value.value, str(script.relative_to(root)))
    return found


def _callee(node: ast.AST) -> str:
    """The name a call's function is written as (``CUDAExtension``, ``cpp_extension.CUDAExtension``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""
