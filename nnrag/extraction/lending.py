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
    """Top-level packages a source imports from other indexed sources: package -> the source it
    comes from, the lowest ``priority`` first; with ``prefer="installed"`` a package an installed
    distribution provides stays that distribution's, and is left out."""
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
