"""The second chance: blocks that failed on guessed arguments or inputs are checked again with
the usage recorded by running their source's own model factories and documented examples (see
``nnrag.validator.usage``), in the requirement environment the blocks needed, if any."""

from __future__ import annotations

import contextlib
import logging
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterator

from ..db import Database
from ..extraction.block import Extractors
from ..progress import ProgressFn
from ..sourcing.declared import declared_requirements
from ..validator.envs import distribution_for, environment, to_install, widest_environment
from ..validator.record import MISSING_DEPENDENCY, Limits, ValidationRecord, gate_version
from ..validator.usage import runs as usage
from ..workspace import Workspace
from . import records
from .companions import Finder, wanted_attribute
from .parents import passing_parents
from .report import BuildReport

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..validator.gate import Gate

def awaiting_usage() -> str:
    """The gate version that marks a guess-based failure waiting for its retry with recorded usage:
    no gate's own, so the next build does it again."""
    return gate_version() + "-guess"


# Failures that recorded arguments or inputs may fix; a missing key too: a registry name a guessed
# argument made up (``depth=300`` of a VGG), or a key the forward reads off a dict input (``data["image0"]``).
RETRY_CODES = {"constructor-args", "input-inference", "runtime-error", "timeout", "memory", "backward-error",
               "dynamic-registry"}
_ROUNDS = 4  # environments a source's harvest may widen through, each with what it stopped at


@dataclass(frozen=True)
class Retry:
    """A block waiting for its second chance, with its first verdict and the requirement
    environment it was checked in (empty: this one)."""

    candidate: records.Candidate
    first: ValidationRecord
    requirements: tuple[str, ...] = ()


def retry_limits(limits: Limits) -> Limits:
    """Recorded usage builds models at their real size (a detection model resizes to 800 px): more time."""
    return replace(limits, timeout_s=limits.timeout_s * 3, cpu_s=limits.cpu_s * 3)


@contextlib.contextmanager
def _gate_for(workspace: Workspace, gate: "Gate", requirements: tuple[str, ...]) -> Iterator["Gate | None"]:
    """The build's gate, or one of the requirement environment (None when it cannot be made)."""
    if not requirements:
        yield gate
        return
    env = environment(workspace, requirements)
    if env.python is None:
        yield None
        return
    from ..validator.gate import Gate

    with Gate(gate.workers, gate.limits, python=env.python) as in_env:
        yield in_env


def _with_named(extractors: Extractors, item: Retry, named: usage.Named) -> Retry:
    """The block re-extracted with what its recorded arguments name and its file may lack: classes
    a registry builds (``loss_cls=dict(type='FocalLoss')``, where the code names only its default
    loss) and classes passed in (``block=BasicBlock``); as it was when that adds nothing or the
    closure fails."""
    code = item.candidate.code
    ref = item.candidate.ref
    # defined at the top level: a docstring's example (mmengine's ``>>> class ResNet:``) defines nothing
    defined = set(re.findall(r"^class (\w+)", code, re.M))
    classes = frozenset(c for c in named.classes if c[1].split(".")[0] not in defined
                        and (c[0], c[1]) != (ref.module, ref.name_in_module))
    types = frozenset(t for t in named.types if t not in defined)
    if not (types or classes):
        return item
    closure, assembled, seconds = extractors.extract(ref, types, classes)
    if assembled is None or assembled.code == code:
        return item
    candidate = item.candidate.redone(assembled, closure.files, seconds)
    return replace(item, candidate=candidate)


def _with_companions(extractors: Extractors, finder: Finder, item: Retry) -> tuple[Retry, list[dict]] | None:
    """The block re-extracted with the classes of its source that have the attribute its first
    failure says a guessed argument lacks, and the recorded constructions of those that passed
    (with the classes those name); None when there are none or the closure fails."""
    attribute = wanted_attribute(item.first.message)
    if attribute is None:
        return None
    ref = item.candidate.ref
    found = finder.find(ref.source, ref.qualname, attribute)
    if not found:
        return None
    recipes = [c.recipe for c in found if c.recipe]
    named = usage.named_by([{"init": r} for r in recipes])  # the classes their constructions name (a wrapper's Decoder)
    classes = frozenset({(c.module, c.qualname) for c in found} | named.classes)
    closure, assembled, seconds = extractors.extract(ref, named.types, classes)
    if assembled is None:
        return None
    candidate = item.candidate.redone(assembled, closure.files, seconds)
    return replace(item, candidate=candidate), recipes


def retry_with_usage(db: Database, workspace: Workspace, gate: "Gate", retry: list[Retry], report: BuildReport,
                     progress: ProgressFn | None, corpus: frozenset[str], install: bool = False,
                     prefer: str = "installed") -> dict[str, object]:
    """Harvest the sources of the failed blocks, then re-check those blocks with their recorded usage.
    A source is harvested and its blocks re-checked in the environment with every requirement its
    waiting blocks needed, so that its package imports as it did for them. With ``install`` that
    environment also gets what the whole package imports and the harvest stopped at (mmcv's
    ``cv2``; ``corpus`` holds the corpus's top-level packages, which are never installed), for a
    few rounds. A block keeps its first verdict unless recorded usage makes it pass or stops at a
    dependency that is not there (what the real model needs). Without ``install``, a block whose
    source's harvest stopped at a distribution not installed here keeps its verdict with that
    distribution as ``usage_waits_for``: a later ``--requirements install`` build judges it again,
    where the harvest can run (``import kornia`` needs ``kornia_rs``)."""
    by_source: dict[str, list[Retry]] = {}
    for item in retry:
        by_source.setdefault(item.candidate.ref.source, []).append(item)
    retrying = _Retrying(db, workspace, gate, report, progress, len(retry), corpus, install, prefer)
    for src, items in sorted(by_source.items()):
        retrying.source(src, items)
    return retrying.summary()


class _Retrying:
    """The second chance of one build's failed blocks, source by source, and its tallies."""

    def __init__(self, db: Database, workspace: Workspace, gate: "Gate", report: BuildReport,
                 progress: ProgressFn | None, total: int, corpus: frozenset[str], install: bool, prefer: str) -> None:
        self.db, self.workspace, self.gate, self.report = db, workspace, gate, report
        self.progress, self.total, self.corpus, self.install = progress, total, corpus, install
        self.extractors = Extractors(db.conn, prefer)
        self.finder = Finder(db.conn)
        self.ran = usage.HarvestStats()
        self.retried = self.rescued = self.done = 0
        self.stopped: dict[str, list[str]] = {}  # source -> the distributions its harvest could not import, without install
        self.waiting: dict[str, list[str]] = {}  # block id -> those its verdict records (``usage_waits_for``)
        self.left_out: dict[str, dict[str, str]] = {}  # source -> declared distributions pip could not install: why
        self.widening_undone: list[str] = []  # sources whose harvest ran fewer units once widened, judged narrower

    def source(self, src: str, items: list[Retry]) -> None:
        """Harvest ``src`` in the widest environment its blocks need (widened by what the harvest
        stops at, for a few rounds under ``install``), then check its blocks in that gate."""
        db, progress = self.db, self.progress
        needed = tuple(sorted({r for item in items for r in item.requirements}))  # its blocks were judged there
        wanted: set[str] = set()  # what the package declares or the harvest stopped at: as much as pip installs
        if self.install:  # the harvest imports the whole package: what its distributions declare
            declared = [name for root in usage.roots(db, src) for name in declared_requirements(root)]
            wanted = to_install(declared, self.corpus)
        focus = {item.candidate.ref.module for item in items}
        names = frozenset(item.candidate.ref.name_in_module.split(".")[-1] for item in items)
        parents = passing_parents(db.conn, src, [item.candidate.ref for item in items])
        left_out: set[str] = set()
        narrower: tuple[int, tuple[str, ...]] | None = None  # the last round's units that ran, and its environment
        for round_ in range(_ROUNDS):
            env, dropped = widest_environment(self.workspace, needed, tuple(sorted(wanted)))
            if env.python is None and needed:  # pip could not install even what the blocks needed
                break
            left_out |= set(dropped)
            if dropped:
                self.left_out.setdefault(src, {}).update(dropped)
            requirements = env.requirements if env.python is not None else ()
            with _gate_for(self.workspace, self.gate, requirements) as checker:
                assert checker is not None  # made just now, or this interpreter's
                one = self.harvest(src, checker, focus, requirements, names, parents)
                if narrower is not None and one.ok < narrower[0]:
                    break  # what the widening installed broke units that ran before: judged narrower, below
                # what this run stopped at, and what an earlier build's run of the same units did
                more = {d for m in usage.stopped_at(db, src, requirements)
                        if m not in self.corpus and (d := distribution_for(m))} - set(requirements) - left_out
                if more and not self.install:  # left for a build that may install them
                    self.stopped[src], more = sorted(more), set()
                if not more or round_ + 1 == _ROUNDS:
                    self.check(src, items, checker, requirements)  # in the gate the harvest used
                    return
            narrower = (one.ok, requirements)
            wanted |= more
        if narrower is not None:
            # An optional toolbox the widening installed that, installed, refuses the release of
            # another one lent here as the package imports (mmdet asserting its mmcv) makes units
            # that ran fail: the narrower environment judges the blocks, its units run again there.
            self.widening_undone.append(src)
            with _gate_for(self.workspace, self.gate, narrower[1]) as checker:
                assert checker is not None
                self.harvest(src, checker, focus, narrower[1], names, parents)
                self.check(src, items, checker, narrower[1])
                return
        for item in items:  # not even the blocks' own environment could be made
            self.settle(item, item.first, item.requirements)

    def harvest(self, src: str, checker: "Gate", focus: set[str], requirements: tuple[str, ...], names: frozenset[str],
                parents: list[usage.Passed]) -> usage.HarvestStats:
        """Run the harvest units of ``src`` not yet run in this environment, counted in the build's tallies."""
        progress = self.progress
        one = usage.run(self.db, checker, src, usage.plan(self.db, src, focus, requirements, classes=names, passed=parents),
                        (lambda d, t: progress("harvest", d, t)) if progress else None)
        self.ran.add(one)
        return one

    def check(self, src: str, items: list[Retry], checker: "Gate", requirements: tuple[str, ...]) -> None:
        """Recorded usage first; a block it does not pass (or that has none) and whose guess lacked
        an attribute gets the source's companions next."""
        found, companions, hinted = [], [], set()
        for item in items:
            hints = usage.hints(self.db.conn, src, item.candidate.ref.qualname)
            if hints:
                again = _with_named(self.extractors, item, usage.named_by(hints))
                found.append(((item, again), again.candidate.code, again.candidate.class_name, hints))
            else:
                companions.append(item)
        self.retried += len(found)
        for (item, again), record in checker.check_many(found, retry_limits(checker.limits)):
            # stored with the file that passed, or that shows what the real model needs (a compiled
            # extension its recorded configuration builds), which says more than a guess's failure
            if record.ok or record.code == MISSING_DEPENDENCY and not item.first.ok:
                self.settle(again, record, requirements, item)
                self.finished(record.ok and not item.first.ok)
            else:
                log.info("%s: recorded usage did not pass either: %s %s", again.candidate.ref.qualname, record.code,
                         "".join((record.message or "").strip().splitlines()[-1:]))
                companions.append(item)
                hinted.add(id(item))
        found = []
        for item in companions:
            if with_companions := _with_companions(self.extractors, self.finder, item):
                again, recipes = with_companions
                found.append(((item, again), again.candidate.code, again.candidate.class_name, None, recipes))
            else:  # a pass on stand-ins keeps its verdict
                self.settle(item, item.first, item.requirements)
                self.finished(False)
        self.retried += sum(id(key[0]) not in hinted for key, *_ in found)  # each block counted once
        for (item, again), record in checker.check_many(found, retry_limits(checker.limits)):
            if record.ok:
                self.settle(again, record, requirements, item)
            else:
                self.settle(item, item.first, item.requirements)
            self.finished(record.ok)

    def settle(self, item: Retry, record: ValidationRecord, requirements: tuple[str, ...], first: Retry | None = None) -> None:
        """Store the block's final verdict with what a later build needs to know of it."""
        noted: dict[str, object] = {}
        ref = item.candidate.ref
        if requirements:
            noted["environment"] = requirements
        if not record.ok and self.stopped.get(ref.source):
            noted["usage_waits_for"] = self.waiting[ref.block_id] = self.stopped[ref.source]
        if first is not None and first is not item:  # re-extracted with what its usage names: the
            # next build extracts the block as before and keeps this verdict while that is unchanged
            noted["extracted_as"] = records.code_sha1(first.candidate.code)
        records.save(self.db.conn, self.workspace, item.candidate.verdict(record).noted(**noted))
        self.report.count(ref.source, record.ok, record.code)

    def finished(self, ok: bool) -> None:
        self.rescued += ok
        self.done += 1
        if self.progress:
            self.progress("retry", self.done, self.total)

    def summary(self) -> dict[str, object]:
        ran = self.ran
        return {"factories": ran.factories, "examples": ran.examples, "configs": ran.configs, "passed": ran.passed,
                "ok": ran.ok, "seconds": round(ran.seconds, 2), "not_run": ran.not_run, "why_not_run": ran.why_not_run,
                "retried": self.retried, "rescued": self.rescued, "usage_waiting": len(self.waiting),
                "usage_waits_for": dict(Counter(d for dists in self.waiting.values() for d in dists).most_common()),
                "left_out": self.left_out, "widening_undone": self.widening_undone}
