"""The one name lookup: which discovered block a user means by ``Name``, ``module.Name`` or an id
``source:module.Name``. Extraction, specs, code and LEMUR all resolve names here."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..errors import AmbiguousBlockError, NotFoundError


@dataclass(frozen=True)
class BlockRef:
    """A discovered block: its source, defining module and name inside that module."""

    source: str
    module: str
    name_in_module: str  # Class or Outer.Inner
    category: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "BlockRef":
        """From a row with columns ``source``, ``module`` (the file's), ``qualname`` (the block's) and ``category``."""
        module, qualname = row["module"] or "", row["qualname"]
        return cls(row["source"], module, qualname[len(module) + 1:] if module else qualname, row["category"])

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name_in_module}" if self.module else self.name_in_module

    @property
    def block_id(self) -> str:
        return f"{self.source}:{self.qualname}"


def find_blocks(conn: sqlite3.Connection, name: str, source: str | None = None) -> list[BlockRef]:
    """Blocks named ``name`` (a class name, ``module.Name`` or a block id), best source first."""
    if ":" in name:
        source, name = name.split(":", 1)
    sql = ("SELECT s.name AS source, f.module, b.qualname, b.category FROM blocks b JOIN sources s ON s.id=b.source_id"
           " JOIN files f ON f.id=b.file_id WHERE (b.name=? OR b.qualname=?)")
    args: list[str] = [name, name]
    if source:
        sql += " AND s.name=?"
        args.append(source)
    rows = conn.execute(sql + " ORDER BY s.priority, s.name, b.qualname", args).fetchall()
    return [BlockRef.from_row(r) for r in rows]


def resolve_block(conn: sqlite3.Connection, name: str, source: str | None = None) -> BlockRef:
    """The one block a name means; an unknown or ambiguous name is an error that says what to do."""
    return one_block(find_blocks(conn, name, source), name, source)


def one_block(found: list[BlockRef], name: str, source: str | None = None, missing: str | None = None) -> BlockRef:
    """The one block of ``found``, the blocks ``name`` matched; none (``missing`` says what to do
    then) or several is an error."""
    if not found:
        where = f" in source {source!r}" if source else ""
        raise NotFoundError(missing or f"no block named {name!r}{where}; `nnrag blocks '*{name}*'` lists similar names")
    if len(found) > 1:
        raise AmbiguousBlockError(name, [b.block_id for b in found])
    return found[0]
