"""The warm worker: imports torch once, then forks one fresh, confined child per candidate.

Started as ``python -I -m nnrag.validator.server`` (isolated: no current directory or user site
on ``sys.path``). Protocol: one JSON request per line on stdin, one JSON record per line on
stdout. Requests: ``{"code", "filename", "class_name", "limits", "hints"}`` to check a candidate, or
``{"task": "harvest", "factories", "packages", "paths", "limits"}`` to record usage (see harvest.py).

The server itself never runs a torch operation: a process that has started OpenMP threads
cannot fork safely, so only children compute.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import re
import secrets
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from types import CodeType
from typing import Any

from . import kernels
from . import record as R
from .record import Limits, ValidationRecord
from .budget import MemoryBudget, remove_stale
from .sandbox import LOG_NAME, PROCESS_REFUSED, minimal_environment, proc_state
from .static import compile_candidate

_POLL_S = 0.05
# Imported once here so that no child pays for them: a block file that imports torchvision
# (which pulls in torch._dynamo) spends ~1.6 s on that import alone. Missing ones are skipped.
_PRELOAD = "torch,torch.nn,torch.nn.functional,torch.utils.checkpoint,torch.fx,torchvision,torchvision.ops,numpy"


def _guarded() -> list[tuple[object, str, object, object]]:
    """What the harness and torch's calling path rely on, as (owner, name, object, its code): a
    candidate that replaces one (``nn.Module.__call__`` swallowing errors, a probe function
    returning success) would make the gate report what did not happen."""
    import builtins
    import inspect

    import torch
    from torch import nn

    from .probing import arguments, frames, inputs, probe, repairs, shape_errors, source

    owners: list[tuple[object, str]] = [
        (nn.Module, n) for n in ("__call__", "_call_impl", "__getattr__", "__setattr__", "parameters",
                                  "named_parameters", "train", "eval", "zero_grad", "modules", "named_modules")]
    owners += [(torch.Tensor, n) for n in ("backward", "sum", "float", "detach", "requires_grad_", "clone")]
    owners += [(torch.autograd, "backward"), (torch.autograd, "grad"), (torch, "no_grad"), (torch, "is_tensor"),
               (json, "dumps"), (os, "write"), (os, "_exit"), (builtins, "isinstance"), (builtins, "getattr"),
               (builtins, "sum"), (builtins, "len"), (builtins, "type")]
    for module in (probe, arguments, inputs, shape_errors, repairs, frames, source):
        owners += [(module, n) for n, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == module.__name__]
    return [(owner, name, obj, getattr(obj, "__code__", None)) for owner, name in owners if (obj := getattr(owner, name, None))]


_GUARDED: list[tuple[object, str, object, object]] = []  # filled once by main(), inherited by every fork


def _tampered(guarded: list[tuple[object, str, object, object]]) -> list[str]:
    return [f"{getattr(owner, '__name__', type(owner).__name__)}.{name}" for owner, name, obj, code in guarded
            if getattr(owner, name, None) is not obj or getattr(obj, "__code__", None) is not code]


_TOKEN_WAIT_S = 10.0


def _token(fd: int) -> str | None:
    """This run's token, which the worker sends only once the harness asks for it (after the
    block ran): code that ran at import time cannot have read it."""
    if not select.select([fd], [], [], _TOKEN_WAIT_S)[0]:
        return None
    return os.read(fd, 64).decode("ascii", "replace") or None


def _finish(report_fd: int, token_fd: int, result: dict[str, Any], write: Any = os.write) -> None:
    """Ask for the token and write the one record of this run, carrying it."""
    for stream in (sys.stdout, sys.stderr):  # what the candidate printed reaches the log first
        try:
            stream.flush()
        except BaseException:
            pass
    write(report_fd, b'{"progress": "done"}\n')
    result["token"] = _token(token_fd)
    write(report_fd, (json.dumps(result, default=str) + "\n").encode())


def _child(folder: Path, request: dict[str, Any], limits: Limits, report_fd: int, compiled: CodeType | None,
           log_fd: int, token_fd: int, budget: MemoryBudget | None) -> None:
    result: dict[str, Any] = {"ok": False, "stage": "import"}
    try:
        memory = "rss"
        if budget is not None:
            try:
                budget.join()  # first: every page from here on is counted
                memory = budget.kind
            except OSError:
                pass
        os.setsid()
        os.dup2(log_fd, 1)  # the worker's own file, outside the candidate's sight: it reads it by this fd
        os.dup2(log_fd, 2)
        os.close(log_fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.chdir(folder)
        kept = minimal_environment(os.environ)
        os.environ.clear()
        os.environ.update(kept, HOME=str(folder), TMPDIR=str(folder),
                          HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TORCH_HOME=str(folder / ".torch"),
                          XDG_CACHE_HOME=str(folder / ".cache"), TORCHINDUCTOR_CACHE_DIR=str(folder / ".inductor"),
                          TRITON_CACHE_DIR=str(folder / ".triton"),
                          # numba caches what it compiles beside the module that defines it, which
                          # for a library is site-packages: a write outside the folder
                          NUMBA_CACHE_DIR=str(folder / kernels.CACHE_NAME))
        import tempfile as _tempfile

        _tempfile.tempdir = str(folder)  # the worker cached its own; torch caches go here, not /tmp
        from .sandbox import confine, status_kb, stray_processes

        base_kb = status_kb("VmRSS")
        try:
            result["isolation"] = confine(folder, limits, report_fd, request.get("paths") or (), memory=memory)
        except OSError as e:  # the gate's own failure: no candidate code has run
            result.update(code=R.PROBE_ERROR, message=f"the sandbox could not be set up: {e}"[:500])
            _finish(report_fd, token_fd, result)
            return
        # sent before any code of the candidate's runs: the worker keeps the first, also for a run it kills
        os.write(report_fd, (json.dumps({"isolation": result["isolation"]}) + "\n").encode())
        import torch

        from .probing import probe

        torch.set_num_threads(1)
        started = time.perf_counter()
        if request.get("task") == "harvest":
            result["stage"] = "harvest"
            try:
                from .usage.harvest import harvest  # nnrag's own code: inside the view only if bound back
            except BaseException as e:
                result["message"] = f"the usage harvest could not start in the sandbox: {type(e).__name__}: {e}"[:2000]
                _finish(report_fd, token_fd, result)
                return
            try:
                harvest(request["factories"], request["packages"], request.get("paths", []),
                        lambda record: os.write(report_fd, (json.dumps(record, default=str) + "\n").encode()),
                        import_s=limits.import_s)
                result["ok"] = True
            except BaseException as e:
                result["message"] = probe.format_failure(e)
            _finish(report_fd, token_fd, result)
            return
        if request.get("task") == kernels.KERNELS_TASK:
            result["stage"] = "run"
            try:
                result["value"] = kernels.compile_all()
                result["ok"] = True
            except BaseException as e:
                result["message"] = f"{type(e).__name__}: {e}"[:2000]
            _finish(report_fd, token_fd, result)
            return
        if request.get("task") == "run":
            result["stage"] = "run"
            try:
                result["value"] = confined_call(request["function"], request.get("argument"))
                result["ok"] = True
            except BaseException as e:
                result["message"] = f"{type(e).__name__}: {e}"[:2000]
                result["traceback"] = probe.format_failure(e)
            _finish(report_fd, token_fd, result)
            return
        write = os.write  # the original, kept before any candidate code runs
        held = {int(fd) for fd in os.listdir("/proc/self/fd")}  # the harness's own descriptors
        try:
            if request.get("paths"):  # read-only for the candidate: no bytecode written beside the sources
                sys.dont_write_bytecode = True
                sys.path[:0] = request["paths"]
            filename = request.get("filename") or "candidate.py"
            probe.run(folder / filename, request.get("class_name"), result, lambda stage: _progress(report_fd, stage),
                      request.get("hints"), compiled, request.get("companions"))
            result["ok"] = True
        except probe.StageFailure as e:
            result.update(stage=e.stage, code=e.code, message=str(e)[:2000])
            if e.error is not None:
                result["traceback"] = probe.format_failure(e.error)
        except BaseException as e:  # a violation, or an error of the probe itself (a bug of the gate)
            code = R.PROBE_ERROR if probe.raised_by_probe(e) else probe.classify(result.get("stage", "import"), e)
            result.update(code=code, message=f"{type(e).__name__}: {e}"[:2000], traceback=probe.format_failure(e))
        result["seconds"] = time.perf_counter() - started
        _close_all_but(held)  # a candidate that used up its descriptors must not leave the harness none
        result["peak_mb"] = round(max(0, status_kb("VmHWM") - base_kb) / 1024, 1)
        if changed := _tampered(_GUARDED):  # written without json, which may be among them
            names = ",".join(re.sub(r"[^A-Za-z0-9_.]", "", n) for n in changed[:8])
            write(report_fd, f'{{"violation": "integrity: the candidate replaced {names}"}}\n'.encode())
        if strays := stray_processes():  # they die with this process; starting them is the violation
            write(report_fd, f'{{"violation": "process: {len(strays)} process(es) still running after the check, '
                             f'killed with the candidate"}}\n'.encode())
        _finish(report_fd, token_fd, result, write)
    finally:
        os._exit(0)


def _close_all_but(kept: set[int]) -> None:
    """Close every descriptor the candidate opened: the run is over, and what the harness still
    does (reading /proc, writing the record) needs a few."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    start = 0
    for fd in sorted(kept) + [limit]:
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1


def confined_call(function: str, argument: Any) -> Any:
    """Call ``module:function`` of nnrag's own (the caller names it: LEMUR's training of a model)
    inside the sandbox; it takes and returns JSON data."""
    module, _, name = function.partition(":")
    if not module.startswith("nnrag.") or not name:
        raise ValueError(f"{function} is not a function of nnrag's")
    import importlib

    return getattr(importlib.import_module(module), name)(argument)


_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25  # Linux 6.1+
_HUGE = 1 << 21
_HUGE_AFTER = 40


def _huge_pages() -> None:
    """Back the anonymous memory torch's import leaves (~370 MB) with huge pages, so that a fork
    copies ~500 times fewer page-table entries and an exit frees them as fast. Measured here: fork
    plus exit of this process 42 ms -> 12 ms, for 1.5 s spent once. Best effort: a kernel without
    MADV_COLLAPSE (Linux < 6.1) keeps small pages."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as f:
            lines = f.readlines()
    except (OSError, AttributeError):
        return
    for line in lines:
        fields = line.split()
        anonymous = len(fields) < 6 or fields[5] == "[heap]"
        if not anonymous or not fields[1].startswith("rw") or not fields[1].endswith("p"):
            continue
        low, high = (int(x, 16) for x in fields[0].split("-"))
        low, high = (low + _HUGE - 1) & ~(_HUGE - 1), high & ~(_HUGE - 1)
        if high - low >= _HUGE and libc.madvise(low, high - low, _MADV_HUGEPAGE) == 0:
            libc.madvise(low, high - low, _MADV_COLLAPSE)


def _progress(fd: int, stage: str) -> None:
    os.write(fd, (json.dumps({"progress": stage}) + "\n").encode())


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


# The worker is a child subreaper: a candidate's orphaned descendants (a daemon that called
# setsid, a fork bomb from ctypes the audit hook never sees) are reparented to it, not to init, so
# after each check it finds and kills every one of them.
_PR_SET_CHILD_SUBREAPER = 36
_TREE_EVERY_S = 0.25


def _subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (st := proc_state(entry.name)) is not None:
            children.setdefault(st[1], []).append(int(entry.name))
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def _pss_kb(pid: int) -> int:
    """Proportional resident memory: pages shared with the worker count once over all sharers."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _reap() -> None:
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            return


def _running(pids: list[int]) -> list[int]:
    """Those of ``pids`` not already dead (zombies, or exiting)."""
    return [p for p in pids if (st := proc_state(p)) is not None and st[0] not in ("Z", "X")]


_GRACE_S = 0.3


def _sweep() -> list[int]:
    """Kill every process left below this worker (the checked child is reaped already) and reap
    them; the pids found running. Processes the kernel is already killing (the rest of a PID
    namespace whose first process ended) come here to be reaped: given a moment, they are not
    counted."""
    deadline = time.perf_counter() + _GRACE_S
    while True:
        _reap()
        left = descendants(os.getpid())
        if not left or not _running(left) or time.perf_counter() > deadline:
            break
        time.sleep(0.02)
    found: list[int] = []
    for _ in range(20):  # a killed parent's children come to us: repeat until none is left
        left = descendants(os.getpid())
        if not left:
            break
        found += [p for p in _running(left) if p not in found]
        for p in left:
            _kill(p)
        time.sleep(0.01)
        _reap()
    return found


_FOLDER_PREFIX = "nnrag-sandbox-"


def _remove_stale_folders() -> None:
    """Candidate folders of workers that died mid-check (killed with their build): a folder is
    named after its worker's pid, and one whose worker is gone is removed."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_FOLDER_PREFIX}*-*"):
        owner = folder.name[len(_FOLDER_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def _kill(pid: int) -> None:
    for fn in (os.killpg, os.kill):
        try:
            fn(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


_RESULT_CAP = 64 * 1024 * 1024  # bytes a run may send on its result channel (a harvest's records among them)


class _Channel:
    """The lines a run sends, read as they arrive, never more than ``_RESULT_CAP`` bytes. The
    run's token goes out once the harness asks for it."""

    def __init__(self, token: str, token_fd: int) -> None:
        self.token, self.token_fd = token, token_fd
        self.lines: list[dict[str, Any]] = []
        self.asked = 0
        self.received = 0
        self._partial: list[bytes] = []  # chunks of a line not ended yet, joined once it ends

    def feed(self, data: bytes) -> bool:
        """Take ``data``; False once the run has sent more than its cap. A long line is kept in
        chunks until it ends: joining it anew with every chunk made a flood of 1 MB lines cost
        time quadratic in its length, and the flood reached the deadline before the cap under load."""
        self.received += len(data)
        if self.received > _RESULT_CAP:
            return False
        if b"\n" not in data:
            self._partial.append(data)
            return True
        *complete, rest = b"".join([*self._partial, data]).split(b"\n")
        self._partial = [rest] if rest else []
        for raw in complete:
            try:
                line = json.loads(raw.decode("utf-8", "replace")) if raw.strip().startswith(b"{") else None
            except ValueError:
                line = None
            if not isinstance(line, dict):
                continue
            if line.get("progress") == "done":
                self.asked += 1
                if self.asked == 1:
                    try:
                        os.write(self.token_fd, self.token.encode())
                    except OSError:
                        pass
            else:
                self.lines.append(line)
        return True


def _log_tail(fd: int, size: int = 2000) -> str:
    """The end of what the candidate printed, read through the worker's own descriptor of the
    file it made: never a path in the candidate's reach, never more than ``size`` bytes."""
    try:
        length = os.fstat(fd).st_size
        return os.pread(fd, size, max(0, length - size)).decode("utf-8", "replace")
    except OSError:
        return ""


_BUDGET: list[MemoryBudget | None] = []  # this worker's group, made on first use


def _budget(limit_mb: int) -> MemoryBudget | None:
    if not _BUDGET:
        _BUDGET.append(MemoryBudget.create(str(os.getpid())))
    budget = _BUDGET[0]
    if budget is not None:
        try:
            budget.set_limit(limit_mb)
        except OSError:
            return None
    return budget


def check(request: dict[str, Any], base_rss_kb: int) -> dict[str, Any]:
    limits = Limits(**request.get("limits", {}))
    started = time.perf_counter()
    filename = request.get("filename") or "candidate.py"
    folder = Path(tempfile.mkdtemp(prefix=f"{_FOLDER_PREFIX}{os.getpid()}-"))
    compiled = None
    if "code" in request:
        (folder / filename).write_text(request["code"], encoding="utf-8")
        # compiled once here, before the fork: the child runs the code object
        compiled = compile_candidate(request["code"], str(folder / filename), shown=filename)
        if isinstance(compiled, ValidationRecord):
            shutil.rmtree(folder, ignore_errors=True)
            return compiled.to_dict() | {"seconds": round(time.perf_counter() - started, 4)}
    if _KERNELS and _KERNELS[0] is not None:
        kernels.seed(_KERNELS[0], folder)  # numba finds the environment's kernels compiled already
    log_fd = os.open(folder / LOG_NAME, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    budget = _budget(limits.memory_mb)
    kills_before = budget.kills() if budget is not None else 0
    read_fd, write_fd = os.pipe()
    token_read, token_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.close(token_write)
        _child(folder, request, limits, write_fd, compiled, log_fd, token_read, budget)
    os.close(write_fd)
    os.close(token_read)
    channel = _Channel(secrets.token_hex(16), token_write)  # made after the fork: the child never held it
    killed: str | None = None
    flooded = False
    # a check's clock starts where its import ends (the first stage after it), the import having
    # up to ``import_s`` of its own; a harvest imports script after script, so it has both at once
    task = request.get("task")
    deadline = started + limits.timeout_s + (limits.import_s if task == "harvest" else 0.0)
    importing = task is None
    seen = 0
    rss_limit = base_rss_kb + limits.memory_mb * 1024
    below: list[int] = []  # the child's own processes, seen by the last look at the tree
    next_look = started + _TREE_EVERY_S
    status: int | None = None
    try:
        while True:
            ready, _, _ = select.select([read_fd], [], [], _POLL_S)
            if ready:
                data = os.read(read_fd, 65536)
                if not data:
                    break
                flooded = not channel.feed(data)
                if importing and len(channel.lines) > seen:
                    if any(x.get("progress") not in (None, "import") for x in channel.lines[seen:]):
                        importing, deadline = False, max(deadline, time.perf_counter() + limits.timeout_s)
                    seen = len(channel.lines)
            else:  # the child may be gone while a process it started holds the pipe open
                done, code = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = code
                    while (not flooded and select.select([read_fd], [], [], 0)[0]
                           and (data := os.read(read_fd, 65536))):
                        flooded = not channel.feed(data)
                    break
            now = time.perf_counter()
            oom = False
            if now >= next_look:  # every process of the candidate counts, not only the child
                next_look = now + _TREE_EVERY_S
                below = descendants(pid)
                oom = budget is not None and budget.kills() > kills_before  # one of them was killed by the kernel
            if flooded:
                killed = R.SANDBOX_VIOLATION
            elif now > (started + max(limits.timeout_s, limits.import_s) if importing else deadline):
                killed = R.TIMEOUT
            elif oom or _rss_kb(pid) + sum(_pss_kb(p) for p in below) > rss_limit:
                killed = R.MEMORY
            elif len(below) > limits.processes:
                killed = R.SANDBOX_VIOLATION
            if killed:
                _kill(pid)
                break
        if status is None:
            _, status = os.waitpid(pid, 0)
    finally:
        os.close(read_fd)
        os.close(token_write)
    left = _sweep()
    seconds = time.perf_counter() - started
    output = _log_tail(log_fd)
    os.close(log_fd)
    shutil.rmtree(folder, ignore_errors=True)
    if budget is not None and budget.kills() > kills_before and killed != R.SANDBOX_VIOLATION:
        killed = R.MEMORY  # the kernel killed a process of the candidate's for memory: the cause, not the time
    lines = channel.lines
    violations = [str(x["violation"]) for x in lines if "violation" in x]
    if flooded:
        violations.append(f"result: more than {_RESULT_CAP >> 20} MB arrived on the result channel")
    elif killed == R.SANDBOX_VIOLATION:
        violations.append(f"process: started more than {limits.processes} processes")
    if left and killed is None:  # processes the candidate left behind (after a kill, its children are expected)
        violations.append(f"process: {len(left)} process(es) still running after the check, killed ({', '.join(map(str, left[:10]))})")
    if channel.asked > 1:  # the harness asks once: the candidate asked too
        violations.append(f"result: the run's token was asked for {channel.asked} times")
    records = [x for x in lines if "stage" in x]
    if len(records) > 1:  # the harness writes one: another came from the candidate
        violations.append(f"result: {len(records)} result records arrived where the harness writes one")
    isolation = next((x["isolation"] for x in lines if "isolation" in x and "stage" not in x), {})
    result = _verdict(records, killed, status, limits, lines)
    if result is not None and result.pop("token", None) != channel.token:
        violations.append("result: the record does not carry this run's token")
    if request.get("task") in ("harvest", "run", kernels.KERNELS_TASK):  # partial results count: factories report one by one
        end = result or _unfinished(killed, status, limits)
        answer = {"ok": bool(end.get("ok")) and not violations, "violations": violations, "killed": killed,
                  "message": end.get("message"), "output": output, "seconds": round(seconds, 4),
                  "isolation": isolation}
        if request.get("task") == "harvest":
            answer["factories"] = [x for x in lines if "factory" in x]
        elif answer["ok"]:
            answer["value"] = end.get("value")
        return answer
    if result is None:
        result = {"ok": False, "stage": next((x["progress"] for x in reversed(lines) if "progress" in x), "import")}
        result.update(_unfinished(killed, status, limits))
        if killed == R.TIMEOUT:  # which clock ran out: the import's, or the check's after it
            result["message"] = (f"its import did not end within {max(limits.timeout_s, limits.import_s):g} s"
                                 if importing else f"no result within {limits.timeout_s:g} s of its import") \
                + "; process group killed"
    result["isolation"] = isolation  # as the sandbox reported it before the candidate ran
    result["refused"] = [str(x["refused"]) for x in lines if "refused" in x][:20]
    if not result.get("ok") and result["refused"] and not violations \
            and PROCESS_REFUSED in f"{result.get('message', '')}\n{result.get('traceback', '')}":
        # it failed because it may not start a process: what it needs, the sandbox refuses
        violations.append(f"process: the run failed on a refused process start ({result.get('message', '')})"[:1000])
    if violations:
        result.update(ok=False, code=R.SANDBOX_VIOLATION, message="; ".join(violations)[:2000])
    result["output"] = output
    result["seconds"] = round(seconds, 4)
    return result


_KERNELS: list[Path | None] = []  # this environment's compiled numba kernels, once known


def _compiled_kernels() -> Path | None:
    """The folder of this environment's numba kernels, compiled in a confined child the first
    time any worker of the environment needs them (see kernels.py); None where there are none."""
    root = kernels.cache_root()
    if root is None:
        return None
    limits = Limits(timeout_s=kernels.COMPILE_S + 30, cpu_s=int(kernels.COMPILE_S * 2), import_s=0.0)

    from .sandbox import status_kb

    def compile_in_child() -> Any:
        answer = check({"task": kernels.KERNELS_TASK, "limits": asdict(limits)}, status_kb("VmRSS"))
        return answer.get("value") if answer.get("ok") else None

    try:
        return root if kernels.ensure(root, compile_in_child) else None
    except OSError:  # no cache folder to write: every check compiles for itself, as before
        return None


def _verdict(records: list[dict[str, Any]], killed: str | None, status: int, limits: Limits,
             lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The harness's record, where it counts: the last one, from a run that ended on its own and
    cleanly. A run that was killed (time, memory) or died after its record is judged by that,
    whatever it had sent; None where no record counts."""
    if killed or not records:
        return None
    result = records[-1]
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        stage = next((x["progress"] for x in reversed(lines) if "progress" in x), result.get("stage", "import"))
        return {"ok": False, "stage": stage, "token": result.get("token"), **_unfinished(None, status, limits)}
    return result


def _unfinished(killed: str | None, status: int, limits: Limits) -> dict[str, Any]:
    """Code and message of a run that did not end with the harness's record."""
    if killed == R.TIMEOUT:
        return {"code": R.TIMEOUT, "message": f"no result within {limits.timeout_s:g} s; process group killed"}
    if killed == R.MEMORY:
        return {"code": R.MEMORY, "message": f"the memory of the candidate's processes grew past {limits.memory_mb} MB; killed"}
    if killed == R.SANDBOX_VIOLATION:
        return {"code": R.SANDBOX_VIOLATION, "message": "killed"}
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return {"code": R.TIMEOUT, "message": f"CPU time limit of {limits.cpu_s} s reached"}
    how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit code {os.WEXITSTATUS(status)}"
    return {"code": R.CRASH, "message": f"the sandboxed process died ({how}) without its result"}


def main() -> None:
    # -I ignores PYTHONDONTWRITEBYTECODE; a child writing a .pyc into site-packages is a violation
    sys.dont_write_bytecode = True
    from .probing import probe  # noqa: F401  (children must not import, and so write, anything of ours)

    # ``--preload a,b``: modules of installed distributions many candidates import (Gate.preload)
    more = sys.argv[sys.argv.index("--preload") + 1].split(",") if "--preload" in sys.argv[:-1] else []
    preload = os.environ.get("NNRAG_PRELOAD", _PRELOAD).split(",") + more
    for name in filter(None, preload):
        try:
            __import__(name)
        except Exception:
            pass
    from .probing import weights
    from .sandbox import kernel_confinement, prepare_view, status_kb

    kernel_confinement()  # asked once here (a fork), inherited by every candidate
    prepare_view()
    weights.install()  # here, where it walks the preloaded modules once; every candidate inherits it
    # a child's garbage collection must not write to (and so copy) every object the imports made
    _GUARDED[:] = _guarded()
    gc.freeze()
    _subreaper()
    _remove_stale_folders()
    remove_stale(lambda pid: Path(f"/proc/{pid}").exists())
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    served = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        served += 1
        if served == _HUGE_AFTER:  # pays for itself after ~50 candidates; a short run skips it
            _huge_pages()
        try:
            request = json.loads(line)
            if not _KERNELS:  # on the first request, not at start: compiling may take minutes
                _KERNELS.append(_compiled_kernels())
            result = check(request, status_kb("VmRSS"))
        except Exception as e:  # a bad request must not take the worker down
            result = {"ok": False, "stage": "import", "code": R.CRASH, "message": f"worker error: {type(e).__name__}: {e}"}
        out.write(json.dumps(result, default=str) + "\n")
        out.flush()
    for budget in _BUDGET:
        if budget is not None:
            budget.close()


if __name__ == "__main__":
    main()
