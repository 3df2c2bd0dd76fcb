"""Specs of every library block, kept in the index database and rebuilt only for blocks whose
file or verdict changed."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from dataclasses import dataclass
from typing import Callable, Iterator

from ..db import Database
from ..library.records import library_rows
from ..workspace import Workspace
from .build import SpecBundle, bundle_from_row
from .config_docs import PackageDocs
from .readme import ReadmeNotes
from .model import BlockSpec, spec_version

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refresh:
    built: list[str]
    removed: list[str]
    failed: dict[str, str]



def row_key(row: sqlite3.Row, readme: str = "") -> str:
    """Key of a library row: its file, verdict and record, its source's README (``readme``, its
    digest), and the code that makes specs and what is kept beside them."""
    parts = (spec_version(), row["block_id"], row["category"], row["status"], row["code"], row["record"],
             row["gate_version"], row["file_sha1"], row["path"], readme)
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()


def refresh(store: Database, workspace: Workspace, progress: Callable[[int, int], None] | None = None) -> Refresh:
    """Build the specs of new and changed library blocks; drop those of blocks gone."""
    conn = store.conn
    rows = library_rows(conn)
    known = dict(conn.execute("SELECT block_id, key FROM specs").fetchall())
    readmes = ReadmeNotes(conn)
    todo = [(r, k) for r in rows if known.get(r["block_id"]) != (k := row_key(r, readmes.key(r["source"])))]
    built: list[str] = []
    failed: dict[str, str] = {}
    docs = PackageDocs(conn)
    for i, (row, key) in enumerate(todo, 1):
        try:
            b = bundle_from_row(store, workspace, row, docs, readmes)
        except Exception as e:  # one unreadable block must not stop the rest
            failed[row["block_id"]] = f"{type(e).__name__}: {e}"
            log.warning("no spec for %s: %s", row["block_id"], failed[row["block_id"]])
        else:
            conn.execute("INSERT OR REPLACE INTO specs (block_id, key, spec, docstring, identifiers, fingerprint, context,"
                         " notes, comments, readme, heading) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         (row["block_id"], key, b.spec.to_json(None), b.docstring, json.dumps(b.identifiers), b.fingerprint,
                          b.context, b.notes, json.dumps(b.comments), b.readme, b.heading))
            built.append(row["block_id"])
        if progress:
            progress(i, len(todo))
    current = {r["block_id"] for r in rows}
    removed = [b for b in known if b not in current]
    conn.executemany("DELETE FROM specs WHERE block_id=?", [(b,) for b in removed])
    conn.commit()
    return Refresh(built, removed, failed)


def build_again(conn: sqlite3.Connection, ids: list[str]) -> None:
    """Have the next :func:`refresh` build the specs of ``ids`` again, as if their blocks changed."""
    conn.executemany("UPDATE specs SET key='' WHERE block_id=?", [(i,) for i in ids])


def bundles(store: Database, ids: list[str] | None = None) -> Iterator[SpecBundle]:
    sql = "SELECT spec, docstring, identifiers, fingerprint, context, notes, comments, readme, heading FROM specs"
    rows = store.conn.execute(sql + " ORDER BY block_id").fetchall() if ids is None else [
        r for i in ids for r in store.conn.execute(sql + " WHERE block_id=?", (i,)).fetchall()]
    for r in rows:
        yield SpecBundle(BlockSpec.model_validate_json(r["spec"]), r["docstring"], json.loads(r["identifiers"] or "[]"),
                         r["fingerprint"] or "", r["context"] or "", r["notes"] or "", json.loads(r["comments"] or "[]"),
                         r["readme"] or "", r["heading"] or "")
