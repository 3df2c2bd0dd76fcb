"""Packages one indexed source imports from another (mmdet from mmcv and mmengine): which source
lends each, by the corpus ``priority``, and whether an installed distribution keeps it instead."""

from __future__ import annotations

import sqlite3

from ..errors import ConfigError
from .requirements import installed

PREFER = ("installed", "corpus")  # where a package another source of the corpus provides comes from


def check_prefer(prefer: str) -> str:
    if prefer not in PREFER:
        raise ConfigError(f"prefer must be one of {', '.join(PREFER)}, not {prefer!r}")
    return prefer


def lenders(conn: sqlite3.Connection, source_id: int, prefer: str = "installed") -> dict[str, int]:
    """Top-level packages other indexed sources offer a source: package -> the source it comes
    from, the lowest ``priority`` first; with ``prefer="installed"`` a package an installed
    distribution provides stays that distribution's, and is left out. Offered, not necessarily
    imported: ``imported_lenders`` keeps those the source's code reaches."""
    offered: dict[int, set[str]] = {}  # source -> its top-level packages
    for row in conn.execute("SELECT DISTINCT source_id, substr(module, 1, instr(module || '.', '.') - 1) AS top"
                            " FROM files WHERE status='ok' AND module IS NOT NULL"):
        offered.setdefault(row["source_id"], set()).add(row["top"])
    own = offered.get(source_id, set())
    lent: dict[str, int] = {}
    for other in conn.execute("SELECT id FROM sources WHERE id != ? ORDER BY priority, name", (source_id,)):
        for top in sorted(offered.get(other["id"], set()) - own - set(lent)):
            if prefer == "corpus" or not installed(top):
                lent[top] = other["id"]
    return lent


def imported_packages(conn: sqlite3.Connection) -> dict[int, set[str]]:
    """The top-level packages each source's files import by absolute name."""
    imported: dict[int, set[str]] = {r["id"]: set() for r in conn.execute("SELECT id FROM sources")}
    for r in conn.execute("SELECT DISTINCT f.source_id, substr(i.module, 1, instr(i.module || '.', '.') - 1) AS top"
                          " FROM imports i JOIN files f ON f.id=i.file_id WHERE i.level=0 AND i.module IS NOT NULL"):
        imported.setdefault(r["source_id"], set()).add(r["top"])
    return imported


def imported_lenders(conn: sqlite3.Connection, source_id: int, prefer: str = "installed",
                     imported: dict[int, set[str]] | None = None) -> dict[str, int]:
    """Of ``lenders``, the packages the source imports, those the sources lending them import, and
    so on: what its code can reach (mmdet reaches mmcv, and mmcv mmengine), not every package the
    corpus holds. ``imported`` is ``imported_packages``, when the caller has it."""
    imported = imported_packages(conn) if imported is None else imported
    lent = lenders(conn, source_id, prefer)
    reached: dict[str, int] = {}
    involved, used, todo = {source_id}, set(), set(imported.get(source_id, ()))
    while todo:
        top = todo.pop()
        used.add(top)
        if top in lent:
            reached[top] = lent[top]
            if lent[top] not in involved:
                involved.add(lent[top])
                todo |= imported.get(lent[top], set()) - used
    return reached
