"""Template files: sources that other files of the library are generated from.

A library may write some modules from templates and ship both: transformers generates
``models/qwen3/modeling_qwen3.py`` from ``models/qwen3/modular_qwen3.py``, and the generated file
says so in its header ("This file was automatically generated from src/transformers/models/
qwen3/modular_qwen3.py"). A template's class usually inherits another model's ``__init__``
(``Qwen3ForCausalLM(Qwen2ForCausalLM)``): it is the same block as the generated class of its
name, written so that a generator can expand it, and not what a user imports. Discovery leaves
those classes out; a class only the template defines stays a block.
"""

from __future__ import annotations

import re
import sqlite3
import zlib
from pathlib import PurePosixPath

from .parse import KIND_CLASS
from .resolve import ModuleInfo

_HEADER_BYTES = 4096  # the notice sits in the first comment lines
_GENERATED_FROM = re.compile(rb"automatically generated from\s+[`'\"]?([\w./\\-]+\.py)", re.IGNORECASE)


def _head(data: bytes) -> bytes:
    """The first bytes of a stored (compressed) file, without decompressing the rest."""
    try:
        return zlib.decompressobj().decompress(data, _HEADER_BYTES)
    except zlib.error:
        return b""


def _classes(module: ModuleInfo) -> set[str]:
    return {q for q, d in module.defs.items() if d.kind == KIND_CLASS and "." not in q}


def _template_of(named: str, generated: ModuleInfo, paths: dict[tuple[int, str], list[ModuleInfo]]) -> ModuleInfo | None:
    """The module of the generated file's source that ``named`` (a path as its header spells it,
    often from the repository root: ``src/transformers/...``) is: the one whose path ends the named
    path, or is ended by it, over the most components, at least the file and its folder."""
    want = PurePosixPath(named.replace("\\", "/")).parts
    best: tuple[int, ModuleInfo | None] = (1, None)
    for candidate in paths.get((generated.source_id, want[-1]), []):
        have = PurePosixPath(candidate.path).parts
        common = 0
        while common < min(len(want), len(have)) and want[-1 - common] == have[-1 - common]:
            common += 1
        if common > best[0] and candidate is not generated:
            best = (common, candidate)
    return best[1]


def template_copies(conn: sqlite3.Connection, modules: list[ModuleInfo]) -> dict[int, set[str]]:
    """File id of a template -> the names of its top-level classes that a file generated from it
    defines too (those are not blocks)."""
    by_id = {m.file_id: m for m in modules}
    paths: dict[tuple[int, str], list[ModuleInfo]] = {}
    for m in modules:
        paths.setdefault((m.source_id, PurePosixPath(m.path).name), []).append(m)
    copies: dict[int, set[str]] = {}
    rows = conn.execute("SELECT f.id, b.data FROM files f JOIN blobs b ON b.sha1 = f.sha1 WHERE f.status='ok'")
    for file_id, data in rows:
        generated = by_id.get(file_id)
        found = _GENERATED_FROM.search(_head(data)) if generated is not None else None
        if found is None or generated is None:
            continue
        template = _template_of(found.group(1).decode("ascii", "replace"), generated, paths)
        if template is not None:
            copies.setdefault(template.file_id, set()).update(_classes(template) & _classes(generated))
    return copies
