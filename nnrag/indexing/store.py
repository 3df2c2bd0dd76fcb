"""Writes of the index: sources, files (with content by SHA-1), definitions, imports and blocks.

The tables themselves belong to :mod:`nnrag.db`; this module fills them from parse results.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ..db import Database, read_meta, write_meta
from ..errors import IndexStoreError
from .parse import ParsedFile

if TYPE_CHECKING:
    from .discovery import BlockRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileState:
    """An indexed file as the last run left it: enough to tell whether it changed."""

    id: int
    sha1: str | None
    size: int
    mtime_ns: int
    status: str  # ok | error
    module: str | None


@dataclass(frozen=True)
class DiscoveryStamp:
    """What the last discovery over the whole index found, and by which code (``meta``'s
    ``discovery``): ``nnrag stats`` reports it, and another code runs discovery again."""

    version: str | None = None
    classes: int = 0
    modules_not_blocks: int = 0
    unresolved_bases: int = 0
    template_copies: int = 0

    @classmethod
    def read(cls, conn: sqlite3.Connection) -> "DiscoveryStamp":
        text = read_meta(conn, "discovery")
        data = json.loads(text) if text else {}
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def write(self, conn: sqlite3.Connection) -> None:
        write_meta(conn, "discovery", json.dumps(asdict(self)))


# A file's mtime that no file has: its content is parsed again even if its hash is unchanged.
PARSE_AGAIN = -1


class Store(Database):
    """The index's writes: sources, parsed files, definitions, imports, blocks."""

    # -- sources -------------------------------------------------------------------------
    def source_row(self, name: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM sources WHERE name=?", (name,)).fetchone()

    def sources(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM sources ORDER BY priority, name").fetchall()

    def register_source(self, name: str, values: tuple[object, ...], source_id: int | None) -> int:
        """Insert a source row (``source_id`` None) or update it; it stays ``indexing`` until
        :meth:`sources_complete`. ``values``: spec, kind, root, module_style, priority, config,
        version, git_commit, license, note."""
        with self.transaction() as conn:
            if source_id is None:
                cur = conn.execute(
                    "INSERT INTO sources (spec, kind, root, module_style, priority, config, version, git_commit, license,"
                    " note, name, state) VALUES (?,?,?,?,?,?,?,?,?,?,?, 'indexing')",
                    (*values, name),
                )
                return int(cur.lastrowid)  # type: ignore[arg-type]
            conn.execute(
                "UPDATE sources SET spec=?, kind=?, root=?, module_style=?, priority=?, config=?, version=?, git_commit=?,"
                " license=?, note=?, state='indexing' WHERE id=?",
                (*values, source_id),
            )
            return source_id

    def sources_complete(self, source_ids: Iterable[int]) -> None:
        with self.transaction() as conn:
            now = time.time()
            conn.executemany("UPDATE sources SET state='complete', indexed_at=? WHERE id=?", [(now, sid) for sid in source_ids])

    def forget_source(self, name: str) -> None:
        """The source and, through its foreign keys, everything indexed from it."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM sources WHERE name=?", (name,))

    def parsed_by(self, source_id: int) -> str | None:
        """The parser version that parsed the source's files (None before the stamp existed)."""
        return read_meta(self.conn, f"parser:{source_id}")

    def mark_for_parse(self, source_id: int, version: str) -> None:
        """Have every file of the source parsed again (by ``version``, which the stamp records)."""
        self.conn.execute("UPDATE files SET mtime_ns=? WHERE source_id=?", (PARSE_AGAIN, source_id))
        write_meta(self.conn, f"parser:{source_id}", version)

    # -- files ---------------------------------------------------------------------------
    def file_states(self, source_id: int) -> dict[str, FileState]:
        """path -> what the index holds of that file, for one source."""
        rows = self.conn.execute(
            "SELECT path, id, sha1, size, mtime_ns, status, module FROM files WHERE source_id=?", (source_id,)
        )
        return {r["path"]: FileState(r["id"], r["sha1"], r["size"], r["mtime_ns"], r["status"], r["module"]) for r in rows}

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
            "INSERT INTO files (source_id, path, module, sha1, size, mtime_ns, lines, status, reason, message, all_names,"
            " generated_from) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
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
                parsed.generated_from,
            ),
        )
        if not ok:
            return
        file_id = cur.lastrowid
        if parsed.blob is not None:
            self.conn.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (parsed.sha1, parsed.blob))
        self.conn.executemany(
            "INSERT INTO definitions (file_id, qualname, name, kind, lineno, end_lineno, cond, bases, keywords,"
            " decorators, docstring, target, forward, methods, abstract, calls, stubs)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                    json.dumps(d.calls) if d.calls else None,
                    json.dumps(d.stubs) if d.stubs else None,
                )
                for d in parsed.definitions
            ],
        )
        self.conn.executemany(
            "INSERT INTO imports (file_id, module, name, asname, level, lineno, cond, scope) VALUES (?,?,?,?,?,?,?,?)",
            [(file_id, i.module, i.name, i.asname, i.level, i.lineno, i.cond, i.scope) for i in parsed.imports],
        )

    # -- blocks --------------------------------------------------------------------------
    def replace_blocks(self, blocks: Iterable["BlockRow"], stamp: DiscoveryStamp) -> None:
        """The blocks discovery found in the whole index, in place of the last ones, with its stamp."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM blocks")
            conn.executemany(
                "INSERT INTO blocks (source_id, file_id, name, qualname, line, end_line, category, bases_chain)"
                " VALUES (?,?,?,?,?,?,?,?)",
                [(b.source_id, b.file_id, b.name, b.qualname, b.line, b.end_line, b.category, json.dumps(list(b.chain)))
                 for b in blocks],
            )
            stamp.write(conn)

    def collect_garbage(self) -> None:
        """Forget content no file refers to any more."""
        self.conn.execute("DELETE FROM blobs WHERE sha1 NOT IN (SELECT sha1 FROM files WHERE sha1 IS NOT NULL)")


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
