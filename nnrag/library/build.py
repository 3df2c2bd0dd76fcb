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
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..db import connect, read_meta, write_meta
from ..errors import SourceError
from ..extraction.lending import check_prefer
from ..extraction.many import Extracted, extract_many
from ..extraction.key import extraction_keys
from ..indexing.lookup import BlockRef
from ..progress import ProgressFn
from ..validator.envs import check_requirements
from ..validator.record import MISSING_DEPENDENCY, Limits, ValidationRecord, gate_version
from ..workspace import Workspace
from . import lent, records
from . import pins as pins_of
from .report import BuildReport
from .environments import (corpus_packages, corpus_releases, explain_corpus_import, missing_distribution, needs_install,
                           settled_by_install, validate_in_environments)
from .retry import RETRY_CODES, Retry, awaiting_usage, retry_with_usage

if TYPE_CHECKING:
    from ..db import Database
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
    releases: bool = True,
    pins: dict[str, str] | None = None,
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
    validated by the next build that validates. Under ``install``, with ``releases``, a distribution pip
    cannot install is lent from its sdist (:mod:`nnrag.library.lent`) and the blocks that wait
    for it are judged again with its code copied; an installed distribution too new for the code
    (it imports what has moved away) is pinned to the release the code was written against
    (:mod:`nnrag.library.pins`), in an environment of its own. ``pins``: package -> that release.
    """
    check_requirements(requirements)
    started = time.perf_counter()
    options = BuildOptions(progress, harvest, check_prefer(prefer), requirements, validate, workers, pins or {})
    with connect(workspace) as db, _open_gate(scheduler, workers, limits) as gate:
        # a PyPI source's own release, for a copy that imports its compiled modules
        options = replace(options, pins={**corpus_releases(db), **options.pins})
        build = _Build(workspace, db, gate, options)
        rows = build.run(set(sources) if sources is not None else None, names, limit)
        if scheduler and not build.report.interrupted:
            build.report.cluster = {"scheduler": scheduler, "served": gate.served()}
        if names is None and limit is None and not build.report.interrupted:
            build.drop_gone(rows, set(sources) if sources is not None else None)
    report = build.report
    if releases and options.install and validate and not report.interrupted:
        report = _build_again(workspace, report, sources=sources, names=names, limit=limit, workers=workers,
                              limits=limits, progress=progress, harvest=harvest, scheduler=scheduler,
                              prefer=prefer, requirements=requirements)
    report.seconds = time.perf_counter() - started
    report.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return report


@dataclass(frozen=True)
class BuildOptions:
    """How a build runs, as :func:`build_library` documents."""

    progress: ProgressFn | None
    harvest: bool
    prefer: str
    requirements: str
    validate: bool
    workers: int | None  # extraction processes (None: as many as CPUs)
    # installed package -> the older release its blocks are judged with; a PyPI source's package
    # -> its own release (:func:`~nnrag.library.environments.corpus_releases`)
    pins: dict[str, str]

    @property
    def install(self) -> bool:
        return self.requirements == "install"


class _Build:
    """One build: which blocks are judged again, their extraction, their validation, and the report.

    What the library stored before (``known``, ``notes``, ``made``) decides what is reused; the
    candidates extracted now wait in ``pending`` for the gate."""

    def __init__(self, workspace: Workspace, db: "Database", gate: "Gate", options: BuildOptions) -> None:
        self.workspace, self.db, self.conn, self.gate, self.options = workspace, db, db.conn, gate, options
        self.report = BuildReport()
        self.known: dict[str, sqlite3.Row] = {}
        self.notes: dict[str, records.BuildNotes] = {}
        self.made: dict[str, str] = {}  # block id -> SHA-1 of the file made under the current extraction key
        self.pending: list[records.Candidate] = []
        self.names_of: dict[str, str] = {}
        self.extract_times: list[float] = []
        self.imported: Counter[str] = Counter()  # how many files import each module of the package they import the rest of
        self._corpus: frozenset[str] | None = None  # the corpus's top-level packages, read when first needed

    def run(self, wanted: set[str] | None, names: set[str] | None, limit: int | None) -> list[sqlite3.Row]:
        """Judge the selected blocks; return every block of the index (what is gone is dropped after)."""
        rows = self.conn.execute(
            "SELECT s.name AS source, f.module, b.qualname, b.name, b.category, json_extract(s.config, '$.lends') AS lends"
            " FROM blocks b JOIN sources s ON s.id=b.source_id JOIN files f ON f.id=b.file_id"
            " ORDER BY s.priority, s.name, b.qualname"
        ).fetchall()
        # discovery may have guessed a category again (a new discovery version): verdicts stand, categories
        # follow, stamped as every write of a row is, so search sees the library changed
        records.follow_categories(self.conn, [BlockRef.from_row(r) for r in rows])
        # a source that only lends code to the others is no part of the library
        selected = [r for r in rows if (wanted is None or r["source"] in wanted) and (names is None or r["name"] in names)
                    and not r["lends"]]
        if limit is not None:
            selected = selected[:limit]
        self.recall()
        todo = self.plan(selected)
        self.extract(todo, len(selected))
        self.validate()
        return rows

    # -- what the library holds ---------------------------------------------------------
    def recall(self) -> None:
        """Read the stored verdicts and notes; forget the files of sources whose extraction key changed."""
        conn = self.conn
        self.known = {r["block_id"]: r for r in conn.execute(
            "SELECT block_id, code_sha1, gate_version, status, code,"
            " CASE WHEN code='missing-dependency' THEN message END AS message,"  # a pinned release may answer it
            # what a block stored unjudged is validated from without extracting again
            " CASE WHEN status='not-run' THEN record END AS record,"
            " CASE WHEN status='not-run' THEN files END AS files, extract_s FROM library")}
        self.notes = records.notes(conn)
        # files made under the same extraction key (per source) are made again identically: reused
        # without extracting; under another key (a corpus or nnrag that is gone) they tell nothing
        keys = extraction_keys(conn, self.options.prefer)
        stored = read_meta(conn, "extraction_keys")
        before = json.loads(stored) if stored else {}
        for source in set(before) | set(keys):
            if before.get(source) != keys.get(source):
                records.forget_extractions(conn, source)
        write_meta(conn, "extraction_keys", json.dumps(keys, sort_keys=True))
        write_meta(conn, "extraction_key", None)  # the one key of every source, before
        self.made = records.extractions(conn)

    def install_may_change(self, prev: sqlite3.Row) -> bool:
        """Under ``--requirements install``: the block waits for a requirement, or its usage for
        one its package imports (a harvest that could not run), or it missed one and has not
        had its environment as that environment stands now."""
        if not self.options.install:
            return False
        noted = self.notes.get(prev["block_id"], records.BuildNotes())
        if noted.usage_waits_for and self.options.harvest:
            return True
        if not (noted.waits_for or prev["code"] == MISSING_DEPENDENCY):
            return False
        if noted.waits_for or not settled_by_install(self.workspace, noted.environment, noted.not_installable):
            return True
        # an environment that stands, whose release of a package is too new for the code: pinned now
        if not self.options.pins:
            return False
        if self._corpus is None:
            self._corpus = corpus_packages(self.db)
        top = pins_of.outdated_package(prev["message"] or "", self._corpus, noted.environment or ())
        pinned = self.options.pins.get(top) if top else None
        return bool(pinned) and pinned not in (noted.environment or ())

    def same_file(self, block_id: str, sha1: str | None) -> bool:
        """Whether the stored record of ``block_id`` is of the file of SHA-1 ``sha1``."""
        prev = self.known.get(block_id)
        return bool(prev and sha1 and sha1 in (prev["code_sha1"], self.notes[block_id].extracted_as))

    def reusable(self, block_id: str, sha1: str | None) -> bool:
        """Whether the stored verdict of ``block_id`` judged the file of SHA-1 ``sha1`` and stands."""
        prev = self.known.get(block_id)
        # a build that does not validate keeps any verdict of an unchanged file, an older gate's too,
        # and leaves a block stored unjudged so
        return bool(prev and self.same_file(block_id, sha1)
                    and (prev["gate_version"] == gate_version() or not self.options.validate)
                    and records.file_for(self.workspace, block_id).exists()
                    and not self.install_may_change(prev))

    def reuse(self, ref: BlockRef) -> None:
        prev = self.known[ref.block_id]
        if prev["status"] == records.NOT_RUN:
            self.report.not_validated += 1
            return
        self.report.cached += 1
        self.report.count(ref.source, prev["status"] == "validated", prev["code"])

    def unjudged(self, ref: BlockRef, name: str) -> records.Candidate | None:
        """A block a build without validation stored, its file as made under the current key."""
        prev, path = self.known.get(ref.block_id), records.file_for(self.workspace, ref.block_id)
        if not (self.options.validate and prev and prev["status"] == records.NOT_RUN and prev["code_sha1"]
                and self.made.get(ref.block_id) == prev["code_sha1"] and path.is_file()):
            return None
        return records.Candidate.stored(ref, name, prev, path.read_text(encoding="utf-8"))

    def plan(self, selected: list[sqlite3.Row]) -> list[BlockRef]:
        """Reuse what stands, queue what was stored unjudged; return the blocks to extract."""
        todo: list[BlockRef] = []
        for row in selected:
            ref = BlockRef.from_row(row)
            if self.reusable(ref.block_id, self.made.get(ref.block_id)):
                self.reuse(ref)
            elif kept := self.unjudged(ref, row["name"]):
                self.queue(kept, kept.shell.package_modules)
            else:
                todo.append(ref)
                self.names_of[ref.block_id] = row["name"]
        if self.options.progress and len(selected) > len(todo):
            self.options.progress("extract", len(selected) - len(todo), len(selected))
        return todo

    def queue(self, candidate: records.Candidate, package_modules: Iterable[str]) -> None:
        if not self.pending:
            self.gate.warm()  # torch imports in the workers while the other blocks are extracted
        self.imported.update(package_modules)
        self.pending.append(candidate)

    # -- extraction ---------------------------------------------------------------------
    def extract(self, todo: list[BlockRef], total: int) -> None:
        progress = self.options.progress
        try:
            with contextlib.closing(extract_many(self.conn, self.workspace, todo, self.options.prefer,
                                                 self.options.workers)) as made_now:
                for n, x in enumerate(made_now, total - len(todo) + 1):
                    self.extracted(x)
                    if progress:
                        progress("extract", n, total)
        except KeyboardInterrupt:
            self.report.interrupted, self.pending = True, []  # stored unjudged, judged by the next build
            self.imported.clear()
        self.report.extract_median_s = statistics.median(self.extract_times) if self.extract_times else None

    def extracted(self, x: Extracted) -> None:
        """Store what extracting one block gave, at once: a build stopped before the gate judges
        the block resumes from its stored file instead of extracting it again."""
        ref, name, report = x.ref, self.names_of[x.ref.block_id], self.report
        self.extract_times.append(x.seconds)
        report.extracted += 1
        if x.assembled is None:
            records.save(self.conn, self.workspace, records.Verdict(
                ref.block_id, ref.source, ref.qualname, name, ref.category, "failed", "extract",
                x.issues[0].code, "; ".join(str(i) for i in x.issues)[:2000],
                records.StoredRecord(issues=tuple(asdict(i) for i in x.issues)),
                x.seconds, gate_version(), None, x.files))
            report.count(ref.source, False, x.issues[0].code)
            return
        sha1 = records.code_sha1(x.assembled.code)
        records.remember_extraction(self.conn, ref.block_id, sha1)
        if self.reusable(ref.block_id, sha1):
            self.reuse(ref)
            return
        candidate = records.Candidate.of(ref, name, x.files, x.assembled, x.seconds)
        # an older gate's verdict of this very file stands until the new one replaces it
        if not self.options.validate or not self.same_file(ref.block_id, sha1):
            records.save(self.conn, self.workspace, candidate.not_run())
        if not self.options.validate:
            report.not_validated += 1
            return
        self.queue(candidate, x.assembled.package_modules)

    # -- validation ---------------------------------------------------------------------
    def validate(self) -> None:
        """Judge every pending candidate; then give those that miss a requirement or failed on a
        guess their second chance (an environment that has it, the usage of their source)."""
        options, report, gate = self.options, self.report, self.gate
        gate.preload(m for m, n in self.imported.items() if n >= _PRELOAD_SHARED)
        started = time.perf_counter()
        corpus = corpus_packages(self.db)
        retry: list[Retry] = []
        waiting: list[tuple[records.Candidate, ValidationRecord]] = []  # for a requirement not installed here
        try:
            with _gc_frozen():
                done = 0
                for candidate, record in gate.check_many((c, c.code, c.class_name) for c in self.pending):
                    self.judged(candidate, record, corpus, retry, waiting)
                    done += 1
                    if options.progress:
                        options.progress("validate", done, len(self.pending))
                if done:
                    report.validate_per_s = done / (time.perf_counter() - started)
                if waiting and options.install:  # before the retry: it adds blocks to retry
                    report.requirements = validate_in_environments(self.db, self.workspace, waiting, corpus, gate.workers,
                                                                   gate.limits, report, options.progress,
                                                                   retry if options.harvest else None, options.pins)
                elif waiting:
                    report.requirements = {"needs_install": needs_install(waiting, corpus)}
                if retry:
                    report.harvest = retry_with_usage(self.db, self.workspace, gate, retry, report, options.progress,
                                                      corpus, options.install, options.prefer)
        except KeyboardInterrupt:
            report.interrupted = True

    def judged(self, candidate: records.Candidate, record: ValidationRecord, corpus: frozenset[str],
               retry: list[Retry], waiting: list[tuple[records.Candidate, ValidationRecord]]) -> None:
        """Store the gate's first verdict of ``candidate``, or hold it for its second chance."""
        conn, workspace, options = self.conn, self.workspace, self.options
        # a failure that ran into an optional import's fallback waits for that import first
        needs = missing_distribution(record, corpus, candidate.code, options.pins)
        # a pass on a stand-in layer is retried too: recorded usage may build it with the real part
        if options.harvest and (not record.ok and record.code in RETRY_CODES or record.on_stand_ins) \
                and not (needs and options.install):
            records.save(conn, workspace, candidate.verdict(record, awaiting_usage()))
            retry.append(Retry(candidate, record))
        elif needs:
            waiting.append((candidate, record))
            if options.install:  # counted after its second chance
                records.save(conn, workspace, candidate.verdict(record, awaiting_usage()))
            else:  # redone when a build may install what it waits for
                records.save(conn, workspace, candidate.verdict(record).noted(waits_for=needs))
                self.report.count(candidate.ref.source, record.ok, record.code)
        else:
            record = explain_corpus_import(record, corpus)
            records.save(conn, workspace, candidate.verdict(record))
            self.report.count(candidate.ref.source, record.ok, record.code)

    def drop_gone(self, rows: list[sqlite3.Row], wanted: set[str] | None) -> None:
        """Drop the stored files of blocks gone from their source."""
        current = {f"{r['source']}:{r['qualname']}" for r in rows}
        for block_id, source in self.conn.execute("SELECT block_id, source FROM library").fetchall():
            if (wanted is None or source in wanted) and block_id not in current:
                records.drop(self.conn, self.workspace, block_id)


_LENDING_ROUNDS = 3  # mmcv lent, then mmdet 2, installed, found to import it: lent in the next round


def _build_again(workspace: Workspace, report: BuildReport, **build: Any) -> BuildReport:
    """Lend each distribution pip could not install from its sdist, pin each installed one too new
    for the code to an older release and, when either happened, build again: the blocks that
    waited are extracted with the code lent and judged in the pinned releases' environments, the
    others reused. A distribution that an installed one imports and that is only lent makes the
    installed one lent too, in another round; so does an installed package too new for an
    installed distribution's own import that no release pins."""
    from ..indexing.indexer import index_sources

    outcome: list[lent.Lending] = []
    pinned: list[pins_of.Pin] = []
    for round_ in range(_LENDING_ROUNDS):
        with connect(workspace) as db:
            indexed = {r["name"] for r in db.conn.execute("SELECT name FROM sources")}
            corpus = corpus_packages(db)
            if round_ == 0:
                pinned = pins_of.pins(workspace, db.conn, corpus)
            # what imports a package too new for it that no release pins is lent instead
            unpinned = frozenset(p.package for p in pinned if not p.version)
            lenders, lendings = lent.lending_sources(workspace, db.conn, indexed, corpus, unpinned)
        outcome += [o for o in lendings if round_ == 0 or o.version or o.repository]  # what a later round lends
        if lenders:
            try:
                index_sources(workspace, lenders, workers=build.get("workers"), progress=build.get("progress"))
            except SourceError as exc:  # none of them could be fetched (a repository offline): the build goes on
                log.warning("cannot lend %s: %s", ", ".join(s.spec for s in lenders), exc)
                lenders = []
        chosen = {p.package: p.requirement for p in pinned if p.version}
        if not (lenders or (chosen and round_ == 0)):
            break
        # the next build reuses what the last judged: what only the first saw stays in the report
        instead = report.requirements.get("declared_instead")
        report = build_library(workspace, **build, releases=False, pins=chosen)
        if instead:
            report.requirements["declared_instead"] = {**instead, **report.requirements.get("declared_instead", {})}
    if outcome:
        report.requirements["lent"] = [o.to_dict() for o in outcome]
    if pinned:
        report.requirements["pinned"] = [p.to_dict() for p in pinned]
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
