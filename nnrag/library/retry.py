"""The second chance: blocks that failed on guessed arguments or inputs are checked again with
the usage recorded by running their source's own model factories (see ``nnrag.validator.usage``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..db import Database
from ..progress import ProgressFn
from ..validator.record import GATE_VERSION, Limits, ValidationRecord
from ..validator.usage import runs as usage
from ..workspace import Workspace
from . import records
from .report import BuildReport

if TYPE_CHECKING:
    from ..validator.gate import Gate

# A guess-based failure waiting for its retry with recorded usage; redone by the next build.
AWAITING_USAGE = GATE_VERSION + "-guess"
# Failures that recorded arguments or inputs may fix.
RETRY_CODES = {"constructor-args", "input-inference", "runtime-error", "timeout", "memory", "backward-error"}


def retry_limits(limits: Limits) -> Limits:
    """Recorded usage builds models at their real size (a detection model resizes to 800 px): more time."""
    return replace(limits, timeout_s=limits.timeout_s * 3, cpu_s=limits.cpu_s * 3)


def retry_with_usage(db: Database, workspace: Workspace, gate: "Gate",
                     retry: list[tuple[records.Candidate, ValidationRecord]], report: BuildReport,
                     progress: ProgressFn | None) -> dict[str, object]:
    """Harvest the sources of the failed blocks, then re-check those blocks with their recorded usage.
    A block keeps its first verdict unless recorded usage makes it pass."""
    modules: dict[str, set[str]] = {}  # source -> modules holding failed blocks
    for candidate, _ in retry:
        modules.setdefault(candidate.ref.source, set()).add(candidate.ref.module)
    ran = usage.HarvestStats()
    for src in sorted(modules):
        factories = usage.plan(db, src, modules[src])
        one = usage.run(db, gate, src, factories, (lambda d, t: progress("harvest", d, t)) if progress else None)
        ran.factories, ran.ok, ran.seconds = ran.factories + one.factories, ran.ok + one.ok, ran.seconds + one.seconds
    items = []
    for candidate, first in retry:
        found = usage.hints(db.conn, candidate.ref.source, candidate.ref.qualname)
        if found:
            items.append(((candidate, first), candidate.assembled.code, candidate.assembled.class_name, found))
        else:
            records.save(db.conn, workspace, candidate.verdict(first))
            report.count(candidate.ref.source, False, first.code)
    rescued = 0
    for done, ((candidate, first), record) in enumerate(gate.check_many(items, retry_limits(gate.limits)), 1):
        best = record if record.ok else first
        records.save(db.conn, workspace, candidate.verdict(best))
        report.count(candidate.ref.source, best.ok, best.code)
        rescued += record.ok
        if progress:
            progress("retry", done, len(items))
    return {"factories": ran.factories, "factories_ok": ran.ok, "seconds": round(ran.seconds, 2),
            "retried": len(items), "rescued": rescued}
