"""Extracting many blocks at once, on several processes.

Extraction is pure Python (LibCST renders and renames the closure), so one process extracts on
one core while the others idle: on the 15,700-block wide library it ran at under 4 blocks/s.
Each process keeps the parsed modules of the source it works on and takes that source's blocks in
runs, so a module is parsed once per process rather than once per block; results come back in
the order of the blocks given.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sqlite3
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Iterator

from ..db import connect
from ..indexing.lookup import BlockRef
from ..workspace import Workspace
from .assemble import Assembled
from .block import Extractors
from .plan import ClosureIssue

log = logging.getLogger(__name__)

_RUN = 16  # blocks of one source per task: small enough that both processes stay busy to the end
_MAX_PROCESSES = 4  # each holds one source's parsed modules (a large library's: about a GB)


@dataclass(frozen=True)
class Extracted:
    """What extracting one block gave: its file (None when the closure has issues) and the files
    its closure read."""

    ref: BlockRef
    assembled: Assembled | None
    issues: list[ClosureIssue] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def extract_one(extractors: Extractors, ref: BlockRef) -> Extracted:
    try:
        closure, assembled, seconds = extractors.extract(ref)
    except Exception as e:  # a bug or a file that changed under us: recorded, the run goes on
        log.exception("extracting %s failed", ref.block_id)
        return Extracted(ref, None, [ClosureIssue("extract-error", ref.name_in_module, ref.module, 0, f"{type(e).__name__}: {e}")])
    return Extracted(ref, assembled, closure.issues, closure.files, seconds)


def extract_many(conn: sqlite3.Connection, workspace: Workspace, refs: list[BlockRef], prefer: str = "installed",
                 processes: int | None = None) -> Iterator[Extracted]:
    """Extract ``refs`` (best in source order), yielding in that order. ``processes``: default one
    per CPU (at most four); with one, or too few blocks to share, this process extracts them all."""
    processes = min(_MAX_PROCESSES, processes or os.cpu_count() or 1)
    if processes <= 1 or len(refs) < 2 * _RUN:
        extractors = Extractors(conn, prefer)
        for ref in refs:
            yield extract_one(extractors, ref)
        return
    runs: list[list[BlockRef]] = []
    for ref in refs:
        if runs and len(runs[-1]) < _RUN and runs[-1][-1].source == ref.source:
            runs[-1].append(ref)
        else:
            runs.append([ref])
    given = 0
    # spawned, not forked: the caller may hold threads and the gate's pipes
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(processes, mp_context=context, initializer=_start, initargs=(str(workspace.home), prefer))
    try:
        for done in pool.map(_extract_run, runs):
            given += len(done)
            yield from done
    except BrokenProcessPool as e:  # e.g. a script that starts a build outside ``if __name__ == "__main__"``
        log.warning("extracting on %d processes failed (%s): the other %d blocks are extracted here",
                    processes, e, len(refs) - given)
        yield from extract_many(conn, workspace, refs[given:], prefer, 1)
    finally:
        # every run was submitted at once: a caller that stops early (an interrupted build) waits
        # only for the runs under way, not for the whole corpus
        pool.shutdown(wait=True, cancel_futures=True)


_EXTRACTORS: Extractors | None = None  # one per extracting process, on its own connection


def _start(home: str, prefer: str) -> None:
    global _EXTRACTORS
    _EXTRACTORS = Extractors(connect(Workspace.resolve(home)).conn, prefer)


def _extract_run(refs: list[BlockRef]) -> list[Extracted]:
    assert _EXTRACTORS is not None
    return [extract_one(_EXTRACTORS, ref) for ref in refs]
