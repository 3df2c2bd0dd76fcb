"""What FTS5 makes of words: the stem a query word is matched by, and the stems that many rows
of a search field hold. The same tokenizer as the search tables (``schema.SEARCH_TOKENIZER``)."""

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
    if field not in SEARCH_FIELDS:
        raise ValueError(f"no search field {field!r}")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab_{field} USING fts5vocab(main, search_{field}, 'row')")
    rows = conn.execute(f"SELECT count(*) FROM search_{field}").fetchone()[0]
    return [t for (t,) in conn.execute(f"SELECT term FROM temp.vocab_{field} WHERE doc >= ? ORDER BY doc DESC",
                                       (max(1.0, share * rows),))]
