"""Indexing benchmark: cold and warm index time against a bare ``ast.parse`` floor.

    python -m nnrag.evals.bench_index [SOURCE ...] [--corpus FILE] [--repeat 3] [--workers N] [--json]

With no source, the embedded default corpus. Each measurement runs in a fresh process so peak
memory (max RSS of the process and of its parser workers) belongs to that phase alone:

- floor: read every file and ``ast.parse`` it, one process, nothing else;
- cold: ``nnrag.indexing`` into an empty home (listing, hashing, parsing, SQLite, discovery);
- warm: the same index again with nothing changed.

Figures are medians over ``--repeat`` runs; the machine is printed beside them.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


class _DescendantPeak(threading.Thread):
    """Samples the peak RSS (VmHWM) of every descendant process: pool workers are not direct
    children (they fork from a forkserver), so ``RUSAGE_CHILDREN`` does not see them."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kib = 0
        self._done = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self._done.wait(0.02):
            parents: dict[int, int] = {}
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        stat = Path(f"/proc/{entry}/stat").read_text()
                        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                    except (OSError, ValueError, IndexError):
                        continue
            for pid in parents:
                p, depth = parents.get(pid), 0
                while p and p != me and depth < 8:
                    p, depth = parents.get(p), depth + 1
                if p == me:
                    self.peak_kib = max(self.peak_kib, _hwm_kib(pid))

    def stop(self) -> float:
        self._done.set()
        self.join()
        return round(self.peak_kib / 1024, 1)


def _hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _own_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _phase(args: argparse.Namespace) -> dict[str, object]:
    import nnrag

    specs = nnrag.resolve_sources(args.sources, args.corpus)
    if args.phase == "floor":
        from nnrag.sourcing.fetch import materialize

        files = [f.abspath for spec in specs for f in materialize(spec, Path(args.home) / "cache").files]
        start = time.perf_counter()
        lines = 0
        for path in files:
            data = Path(path).read_bytes()
            lines += data.count(b"\n")
            try:
                ast.parse(data)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "files": len(files), "lines": lines, "rss_mib": _own_rss_mib()}
    sampler = _DescendantPeak()
    sampler.start()
    start = time.perf_counter()
    report = nnrag.index(specs, home=args.home, workers=args.workers)
    seconds = time.perf_counter() - start
    workers_peak = sampler.stop()
    return {
        "seconds": seconds,
        "files": report.files,
        "lines": report.lines,
        "parsed": report.parsed,
        "blocks": report.blocks,
        "workers": report.workers,
        "rss_mib": _own_rss_mib(),
        "workers_rss_mib": workers_peak,
    }


def _run(phase: str, home: str, args: argparse.Namespace) -> dict[str, object]:
    cmd = [sys.executable, "-m", "nnrag.evals.bench_index", "--phase", phase, "--home", home, *args.sources]
    if args.corpus:
        cmd += ["--corpus", str(args.corpus)]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark phase {phase} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median(runs: list[dict[str, object]], key: str) -> float:
    return float(statistics.median(float(r[key]) for r in runs))  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Cold/warm indexing benchmark with an ast.parse floor.")
    parser.add_argument("sources", nargs="*")
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--phase", choices=("floor", "cold", "warm"), help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        print(json.dumps(_phase(args)))
        return 0

    floors, colds, warms = [], [], []
    for _ in range(max(1, args.repeat)):
        with tempfile.TemporaryDirectory(prefix="nnrag-bench-") as home:
            floors.append(_run("floor", home, args))
            colds.append(_run("cold", home, args))
            warms.append(_run("warm", home, args))
    lines = int(colds[0]["lines"])  # type: ignore[arg-type]
    files = int(colds[0]["files"])  # type: ignore[arg-type]
    floor_s, cold_s, warm_s = _median(floors, "seconds"), _median(colds, "seconds"), _median(warms, "seconds")
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
        },
        "sources": [s for s in args.sources] or ["(default corpus)"],
        "files": files,
        "lines": lines,
        "blocks": colds[0]["blocks"],
        "workers": colds[0]["workers"],
        "repeat": len(colds),
        "floor_ast_parse": {
            "seconds": round(floor_s, 3),
            "files_per_s": round(int(floors[0]["files"]) / floor_s),  # type: ignore[arg-type]
            "lines_per_s": round(int(floors[0]["lines"]) / floor_s),  # type: ignore[arg-type]
            "rss_mib": _median(floors, "rss_mib"),
        },
        "cold": {
            "seconds": round(cold_s, 3),
            "files_per_s": round(files / cold_s),
            "lines_per_s": round(lines / cold_s),
            "rss_mib": _median(colds, "rss_mib"),
            "workers_rss_mib": _median(colds, "workers_rss_mib"),
        },
        "warm": {"seconds": round(warm_s, 3), "parsed": warms[0]["parsed"], "rss_mib": _median(warms, "rss_mib")},
    }
    result["cold_vs_floor"] = round(result["cold"]["lines_per_s"] / result["floor_ast_parse"]["lines_per_s"], 3)  # type: ignore[index]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    m = result["machine"]
    print(f"machine: {m['cpus']} CPUs, Python {m['python']}, {m['platform']}")  # type: ignore[index]
    print(f"corpus: {', '.join(result['sources'])}: {files:,} files, {lines:,} lines, {result['blocks']} blocks")  # type: ignore[arg-type]
    print(f"medians over {result['repeat']} runs, {result['workers']} parser workers")
    fl, co, wa = result["floor_ast_parse"], result["cold"], result["warm"]
    print(f"{'':18}{'seconds':>10}{'files/s':>10}{'lines/s':>11}{'peak RSS MiB':>14}")
    print(f"{'ast.parse floor':18}{fl['seconds']:>10.2f}{fl['files_per_s']:>10,}{fl['lines_per_s']:>11,}{fl['rss_mib']:>14}")  # type: ignore[index]
    print(
        f"{'cold index':18}{co['seconds']:>10.2f}{co['files_per_s']:>10,}{co['lines_per_s']:>11,}"  # type: ignore[index]
        f"{co['rss_mib']:>8} (workers: {co['workers_rss_mib']} each at most)"  # type: ignore[index]
    )
    print(f"{'warm re-index':18}{wa['seconds']:>10.2f}{'':>10}{'':>11}{wa['rss_mib']:>14}  ({wa['parsed']} files parsed)")  # type: ignore[index]
    print(f"cold rate / floor rate: {result['cold_vs_floor']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
