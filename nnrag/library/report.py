"""Figures of a build or of the stored library: pass rate, failures by code, per source."""

from __future__ import annotations

import statistics
from typing import Any
from dataclasses import asdict, dataclass, field

from ..db import connect
from ..db.schema import NOT_RUN
from ..workspace import Workspace


@dataclass
class BuildReport:
    tried: int = 0
    passed: int = 0
    cached: int = 0  # verdicts reused from an earlier run (same text, same gate)
    not_validated: int = 0  # blocks extracted and stored without a verdict (``--no-validate``), not tried
    extracted: int = 0  # blocks extracted by this run (the others' files depend on nothing changed)
    failures: dict[str, int] = field(default_factory=dict)
    per_source: dict[str, dict[str, Any]] = field(default_factory=dict)  # tried, passed, pass_rate, failures by code
    extract_median_s: float | None = None
    validate_per_s: float | None = None
    seconds: float = 0.0  # extracting and validating
    wall_seconds: float | None = None  # the whole build: indexing, the library, specs and the search index
    peak_rss_mb: float | None = None  # of the build process itself (validation runs in other processes)
    interrupted: bool = False
    harvest: dict[str, object] = field(default_factory=dict)  # factories run, seconds, blocks rescued
    search: dict[str, object] = field(default_factory=dict)  # specs built, texts embedded, seconds
    cluster: dict[str, object] = field(default_factory=dict)  # scheduler, candidates served per Dask worker
    requirements: dict[str, object] = field(default_factory=dict)  # environments made, or what blocks wait for

    @property
    def pass_rate(self) -> float:
        return self.passed / self.tried if self.tried else 0.0

    def count(self, source: str, ok: bool, code: str | None) -> None:
        """Add one verdict to the totals, the per-source figures and the failures by code."""
        self.tried += 1
        self.passed += ok
        s = self.per_source.setdefault(source, {"tried": 0, "passed": 0, "pass_rate": 0.0, "failures": {}})
        s["tried"] += 1
        s["passed"] += ok
        s["pass_rate"] = round(s["passed"] / s["tried"], 4)
        if not ok and code:
            self.failures[code] = self.failures.get(code, 0) + 1
            s["failures"][code] = s["failures"].get(code, 0) + 1  # which are compiled code, which the probe's

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["pass_rate"] = round(self.pass_rate, 4)
        return d


def library_report(workspace: Workspace) -> BuildReport:
    """Figures over the stored library: pass rate, failures by code, per source."""
    report = BuildReport()
    with connect(workspace) as db:
        rows = db.conn.execute("SELECT source, status, code, extract_s FROM library ORDER BY source").fetchall()
    for r in rows:
        if r["status"] == NOT_RUN:
            report.not_validated += 1
        else:
            report.count(r["source"], r["status"] == "validated", r["code"])
    times = [r["extract_s"] for r in rows if r["extract_s"] is not None]
    report.extract_median_s = statistics.median(times) if times else None
    return report
