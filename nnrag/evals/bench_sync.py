"""The first search after the library changed: ``python -m nnrag.evals.bench_sync --home HOME
[--changed 1 100] [--runs 3]``.

A warm search index (one search done, as in a running ``nnrag serve``) is told that ``--changed``
random blocks changed: their stored specs are marked stale, so the next sync builds them again as
it would after a re-validation or a new version of their files, and the library is marked as
changed since the last sync. The first search then brings the index up to date; its wall time,
and a second search's, are printed as JSON per run with the medians. The specs built again are
the same as before, so the home ends as it started. The home must have its search index built.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import nnrag
from nnrag.db import connect
from nnrag.retrieval.index import forget_sync
from nnrag.specs import cache
from nnrag.workspace import Workspace

_QUERY = "find anti-aliased downsampling"


def _mark_changed(home: str, n: int) -> None:
    with connect(Workspace.resolve(home)) as store:
        ids = [r[0] for r in store.conn.execute("SELECT block_id FROM specs ORDER BY random() LIMIT ?", (n,))]
        cache.build_again(store.conn, ids)
        forget_sync(store.conn)
        store.conn.commit()


def run(home: str, changed: list[int], runs: int) -> dict[str, Any]:
    index = nnrag.search_index(home=home)
    index.search(_QUERY, 10, validated=None)  # warm: model loaded, vectors read, as a running server
    out: dict[str, Any] = {"home": home, "blocks": len(index.names(None)), "query": _QUERY, "changed": {}}
    for n in changed:
        firsts, seconds = [], []
        for _ in range(runs):
            _mark_changed(home, n)
            started = time.perf_counter()
            index.search(_QUERY, 10, validated=None)
            firsts.append(time.perf_counter() - started)
            started = time.perf_counter()
            index.search(_QUERY, 10, validated=None)
            seconds.append(time.perf_counter() - started)
        out["changed"][str(n)] = {"first_search_s": [round(x, 2) for x in firsts],
                                  "first_search_median_s": round(statistics.median(firsts), 2),
                                  "next_search_median_ms": round(statistics.median(seconds) * 1000, 1)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--changed", type=int, nargs="+", default=[1, 100], help="blocks changed before each run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(run(args.home, args.changed, args.runs), indent=1))


if __name__ == "__main__":
    main()
