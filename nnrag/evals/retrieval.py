"""Retrieval evaluation: recall@1/5/10, MRR@10 and nDCG@10 of lexical, dense and hybrid search
over a JSONL file of ``{"query": str, "gold": [regex, ...]}``.

A result is relevant when its class name matches any gold pattern (``re.search``). Queries whose
gold matches no block in the search index are reported as not in the corpus and left out of the
figures. Latency is measured per query with the embedding model already loaded.
Run it with ``nnrag evals retrieval [--queries FILE] [--json]``.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..progress import ProgressFn
from ..retrieval.index import METHODS, Hit, SearchIndex

CUTOFF = 10
# Paraphrased queries over the default corpus, written to avoid the gold class names.
SHIPPED_QUERIES = Path(__file__).parent / "data" / "queries.jsonl"


@dataclass(frozen=True)
class Query:
    query: str
    gold: tuple[str, ...]
    split: str | None = None  # "dev" (tune on these) or "test" (report these), where a file says

    def relevant(self, name: str) -> bool:
        return any(re.search(g, name) for g in self.gold)


@dataclass
class MethodResult:
    recall_at_1: float = 0.0
    recall_at_5: float = 0.0
    recall_at_10: float = 0.0
    mrr_at_10: float = 0.0
    ndcg_at_10: float = 0.0
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0
    misses: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {"recall@1": d.pop("recall_at_1"), "recall@5": d.pop("recall_at_5"), "recall@10": d.pop("recall_at_10"),
                "mrr@10": d.pop("mrr_at_10"), "ndcg@10": d.pop("ndcg_at_10"), **d}


@dataclass
class RetrievalReport:
    queries: int
    evaluated: int
    not_in_corpus: list[str]
    methods: dict[str, MethodResult]
    index_seconds: float
    blocks: int

    def to_dict(self) -> dict[str, Any]:
        return {**{m: r.to_dict() for m, r in self.methods.items()}, "queries": self.queries,
                "evaluated": self.evaluated, "not_in_corpus": self.not_in_corpus,
                "index_seconds": round(self.index_seconds, 2), "blocks": self.blocks}


def load_queries(path: Path) -> list[Query]:
    queries = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read queries file {path}: {e}") from e
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            gold = row["gold"]
            for g in gold:
                re.compile(g)
            queries.append(Query(str(row["query"]), tuple(gold), row.get("split")))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, re.error) as e:
            raise ConfigError(f"{path}:{n}: expected {{\"query\": str, \"gold\": [regex, ...], \"split\"?: str}}: {e}") from e
    return queries


def relevant(query: Query, hit: Hit) -> bool:
    """A hit answers ``query`` when its class, or a block its row shows (a copy or another class of
    its name), matches a gold pattern."""
    return query.relevant(hit.name) or any(query.relevant(i.rsplit(".", 1)[-1]) for i in hit.also_in + hit.same_name)


def first_relevant(query: Query, hits: list[Hit]) -> int | None:
    """The rank of the first hit that answers ``query``, if any does."""
    return next((h.rank for h in hits if relevant(query, h)), None)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] if ordered else 0.0


def evaluate(index: SearchIndex, queries: list[Query], validated: bool | None = None,
             progress: ProgressFn | None = None) -> RetrievalReport:
    """Run every query with every method; ``validated`` filters as search does (None: all blocks).
    ``progress`` hears about bringing the search index up to date first."""
    started = time.perf_counter()
    if index.stale():
        index.sync(progress)
    index_seconds = time.perf_counter() - started
    names = index.names(validated)
    in_corpus = [q for q in queries if any(q.relevant(n) for n in names)]
    for method in METHODS:  # latency is measured with the model loaded and the vector index open
        index.search("warm up", 1, validated=validated, method=method)
    methods: dict[str, MethodResult] = {}
    for method in METHODS:
        # each method's latency from the same start: no terms kept from another method's run of these queries
        index.forget_kept()
        res = MethodResult()
        latencies: list[float] = []
        rr, ndcg, hits_at = [], [], {1: 0, 5: 0, 10: 0}
        for q in in_corpus:
            t = time.perf_counter()
            hits = index.search(q.query, CUTOFF, validated=validated, method=method)
            latencies.append((time.perf_counter() - t) * 1000)
            rel = [relevant(q, h) for h in hits]
            first = next((i for i, r in enumerate(rel, 1) if r), None)
            for cut in hits_at:
                hits_at[cut] += bool(first and first <= cut)
            rr.append(1.0 / first if first else 0.0)
            ideal = min(CUTOFF, sum(q.relevant(n) for n in names))
            dcg = sum(1.0 / math.log2(i + 1) for i, r in enumerate(rel, 1) if r)
            idcg = sum(1.0 / math.log2(i + 1) for i in range(1, ideal + 1))
            ndcg.append(dcg / idcg if idcg else 0.0)
            if not first:
                res.misses.append({"query": q.query, "gold": list(q.gold), "top": [f"{h.source}:{h.name}" for h in hits[:5]]})
        n = len(in_corpus) or 1
        res.recall_at_1, res.recall_at_5, res.recall_at_10 = (round(hits_at[c] / n, 4) for c in (1, 5, 10))
        res.mrr_at_10 = round(sum(rr) / n, 4)
        res.ndcg_at_10 = round(sum(ndcg) / n, 4)
        res.latency_p50_ms = round(statistics.median(latencies), 1) if latencies else 0.0
        res.latency_p95_ms = round(_percentile(latencies, 0.95), 1)
        methods[method] = res
    return RetrievalReport(len(queries), len(in_corpus), [q.query for q in queries if q not in in_corpus], methods,
                           index_seconds, len(names))
