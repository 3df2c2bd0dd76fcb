"""The progress callback long operations take: ``progress(phase, done, total)``, and its plain
rendering for logs and pipes."""

from __future__ import annotations

import time
from typing import Callable

ProgressFn = Callable[[str, int, int], None]

LOG_INTERVAL_S = 10.0


def progress_lines(write: Callable[[str], None], interval: float = LOG_INTERVAL_S) -> ProgressFn:
    """A callback that writes ``phase: done/total (rate/s)``: each phase's first and last line,
    and at most one line per ``interval`` seconds between, so a log of an hour's build stays short."""
    last: dict[str, float] = {}
    began: dict[str, float] = {}

    def update(phase: str, done: int, total: int) -> None:
        key = phase.split(" ", 1)[0]
        now = time.monotonic()
        began.setdefault(key, now)
        if key in last and done < total and now - last[key] < interval:
            return
        last[key] = now
        elapsed = now - began[key]
        rate = f" ({done / elapsed:.1f}/s)" if done and elapsed >= 1 else ""
        write(f"{phase}: {done}/{total}{rate}")

    return update
