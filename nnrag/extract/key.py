"""What an extraction depends on beyond the block, as one key: the same key gives the same file.

A block's file is a function of the indexed corpus (every source's files: a module added to
another source can become the lender of a package that was an import), where a package another
source holds comes from (``prefer``), the installed distributions (what stays an import, and the
versions the header pins) and the extraction code itself. A build that finds a block's key
unchanged reuses its verdict without extracting it again: an interrupted build of a large corpus
extracts only the blocks it had not judged, an unchanged one none.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sqlite3
import sys
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
_CODE = ("extract", "index", "sources", "_version.py")  # the code a block's file comes from (the header's origin too)


def _code_digest() -> bytes:
    h = hashlib.sha1()
    for part in _CODE:
        path = _PACKAGE / part
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(_PACKAGE).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.digest()


def _installed_digest() -> bytes:
    names = sorted(f"{d.metadata['Name']}=={d.version}".lower() for d in importlib.metadata.distributions()
                   if d.metadata["Name"])
    return hashlib.sha1("\n".join([sys.version, *names]).encode()).digest()


def extraction_key(conn: sqlite3.Connection, prefer: str) -> str:
    """The key of every extraction made now from this index with ``prefer``."""
    h = hashlib.sha1(_code_digest() + _installed_digest() + prefer.encode())
    for r in conn.execute("SELECT name, spec, kind, root, module_style, priority, config, version, git_commit, license"
                          " FROM sources ORDER BY name"):
        h.update(repr(tuple(r)).encode())
    for r in conn.execute("SELECT s.name, f.path, f.sha1, f.status FROM files f JOIN sources s ON s.id=f.source_id"
                          " ORDER BY s.name, f.path"):
        h.update(repr(tuple(r)).encode())
    return h.hexdigest()
