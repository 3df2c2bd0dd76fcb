"""``nnrag build``: extract every selected block, validate it through the gate, store its file and
verdict. A block is re-validated only when its extracted text (SHA-1) or the gate changes, and
extracted again only when what its file depends on changes (:mod:`nnrag.extraction.key`), so an
interrupted build resumes where it stopped and an unchanged corpus costs next to nothing."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import resource
import sqlite3
import statistics
import time
from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING, Iterable, Iterator

from ..db import connect, read_meta, write_meta
from ..extraction.lending import check_prefer
from ..extraction.many import Extracted, extract_many
from ..extraction.key import extraction_keys
from ..indexing.lookup import BlockRef
from ..progress import ProgressFn
from ..validator.envs import check_requirements
from ..validator.record import MISSING_DEPENDENCY, Limits, ValidationRecord, gate_version
from ..workspace import Workspace
from . import records
from .report import BuildReport
from .environments import (corpus_packages, explain_corpus_import, missing_distribution, needs_install, settled_by_install,
                           validate_in_environments)
from .retry import RETRY_CODES, Retry, awaiting_usage, retry_with_usage

if TYPE_CHECKING:
    from ..validator.gate import Gate

log = logging.getLogger(__name__)

# a module of its own package that this many files importing the rest of it import is loaded once per
# validation worker (Gate.preload), not once per candidate
_PRELOAD_SHARED = 3


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
    prefer: str = "installed",
    requirements: str = "off",
    validate: bool = True,
) -> BuildReport:
    """Extract and validate every selected block; store files and verdicts.

    Blocks that fail on guessed arguments or inputs are retried with the usage recorded by running
    their source's own model factories (``harvest``; see ``nnrag.validator.usage``). With
    ``scheduler`` (a Dask scheduler's address) the blocks are validated on that cluster's workers.
    ``prefer``: a package another indexed source provides is copied from it (``corpus``), or only
    when no installed distribution provides it (``installed``, the default). ``requirements``:
    ``install`` validates blocks that miss a third-party distribution again in an environment that
    has it; ``off`` (the default) installs nothing and reports what they wait for. Without
    ``validate`` the extracted blocks are stored unjudged (``not-run``): searchable at once, and
    validated by the next build that validates.
    """
    check_requirements(requirements)
    started = time.perf_counter()
    report = BuildReport()
    with connect(workspace) as db, _open_gate(scheduler, workers, limits) as gate:
        conn = db.conn
        wanted = set(sources) if sources is not None else None
        rows = conn.execute(
            "SELECT s.name AS source, f.module, b.qualname, b.name, b.category FROM blocks b"
            " JOIN sources s ON s.id=b.source_id JOIN files f ON f.id=b.file_id ORDER BY s.priority, s.name, b.qualname"
        ).fetchall()
        # discovery may have guessed a category again (a new discovery version): verdicts stand, categories
        # follow, stamped as every write of a row is, so search sees the library changed
        records.follow_categories(conn, [BlockRef.from_row(r) for r in rows])
        selected = [r for r in rows if (wanted is None or r["source"] in wanted) and (names is None or r["name"] in names)]
        if limit is not None:
            selected = selected[:limit]
        known = {r["block_id"]: r for r in conn.execute(
            "SELECT block_id, code_sha1, gate_version, status, code,"
            # what a block stored unjudged is validated from without extracting again
            " CASE WHEN status='not-run' THEN record END AS record,"
            " CASE WHEN status='not-run' THEN files END AS files, extract_s FROM library")}
        notes = records.notes(conn)
        prefer = check_prefer(prefer)
        pending: list[records.Candidate] = []
        extract_times: list[float] = []
        total = len(selected)
        # files made under the same extraction key (per source) are made again identically: reused
        # without extracting; under another key (a corpus or nnrag that is gone) they tell nothing
        keys = extraction_keys(conn, prefer)
        stored = read_meta(conn, "extraction_keys")
        before = json.loads(stored) if stored else {}
        for source in set(before) | set(keys):
            if before.get(source) != keys.get(source):
                records.forget_extractions(conn, source)
        write_meta(conn, "extraction_keys", json.dumps(keys, sort_keys=True))
        write_meta(conn, "extraction_key", None)  # the one key of every source, before
        made = records.extractions(conn)
        imported: Counter[str] = Counter()  # how many files import each module of the package they import the rest of

        def install_may_change(prev: sqlite3.Row) -> bool:
            """Under ``--requirements install``: the block waits for a requirement, or its usage for
            one its package imports (a harvest that could not run), or it missed one and has not
            had its environment as that environment stands now."""
            if requirements != "install":
                return False
            noted = notes.get(prev["block_id"], records.BuildNotes())
            if noted.usage_waits_for and harvest:
                return True
            if not (noted.waits_for or prev["code"] == MISSING_DEPENDENCY):
                return False
            return bool(noted.waits_for) or not settled_by_install(workspace, noted.environment, noted.not_installable)

        def same_file(block_id: str, sha1: str | None) -> bool:
            """Whether the stored record of ``block_id`` is of the file of SHA-1 ``sha1``."""
            prev = known.get(block_id)
            return bool(prev and sha1 and sha1 in (prev["code_sha1"], notes[block_id].extracted_as))

        def reusable(block_id: str, sha1: str | None) -> bool:
            """Whether the stored verdict of ``block_id`` judged the file of SHA-1 ``sha1`` and stands."""
            prev = known.get(block_id)
            # a build that does not validate keeps any verdict of an unchanged file, an older gate's too,
            # and leaves a block stored unjudged so
            return bool(prev and same_file(block_id, sha1)
                        and (prev["gate_version"] == gate_version() or not validate)
                        and records.file_for(workspace, block_id).exists()
                        and not install_may_change(prev))

        def reuse(ref: BlockRef) -> None:
            prev = known[ref.block_id]
            if prev["status"] == records.NOT_RUN:
                report.not_validated += 1
                return
            report.cached += 1
            report.count(ref.source, prev["status"] == "validated", prev["code"])

        def unjudged(ref: BlockRef, name: str) -> records.Candidate | None:
            """A block a build without validation stored, its file as made under the current key."""
            prev, path = known.get(ref.block_id), records.file_for(workspace, ref.block_id)
            if not (validate and prev and prev["status"] == records.NOT_RUN and prev["code_sha1"]
                    and made.get(ref.block_id) == prev["code_sha1"] and path.is_file()):
                return None
            return records.Candidate.stored(ref, name, prev, path.read_text(encoding="utf-8"))

        names_of: dict[str, str] = {}
        todo: list[BlockRef] = []
        for row in selected:
            ref = BlockRef.from_row(row)
            if reusable(ref.block_id, made.get(ref.block_id)):
                reuse(ref)
            elif kept := unjudged(ref, row["name"]):
                if not pending:
                    gate.warm()
                imported.update(kept.shell.package_modules)
                pending.append(kept)
            else:
                todo.append(ref)
                names_of[ref.block_id] = row["name"]
        if progress and total > len(todo):
            progress("extract", total - len(todo), total)

        def extracted(x: Extracted) -> None:
            """Store what extracting one block gave, at once: a build stopped before the gate judges
            the block resumes from its stored file instead of extracting it again."""
            ref, name = x.ref, names_of[x.ref.block_id]
            extract_times.append(x.seconds)
            report.extracted += 1
            if x.assembled is None:
                records.save(conn, workspace, records.Verdict(
                    ref.block_id, ref.source, ref.qualname, name, ref.category, "failed", "extract",
                    x.issues[0].code, "; ".join(str(i) for i in x.issues)[:2000], {"issues": [asdict(i) for i in x.issues]},
                    x.seconds, gate_version(), None, x.files))
                report.count(ref.source, False, x.issues[0].code)
                return
            sha1 = records.code_sha1(x.assembled.code)
            records.remember_extraction(conn, ref.block_id, sha1)
            if reusable(ref.block_id, sha1):
                reuse(ref)
                return
            candidate = records.Candidate.of(ref, name, x.files, x.assembled, x.seconds)
            # an older gate's verdict of this very file stands until the new one replaces it
            if not validate or not same_file(ref.block_id, sha1):
                records.save(conn, workspace, candidate.not_run())
            if not validate:
                report.not_validated += 1
                return
            if not pending:
                gate.warm()  # torch imports in the workers while the other blocks are extracted
            imported.update(x.assembled.package_modules)
            pending.append(candidate)

        try:
            with contextlib.closing(extract_many(conn, workspace, todo, prefer, workers)) as made_now:
                for n, x in enumerate(made_now, total - len(todo) + 1):
                    extracted(x)
                    if progress:
                        progress("extract", n, total)
        except KeyboardInterrupt:
            report.interrupted, pending = True, []  # stored unjudged, judged by the next build
            imported.clear()
        report.extract_median_s = statistics.median(extract_times) if extract_times else None
        gate.preload(m for m, n in imported.items() if n >= _PRELOAD_SHARED)
        v_started = time.perf_counter()
        done = 0
        retry: list[Retry] = []
        corpus = corpus_packages(db)
        waiting: list[tuple[records.Candidate, ValidationRecord]] = []  # for a requirement not installed here
        try:
            with _gc_frozen():
                for candidate, record in gate.check_many((c, c.code, c.class_name) for c in pending):
                    # a failure that ran into an optional import's fallback waits for that import first
                    needs = missing_distribution(record, corpus, candidate.code)
                    if harvest and not record.ok and record.code in RETRY_CODES and not (needs and requirements == "install"):
                        records.save(conn, workspace, candidate.verdict(record, awaiting_usage()))
                        retry.append(Retry(candidate, record))
                    elif needs:
                        waiting.append((candidate, record))
                        if requirements == "install":  # counted after its second chance
                            records.save(conn, workspace, candidate.verdict(record, awaiting_usage()))
                        else:  # redone when a build may install what it waits for
                            records.save(conn, workspace, candidate.verdict(record).noted(waits_for=needs))
                            report.count(candidate.ref.source, record.ok, record.code)
                    else:
                        record = explain_corpus_import(record, corpus)
                        records.save(conn, workspace, candidate.verdict(record))
                        report.count(candidate.ref.source, record.ok, record.code)
                    done += 1
                    if progress:
                        progress("validate", done, len(pending))
                if done:
                    report.validate_per_s = done / (time.perf_counter() - v_started)
                if waiting and requirements == "install":  # before the retry: it adds blocks to retry
                    report.requirements = validate_in_environments(db, workspace, waiting, corpus, gate.workers,
                                                                   gate.limits, report, progress,
                                                                   retry if harvest else None)
                elif waiting:
                    report.requirements = {"needs_install": needs_install(waiting, corpus)}
                if retry:
                    report.harvest = retry_with_usage(db, workspace, gate, retry, report, progress, corpus,
                                                      requirements == "install", prefer)
        except KeyboardInterrupt:
            report.interrupted = True
        if scheduler and not report.interrupted:
            report.cluster = {"scheduler": scheduler, "served": gate.served()}
        if names is None and limit is None and not report.interrupted:
            current = {f"{r['source']}:{r['qualname']}" for r in rows}
            for block_id, source in conn.execute("SELECT block_id, source FROM library").fetchall():
                if (wanted is None or source in wanted) and block_id not in current:
                    # the block is gone from its source: drop the stale file
                    records.drop(conn, workspace, block_id)
    report.seconds = time.perf_counter() - started
    report.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return report


def _open_gate(scheduler: str | None, workers: int | None, limits: Limits | None) -> "Gate":
    if scheduler:
        from ..validator.cluster import ClusterGate

        return ClusterGate(scheduler, None, limits)  # as many in flight as the cluster has threads
    from ..validator.gate import Gate

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
