"""A memory budget the kernel keeps: a cgroup for the candidates of one worker, where the machine
offers one.

A process's resident memory misses what a candidate can hold without mapping it: ``memfd``
files filled with ``write()``, System V segments left detached, tmpfs pages, pipe and socket
buffers. A cgroup's memory controller charges every page its processes allocate, the kernel's
own buffers included, and kills inside the group when the limit is passed. Pages the worker
faulted in before the fork stay charged to the worker; the group sees only the candidate's growth,
which is what ``Limits.memory_mb`` bounds. One candidate runs in the group at a time, and the next
joins it once every process of the last is gone: a group per candidate would cost a kernel
structure each that outlives it while pages it read stay cached.

Both hierarchies are tried: cgroup v1's memory controller (a child of the worker's own group, as
root can make one), then cgroup v2 where the worker's group delegates ``memory`` to its children.
Where neither can be had, the worker measures resident memory as before and the sandbox refuses
the calls that hold memory outside it (see ``sandbox.UNCOUNTED_MEMORY_CALLS``); the record's
``isolation["memory"]`` says which.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

_ROOT = Path("/sys/fs/cgroup")
BUDGET_ENV = "NNRAG_SANDBOX_CGROUP"  # "0": no group, resident memory only (as where the kernel offers none)
_PREFIX = "nnrag-candidate-"


def _own_group(controller: str) -> tuple[str, Path] | None:
    """("v1" or "v2", the folder of this process's group) for the memory controller, if mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = _ROOT / controller / path.lstrip("/")
            if folder.is_dir():
                return "v1", folder
    for line in lines:
        if line.startswith("0::"):
            folder = _ROOT / line[3:].lstrip("/")
            if (folder / "cgroup.controllers").is_file():
                return "v2", folder
    return None


@dataclass(frozen=True)
class MemoryBudget:
    """A worker's group. ``join`` is called by a candidate's process before it runs any of the
    candidate's code; everything it then starts is in the group too."""

    kind: str  # "cgroup-v1" or "cgroup-v2"
    folder: Path

    @classmethod
    def create(cls, tag: str) -> "MemoryBudget | None":
        """A new group, or None where the machine offers none to this process."""
        found = _own_group("memory") if os.environ.get(BUDGET_ENV, "1") != "0" else None
        if found is None:
            return None
        version, parent = found
        folder = parent / f"{_PREFIX}{tag}"
        try:
            folder.mkdir(exist_ok=True)
        except OSError:
            return None
        budget = cls(f"cgroup-{version}", folder)
        try:  # any limit, to learn that the group takes one; each candidate sets its own
            budget.set_limit(limit_mb=1 << 20)
        except OSError:  # a group of v2 has memory.max only where its parent delegates the controller
            budget.close()
            return None
        try:  # the limit is on memory, not on memory and swap; swap accounting may be off
            (folder / ("memory.swappiness" if version == "v1" else "memory.swap.max")).write_text("0")
        except OSError:
            pass
        return budget

    def set_limit(self, limit_mb: int) -> None:
        """The next candidate's limit (the kernel reclaims cached pages of earlier ones first)."""
        name = "memory.limit_in_bytes" if self.kind == "cgroup-v1" else "memory.max"
        (self.folder / name).write_text(str(limit_mb * 1024 * 1024))

    def join(self) -> None:
        """Move the calling process into the group (raises OSError where it cannot)."""
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def kills(self) -> int:
        """How many processes of the group the kernel has killed for passing the limit, ever:
        compare the count before and after a candidate."""
        name = "memory.oom_control" if self.kind == "cgroup-v1" else "memory.events"
        try:
            for line in (self.folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def close(self) -> None:
        """Remove the group once its processes are gone (the worker has reaped them)."""
        _remove(self.folder)


def _remove(folder: Path) -> None:
    for _ in range(50):  # a killed process leaves its group a moment after it is reaped
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def remove_stale(alive: Callable[[int], bool]) -> None:
    """Groups of workers that are gone: named after the worker's pid, removed."""
    found = _own_group("memory")
    if found is None:
        return
    for folder in found[1].glob(f"{_PREFIX}*"):
        owner = folder.name[len(_PREFIX):]
        if owner.isdigit() and not alive(int(owner)):
            _remove(folder)
