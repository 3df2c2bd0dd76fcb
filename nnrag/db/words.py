"""What FTS5 makes of words: the stem a query word is matched by, the stems that many rows of a
search field hold, how often a row holds a stem and how many tokens each row has (what BM25 is
computed from). The same tokenizer as the search tables (``schema.SEARCH_TOKENIZER``)."""

from __future__ import annotations

import sqlite3

from .schema import SEARCH_FIELDS, SEARCH_TOKENIZER


class Stemmer:
    """FTS5's tokenizer applied to one word at a time, through a one-row table in memory (FTS5
    offers no function for it). Not thread-safe: its owner holds a lock around calls."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(f"CREATE VIRTUAL TABLE words USING fts5(text, tokenize = '{SEARCH_TOKENIZER}')")
        self._conn.execute("CREATE VIRTUAL TABLE stems USING fts5vocab(words, 'row')")
        self._known: dict[str, str] = {}

    def __call__(self, word: str) -> str:
        stem = self._known.get(word)
        if stem is None:
            self._conn.execute("INSERT INTO words (rowid, text) VALUES (1, ?)", (word,))
            row = self._conn.execute("SELECT term FROM stems").fetchone()
            self._conn.execute("DELETE FROM words")
            if len(self._known) > 100_000:  # query words are few; a bound all the same
                self._known.clear()
            stem = self._known[word] = row[0] if row else word
        return stem


def frequent_stems(conn: sqlite3.Connection, field: str, share: float) -> list[str]:
    """The stems at least ``share`` of ``field``'s rows hold, the most widely held first."""
    vocab = _vocab(conn, field, "row")
    rows = conn.execute(f"SELECT count(*) FROM {_table(field)}").fetchone()[0]
    return [t for (t,) in conn.execute(f"SELECT term FROM {vocab} WHERE doc >= ? ORDER BY doc DESC",
                                       (max(1.0, share * rows),))]


def _table(field: str) -> str:
    """``field``'s search table; the name goes into SQL, so only a known field makes one."""
    if field not in SEARCH_FIELDS:
        raise ValueError(f"no search field {field!r}")
    return f"search_{field}"


def _vocab(conn: sqlite3.Connection, field: str, kind: str) -> str:
    """The name of a temporary ``fts5vocab`` table of ``kind`` over ``field``'s search table."""
    name = f"temp.{kind}s_{field}"
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5vocab(main, {_table(field)}, '{kind}')")
    return name


def term_frequencies(conn: sqlite3.Connection, field: str, stem: str) -> list[tuple[int, int]]:
    """(rowid, how many times the row holds ``stem``) of every row of ``field`` that holds it."""
    return conn.execute(f"SELECT doc, count(*) FROM {_vocab(conn, field, 'instance')} WHERE term = ? GROUP BY doc",
                        (stem,)).fetchall()


def token_counts(conn: sqlite3.Connection, field: str) -> dict[int, int]:
    """rowid -> how many tokens FTS5 indexed in that row of ``field``. FTS5 keeps the counts in its
    ``docsize`` table, one SQLite varint per column; counting them from the ``instance`` vocabulary
    instead reads every token (1.6 s for the identifiers of 16,000 blocks, the table 30 ms)."""
    return {rowid: sum(_varints(sizes)) for rowid, sizes in conn.execute(f"SELECT id, sz FROM {_table(field)}_docsize")}


def _varints(data: bytes) -> list[int]:
    """SQLite's variable-length integers: big-endian groups of seven bits, the high bit set on every
    byte but the last, and a ninth byte, if reached, taken whole."""
    values: list[int] = []
    i = 0
    while i < len(data):
        value = 0
        for n in range(9):
            byte = data[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values
