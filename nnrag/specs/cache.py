"""Specs of every library block, kept in the index database and rebuilt only for blocks whose
file or verdict changed."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Callable, Iterator

from ..retrieval.store import Store
from ..workspace import Workspace
from .build import SpecBundle, bundle_from_row, library_rows
from .model import SPEC_VERSION, BlockSpec

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS specs (
    block_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,          -- what the spec was built from; a new key rebuilds it
    spec TEXT NOT NULL,
    docstring TEXT,
    identifiers TEXT,
    fingerprint TEXT,
    context TEXT
);
"""


@dataclass(frozen=True)
class Refresh:
    built: list[str]
    removed: list[str]
    failed: dict[str, str]


def row_key(row: tuple) -> str:
    """Key of a library row: its file, verdict and record, and the spec format."""
    parts = (SPEC_VERSION, row[0], row[4], row[9], row[11], row[13], row[14], row[19], row[6])
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()


def refresh(store: Store, workspace: Workspace, progress: Callable[[int, int], None] | None = None) -> Refresh:
    """Build the specs of new and changed library blocks; drop those of blocks gone."""
    conn = store.conn
    conn.executescript(SCHEMA)
    rows = library_rows(conn)
    known = dict(conn.execute("SELECT block_id, key FROM specs").fetchall())
    todo = [(r, k) for r in rows if known.get(r[0]) != (k := row_key(r))]
    built: list[str] = []
    failed: dict[str, str] = {}
    for i, (row, key) in enumerate(todo, 1):
        try:
            b = bundle_from_row(store, workspace, row)
        except Exception as e:  # one unreadable block must not stop the rest
            failed[row[0]] = f"{type(e).__name__}: {e}"
            log.warning("no spec for %s: %s", row[0], failed[row[0]])
        else:
            conn.execute("INSERT OR REPLACE INTO specs VALUES (?,?,?,?,?,?,?)",
                         (row[0], key, b.spec.to_json(None), b.docstring, json.dumps(b.identifiers), b.fingerprint,
                          b.context))
            built.append(row[0])
        if progress:
            progress(i, len(todo))
    current = {r[0] for r in rows}
    removed = [b for b in known if b not in current]
    conn.executemany("DELETE FROM specs WHERE block_id=?", [(b,) for b in removed])
    conn.commit()
    return Refresh(built, removed, failed)


def bundles(store: Store, ids: list[str] | None = None) -> Iterator[SpecBundle]:
    sql = "SELECT spec, docstring, identifiers, fingerprint, context FROM specs"
    rows = store.conn.execute(sql + " ORDER BY block_id").fetchall() if ids is None else [
        r for i in ids for r in store.conn.execute(sql + " WHERE block_id=?", (i,)).fetchall()]
    for spec, doc, idents, fp, context in rows:
        yield SpecBundle(BlockSpec.model_validate_json(spec), doc, json.loads(idents or "[]"), fp or "", context or "")
