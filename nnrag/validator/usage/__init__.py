"""Recorded usage: a source's own model factories run in the sandbox record how they build and
call its blocks; blocks that fail on guessed arguments are checked again with those recipes."""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path
from typing import Callable, Iterable

PASSED_SUFFIX = ".<passed>"  # a harvest unit named "Class.<passed>" runs a block that passed, as the gate ran it


@functools.lru_cache(maxsize=2)
def module_tree(text: str) -> ast.Module | None:
    """A module's source parsed once for the planners that each read it (factories, documented
    examples, registry tables); None when it does not parse. Callers must not change the tree."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None


def files_under(root: Path, keep: Callable[[Path, str], bool], limit: int) -> list[Path]:
    """The files of ``root``, in path order, that ``keep(folder relative to root, file name)``
    accepts, up to ``limit``; links are not followed, so every file lies inside ``root``."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".git") and not os.path.islink(os.path.join(folder, d)))
        rel = Path(folder).relative_to(root)
        for name in sorted(files):
            path = Path(folder, name)
            if keep(rel, name) and not path.is_symlink():
                found.append(path)
                if len(found) >= limit:
                    return found
    return found


def covering_files(root: Path, files: Iterable[Path], names: Callable[[str], set[str] | None], limit: int,
                   max_bytes: int) -> list[str]:
    """Up to ``limit`` of ``files`` (paths relative to ``root``; larger than ``max_bytes`` left out)
    that together name the most of what ``names`` reads in each: each next one is the one naming
    most not named yet, the shorter on a tie."""
    named: dict[str, set[str]] = {}
    sizes: dict[str, int] = {}
    for path in files:
        try:
            if path.stat().st_size > max_bytes:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if found := names(text):
            rel = path.relative_to(root).as_posix()
            named[rel], sizes[rel] = found, len(text)
    chosen: list[str] = []
    covered: set[str] = set()
    while named and len(chosen) < limit:
        best = max(named, key=lambda rel: (len(named[rel] - covered), -sizes[rel], rel))
        if not named[best] - covered:
            break
        chosen.append(best)
        covered |= named.pop(best)
    return chosen
