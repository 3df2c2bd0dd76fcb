"""The SQLite index: sources, files (with content by SHA-1), definitions, imports and blocks.

WAL mode lets readers (``nnrag blocks`` in another terminal) run while an index is written, and
makes every committed batch durable: a killed run resumes from what it committed.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Iterable

from ..errors import IndexStoreError
from .parse import ParsedFile

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    kind TEXT NOT NULL,
    root TEXT,
    module_style TEXT,
    priority INTEGER NOT NULL DEFAULT 1,
    config TEXT NOT NULL DEFAULT '{}',
    version TEXT,
    git_commit TEXT,
    license TEXT,
    note TEXT,
    state TEXT NOT NULL DEFAULT 'new',       -- new | indexing | complete
    indexed_at REAL
);
CREATE TABLE IF NOT EXISTS blobs (sha1 TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    module TEXT,
    sha1 TEXT,
    size INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    lines INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,                    -- ok | error
    reason TEXT,
    message TEXT,
    all_names TEXT,                          -- JSON list from __all__, or NULL
    UNIQUE (source_id, path)
);
CREATE TABLE IF NOT EXISTS definitions (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    qualname TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    lineno INTEGER NOT NULL,
    end_lineno INTEGER NOT NULL,
    cond TEXT NOT NULL DEFAULT '',
    bases TEXT,
    keywords TEXT,
    decorators TEXT,
    docstring TEXT,
    target TEXT,
    forward TEXT,
    methods TEXT,
    abstract TEXT
);
CREATE INDEX IF NOT EXISTS definitions_file ON definitions(file_id);
CREATE TABLE IF NOT EXISTS imports (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    module TEXT,
    name TEXT,
    asname TEXT,
    level INTEGER NOT NULL DEFAULT 0,
    lineno INTEGER NOT NULL,
    cond TEXT NOT NULL DEFAULT '',
    scope TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS imports_file ON imports(file_id);
CREATE TABLE IF NOT EXISTS blocks (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    qualname TEXT NOT NULL,                  -- module.Class[.Inner]
    line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    category TEXT NOT NULL,
    bases_chain TEXT NOT NULL,               -- JSON list, the class first, torch.nn.Module last
    UNIQUE (source_id, qualname)
);
CREATE INDEX IF NOT EXISTS blocks_name ON blocks(name);
"""


class Store:
    """A connection to one index database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise IndexStoreError(
                f"the index at {path} cannot be opened ({exc}); move it away or delete it and re-run `nnrag index`"
            ) from exc

    def _migrate(self) -> None:
        self.conn.executescript(_SCHEMA)
        row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self.conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise IndexStoreError(
                f"the index at {self.path} has schema {row[0]}, this nnrag uses {SCHEMA_VERSION}: "
                "delete it and re-run `nnrag index`"
            )

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transaction(self) -> "_Transaction":
        return _Transaction(self.conn)

    # -- sources -------------------------------------------------------------------------
    def source_row(self, name: str) -> sqlite3.Row | None:
        self.conn.row_factory = sqlite3.Row
        try:
            return self.conn.execute("SELECT * FROM sources WHERE name=?", (name,)).fetchone()
        finally:
            self.conn.row_factory = None

    def sources(self) -> list[sqlite3.Row]:
        self.conn.row_factory = sqlite3.Row
        try:
            return self.conn.execute("SELECT * FROM sources ORDER BY priority, name").fetchall()
        finally:
            self.conn.row_factory = None

    # -- files ---------------------------------------------------------------------------
    def file_states(self, source_id: int) -> dict[str, tuple[int, str | None, int, int, str, str | None]]:
        """path -> (file id, sha1, size, mtime_ns, status, module) for one source."""
        rows = self.conn.execute(
            "SELECT path, id, sha1, size, mtime_ns, status, module FROM files WHERE source_id=?", (source_id,)
        )
        return {r[0]: (r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows}

    def delete_files(self, file_ids: Iterable[int]) -> None:
        ids = list(file_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            self.conn.execute(f"DELETE FROM files WHERE id IN ({marks})", chunk)

    def touch_file(self, file_id: int, size: int, mtime_ns: int, module: str) -> None:
        """Record a new stat (and module name) for a file whose content did not change."""
        self.conn.execute("UPDATE files SET size=?, mtime_ns=?, module=? WHERE id=?", (size, mtime_ns, module, file_id))

    def write_parsed(
        self, source_id: int, parsed: ParsedFile, module: str | None, mtime_ns: int, old_id: int | None
    ) -> None:
        """Replace one file's rows with a fresh parse result (caller holds the transaction)."""
        if old_id is not None:
            self.conn.execute("DELETE FROM files WHERE id=?", (old_id,))
        ok = parsed.reason is None
        cur = self.conn.execute(
            "INSERT INTO files (source_id, path, module, sha1, size, mtime_ns, lines, status, reason, message, all_names)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                source_id,
                parsed.path,
                module,
                parsed.sha1,
                parsed.size,
                mtime_ns,
                parsed.lines,
                "ok" if ok else "error",
                parsed.reason,
                parsed.message,
                json.dumps(parsed.all_names) if parsed.all_names is not None else None,
            ),
        )
        if not ok:
            return
        file_id = cur.lastrowid
        if parsed.blob is not None:
            self.conn.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (parsed.sha1, parsed.blob))
        self.conn.executemany(
            "INSERT INTO definitions (file_id, qualname, name, kind, lineno, end_lineno, cond, bases, keywords,"
            " decorators, docstring, target, forward, methods, abstract) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    file_id,
                    d.qualname,
                    d.qualname.rsplit(".", 1)[-1],
                    d.kind,
                    d.lineno,
                    d.end_lineno,
                    d.cond,
                    json.dumps(d.bases) if d.kind == "class" else None,
                    json.dumps(d.keywords) if d.keywords else None,
                    json.dumps(d.decorators) if d.decorators else None,
                    d.docstring,
                    d.target,
                    d.forward,
                    json.dumps(d.methods) if d.kind == "class" else None,
                    json.dumps(d.abstract) if d.abstract else None,
                )
                for d in parsed.definitions
            ],
        )
        self.conn.executemany(
            "INSERT INTO imports (file_id, module, name, asname, level, lineno, cond, scope) VALUES (?,?,?,?,?,?,?,?)",
            [(file_id, i.module, i.name, i.asname, i.level, i.lineno, i.cond, i.scope) for i in parsed.imports],
        )

    def collect_garbage(self) -> None:
        """Forget content no file refers to any more."""
        self.conn.execute("DELETE FROM blobs WHERE sha1 NOT IN (SELECT sha1 FROM files WHERE sha1 IS NOT NULL)")

    def file_bytes(self, sha1: str) -> bytes:
        row = self.conn.execute("SELECT data FROM blobs WHERE sha1=?", (sha1,)).fetchone()
        if row is None:
            raise IndexStoreError(f"content {sha1} is not in the index; re-run `nnrag index`")
        return zlib.decompress(row[0])

    def file_text(self, sha1: str) -> str:
        return self.file_bytes(sha1).decode("utf-8", errors="surrogateescape")


def open_or_rebuild(path: Path) -> Store:
    """Open the index; one that is corrupted or of another schema is moved aside and started anew.

    The index is derived data, so starting anew loses nothing that re-indexing does not bring
    back; the old file is kept beside it for inspection.
    """
    try:
        return Store(path)
    except IndexStoreError as exc:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = path.with_name(f"{path.name}.broken-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(path) + suffix)
            if part.exists():
                part.rename(Path(str(aside) + suffix))
        log.warning("%s; moved it to %s and started a new index", exc, aside)
        return Store(path)


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
