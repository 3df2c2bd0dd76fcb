"""Is this block already in the library, or in LEMUR? The copies of one block at each level."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ..db import Database
from ..specs.build import find_row
from ..workspace import Workspace
from .clusters import LEVELS, Thresholds
from .dedup import block_text, class_texts, dedup, signatures
from .signatures import Signature, estimate, jaccard, set_jaccard


@dataclass(frozen=True)
class Duplicates:
    block: str
    library: dict[str, list[str]]  # level -> the other members of the block's cluster
    canonical: dict[str, str]  # level -> the cluster's canonical member
    other: list[dict[str, Any]] = field(default_factory=list)  # copies in other code: file, class, level, score
    other_files: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def level_of(a: Signature, b: Signature, thresholds: Thresholds) -> tuple[str, float] | None:
    """The strictest level at which two texts are copies, with its similarity."""
    if a.raw_sha256 == b.raw_sha256:
        return "raw", 1.0
    if a.exact_sha256 == b.exact_sha256:
        return "exact", 1.0
    if a.shingles.size and b.shingles.size and estimate(a.minhash, b.minhash) >= thresholds.candidates - 0.1:
        score = jaccard(a.shingles, b.shingles)
        if score >= thresholds.near:
            return "near", round(score, 4)
    if len(a.structure) >= thresholds.min_structure and len(b.structure) >= thresholds.min_structure:
        score = set_jaccard(a.structure, b.structure)
        if score >= thresholds.structural:
            return "structural", round(score, 4)
    return None


def find_duplicates(store: Database, workspace: Workspace, name: str, other: Mapping[str, str] | None = None,
                    thresholds: Thresholds = Thresholds()) -> Duplicates:
    """The block's copies in the library (from its dedup clusters; dedup runs first when the block
    is in none yet) and, with ``other`` (file name -> text, e.g. LEMUR's models), the classes there
    that are copies of its class."""
    row = find_row(store.conn, name)
    block_id = row["block_id"]
    if store.conn.execute("SELECT 1 FROM dedup_state WHERE key='report'").fetchone() is None:
        dedup(store, workspace, thresholds)
    library: dict[str, list[str]] = {}
    canonical: dict[str, str] = {}
    for level in LEVELS:
        hit = store.conn.execute("SELECT cluster FROM dedup_clusters WHERE level=? AND block_id=?", (level, block_id)).fetchone()
        if hit is not None:
            canonical[level] = hit["cluster"]
            library[level] = [r["block_id"] for r in store.conn.execute(
                "SELECT block_id FROM dedup_clusters WHERE level=? AND cluster=? AND block_id<>? ORDER BY block_id",
                (level, hit["cluster"], block_id))]
    result = Duplicates(block_id, library, canonical)
    if other is None:
        return result
    text = block_text(store, row) or (workspace.inside(row["path"]).read_text(encoding="utf-8") if row["path"] else "")
    mine, _ = signatures(store, {block_id: text})
    theirs, _ = signatures(store, class_texts(store, other))
    found = []
    for key, sig in theirs.items():
        match = level_of(mine[block_id], sig, thresholds)
        if match is not None:
            file, cls = key.split("::", 1)
            found.append({"file": file, "class": cls, "level": match[0], "similarity": match[1]})
    found.sort(key=lambda m: (LEVELS.index(m["level"]), -m["similarity"], m["file"], m["class"]))
    return Duplicates(block_id, library, canonical, found[:50], len(other))
