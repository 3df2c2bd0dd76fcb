"""Extraction and validation figures: ``python -m nnrag.evals.bench_extract SOURCE ... [--limit N]``.

Indexes the sources (a warm index costs a fraction of a second), then times extraction of every
block twice, reporting the second (warm: modules parsed, renames cached) pass, then builds the
library: validation on the gate's warm workers with guessed arguments (the blocks/s figure), and
the retry of failed blocks with usage recorded from the sources' model factories. Prints figures,
and each phase's progress on stderr; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

import nnrag
from nnrag.db import connect
from nnrag.extraction.block import Extractors
from nnrag.extraction.lending import PREFER
from nnrag.indexing.lookup import BlockRef
from nnrag.library.build import build_library
from nnrag.progress import progress_lines
from nnrag.workspace import Workspace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", help="sources (default: dist:timm, or none with --corpus)")
    parser.add_argument("--corpus", default=None, help="a corpus file, e.g. nnrag/evals/data/ecosystem.toml")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--home", default=None, help="nnrag home (default: a temporary one)")
    parser.add_argument("--no-harvest", action="store_true", help="guessed arguments only, no recorded usage")
    parser.add_argument("--requirements", choices=("off", "install"), default="off",
                        help="'install': validate blocks that miss a distribution in an environment that has it")
    parser.add_argument("--prefer", choices=PREFER, default="installed",
                        help="a package another indexed source holds: keep the installed one, or copy it from the corpus")
    parser.add_argument("--scheduler", default=None,
                        help="validate on this Dask scheduler's workers (tcp://HOST:PORT), or 'local' for a "
                             "one-worker cluster on 127.0.0.1 with a thread per CPU (to measure the executor's overhead)")
    args = parser.parse_args(argv)
    home = args.home or tempfile.mkdtemp(prefix="nnrag-bench-")
    sources = args.sources or ([] if args.corpus else ["dist:timm"])
    progress = progress_lines(lambda line: print(line, file=sys.stderr, flush=True))
    nnrag.index(sources, corpus=args.corpus, home=home, progress=progress)
    workspace = Workspace.resolve(home)
    with connect(workspace) as db:
        rows = db.conn.execute(
            "SELECT s.name AS source, f.module, b.qualname, b.category FROM blocks b JOIN sources s ON s.id=b.source_id"
            " JOIN files f ON f.id=b.file_id ORDER BY s.name, b.qualname"
        ).fetchall()[: args.limit]
        refs = [BlockRef.from_row(r) for r in rows]
        extractors = Extractors(db.conn)
        for n, ref in enumerate(refs, 1):  # cold pass: parses each module once
            extractors.extract(ref)
            progress("extract-cold", n, len(refs))
        times = []
        for n, ref in enumerate(refs, 1):
            started = time.perf_counter()
            extractors.extract(ref)
            times.append(time.perf_counter() - started)
            progress("extract-warm", n, len(refs))
    source_names = sorted({ref.source for ref in refs})
    with contextlib.ExitStack() as stack:
        scheduler = args.scheduler
        if scheduler == "local":
            from distributed import LocalCluster

            cluster = stack.enter_context(LocalCluster(n_workers=1, threads_per_worker=os.cpu_count() or 1,
                                                       host="127.0.0.1", dashboard_address=None))
            scheduler = cluster.scheduler_address
        report = build_library(workspace, sources=source_names, limit=args.limit, workers=args.workers,
                               harvest=not args.no_harvest, scheduler=scheduler, prefer=args.prefer,
                               requirements=args.requirements,
                               progress=progress)
    print(f"machine: {os.cpu_count()} CPUs; sources: {', '.join(source_names)}; blocks: {len(rows)}"
          + (f"; validated on Dask ({args.scheduler})" if args.scheduler else ""))
    print(f"extraction, warm: median {statistics.median(times) * 1000:.1f} ms/block, p95 "
          f"{sorted(times)[int(len(times) * 0.95)] * 1000:.1f} ms")
    print(f"validation, guessed arguments: {report.validate_per_s or 0:.1f} blocks/s")
    if report.harvest:
        h = report.harvest
        print(f"recorded usage: {h['factories']} factories and {h['examples']} examples run in {h['seconds']:.0f} s; "
              f"{h['rescued']} of {h['retried']} failed blocks then pass")
    print(f"pass rate: {report.passed}/{report.tried} = {report.pass_rate:.1%}; whole build {report.seconds:.0f} s")
    print("failures by code: " + ", ".join(f"{k} {v}" for k, v in sorted(report.failures.items(), key=lambda kv: -kv[1])))
    for name, s in report.per_source.items():  # each source's failures: compiled code, or the probe's
        failed = ", ".join(f"{k} {v}" for k, v in sorted(s["failures"].items(), key=lambda kv: -kv[1]))
        print(f"  {name}: {int(s['passed'])}/{int(s['tried'])} = {s['pass_rate']:.1%}" + (f" (failed: {failed})" if failed else ""))


if __name__ == "__main__":
    main()
