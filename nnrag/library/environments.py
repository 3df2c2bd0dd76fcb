"""Blocks that fail only for a third-party requirement not installed here: with ``nnrag build
--requirements install`` they are validated again in a requirement environment that has it
(:mod:`nnrag.validator.envs`); without it, the report says which distributions they wait for."""

from __future__ import annotations

from dataclasses import replace

from ..db import Database
from ..progress import ProgressFn
from ..validator.envs import distribution_for, environment
from ..validator.gate import Gate
from ..validator.record import MISSING_DEPENDENCY, Limits, ValidationRecord
from ..workspace import Workspace
from . import records
from .report import BuildReport


def missing_requirements(candidate: records.Candidate) -> tuple[str, ...]:
    """The distributions a block imports that are not installed here, by their PyPI names."""
    return tuple(sorted({distribution_for(m) for r in candidate.assembled.requirements if r.version is None
                         for m in r.modules}))


def waits_for_install(candidate: records.Candidate, record: ValidationRecord) -> bool:
    return not record.ok and record.code == MISSING_DEPENDENCY and bool(missing_requirements(candidate))


def needs_install(waiting: list[tuple[records.Candidate, ValidationRecord]]) -> dict[str, int]:
    """Blocks per missing distribution, most wanted first (what ``--requirements install`` would add)."""
    counts: dict[str, int] = {}
    for candidate, _ in waiting:
        for dist in missing_requirements(candidate):
            counts[dist] = counts.get(dist, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def validate_in_environments(db: Database, workspace: Workspace, waiting: list[tuple[records.Candidate, ValidationRecord]],
                             workers: int, limits: Limits, report: BuildReport,
                             progress: ProgressFn | None) -> dict[str, object]:
    """Check each waiting block in the environment of its missing requirements; a set pip cannot
    install leaves its blocks ``missing-dependency`` with pip's reason."""
    groups: dict[tuple[str, ...], list[tuple[records.Candidate, ValidationRecord]]] = {}
    for candidate, first in waiting:
        groups.setdefault(missing_requirements(candidate), []).append((candidate, first))
    made, rescued, done = 0, 0, 0
    failed: dict[str, str] = {}
    for requirements, items in sorted(groups.items()):
        env = environment(workspace, requirements)
        if env.python is None:
            failed[" ".join(requirements)] = env.error or "unknown"
            for candidate, first in items:
                why = replace(first, message=f"{first.message} (pip cannot install {', '.join(requirements)}: {env.error})"[:2000])
                records.save(db.conn, workspace, candidate.verdict(why))
                report.count(candidate.ref.source, False, first.code)
            continue
        made += 1
        with Gate(workers, limits, python=env.python) as gate:
            for candidate, record in gate.check_many((c, c.assembled.code, c.assembled.class_name) for c, _ in items):
                verdict = candidate.verdict(record)
                verdict.record["environment"] = list(requirements)
                records.save(db.conn, workspace, verdict)
                report.count(candidate.ref.source, record.ok, record.code)
                rescued += record.ok
                done += 1
                if progress:
                    progress("environments", done, len(waiting))
    return {"environments": made, "blocks": len(waiting), "rescued": rescued, "not_installable": failed}
