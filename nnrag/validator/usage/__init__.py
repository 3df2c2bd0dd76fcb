"""Recorded usage: a source's own model factories run in the sandbox record how they build and
call its blocks; blocks that fail on guessed arguments are checked again with those recipes."""

from __future__ import annotations

import ast
import functools

PASSED_SUFFIX = ".<passed>"  # a harvest unit named "Class.<passed>" runs a block that passed, as the gate ran it


@functools.lru_cache(maxsize=2)
def module_tree(text: str) -> ast.Module | None:
    """A module's source parsed once for the planners that each read it (factories, documented
    examples, registry tables); None when it does not parse. Callers must not change the tree."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
