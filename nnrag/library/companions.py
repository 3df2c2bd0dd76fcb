"""Companions: blocks of the same source that a failing block takes as an argument.

A wrapper reads attributes off the model it is given (``net.attn_layers``, ``encoder.pos_embedding``),
a network reads a class attribute off the block type it is given (``block.expansion``); a guessed
number has neither, and the first check fails with ``'int' object has no attribute 'attn_layers'``.
The classes of the source that define that attribute are found here, from the index alone (their
``__init__`` assigns ``self.<attribute>``, or their body binds it); the block is extracted again
with them, and those that passed the gate are rebuilt in the sandbox from their recorded
construction (see ``nnrag.validator.probing.companions``).
"""

from __future__ import annotations

import ast
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from ..db import file_text
from ..indexing.attributes import constructor_arguments, defined_by, read_off
from .records import StoredRecord

# the attribute a guessed value lacks; a value of the block's own classes is never a guess
# (or a layer class guessed for a callable: "type object 'ReLU' has no attribute 'cutoff'")
_WANTED = re.compile(r"(?:'(?:int|float|bool|str|NoneType|ellipsis|Passthrough|list|tuple|dict)' object"
                     r"|type object '\w+') has no attribute '(\w+)'")
_PER_BLOCK = 3  # classes added to a file for the attribute a failure names: each can cost a construction in the probe
_MOST = 5  # with those for the other attributes the block reads off its arguments


@dataclass(frozen=True)
class Companion:
    module: str
    qualname: str  # inside the module
    recipe: dict[str, Any] | None  # how the gate built it when it passed, with its class


def wanted_attribute(message: str | None) -> str | None:
    """The attribute a failure says a guessed argument lacks."""
    m = _WANTED.search(message or "")
    return m.group(1) if m and not m.group(1).startswith("__") else None


@dataclass(frozen=True)
class _Class:
    """A block of the source as the finder ranks it."""

    qualname: str
    module: str
    lines: int
    defines: frozenset[str]
    reads: frozenset[str]  # off its constructor's arguments: what a companion should have
    recipe: dict[str, Any] | None  # its recorded construction, with its class, when it passed


class Finder:
    """Finds companions in one database; each source's classes are read once."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._source: tuple[str, dict[str, _Class]] | None = None

    def _classes(self, source: str) -> dict[str, _Class]:
        """The source's blocks by qualname, their files parsed once; one source kept at a time
        (the retry takes blocks source by source)."""
        if self._source is not None and self._source[0] == source:
            return self._source[1]
        rows = self.conn.execute(
            "SELECT b.qualname, b.line, b.end_line, f.module, f.sha1, l.status, l.record FROM blocks b"
            " JOIN sources s ON s.id = b.source_id JOIN files f ON f.id = b.file_id"
            " LEFT JOIN library l ON l.source = s.name AND l.qualname = b.qualname"
            " WHERE s.name=? AND f.module IS NOT NULL AND f.sha1 IS NOT NULL ORDER BY f.sha1", (source,)).fetchall()
        classes: dict[str, _Class] = {}
        sha1, by_line = None, {}
        for row in rows:
            if row["sha1"] != sha1:  # rows come file by file: each parsed once
                sha1 = row["sha1"]
                try:
                    tree = ast.parse(file_text(self.conn, sha1))
                except (SyntaxError, ValueError):
                    tree = ast.Module(body=[], type_ignores=[])
                by_line = {n.lineno: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
            node = by_line.get(row["line"])
            if node is None:
                continue
            module = row["module"]
            gate = StoredRecord.read(row["record"]).gate if row["status"] == "validated" else None
            recipe = gate.recipe if gate is not None else None
            init = {**recipe["init"], "cls": [module, row["qualname"][len(module) + 1:]]} if recipe and recipe.get("init") else None
            classes[row["qualname"]] = _Class(row["qualname"], module, row["end_line"] - row["line"], frozenset(defined_by(node)),
                                              frozenset(read_off([node], constructor_arguments(node))), init)
        self._source = (source, classes)
        return classes

    def find(self, source: str, qualname: str, attribute: str) -> list[Companion]:
        """Blocks of ``source`` other than ``qualname`` that define ``attribute``: those defining
        most of what the block reads off its arguments first, then those the gate built (their
        recorded construction makes a real instance), then the smallest. Then, for each other
        attribute the block reads off its arguments that none of those defines, the best block
        that does: a model given a backbone and a transformer reads ``transformer.d_model`` first
        and ``backbone.num_channels`` next, and the second would find no companion."""
        classes = self._classes(source)
        own = classes.get(qualname)
        wanted = own.reads if own is not None else frozenset()

        def best(attr: str) -> list[_Class]:
            return sorted((c for c in classes.values() if c.qualname != qualname and attr in c.defines),
                          key=lambda c: (-len(c.defines & wanted), c.recipe is None, c.lines, c.qualname))

        chosen = best(attribute)[:_PER_BLOCK]
        covered = {attribute}.union(*(c.defines for c in chosen))
        for attr in sorted(wanted - covered):
            if len(chosen) >= _MOST or attr in covered:
                continue
            more = [c for c in best(attr) if c not in chosen][:1]
            chosen += more
            covered.update(*(c.defines for c in more))
        return [Companion(c.module, c.qualname[len(c.module) + 1:], c.recipe) for c in chosen]
