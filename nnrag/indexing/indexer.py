"""Index corpus sources into SQLite: list, diff against the index, parse in parallel, discover.

- Incremental: a file whose size and mtime match the index is not read; one whose stat changed
  is hashed, and parsed only when its SHA-1 changed. Files gone from a source are forgotten.
- Resumable: results are committed batch by batch, so a run stopped by Ctrl-C or ``kill -9``
  keeps everything it committed and the next run parses only the rest.
- Robust: a file that fails to parse is recorded with its reason; a file that crashes the parser
  process is retried alone and then recorded as ``parser-crash``. The run goes on.
"""

from __future__ import annotations

import fcntl
import json
import logging
import multiprocessing
import os
import signal
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..errors import ConfigError, IndexStoreError, SourceError
from ..workspace import Workspace
from .discovery import discover, discovery_version
from ..progress import ProgressFn
from ..sourcing.fetch import materialize
from ..sourcing.spec import REASON_PARSER_CRASH, Materialized, SourceSpec, module_names, namespace_dirs
from .parse import ParsedFile, parse_batch, parser_version
from .store import PARSE_AGAIN, DiscoveryStamp, Store, open_or_rebuild

log = logging.getLogger(__name__)

#: ``progress(phase, done, total)``; phase is a short label such as ``"parse"``.

# Below this much work, starting worker processes costs more than it saves.
_INLINE_MAX_FILES = 48
_INLINE_MAX_BYTES = 1 << 20
_BATCH_MAX_FILES = 32
_BATCH_MAX_BYTES = 512 << 10


@dataclass(frozen=True)
class SourceReport:
    name: str
    spec: str
    kind: str
    version: str | None
    commit: str | None
    license: str | None
    note: str | None
    files: int
    lines: int
    parsed: int
    unchanged: int
    removed: int
    failed: int
    blocks: int


@dataclass(frozen=True)
class IndexReport:
    sources: list[SourceReport]
    files: int
    lines: int
    parsed: int
    unchanged: int
    removed: int
    failures: dict[str, int]
    blocks: int
    seconds: float
    workers: int
    interrupted: bool = False
    errors: dict[str, str] = field(default_factory=dict)  # source name -> why it was not indexed

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class _Task:
    source_id: int
    path: str
    abspath: str
    module: str
    size: int
    mtime_ns: int
    known_sha1: str | None
    old_id: int | None


@dataclass
class _Counts:
    parsed: Counter[int] = field(default_factory=Counter)
    unchanged: Counter[int] = field(default_factory=Counter)
    removed: Counter[int] = field(default_factory=Counter)


class _IndexLock:
    """One index run per home at a time; readers are never blocked (WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fh = None

    def __enter__(self) -> "_IndexLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "w")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self.fh.close()
            raise IndexStoreError(
                f"another `nnrag index` is writing {self.path.parent}; wait for it or use another --home"
            ) from exc
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fh is not None:
            fcntl.flock(self.fh, fcntl.LOCK_UN)
            self.fh.close()


def _worker_init() -> None:
    # The parent decides what Ctrl-C means; workers must not die mid-batch on their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _register(store: Store, m: Materialized) -> tuple[int, bool]:
    """Insert or update a source row; returns its id and whether discovery must run again for it."""
    spec = m.spec
    row = store.source_row(spec.name)
    if row is not None and row["spec"] != spec.spec:
        raise ConfigError(
            f"source name {spec.name!r} already indexes {row['spec']}; give {spec.spec} another name "
            f"(name = \"...\" in a corpus file) or run `nnrag forget {spec.name}` first"
        )
    config = json.dumps(spec.config(), sort_keys=True)
    stale = row is None or row["config"] != config or row["state"] != "complete"
    values = (
        spec.spec,
        spec.kind,
        str(m.root),
        m.module_style,
        spec.priority,
        config,
        m.version,
        m.commit,
        m.license,
        m.note,
    )
    return store.register_source(spec.name, values, None if row is None else int(row["id"])), stale


def _plan(store: Store, source_id: int, m: Materialized, counts: _Counts) -> tuple[list[_Task], bool]:
    """Diff a source's listing against the index; returns the files to parse and whether anything changed."""
    if store.parsed_by(source_id) != parser_version():
        with store.transaction():  # every file is parsed again, also after an interruption
            store.mark_for_parse(source_id, parser_version())
    states = store.file_states(source_id)
    package_dirs = frozenset(f.path.rsplit("/", 1)[0] if "/" in f.path else "" for f in m.files if f.path.endswith("__init__.py"))
    package_dirs |= namespace_dirs(m.files, package_dirs)
    tasks: list[_Task] = []
    seen: set[str] = set()
    changed = False
    renamed: list[tuple[int, int, int, str]] = []
    modules = module_names([f.path for f in m.files], m.module_style, package_dirs)
    for f in m.files:
        seen.add(f.path)
        state = states.get(f.path)
        module = modules[f.path]
        if state is not None and state.size == f.size and state.mtime_ns == f.mtime_ns:
            counts.unchanged[source_id] += 1
            if state.status == "ok" and state.module != module:  # an __init__.py came or went above it
                renamed.append((state.id, f.size, f.mtime_ns, module))
            continue
        tasks.append(
            _Task(
                source_id,
                f.path,
                f.abspath,
                module,
                f.size,
                f.mtime_ns,
                known_sha1=state.sha1 if state is not None and state.mtime_ns != PARSE_AGAIN else None,
                old_id=state.id if state is not None else None,
            )
        )
    with store.transaction():
        for file_id, size, mtime_ns, module in renamed:
            store.touch_file(file_id, size, mtime_ns, module)
            changed = True
        for issue in m.issues:
            seen.add(issue.path)
            state = states.get(issue.path)
            if state is not None and state.status == "error" and state.sha1 is None:
                counts.unchanged[source_id] += 1
                continue
            failed = ParsedFile(path=issue.path, sha1=None, size=0, reason=issue.reason, message=issue.message)
            store.write_parsed(source_id, failed, None, 0, state.id if state else None)
            changed = True
        gone = [state.id for path, state in states.items() if path not in seen]
        if gone:
            store.delete_files(gone)
            counts.removed[source_id] += len(gone)
            changed = True
    return tasks, changed


def _batches(tasks: list[_Task]) -> list[list[_Task]]:
    out: list[list[_Task]] = []
    cur: list[_Task] = []
    size = 0
    for t in sorted(tasks, key=lambda t: -t.size):  # big files first: better load balance
        cur.append(t)
        size += t.size
        if len(cur) >= _BATCH_MAX_FILES or size >= _BATCH_MAX_BYTES:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


def _payload(batch: list[_Task]) -> list[tuple[str, str, str | None]]:
    return [(t.path, t.abspath, t.known_sha1) for t in batch]


def _commit(store: Store, batch: list[_Task], results: list[ParsedFile], counts: _Counts) -> None:
    with store.transaction():
        for task, parsed in zip(batch, results):
            if parsed.unchanged and task.old_id is not None:
                store.touch_file(task.old_id, task.size, task.mtime_ns, task.module)
                counts.unchanged[task.source_id] += 1
                continue
            store.write_parsed(task.source_id, parsed, task.module, task.mtime_ns, task.old_id)
            counts.parsed[task.source_id] += 1


def _crashed(task: _Task) -> ParsedFile:
    return ParsedFile(
        path=task.path,
        sha1=None,
        size=task.size,
        reason=REASON_PARSER_CRASH,
        message="the parser process died on this file (e.g. a crash in the C parser); it was skipped",
    )


def _run_pool(
    store: Store, batches: list[list[_Task]], workers: int, counts: _Counts, tick: Callable[[int], None]
) -> None:
    pending = list(batches)
    while pending:
        ctx = multiprocessing.get_context("forkserver")
        retry: list[list[_Task]] = []
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init) as pool:
            futures: dict[Future[list[ParsedFile]], list[_Task]] = {
                pool.submit(parse_batch, _payload(b)): b for b in pending
            }
            try:
                while futures:
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in done:
                        batch = futures.pop(fut)
                        try:
                            results = fut.result()
                        except BrokenProcessPool:
                            retry.append(batch)
                            continue
                        _commit(store, batch, results, counts)
                        tick(len(batch))
            except BaseException:
                for fut in futures:
                    fut.cancel()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        # A worker died: retry its batches one file at a time; a file that kills a lone
        # worker again is recorded as a crash.
        pending = []
        for batch in retry:
            if len(batch) == 1:
                _commit(store, batch, [_crashed(batch[0])], counts)
                tick(1)
            else:
                pending.extend([t] for t in batch)


def index_sources(
    workspace: Workspace,
    specs: Sequence[SourceSpec],
    *,
    workers: int | None = None,
    progress: ProgressFn | None = None,
) -> IndexReport:
    """Index ``specs`` into the workspace's index, incrementally, and re-run discovery."""
    start = time.perf_counter()
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"two sources are named {dup!r}: give each a distinct name in the corpus file")
    workspace.ensure()
    report_progress = progress or (lambda phase, done, total: None)
    counts = _Counts()
    interrupted = False
    with _IndexLock(workspace.home / "index.lock"), open_or_rebuild(workspace.index_path) as store:
        tasks: list[_Task] = []
        changed = False
        source_ids: list[int] = []
        errors: dict[str, str] = {}
        for i, spec in enumerate(specs):
            report_progress(f"list {spec.name}", i, len(specs))
            try:
                m = materialize(spec, workspace.cache_dir)
            except SourceError as exc:  # one unreachable source must not cost the others their run
                errors[spec.name] = str(exc)
                continue
            source_id, stale = _register(store, m)
            source_ids.append(source_id)
            source_tasks, source_changed = _plan(store, source_id, m, counts)
            tasks.extend(source_tasks)
            changed = changed or source_changed or stale
        report_progress("list", len(specs), len(specs))
        if errors and not source_ids:  # nothing goes on: the error is the command's, said once
            raise SourceError("; ".join(errors.values()))
        for name, message in errors.items():
            log.error("%s: %s", name, message)

        total = len(tasks)
        done = 0

        def tick(n: int) -> None:
            nonlocal done
            done += n
            report_progress("parse", done, total)

        n_workers = max(1, workers or min(os.cpu_count() or 1, 8))
        try:
            if tasks:
                changed = True
                report_progress("parse", 0, total)
                inline = n_workers == 1 or len(tasks) <= _INLINE_MAX_FILES or sum(t.size for t in tasks) <= _INLINE_MAX_BYTES
                if inline:
                    for batch in _batches(tasks):
                        _commit(store, batch, parse_batch(_payload(batch)), counts)
                        tick(len(batch))
                else:
                    _run_pool(store, _batches(tasks), n_workers, counts, tick)
        except KeyboardInterrupt:
            interrupted = True
            log.info("interrupted: %d of %d files committed; run the same command again to resume", done, total)
        if not interrupted:
            store.sources_complete(source_ids)
            has_blocks = store.conn.execute("SELECT 1 FROM blocks LIMIT 1").fetchone() is not None
            if changed or not has_blocks or _discovered_by(store) != discovery_version():
                report_progress("discover", 0, 1)
                refresh_blocks(store)
                store.collect_garbage()
                report_progress("discover", 1, 1)
        report = _report(store, source_ids, counts, time.perf_counter() - start, n_workers, interrupted)
        return replace(report, errors=errors)


def _discovered_by(store: Store) -> str | None:
    return DiscoveryStamp.read(store.conn).version


def refresh_blocks(store: Store) -> int:
    """Re-run discovery over the whole index and replace the blocks table."""
    result = discover(store.conn)
    store.replace_blocks(result.blocks, DiscoveryStamp(discovery_version(), result.classes, result.modules_not_blocks,
                                                       result.unresolved_bases, result.template_copies))
    log.info("discovered %d blocks among %d classes (%d copies in template files left out)", len(result.blocks),
             result.classes, result.template_copies)
    return len(result.blocks)


def _report(
    store: Store, source_ids: Iterable[int], counts: _Counts, seconds: float, workers: int, interrupted: bool
) -> IndexReport:
    reports: list[SourceReport] = []
    failures: Counter[str] = Counter()
    for sid in source_ids:
        row = store.conn.execute(
            "SELECT name, spec, kind, version, git_commit, license, note FROM sources WHERE id=?", (sid,)
        ).fetchone()
        files, lines, failed = store.conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(lines), 0), COALESCE(SUM(status='error'), 0) FROM files WHERE source_id=?",
            (sid,),
        ).fetchone()
        for reason, n in store.conn.execute(
            "SELECT reason, COUNT(*) FROM files WHERE source_id=? AND status='error' GROUP BY reason", (sid,)
        ):
            failures[reason] += n
        blocks = store.conn.execute("SELECT COUNT(*) FROM blocks WHERE source_id=?", (sid,)).fetchone()[0]
        reports.append(
            SourceReport(
                name=row["name"],
                spec=row["spec"],
                kind=row["kind"],
                version=row["version"],
                commit=row["git_commit"],
                license=row["license"],
                note=row["note"],
                files=files,
                lines=lines,
                parsed=counts.parsed[sid],
                unchanged=counts.unchanged[sid],
                removed=counts.removed[sid],
                failed=failed,
                blocks=blocks,
            )
        )
    return IndexReport(
        sources=reports,
        files=sum(r.files for r in reports),
        lines=sum(r.lines for r in reports),
        parsed=sum(r.parsed for r in reports),
        unchanged=sum(r.unchanged for r in reports),
        removed=sum(r.removed for r in reports),
        failures=dict(sorted(failures.items())),
        blocks=sum(r.blocks for r in reports),
        seconds=round(seconds, 3),
        workers=workers,
        interrupted=interrupted,
    )
