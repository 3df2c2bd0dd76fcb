"""The block library: standalone files of every discovered block, with the gate's verdict on each.

Files live under ``HOME/library/SOURCE/QUALNAME.py``; records live in the index database (table
``library``), keyed by block id ``source:module.Class``. A block is re-validated only when its
extracted text (SHA-1) or the gate changes, so an interrupted ``build`` resumes where it stopped
and an unchanged corpus costs only extraction.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import sqlite3
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from . import usage
from .errors import NnragError, NotFoundError
from .retrieval.assemble import Assembled, Provenance, assemble
from .retrieval.closure import Closure, ClosureIssue, Extractor
from .retrieval.store import Store
from .validator.record import Limits, ValidationRecord
from .workspace import Workspace

if TYPE_CHECKING:
    from .validator.gate import Gate

log = logging.getLogger(__name__)

# Bump when the probe or sandbox changes what passes: stored verdicts of another version are redone.
GATE_VERSION = "8"
# A guess-based failure waiting for its retry with recorded usage; redone by the next build.
_AWAITING_USAGE = GATE_VERSION + "-guess"
# Failures that recorded arguments or inputs may fix.
_RETRY_CODES = {"constructor-args", "input-inference", "runtime-error", "timeout", "memory", "backward-error"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS library (
    block_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    qualname TEXT NOT NULL,
    name TEXT NOT NULL,
    category TEXT,
    class_name TEXT,
    path TEXT,
    code_sha1 TEXT,
    files TEXT,
    requirements TEXT,
    status TEXT NOT NULL,            -- validated | failed
    stage TEXT,
    code TEXT,
    message TEXT,
    record TEXT,
    gate_version TEXT,
    extract_s REAL,
    updated_at REAL
);
CREATE INDEX IF NOT EXISTS library_source ON library(source);
"""

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


class AmbiguousBlockError(NotFoundError):
    """A name matches blocks in several sources or modules."""

    def __init__(self, name: str, candidates: list[str]) -> None:
        self.candidates = candidates
        listing = "\n  ".join(candidates)
        super().__init__(f"{name!r} matches {len(candidates)} blocks; pass --source or a full id:\n  {listing}")


@dataclass(frozen=True)
class Extraction:
    block_id: str
    source: str
    qualname: str
    class_name: str
    code: str
    requirements: list[str]
    files: dict[str, str]
    issues: list[ClosureIssue]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.issues

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["issues"] = [asdict(i) for i in self.issues]
        return d


def open_library(workspace: Workspace) -> Store:
    if not workspace.index_path.exists():
        raise NotFoundError(f"no index in {workspace.home}: run `nnrag index` or `nnrag build` first")
    store = Store(workspace.index_path)
    store.conn.executescript(_SCHEMA)
    store.conn.executescript(usage.SCHEMA)
    return store


def _provenance(conn: sqlite3.Connection, source: str) -> Provenance:
    kind, spec, root, version, commit, license_ = conn.execute(
        "SELECT kind, spec, root, version, git_commit, license FROM sources WHERE name=?", (source,)
    ).fetchone()
    if kind == "dist":
        origin = f"dist {spec.split(':', 1)[-1]}=={version}" if version else f"dist {spec}"
    elif kind == "git":
        origin = f"git {spec.split('+', 1)[-1]}" + (f" @ {commit}" if commit else "")
    elif kind == "pypi":
        origin = f"{spec}" + (f" ({version})" if version else "")
    else:
        origin = f"{kind} {spec}" + (f" @ {commit}" if commit else "")
    return Provenance(source, origin, license_)


def find_blocks(conn: sqlite3.Connection, name: str, source: str | None = None) -> list[tuple[str, str, str, str]]:
    """(source, module, qualname-in-module, category) of blocks named ``name``, a qualname or an id."""
    src_filter, key = source, name
    if ":" in name:
        src_filter, key = name.split(":", 1)
    rows = conn.execute(
        "SELECT s.name, f.module, b.qualname, b.category FROM blocks b JOIN sources s ON s.id=b.source_id"
        " JOIN files f ON f.id=b.file_id WHERE (b.name=? OR b.qualname=?) ORDER BY s.priority, s.name, b.qualname",
        (key, key),
    ).fetchall()
    return [(s, m, q[len(m) + 1 :] if m else q, c) for s, m, q, c in rows if src_filter in (None, s)]


class Extractors:
    """One cached :class:`Extractor` per source (parsed modules are shared by its blocks)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._by_source: dict[str, tuple[Extractor, Provenance]] = {}

    def extract(self, source: str, module: str, qualname: str) -> tuple[Closure, Assembled | None, float]:
        if source not in self._by_source:
            self._by_source[source] = (Extractor(self.conn, source), _provenance(self.conn, source))
        extractor, prov = self._by_source[source]
        started = time.perf_counter()
        closure = extractor.closure(module, qualname)
        assembled = None if closure.issues else assemble(closure, prov)
        return closure, assembled, time.perf_counter() - started


def extract_block(workspace: Workspace, name: str, source: str | None = None) -> Extraction:
    with open_library(workspace) as store:
        found = find_blocks(store.conn, name, source)
        if not found:
            where = f" in source {source!r}" if source else ""
            raise NotFoundError(f"no block named {name!r}{where}; `nnrag blocks '*{name}*'` lists similar names")
        if len(found) > 1:
            raise AmbiguousBlockError(name, [f"{s}:{m}.{q}" for s, m, q, _ in found])
        src, module, qual, _ = found[0]
        closure, assembled, seconds = Extractors(store.conn).extract(src, module, qual)
    return Extraction(
        block_id=f"{src}:{module}.{qual}",
        source=src,
        qualname=f"{module}.{qual}",
        class_name=assembled.class_name if assembled else qual,
        code=assembled.code if assembled else "",
        requirements=[r.pep508 for r in assembled.requirements] if assembled else [],
        files=closure.files,
        issues=closure.issues,
        seconds=seconds,
    )


# -- build ------------------------------------------------------------------------------------
@dataclass
class BuildReport:
    tried: int = 0
    passed: int = 0
    cached: int = 0  # verdicts reused from an earlier run (same text, same gate)
    failures: dict[str, int] = field(default_factory=dict)
    per_source: dict[str, dict[str, float]] = field(default_factory=dict)
    extract_median_s: float | None = None
    validate_per_s: float | None = None
    seconds: float = 0.0
    interrupted: bool = False
    harvest: dict[str, object] = field(default_factory=dict)  # factories run, seconds, blocks rescued
    search: dict[str, object] = field(default_factory=dict)  # specs built, texts embedded, seconds
    cluster: dict[str, object] = field(default_factory=dict)  # scheduler, candidates served per Dask worker

    @property
    def pass_rate(self) -> float:
        return self.passed / self.tried if self.tried else 0.0

    def count(self, source: str, ok: bool, code: str | None) -> None:
        """Add one verdict to the totals, the per-source figures and the failures by code."""
        self.tried += 1
        self.passed += ok
        s = self.per_source.setdefault(source, {"tried": 0, "passed": 0, "pass_rate": 0.0})
        s["tried"] += 1
        s["passed"] += ok
        s["pass_rate"] = round(s["passed"] / s["tried"], 4)
        if not ok and code:
            self.failures[code] = self.failures.get(code, 0) + 1

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["pass_rate"] = round(self.pass_rate, 4)
        return d


def read_names(path: str | os.PathLike[str]) -> set[str]:
    """Block names from a JSON list (the ``nn-rag`` names format) or a text file, one per line."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}
    if isinstance(data, dict):
        data = data.get("names") or list(data)
    if not isinstance(data, list):
        raise NnragError(f"{path}: expected a JSON list of block names")
    return {str(x) for x in data}


def _file_for(workspace: Workspace, block_id: str) -> Path:
    source, qual = block_id.split(":", 1)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in source)
    return workspace.home / "library" / safe / f"{qual}.py"


def build_library(
    workspace: Workspace,
    *,
    sources: Iterable[str] | None = None,
    names: set[str] | None = None,
    limit: int | None = None,
    workers: int | None = None,
    limits: Limits | None = None,
    progress: ProgressFn | None = None,
    harvest: bool = True,
    scheduler: str | None = None,
) -> BuildReport:
    """Extract and validate every selected block; store files and verdicts.

    Blocks that fail on guessed arguments or inputs are retried with the usage recorded by running
    their source's own model factories (``harvest``; see ``nnrag.usage``). With ``scheduler`` (a
    Dask scheduler's address) the blocks are validated on that cluster's workers.
    """
    started = time.perf_counter()
    report = BuildReport()
    with open_library(workspace) as store, _open_gate(scheduler, workers, limits) as gate:
        conn = store.conn
        wanted = set(sources) if sources is not None else None
        rows = conn.execute(
            "SELECT s.name, f.module, b.qualname, b.name, b.category FROM blocks b JOIN sources s ON s.id=b.source_id"
            " JOIN files f ON f.id=b.file_id ORDER BY s.priority, s.name, b.qualname"
        ).fetchall()
        selected = [r for r in rows if (wanted is None or r[0] in wanted) and (names is None or r[3] in names)]
        if limit is not None:
            selected = selected[:limit]
        known = {
            r[0]: r[1:]
            for r in conn.execute("SELECT block_id, code_sha1, gate_version, status, code FROM library")
        }
        extractors = Extractors(conn)
        pending: list[tuple[tuple, str, str | None]] = []
        extract_times: list[float] = []
        total = len(selected)

        for i, (src, module, qualname, name, category) in enumerate(selected):
            block_id = f"{src}:{qualname}"
            qual = qualname[len(module) + 1 :] if module else qualname
            try:
                closure, assembled, seconds = extractors.extract(src, module, qual)
                issues = closure.issues
            except Exception as e:  # a bug or a file that changed under us: record it, go on
                log.exception("extracting %s failed", block_id)
                closure, assembled, seconds = None, None, 0.0
                issues = [ClosureIssue("extract-error", qual, module, 0, f"{type(e).__name__}: {e}")]
            extract_times.append(seconds)
            if progress:
                progress("extract", i + 1, total)
            if assembled is None:
                rec = {"issues": [asdict(x) for x in issues]}
                _store(conn, workspace, block_id, src, qualname, name, category, None, None, closure, "failed",
                       "extract", issues[0].code, "; ".join(str(x) for x in issues)[:2000], rec, seconds)
                report.count(src, False, issues[0].code)
                continue
            sha = hashlib.sha1(assembled.code.encode()).hexdigest()
            prev = known.get(block_id)
            path = _file_for(workspace, block_id)
            if prev and prev[0] == sha and prev[1] == GATE_VERSION and path.exists():
                report.cached += 1
                report.count(src, prev[2] == "validated", prev[3])
                continue
            key = (block_id, src, qualname, name, category, closure, assembled, seconds)
            if not pending:
                gate.warm()  # torch imports in the workers while the other blocks are extracted
            pending.append((key, assembled.code, assembled.class_name))

        report.extract_median_s = statistics.median(extract_times) if extract_times else None
        v_started = time.perf_counter()
        done = 0
        retry: list[tuple[tuple, ValidationRecord]] = []

        def save(key: tuple, record: ValidationRecord, version: str = GATE_VERSION) -> None:
            block_id, src, qualname, name, category, closure, assembled, seconds = key
            _store(conn, workspace, block_id, src, qualname, name, category, assembled, record, closure,
                   "validated" if record.ok else "failed", record.stage, record.code, record.message,
                   record.to_dict(), seconds, version)

        del extractors  # its parsed modules are not needed any more
        try:
            with _gc_frozen():
                for key, record in gate.check_many(pending):
                    if harvest and not record.ok and record.code in _RETRY_CODES:
                        save(key, record, _AWAITING_USAGE)
                        retry.append((key, record))
                    else:
                        save(key, record)
                        report.count(key[1], record.ok, record.code)
                    done += 1
                    if progress:
                        progress("validate", done, len(pending))
                if done:
                    report.validate_per_s = done / (time.perf_counter() - v_started)
                if retry:
                    report.harvest = _retry_with_usage(store, gate, retry, save, report, progress)
        except KeyboardInterrupt:
            report.interrupted = True
        if scheduler and not report.interrupted:
            report.cluster = {"scheduler": scheduler, "served": gate.served()}
        if wanted is None and names is None and limit is None and not report.interrupted:
            current = {f"{r[0]}:{r[2]}" for r in rows}
            for (block_id,) in conn.execute("SELECT block_id FROM library").fetchall():
                if block_id not in current:  # the block is gone from its source: drop the stale file
                    _file_for(workspace, block_id).unlink(missing_ok=True)
                    conn.execute("DELETE FROM library WHERE block_id=?", (block_id,))
    report.seconds = time.perf_counter() - started
    return report


def _open_gate(scheduler: str | None, workers: int | None, limits: Limits | None) -> "Gate":
    if scheduler:
        from .validator.cluster import ClusterGate

        return ClusterGate(scheduler, None, limits)  # as many in flight as the cluster has threads
    from .validator.gate import Gate

    return Gate(workers, limits)


@contextlib.contextmanager
def _gc_frozen() -> Iterator[None]:
    """Collect once, then keep the collector off what exists now. While blocks are validated this
    process only relays requests and stores verdicts, but with a large heap left from extraction
    its full collections held the GIL long enough to leave workers idle (~10% of validation time)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _retry_with_usage(store: Store, gate: "Gate", retry: list[tuple[tuple, ValidationRecord]],
                      save: Callable[..., None], report: BuildReport, progress: ProgressFn | None) -> dict[str, object]:
    """Harvest the sources of the failed blocks, then re-check those blocks with their recorded usage.
    A block keeps its first verdict unless recorded usage makes it pass."""
    modules: dict[str, set[str]] = {}  # source -> modules holding failed blocks
    for key, _ in retry:
        modules.setdefault(key[1], set()).add(key[5].module)
    ran = usage.HarvestStats()
    for src in sorted(modules):
        factories = usage.plan(store, src, modules[src])
        one = usage.run(store, gate, src, factories, (lambda d, t: progress("harvest", d, t)) if progress else None)
        ran.factories, ran.ok, ran.seconds = ran.factories + one.factories, ran.ok + one.ok, ran.seconds + one.seconds
    items = []
    for key, first in retry:
        assembled = key[6]
        found = usage.hints(store.conn, key[1], key[2])
        if found:
            items.append(((key, first), assembled.code, assembled.class_name, found))
        else:
            save(key, first)
            report.count(key[1], False, first.code)
    rescued = 0
    # recorded usage builds models at their real size (a detection model resizes to 800 px): more time
    limits = replace(gate.limits, timeout_s=gate.limits.timeout_s * 3, cpu_s=gate.limits.cpu_s * 3)
    for done, ((key, first), record) in enumerate(gate.check_many(items, limits), 1):
        best = record if record.ok else first
        save(key, best)
        report.count(key[1], best.ok, best.code)
        rescued += record.ok
        if progress:
            progress("retry", done, len(items))
    return {"factories": ran.factories, "factories_ok": ran.ok, "seconds": round(ran.seconds, 2),
            "retried": len(items), "rescued": rescued}


def _store(conn: sqlite3.Connection, workspace: Workspace, block_id: str, source: str, qualname: str, name: str,
           category: str, assembled: Assembled | None, record: ValidationRecord | None, closure: Closure | None,
           status: str, stage: str, code: str | None, message: str, rec: dict, seconds: float,
           version: str = GATE_VERSION) -> None:
    path = _file_for(workspace, block_id)
    sha = None
    if assembled is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(assembled.code, encoding="utf-8")
        os.replace(tmp, path)
        sha = hashlib.sha1(assembled.code.encode()).hexdigest()
    else:
        path.unlink(missing_ok=True)
    conn.execute(
        "INSERT OR REPLACE INTO library (block_id, source, qualname, name, category, class_name, path, code_sha1, files,"
        " requirements, status, stage, code, message, record, gate_version, extract_s, updated_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            block_id, source, qualname, name, category,
            assembled.class_name if assembled else None,
            str(path.relative_to(workspace.home)) if assembled else None,
            sha,
            json.dumps(closure.files if closure else {}),
            json.dumps([r.pep508 for r in assembled.requirements] if assembled else []),
            status, stage, code, message, json.dumps(rec, default=str), version, seconds, time.time(),
        ),
    )


# -- report -----------------------------------------------------------------------------------
def library_report(workspace: Workspace) -> BuildReport:
    """Figures over the stored library: pass rate, failures by code, per source."""
    report = BuildReport()
    with open_library(workspace) as store:
        rows = store.conn.execute("SELECT source, status, code, extract_s FROM library ORDER BY source").fetchall()
    for source, status, code, _ in rows:
        report.count(source, status == "validated", code)
    times = [r[3] for r in rows if r[3] is not None]
    report.extract_median_s = statistics.median(times) if times else None
    return report


def library_entries(workspace: Workspace, status: str | None = None) -> list[dict[str, object]]:
    with open_library(workspace) as store:
        sql = "SELECT block_id, name, source, category, status, stage, code, message, path, requirements FROM library"
        rows = store.conn.execute(sql + (" WHERE status=?" if status else "") + " ORDER BY block_id", (status,) if status else ()).fetchall()
    keys = ("id", "name", "source", "category", "status", "stage", "code", "message", "path", "requirements")
    return [dict(zip(keys, r)) for r in rows]


