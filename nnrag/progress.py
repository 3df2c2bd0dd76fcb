"""The progress callback long operations take: ``progress(phase, done, total)``."""

from __future__ import annotations

from typing import Callable

ProgressFn = Callable[[str, int, int], None]
