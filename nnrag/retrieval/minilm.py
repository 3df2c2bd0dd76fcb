"""A BERT sentence encoder (mean pooling, unit vectors) run with numpy on the model's own
safetensors and tokenizer files: what sentence-transformers computes for all-MiniLM-L6-v2 and
models built like it, without importing torch or transformers. A query is embedded in
milliseconds by a process that starts in a fraction of a second; sentence-transformers takes
about 16 s to import.

Supported: a sentence-transformers folder whose modules are Transformer -> mean Pooling ->
Normalize, over a ``bert`` model with absolute positions and the exact GELU. Anything else is
refused with ``Unsupported`` and served by sentence-transformers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

_MODULES = ["Transformer", "Pooling", "Normalize"]  # class names: sentence-transformers 5 and 6 save other module paths


_ONE_THREAD_UPTO = 8  # texts
_CONTROLLER: ThreadpoolController | None = None


def _blas() -> ThreadpoolController:
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


class Unsupported(Exception):
    """The model folder is not one this encoder reproduces."""


def _read(folder: Path, name: str) -> Any:
    try:
        return json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise Unsupported(f"{name}: {e}") from e


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


# erf as an odd rational function on [-4, 4], where float32 erf reaches +-1: the approximation
# Eigen and XLA use for float32, within 5e-7 of the exact erf. scipy's erf took 0.5 s to import
# (a third of a cold search) and 0.6 ms a layer; this takes a fraction of that.
_ERF_NUMERATOR = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02))  # x^13 ... x^1
_ERF_DENOMINATOR = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02))  # x^8 ... x^0


def _erf(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, np.float32(-4.0), np.float32(4.0))
    x2 = x * x
    p = np.full_like(x, _ERF_NUMERATOR[0])
    for c in _ERF_NUMERATOR[1:]:
        p *= x2
        p += c
    p *= x
    q = np.full_like(x, _ERF_DENOMINATOR[0])
    for c in _ERF_DENOMINATOR[1:]:
        q *= x2
        q += c
    p /= q
    return p


def _gelu(x: np.ndarray) -> np.ndarray:
    out = _erf(x * np.float32(1 / math.sqrt(2.0)))  # the exact GELU BERT uses; in place from here
    out += 1.0
    out *= x
    out *= 0.5
    return out


def _is_dense(name: str, value: np.ndarray) -> bool:
    return name.endswith(".weight") and value.ndim == 2 and not name.startswith("embeddings.")


class BertMeanEncoder:
    """Loads in ~0.1 s (the weights are memory-mapped); ``encode`` returns float32 unit vectors."""

    def __init__(self, folder: Path) -> None:
        if [str(m.get("type", "")).rsplit(".", 1)[-1] for m in _read(folder, "modules.json")] != _MODULES:
            raise Unsupported("modules are not Transformer -> Pooling -> Normalize")
        pooling_path = next(m["path"] for m in _read(folder, "modules.json") if m["type"].endswith("Pooling"))
        pooling = _read(folder / pooling_path, "config.json")
        # sentence-transformers 6 writes ``"pooling_mode": "mean"``, earlier versions a flag per mode
        mean_only = pooling.get("pooling_mode") == "mean" if "pooling_mode" in pooling else (
            pooling.get("pooling_mode_mean_tokens") and not any(
                pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                         "pooling_mode_mean_sqrt_len_tokens")))
        if not mean_only:
            raise Unsupported("pooling is not the mean of tokens")
        config = _read(folder, "config.json")
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu" or \
                config.get("position_embedding_type", "absolute") != "absolute":
            raise Unsupported("not a BERT model with absolute positions and GELU")
        # where sentence-transformers reads it: its own config, else (version 6 saves) the tokenizer's
        self.max_length = int(_read(folder, "sentence_bert_config.json").get("max_seq_length")
                              or _read(folder, "tokenizer_config.json").get("model_max_length", 512))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            weights = load_file(str(folder / "model.safetensors"))
            self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except (ImportError, OSError, ValueError) as e:
            raise Unsupported(f"{type(e).__name__}: {e}") from e
        if "embeddings.word_embeddings.weight" not in weights:
            raise Unsupported("the weights are not named as a BertModel's")
        # dense weights stored transposed and contiguous: numpy hands a stacked product to BLAS
        # only when its operands are, and is several times slower otherwise
        self.weights = {k[:-len(".weight")] + ".kernel" if _is_dense(k, v) else k:
                        np.ascontiguousarray(v.T if _is_dense(k, v) else v, dtype=np.float32) for k, v in weights.items()}
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        flat = x.reshape(-1, x.shape[-1]) @ self.weights[name + ".kernel"] + self.weights[name + ".bias"]
        return flat.reshape(*x.shape[:-1], flat.shape[-1])

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return _layer_norm(x, self.weights[name + ".weight"], self.weights[name + ".bias"], self.eps)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) > _ONE_THREAD_UPTO:
            return self._encode(texts)
        # a query's matrices are small: BLAS threads cost more in hand-over than they save, and
        # take the core the lexical ranking runs on meanwhile (hybrid search 47 -> 35 ms)
        with _blas().limit(limits=1, user_api="blas"):
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        w = self.weights
        batch, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length][None] \
            + w["embeddings.token_type_embeddings.weight"][types]
        x = self._norm(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        size = hidden // self.heads
        blocked = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]  # padding takes no attention

        def heads(t: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(t.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3))

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (heads(self._dense(x, p + f"attention.self.{n}")) for n in ("query", "key", "value"))
            scores = (q * np.float32(1 / math.sqrt(size))) @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))
            scores += blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = scores @ v
            context = context.transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = self._norm(self._dense(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            inner = _gelu(self._dense(x, p + "intermediate.dense"))
            x = self._norm(self._dense(inner, p + "output.dense") + x, p + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)
