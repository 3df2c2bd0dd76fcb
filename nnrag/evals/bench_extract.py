"""Extraction and validation figures: ``python -m nnrag.evals.bench_extract SOURCE ... [--limit N]``.

Indexes the sources (a warm index costs a fraction of a second), then times extraction of every
block twice, reporting the second (warm: modules parsed, renames cached) pass, and validates
every extracted block on the gate's warm workers. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import Counter

import nnrag
from nnrag.library import Extractors, open_library
from nnrag.validator.gate import Gate
from nnrag.workspace import Workspace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=["dist:timm"])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--home", default=None, help="nnrag home (default: a temporary one)")
    args = parser.parse_args(argv)
    home = args.home or tempfile.mkdtemp(prefix="nnrag-bench-")
    nnrag.index(args.sources, home=home)
    workspace = Workspace.resolve(home)
    with open_library(workspace) as store:
        rows = store.conn.execute(
            "SELECT s.name, f.module, b.qualname FROM blocks b JOIN sources s ON s.id=b.source_id"
            " JOIN files f ON f.id=b.file_id ORDER BY s.name, b.qualname"
        ).fetchall()[: args.limit]
        extractors = Extractors(store.conn)
        for src, module, qualname in rows:  # cold pass: parses each module once
            extractors.extract(src, module, qualname[len(module) + 1 :])
        times, items, codes = [], [], Counter()
        for src, module, qualname in rows:
            started = time.perf_counter()
            closure, assembled, _ = extractors.extract(src, module, qualname[len(module) + 1 :])
            times.append(time.perf_counter() - started)
            if assembled is None:
                codes[closure.issues[0].code] += 1
            else:
                items.append((qualname, assembled.code, assembled.class_name))
    started = time.perf_counter()
    with Gate(args.workers) as gate:
        first = None
        for _, record in gate.check_many(items):
            first = first or time.perf_counter()
            codes["passed" if record.ok else record.code] += 1
    seconds = time.perf_counter() - started
    steady = time.perf_counter() - (first or started)
    passed = codes.pop("passed", 0)
    print(f"machine: {os.cpu_count()} CPUs; sources: {', '.join(args.sources)}; blocks: {len(rows)}")
    print(f"extraction, warm: median {statistics.median(times) * 1000:.1f} ms/block, p95 "
          f"{sorted(times)[int(len(times) * 0.95)] * 1000:.1f} ms")
    print(f"validation: {len(items) / seconds:.1f} blocks/s including worker start-up, "
          f"{max(0, len(items) - 1) / steady if steady > 0 else 0:.1f} blocks/s after the first result")
    print(f"pass rate: {passed}/{len(rows)} = {passed / len(rows):.1%}")
    print("failures by code: " + ", ".join(f"{k} {v}" for k, v in codes.most_common()))


if __name__ == "__main__":
    main()
