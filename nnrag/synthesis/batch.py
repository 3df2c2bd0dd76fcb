"""`nnrag synthesize --all`: synthesis over the library, resumable, with pass@1 and pass@k."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..db import connect
from ..progress import ProgressFn
from ..retrieval.index import SearchIndex
from ..specs import cache
from ..validator.record import Limits
from ..workspace import Workspace
from .llm import LLMSettings
from .synthesize import synthesize


def synthesize_all(workspace: Workspace, settings: LLMSettings, attempts: int, limits: Limits | None,
                   category: str | None = None, limit: int | None = None,
                   progress: ProgressFn | None = None, allow_weak_sandbox: bool = False) -> dict[str, Any]:
    SearchIndex(workspace).sync()  # specs of every library block
    with connect(workspace) as store:
        done = {r["spec_id"] for r in store.conn.execute("SELECT spec_id FROM synthesized WHERE model=?", (settings.model,))}
        specs = [b.spec for b in cache.bundles(store) if b.spec.validation.status == "validated"
                 and (category is None or b.spec.category == category)]
    todo = [s for s in specs if s.id not in done][:limit]
    first = passed = 0
    failures: Counter[str] = Counter()
    for i, spec in enumerate(todo, 1):
        result = synthesize(spec, settings, workspace, attempts, limits, allow_weak_sandbox=allow_weak_sandbox)
        first += bool(result.attempts and result.attempts[0].conformant)
        passed += result.ok
        if not result.ok and result.attempts:
            failures[result.attempts[-1].code or "non-conformant"] += 1
        if progress:
            progress("synthesize", i, len(todo))
    n = len(todo) or 1
    return {"tried": len(todo), "skipped": len(done & {s.id for s in specs}),
            "pass@1": first / n, "pass@attempts": passed / n, "attempts": attempts, "failures": dict(failures)}
