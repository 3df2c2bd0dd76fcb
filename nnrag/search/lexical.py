"""The lexical side of search: BM25 over block names, identifiers and docs, with SQLite FTS5.

The table lives in the index database beside everything else, so it updates in the same
transactions and needs no extra service. Names are split into words before indexing
(``BlurPool2d`` -> ``blur pool 2d``) and the porter stemmer folds ``downsampling`` and
``downsample`` together. British spellings are folded to American ones first on both sides
(``normalisation`` -> ``normalization``, ``neighbour`` -> ``neighbor``), since the stemmer keeps
them apart and code and docs mix both.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass, replace
from typing import Iterable

from ..db.schema import SEARCH_FIELDS  # one FTS5 table per field

_FIELDS = SEARCH_FIELDS
# identifiers at 0.8, tuned on the wide evaluation's two dev splits (0.2 to 1.3): since the field
# gained the names a class's methods assign and the config fields it reads, it tells more than at 0.2
_WEIGHTS = {"name": 1.0, "module": 0.3, "doc": 2.0, "identifiers": 0.8}
_FIELD_DEPTH = 400  # best matches read per field (``search``)
_FEW_CHANGES = 200  # more changed documents than this (or a tenth) rewrite the tables (``sync``)
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


def split_words(name: str) -> str:
    """``BlurPool2d`` -> ``blur pool 2d``; ``SE_Block`` -> ``se block``; ``ResNet50`` -> ``res net 50``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    spaced = re.sub(r"([A-Za-z])(\d)", r"\1 \2", spaced)
    return " ".join(re.split(r"[^A-Za-z0-9]+", spaced)).lower().strip()


def _key(d: LexicalDoc) -> str:
    return hashlib.sha1("\0".join(getattr(d, f) for f in _FIELDS).encode()).hexdigest()


def sync(conn: sqlite3.Connection, docs: Iterable[LexicalDoc]) -> int:
    """Make the tables hold exactly ``docs``; only new or changed ones are rewritten. Returns how many.

    FTS5 finds a row by its block id only by reading the whole table, so when many documents
    change (a first index, a new spec version) every table is emptied and written again: deleting
    them one by one cost minutes on 15,000 blocks."""
    known = dict(conn.execute("SELECT block_id, key FROM search_keys").fetchall())
    folded = (replace(d, **{f: fold_spelling(getattr(d, f).lower()) for f in _FIELDS}) for d in docs)
    keyed = [(d, _key(d)) for d in folded]
    seen = {d.block_id for d, _ in keyed}
    changed = [(d, key) for d, key in keyed if known.get(d.block_id) != key]
    gone = [b for b in known if b not in seen]
    if len(changed) + len(gone) > max(_FEW_CHANGES, len(known) // 10):
        for f in _FIELDS:
            conn.execute(f"DELETE FROM search_{f}")
        conn.execute("DELETE FROM search_keys")
        changed = keyed
    else:
        delete(conn, [d.block_id for d, _ in changed if d.block_id in known] + gone)
    for d, key in changed:
        for f in _FIELDS:
            conn.execute(f"INSERT INTO search_{f} (block_id, text) VALUES (?,?)", (d.block_id, getattr(d, f)))
        conn.execute("INSERT INTO search_keys VALUES (?,?)", (d.block_id, key))
    return len(changed)


def delete(conn: sqlite3.Connection, ids: Iterable[str]) -> None:
    for block_id in ids:
        for f in _FIELDS:
            conn.execute(f"DELETE FROM search_{f} WHERE block_id=?", (block_id,))
        conn.execute("DELETE FROM search_keys WHERE block_id=?", (block_id,))


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


def search(conn: sqlite3.Connection, text: str, k: int, allowed: set[str] | None = None) -> list[tuple[str, float]]:
    """(block id, score) best first: the weighted sum of each field's BM25 (higher is better);
    ``allowed`` keeps only those ids.

    Each field contributes its best ``_FIELD_DEPTH`` matches, ranked inside SQLite: a query of
    common words matches most of a large library, and reading every match costs more than the
    rest of the search. When filters leave fewer than ``k`` of them, every match is read."""
    terms = query_terms(text)
    if not terms:
        return []
    match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
    scores = _scores(conn, match, allowed, max(_FIELD_DEPTH, 4 * k))
    if len(scores) < k:
        scores = _scores(conn, match, allowed, None)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def _scores(conn: sqlite3.Connection, match: str, allowed: set[str] | None, depth: int | None) -> dict[str, float]:
    scores: dict[str, float] = {}
    limit = f" ORDER BY s LIMIT {int(depth)}" if depth else ""
    for f in _FIELDS:
        for block_id, score in conn.execute(
                f"SELECT block_id, bm25(search_{f}) AS s FROM search_{f} WHERE search_{f} MATCH ?{limit}", (match,)):
            if allowed is None or block_id in allowed:
                scores[block_id] = scores.get(block_id, 0.0) - _WEIGHTS[f] * score
    return scores
