"""The library's records: one row per block in table ``library`` (its standalone file, verdict and
validation record) and the file itself under ``HOME/library/SOURCE/QUALNAME.py``."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import zlib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..db.schema import NOT_RUN
from ..extraction.assemble import Assembled
from ..indexing.lookup import BlockRef, find_blocks, one_block
from ..validator.record import ValidationRecord, gate_version
from ..workspace import Workspace, safe_name

# A library row with what specs, tools and LEMUR read beside it: the block's lines, the defining
# file and the source. Column names are unique, so rows are read by name.
LIBRARY_ROW = """
SELECT l.block_id, l.source, l.qualname, l.name, l.category, l.class_name, l.path, l.files, l.requirements,
       l.status, l.stage, l.code, l.message, l.record, l.gate_version, l.updated_at,
       b.line, b.end_line, f.path AS file_path, f.module, f.sha1 AS file_sha1,
       s.kind AS source_kind, s.spec AS source_spec, s.version, s.git_commit, s.license
FROM library l
JOIN sources s ON s.name = l.source
JOIN blocks b ON b.source_id = s.id AND b.qualname = l.qualname
JOIN files f ON f.id = b.file_id
"""


@dataclass(frozen=True)
class BuildNotes:
    """What a build keeps beside a block's validation record, in the same JSON column ``record``:
    why another build may judge the block again, or keep its verdict though its file differs.
    Written by :func:`save` and read by :func:`notes` only."""

    waits_for: str | None = None  # a distribution it misses; a build that may install it judges it again
    environment: tuple[str, ...] | None = None  # the requirements of the environment it was judged in
    not_installable: tuple[str, ...] | None = None  # requirements pip could not install for it
    usage_waits_for: tuple[str, ...] | None = None  # distributions its source's harvest could not import
    extracted_as: str | None = None  # SHA-1 of its usual file, when the verdict is of one re-extracted with usage

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v is not None}

    def with_values(self, values: dict[str, Any]) -> "BuildNotes":
        """These notes with ``values`` (as JSON has them: lists for the tuples) taken over."""
        return replace(self, **{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def notes(conn: sqlite3.Connection) -> dict[str, BuildNotes]:
    """Every library block's build notes, by block id: read in SQLite, one parse of each record
    for all the fields (``json_extract`` with several paths gives one JSON array)."""
    names = [f.name for f in fields(BuildNotes)]
    paths = ", ".join(f"'$.{n}'" for n in names)
    out: dict[str, BuildNotes] = {}
    for block_id, values in conn.execute(f"SELECT block_id, json_extract(record, {paths}) FROM library"):
        given = {n: v for n, v in zip(names, json.loads(values) if values else []) if v is not None}
        out[block_id] = _NO_NOTES.with_values(given) if given else _NO_NOTES
    return out


_NO_NOTES = BuildNotes()


@dataclass(frozen=True)
class StoredRecord:
    """The JSON column ``record`` of a library row, beside the build notes: the gate's record of a
    judged block, what assembling made of a block stored unjudged, or the issues of an extraction
    that failed. Written by :func:`save` and read by :meth:`read` only."""

    gate: ValidationRecord | None = None
    assembled: dict[str, Any] | None = None  # ``Assembled.facts()`` of a block stored unjudged
    issues: tuple[dict[str, Any], ...] = ()  # of an extraction that failed, as ``ClosureIssue`` fields

    @classmethod
    def read(cls, text: str | None) -> "StoredRecord":
        data = json.loads(text or "{}")
        return cls(ValidationRecord.from_dict(data) if "ok" in data else None, data.get("assembled"),
                   tuple(data.get("issues") or ()))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = self.gate.to_dict() if self.gate is not None else {}
        if self.assembled is not None:
            out["assembled"] = self.assembled
        if self.issues:
            out["issues"] = list(self.issues)
        return out


@dataclass(frozen=True)
class MissingDependency:
    """One ``missing-dependency`` verdict of the library, as lending and pinning read it."""

    source: str
    message: str
    traceback: str
    environment: tuple[str, ...] = ()  # the requirements of the environment that judged it


def missing_dependencies(conn: sqlite3.Connection) -> list[MissingDependency]:
    """The library's ``missing-dependency`` verdicts."""
    return [MissingDependency(r["source"], r["message"] or "", r["traceback"] or "", tuple(json.loads(r["environment"] or "[]")))
            for r in conn.execute("SELECT source, message, json_extract(record, '$.traceback') AS traceback,"
                                  " json_extract(record, '$.environment') AS environment FROM library"
                                  " WHERE code='missing-dependency'")]


@dataclass(frozen=True)
class Verdict:
    """What the library records of one block: its file (when the closure completed) and how it fared."""

    block_id: str
    source: str
    qualname: str
    name: str
    category: str
    status: str  # validated | failed | not-run (extracted by a build told not to validate)
    stage: str | None
    code: str | None
    message: str
    record: StoredRecord
    extract_s: float
    gate_version: str
    assembled: Assembled | None = None
    files: dict[str, str] = field(default_factory=dict, compare=False)  # path -> sha1 of each file it copies
    notes: BuildNotes = _NO_NOTES

    def noted(self, **changes: Any) -> "Verdict":
        """The same verdict with build notes changed (``environment=...``)."""
        return replace(self, notes=self.notes.with_values(changes))


@dataclass(frozen=True)
class Candidate:
    """A block whose file went to the gate: what its verdict is stored with. The file's text is
    held compressed: a build keeps every candidate until the gate has judged it, and one
    library's standalone files run to hundreds of megabytes (diffusers' 1,192 blocks: 370 M
    characters, four bytes each in memory once one of them is not Latin-1)."""

    ref: BlockRef
    name: str
    files: dict[str, str]  # of its closure: the closure itself is not kept while the gate works
    packed: bytes  # the file's text, UTF-8, zlib-compressed
    shell: Assembled  # what assembling made, the text left out
    extract_s: float

    @classmethod
    def of(cls, ref: BlockRef, name: str, files: dict[str, str], assembled: Assembled, extract_s: float) -> "Candidate":
        return cls(ref, name, files, zlib.compress(assembled.code.encode(), 1), replace(assembled, code=""), extract_s)

    @property
    def code(self) -> str:
        return zlib.decompress(self.packed).decode()

    @property
    def class_name(self) -> str:
        return self.shell.class_name

    @property
    def assembled(self) -> Assembled:
        return replace(self.shell, code=self.code)

    def redone(self, assembled: Assembled, files: dict[str, str], seconds: float) -> "Candidate":
        """The same block with a file extracted again, ``seconds`` more spent extracting."""
        return Candidate.of(self.ref, self.name, files, assembled, self.extract_s + seconds)

    def not_run(self) -> Verdict:
        """The block stored unjudged (``nnrag build --no-validate``): searchable, and validated by
        the next build, since no gate version matches this one. Its record keeps what assembling
        made beside the text, so that build validates the stored file without extracting again."""
        return Verdict(self.ref.block_id, self.ref.source, self.ref.qualname, self.name, self.ref.category, NOT_RUN,
                       None, None, "", StoredRecord(assembled=self.shell.facts()), self.extract_s, NOT_RUN, self.assembled,
                       self.files)

    @classmethod
    def stored(cls, ref: BlockRef, name: str, row: sqlite3.Row, code: str) -> "Candidate | None":
        """The candidate a ``not-run`` library row (with its record and files) and its stored file
        ``code`` make again; None for a row stored before records kept what assembling made."""
        facts = StoredRecord.read(row["record"]).assembled
        if not facts:
            return None
        return cls.of(ref, name, json.loads(row["files"] or "{}"), Assembled.with_code(facts, code), row["extract_s"] or 0.0)

    def verdict(self, record: ValidationRecord, version: str | None = None) -> Verdict:
        """The library row of ``record``, stamped with ``version`` (this gate's by default)."""
        return Verdict(
            self.ref.block_id, self.ref.source, self.ref.qualname, self.name, self.ref.category,
            "validated" if record.ok else "failed", record.stage, record.code, record.message, StoredRecord(record),
            self.extract_s, version or gate_version(), self.assembled, self.files,
        )


def file_for(workspace: Workspace, block_id: str) -> Path:
    """Where a block's standalone file lives: ``HOME/library/SOURCE/module.Class.py``."""
    source, qual = block_id.split(":", 1)
    return workspace.home / "library" / safe_name(source) / f"{safe_name(qual)}.py"


def code_sha1(code: str) -> str:
    return hashlib.sha1(code.encode()).hexdigest()


def save(conn: sqlite3.Connection, workspace: Workspace, v: Verdict) -> None:
    """Write the block's file (atomically) and its row; a block without a file loses any old one."""
    path = file_for(workspace, v.block_id)
    sha = None
    if v.assembled is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(v.assembled.code, encoding="utf-8")
        os.replace(tmp, path)
        sha = code_sha1(v.assembled.code)
    else:
        path.unlink(missing_ok=True)
    a = v.assembled
    conn.execute(
        "INSERT OR REPLACE INTO library (block_id, source, qualname, name, category, class_name, path, code_sha1, files,"
        " requirements, status, stage, code, message, record, gate_version, extract_s, updated_at)"
        " VALUES (:block_id, :source, :qualname, :name, :category, :class_name, :path, :code_sha1, :files,"
        " :requirements, :status, :stage, :code, :message, :record, :gate_version, :extract_s, :updated_at)",
        {
            "block_id": v.block_id, "source": v.source, "qualname": v.qualname, "name": v.name, "category": v.category,
            "class_name": a.class_name if a else None,
            "path": str(path.relative_to(workspace.home)) if a else None,
            "code_sha1": sha,
            "files": json.dumps(v.files),
            "requirements": json.dumps([r.pep508 for r in a.requirements] if a else []),
            "status": v.status, "stage": v.stage, "code": v.code, "message": v.message,
            "record": json.dumps({**v.record.to_dict(), **v.notes.to_dict()}, default=str), "gate_version": v.gate_version, "extract_s": v.extract_s,
            "updated_at": time.time(),
        },
    )


def drop(conn: sqlite3.Connection, workspace: Workspace, block_id: str) -> None:
    """Remove a block gone from its source: its row and its file."""
    file_for(workspace, block_id).unlink(missing_ok=True)
    conn.execute("DELETE FROM library WHERE block_id=?", (block_id,))


def follow_categories(conn: sqlite3.Connection, refs: list[BlockRef]) -> None:
    """Give stored blocks the category discovery guesses now (a new discovery may guess again):
    verdicts stand, and each changed row is stamped as every write is, so search sees the change."""
    now = time.time()
    conn.executemany("UPDATE library SET category=?, updated_at=? WHERE block_id=? AND category IS NOT ?",
                     [(ref.category, now, ref.block_id, ref.category) for ref in refs])


def extractions(conn: sqlite3.Connection) -> dict[str, str]:
    """Block id -> SHA-1 of the file the last extraction under the current key made."""
    return dict(conn.execute("SELECT block_id, code_sha1 FROM extracted").fetchall())


def remember_extraction(conn: sqlite3.Connection, block_id: str, sha1: str) -> None:
    conn.execute("INSERT OR REPLACE INTO extracted VALUES (?, ?)", (block_id, sha1))


def forget_extractions(conn: sqlite3.Connection, source: str) -> None:
    """Forget what was extracted from ``source``: its extraction key changed."""
    conn.execute("DELETE FROM extracted WHERE substr(block_id, 1, ?) = ?", (len(source) + 1, source + ":"))


def library_rows(conn: sqlite3.Connection, where: str = "", args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    """Library rows joined with their block, file and source (see ``LIBRARY_ROW``), by block id."""
    return conn.execute(LIBRARY_ROW + where + " ORDER BY l.block_id", args).fetchall()


def resolve_library_block(conn: sqlite3.Connection, name: str, source: str | None = None) -> BlockRef:
    """The one block of the library a name means (see :func:`nnrag.indexing.lookup.resolve_block`)."""
    held = [ref for ref in find_blocks(conn, name, source)
            if conn.execute("SELECT 1 FROM library WHERE block_id=?", (ref.block_id,)).fetchone()]
    where = f" in source {source!r}" if source else ""
    return one_block(held, name, source, f"no block named {name!r}{where} in the library; `nnrag build` extracts and "
                                         "validates blocks, `nnrag blocks` lists discovered ones")


def library_row(conn: sqlite3.Connection, block_id: str) -> sqlite3.Row | None:
    rows = library_rows(conn, " WHERE l.block_id=?", (block_id,))
    return rows[0] if rows else None


def entries(conn: sqlite3.Connection, status: str | None = None) -> list[dict[str, object]]:
    """Each library block as a plain dict (id, name, source, category, verdict, file, requirements)."""
    sql = ("SELECT block_id AS id, name, source, category, status, stage, code, message, path, requirements"
           " FROM library" + (" WHERE status=?" if status else "") + " ORDER BY block_id")
    return [dict(r) for r in conn.execute(sql, (status,) if status else ())]
