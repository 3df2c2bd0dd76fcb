"""Recorded usage: how a source's own model factories build and call its blocks.

``nnrag build`` validates every block from guessed arguments first. Blocks whose arguments or
inputs could not be guessed get a second chance with recipes recorded by running the source's
factories in the sandbox (see ``harvest.py``). Recipes are stored per factory in the
index database and reused until the factory's module or the source's version changes.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .factories import factory_functions
from ...db import Database

if TYPE_CHECKING:
    from ..gate import Gate

log = logging.getLogger(__name__)

_FACTORIES_PER_JOB = 40
_JOB_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Factory:
    source: str
    module: str
    function: str
    stamp: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.function}"


@dataclass
class HarvestStats:
    factories: int = 0
    ok: int = 0
    seconds: float = 0.0


def plan(store: Database, source: str, focus: set[str], per_focus_module: int = 2) -> list[Factory]:
    """Factories to run for ``source``: up to ``per_focus_module`` in the modules in ``focus``
    (those holding blocks that still fail), then the smallest one of every other module, since a
    block of a shared layers module is built by the models of other modules. Factories already
    run against the same module text are left out."""
    conn = store.conn
    row = conn.execute("SELECT id, version, git_commit FROM sources WHERE name=?", (source,)).fetchone()
    if row is None:
        return []
    source_id, version, commit = row["id"], row["version"], row["git_commit"]
    done = {r["factory"]: r["stamp"] for r in conn.execute("SELECT factory, stamp FROM harvests WHERE source=?", (source,))}
    files = conn.execute(
        "SELECT module, sha1 FROM files WHERE source_id=? AND status='ok' AND module IS NOT NULL ORDER BY module",
        (source_id,),
    ).fetchall()
    first: list[Factory] = []
    rest: list[Factory] = []
    for module, sha1 in files:
        if not sha1 or "def " not in (text := store.file_text(sha1)):
            continue
        names = factory_functions(text)
        if not names:
            continue
        stamp = f"{version or ''}|{commit or ''}|{sha1}"
        take = per_focus_module if module in focus else 1
        chosen = [Factory(source, module, n, stamp) for n in names[:take]]
        (first if module in focus else rest).extend(f for f in chosen if done.get(f.key) != stamp)
    return first + rest


def _packages(store: Database, source: str) -> tuple[list[str], list[str]]:
    conn = store.conn
    row = conn.execute("SELECT id, root FROM sources WHERE name=?", (source,)).fetchone()
    if row is None:
        return [], []
    modules = {r["module"].split(".")[0] for r in conn.execute(
        "SELECT DISTINCT module FROM files WHERE source_id=? AND module IS NOT NULL", (row["id"],))}
    root = Path(row["root"]) if row["root"] else None
    paths = [str(p) for p in (root, root / "src" if root else None) if p is not None and p.is_dir()]
    return sorted(modules), paths


def run(store: Database, gate: "Gate", source: str, factories: list[Factory],
        progress: Callable[[int, int], None] | None = None) -> HarvestStats:
    """Run the factories on the gate's workers, in jobs of a few dozen, storing recipes as they come."""
    stats = HarvestStats()
    if not factories:
        return stats
    started = time.perf_counter()
    packages, paths = _packages(store, source)
    # interleaved, so that every worker starts on the focus modules
    count = max(gate.workers, -(-len(factories) // _FACTORIES_PER_JOB))
    jobs = [job for i in range(count) if (job := factories[i::count])]
    done = 0

    def work(job: list[Factory]) -> dict[str, Any]:
        return gate.harvest([(f.module, f.function) for f in job], packages, paths,
                            timeout_s=min(_JOB_TIMEOUT_S, 60.0 + 30.0 * len(job)))

    # workers only talk to the gate; this thread alone writes the database
    with ThreadPoolExecutor(max_workers=gate.workers) as pool:
        futures = {pool.submit(work, job): job for job in jobs}
        for future in as_completed(futures):
            job, result = futures[future], future.result()
            by_key = {f"{f.module}.{f.function}": f for f in job}
            reported = set()
            for record in result.get("factories", []):
                factory = by_key.get(record.get("factory", ""))
                if factory is None:
                    continue
                reported.add(factory.key)
                _save(store.conn, factory, record)
                stats.factories += 1
                stats.ok += bool(record.get("ok"))
            for factory in job:  # the job ended (time limit, crash) before these reported
                if factory.key not in reported:
                    _save(store.conn, factory, {"ok": False, "message": result.get("killed") or "not reached", "usage": {}})
            store.conn.commit()
            done += len(job)
            if progress:
                progress(done, len(factories))
    stats.seconds = time.perf_counter() - started
    return stats


def _save(conn: sqlite3.Connection, factory: Factory, record: dict[str, Any]) -> None:
    conn.execute("DELETE FROM usage WHERE source=? AND factory=?", (factory.source, factory.key))
    conn.executemany(
        "INSERT INTO usage (source, factory, block, entries) VALUES (?,?,?,?)",
        [(factory.source, factory.key, block, json.dumps(entries)) for block, entries in record.get("usage", {}).items()],
    )
    conn.execute(
        "INSERT OR REPLACE INTO harvests (source, factory, stamp, ok, message, seconds) VALUES (?,?,?,?,?,?)",
        (factory.source, factory.key, factory.stamp, int(bool(record.get("ok"))), record.get("message"), record.get("seconds")),
    )


def hints(conn: sqlite3.Connection, source: str, block: str, limit: int = 4) -> list[dict[str, Any]]:
    """Recorded usages of one block (``module.Qualname``), those with a recorded call first."""
    entries: list[dict[str, Any]] = []
    for (text,) in conn.execute("SELECT entries FROM usage WHERE source=? AND block=? ORDER BY factory", (source, block)):
        entries.extend(json.loads(text))
    entries.sort(key=lambda e: not e.get("call"))
    return entries[:limit]


