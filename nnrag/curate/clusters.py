"""Clusters of copies at four levels, from the signatures of a set of texts.

Levels are cumulative: a raw copy is an exact copy, an exact copy a near copy, a near copy a
structural copy. So each level's clusters are unions of the stricter ones, and "removed at a
level" (as in the NN-RAG paper's table) counts the members a level adds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from datasketch import MinHashLSH

from .signatures import PERMUTATIONS, Signature, jaccard, set_jaccard

LEVELS = ("raw", "exact", "near", "structural")


@dataclass(frozen=True)
class Thresholds:
    """Near copies: LSH candidates at ``candidates``, confirmed by the shingles' Jaccard at
    ``near``; structural copies: Jaccard of the features at ``structural``."""

    candidates: float = 0.85
    near: float = 0.90
    structural: float = 0.90
    min_structure: int = 3  # features a text needs to take part in structural matching

    def to_dict(self) -> dict[str, float]:
        return {"candidates": self.candidates, "near": self.near, "structural": self.structural,
                "min_structure": self.min_structure}


class UnionFind:
    """Disjoint sets of strings; a group's root is its smallest member, so results are stable."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self.parent = {k: k for k in keys}

    def find(self, k: str) -> str:
        root = self.parent.setdefault(k, k)
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[k] != root:
            self.parent[k], k = root, self.parent[k]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for k in self.parent:
            out.setdefault(self.find(k), []).append(k)
        return list(out.values())


# For each level, the groups of item ids (every item in exactly one group, singletons too).
Levels = dict[str, list[list[str]]]


def _by_key(ids: Sequence[str], key: Callable[[str], str], union: UnionFind) -> None:
    first: dict[str, str] = {}
    for i in ids:
        k = key(i)
        if k in first:
            union.union(first[k], i)
        else:
            first[k] = i


_REPRESENTATIVES = 32  # groups a bucket's member is compared with, at most


@functools.lru_cache(maxsize=8)
def _bands(threshold: float) -> tuple[int, int]:
    """Bands and rows per band that datasketch's LSH chooses for a threshold."""
    lsh = MinHashLSH(threshold=threshold, num_perm=PERMUTATIONS)
    return lsh.b, lsh.r


def _join_similar(ids: Sequence[str], sets: Callable[[str], np.ndarray | frozenset[str]], hashes: Callable[[str], np.ndarray],
                  similarity: Callable[[Any, Any], float], candidates: float, confirm: float, union: UnionFind) -> None:
    """Join, in ``union``, items whose sets have a similarity >= ``confirm`` among the LSH
    candidates at ``candidates`` (items sharing a band of their MinHash). In each bucket a member is compared with one member of each group already there,
    not with every member: thousands of generated variants of one model share buckets, and
    comparing every pair of them costs minutes where this costs a second."""
    bands, rows = _bands(candidates)
    buckets: dict[tuple[int, bytes], list[str]] = {}
    for i in ids:
        values = hashes(i)
        for band in range(bands):
            buckets.setdefault((band, values[band * rows:(band + 1) * rows].tobytes()), []).append(i)
    for members in buckets.values():
        if len(members) < 2:
            continue
        representatives: list[str] = []
        for m in members:
            root = union.find(m)
            if any(union.find(r) == root for r in representatives):
                continue
            for r in representatives[:_REPRESENTATIVES]:
                if similarity(sets(m), sets(r)) >= confirm:
                    union.union(m, r)
                    break
            else:
                representatives.append(m)


def cluster(signatures: dict[str, Signature], thresholds: Thresholds = Thresholds()) -> Levels:
    """Groups of every level for the items ``signatures`` names."""
    ids = sorted(signatures)
    union = UnionFind(ids)
    levels: Levels = {}
    _by_key(ids, lambda i: signatures[i].raw_sha256, union)
    levels["raw"] = union.groups()
    _by_key(ids, lambda i: signatures[i].exact_sha256, union)
    levels["exact"] = union.groups()
    with_text = [i for i in ids if signatures[i].shingles.size]
    _join_similar(with_text, lambda i: signatures[i].shingles, lambda i: signatures[i].minhash, jaccard,
                  thresholds.candidates, thresholds.near, union)
    levels["near"] = union.groups()
    shaped = [i for i in ids if len(signatures[i].structure) >= thresholds.min_structure]
    _join_similar(shaped, lambda i: signatures[i].structure, lambda i: signatures[i].structure_minhash, set_jaccard,
                  thresholds.candidates, thresholds.structural, union)
    levels["structural"] = union.groups()
    return levels
