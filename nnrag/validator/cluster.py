"""The gate on a Dask cluster: candidates are validated on the cluster's machines.

Validation is the heavy part of a build (extraction takes milliseconds a block; a sandboxed
forward pass takes tens of them to seconds), so it is what a corpus beyond one machine spreads
out. :class:`ClusterGate` is a :class:`~nnrag.validator.gate.Gate` whose requests, the same JSON
requests a local worker answers, are submitted as Dask tasks. Each Dask worker process keeps its
own pool of warm workers (one per Dask thread), so every candidate still runs in a fresh,
confined child forked from a Python that imported torch once. Candidates travel as source text:
the cluster's machines need nnrag and the block's requirements installed, not the corpus.

Running a source's own model factories (recorded usage) reads the source's files, which only
this machine has; that stays local.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from typing import Any, Iterable, Sequence

from ..errors import ConfigError, NnragError
from .gate import Gate, WorkerDied
from .record import Limits

log = logging.getLogger(__name__)
_CONNECT_TIMEOUT_S = 10.0

# State of a Dask worker process: its pool of warm validation workers and how many requests it
# served (read by ``served``; tests use it to see that work ran on the cluster).
_pool: Gate | None = None
_pool_lock = threading.Lock()
_served = 0


def _local_pool(worker: Any = None) -> Gate:
    global _pool
    with _pool_lock:
        if _pool is None:
            if worker is None:
                from distributed import get_worker

                worker = get_worker()
            threads = getattr(worker, "nthreads", None) or worker.state.nthreads
            _pool = Gate(threads)
            atexit.register(_pool.close)
        return _pool


def serve(request: dict[str, Any]) -> dict[str, Any]:
    """Answer one gate request on a Dask worker (the task ``ClusterGate`` submits)."""
    global _served
    result = _local_pool()._send(request)
    with _pool_lock:
        _served += 1
    return result


def warm(dask_worker: Any = None) -> dict[str, object]:
    """Start this Dask worker's validation workers in the background; returns what it runs.
    (``Client.run`` passes the worker as ``dask_worker``: outside a task ``get_worker`` finds none.)"""
    from .._version import __version__

    pool = _local_pool(dask_worker)
    pool.warm()
    return {"nnrag": __version__, "python": ".".join(map(str, sys.version_info[:2])), "validators": pool.workers}


def served() -> int:
    """How many gate requests this Dask worker process answered."""
    return _served


def connect(address: str, timeout_s: float = _CONNECT_TIMEOUT_S) -> Any:
    """A Dask client for the scheduler at ``address``, or an error saying what to fix."""
    try:
        from distributed import Client
    except ImportError as e:
        raise ConfigError(
            "validating on a cluster needs Dask: pip install 'nnrag[cluster]' (dask[distributed])"
        ) from e
    try:
        return Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise NnragError(
            f"cannot reach the Dask scheduler at {address}: {e}. Start one with `dask scheduler` and "
            "workers with `dask worker ADDRESS` on machines where nnrag is installed"
        ) from e


class ClusterGate(Gate):
    """A gate whose candidates run on the workers of a Dask scheduler.

    ``workers`` (default: the cluster's thread count) is how many candidates are in flight at once.
    """

    def __init__(self, address: str, workers: int | None = None, limits: Limits | None = None,
                 timeout_s: float = _CONNECT_TIMEOUT_S) -> None:
        self.client = connect(address, timeout_s)
        self.address = address
        threads = sum(self.client.nthreads().values())
        if not threads:
            self.client.close()
            raise NnragError(f"the Dask scheduler at {address} has no workers; start some with `dask worker {address}`")
        super().__init__(workers or threads, limits)
        self._local: Gate | None = None
        try:
            self.warm()  # checks the workers at once; a later warm() costs a round trip
            self._served_before: dict[str, int] = self.client.run(served)
        except BaseException:
            self.client.close()
            raise

    def close(self) -> None:
        super().close()
        if self._local is not None:
            self._local.close()
        self.client.close()

    def _compiles_remotely(self) -> bool:
        return True

    def warm(self) -> None:
        """Start every Dask worker's validation workers (in the background: this returns at once),
        and refuse workers whose nnrag or Python differ from this one's: their verdicts would not
        be this gate's."""
        from .._version import __version__

        here = {"nnrag": __version__, "python": ".".join(map(str, sys.version_info[:2]))}
        for address, there in self.client.run(warm).items():
            if {k: there[k] for k in here} != here:
                raise NnragError(f"Dask worker {address} runs nnrag {there['nnrag']} on Python {there['python']}, "
                                 f"this build nnrag {here['nnrag']} on Python {here['python']}: install the same on every worker")

    def preload(self, modules: Iterable[str]) -> None:
        """Not passed on: the cluster's workers keep the modules they started with, and candidates
        import the others themselves (slower, same verdicts)."""

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        from distributed import KilledWorker

        # pure=False: the same candidate sent twice (a retry with recorded usage) runs twice
        try:
            return self.client.submit(serve, request, pure=False).result()
        except KilledWorker as e:  # the Dask worker died under it: a crash, like a local worker's
            raise WorkerDied(str(e)) from e

    def harvest(self, factories: Sequence[Sequence[str]], packages: Sequence[str], paths: Sequence[str] = (),
                timeout_s: float = 300.0) -> dict[str, Any]:
        if self._local is None:
            self._local = Gate(1, self.limits)
        return self._local.harvest(factories, packages, paths, timeout_s)

    def served(self) -> dict[str, int]:
        """Requests each Dask worker (by address) answered since this gate opened."""
        return {address: n - self._served_before.get(address, 0) for address, n in self.client.run(served).items()}
