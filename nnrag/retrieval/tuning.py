"""Adapting the embedder to one library: contrastive fine-tuning on the library's own text.

People ask for a block by what it does; the dense view of most blocks says what the code holds
(name words, mechanisms, parameters, operations). The blocks that carry a docstring pair the two:
their description, with the class's own name words taken out (a query never names the class),
against their text view with the docstring taken out. A few minutes of in-batch contrastive
training on these pairs teach the model the library's vocabulary; no query and no label is used.

Descriptions are cleaned first: argument and example sections cut, sentences that many
docstrings repeat with other names ("Transformer encoder consisting of N layers", "See the
Convention block on X") dropped, since a pair made of them teaches nothing but the template.
The tuned model lands in ``HOME/models/tuned-<digest>``; once the library is embedded with it the
home records it, and every search of that home uses it (query embedding included, on numpy) until
it is reset: a running server switches at its next query.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import random
import re
import shutil
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..db import connect
from ..errors import ConfigError
from ..progress import ProgressFn
from ..specs.build import SpecBundle
from ..specs.docstrings import SENTENCE_END, prose
from ..specs.static import opening
from ..workspace import Workspace
from . import state as index_state
from .embedders import vector_key
from .lexical import split_words
from .views import dense_text

log = logging.getLogger(__name__)

_STATE = "embedder"  # search_state row: the folder under HOME/models of the tuned model
_BLOCKS = "embedder_blocks"  # search_state row: how many blocks the library held when it was tuned
_PREFIX = "tuned-"
_SECTION = re.compile(r"\b(?:Args|Arguments|Parameters|Params|Returns?|Shape|Inputs?|Outputs?|Examples?|Notes?|"
                      r"References?|Attributes|Raises|Example usage)\s*:", re.I)
_SPAN = re.compile(r"`[^`]*`|\[[^\]]*\]")
_CAMEL = re.compile(r"\b[A-Z][A-Za-z0-9]*[A-Z0-9][A-Za-z0-9]*\b")  # a class name: two capitals or a digit
_TEMPLATE = 3  # a sentence more docstrings than this share (names masked) is boilerplate
_MIN_WORDS = 5
_ANCHOR_CHARS = 300
_MIN_PAIRS = 4  # a batch of four holds three negatives per pair


@dataclass(frozen=True)
class Pair:
    block_id: str
    anchor: str  # what the docstring says the block does, without the block's name
    positive: str  # the block's dense text view without its docstring


@dataclass(frozen=True)
class Recipe:
    """Measured on a 15,608-block library (docs/journal.md): one epoch raised dense R@10 on
    six of seven query splits (+0.025 to +0.13) and lowered it on one (-0.035)."""

    epochs: float = 1.0
    batch: int = 32
    learning_rate: float = 2e-5
    max_tokens: int = 160  # training only: descriptions are short, and it halves the time of a step
    scale: float = 20.0  # cosine -> logits, as sentence-transformers' MultipleNegativesRankingLoss
    seed: int = 0


@dataclass(frozen=True)
class TuneReport:
    model: str  # the folder of the tuned model
    pairs: int
    steps: int
    seconds: float
    first_loss: float | None  # mean over the first tenth of the steps (one batch's loss is noise)
    last_loss: float | None  # mean over the last tenth; both None when the model was there already

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _template_key(sentence: str) -> str:
    return " ".join(_CAMEL.sub("X", _SPAN.sub("X", sentence)).lower().split())


def _sentences(description: str) -> list[str]:
    return [s for s in SENTENCE_END.split(_SECTION.split(description)[0].strip()) if s.strip()]


def _unnamed(text: str, name: str) -> str:
    """``text`` without the words of the class's name and without class names at all."""
    own = {w for w in split_words(name).lower().split() if len(w) >= 3}
    return " ".join(t for t in text.split() if re.sub(r"\W", "", t).lower() not in own and not _CAMEL.fullmatch(t.strip(".,;:()'\"")))


def _without_docs(b: SpecBundle) -> SpecBundle:
    """The bundle as if the class had no docstring, no README note and no comment above it: its
    summary keeps only what structure says."""
    summary = b.spec.summary
    sentence = opening(b.docstring, b.heading)
    if sentence and summary.startswith(sentence):
        summary = summary[len(sentence):].strip()
    return dataclasses.replace(b, spec=b.spec.model_copy(update={"summary": summary}), docstring=None, readme="",
                               heading="")


def training_pairs(bundles: Iterable[SpecBundle]) -> list[Pair]:
    """One pair per distinct description, in a fixed shuffled order."""
    drafts: list[tuple[SpecBundle, list[str]]] = []
    for b in bundles:
        description = prose(b.docstring).strip() or b.readme.strip() or b.heading
        sentences = _sentences(description)[:2]
        if sentences:
            drafts.append((b, sentences))
    shared = Counter(_template_key(s) for _, sentences in drafts for s in sentences)
    pairs: list[Pair] = []
    seen: set[str] = set()
    for b, sentences in drafts:
        kept = " ".join(s for s in sentences if shared[_template_key(s)] <= _TEMPLATE and len(s.split()) >= 3)
        anchor = _unnamed(kept[:_ANCHOR_CHARS], b.spec.name)
        key = _template_key(anchor)
        if len(anchor.split()) < _MIN_WORDS or key in seen:
            continue
        seen.add(key)
        pairs.append(Pair(b.spec.id, anchor, dense_text(_without_docs(b))))
    random.Random(0).shuffle(pairs)
    return pairs


def _digest(base: str, pairs: list[Pair], recipe: Recipe) -> str:
    h = hashlib.sha1(json.dumps([base, dataclasses.asdict(recipe)]).encode())
    for p in pairs:
        h.update(f"{p.anchor}\0{p.positive}\0".encode())
    return h.hexdigest()[:12]


def tune(workspace: Workspace, base: str, pairs: list[Pair], recipe: Recipe = Recipe(),
         progress: ProgressFn | None = None) -> TuneReport:
    """Fine-tune the sentence-transformers model ``base`` (a name or a folder) on ``pairs`` and save it
    under the home; :func:`adopt` makes searches use it. The same pairs and recipe give the same folder."""
    if len(pairs) < _MIN_PAIRS:
        raise ConfigError(f"only {len(pairs)} blocks of this library have a description to learn from; "
                          f"tuning needs at least {_MIN_PAIRS}")
    folder = workspace.home / "models" / f"{_PREFIX}{_digest(base, pairs, recipe)}"
    started = time.perf_counter()
    # the same pairs and recipe were trained before: the model is there (a folder appears whole)
    losses = [] if folder.is_dir() else _train(base, pairs, recipe, folder, progress)
    tenth = max(1, len(losses) // 10)
    return TuneReport(str(folder), len(pairs), len(losses), round(time.perf_counter() - started, 1),
                      round(sum(losses[:tenth]) / tenth, 3) if losses else None,
                      round(sum(losses[-tenth:]) / tenth, 3) if losses else None)


def adopt(workspace: Workspace, model: str, blocks: int) -> None:
    """Record ``model`` (a folder :func:`tune` wrote) as the home's embedder, tuned on a library of
    ``blocks`` blocks, and delete the others. Searches switch to it at their next call, so the
    library is embedded with it first."""
    with connect(workspace) as store:
        index_state.write_state(store.conn, {_STATE: Path(model).name, _BLOCKS: str(blocks)})
        store.conn.commit()
    _forget_models(workspace, keep=Path(model))


def _train(base: str, pairs: list[Pair], recipe: Recipe, folder: Path, progress: ProgressFn | None) -> list[float]:
    import torch

    from .embedders import load_sentence_transformer

    torch.manual_seed(recipe.seed)
    model = load_sentence_transformer(base)
    served_tokens = model.max_seq_length
    model.max_seq_length = recipe.max_tokens
    steps = math.ceil(len(pairs) / recipe.batch * recipe.epochs)
    warmup = max(1, steps // 10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / max(1, steps - warmup)))

    tokenize = getattr(model, "preprocess", None) or model.tokenize  # version 6 renamed it

    def embed(texts: list[str]) -> torch.Tensor:
        features = tokenize(texts)
        return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)

    model.train()
    losses: list[float] = []
    order: list[int] = []
    while len(losses) < steps:
        if not order:
            order = list(range(len(pairs)))
            random.Random(recipe.seed + len(losses)).shuffle(order)
        batch = [pairs[i] for i in order[:recipe.batch]]
        order = order[recipe.batch:]
        if len(batch) < 2:  # one pair has no negative to learn from
            continue
        logits = embed([p.anchor for p in batch]) @ embed([p.positive for p in batch]).T * recipe.scale
        labels = torch.arange(len(batch))
        # both directions: a description finds its block, and a block its description
        loss = (torch.nn.functional.cross_entropy(logits, labels) + torch.nn.functional.cross_entropy(logits.T, labels)) / 2
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(float(loss.item()))
        if progress:
            progress("tune", len(losses), steps)
    model.eval()
    model.max_seq_length = served_tokens
    tmp = folder.with_name(folder.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return losses


def tuned_model(workspace: Workspace) -> str | None:
    """The folder of the model this home was tuned to, if it was and the folder is still there."""
    if not (workspace.home / "models").is_dir():
        return None
    with connect(workspace) as store:
        return tuned_in(store.conn, workspace)


def tuned_in(conn: sqlite3.Connection, workspace: Workspace) -> str | None:
    """:func:`tuned_model`, read on an open connection (a search checks it on every call)."""
    name = index_state.read_state(conn, _STATE)
    folder = workspace.home / "models" / name if name else None
    return str(folder) if folder and folder.is_dir() else None


def tuned_blocks(conn: sqlite3.Connection) -> int | None:
    """How many blocks the library held when its embedder was tuned (None: not tuned)."""
    value = index_state.read_state(conn, _BLOCKS)
    return int(value) if value else None


def reset(workspace: Workspace) -> bool:
    """Forget the tuned model: searches use the configured embedder again. True if there was one."""
    with connect(workspace) as store:
        gone = index_state.read_state(store.conn, _STATE) is not None
        index_state.forget_state(store.conn, _STATE, _BLOCKS)
        store.conn.commit()
    _forget_models(workspace)
    return gone


def _forget_models(workspace: Workspace, keep: Path | None = None) -> None:
    """Delete the tuned models other than ``keep``, with their vectors (the cache's and Chroma's)."""
    from ..config import search_config
    from .vectors import drop_collection

    olds = [p for p in (workspace.home / "models").glob(f"{_PREFIX}*") if p != keep and p.is_dir()]
    if not olds:
        return
    with connect(workspace) as store:
        index_state.forget_vectors(store.conn, [vector_key(str(old)) for old in olds])
        store.conn.commit()
    chroma_url = search_config(workspace).chroma_url
    for old in olds:
        drop_collection(workspace.home / "chroma", chroma_url, str(old))
        shutil.rmtree(old)


def tune_home(workspace: Workspace, recipe: Recipe = Recipe(), progress: ProgressFn | None = None) -> TuneReport:
    """Tune the default embedder on the library of ``workspace`` (its specs brought up to date first);
    :func:`adopt` the model it returns once the library is embedded with it."""
    from ..config import search_config
    from ..specs import cache
    from .embedders import DEFAULT_MODEL

    named = search_config(workspace).embedder
    if named:  # a named model always wins over a tuned one, so tuning it would have no effect
        raise ConfigError(f"this home names its embedder ({named!r} in config.toml or NNRAG_EMBEDDER); "
                          "tuning applies to the default model: unset it first")
    with connect(workspace) as store:
        cache.refresh(store, workspace, (lambda d, t: progress("specs", d, t)) if progress else None)
        pairs = training_pairs(cache.bundles(store))
    log.info("%d description pairs", len(pairs))
    return tune(workspace, DEFAULT_MODEL, pairs, recipe, progress)
