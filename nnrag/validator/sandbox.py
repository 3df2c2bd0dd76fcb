"""Confinement of one forked candidate process.

Layers, strongest first, each recorded in the result's ``isolation``:

- a new network namespace (``unshare(CLONE_NEWUSER | CLONE_NEWNET)``) where the kernel allows
  unprivileged user namespaces: no interface but a downed loopback, so no connection succeeds;
- resource limits: CPU seconds, data segment (``RLIMIT_DATA``: an address-space limit breaks the
  CUDA build of torch, which maps several GB it never touches), file size, processes, no core files;
- a Python audit hook that refuses sockets, new processes and writes outside the candidate's
  folder, reporting each attempt on the result pipe before raising, so even code that swallows
  the exception is caught.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
from pathlib import Path

from .record import Limits

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_NETWORK_EVENTS = {"socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto", "socket.sendmsg",
                   "socket.gethostbyname", "socket.gethostbyaddr", "urllib.Request"}
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "pty.spawn", "os.startfile", "os.kill", "os.killpg"}
_PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
                "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move",
                "shutil.copytree", "os.replace"}


class SandboxViolation(BaseException):
    """Raised inside the candidate; a BaseException so ``except Exception`` cannot swallow it."""


def status_kb(key: str, pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _unshare_network() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0
    except (OSError, AttributeError):
        return False


def _tasks_of_user() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return count


def _limit(which: int, soft: int, slack: int = 0) -> None:
    """The soft limit and a hard one ``slack`` above it: a candidate may lower a limit, never
    lift it back. (CPU time keeps one second: at the soft limit the kernel sends SIGXCPU, read as
    a timeout; at the hard one, SIGKILL.)"""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
        resource.setrlimit(which, (soft, min(hard, soft + slack)))
    else:
        resource.setrlimit(which, (soft, soft + slack))


def confine(folder: Path, limits: Limits, report_fd: int) -> dict[str, str]:
    """Confine the current (freshly forked, single-threaded) process. Returns the isolation levels."""
    isolation = {"process": "fork", "network": "netns" if _unshare_network() else "audit-hook"}
    mb = 1024 * 1024
    _limit(resource.RLIMIT_CPU, int(limits.cpu_s), slack=1)
    _limit(resource.RLIMIT_DATA, status_kb("VmData") * 1024 + limits.memory_mb * mb)
    _limit(resource.RLIMIT_FSIZE, limits.file_mb * mb)
    _limit(resource.RLIMIT_CORE, 0)
    try:
        _limit(resource.RLIMIT_NPROC, _tasks_of_user() + limits.processes)
    except (OSError, ValueError):
        pass
    isolation["limits"] = "cpu,data,fsize,nproc,core"
    isolation["filesystem"] = "audit-hook"
    _install_hook(folder.resolve(), report_fd)
    return isolation


_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def _probes_loopback(event: str, args: tuple) -> bool:  # type: ignore[type-arg]
    """A bind to an ephemeral loopback port, as libraries do at import to learn whether the host
    has IPv6 (urllib3): it reaches nothing, and nothing can know the port to reach it."""
    address = args[1] if event == "socket.bind" and len(args) > 1 else None
    return isinstance(address, tuple) and len(address) >= 2 and address[0] in _LOOPBACK and address[1] == 0


def _install_hook(folder: Path, report_fd: int) -> None:
    allowed = (str(folder), "/dev/null", "/dev/shm")
    state = {"busy": False}

    def outside(path: object) -> bool:
        if isinstance(path, int):
            return False
        try:
            p = os.path.abspath(os.fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return not p.startswith(allowed)

    def violation(kind: str, detail: str) -> None:
        message = f"{kind}: {detail}"
        try:
            os.write(report_fd, (json.dumps({"violation": message}) + "\n").encode())
        except OSError:
            pass
        raise SandboxViolation(message)

    def hook(event: str, args: tuple) -> None:  # type: ignore[type-arg]
        if state["busy"]:
            return
        state["busy"] = True
        try:
            if event in _NETWORK_EVENTS and not _probes_loopback(event, args):
                violation("network", f"{event}{args[1:2]!r}" if len(args) > 1 else event)
            elif event in _PROCESS_EVENTS:
                violation("process", f"{event} {str(args[:2])[:200]}")
            elif event == "open":
                path, mode, flags = (list(args) + [None, None, 0])[:3]
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
                if writing and outside(path):
                    violation("write", f"open {path!r} mode {mode!r}")
            elif event in _PATH_EVENTS:
                if any(outside(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))):
                    violation("write", f"{event} {args[:2]!r}")
        finally:
            state["busy"] = False

    sys.addaudithook(hook)
