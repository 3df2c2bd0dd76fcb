"""Confinement of one forked candidate process.

Layers, strongest first, each recorded in the result's ``isolation``:

- new user, network, IPC and PID namespaces where the kernel allows unprivileged user namespaces:
  no interface but a downed loopback, so no connection succeeds; no System V IPC object of
  another process; the candidate is process 1 of its own PID namespace with its own ``/proc``, so
  it sees no process but its own, and every process it starts dies when it ends;
- in the same user namespace, a private mount namespace: every folder but the system's own
  covered by empty file systems (the interpreter, nnrag and the source roots bound back), every
  file system read-only but the candidate's own folder, itself a small file system of its own:
  writes outside it fail in the kernel, however they are made;
- a seccomp filter (through the system's libseccomp) refusing the calls a candidate has no use
  for and an escape would: ``ptrace``, ``mount``, ``unshare``, ``setns``, ``bpf``, ``keyctl``, ...;
- resource limits: CPU seconds, data segment (``RLIMIT_DATA``: an address-space limit breaks the
  CUDA build of torch, which maps several GB it never touches), file size, open files, processes,
  no core files; memory the resident set does not show is counted by a cgroup the candidate
  joined (budget.py), or refused where there is none;
- a Python audit hook that refuses sockets, new processes and writes outside the candidate's
  folder, reporting each attempt on the result pipe before raising, so even code that swallows
  the exception is caught.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import resource
import signal
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import ConfigError
from .budget import BUDGET_ENV
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


# The message of the error a refused process start raises; a failure that carries it is the
# refusal's doing.
PROCESS_REFUSED = "starting or signalling a process is refused in the sandbox"


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


NAMESPACES_ENV = "NNRAG_SANDBOX_NAMESPACES"  # "0": no namespaces (a container where they misbehave)
_NAMESPACES = os.environ.get(NAMESPACES_ENV, "1") != "0"  # read when the worker starts, before any fork


@functools.lru_cache(maxsize=1)
def kernel_confinement() -> bool:
    """Whether candidates get the kernel's confinement here (user, network and mount namespaces):
    a forked process tries, in a few milliseconds."""
    if os.environ.get(NAMESPACES_ENV, "1") == "0":
        return False
    pid = os.fork()
    if pid == 0:  # only system calls here: the caller may hold threads
        try:
            if os.getuid() == 0:  # as a candidate will be: see _drop_root
                _become_nobody()
            libc = ctypes.CDLL(None, use_errno=True)
            os._exit(0 if _unshare() and libc.unshare(_CLONE_NEWNS) == 0 else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


_NOBODY = 65534


def _drop_root(folder: Path) -> bool:
    """Run as ``nobody`` when the worker runs as root: mapped into its user namespace as the
    caller's own uid, a root caller's candidate would own every root file (``/etc/shadow``, the
    root user's keys wherever the mount view leaves them). Only where the kernel confines
    candidates: the private view is what lets ``nobody`` reach an interpreter installed under
    ``/root``. The candidate's folder becomes ``nobody``'s."""
    if os.getuid() != 0:
        return False
    for top, dirs, files in os.walk(folder):  # the given files too, the kernels' folder among them
        for name in (".", *dirs, *files):
            os.chown(os.path.join(top, name), _NOBODY, _NOBODY, follow_symlinks=False)
    _become_nobody()
    return True


_PR_SET_DUMPABLE = 4


def _become_nobody() -> None:
    os.setgroups([])
    os.setgid(_NOBODY)
    os.setuid(_NOBODY)
    # a change of uid makes the process undumpable, which leaves its /proc/self files to root:
    # it could not write its own uid_map. (Other candidates stay out of reach: their PID
    # namespaces hide them and seccomp refuses ptrace.)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def require_kernel_confinement(allow_weak: bool) -> None:
    """Code from a model runs only where the kernel confines it, unless the user allows less."""
    if not allow_weak and not kernel_confinement():
        raise ConfigError("this machine does not confine candidates in namespaces (unprivileged user namespaces are "
                          "refused or switched off), so the gate's sandbox is only Python-level: code from a model "
                          "runs here only with --allow-weak-sandbox (allow_weak_sandbox=True)")


_CLONE_NEWIPC = 0x08000000
_CLONE_NEWPID = 0x20000000


def _unshare() -> str:
    """New user, network, IPC and PID namespaces (user and network alone where the kernel refuses
    the others), the caller's uid and gid mapped to its root (files it creates in its folder keep
    their owner; an unmapped process cannot create files at all). Returns what was made:
    ``"user,net,ipc,pid"``, ``"user,net"`` or ``""``."""
    if not _NAMESPACES:
        return ""
    uid, gid = os.getuid(), os.getgid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWPID) == 0:
            made = "user,net,ipc,pid"
        elif libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
            made = "user,net"
        else:
            return ""
    except (OSError, AttributeError):
        return ""
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        except OSError:
            pass  # still namespaced; only file creation inside may be refused
    return made


def _enter_pid_namespace(own_proc: bool) -> bool:
    """Fork the PID namespace's first process, which goes on as the candidate; this process waits
    for it and ends as it ended, so the worker reads the same status (a signal, an exit code).
    The kernel kills every process of the namespace when its first one ends: nothing the candidate
    starts outlives it. The candidate then mounts its own ``/proc``, where it sees only its own
    processes (the worker's command line and environment are not there to read), if ``own_proc``
    (it needs the private mount namespace). Returns whether that ``/proc`` was mounted (a container
    that masks parts of the system's refuses it)."""
    pid = os.fork()
    if pid:
        # this process runs no candidate code; ignoring SIGXCPU keeps it alive until its child ends
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        if os.WIFSIGNALED(status):
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
            os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
    if not own_proc:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        return libc.mount(b"proc", b"/proc", b"proc", 2 | 4 | 8, None) == 0  # nosuid, nodev, noexec
    except (OSError, AttributeError):
        return False


def proc_state(pid: int | str) -> tuple[str, int] | None:
    """A process's state letter and parent pid from ``/proc/PID/stat`` (None: gone). The name
    field may hold spaces and parentheses, so fields are counted from its closing one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def stray_processes() -> list[int]:
    """Processes of the candidate's PID namespace other than itself that still run (zombies are
    done): what it started and left. Meaningful only as the namespace's first process with its own
    ``/proc``; empty elsewhere."""
    if os.getpid() != 1:
        return []
    return sorted(int(e.name) for e in os.scandir("/proc") if e.name.isdigit() and e.name != "1"
                  and (st := proc_state(e.name)) is not None and st[0] != "Z")


# System calls a candidate never needs and an escape or an attack on the machine would: tracing
# and reading other processes, new namespaces and mounts, kernel keys, BPF programs, kernel
# modules, file handles that bypass paths, io_uring (whose operations a seccomp filter never sees).
_DENIED_CALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot",
                 "unshare", "setns", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "kexec_load",
                 "kexec_file_load", "init_module", "finit_module", "delete_module", "userfaultfd",
                 "open_by_handle_at", "name_to_handle_at", "fsopen", "fsmount", "fsconfig", "move_mount", "open_tree",
                 "fspick", "mount_setattr", "io_uring_setup", "io_uring_enter", "io_uring_register", "acct",
                 "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "adjtimex", "quotactl")
# Memory a process holds without it showing in its resident set: what a budget's group counts,
# refused where there is none.
UNCOUNTED_MEMORY_CALLS = ("memfd_create", "memfd_secret", "shmget")
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO_EPERM = 0x00050000 | 1


def _seccomp(denied: Sequence[str] = _DENIED_CALLS) -> bool:
    """Refuse ``denied`` with EPERM for this process and all it starts (libseccomp also
    sets no-new-privileges). False where the library is missing."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return False
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        return False
    try:
        for name in denied:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number >= 0 and lib.seccomp_rule_add(ctx, _SCMP_ACT_ERRNO_EPERM, number, 0) != 0:
                return False
        return lib.seccomp_load(ctx) == 0
    finally:
        lib.seccomp_release(ctx)


_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# Per-mount flags a remount inside a user namespace must keep (the kernel locks them).
_KEPT_FLAGS = {"ro": 1, "nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024, "nodiratime": 2048,
               "relatime": 1 << 21, "strictatime": 1 << 24}
_WRITABLE = ("/proc", "/dev", "/dev/pts", "/dev/null")  # the process's own view and device nodes


# What a candidate sees of the machine: the system's own folders (programs, libraries, their
# settings, devices, the kernel's views), nothing else. Every other folder at the top of the file
# system (homes, temporary folders, /opt, /srv, /var, a checkout under /work, an nnrag home
# wherever it is) is covered with an empty file system, and what the interpreter and the candidate
# need from inside one (the Python installation, site-packages, the source roots, nnrag itself) is
# bound back. A list of places to show, not of places to hide: a home or a secret in a place
# nobody thought of is covered too.
_SHOWN = frozenset({"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc", "/sys"})
_HIDDEN_INSIDE = ("/dev/shm", "/dev/mqueue")  # shared memory and message queues of other processes
HIDE_ENV = "NNRAG_SANDBOX_HIDE"  # more folders to cover (os.pathsep-separated): homes inside a shown place
_O_PATH = getattr(os, "O_PATH", 0o10000000)


@functools.lru_cache(maxsize=1)
def _hidden_roots() -> list[str]:
    """The folders covered with an empty file system, outermost first, none inside another: the
    same for every candidate of a worker, found once (``prepare_view``)."""
    places = set(_HIDDEN_INSIDE)
    try:
        for entry in os.scandir("/"):
            if entry.is_dir(follow_symlinks=False) and entry.path not in _SHOWN:
                places.add(entry.path)
    except OSError:
        pass
    places.update(p for p in os.environ.get(HIDE_ENV, "").split(os.pathsep) if os.path.isabs(p))
    places.update(h for h in (os.environ.get("HOME"), os.path.expanduser("~"), tempfile.gettempdir()) if h and os.path.isabs(h))
    roots: list[str] = []
    for candidate in sorted({os.path.realpath(p) for p in places}, key=len):
        if candidate != "/" and os.path.isdir(candidate) and not any(candidate.startswith(r + os.sep) for r in roots):
            roots.append(candidate)
    return roots


def _module_roots() -> set[str]:
    """The folders the worker's own top-level modules came from: an editable install (nnrag's
    own source tree in a clone under ``~`` or ``/tmp``) is imported through a finder, not through
    ``sys.path``, and must stay reachable too."""
    roots: set[str] = set()
    for name, module in list(sys.modules.items()):
        if "." in name or module is None:
            continue
        locations = list(getattr(module, "__path__", None) or [])
        file = getattr(module, "__file__", None)
        if not locations and isinstance(file, str):
            locations = [os.path.dirname(file)]
        roots.update(p for p in locations if isinstance(p, str) and os.path.isabs(p))
    return roots


def _needed(folder: Path, visible: Sequence[str]) -> list[str]:
    """Folders the child must still reach: its own, the interpreter's, ``sys.path``, the worker's
    modules, ``visible``."""
    return sorted(set(_reachable(len(sys.modules), tuple(sys.path))) | set(_folders((str(folder), *visible))))


@functools.lru_cache(maxsize=4)
def _reachable(modules: int, path: tuple[str, ...]) -> tuple[str, ...]:
    """What every candidate of this worker must reach, for a given set of modules and ``sys.path``:
    computed once in the worker (``prepare_view``), inherited by every fork."""
    return _folders((sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable), *path,
                     *_module_roots()))


def prepare_view() -> None:
    """Compute what the view binds back before the first fork (a few milliseconds saved per candidate)."""
    _reachable(len(sys.modules), tuple(sys.path))
    _hidden_roots()


def _folders(paths: Sequence[str]) -> tuple[str, ...]:
    """The real folders of ``paths`` (a file's folder for a file), those that exist."""
    out = set()
    for p in paths:
        if not p:
            continue
        real = os.path.realpath(p)
        if os.path.isfile(real):
            real = os.path.dirname(real)
        if os.path.isdir(real):
            out.add(real)
    return tuple(sorted(out))


def _bound_back(needed: Sequence[str], roots: Sequence[str]) -> list[str]:
    """The needed folders inside a covered place (never a whole place), an inner one left out
    when an outer one is bound back already."""
    inside = [p for p in needed if any(p.startswith(r + os.sep) for r in roots)]
    return [p for p in inside if not any(p.startswith(q + os.sep) for q in inside if q != p)]


def _read_only_filesystem(folder: Path, visible: Sequence[str] = (), disk_mb: int = 0) -> bool:
    """A private mount namespace where every folder but the system's own is covered (see
    ``_SHOWN``), every mount is read-only but the candidate's folder and /proc, /dev: a write
    anywhere else, whichever way it is made (``os.open`` with ``dir_fd``, libc through ctypes,
    SQLite), fails with EROFS. The candidate's folder becomes a file system of its own of
    ``disk_mb`` MB and a bounded number of files (its pages are memory: a budget's group counts
    them), holding copies of the files the worker put there; what the candidate writes never
    reaches the worker's folder, and the log the worker reads is not in its sight. Needs root or
    the user namespace ``_unshare`` made."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        if libc.unshare(_CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            return False
        roots = _hidden_roots()
        keep = {p: os.open(p, _O_PATH | os.O_DIRECTORY) for p in _bound_back(_needed(folder, visible), roots)}
        given = _given_files(folder)
    except (OSError, AttributeError):
        return False
    # From here on the view has changed and cannot be given back: a step that fails is an error of
    # the gate (raised), never a weaker sandbox nor a failure blamed on the candidate.
    for root in roots:
        if libc.mount(b"tmpfs", root.encode(), b"tmpfs", 2 | 4, b"size=64k,mode=755") != 0:  # nosuid, nodev
            raise OSError(ctypes.get_errno(), f"sandbox setup: cannot cover {root}")
    for path, fd in keep.items():
        os.makedirs(path, exist_ok=True)
        if libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, _MS_BIND | _MS_REC, None) != 0:
            raise OSError(ctypes.get_errno(), f"sandbox setup: cannot bind {path} back")
        os.close(fd)
    own = str(folder).encode()
    os.makedirs(folder, exist_ok=True)
    options = f"size={max(1, disk_mb)}m,nr_inodes={_FOLDER_FILES},mode=700".encode()
    if libc.mount(b"tmpfs", own, b"tmpfs", 2 | 4, options) != 0:  # nosuid, nodev
        raise OSError(ctypes.get_errno(), f"sandbox setup: cannot make the folder {folder}")
    for name, data in given.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        with open(folder / name, "xb") as f:
            f.write(data)
    # the working directory still names the folder as it was before the mount: a relative write
    # (``os.makedirs(".hub")``) must reach the new one
    os.chdir(folder)
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = [(fields[4], fields[5]) for fields in (line.split() for line in f)]
        ok = True
        for point, options_text in mounts:
            if point == str(folder) or point in _WRITABLE:
                continue
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
            for option in options_text.split(","):
                flags |= _KEPT_FLAGS.get(option, 0)
            if libc.mount(None, point.encode(), None, flags, None) != 0 and point == "/":
                ok = False  # the root must be read-only; a special file system that refuses stays as it was
        return ok
    except (OSError, AttributeError):
        return False


_FOLDER_FILES = 20000  # files and folders a candidate may make: a cache of a few libraries
LOG_NAME = "output.log"  # what the candidate prints: opened by the worker, never copied into the folder


def _given_files(folder: Path, below: str = "") -> dict[str, bytes]:
    """The regular files the worker wrote into the folder (the candidate file, the environment's
    compiled kernels in a folder of their own), by path inside it, to copy into the candidate's
    own file system. Nothing of the candidate has run yet: these are the worker's."""
    given: dict[str, bytes] = {}
    for entry in os.scandir(folder / below if below else folder):
        name = f"{below}/{entry.name}" if below else entry.name
        if entry.is_dir(follow_symlinks=False):
            given |= _given_files(folder, name)
        elif name != LOG_NAME and entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as f:
                given[name] = f.read()
    return given


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


def confine(folder: Path, limits: Limits, report_fd: int, visible: Sequence[str] = (),
            memory: str = "rss") -> dict[str, str]:
    """Confine the current (freshly forked, single-threaded) process; ``visible`` are folders it
    must still read (source roots); ``memory`` is how its memory is counted: ``"cgroup-v1"`` or
    ``"cgroup-v2"`` when it has joined a budget's group (see budget.py), else ``"rss"``. With a PID
    namespace this forks: the caller goes on as the namespace's first process. Returns the
    isolation levels."""
    folder = folder.resolve()
    if os.getuid() == 0 and kernel_confinement():
        # root builds the view in a mount namespace of its own, with its rights (nobody could not
        # even look up what to bind back under /root), then becomes nobody; the copy a user
        # namespace then takes of that view is locked, mount by mount
        read_only = _read_only_filesystem(folder, visible, limits.disk_mb)
        dropped = _drop_root(folder)
        namespaces = _unshare()
        own_mounts = bool(namespaces) and ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWNS) == 0
    else:
        dropped = False
        namespaces = _unshare()
        read_only = own_mounts = bool(namespaces) and _read_only_filesystem(folder, visible, limits.disk_mb)
    isolation = {"process": "fork", "network": "netns" if namespaces else "audit-hook",
                 "user": "nobody" if dropped else "caller"}
    mb = 1024 * 1024
    _limit(resource.RLIMIT_CPU, int(limits.cpu_s + limits.import_s), slack=1)
    _limit(resource.RLIMIT_DATA, status_kb("VmData") * 1024 + limits.memory_mb * mb)
    _limit(resource.RLIMIT_FSIZE, limits.file_mb * mb)
    _limit(resource.RLIMIT_CORE, 0)
    # open files hold kernel memory no process's resident set shows (pipe and socket buffers)
    _limit(resource.RLIMIT_NOFILE, _OPEN_FILES)
    try:
        _limit(resource.RLIMIT_NPROC, _tasks_of_user() + limits.processes)
    except (OSError, ValueError):
        pass
    isolation["limits"] = "cpu,data,fsize,nofile,nproc,core"
    isolation["filesystem"] = "private read-only view+audit-hook" if read_only else "audit-hook"
    if read_only:
        isolation["disk"] = f"tmpfs {limits.disk_mb} MB"
    if "pid" in namespaces:
        isolation["process"] = "pidns+own-proc" if _enter_pid_namespace(own_proc=own_mounts) else "pidns"
        isolation["ipc"] = "ipcns"
    counted = memory.startswith("cgroup")
    # without a group the worker sees only resident memory: the calls that hold memory outside
    # it are refused
    if _seccomp(_DENIED_CALLS if counted else _DENIED_CALLS + UNCOUNTED_MEMORY_CALLS):
        isolation["syscalls"] = "seccomp"
    isolation["memory"] = memory if counted else ("rss, memfd and System V shared memory refused"
                                                  if "syscalls" in isolation else "rss")
    _install_hook(folder, report_fd)
    return isolation


_OPEN_FILES = 4096


# What of the environment a candidate keeps: no API key, token or path of the caller (its nnrag
# home) is the candidate's to read. The worker keeps a little more: where its own folders are.
_CANDIDATE_ENV = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                            "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES",
                            "PYTHONHASHSEED", "PYTHONIOENCODING"})
_WORKER_ENV = _CANDIDATE_ENV | {"HOME", "XDG_CACHE_HOME", "TMPDIR", "LD_LIBRARY_PATH", NAMESPACES_ENV, HIDE_ENV, "NNRAG_PRELOAD", BUDGET_ENV}


def minimal_environment(environ: Mapping[str, str], worker: bool = False) -> dict[str, str]:
    """``environ`` less everything a candidate has no use for (the worker's own, with ``worker``)."""
    keep = _WORKER_ENV if worker else _CANDIDATE_ENV
    return {k: v for k, v in environ.items() if k in keep or k.startswith("LC_")}


_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def _probes_loopback(event: str, args: tuple) -> bool:  # type: ignore[type-arg]
    """A bind to an ephemeral loopback port, as libraries do at import to learn whether the host
    has IPv6 (urllib3): it reaches nothing, and nothing can know the port to reach it."""
    address = args[1] if event == "socket.bind" and len(args) > 1 else None
    return isinstance(address, tuple) and len(address) >= 2 and address[0] in _LOOPBACK and address[1] == 0


# C functions a candidate may reach through ctypes to do what the audited Python calls refuse.
_NATIVE_CALLS = frozenset({"fork", "vfork", "clone", "clone3", "execve", "execv", "execvp", "execl", "system", "popen",
                           "posix_spawn", "open", "open64", "openat", "openat64", "creat", "creat64", "unlink",
                           "unlinkat", "rename", "renameat", "mount", "umount", "umount2", "unshare", "setns", "prctl",
                           "ptrace", "kill", "setsid", "socket", "connect", "setrlimit", "prlimit", "prlimit64",
                           "syscall", "dlopen", "chroot", "pivot_root", "process_vm_writev"})


def _network_target(event: str, args: tuple) -> str:  # type: ignore[type-arg]
    """What a network event reaches: the URL of a request (a weights download shows where from), the
    address of a socket call, the host looked up."""
    if event == "urllib.Request" or event.startswith("socket.gethostby"):
        target: object = args[0] if args else None
    elif event == "socket.getaddrinfo":
        target = tuple(args[:2])
    else:  # socket.connect, bind, sendto, sendmsg: (socket, address, ...)
        target = args[1] if len(args) > 1 else None
    return repr(target)


def _install_hook(folder: Path, report_fd: int) -> None:
    """Audit what the candidate does. A network call or a write outside its folder ends the run as
    a violation, even where the candidate catches it. Starting a process fails as the kernel
    would refuse it, with a PermissionError (``PROCESS_REFUSED``), and is reported as refused:
    libraries that probe the machine with a tool at import handle that error and carry on
    (matplotlib runs ``fc-list``, joblib's loky ``lscpu``), and the process never runs either way.
    A run that fails because of the refusal is a violation (see the worker)."""
    root = str(folder)
    state = {"busy": False}

    def outside(path: object) -> bool:
        if isinstance(path, int):
            return False
        try:
            p = os.path.abspath(os.fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        # the folder itself or below it: a sibling sharing its name as a prefix is outside
        return not (p == root or p.startswith(root + os.sep) or p == "/dev/null")

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
                violation("network", f"{event} {_network_target(event, args)[:200]}")
            elif event in _PROCESS_EVENTS:
                started = f"{event} {str(args[:2])[:200]}"
                try:
                    os.write(report_fd, (json.dumps({"refused": f"process: {started}"}) + "\n").encode())
                except OSError:
                    pass
                raise PermissionError(errno.EPERM, f"{PROCESS_REFUSED} ({started})")
            elif event == "open":
                path, mode, flags = (list(args) + [None, None, 0])[:3]
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
                if writing and outside(path):
                    violation("write", f"open {path!r} mode {mode!r}")
            elif event == "os.mkdir" and args and isinstance(args[0], (str, bytes)) and os.path.isdir(args[0]):
                pass  # ``os.makedirs(existing, exist_ok=True)``, as libraries do at import: nothing is written
            elif event in _PATH_EVENTS:
                # a link's target is only text: where the link is made is the write
                written = args[1:2] if event == "os.symlink" else args[:2]
                if any(outside(a) for a in written if isinstance(a, (str, bytes, os.PathLike))):
                    violation("write", f"{event} {args[:2]!r}")
            elif event == "sqlite3.connect":
                database = args[0] if args else ""
                if database not in ("", ":memory:", b"", b":memory:") and outside(database):
                    violation("write", f"sqlite3.connect {database!r}")
            elif event == "ctypes.dlsym":
                name = args[1] if len(args) > 1 else None
                if isinstance(name, bytes):
                    name = name.decode(errors="replace")
                if name in _NATIVE_CALLS:
                    violation("native", f"ctypes reached {name}() of the C library")
        finally:
            state["busy"] = False

    sys.addaudithook(hook)
