"""Search latency figures: ``python -m nnrag.evals.bench_search --home HOME [--runs N]``.

Cold: ``nnrag search QUERY --json`` as a new process, ``--runs`` times, wall seconds and peak
resident memory of each (its own ``ru_maxrss``, printed by a wrapper as it exits), with the numpy query encoder (the default) and
with sentence-transformers (``NNRAG_EMBEDDER_BACKEND=sentence-transformers``), alternating; and
whether both return the same ranking. With ``--serve-url`` too: warm searches through a running
``nnrag serve``'s JSON API, the p50 and p95 of ``--requests`` queries of the shipped query set, or
of ``--queries FILE`` (a JSON-lines file with a ``query`` field, e.g. the wide evaluation's) taken
in order. The server keeps what it read for a query's words, so a second ``--passes`` over the same
queries tells a server that has met them from one meeting them first. With ``--in-process``: the
same searches through the Python API in this process, without HTTP. The home
must have its search index built (``nnrag build`` without ``--no-search-index``, or one
``nnrag search`` before). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable

_QUERY = "find anti-aliased downsampling"
_QUERIES = Path(__file__).parent / "data" / "queries.jsonl"


_WRAPPER = ("import resource, sys\nfrom nnrag.cli import main\ntry:\n    main()\nfinally:\n"
            "    sys.stderr.write(f'\\nMAXRSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')\n")


def _cold(home: str, backend: str | None) -> tuple[float, float, list[str]]:
    env = dict(os.environ)
    if backend:
        env["NNRAG_EMBEDDER_BACKEND"] = backend
    else:
        env.pop("NNRAG_EMBEDDER_BACKEND", None)
    command = [sys.executable, "-c", _WRAPPER, "search", _QUERY, "--home", home, "--json"]
    started = time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"nnrag search failed: {out.stderr.strip()[-500:]}")
    peak_kb = int(out.stderr.rsplit("MAXRSS", 1)[1].split()[0])
    return wall, peak_kb / 1024, [hit["id"] for hit in json.loads(out.stdout)]


def cold(home: str, runs: int) -> dict[str, Any]:
    walls: dict[str, list[float]] = {"numpy": [], "sentence-transformers": []}
    peaks: dict[str, list[float]] = {"numpy": [], "sentence-transformers": []}
    rankings: dict[str, list[str]] = {}
    for _ in range(runs):
        for name, backend in (("sentence-transformers", "sentence-transformers"), ("numpy", None)):
            wall, peak, ids = _cold(home, backend)
            walls[name].append(round(wall, 2))
            peaks[name].append(round(peak, 1))
            rankings[name] = ids
    return {"query": _QUERY, "runs": runs, "wall_s": walls,
            "median_s": {k: statistics.median(v) for k, v in walls.items()},
            "same_ranking": rankings["numpy"] == rankings["sentence-transformers"], "peak_mb": peaks}


def _api_search(url: str) -> Callable[[str], object]:
    def search(query: str) -> bytes:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/search?{urllib.parse.urlencode({'q': query, 'k': 10})}") as response:
            return response.read()
    return search


def _python_search(home: str | None) -> Callable[[str], object]:
    import nnrag

    index = nnrag.search_index(home=home)
    index.search("warm up", 10)  # the model loaded and the vector index open, as in a server
    index.read_ahead(wait=True)  # and the frequent words read, as a server does when it starts
    return lambda query: index.search(query, 10)


def warm(url: str | None, requests: int, queries_file: Path = _QUERIES, passes: int = 1,
         home: str | None = None) -> dict[str, Any]:
    """p50 and p95 of each pass of ``requests`` searches, through ``url``'s API or, without one,
    the Python API on ``home`` in this process."""
    queries = [json.loads(line)["query"] for line in queries_file.read_text().splitlines() if line.strip()]
    out: dict[str, Any] = {"queries": str(queries_file), "requests": requests, "passes": [],
                           "through": url or "the Python API in process"}
    search = _api_search(url) if url else _python_search(home)
    for _ in range(passes):
        times = []
        for i in range(requests):
            started = time.perf_counter()
            search(queries[i % len(queries)])
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        out["passes"].append({"p50_ms": round(statistics.median(times), 1),
                              "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1)})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, help="a home with a built search index")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--serve-url", help="a running nnrag serve, e.g. http://127.0.0.1:8765")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--queries", type=Path, default=_QUERIES, help="JSON lines with a query field")
    parser.add_argument("--passes", type=int, default=1, help="times over the same requests")
    parser.add_argument("--no-cold", action="store_true", help="only the warm figures")
    parser.add_argument("--in-process", action="store_true", help="warm figures through the Python API, no server")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"machine": f"{os.cpu_count()} CPUs"}
    if not args.no_cold:
        out["cold"] = cold(args.home, args.runs)
    if args.serve_url or args.in_process:
        out["warm_api"] = warm(None if args.in_process else args.serve_url, args.requests, args.queries, args.passes,
                               args.home)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
