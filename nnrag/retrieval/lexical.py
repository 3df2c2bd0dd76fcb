"""The lexical side of search: BM25 over block names, identifiers and docs, with SQLite FTS5.

The table lives in the index database beside everything else, so it updates in the same
transactions and needs no extra service. Names are split into words before indexing
(``BlurPool2d`` -> ``blur pool 2d``) and the porter stemmer folds ``downsampling`` and
``downsample`` together. British spellings are folded to American ones first on both sides
(``normalisation`` -> ``normalization``, ``neighbour`` -> ``neighbor``), since the stemmer keeps
them apart and code and docs mix both.

BM25 is computed here from what FTS5 indexed (each row's count of a stem, each row's length),
as FTS5's ``bm25()`` computes it but with the term-frequency saturation ``k1`` at 0.9 where FTS5
fixes 1.2: a word said again in a row adds less, so holding more of the query's words counts for
more.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import AbstractSet, Iterable

import numpy as np

from ..db.schema import SEARCH_FIELDS  # one FTS5 table per field
from ..db.words import Stemmer, frequent_stems, term_frequencies, token_counts

_FIELDS = SEARCH_FIELDS
# identifiers at 0.8, tuned on the wide evaluation's two dev splits (0.2 to 1.3): since the field
# gained the names a class's methods assign and the config fields it reads, it tells more than at 0.2.
# name at 0.7 (0.3 to 1.5, the same splits, tuned embedder): a short name holding one query word
# (``PadToSquare`` for "... fixed-size squares ...") otherwise tops the lexical side and the fusion
_WEIGHTS = {"name": 0.7, "module": 0.3, "doc": 2.0, "identifiers": 0.8}
# k1 0.9 chosen on the wide evaluation's two dev splits with the tuned embedder (k1 0.7 to 1.1 by
# b 0.65 to 0.85; docs/journal.md); b stays at FTS5's 0.75
_K1 = 0.9
_B = 0.75
_FIELD_DEPTH = 400  # best matches counted per field (``search``)
_TERM_BUDGET = 10_000_000  # rows of one-term scores kept (8 bytes each), the least recently used dropped first
_READ_AHEAD_SHARE = 0.01  # ``TermScores.read_ahead``: the stems at least this share of a field's rows hold
_LAYOUT = "rowid"  # how the tables are written (``sync``)
_FEW_CHANGES = 200  # ``many_changes``
_STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it its of on or over that the their then this to used using "
    "with without which each all find me give block blocks layer module".split()
)


# -ise/-isation/-yse verb forms; "our" and "tre" endings only in these words ("four", "metre" ...)
_BRITISH_SUFFIX = re.compile(r"\b([a-z]{2,})([iy])s(e|ed|es|er|ers|ing|ation|ations)\b")
_BRITISH_WORDS = {
    **{w: w[:-3] + "or" for w in ("colour", "neighbour", "behaviour", "favour", "flavour", "labour", "harbour",
                                   "honour", "humour", "vapour", "rumour", "vigour", "odour", "armour")},
    "centre": "center", "centred": "centered", "centres": "centers", "fibre": "fiber", "metre": "meter",
    "litre": "liter", "grey": "gray", "analogue": "analog", "catalogue": "catalog", "dialogue": "dialog",
    "licence": "license", "defence": "defense",
}
_BRITISH_WORD = re.compile(r"\b(" + "|".join(sorted(_BRITISH_WORDS, key=len, reverse=True)) + r")(s?)\b")


def fold_spelling(text: str) -> str:
    """British spellings in lower-case ``text`` made American, so the stemmer sees one word:
    ``normalisation`` -> ``normalization``, ``neighbours`` -> ``neighbors``. Words that merely end
    like a verb (``noise``) are folded too, the same way on both sides, which is harmless."""
    text = _BRITISH_SUFFIX.sub(lambda m: f"{m[1]}{m[2]}z{m[3]}", text)
    return _BRITISH_WORD.sub(lambda m: _BRITISH_WORDS[m[1]] + m[2], text)


@dataclass(frozen=True)
class LexicalDoc:
    block_id: str
    name: str
    module: str
    doc: str
    identifiers: str


_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
_ACRONYM_WORD = re.compile(r"([A-Z]+)([A-Z][a-z])")
_LETTER_DIGIT = re.compile(r"([A-Za-z])(\d)")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")


@functools.lru_cache(maxsize=1 << 18)
def split_words(name: str) -> str:
    """``BlurPool2d`` -> ``blur pool 2d``; ``SE_Block`` -> ``se block``; ``ResNet50`` -> ``res net 50``.
    Kept per name: a sync splits every identifier of every block (2 million calls on 16,000
    blocks, 70 s of a sync that changed nothing), and the names repeat."""
    spaced = _LOWER_UPPER.sub(r"\1 \2", name)
    spaced = _ACRONYM_WORD.sub(r"\1 \2", spaced)
    spaced = _LETTER_DIGIT.sub(r"\1 \2", spaced)
    return " ".join(_NOT_ALNUM.split(spaced)).lower().strip()


def _key(d: LexicalDoc) -> str:
    # the layout is part of the key: tables written before their rows shared the key's rowid
    # are written again whole
    return hashlib.sha1("\0".join([_LAYOUT] + [getattr(d, f) for f in _FIELDS]).encode()).hexdigest()


def sync(conn: sqlite3.Connection, docs: Iterable[LexicalDoc]) -> int:
    """Make the tables hold exactly ``docs``; only new or changed ones are rewritten. Returns how many.

    A document's row in every table has the rowid of its ``search_keys`` row: a search reads
    matches by rowid and never the documents' text (reading the block id from FTS5 took twice
    as long), and a document is deleted by rowid. When many documents change (a first index, a
    new spec version) every table is emptied and written again, which is faster still."""
    known = {r[0]: r[1] for r in conn.execute("SELECT block_id, key FROM search_keys")}
    keyed = _keyed(docs)
    seen = {d.block_id for d, _ in keyed}
    changed = [(d, key) for d, key in keyed if known.get(d.block_id) != key]
    gone = [b for b in known if b not in seen]
    # nothing unchanged: a first index, or tables of another layout, whose rowids cannot be trusted
    if len(changed) == len(keyed) or many_changes(len(changed) + len(gone), len(known)):
        for f in _FIELDS:
            conn.execute(f"DELETE FROM search_{f}")
        conn.execute("DELETE FROM search_keys")
        changed = keyed
    else:
        delete(conn, [d.block_id for d, _ in changed if d.block_id in known] + gone)
    _insert(conn, changed)
    return len(changed)


def many_changes(changes: int, total: int) -> bool:
    """More changed documents than row-by-row writes are worth (over 200 and over a tenth of
    ``total``): rewriting every one is then faster."""
    return changes > max(_FEW_CHANGES, total // 10)


def update(conn: sqlite3.Connection, docs: Iterable[LexicalDoc], gone: Iterable[str]) -> int:
    """Write ``docs`` (new or changed documents) and delete those of the blocks ``gone``; every
    other document stays as it is. Returns how many were written."""
    keyed = _keyed(docs)
    known = {d.block_id: r[0] for d, _ in keyed
             if (r := conn.execute("SELECT key FROM search_keys WHERE block_id=?", (d.block_id,)).fetchone())}
    changed = [(d, key) for d, key in keyed if known.get(d.block_id) != key]
    delete(conn, [d.block_id for d, _ in changed if d.block_id in known] + list(gone))
    _insert(conn, changed)
    return len(changed)


def _keyed(docs: Iterable[LexicalDoc]) -> list[tuple[LexicalDoc, str]]:
    folded = (replace(d, **{f: fold_spelling(getattr(d, f).lower()) for f in _FIELDS}) for d in docs)
    return [(d, _key(d)) for d in folded]


def _insert(conn: sqlite3.Connection, keyed: list[tuple[LexicalDoc, str]]) -> None:
    for d, key in keyed:
        rowid = conn.execute("INSERT INTO search_keys VALUES (?,?)", (d.block_id, key)).lastrowid
        for f in _FIELDS:
            conn.execute(f"INSERT INTO search_{f} (rowid, block_id, text) VALUES (?,?,?)", (rowid, d.block_id, getattr(d, f)))


def delete(conn: sqlite3.Connection, ids: Iterable[str]) -> None:
    for block_id in ids:
        row = conn.execute("SELECT rowid FROM search_keys WHERE block_id=?", (block_id,)).fetchone()
        if row is None:
            continue
        for f in _FIELDS:
            conn.execute(f"DELETE FROM search_{f} WHERE rowid=?", (row[0],))
        conn.execute("DELETE FROM search_keys WHERE rowid=?", (row[0],))


def query_terms(text: str) -> list[str]:
    """The words BM25 looks for: ``text`` split as names are (``SiLU`` -> ``si lu``, as the name
    field holds it), and a word whose split would drop a lone letter kept whole as well (``L2``
    -> ``2`` alone matches every ``2d``; docstrings hold ``l2``, ``v2``)."""
    words = []
    for word in re.findall(r"[A-Za-z0-9]+", text):
        parts = split_words(word).split()
        words += parts + ([word.lower()] if any(len(p) == 1 and p.isalpha() for p in parts) else [])
    words = fold_spelling(" ".join(words)).split()
    return list(dict.fromkeys(w for w in words if (w not in _STOPWORDS and len(w) > 1) or w.isdigit()))


class TermScores:
    """Each field's BM25 for one term over the whole library, read from SQLite once per version
    of the library and kept: a query is then a few array sums. FTS5 scores a query of many words
    by reading every row that holds any of them, ~90 ms for a long query on 16,000 blocks; the
    words repeat from query to query (``attention``, ``channel``), so a warm server answers in
    about a millisecond, and even a fresh process has read the common words after a few queries.
    A query's score is the sum of its one-term scores, as FTS5's BM25 adds per phrase; with
    ``k1`` 1.2 and ``b`` 0.75 it is FTS5's own. Scores are kept per stem, as FTS5 matches
    (``parameters`` and ``parameter`` read once), so that ``read_ahead`` can read the library's
    frequent stems before any query names them."""

    def __init__(self, budget: int = _TERM_BUDGET, k1: float = _K1, b: float = _B) -> None:
        self._budget = budget
        self._k1, self._b = k1, b
        self._lock = threading.Lock()
        self._version: str | None = None
        self._ids: list[str] = []  # block ids by position
        self._at = np.zeros(0, np.int32)  # a row's rowid -> its position (-1: none)
        self._lengths: dict[str, _Lengths] = {}
        self._terms: OrderedDict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._held = 0  # rows held over all terms
        self._mask_for: tuple[AbstractSet[str] | None, np.ndarray | None] = (None, None)
        self._stem = Stemmer()

    def reset(self, version: str) -> None:
        """Forget everything read when the library is no longer ``version``."""
        with self._lock:
            if version != self._version:
                self._version, self._ids, self._at, self._lengths = version, [], np.zeros(0, np.int32), {}
                self._terms, self._held, self._mask_for = OrderedDict(), 0, (None, None)

    def scores(self, conn: sqlite3.Connection, terms: list[str], allowed: AbstractSet[str] | None,
               depth: int) -> tuple[list[str], np.ndarray]:
        """(block ids, their weighted sum of each field's best ``depth`` BM25 scores among the
        ``allowed`` blocks); 0 where no field counted."""
        with self._lock:
            self._read_ids(conn)
            mask = self._mask(allowed)
            total = np.zeros(len(self._ids), np.float32)
            for f in _FIELDS:
                field = np.zeros(len(self._ids), np.float32)
                for t in terms:
                    rows, score = self._term(conn, f, t)
                    field[rows] += score
                if mask is not None:
                    field[~mask] = 0.0
                if depth < len(field):
                    field[np.argpartition(-field, depth)[depth:]] = 0.0
                total += _WEIGHTS[f] * field
            return self._ids, total

    def read_ahead(self, conn: sqlite3.Connection, version: str, share: float = _READ_AHEAD_SHARE) -> int:
        """Read now the scores of every stem that at least ``share`` of a field's rows hold, the
        most common first: they are the slow ones to read (13-47 ms each on 16,000 blocks against
        under a millisecond for a rare word), and most queries hold a few. Stops when the library
        is no longer ``version``; returns how many stems it read. Searches go on meanwhile."""
        self.reset(version)
        read = 0
        for f in _FIELDS:
            for stem in frequent_stems(conn, f, share):
                with self._lock:
                    if self._version != version or self._held > self._budget // 2:
                        return read
                    # a stem that stems again to something else cannot be asked for as itself
                    if (f, stem) in self._terms or self._stem(stem) != stem:
                        continue
                    self._read_ids(conn)
                    at, lengths = self._at, self._lengths[f]
                found = term_frequencies(conn, f, stem)  # outside the lock: searches are not held up
                with self._lock:
                    if self._version == version and self._at is at and (f, stem) not in self._terms:
                        self._keep((f, stem), _bm25(found, at, lengths, self._k1, self._b))
                        read += 1
        return read

    def _read_ids(self, conn: sqlite3.Connection) -> None:
        if not self._ids:
            rows = conn.execute("SELECT rowid, block_id FROM search_keys ORDER BY rowid").fetchall()
            self._ids = [b for _, b in rows]
            self._at = np.full(rows[-1][0] + 1 if rows else 0, -1, np.int32)
            self._at[[r for r, _ in rows]] = np.arange(len(rows), dtype=np.int32)
            self._lengths = {f: _Lengths.read(conn, f, self._at) for f in _FIELDS}

    def _mask(self, allowed: AbstractSet[str] | None) -> np.ndarray | None:
        # a server hands the same set object for the same filters while the library is unchanged
        if allowed is None:
            return None
        if self._mask_for[0] is not allowed:
            mask = np.zeros(len(self._ids), bool)
            mask[[i for i, b in enumerate(self._ids) if b in allowed]] = True
            self._mask_for = (allowed, mask)
        return self._mask_for[1]

    def _term(self, conn: sqlite3.Connection, field: str, word: str) -> tuple[np.ndarray, np.ndarray]:
        key = (field, self._stem(word))
        if key in self._terms:
            self._terms.move_to_end(key)
            return self._terms[key]
        return self._keep(key, _bm25(term_frequencies(conn, field, key[1]), self._at, self._lengths[field],
                                     self._k1, self._b))

    def _keep(self, key: tuple[str, str], entry: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        self._terms[key] = entry
        self._held += len(entry[0])
        while self._held > self._budget and len(self._terms) > 1:
            _, (rows, _) = self._terms.popitem(last=False)
            self._held -= len(rows)
        return entry


@dataclass(frozen=True)
class _Lengths:
    """One field's token counts as a version of the library was read: by position, their mean
    over every row, and how many rows (BM25's length normalisation and its idf's N)."""

    by_position: np.ndarray
    mean: float
    rows: int

    @staticmethod
    def read(conn: sqlite3.Connection, field: str, at: np.ndarray) -> _Lengths:
        counts = token_counts(conn, field)
        n = np.fromiter(counts.values(), np.float64, len(counts))
        positions = _positions(np.fromiter(counts, np.int64, len(counts)), at)
        by_position = np.zeros(int((at >= 0).sum()), np.float64)
        by_position[positions[positions >= 0]] = n[positions >= 0]
        return _Lengths(by_position, float(n.mean()) if n.any() else 1.0, len(counts))


def _positions(rowids: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Each rowid's position in the library read (``at``), -1 for a row written since."""
    positions = np.full(len(rowids), -1, np.int32)
    inside = rowids < len(at)
    positions[inside] = at[rowids[inside]]
    return positions


def _bm25(found: list[tuple[int, int]], at: np.ndarray, lengths: _Lengths, k1: float,
          b: float) -> tuple[np.ndarray, np.ndarray]:
    """(positions in the library read, BM25) of the rows ``term_frequencies`` found for one stem,
    as FTS5's ``bm25()`` scores them (its idf, floored at 1e-6), with ``k1`` and ``b`` given."""
    if not found:
        return np.zeros(0, np.int32), np.zeros(0, np.float32)
    rowids, counts = (np.array(c, np.int64) for c in zip(*found))
    idf = max(math.log((lengths.rows - len(found) + 0.5) / (len(found) + 0.5)), 1e-6)
    positions = _positions(rowids, at)
    kept = positions >= 0  # rows written after the library was read are left to the next version
    positions, tf = positions[kept], counts[kept].astype(np.float64)
    norm = 1.0 - b + b * lengths.by_position[positions] / lengths.mean
    return positions, (idf * tf * (k1 + 1.0) / (tf + k1 * norm)).astype(np.float32)


def search(conn: sqlite3.Connection, text: str, k: int, allowed: AbstractSet[str] | None = None,
           cache: TermScores | None = None) -> list[tuple[str, float]]:
    """(block id, score) best first: the weighted sum of each field's BM25 (higher is better);
    ``allowed`` keeps only those ids; ``cache`` keeps what was read for the next query.

    Each field contributes its best ``_FIELD_DEPTH`` matches among the allowed blocks: summing
    every match instead lost 0.10 of R@10 summed over the wide evaluation's nine splits, since a
    block holding many weak words then outranks one that holds the query's rare ones."""
    terms = query_terms(text)
    if not terms:
        return []
    ids, total = (cache or TermScores()).scores(conn, terms, allowed, max(_FIELD_DEPTH, 4 * k))
    n = min(k, int(np.count_nonzero(total)))
    if n == 0:
        return []
    best = np.argpartition(-total, n - 1)[:n]
    return sorted(((ids[i], float(total[i])) for i in best), key=lambda kv: (-kv[1], kv[0]))
