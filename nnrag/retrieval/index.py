"""Natural-language search over the block library: BM25 and dense vectors, fused.

``sync`` brings the search index up to date with the library (specs, the FTS5 table, the Chroma
collection); it reads again only blocks whose spec changed, embeds only those whose text view
changed, and reuses vectors of texts it has embedded before. ``search`` answers a query; it
syncs first when the library changed since.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import AbstractSet, Any, Literal, Sequence

from ..codekeys import code_key
from ..config import search_config
from ..db import Database, connect
from ..errors import ConfigError, IndexStoreError, NnragError
from . import lexical, neighbours
from . import state as index_state
from .embedders import FEW_TEXTS, Embedder, make_embedder, release_embedder, vector_key
from .tuning import tuned_blocks, tuned_in, tuned_model
from .views import dense_text, lexical_doc
from ..progress import ProgressFn
from .neighbours import Allowed, Neighbours
from .vectors import VectorIndex, collection_name
from ..specs import cache
from ..specs.build import SpecBundle
from ..workspace import Workspace

log = logging.getLogger(__name__)

Method = Literal["hybrid", "lexical", "dense"]
METHODS: tuple[Method, ...] = ("lexical", "dense", "hybrid")

# a version or dimensionality suffix: the variants of one technique are one answer (``_hits``);
# on the wide evaluation this raised MRR@10 on five of nine splits (R@10 on one) and lowered none
_VARIANT = re.compile(r"(?:V\d+|[123][dD]|Fp(?:16|32))$")
_CANDIDATES = 100  # per method, before fusion: copies grouped, ten distinct hits must remain
# more than a few texts per call, so a sync's batches run on sentence-transformers (31 texts/s here)
# rather than numpy (15/s): at 64, exactly the numpy limit, every build embedded on numpy
_EMBED_BATCH = 2 * FEW_TEXTS
_RETUNE_GROWTH = 100  # fewer new blocks than this never call for a new tune


@dataclass
class Hit:
    rank: int
    id: str
    name: str
    source: str
    path: str
    line: int
    score: float
    summary: str
    category: str | None
    validated: bool
    also_in: list[str] = field(default_factory=list)  # copies: one near-copy cluster or one structure
    status: str = "validated"  # validated | failed | not-run (stored by a build that did not validate)
    # other classes of the same name (versions and dimensionalities aside) whose code differs:
    # alternatives, grouped so that ten ``Downsample`` classes take one row, never called copies
    same_name: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SyncReport:
    specs_built: int = 0
    specs_failed: int = 0
    removed: int = 0
    reindexed: int = 0  # blocks whose search rows were made again (every block when versions changed)
    embedded: int = 0
    upserted: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    blocks: int = 0
    tuned_blocks: int | None = None  # the library's size when the embedder was tuned (None: untuned)

    @property
    def embed_per_s(self) -> float | None:
        return self.embedded / self.embed_seconds if self.embedded and self.embed_seconds else None

    @property
    def retune_advised(self) -> bool:
        """The library grew by a tenth (and at least 100 blocks) since the embedder was tuned: the
        new blocks' descriptions are not in what it learned."""
        if self.tuned_blocks is None:
            return False
        return self.blocks - self.tuned_blocks >= max(_RETUNE_GROWTH, 0.1 * self.tuned_blocks)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "embed_per_s": self.embed_per_s, "retune_advised": self.retune_advised}


def _metadata(b: SpecBundle, key: str) -> dict[str, Any]:
    s = b.spec
    probe = s.probe
    return {
        "key": key, "name": s.name, "source": s.provenance.source, "category": s.category or "",
        "validated": s.validation.status == "validated", "params": probe.parameter_count or 0 if probe else -1,
        "inputs": json.dumps(probe.inputs) if probe else "", "outputs": json.dumps(probe.outputs) if probe else "",
        "fingerprint": b.fingerprint,
    }


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# -- embedding cache ------------------------------------------------------------------------
def _embed_cached(conn: sqlite3.Connection, embedder: Embedder, texts: list[str], report: SyncReport,
                  progress: ProgressFn | None) -> list[list[float]]:
    """Vectors of ``texts``, embedding only texts this model has not embedded before."""
    keys = [_sha1(t) for t in texts]
    model = vector_key(embedder.name)
    have: dict[str, list[float]] = {}
    for k in set(keys):
        if (vector := index_state.cached_vector(conn, model, k)) is not None:
            have[k] = vector
    # shortest first: a batch pads every text to its longest, so batches of like lengths waste the
    # least (measured 13-28% more texts/s than the library's order)
    missing = sorted(dict.fromkeys(t for t, k in zip(texts, keys) if k not in have), key=len)
    started = time.perf_counter()
    for i in range(0, len(missing), _EMBED_BATCH):
        batch = missing[i:i + _EMBED_BATCH]
        for text, vector in zip(batch, embedder.embed(batch)):
            have[_sha1(text)] = vector
            index_state.cache_vector(conn, model, _sha1(text), vector)
        conn.commit()
        report.embedded += len(batch)
        if progress:
            progress("embed", min(i + _EMBED_BATCH, len(missing)), len(missing))
    if missing:
        report.embed_seconds += time.perf_counter() - started
    return [have[k] for k in keys]


# -- the index ------------------------------------------------------------------------------
class SearchIndex:
    """The library's search index in one home: lexical in SQLite, dense in Chroma."""

    def __init__(self, workspace: Workspace, embedder: Embedder | str | None = None, chroma_url: str | None = None) -> None:
        cfg = search_config(workspace, embedder if isinstance(embedder, str) else None, chroma_url)
        self.workspace = workspace
        # a model named anywhere wins; else the one this home was tuned to (``nnrag tune``), followed
        # when a tune or reset in another process changes it
        self._follows = embedder is None and not cfg.embedder
        self._tuned = tuned_model(workspace) if self._follows else None
        self.embedder: Embedder = (embedder if embedder is not None and not isinstance(embedder, str)
                                   else make_embedder(cfg.embedder or self._tuned))
        self.chroma_url = cfg.chroma_url
        self._vectors: VectorIndex | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._allowed_for: dict[str, Any] = {}  # "signature", and per filter set what it allows
        self._near: tuple[str, Neighbours | None] = ("", None)  # the block vectors, per library signature
        self._reads_ahead = False  # ``read_ahead`` was asked for: done again after each library change
        self._read_ahead_for = ""  # the library signature last read ahead for
        self._reader: threading.Thread | None = None  # the thread reading ahead, or that last did
        self._terms = lexical.TermScores()  # what the lexical side read, for the next query
        self._keys: tuple[str, dict[str, list[str] | None]] = ("", {})  # ``_hits``' keys, per library signature
        self._newest: tuple[str, str] = ("", "")  # the library's count and newest stamp -> its signature

    def _follow_tuning(self, conn: sqlite3.Connection) -> None:
        """Switch to the home's tuned model if it changed since (``nnrag tune`` beside a running
        ``nnrag serve``): a tune records its model only once the library is embedded with it."""
        if not self._follows:
            return
        tuned = tuned_in(conn, self.workspace)
        if tuned != self._tuned:
            log.info("this home's search model changed: now %s", tuned or "the untuned one")
            if self._tuned:
                release_embedder(self._tuned)
            self._tuned, self.embedder, self._vectors = tuned, make_embedder(tuned), None

    @property
    def vectors(self) -> VectorIndex:
        if self._vectors is None:
            self._vectors = VectorIndex(self.workspace.home / "chroma", self.embedder, self.chroma_url)
        return self._vectors

    def _store(self) -> Database:
        return connect(self.workspace)

    def forget_kept(self) -> None:
        """Drop what searches keep for the next one (each term's scores, grouping keys): the next
        search reads them again, as the first searches of a new process do."""
        self._terms, self._keys, self._read_ahead_for = lexical.TermScores(), ("", {}), ""

    def read_ahead(self, wait: bool = False) -> None:
        """Read the scores of the library's frequent words now, on a thread of their own (or
        before returning, with ``wait``), and again after each change of the library: a server's
        first query holding them is then as fast as later ones. Searches go on meanwhile."""
        self._reads_ahead = True
        with self._store() as store:
            signature = self._signature(store.conn)
            if _synced(store.conn) != signature:
                return  # the next search syncs, then reads ahead
        self._start_read_ahead(signature, wait)

    def _start_read_ahead(self, signature: str, wait: bool = False) -> None:
        if self._read_ahead_for != signature:
            self._read_ahead_for = signature
            self._reader = threading.Thread(target=self._read_ahead, args=(signature,), name="nnrag-read-ahead",
                                            daemon=True)
            self._reader.start()
        if wait and self._reader is not None:
            self._reader.join()

    def _read_ahead(self, signature: str) -> None:
        started = time.perf_counter()
        try:
            with self._store() as store:
                read = self._terms.read_ahead(store.conn, signature)
        except (sqlite3.Error, NnragError) as e:  # searches read what they need themselves
            log.warning("reading the frequent words' scores ahead stopped: %s", e)
            return
        log.info("read ahead the scores of %d frequent words in %.1f s", read, time.perf_counter() - started)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nnrag-lexical")
        return self._executor

    def _allowed(self, conn: sqlite3.Connection, signature: str, source: str | None, category: str | None,
                 validated: bool | None) -> Allowed | None:
        """The blocks these filters let through (None: no filter), kept per library signature
        while the library is unchanged: a warm server answers the next query with the same
        filters without reading them again."""
        if not source and not category and validated is None:
            return None
        if self._allowed_for.get("signature") != signature:
            self._allowed_for = {"signature": signature}
        key = json.dumps([source, category, validated])
        if key not in self._allowed_for:
            self._allowed_for[key] = Allowed(key, frozenset(_allowed(conn, source, category, validated)))
        return self._allowed_for[key]

    def _neighbours(self, conn: sqlite3.Connection, signature: str) -> Neighbours:
        """The block vectors of the synced library, read once per library signature."""
        if self._near[0] != signature or self._near[1] is None:
            near = neighbours.read(conn, vector_key(self.embedder.name))
            if near is None:  # a vector the last sync recorded is gone from the embedding cache
                log.warning("block vectors are missing from the index: syncing the search index again")
                index_state.forget_state(conn, "synced", "made_with")  # every block again
                conn.commit()
                self.sync()
                near = neighbours.read(conn, vector_key(self.embedder.name))
                if near is None:
                    raise IndexStoreError("the search index lost block vectors it has just written; "
                                          "run `nnrag sync` again")
            self._near = (signature, near)
        return self._near[1]

    def _lexical(self, query: str, n: int, allowed: AbstractSet[str] | None,
                 kept: lexical.TermScores) -> list[tuple[str, float]]:
        with self._store() as store:
            return lexical.search(store.conn, query, n, allowed, kept)

    def _signature(self, conn: sqlite3.Connection) -> str:
        """What the library is, cheaply: every write of a row stamps a new ``updated_at``, so the
        count, the newest stamp and their sum change with any insert, update or delete. Checked
        before every search: the count and the newest stamp come from an index in a tenth of a
        millisecond, and the whole aggregate (4 ms on 16,000 blocks) is read again only when they
        changed."""
        versions = self._versions()
        newest = json.dumps([list(conn.execute("SELECT count(*), max(updated_at) FROM library").fetchone()), versions])
        if self._newest[0] != newest:
            row = conn.execute("SELECT count(*), max(updated_at), total(updated_at), group_concat(DISTINCT gate_version) "
                               "FROM library").fetchone()
            self._newest = (newest, _sha1(json.dumps([list(row), *versions])))
        return self._newest[1]

    def _versions(self) -> list[str]:
        """What the index's rows are made by: the model, the vector store, and the code of search and
        of what it imports (the text views, the glossary, the specs): other code makes the next
        search sync first and read every block again, embedding only texts not embedded before."""
        return [collection_name(self.embedder), self.chroma_url or "embedded", code_key("nnrag.retrieval")]

    def stale(self) -> bool:
        with self._store() as store:
            self._follow_tuning(store.conn)
            return _synced(store.conn) != self._signature(store.conn)

    def sync(self, progress: ProgressFn | None = None) -> SyncReport:
        """Bring the search index up to date with the library. Only blocks whose spec changed are
        read again (``search_specs`` records which spec each block's rows were made from), unless
        many changed or the index was made by another version, model or vector store: then every
        block is, and the Chroma collection is compared with the library whole."""
        started = time.perf_counter()
        report = SyncReport()
        with self._store() as store:
            conn = store.conn
            self._follow_tuning(conn)
            signature = self._signature(conn)
            refreshed = cache.refresh(store, self.workspace, (lambda d, t: progress("specs", d, t)) if progress else None)
            report.specs_built, report.specs_failed, report.removed = (
                len(refreshed.built), len(refreshed.failed), len(refreshed.removed))
            version = json.dumps(self._versions())
            made = {} if index_state.read_state(conn, "made_with") != version else dict(
                conn.execute("SELECT block_id, spec_key FROM search_specs").fetchall())
            specs = dict(conn.execute("SELECT block_id, key FROM specs").fetchall())
            changed = sorted(i for i, key in specs.items() if made.get(i) != key)
            gone = sorted(i for i in made if i not in specs)
            # nothing recorded (a first index, another version or model, rows lost) or a rebuild: every
            # block is read, which also costs less than row by row when many changed
            whole = not made or lexical.many_changes(len(changed) + len(gone), len(specs))
            report.blocks = len(specs)
            if self._tuned:
                report.tuned_blocks = tuned_blocks(conn)
            chosen = list(cache.bundles(store, None if whole else changed))
            report.reindexed = len(chosen)
            docs = (lexical_doc(b) for b in chosen)
            if whole:
                lexical.sync(conn, docs)
                conn.execute("DELETE FROM search_specs")
            else:
                lexical.update(conn, docs, gone)
                conn.executemany("DELETE FROM search_specs WHERE block_id=?", [(i,) for i in gone])
            conn.commit()
            self.forget_kept()
            if chosen or gone:
                self._sync_vectors(conn, chosen, None if whole else gone, report, progress)
            conn.executemany("INSERT OR REPLACE INTO search_specs VALUES (?, ?)",
                             [(b.spec.id, specs[b.spec.id]) for b in chosen])
            index_state.write_state(conn, {"made_with": version, "synced": signature})
            conn.commit()
        report.seconds = time.perf_counter() - started
        return report

    def _sync_vectors(self, conn: sqlite3.Connection, chosen: list[SpecBundle], gone: list[str] | None,
                      report: SyncReport, progress: ProgressFn | None) -> None:
        """Embed and store the vectors of the blocks ``chosen``: with ``gone`` None these are every
        block and the collection is made to hold exactly them; else they changed and the blocks
        ``gone`` are deleted."""
        texts = {b.spec.id: dense_text(b) for b in chosen}
        metas = {b.spec.id: _metadata(b, _sha1(texts[b.spec.id] + json.dumps(_metadata(b, ""), sort_keys=True)))
                 for b in chosen}
        ids = sorted(texts)
        if gone is None:  # every block: Chroma's entries compared with the library whole
            state = self.vectors.state()
            todo = [i for i in ids if state.get(i) != metas[i]["key"]]
            # searches read every block's vector from the embedding cache (``neighbours``): the
            # changed blocks' vectors, and any the cache lost (emptied by hand), are made here
            held = index_state.cached_texts(conn, vector_key(self.embedder.name))
            renew = set(todo)
            need = [i for i in ids if i in renew or _sha1(texts[i]) not in held]
            stale = [i for i in state if i not in texts]
        else:  # changed blocks only: each is written to Chroma again
            todo, need, stale = ids, ids, gone
        vectors = dict(zip(need, _embed_cached(conn, self.embedder, [texts[i] for i in need], report, progress)))
        for j in range(0, len(todo), 500):
            batch = todo[j:j + 500]
            self.vectors.upsert(batch, [vectors[i] for i in batch], [texts[i] for i in batch], [metas[i] for i in batch])
        report.upserted = len(todo)
        self.vectors.delete(stale)
        neighbours.write(conn, {i: _sha1(texts[i]) for i in ids}, gone)

    def names(self, validated: bool | None = True, source: str | None = None, category: str | None = None) -> list[str]:
        """Class names of the indexed blocks that a search with these filters can return."""
        with self._store() as store:
            allowed = _allowed(store.conn, source, category, validated)
            rows = store.conn.execute("SELECT block_id, name FROM library").fetchall()
        return [name for block_id, name in rows if block_id in allowed]

    def search(self, query: str, k: int = 10, *, source: str | None = None, category: str | None = None,
               validated: bool | None = True, method: Method = "hybrid") -> list[Hit]:
        """Blocks best matching ``query``. ``validated``: True only validated, False only failed, None all."""
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}")
        if not query.strip():
            raise ConfigError("the search query is empty: say in words what the block does")
        # a connection per search: one kept open outlives a home deleted and built again, and
        # SQLite then mixes the new database's journal with the old file
        with self._store() as store:
            rankings = self._rankings(store.conn, query, _CANDIDATES, source, category, validated, method)
            return self._fused_hits(store, rankings, k)

    def candidates(self, query: str, n: int = _CANDIDATES, *,
                   validated: bool | None = True) -> dict[Method, list[tuple[str, float]]]:
        """Each method's own ranking of its best ``n`` blocks (block id, raw score), before fusion
        and grouping: what a study of the fusion varies (``nnrag.evals.bench_fusion``)."""
        with self._store() as store:
            return self._rankings(store.conn, query, n, None, None, validated, "hybrid")

    def fused(self, candidates: dict[Method, list[tuple[str, float]]], k: int = 10, lexical_weight: float = 1.0,
              n: int = _CANDIDATES) -> list[Hit]:
        """The hybrid search's answer made from :meth:`candidates`: each ranking cut to its best
        ``n``, fused with the lexical one weighed ``lexical_weight`` against the dense one, copies
        grouped. With the defaults it is what ``search`` returns."""
        with self._store() as store:
            return self._fused_hits(store, candidates, k, lexical_weight, n)

    def _rankings(self, conn: sqlite3.Connection, query: str, n: int, source: str | None, category: str | None,
                  validated: bool | None, method: Method) -> dict[Method, list[tuple[str, float]]]:
        """The dense and lexical rankings ``method`` asks for, best ``n`` each, the index brought up
        to date first."""
        self._follow_tuning(conn)
        signature = self._signature(conn)
        if _synced(conn) != signature:
            log.info("the library changed since the search index was built: updating it")
            self.sync()
        allowed = self._allowed(conn, signature, source, category, validated)
        ids = allowed.ids if allowed else None
        kept = self._terms
        kept.reset(signature)
        if self._reads_ahead:
            self._start_read_ahead(signature)
        rankings: dict[Method, list[tuple[str, float]]] = {}
        if method == "lexical":
            rankings["lexical"] = lexical.search(conn, query, n, ids, kept)
        elif method == "hybrid":
            # the lexical ranking runs in SQLite on its own connection while the query is embedded:
            # both release the GIL, so a hybrid search costs the slower of the two, not their sum
            words = self._pool().submit(self._lexical, query, n, ids, kept)
        if method in ("dense", "hybrid"):
            vector = self.embedder.embed([query])[0]
            rankings["dense"] = self._neighbours(conn, signature).nearest(vector, n, allowed)
        if method == "hybrid":
            rankings["lexical"] = words.result()
        return rankings

    def _fused_hits(self, store: Database, rankings: dict[Method, list[tuple[str, float]]], k: int,
                    lexical_weight: float = 1.0, n: int = _CANDIDATES) -> list[Hit]:
        """The rankings cut to their best ``n``, fused (lexical weighed ``lexical_weight``), copies
        grouped: the top ``k`` hits."""
        signature = self._signature(store.conn)
        if self._keys[0] != signature:
            self._keys = (signature, {})
        present = [m for m in ("dense", "lexical") if m in rankings]
        fused = _fuse([rankings[m][:n] for m in present], [lexical_weight if m == "lexical" else 1.0 for m in present])
        return _hits(store, fused, k, self._keys[1])

def _synced(conn: sqlite3.Connection) -> str | None:
    """The library signature the search index was last brought up to date with."""
    return index_state.read_state(conn, "synced")


def forget_sync(conn: sqlite3.Connection) -> None:
    """Have the next search check the library against the index again, as after a build."""
    index_state.forget_state(conn, "synced")


def _allowed(conn: sqlite3.Connection, source: str | None, category: str | None, validated: bool | None) -> set[str]:
    sql, args = "SELECT block_id FROM library WHERE 1=1", []
    if source:
        sql += " AND source=?"
        args.append(source)
    if category:
        sql += " AND category=?"
        args.append(category)
    if validated is not None:
        sql += " AND status=?"
        args.append("validated" if validated else "failed")
    return {r["block_id"] for r in conn.execute(sql, args)}


def _fuse(rankings: list[list[tuple[str, float]]], weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Score fusion: each ranking's scores min-max normalised over its candidates, summed (times
    its weight in ``weights``, 1 each when not given).

    On the retrieval eval this beats reciprocal rank fusion (MRR@10 0.705 against 0.656 at k=60):
    a confident lexical match keeps its lead instead of counting only as rank one. Weighting
    lexical 1.5-3x moved the wide evaluation's dev split by a query or two either way."""
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings)):
        if not ranking:
            continue
        top, bottom = ranking[0][1], ranking[-1][1]
        span = (top - bottom) or 1.0
        for block_id, score in ranking:
            fused[block_id] = fused.get(block_id, 0.0) + weight * (score - bottom) / span
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


def _one_line(summary: str, limit: int = 90) -> str:
    first = summary.split(". ")[0].rstrip(".") + "."
    return first if len(first) <= limit else first[: limit - 3].rsplit(" ", 1)[0] + "..."


def _column(store: Database, sql: str, ids: list[str]) -> dict[str, str]:
    """block_id -> value of ``sql`` (``SELECT block_id, value ... WHERE ... block_id IN ({})``),
    in batches under SQLite's parameter limit."""
    out: dict[str, str] = {}
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        out.update((r[0], r[1] or "") for r in store.conn.execute(sql.format(",".join("?" * len(part))), part))
    return out


def _variant_of(name: str) -> str:
    """The class name without the suffixes that name a variant of one technique: a version or a
    dimensionality (``ShiftedWindowAttentionV2``, ``Downsample1D``, ``LayerNorm2dFp32`` ->
    ``ShiftedWindowAttention``, ``Downsample``, ``LayerNorm``)."""
    stem = None
    while stem != name:
        stem, name = name, _VARIANT.sub("", name) or name
    return name


def _group_keys(store: Database, ids: list[str]) -> dict[str, list[str] | None]:
    """Block id -> the keys ``_hits`` groups copies by that only a library change changes (structural
    fingerprint, class name without its variant suffixes); None for a block with no spec."""
    prints = _column(store, "SELECT block_id, fingerprint FROM specs WHERE block_id IN ({})", ids)
    names = {b: "name:" + _variant_of(n)
             for b, n in _column(store, "SELECT block_id, name FROM library WHERE block_id IN ({})", ids).items()}
    return {b: [key for key in (prints[b], names.get(b)) if key] if b in prints else None for b in ids}


@dataclass
class _Grouped:
    """The blocks one result row stands for besides its own."""

    copies: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def _hits(store: Database, fused: list[tuple[str, float]], k: int,
          known: dict[str, list[str] | None] | None = None) -> list[Hit]:
    """The top ``k`` fused results, each with the blocks grouped under it: its copies (one near-copy
    cluster of ``nnrag dedup``, or one structural fingerprint) in ``also_in``, and other classes
    of its name once version and dimensionality suffixes are dropped in ``same_name`` (four
    libraries' different ``DiceLoss`` are one answer with three alternatives, not four of the ten
    places; so are ``Downsample1D`` and ``Downsample2D``). A block joins the first row it is a copy
    of, else the first row of its name.
    Fingerprints and names are read only for blocks not in ``known``, which keeps them for the
    next search of the same library (reading them for 200 candidates cost 8 ms on 16,000
    blocks); clusters every time, as a dedup run regroups without changing the library. Only the
    ``k`` shown blocks have their specs read."""
    ids = [b for b, _ in fused]
    known = {} if known is None else known
    missing = [b for b in ids if b not in known]
    if missing:
        known.update(_group_keys(store, missing))
    clusters = _column(store, "SELECT block_id, cluster FROM dedup_clusters WHERE level='near' AND block_id IN ({})", ids)
    leaders: list[tuple[str, float, _Grouped]] = []
    by_key: dict[str, _Grouped] = {}
    for block_id, score in fused:
        kept = known.get(block_id)
        if kept is None:  # no spec: not searchable
            continue
        keys = (["cluster:" + clusters[block_id]] if clusters.get(block_id) else []) + kept
        copy_of = next((by_key[key] for key in keys if not key.startswith("name:") and key in by_key), None)
        named = next((by_key[key] for key in keys if key.startswith("name:") and key in by_key), None)
        if copy_of is not None or named is not None:
            (copy_of.copies if copy_of is not None else named.names).append(block_id)  # type: ignore[union-attr]
            continue
        if len(leaders) >= k:
            continue
        grouped = _Grouped()
        leaders.append((block_id, score, grouped))
        for key in keys:
            by_key[key] = grouped
    specs = {b.spec.id: b.spec for b in cache.bundles(store, [b for b, _, _ in leaders])}
    hits: list[Hit] = []
    for block_id, score, grouped in leaders:
        s = specs[block_id]
        hits.append(Hit(rank=len(hits) + 1, id=s.id, name=s.name, source=s.provenance.source, path=s.provenance.path,
                        line=s.provenance.line_start, score=round(score, 6), summary=_one_line(s.summary),
                        category=s.category, validated=s.validation.status == "validated",
                        also_in=grouped.copies, status=s.validation.status, same_name=grouped.names))
    return hits
