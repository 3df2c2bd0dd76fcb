"""Dedup figures: ``python -m nnrag.evals.bench_dedup [--lemur WHEEL_OR_FOLDER] [--home HOME]``.

With ``--lemur``: the dedup table of LEMUR's model files (each file one record, as the NN-RAG
paper's Table 4 counts them): removed at each level, kept; seconds with an empty signature cache
and again with a full one, then with one new file; peak memory of this process.
With ``--home``: dedup of that home's library (counts per level, seconds, cross-source overlaps)
and, with ``--lemur`` too, how many validated blocks have no copy among LEMUR's classes.
The signature cache lives in ``--cache-home`` (default: a new temporary home). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from dataclasses import asdict
from typing import Any

import nnrag
from nnrag.curate.clusters import Thresholds
from nnrag.curate.dedup import dedup_texts
from nnrag.curate.lemur_code import lemur_models
from nnrag.db import connect
from nnrag.workspace import Workspace


def _peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def lemur_table(path: str, cache_home: str, workers: int) -> dict[str, Any]:
    started = time.perf_counter()
    files = lemur_models(path)
    read_s = time.perf_counter() - started
    thresholds = Thresholds()
    out: dict[str, Any] = {"files": len(files), "read_s": round(read_s, 2)}
    with connect(Workspace.resolve(cache_home), create=True) as db:
        for run in ("cold", "warm"):
            t = time.perf_counter()
            rows, levels, computed = dedup_texts(db, files, thresholds, workers=workers)
            out[f"{run}_s"] = round(time.perf_counter() - t, 2)
            out[f"{run}_computed"] = computed
        one = dict(files)
        one["new-model.py"] = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
        t = time.perf_counter()
        _, _, computed = dedup_texts(db, one, thresholds, workers=workers)
        out["one_new_file_s"] = round(time.perf_counter() - t, 3)
        out["one_new_file_computed"] = computed
    out["levels"] = [asdict(r) for r in rows]
    out["largest_near_cluster"] = max(len(g) for g in levels["near"])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lemur", help="an nn-dataset wheel (pip download --no-deps nn-dataset==2.1.2) or folder")
    parser.add_argument("--home", help="a home with a built library")
    parser.add_argument("--cache-home", help="home whose signature cache the LEMUR table uses")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {}
    if args.lemur:
        result["lemur"] = lemur_table(args.lemur, args.cache_home or tempfile.mkdtemp(prefix="nnrag-dedup-"), args.workers)
    if args.home:
        t = time.perf_counter()
        report = nnrag.dedup(home=args.home, against_lemur=args.lemur)
        library = report.to_dict(members=False)
        library["clusters"] = {lv: len(cs) for lv, cs in report.clusters.items()}
        library["wall_s"] = round(time.perf_counter() - t, 2)
        for u in library["against"]:
            u["matches"] = {lv: len(m) for lv, m in u["matches"].items()}
        result["library"] = library
    result["peak_rss_mb"] = _peak_mb()
    result["peak_rss_workers_mb"] = _peak_mb(resource.RUSAGE_CHILDREN)  # the largest signature worker
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
