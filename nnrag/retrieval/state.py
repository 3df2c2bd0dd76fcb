"""What the search index remembers between runs: its state (``search_state``: the library signature
it was synced with, the embedder it was made with, a tuned embedder) and the embedding cache
(``embeddings``: a vector per model and text SHA-1, so unchanged texts are never embedded again).
This module alone writes both tables."""

from __future__ import annotations

import sqlite3
import struct
from typing import Iterable, Sequence


def read_state(conn: sqlite3.Connection, name: str) -> str | None:
    row = conn.execute("SELECT value FROM search_state WHERE name=?", (name,)).fetchone()
    return row["value"] if row else None


def write_state(conn: sqlite3.Connection, values: dict[str, str]) -> None:
    conn.executemany("INSERT OR REPLACE INTO search_state VALUES (?, ?)", sorted(values.items()))


def forget_state(conn: sqlite3.Connection, *names: str) -> None:
    conn.executemany("DELETE FROM search_state WHERE name=?", [(n,) for n in names])


def pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(data: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def cached_vector(conn: sqlite3.Connection, model: str, text_sha1: str) -> list[float] | None:
    row = conn.execute("SELECT vector FROM embeddings WHERE model=? AND text_sha1=?", (model, text_sha1)).fetchone()
    return unpack(row["vector"]) if row else None


def cached_texts(conn: sqlite3.Connection, model: str) -> set[str]:
    """The SHA-1s of the texts ``model`` has a cached vector of."""
    return {r[0] for r in conn.execute("SELECT text_sha1 FROM embeddings WHERE model=?", (model,))}


def cache_vector(conn: sqlite3.Connection, model: str, text_sha1: str, vector: Sequence[float]) -> None:
    conn.execute("INSERT OR REPLACE INTO embeddings (model, text_sha1, vector) VALUES (?,?,?)",
                 (model, text_sha1, pack(vector)))


def forget_vectors(conn: sqlite3.Connection, models: Iterable[str]) -> None:
    conn.executemany("DELETE FROM embeddings WHERE model=?", [(m,) for m in models])
