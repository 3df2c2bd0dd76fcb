"""Dedup of the library: copies at four levels among its blocks (each compared by its own class),
stored as clusters with a canonical member, and uniqueness against other code (LEMUR's models, a
folder of files), compared class by class.

The canonical member of a cluster is the one a dataset keeps: a validated block before a failed
one, then the source of the lowest priority number (the corpus's preference), then the shortest
file, then the block id.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..codekeys import code_key
from ..db import Database, Transaction
from ..library.records import library_rows
from ..progress import ProgressFn
from ..workspace import Workspace
from .clusters import LEVELS, Levels, Thresholds, cluster
from .signatures import Signature, signature

log = logging.getLogger(__name__)

def signature_version() -> str:
    """What made a stored signature: a hash of the code computing signatures. Signatures stored
    under another are computed again."""
    return code_key("nnrag.curate.signatures")
_PARALLEL_FROM = 300  # texts; fewer are computed in process (a pool costs a second to start)
_CHUNK = 64


@dataclass(frozen=True)
class Member:
    """A library block taking part, with what choosing a canonical member reads."""

    id: str
    source: str
    validated: bool = False
    priority: int = 1_000
    size: int = 0  # of its standalone file

    def rank(self) -> tuple[bool, int, int, str]:
        return (not self.validated, self.priority, self.size, self.id)


@dataclass(frozen=True)
class Cluster:
    level: str
    canonical: str
    members: tuple[str, ...]
    sources: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LevelCount:
    """One row of the dedup table: ``removed`` members the level adds to the stricter ones."""

    level: str
    clusters: int  # of two or more members
    in_clusters: int
    removed: int
    kept: int


@dataclass(frozen=True)
class Uniqueness:
    """How many blocks have no counterpart in other code, per level."""

    corpus: str
    files: int
    blocks: int
    unique: dict[str, int]
    matches: dict[str, list[tuple[str, str]]]  # level -> (block, a file of the corpus), a sample

    def ratio(self, level: str) -> float | None:
        return round(self.unique[level] / self.blocks, 4) if self.blocks else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratios": {lv: self.ratio(lv) for lv in self.unique}}


@dataclass
class DedupReport:
    items: int
    thresholds: dict[str, float]
    levels: list[LevelCount]
    clusters: dict[str, list[Cluster]]
    overlaps: dict[str, dict[str, int]] = field(default_factory=dict)  # near level: source -> source -> clusters
    against: list[Uniqueness] = field(default_factory=list)
    computed: int = 0  # signatures computed (the others came from the cache)
    seconds: float = 0.0

    def to_dict(self, members: bool = True) -> dict[str, Any]:
        return {
            "items": self.items, "thresholds": self.thresholds, "levels": [asdict(c) for c in self.levels],
            "clusters": {lv: [c.to_dict() if members else {**c.to_dict(), "members": len(c.members)} for c in cs]
                         for lv, cs in self.clusters.items()},
            "overlaps": self.overlaps, "against": [u.to_dict() for u in self.against],
            "computed": self.computed, "seconds": round(self.seconds, 3),
        }


# -- signatures, cached by content ------------------------------------------------------------
def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _row(sig: Signature) -> tuple[Any, ...]:
    return (sig.raw_sha256, sig.exact_sha256, sig.tokens, sig.shingles.tobytes(), sig.minhash.tobytes(),
            json.dumps(sorted(sig.structure)), sig.structure_minhash.tobytes())


def _from_row(r: Any) -> Signature:
    """A cached signature; its arrays are views of the row's bytes (nothing is copied)."""
    return Signature(r[0], r[1], np.frombuffer(r[3], dtype=np.uint32), np.frombuffer(r[4], dtype=np.uint32),
                     frozenset(json.loads(r[5])), np.frombuffer(r[6], dtype=np.uint32), r[2])


def _compute(texts: list[str]) -> list[tuple[Any, ...]]:
    return [_row(signature(t)) for t in texts]


def signatures(store: Database, texts: Mapping[str, str], progress: ProgressFn | None = None,
               workers: int = 2) -> tuple[dict[str, Signature], int]:
    """Signatures of ``texts`` (id -> text), from the cache where the same content was seen;
    the others are computed (on ``workers`` processes when there are many) and cached."""
    by_hash: dict[str, list[str]] = {}
    for item, text in texts.items():
        by_hash.setdefault(_sha256(text), []).append(item)
    cached: dict[str, Signature] = {}
    hashes = list(by_hash)
    for i in range(0, len(hashes), 500):
        part = hashes[i:i + 500]
        for r in store.conn.execute(
                f"SELECT sha256, raw_sha256, exact_sha256, tokens, shingles, minhash, structure, structure_minhash"
                f" FROM dedup_signatures WHERE version=? AND sha256 IN ({','.join('?' * len(part))})",
                (signature_version(), *part)):
            cached[r["sha256"]] = _from_row(tuple(r)[1:])
    todo = [h for h in hashes if h not in cached]
    text_of = {h: texts[by_hash[h][0]] for h in todo}
    chunks = [todo[i:i + _CHUNK] for i in range(0, len(todo), _CHUNK)]
    done = 0

    def store_rows(part: list[str], rows: list[tuple[Any, ...]]) -> None:
        nonlocal done
        store.conn.executemany("INSERT OR REPLACE INTO dedup_signatures (sha256, version, raw_sha256, exact_sha256, tokens,"
                               " shingles, minhash, structure, structure_minhash) VALUES (?,?,?,?,?,?,?,?,?)",
                               [(h, signature_version(), *row) for h, row in zip(part, rows)])
        for h, row in zip(part, rows):
            cached[h] = _from_row(row)
        done += len(part)
        if progress:
            progress("signatures", done, len(todo))

    if len(todo) >= _PARALLEL_FROM and workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for part, rows in zip(chunks, pool.map(_compute, [[text_of[h] for h in c] for c in chunks])):
                store_rows(part, rows)
    else:
        for part in chunks:
            store_rows(part, _compute([text_of[h] for h in part]))
    out = {item: cached[h] for h, items in by_hash.items() for item in items}
    return out, len(todo)


# -- the library --------------------------------------------------------------------------------
def block_text(store: Database, row: Any, files: dict[str, list[str]] | None = None) -> str | None:
    """The block's own class as its source defines it (dedented): what makes two blocks copies
    is their class, not the helpers their standalone files share. ``files`` caches the lines of
    source files by SHA-1 across calls (a module defines many blocks)."""
    sha1 = row["file_sha1"]
    if not sha1 or not row["line"]:
        return None
    cache = files if files is not None else {}
    if sha1 not in cache:
        try:
            cache[sha1] = store.file_text(sha1).splitlines(keepends=True)
        except Exception:  # a blob gone from the index: the caller falls back to the standalone file
            return None
    lines = cache[sha1]
    return textwrap.dedent("".join(lines[row["line"] - 1:row["end_line"]])) or None


def library_members(store: Database, workspace: Workspace) -> tuple[dict[str, Member], dict[str, str]]:
    """The library blocks that have a standalone file, and the text each is compared by (its class)."""
    priority = {r["name"]: r["priority"] for r in store.conn.execute("SELECT name, priority FROM sources")}
    members: dict[str, Member] = {}
    texts: dict[str, str] = {}
    sources: dict[str, list[str]] = {}
    for row in library_rows(store.conn):
        if not row["path"]:
            continue
        try:
            path = workspace.inside(row["path"])
            size = path.stat().st_size
            text = block_text(store, row, sources) or path.read_text(encoding="utf-8")
        except (OSError, ValueError, UnicodeDecodeError) as e:
            log.warning("dedup skips %s: %s", row["block_id"], e)
            continue
        members[row["block_id"]] = Member(row["block_id"], row["source"], row["status"] == "validated",
                                          priority.get(row["source"], 1_000), size)
        texts[row["block_id"]] = text
    return members, texts


def _clusters(levels: Levels, members: Mapping[str, Member]) -> dict[str, list[Cluster]]:
    """Clusters of two or more members per level, largest first, each led by its canonical member."""
    out: dict[str, list[Cluster]] = {}
    for level in LEVELS:
        found = []
        for group in levels[level]:
            if len(group) < 2:
                continue
            ordered = sorted(group, key=lambda m: members[m].rank())
            found.append(Cluster(level, ordered[0], tuple(ordered), tuple(sorted({members[m].source for m in ordered}))))
        out[level] = sorted(found, key=lambda c: (-len(c.members), c.canonical))
    return out


def counts(levels: Levels, total: int) -> list[LevelCount]:
    rows = []
    previous = total
    for level in LEVELS:
        groups = levels[level]
        multi = [g for g in groups if len(g) > 1]
        rows.append(LevelCount(level, len(multi), sum(len(g) for g in multi), previous - len(groups), len(groups)))
        previous = len(groups)
    return rows


def _overlaps(near: list[Cluster]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for c in near:
        for a in c.sources:
            for b in c.sources:
                if a != b:
                    out.setdefault(a, {}).setdefault(b, 0)
                    out[a][b] += 1
    return out


def _save(store: Database, clusters: dict[str, list[Cluster]], report: DedupReport) -> None:
    with Transaction(store.conn) as conn:  # readers (search) see the old clusters or the new, never half
        conn.execute("DELETE FROM dedup_clusters")
        conn.executemany("INSERT INTO dedup_clusters (level, block_id, cluster, size) VALUES (?,?,?,?)",
                         [(c.level, m, c.canonical, len(c.members)) for cs in clusters.values() for c in cs for m in c.members])
        conn.execute("INSERT OR REPLACE INTO dedup_state (key, value) VALUES ('report', ?)",
                     (json.dumps(report.to_dict(members=False)),))


def dedup(store: Database, workspace: Workspace, thresholds: Thresholds = Thresholds(),
          against: Mapping[str, Mapping[str, str]] | None = None, progress: ProgressFn | None = None,
          workers: int = 2) -> DedupReport:
    """Cluster the library's files at every level and store the clusters; with ``against``
    (corpus name -> file name -> text), also count the validated blocks with no counterpart there."""
    started = time.perf_counter()
    members, texts = library_members(store, workspace)
    sigs, computed = signatures(store, texts, progress, workers)
    levels = cluster(sigs, thresholds)
    clusters = _clusters(levels, members)
    report = DedupReport(len(members), thresholds.to_dict(), counts(levels, len(members)), clusters,
                         _overlaps(clusters["near"]), computed=computed)
    for name, files in (against or {}).items():
        report.against.append(uniqueness(store, members, sigs, name, files, thresholds, progress, workers))
    report.seconds = time.perf_counter() - started
    _save(store, clusters, report)
    return report


def _class_spans(text: str) -> list[tuple[str, int, int]] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return [(node.name, min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno or node.lineno)
            for node in tree.body if isinstance(node, ast.ClassDef)]


def class_texts(store: Database, files: Mapping[str, str]) -> dict[str, str]:
    """The top-level classes of some files (``file::Class`` -> its dedented text); a file that does
    not parse counts as one text. Where the classes are is cached by the file's content: parsing
    LEMUR's 10,000 files again on every run would cost more than everything else."""
    by_hash = {name: _sha256(text) for name, text in files.items()}
    known: dict[str, Any] = {}
    hashes = sorted(set(by_hash.values()))
    for i in range(0, len(hashes), 500):
        part = hashes[i:i + 500]
        known.update((r["sha256"], json.loads(r["spans"]) if r["spans"] is not None else None) for r in store.conn.execute(
            f"SELECT sha256, spans FROM dedup_classes WHERE sha256 IN ({','.join('?' * len(part))})", part))
    found = {h: _class_spans(files[name]) for name, h in by_hash.items() if h not in known}
    with Transaction(store.conn) as conn:
        conn.executemany("INSERT OR REPLACE INTO dedup_classes (sha256, spans) VALUES (?,?)",
                         [(h, json.dumps(spans) if spans is not None else None) for h, spans in found.items()])
    known.update(found)
    out: dict[str, str] = {}
    for name, text in files.items():
        spans = known[by_hash[name]]
        if spans is None:
            out[f"{name}::"] = text
            continue
        lines = text.splitlines(keepends=True)
        for cls, first, last in spans:
            out[f"{name}::{cls}"] = textwrap.dedent("".join(lines[first - 1:last]))
    return out


def uniqueness(store: Database, members: Mapping[str, Member], library: Mapping[str, Signature], corpus: str,
               files: Mapping[str, str], thresholds: Thresholds, progress: ProgressFn | None = None,
               workers: int = 2) -> Uniqueness:
    """Validated blocks with no counterpart in ``files``, per level: no class of those files is
    a copy of the block's class at that level."""
    outside, _ = signatures(store, class_texts(store, files), progress, workers)
    keyed = {f"{corpus}::{name}": sig for name, sig in outside.items()}
    validated = [b for b in library if members[b].validated]
    levels = cluster({**{b: library[b] for b in validated}, **keyed}, thresholds)
    unique: dict[str, int] = {}
    matches: dict[str, list[tuple[str, str]]] = {}
    for level in LEVELS:
        found: list[tuple[str, str]] = []
        for group in levels[level]:
            theirs = sorted(m for m in group if m in keyed)
            if theirs:
                found += [(b, theirs[0].split("::", 1)[1]) for b in sorted(group) if b not in keyed]
        unique[level] = len(validated) - len({b for b, _ in found})
        matches[level] = sorted(found)[:50]
    return Uniqueness(corpus, len(files), len(validated), unique, matches)


def dedup_texts(store: Database, texts: Mapping[str, str], thresholds: Thresholds = Thresholds(),
                progress: ProgressFn | None = None, workers: int = 2) -> tuple[list[LevelCount], Levels, int]:
    """The dedup table of any set of texts (LEMUR's models): counts per level, the groups, and
    how many signatures were computed."""
    sigs, computed = signatures(store, texts, progress, workers)
    levels = cluster(sigs, thresholds)
    return counts(levels, len(texts)), levels, computed


def read_folder(path: Path) -> dict[str, str]:
    """The ``.py`` files under a folder (relative path -> text); unreadable ones are left out."""
    out: dict[str, str] = {}
    for file in sorted(path.rglob("*.py")):
        if file.is_symlink() or not file.is_file():
            continue
        try:
            out[file.relative_to(path).as_posix()] = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            log.warning("dedup skips %s: %s", file, e)
    return out
