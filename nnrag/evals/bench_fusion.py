"""How the hybrid search's fusion settings score, split by split:
``python -m nnrag.evals.bench_fusion --home HOME [--queries FILE] [--weights 0.5,1,2]
[--candidates 50,100,200] [--validated] [--json]``.

Each query's dense and lexical rankings are read once per candidate count, then fused again for
every lexical weight and grouped as search groups copies; R@10 and MRR@10 are given for every
split of the queries file (its ``split`` field). Weight 1 with 100 candidates is the search as
shipped. Settings are chosen on the dev splits and checked on the held-out ones, never the other
way round (docs/journal.md). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from .retrieval import CUTOFF, SHIPPED_QUERIES, Query, first_relevant, load_queries
from ..retrieval.index import SearchIndex


@dataclass(frozen=True)
class Setting:
    lexical_weight: float
    candidates: int


@dataclass(frozen=True)
class Row:
    lexical_weight: float
    candidates: int
    split: str
    queries: int
    recall_at_10: float
    mrr_at_10: float


def study(index: SearchIndex, queries: list[Query], settings: list[Setting],
          validated: bool | None = None) -> list[Row]:
    """One row per setting and split (``all`` when the queries have no splits) over the queries
    whose gold is in the library."""
    names = index.names(validated)
    in_corpus = [q for q in queries if any(q.relevant(n) for n in names)]
    found: dict[Setting, dict[str, list[float]]] = {s: defaultdict(list) for s in settings}
    for q in in_corpus:
        for n in sorted({s.candidates for s in settings}):
            # read for each count: the lexical side's best 200 do not start with its best 100, since
            # each field counts its best max(400, 4 n) matches before the fields are summed
            candidates = index.candidates(q.query, n, validated=validated)
            for s in (s for s in settings if s.candidates == n):
                rank = first_relevant(q, index.fused(candidates, CUTOFF, s.lexical_weight, n))
                found[s][q.split or "all"].append(1.0 / rank if rank else 0.0)
    return [Row(s.lexical_weight, s.candidates, split, len(rr), round(sum(r > 0 for r in rr) / len(rr), 4),
                round(sum(rr) / len(rr), 4))
            for s in settings for split, rr in sorted(found[s].items())]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main() -> None:
    import nnrag

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--queries", type=Path, default=SHIPPED_QUERIES)
    parser.add_argument("--weights", default="0.5,1,2", help="lexical weights against the dense ranking's 1")
    parser.add_argument("--candidates", default="50,100,200", help="candidates per method before fusion")
    parser.add_argument("--validated", action="store_true", help="search only validated blocks (default: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    settings = [Setting(w, int(n)) for w in _floats(args.weights) for n in _floats(args.candidates)]
    rows = study(nnrag.search_index(home=args.home), load_queries(args.queries), settings,
                 True if args.validated else None)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return
    print("lexical weight  candidates  split      queries  R@10   MRR@10")
    for r in rows:
        print(f"{r.lexical_weight:>14}  {r.candidates:>10}  {r.split:<9}  {r.queries:>7}  {r.recall_at_10:.3f}  "
              f"{r.mrr_at_10:.3f}")


if __name__ == "__main__":
    main()
