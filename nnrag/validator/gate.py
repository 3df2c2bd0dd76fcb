"""The one gate every candidate passes: parse, compile, then a sandboxed import/instantiate/forward.

Everything runs in warm workers (:mod:`nnrag.validator.server`), each a Python that imported
torch once: it parses and compiles a candidate, then forks one fresh, confined child for it, a
fresh process per candidate without paying the seconds a new interpreter needs to import torch.
(Before any worker is up, parse and compile run here, so code that cannot pass starts none.)
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, TypeVar

from ..errors import ValidatorUnavailable
from . import record as R
from ..workspace import in_use
from .record import Limits, ValidationRecord
from .sandbox import HIDE_ENV, minimal_environment
from .static import static_check

log = logging.getLogger(__name__)
T = TypeVar("T")
_START_TIMEOUT_S = 180.0


class WorkerDied(Exception):
    """A validation worker went away mid-request; the candidate is recorded as a crash."""


class _Worker:
    def __init__(self, python: str | None = None, preload: tuple[str, ...] = (), generation: int = 0) -> None:
        # the worker keeps no API key or token of the caller's: candidates are its children
        env = minimal_environment(os.environ, worker=True) | {"HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        if homes := in_use():
            env[HIDE_ENV] = os.pathsep.join([*env.get(HIDE_ENV, "").split(os.pathsep), *map(str, homes)]).strip(os.pathsep)
        self.generation = generation  # of the gate's preload list it started with
        self.proc = subprocess.Popen(
            [python or sys.executable, "-I", "-m", "nnrag.validator.server", *(["--preload", ",".join(preload)] if preload else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd="/",
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line or not json.loads(line).get("ready"):
            self.close()
            raise ValidatorUnavailable(f"the validation worker did not start in {python or sys.executable} "
                                       "(is torch installed in this Python?)")

    def request(self, request: dict[str, Any]) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError("validation worker exited")
        return json.loads(line)

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


class Gate:
    """A pool of warm workers. Use as a context manager; workers start on first use or on :meth:`warm`.
    ``python``: the interpreter the workers run (a requirement environment), else this one."""

    def __init__(self, workers: int | None = None, limits: Limits | None = None, python: str | None = None) -> None:
        self.workers = max(1, workers or min(2, os.cpu_count() or 1))
        self.limits = limits or Limits()
        self.python = python
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._started = 0
        self._lock = threading.Lock()
        self._closed = False
        self._warming: list[threading.Thread] = []
        self._preload: tuple[str, ...] = ()
        self._generation = 0

    def preload(self, modules: Iterable[str]) -> None:
        """Have workers import ``modules`` of installed distributions once, as they import torch,
        instead of every candidate importing them again (a language-model library's modelling
        utilities cost each candidate about 2 s). Workers started before are replaced as they
        come free. Only for installed packages the caller trusts as it trusts torch: the workers
        import them outside the candidates' sandbox."""
        with self._lock:
            wanted = tuple(sorted(set(self._preload) | set(modules)))
            if wanted != self._preload:
                self._preload, self._generation = wanted, self._generation + 1

    def _new_worker(self) -> _Worker:
        with self._lock:
            preload, generation = self._preload, self._generation
        return _Worker(self.python, preload, generation)

    def _retired(self, worker: _Worker) -> bool:
        """Close ``worker`` (freeing its slot for a new one) if the preload list changed since it started."""
        with self._lock:
            stale = worker.generation != self._generation
            if stale:
                self._started -= 1
        if stale:
            worker.close()
        return stale

    def _put_back(self, worker: _Worker) -> None:
        if not self._retired(worker):
            self._idle.put(worker)

    def __enter__(self) -> "Gate":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                break

    def warm(self) -> None:
        """Start the workers in the background, so their seconds of importing torch overlap the
        caller's own work; a worker that fails to start here is started (and reported) on first use."""

        def start() -> None:
            try:
                worker = self._new_worker()
            except BaseException:
                log.debug("warming a validation worker failed", exc_info=True)
                with self._lock:
                    self._started -= 1
                return
            with self._lock:
                closed = self._closed
            if closed:
                worker.close()
            else:
                self._put_back(worker)

        with self._lock:
            missing = self.workers - self._started
            self._started = self.workers
        for _ in range(missing):
            thread = threading.Thread(target=start, daemon=True)
            thread.start()
            self._warming.append(thread)

    def _acquire(self) -> _Worker:
        deadline = time.monotonic() + _START_TIMEOUT_S + self.limits.timeout_s * 4
        while True:
            with self._lock:
                start = self._idle.empty() and self._started < self.workers
                if start:
                    self._started += 1
            if start:
                try:
                    return self._new_worker()
                except BaseException:
                    with self._lock:
                        self._started -= 1
                    raise
            try:
                # short waits: a worker warming in the background may fail, freeing its slot
                worker = self._idle.get(timeout=1.0)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise
                continue
            if not self._retired(worker):
                return worker

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        worker = self._acquire()
        try:
            result = worker.request(request)
        except (EOFError, BrokenPipeError, OSError) as e:
            worker.close()
            with self._lock:
                self._started -= 1
            raise WorkerDied(str(e)) from e
        self._put_back(worker)
        return result

    def _compiles_remotely(self) -> bool:
        return self._started > 0

    def check_code(self, code: str, class_name: str | None = None, filename: str = "candidate.py",
                   hints: list[dict[str, Any]] | None = None, limits: Limits | None = None,
                   paths: Sequence[str] = (), companions: list[dict[str, Any]] | None = None) -> ValidationRecord:
        """Run every stage on ``code``; ``hints`` are recorded usages of the class to try first;
        ``paths`` are folders the candidate may import from (a vendored package's parent);
        ``companions`` are recorded constructions of other classes in the file, which the probe may
        pass where an argument lacks an attribute they have (see validator/companions.py)."""
        started = time.perf_counter()
        # Parse and compile run in the worker, beside its fork, so this process (one thread per
        # worker, one GIL) stays free; before any worker is up they run here, so code that cannot
        # pass costs no worker start.
        if not self._compiles_remotely() and (failed := static_check(code, filename)) is not None:
            return failed
        request = {"code": code, "filename": filename, "class_name": class_name, "limits": asdict(limits or self.limits)}
        if hints:
            request["hints"] = hints
        if companions:
            request["companions"] = companions
        if paths:
            request["paths"] = [str(Path(p).resolve()) for p in paths]
        try:
            return ValidationRecord.from_dict(self._send(request))
        except WorkerDied as e:
            return ValidationRecord(False, "import", R.CRASH, f"validation worker died: {e}", seconds=time.perf_counter() - started)

    def harvest(self, factories: Sequence[Sequence[str]], packages: Sequence[str], paths: Sequence[str] = (),
                timeout_s: float = 300.0) -> dict[str, Any]:
        """Run ``(module, function)`` factories of a source in one sandboxed child, recording usage
        (a third item: the recipe a ``Class.<passed>`` unit runs by, see usage/harvest.py).

        Returns ``{"factories": [record, ...], "killed": code or None}``; records arrive factory by
        factory, so a run cut short by its time limit keeps what it recorded."""
        limits = asdict(self.limits) | {"timeout_s": timeout_s, "cpu_s": timeout_s * 2}
        request = {"task": "harvest", "factories": [list(f) for f in factories], "packages": list(packages),
                   "paths": list(paths), "limits": limits}
        try:
            return self._send(request)
        except WorkerDied as e:
            return {"factories": [], "killed": R.CRASH, "message": str(e)}

    def run(self, function: str, argument: Any, limits: Limits, paths: Sequence[str] = ()) -> dict[str, Any]:
        """Call ``function`` (``"nnrag.module:name"``, one of nnrag's functions that runs untrusted
        code: LEMUR's training of a model) in a confined child, as a candidate is checked. ``argument``
        and the value returned are JSON data; ``paths`` are folders it may read.

        Returns ``{"ok", "value", "message", "violations", "killed", "output", "isolation"}``: the
        value is what the confined code returned, data for the caller to check, never to trust."""
        request = {"task": "run", "function": function, "argument": argument, "paths": [str(p) for p in paths],
                   "limits": asdict(limits)}
        try:
            return self._send(request)
        except WorkerDied as e:
            return {"ok": False, "killed": R.CRASH, "message": f"validation worker died: {e}", "violations": []}

    def check_file(self, path: str | os.PathLike[str], class_name: str | None = None) -> ValidationRecord:
        p = Path(path)
        try:  # as Python reads a source file: UTF-8 unless a coding line says otherwise
            code = importlib.util.decode_source(p.read_bytes())
        except (UnicodeDecodeError, SyntaxError, LookupError) as e:
            return ValidationRecord(False, "parse", R.SYNTAX_ERROR, f"{p.name} is not Python source text: {e}"[:500])
        return self.check_code(code, class_name, p.name)

    def check_many(self, items: Iterable[tuple[Any, ...]], limits: Limits | None = None) -> Iterator[tuple[T, ValidationRecord]]:
        """Check ``(key, code, class_name[, hints[, companions]])`` items on all workers; yields in
        completion order."""
        todo: queue.Queue[tuple[Any, ...] | None] = queue.Queue(maxsize=self.workers * 2)
        done: queue.Queue[tuple[T, ValidationRecord] | BaseException | None] = queue.Queue()

        def run() -> None:
            while True:
                item = todo.get()
                if item is None:
                    done.put(None)
                    return
                key, code, class_name, *more = item
                hints, companions = (*more, None, None)[:2]
                try:
                    done.put((key, self.check_code(code, class_name, hints=hints, limits=limits, companions=companions)))
                except BaseException as e:  # a worker that cannot start
                    done.put(e)

        threads = [threading.Thread(target=run, daemon=True) for _ in range(self.workers)]
        for t in threads:
            t.start()

        def feed() -> None:
            for item in items:
                todo.put(item)
            for _ in threads:
                todo.put(None)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        finished = 0
        while finished < len(threads):
            got = done.get()
            if got is None:
                finished += 1
            elif isinstance(got, BaseException):
                raise got
            else:
                yield got
