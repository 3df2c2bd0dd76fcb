"""What an extraction depends on beyond the block, as one key per source: the same key gives the
same file.

A block's file is a function of its source's files, of the files of the sources that lend it a
package it imports (and of those that lend packages to those, and so on), of where such a
package comes from (``prefer``), of the installed distributions (what stays an import, and the
versions the header pins) and of the extraction code itself. A build that finds a block's key
unchanged reuses its verdict without extracting it again: an interrupted build of a large corpus
extracts only the blocks it had not judged, an unchanged one none, and a source added to a built
corpus extracts its own blocks and those of the sources that import one of its packages.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sqlite3
import sys

from ..codekeys import code_key
from .lending import imported_lenders, imported_packages


def _installed_digest() -> bytes:
    names = sorted(f"{d.metadata['Name']}=={d.version}".lower() for d in importlib.metadata.distributions()
                   if d.metadata["Name"])
    return hashlib.sha1("\n".join([sys.version, *names]).encode()).digest()


def extraction_keys(conn: sqlite3.Connection, prefer: str) -> dict[str, str]:
    """The key of every extraction made now from this index with ``prefer``, by source name."""
    # the code a block's file comes from: extraction and what it imports (the header's version too)
    common = code_key("nnrag.extraction").encode() + _installed_digest() + prefer.encode()
    # not the source's root: a download's lies in the home's cache, which a copied or moved home
    # finds elsewhere, and the file depends on what the folder holds, not where it is
    rows = {r["id"]: r for r in conn.execute(
        "SELECT id, name, spec, kind, module_style, priority, config, version, git_commit, license FROM sources")}
    files: dict[int, list[tuple[str, str, str]]] = {i: [] for i in rows}
    for r in conn.execute("SELECT source_id, path, sha1, status FROM files ORDER BY source_id, path"):
        files[r["source_id"]].append((r["path"], r["sha1"], r["status"]))
    imported = imported_packages(conn)
    keys: dict[str, str] = {}
    for sid, row in rows.items():
        # the packages it imports from other sources, those their lenders import, ...
        lent = imported_lenders(conn, sid, prefer, imported)
        h = hashlib.sha1(common)
        h.update(repr(sorted((top, rows[lent[top]]["name"]) for top in lent)).encode())
        for other in sorted({sid, *lent.values()}, key=lambda i: rows[i]["name"]):
            h.update(repr(tuple(rows[other])[1:]).encode() + repr(files[other]).encode())
        keys[row["name"]] = h.hexdigest()
    return keys
