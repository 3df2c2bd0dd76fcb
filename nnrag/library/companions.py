"""Companions: blocks of the same source that a failing block takes as an argument.

A wrapper reads attributes off the model it is given (``net.attn_layers``, ``encoder.pos_embedding``),
a network reads a class attribute off the block type it is given (``block.expansion``); a guessed
number has neither, and the first check fails with ``'int' object has no attribute 'attn_layers'``.
The classes of the source that define that attribute are found here, from the index alone (their
``__init__`` assigns ``self.<attribute>``, or their body binds it); the block is extracted again
with them, and those that passed the gate are rebuilt in the sandbox from their recorded
construction (see ``nnrag.validator.repairs``).
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from ..db import file_text

# the attribute a guessed value lacks; a value of the block's own classes is never a guess
_WANTED = re.compile(r"'(?:int|float|bool|str|NoneType|ellipsis|Passthrough|list|tuple|dict)' object has no attribute '(\w+)'")
_PER_BLOCK = 3  # classes added to a file: each can cost a construction in the probe


@dataclass(frozen=True)
class Companion:
    module: str
    qualname: str  # inside the module
    recipe: dict[str, Any] | None  # how the gate built it when it passed, with its class


def wanted_attribute(message: str | None) -> str | None:
    """The attribute a failure says a guessed argument lacks."""
    m = _WANTED.search(message or "")
    return m.group(1) if m and not m.group(1).startswith("__") else None


def _defined(node: ast.ClassDef) -> set[str]:
    """Attributes a class binds in its body or assigns as ``self.<name>`` in ``__init__``."""
    names: set[str] = set()
    for statement in node.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(statement, ast.FunctionDef) and statement.name == "__init__":
            names.update(n.attr for n in ast.walk(statement) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                         and isinstance(n.value, ast.Name) and n.value.id == "self")
    return names


def _read_off_arguments(node: ast.ClassDef) -> set[str]:
    """Attributes the class reads off its constructor's arguments (``net.max_seq_len``, or
    ``self.net.max_seq_len`` after ``self.net = net``): what a companion should have."""
    init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is None:
        return set()
    arguments = {a.arg for a in (*init.args.args[1:], *init.args.kwonlyargs)}
    held = set(arguments)
    for n in ast.walk(init):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in arguments:
            held.update(t.attr for t in n.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self")
    reads = set()
    for n in ast.walk(node):
        if not isinstance(n, ast.Attribute):
            continue
        v = n.value
        if (isinstance(v, ast.Name) and v.id in arguments or isinstance(v, ast.Attribute) and v.attr in held
                and isinstance(v.value, ast.Name) and v.value.id == "self"):
            reads.add(n.attr)
    return reads


class Finder:
    """Finds companions in one database; parsed files are kept for the next block."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._trees: dict[str, ast.Module | None] = {}

    def _tree(self, sha1: str) -> ast.Module | None:
        if sha1 not in self._trees:
            try:
                self._trees[sha1] = ast.parse(file_text(self.conn, sha1))
            except (SyntaxError, ValueError):
                self._trees[sha1] = None
        return self._trees[sha1]

    def _class(self, sha1: str | None, line: int) -> ast.ClassDef | None:
        tree = self._tree(sha1) if sha1 else None
        return next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.lineno == line), None) if tree else None

    def find(self, source: str, qualname: str, attribute: str) -> list[Companion]:
        """Blocks of ``source`` other than ``qualname`` that define ``attribute``: those defining
        most of what the block reads off its arguments first, then those the gate built (their
        recorded construction makes a real instance), then the smallest."""
        rows = self.conn.execute(
            "SELECT b.qualname, b.line, b.end_line, f.module, f.sha1, l.status, l.record FROM blocks b"
            " JOIN sources s ON s.id = b.source_id JOIN files f ON f.id = b.file_id"
            " LEFT JOIN library l ON l.source = s.name AND l.qualname = b.qualname"
            " WHERE s.name=? AND f.module IS NOT NULL", (source,)).fetchall()
        own = next((self._class(r["sha1"], r["line"]) for r in rows if r["qualname"] == qualname), None)
        wanted = _read_off_arguments(own) if own is not None else set()
        found = []
        for row in rows:
            node = self._class(row["sha1"], row["line"]) if row["qualname"] != qualname else None
            defined = _defined(node) if node is not None else set()
            if attribute not in defined:
                continue
            module = row["module"]
            inner = row["qualname"][len(module) + 1:]
            recipe = json.loads(row["record"] or "{}").get("recipe") if row["status"] == "validated" else None
            init = {**recipe["init"], "cls": [module, inner]} if recipe and recipe.get("init") else None
            found.append((-len(defined & wanted), init is None, row["end_line"] - row["line"], row["qualname"],
                          Companion(module, inner, init)))
        found.sort(key=lambda f: f[:4])
        return [f[4] for f in found[:_PER_BLOCK]]
