"""Extraction time per block, in this process, as a build's extraction worker spends it: every
block of the home's sources extracted once (modules parsed on first use, shared by the blocks of a
source after it). Prints per source and overall: blocks, mean, median, p90, p99 and max seconds,
and the SHA-1 of all the files made (two runs that make the same files print the same one; with
``--json`` per source too).

    python -m nnrag.evals.bench_extraction HOME [SOURCE ...] [--json]

Each source's figures also go to stderr as it is done (one JSON line), so a run stopped early still
tells. Run it with ``PYTHONPATH`` at another checkout to time that code on the same index (its own
extraction runs; only this file is taken from here). Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from typing import Any

from nnrag.db import connect
from nnrag.extraction.block import Extractors
from nnrag.indexing.lookup import BlockRef
from nnrag.workspace import Workspace


def _figures(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"blocks": len(ordered), "total_s": round(sum(ordered), 2), "mean_s": round(statistics.fmean(ordered), 4),
            "median_s": round(statistics.median(ordered), 4), "p90_s": round(at(0.9), 3), "p99_s": round(at(0.99), 3),
            "max_s": round(ordered[-1], 2)}


def _done(per_source: dict[str, list[float]], made_by: dict[str, Any]) -> None:
    source = next(reversed(per_source))
    print(json.dumps({"source": source, **_figures(per_source[source]), "files_sha1": made_by[source].hexdigest()}),
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home")
    parser.add_argument("sources", nargs="*")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    per_source: dict[str, list[float]] = {}
    made = hashlib.sha1()
    made_by: dict[str, Any] = {}  # per source: runs over some sources compare with a whole run
    with connect(Workspace.resolve(args.home)) as db:
        rows = db.conn.execute(
            "SELECT s.name AS source, f.module, b.qualname, b.category FROM blocks b JOIN sources s ON s.id=b.source_id"
            " JOIN files f ON f.id=b.file_id ORDER BY s.priority, s.name, b.qualname").fetchall()
        extractors = Extractors(db.conn)
        for row in rows:
            if args.sources and row["source"] not in args.sources:
                continue
            if per_source and row["source"] not in per_source:  # the last source is done: on stderr as it goes,
                _done(per_source, made_by)                         # so that a run stopped early still tells
            started = time.perf_counter()
            _, assembled, _ = extractors.extract(BlockRef.from_row(row))
            per_source.setdefault(row["source"], []).append(time.perf_counter() - started)
            for h in (made, made_by.setdefault(row["source"], hashlib.sha1())):
                h.update(f"{row['source']}:{row['qualname']}\n".encode())
                h.update((assembled.code if assembled is not None else "").encode())
    if not per_source:
        print("no blocks of those sources in this home", file=sys.stderr)
        return 1
    _done(per_source, made_by)
    figures = {source: _figures(times) for source, times in per_source.items()}
    figures["all"] = _figures([t for times in per_source.values() for t in times])
    if args.json:
        print(json.dumps({"figures": figures, "files_sha1": made.hexdigest(),
                          "files_sha1_by_source": {k: h.hexdigest() for k, h in made_by.items()}}, indent=2))
        return 0
    for source, f in figures.items():
        print(f"{source:24} {f['blocks']:6} blocks  mean {f['mean_s']:.3f} s  median {f['median_s']:.3f}  "
              f"p90 {f['p90_s']:.2f}  p99 {f['p99_s']:.2f}  max {f['max_s']:.2f}")
    print(f"files {made.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
