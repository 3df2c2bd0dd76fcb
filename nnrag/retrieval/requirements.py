"""Third-party requirements of a file: the distributions behind its imports, in PEP 508 form."""

from __future__ import annotations

import ast
import importlib.metadata as md
import sys
from dataclasses import dataclass
from functools import lru_cache


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


def is_stdlib(module: str) -> bool:
    return module in sys.stdlib_module_names or module in sys.builtin_module_names


def requirements_of(tree: ast.AST) -> list[Requirement]:
    """The third-party distributions ``tree`` imports, with installed versions."""
    by_dist: dict[str, set[str]] = {}
    for module in imported_modules(tree):
        if is_stdlib(module):
            continue
        dists = sorted(set(_packages().get(module, [])))
        by_dist.setdefault(dists[0] if dists else module, set()).add(module)
    out = []
    for dist, modules in by_dist.items():
        try:
            version: str | None = md.version(dist)
        except md.PackageNotFoundError:
            version = None
        out.append(Requirement(dist, version, tuple(sorted(modules))))
    return sorted(out)
