"""Path filters for corpus sources, with gitignore-like semantics.

- A pattern without a slash matches a name at any depth (``tests``, ``test_*.py``).
- A pattern with a slash is anchored at the source root (``timm/layers``, ``torch/nn/**``).
- ``**`` crosses directories, ``*`` and ``?`` do not.
- A pattern that matches a directory matches everything below it, so ``torch/nn`` and
  ``torch/nn/**`` mean the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _pattern_regex(pattern: str) -> str:
    pattern = pattern.strip().replace("\\", "/").rstrip("/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if "/" in pattern.lstrip("/"):
        body = _translate(pattern.lstrip("/"))
        return rf"^{body}(?:/.*)?$"
    return rf"(?:^|.*/){_translate(pattern)}(?:/.*)?$"


@dataclass(frozen=True)
class PathFilter:
    """Keeps a relative POSIX path when it matches an include (or there are none) and no exclude."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @cached_property
    def _include(self) -> re.Pattern[str] | None:
        pats = [p for p in self.include if p.strip()]
        return re.compile("|".join(_pattern_regex(p) for p in pats)) if pats else None

    @cached_property
    def _exclude(self) -> re.Pattern[str] | None:
        pats = [p for p in self.exclude if p.strip()]
        return re.compile("|".join(_pattern_regex(p) for p in pats)) if pats else None

    def excludes_dir(self, relpath: str) -> bool:
        """True when nothing below this directory can be kept (used to prune walks)."""
        if self._exclude is not None and self._exclude.match(relpath):
            return True
        if self._include is None:
            return False
        # Keep walking while the directory is inside an include or could contain one.
        if self._include.match(relpath):
            return False
        return not any(_could_contain(p, relpath) for p in self.include)

    def keeps(self, relpath: str) -> bool:
        if self._exclude is not None and self._exclude.match(relpath):
            return False
        return self._include is None or self._include.match(relpath) is not None


def _could_contain(pattern: str, directory: str) -> bool:
    """Whether files matching ``pattern`` may live below ``directory``."""
    pattern = pattern.strip().replace("\\", "/").strip("/")
    if "/" not in pattern or pattern.startswith("**"):
        return True
    head = pattern.split("**", 1)[0]
    parts = head.rstrip("/").split("/")
    dparts = directory.split("/")
    for p, d in zip(parts, dparts):
        if not re.fullmatch(_translate(p), d):
            return False
    return True


def matches_any(name: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """fnmatch-style match of a symbol name against symbol patterns (empty list matches all)."""
    if not patterns:
        return True
    from fnmatch import fnmatchcase

    return any(fnmatchcase(name, p) for p in patterns)
