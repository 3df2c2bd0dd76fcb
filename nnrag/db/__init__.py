"""The one owner of the nnrag database: every connection comes from :func:`connect`.

A connection is in WAL mode (readers such as ``nnrag blocks`` in another terminal run while a
build writes, and every committed batch survives a kill), waits for a writer's lock instead of
failing, enforces foreign keys, returns rows addressable by column name, and holds a database of
the current schema: a new file gets every table, an older one is migrated step by step, a newer
one is refused.
"""

from __future__ import annotations

import errno
import io
import os
import logging
import sqlite3
import tokenize
import zlib
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from ..errors import DiskFullError, IndexStoreError, NotFoundError
from ..workspace import Workspace, private_folder
from .schema import MIGRATIONS, SCHEMA_VERSION, TABLES

log = logging.getLogger(__name__)

_BUSY_TIMEOUT_S = 30.0


def read_meta(conn: sqlite3.Connection, key: str) -> str | None:
    """The value stored under ``key`` in the database's key-value table ``meta``, None if none."""
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return None if row is None else str(row[0])


def write_meta(conn: sqlite3.Connection, key: str, value: str | None) -> None:
    """Store ``value`` under ``key`` in ``meta`` (None removes the key): the one writer of that
    table besides the schema's own version."""
    if value is None:
        conn.execute("DELETE FROM meta WHERE key=?", (key,))
    else:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def file_bytes(conn: sqlite3.Connection, sha1: str) -> bytes:
    """The content of an indexed file, stored once by SHA-1."""
    row = conn.execute("SELECT data FROM blobs WHERE sha1=?", (sha1,)).fetchone()
    if row is None:
        raise IndexStoreError(f"content {sha1} is not in the index; re-run `nnrag index`")
    return zlib.decompress(row["data"])


def decode_source(data: bytes) -> str:
    """Python source as text, in the encoding it declares (PEP 263; UTF-8 by default). Raises
    SyntaxError, UnicodeDecodeError or LookupError where it does not decode."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def file_text(conn: sqlite3.Connection, sha1: str) -> str:
    """An indexed file as text, as the indexer read it; bytes that do not decode survive as
    surrogates."""
    data = file_bytes(conn, sha1)
    try:
        return decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("utf-8", errors="surrogateescape")


def _unwritable(path: Path, exc: Exception) -> IndexStoreError:
    """The error for a home nnrag may not write: its index is fine, and must not be moved aside."""
    return IndexStoreError(f"the nnrag home {path.parent} is not writable ({getattr(exc, 'strerror', None) or exc}): "
                           "nnrag keeps its journal beside the index even to read it; give a writable --home "
                           "(or NNRAG_HOME), or make this one writable")


class Database:
    """A connection to one home's database, of the current schema."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            private_folder(path.parent)
            # the owner's alone: records hold what candidates printed; SQLite gives its journal
            # files the same mode
            if not path.exists():
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            if is_disk_full(exc):
                raise disk_full_error(path.parent) from exc
            raise _unwritable(path, exc) from exc
        try:
            self.conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self._bring_to_schema()
        except sqlite3.DatabaseError as exc:
            if is_disk_full(exc):  # the file is fine: nothing to move aside
                raise disk_full_error(path.parent) from exc
            if not os.access(path.parent, os.W_OK) or not os.access(path, os.W_OK):  # nor here: it cannot be written
                raise _unwritable(path, exc) from exc
            raise IndexStoreError(
                f"the index at {path} cannot be opened ({exc}); move it away or delete it and re-run `nnrag index`"
            ) from exc

    def _bring_to_schema(self) -> None:
        version = schema_version(self.conn)
        if version == SCHEMA_VERSION:
            return
        if version is None:  # a new file
            # one script, one transaction: a second process creating the same file waits, then finds it made
            self.conn.executescript(f"BEGIN IMMEDIATE;\n{TABLES}\nINSERT OR REPLACE INTO meta VALUES "
                                    f"('schema_version', '{SCHEMA_VERSION}');\nCOMMIT;")
            return
        if version > SCHEMA_VERSION or version not in MIGRATIONS:
            raise IndexStoreError(
                f"the index at {self.path} has schema {version}, this nnrag reads {SCHEMA_VERSION}"
                + (" (it was made by a newer nnrag)" if version > SCHEMA_VERSION else "")
                + ": upgrade nnrag, or delete it and re-run `nnrag index`"
            )
        while version < SCHEMA_VERSION:
            log.info("migrating %s from schema %d to %d", self.path, version, version + 1)
            MIGRATIONS[version](self.conn)
            version += 1
            self.conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def transaction(self) -> "Transaction":
        return Transaction(self.conn)

    # -- content of indexed files, stored once by SHA-1 --------------------------------------------
    def file_bytes(self, sha1: str) -> bytes:
        return file_bytes(self.conn, sha1)

    def file_text(self, sha1: str) -> str:
        return file_text(self.conn, sha1)


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an exception)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


def schema_version(conn: sqlite3.Connection) -> int | None:
    """The version a database records, or None for a new (empty) file."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row["value"]) if row else None


D = TypeVar("D", bound=Database)


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error says the disk is full (SQLite's SQLITE_FULL, or ENOSPC)."""
    if isinstance(exc, sqlite3.OperationalError):
        return "disk is full" in str(exc) or getattr(exc, "sqlite_errorcode", None) == 13
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


def disk_full_error(where: Path | None = None) -> DiskFullError:
    place = f"the disk holding {where}" if where is not None else "the disk"
    return DiskFullError(f"no space left on {place}: free some and run the same command again "
                         "(what is stored is kept; the run resumes)")


def connect(workspace: Workspace, *, create: bool = False, kind: type[D] = Database) -> D:  # type: ignore[assignment]
    """The database of a home (as ``kind``, a :class:`Database` with a stage's own methods). Without
    ``create``, a home with no index is an error that says what to run."""
    if not create and not workspace.index_path.exists():
        raise NotFoundError(f"no index in {workspace.home}: run `nnrag index` or `nnrag build` first")
    return kind(workspace.index_path)


__all__ = ["Database", "Transaction", "connect", "is_disk_full", "disk_full_error", "schema_version", "SCHEMA_VERSION",
           "read_meta", "write_meta"]
