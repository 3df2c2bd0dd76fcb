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

from pathlib import PurePosixPath

from .parse import KIND_CLASS
from .resolve import ModuleInfo


def _classes(module: ModuleInfo) -> set[str]:
    return {q for q, d in module.defs.items() if d.kind == KIND_CLASS and "." not in q}


def _template_of(generated: ModuleInfo, paths: dict[tuple[int, str], list[ModuleInfo]]) -> ModuleInfo | None:
    """The module of the generated file's source that its header names (a path often from the
    repository root: ``src/transformers/...``): the one whose path ends the named path, or is ended
    by it, over the most components, at least the file and its folder."""
    want = PurePosixPath(generated.generated_from or "").parts
    if not want:
        return None
    best: tuple[int, ModuleInfo | None] = (1, None)
    for candidate in paths.get((generated.source_id, want[-1]), []):
        have = PurePosixPath(candidate.path).parts
        common = 0
        while common < min(len(want), len(have)) and want[-1 - common] == have[-1 - common]:
            common += 1
        if common > best[0] and candidate is not generated:
            best = (common, candidate)
    return best[1]


def template_copies(modules: list[ModuleInfo]) -> dict[int, set[str]]:
    """File id of a template -> the names of its top-level classes that a file generated from it
    defines too (those are not blocks). The parser records what each header names."""
    paths: dict[tuple[int, str], list[ModuleInfo]] = {}
    for m in modules:
        paths.setdefault((m.source_id, PurePosixPath(m.path).name), []).append(m)
    copies: dict[int, set[str]] = {}
    for generated in (m for m in modules if m.generated_from):
        template = _template_of(generated, paths)
        if template is not None:
            copies.setdefault(template.file_id, set()).update(_classes(template) & _classes(generated))
    return copies
