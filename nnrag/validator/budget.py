"""A memory budget the kernel keeps: one cgroup per candidate, where the machine offers one.

A process's resident memory misses what a candidate can hold without mapping it: ``memfd``
files filled with ``write()``, System V segments left detached, tmpfs pages, pipe and socket
buffers. A cgroup's memory controller charges every page its processes allocate, the kernel's
own buffers included, and kills inside the group when the limit is passed. Pages the worker
faulted in before the fork stay charged to the worker; the group sees only the candidate's growth,
which is what ``Limits.memory_mb`` bounds.

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
        number, controllers, path = line.split(":", 2)
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
    """One candidate's group. ``join`` is called by the candidate's process before it runs any of
    the candidate's code; everything it then starts is in the group too."""

    kind: str  # "cgroup-v1" or "cgroup-v2"
    folder: Path

    @classmethod
    def create(cls, limit_mb: int, tag: str) -> "MemoryBudget | None":
        """A new group of at most ``limit_mb`` MB, or None where the machine offers none to us."""
        found = _own_group("memory") if os.environ.get(BUDGET_ENV, "1") != "0" else None
        if found is None:
            return None
        version, parent = found
        folder = parent / f"{_PREFIX}{tag}"
        try:
            folder.mkdir()
        except FileExistsError:
            pass
        except OSError:
            return None
        limit = str(limit_mb * 1024 * 1024)
        # a group of v2 has memory.max only where its parent delegates the controller
        required, no_swap = (("memory.limit_in_bytes", "memory.swappiness") if version == "v1"
                             else ("memory.max", "memory.swap.max"))
        try:
            (folder / required).write_text(limit)
        except OSError:
            _remove(folder)
            return None
        try:  # the limit is on memory, not on memory and swap; swap accounting may be off
            (folder / no_swap).write_text("0")
        except OSError:
            pass
        return cls(f"cgroup-{version}", folder)

    def join(self) -> None:
        """Move the calling process into the group (raises OSError where it cannot)."""
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def killed_for_memory(self) -> bool:
        """Whether the kernel killed a process of the group for passing the limit."""
        name = "memory.oom_control" if self.kind == "cgroup-v1" else "memory.events"
        try:
            for line in (self.folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def peak_mb(self) -> float | None:
        name = "memory.max_usage_in_bytes" if self.kind == "cgroup-v1" else "memory.peak"
        try:
            return round(int((self.folder / name).read_text()) / (1024 * 1024), 1)
        except (OSError, ValueError):
            return None

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
    """Groups of workers that died mid-check: named after the worker's pid, removed when it is gone."""
    found = _own_group("memory")
    if found is None:
        return
    for folder in found[1].glob(f"{_PREFIX}*-*"):
        owner = folder.name[len(_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not alive(int(owner)):
            _remove(folder)
