"""Clusters of copies at four levels, from the signatures of a set of texts.

Levels are cumulative: a raw copy is an exact copy, an exact copy a near copy, a near copy a
structural copy. So each level's clusters are unions of the stricter ones, and "removed at a
level" (as in the NN-RAG paper's table) counts the members a level adds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Sequence

from datasketch import MinHashLSH

from .signatures import PERMUTATIONS, Signature, hash32, jaccard, minhash

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


class _Union:
    def __init__(self, keys: Iterable[Hashable]) -> None:
        self.parent = {k: k for k in keys}

    def find(self, k: Hashable) -> Hashable:
        root = k
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[k] != root:
            self.parent[k], k = root, self.parent[k]
        return root

    def union(self, a: Hashable, b: Hashable) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb, key=str)] = min(ra, rb, key=str)  # type: ignore[type-var]

    def groups(self) -> list[list[Hashable]]:
        out: dict[Hashable, list[Hashable]] = {}
        for k in self.parent:
            out.setdefault(self.find(k), []).append(k)
        return list(out.values())


@dataclass
class Levels:
    """For each level, the groups of item ids (every item in exactly one group, singletons too)."""

    groups: dict[str, list[list[str]]] = field(default_factory=dict)
    near_pairs: list[tuple[str, str, float]] = field(default_factory=list)  # confirmed, with Jaccard
    structural_pairs: list[tuple[str, str, float]] = field(default_factory=list)

    def group_of(self, level: str) -> dict[str, int]:
        return {item: i for i, members in enumerate(self.groups[level]) for item in members}


def _by_key(ids: Sequence[str], key: Callable[[str], str], union: _Union) -> None:
    first: dict[str, str] = {}
    for i in ids:
        k = key(i)
        if k in first:
            union.union(first[k], i)
        else:
            first[k] = i


def _lsh_pairs(ids: Sequence[str], sets: dict[str, frozenset], hashes: Callable[[str], object],
               candidates: float, confirm: float) -> list[tuple[str, str, float]]:
    """Pairs whose sets have Jaccard >= ``confirm`` among the LSH candidates at ``candidates``."""
    lsh = MinHashLSH(threshold=candidates, num_perm=PERMUTATIONS)
    pairs: list[tuple[str, str, float]] = []
    with lsh.insertion_session() as session:
        for i in ids:
            session.insert(i, hashes(i), check_duplication=False)
    for i in ids:
        for j in lsh.query(hashes(i)):
            if j <= i:
                continue
            score = jaccard(sets[i], sets[j])
            if score >= confirm:
                pairs.append((i, j, round(score, 4)))
    return sorted(pairs)


def cluster(signatures: dict[str, Signature], thresholds: Thresholds = Thresholds()) -> Levels:
    """Groups of every level for the items ``signatures`` names."""
    ids = sorted(signatures)
    union = _Union(ids)
    levels = Levels()
    _by_key(ids, lambda i: signatures[i].raw_sha256, union)
    levels.groups["raw"] = union.groups()
    _by_key(ids, lambda i: signatures[i].exact_sha256, union)
    levels.groups["exact"] = union.groups()
    with_text = [i for i in ids if signatures[i].shingles]
    levels.near_pairs = _lsh_pairs(with_text, {i: signatures[i].shingles for i in with_text},
                                   lambda i: signatures[i].minhash, thresholds.candidates, thresholds.near)
    for a, b, _ in levels.near_pairs:
        union.union(a, b)
    levels.groups["near"] = union.groups()
    shaped = [i for i in ids if len(signatures[i].structure) >= thresholds.min_structure]
    features = {i: signatures[i].structure for i in shaped}
    structure_hashes = {i: minhash(frozenset(hash32(f) for f in features[i])) for i in shaped}
    levels.structural_pairs = _lsh_pairs(shaped, features, structure_hashes.__getitem__,
                                         thresholds.candidates, thresholds.structural)
    for a, b, _ in levels.structural_pairs:
        union.union(a, b)
    levels.groups["structural"] = union.groups()
    return levels
