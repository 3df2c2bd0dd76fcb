"""Where the block vectors are kept: one Chroma collection per model.

Embedded by default (``PersistentClient`` under the home, telemetry off); a URL switches to
``HttpClient`` against a ``chroma run`` server so several people share one index. Vectors are
computed by nnrag's own embedder and handed to Chroma, so Chroma never embeds (its built-in
default would try to download a model); the collection still carries an embedding function
that names the model, and a collection made with another model is never mixed with this one.
A search reads the same vectors from the index instead (``neighbours.py``: exact, and faster).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlparse

from ..errors import ConfigError, IndexStoreError
from .embedders import Embedder, vector_key

log = logging.getLogger(__name__)

_COLLECTION = "nnrag-blocks"
_PAGE = 2000  # ids fetched per call when reading the collection's state


def _embedding_function(embedder: Embedder) -> Any:
    """A Chroma embedding function that delegates to ``embedder``."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    class NnragEmbedding(EmbeddingFunction[Documents]):
        def __init__(self, model: str, delegate: Embedder | None = None) -> None:
            self.model = model
            self._delegate = delegate

        def __call__(self, input: Documents) -> Embeddings:
            if self._delegate is None:
                from .embedders import make_embedder

                self._delegate = make_embedder(self.model)
            import numpy as np

            return [np.asarray(v, dtype=np.float32) for v in self._delegate.embed(list(input))]

        @staticmethod
        def name() -> str:
            return "nnrag"

        def default_space(self) -> Any:
            return "cosine"

        def get_config(self) -> dict[str, Any]:
            return {"model": self.model}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> "NnragEmbedding":
            return NnragEmbedding(config.get("model", ""))

    try:
        register_embedding_function(NnragEmbedding)
    except ValueError:  # registered by an earlier call in this process
        pass
    return NnragEmbedding(embedder.name, embedder)


def _client(path: Path, url: str | None) -> Any:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if url:
        parsed = urlparse(url if "://" in url else f"http://{url}")
        if not parsed.hostname:
            raise ConfigError(f"chroma URL {url!r} has no host; use http://HOST:PORT")
        try:
            return chromadb.HttpClient(host=parsed.hostname, port=parsed.port or 8000, ssl=parsed.scheme == "https",
                                       settings=settings)
        except Exception as e:
            raise IndexStoreError(f"cannot reach the Chroma server at {url}: {e}. Is `chroma run` listening there?") from e
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=settings)


def collection_name(embedder: Embedder | str) -> str:
    """The collection of one model's vectors (an embedder or its name)."""
    name = embedder if isinstance(embedder, str) else embedder.name
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", vector_key(name)).strip("-").lower() or "model"
    return f"{_COLLECTION}-{slug}"[:63]


def drop_collection(path: Path, url: str | None, model: str) -> None:
    """Remove the vectors of a model no search will use again (a replaced tuned model)."""
    client = _client(path, url)
    if collection_name(model) in {c.name for c in client.list_collections()}:
        client.delete_collection(collection_name(model))


class VectorIndex:
    """Block vectors with their search metadata, keyed by block id."""

    def __init__(self, path: Path, embedder: Embedder, url: str | None = None) -> None:
        self.embedder = embedder
        self.url = url
        self._client = _client(path, url)
        self.collection = self._client.get_or_create_collection(
            collection_name(embedder), embedding_function=_embedding_function(embedder),
            metadata={"model": embedder.name},
        )

    def state(self) -> dict[str, str]:
        """Block id -> the key its entry was made from (changes when the block's text view changes)."""
        found: dict[str, str] = {}
        offset = 0
        while True:
            page = self.collection.get(include=["metadatas"], limit=_PAGE, offset=offset)
            for id_, meta in zip(page["ids"], page["metadatas"] or []):
                found[id_] = str((meta or {}).get("key", ""))
            if len(page["ids"]) < _PAGE:
                return found
            offset += _PAGE

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], documents: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
        if ids:
            self.collection.upsert(ids=list(ids), embeddings=[list(v) for v in vectors], documents=list(documents),
                                   metadatas=list(metadatas))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self.collection.delete(ids=list(ids))

    def count(self) -> int:
        return self.collection.count()
