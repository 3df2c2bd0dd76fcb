"""Third-party requirements of a file: the distributions behind its imports, in PEP 508 form."""

from __future__ import annotations

import ast
import importlib.metadata as md
import importlib.util
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable


@dataclass(frozen=True, order=True)
class Requirement:
    distribution: str
    version: str | None  # installed version; None when the distribution is not installed here
    modules: tuple[str, ...]  # top-level modules imported from it

    @property
    def pep508(self) -> str:
        return f"{self.distribution}=={self.version}" if self.version else self.distribution


@lru_cache(maxsize=1)
def _packages() -> dict[str, list[str]]:
    return md.packages_distributions()


def imported_modules(tree: ast.AST) -> set[str]:
    """Top-level module names of every absolute import in ``tree``, at any depth."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    out.discard("__future__")
    return out


def installed(top: str) -> bool:
    """Whether a top-level module is importable here, found without importing it. A bare folder
    of that name on ``sys.path`` (a namespace package: the current directory holding ``mmcv/``) is
    no installed distribution."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def distributed(top: str) -> bool:
    """Whether a top-level module comes from an installed distribution (not the standard library,
    not a folder that happens to be on ``sys.path``), found without importing it."""
    return not is_stdlib(top) and bool(_packages().get(top)) and installed(top)


def is_stdlib(module: str) -> bool:
    return module in sys.stdlib_module_names or module in sys.builtin_module_names


@lru_cache(maxsize=8192)
def modules_in(text: str) -> frozenset[str]:
    """:func:`imported_modules` of source text. Cached: the same helper definitions recur in many
    blocks, and most statements import nothing (no parse needed)."""
    if "import" not in text:
        return frozenset()
    try:
        return frozenset(imported_modules(ast.parse(text)))
    except (SyntaxError, ValueError):  # the gate's parse stage reports it, with its line
        return frozenset()


def requirements_of(modules: Iterable[str]) -> list[Requirement]:
    """The third-party distributions behind imported top-level ``modules``, with installed versions."""
    by_dist: dict[str, set[str]] = {}
    for module in set(modules):
        if is_stdlib(module):
            continue
        dists = sorted(set(_packages().get(module, [])))
        by_dist.setdefault(dists[0] if dists else module, set()).add(module)
    out = []
    for dist, modules in by_dist.items():
        out.append(Requirement(dist, _installed_version(dist), tuple(sorted(modules))))
    return sorted(out)


@lru_cache(maxsize=4096)  # read from each distribution's METADATA: once per process, not per block
def _installed_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None
