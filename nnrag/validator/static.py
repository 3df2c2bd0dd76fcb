"""Stages parse and compile: what the gate checks before any code runs."""

from __future__ import annotations

import ast
from types import CodeType

from . import record as R
from .record import ValidationRecord


MAX_SOURCE_CHARS = 8_000_000  # the largest standalone file of the ecosystem corpus is 1.2 MB


def static_check(code: str, filename: str = "<candidate>") -> ValidationRecord | None:
    """Stages parse and compile; None when both pass."""
    compiled = compile_candidate(code, filename)
    return compiled if isinstance(compiled, ValidationRecord) else None


def compile_candidate(code: str, filename: str, shown: str | None = None) -> CodeType | ValidationRecord:
    """The module's code object, or the failing stage's record (messages name the file as ``shown``).

    One ``compile`` of the source does both stages; only a failure parses again, to tell a file
    that does not parse from one the compiler rejects (``return`` outside a function, say). This
    halves the cost of a separate ``ast.parse`` for the files that pass, and the caller can run the
    code object instead of compiling the file a second time. Compiling runs outside the sandbox
    (here and in the worker, before its fork), so a file past ``MAX_SOURCE_CHARS`` is refused
    unread: a 50 MB file takes 2 GB to compile."""
    if len(code) > MAX_SOURCE_CHARS:
        return ValidationRecord(False, "parse", R.TOO_LARGE,
                                f"{shown or filename} has {len(code):,} characters; the gate compiles files up to "
                                f"{MAX_SOURCE_CHARS:,}")
    try:
        # dont_inherit: this module's own __future__ flags must not change the candidate's meaning
        return compile(code, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        error: BaseException = e
    shown = shown or filename
    try:
        ast.parse(code, filename=shown)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        line = getattr(e, "lineno", None)
        where = f" (line {line})" if line and f"line {line}" not in str(e) else ""
        return ValidationRecord(False, "parse", R.SYNTAX_ERROR, f"{e.__class__.__name__}: {e}{where}")
    if isinstance(error, SyntaxError) and shown != filename:
        error.filename = shown
    return ValidationRecord(False, "compile", R.COMPILE_ERROR, f"{error.__class__.__name__}: {error}")
