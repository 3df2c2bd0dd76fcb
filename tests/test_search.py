"""Specs and search over a real fixture library: real SQLite FTS5, real Chroma, the real embedder."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import nnrag
from conftest import run_cli, search_limits
from nnrag.evals.retrieval import evaluate, load_queries

LIMITS = search_limits()


@pytest.fixture(scope="module")
def lib(search_lib: dict[str, object]) -> dict[str, object]:
    return search_lib


def test_build_indexes_every_block(lib: dict[str, object]) -> None:
    report = lib["report"]
    assert report.search["blocks"] == report.tried == 7  # type: ignore[attr-defined]
    assert report.search["embedded"] == 7 and report.search["specs_failed"] == 0  # type: ignore[attr-defined]
    assert (Path(lib["home"]) / "chroma").is_dir()  # type: ignore[arg-type]


def test_other_search_code_makes_the_index_stale(lib: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """Specs and what search keeps beside them (comments, identifiers) are rebuilt when the code
    that makes them changes; the next search must sync to pick them up, not only the next build."""
    from nnrag.retrieval import index as search_index

    index = nnrag.search_index(home=lib["home"])  # type: ignore[arg-type]
    assert not index.stale()
    real = search_index.code_key
    monkeypatch.setattr(search_index, "code_key", lambda *roots: real(*roots) + "-changed")
    assert index.stale()


@pytest.mark.parametrize("method", ["lexical", "dense", "hybrid"])
def test_each_method_finds_the_described_block(lib: dict[str, object], method: str) -> None:
    hits = nnrag.search("find anti-aliased downsampling", 3, home=lib["home"], method=method)  # type: ignore[arg-type]
    assert hits[0].name == "BlurDownsample", [h.name for h in hits]
    attention = nnrag.search("multi-head attention over token sequences", 3, home=lib["home"], method=method)  # type: ignore[arg-type]
    assert attention[0].name == "TokenSelfAttention"


def test_filters_and_grouping(lib: dict[str, object]) -> None:
    home = lib["home"]
    hits = nnrag.search("channel attention that rescales channels with a sigmoid gate", 5, home=home)  # type: ignore[arg-type]
    se = hits[0]
    assert se.name == "SqueezeExcite" and se.validated
    # the vendored copy has the same structure: grouped under the first, not listed twice
    assert len([h for h in hits if h.name == "SqueezeExcite"]) == 1
    assert len(se.also_in) == 1 and se.also_in[0].startswith(("search_mirror:", "search_repo:")) and se.same_name == []
    only_mirror = nnrag.search("channel attention", 5, source="search_mirror", home=home)  # type: ignore[arg-type]
    assert {h.source for h in only_mirror} == {"search_mirror"}
    losses = nnrag.search("segmentation overlap", 5, category="loss", home=home)  # type: ignore[arg-type]
    assert [h.name for h in losses] == ["DiceLoss"]
    # a block that fails the gate is found only when failed blocks are asked for
    assert "NativeOnly" not in [h.name for h in nnrag.search("rotated box pooling", 10, home=home)]  # type: ignore[arg-type]
    everything = nnrag.search("rotated box pooling", 10, home=home, validated=None)  # type: ignore[arg-type]
    assert everything[0].name == "NativeOnly" and not everything[0].validated


def test_searches_from_many_threads_agree_with_searches_one_by_one(lib: dict[str, object]) -> None:
    """A server answers several searches at once: each thread reads on its own connection, and
    the word scores and grouping keys kept for the next query are shared between them."""
    from concurrent.futures import ThreadPoolExecutor

    from nnrag.retrieval.index import SearchIndex
    from nnrag.workspace import Workspace

    queries = ["find anti-aliased downsampling", "channel attention with a sigmoid gate",
               "segmentation overlap loss", "multi-head attention over token sequences"] * 4
    index = SearchIndex(Workspace.resolve(lib["home"]))  # type: ignore[arg-type]

    def ids(query: str) -> list[str]:
        return [h.id for h in index.search(query, 5, validated=None)]

    alone = {q: ids(q) for q in queries}
    index.forget_kept()
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(ids, queries))
    assert together == [alone[q] for q in queries]
    assert all(alone[q] for q in queries)
    # and while a server reads the frequent words ahead on its own thread
    index.forget_kept()
    index.read_ahead()
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(ids, queries)) == [alone[q] for q in queries]
    index.read_ahead(wait=True)
    from nnrag.db import connect
    from nnrag.db.words import frequent_stems

    with connect(index.workspace) as store:
        frequent = [("doc", t) for t in frequent_stems(store.conn, "doc", 0.01)]
    kept = index._terms
    assert frequent and all(key in kept._terms for key in frequent if kept._stem(key[1]) == key[1])
    assert [ids(q) for q in queries] == [alone[q] for q in queries]


def test_specs_validate_and_hold_no_code(lib: dict[str, object]) -> None:
    home = lib["home"]
    schema = nnrag.spec_schema()
    sources = {p.name: p.read_text() for p in Path(lib["src"]).rglob("*.py")}  # type: ignore[arg-type]
    code_lines = {ln.strip() for text in sources.values() for ln in text.splitlines()
                  if len(ln.strip()) > 12 and not ln.strip().startswith(("#", '"""')) and '"""' not in ln}
    for block in ("BlurDownsample", "SqueezeExcite", "TokenSelfAttention", "ConvNormAct", "DiceLoss", "NativeOnly"):
        spec = nnrag.spec(block, source="search_repo", home=home)  # type: ignore[arg-type]
        data = json.loads(spec.to_json())
        jsonschema.validate(data, schema)
        text = spec.to_json() + spec.to_markdown()
        leaked = [ln for ln in code_lines if ln in text]
        assert not leaked, (block, leaked)
    blur = nnrag.spec("BlurDownsample", source="search_repo", home=home)  # type: ignore[arg-type]
    assert blur.summary.startswith("Anti-aliased downsampling: blur with a fixed binomial filter, then subsample by two.")
    assert "Shift-Invariant" not in blur.to_json()  # only the docstring's first sentence is kept
    assert blur.probe is not None and blur.probe.outputs == [2, 8, 8, 8]
    assert "halves spatial size" in blur.summary
    assert [p.name for p in blur.constructor] == ["channels", "stride"]
    assert blur.provenance.path == "spkg/layers.py" and blur.provenance.swhid.startswith("swh:1:cnt:")  # type: ignore[union-attr]
    conv = nnrag.spec("ConvNormAct", home=home)  # type: ignore[arg-type]
    assert {(s.type, s.count) for s in conv.submodules} == {("Conv2d", 1), ("BatchNorm2d", 1), ("ReLU", 1)}
    assert "keeps spatial size" in conv.summary and "maps 8 to 16 channels" in conv.summary
    attention = nnrag.spec("TokenSelfAttention", home=home)  # type: ignore[arg-type]
    dim = attention.constructor[0]
    assert (dim.name, dim.required) == ("dim", True) and dim.probe_value is not None and dim.probe_value.isdigit()
    assert attention.probe.inputs[0][-1] == int(dim.probe_value)  # type: ignore[union-attr]
    failed = nnrag.spec("NativeOnly", home=home)  # type: ignore[arg-type]
    assert failed.validation.status == "failed" and failed.validation.code == "missing-dependency"


def test_cli_spec_and_schema(lib: dict[str, object]) -> None:
    home = str(lib["home"])
    data = json.loads(run_cli("spec", "BlurDownsample", "--source", "search_repo", "--json", "--home", home).stdout)
    jsonschema.validate(data, json.loads(run_cli("spec", "--schema").stdout))
    md = run_cli("spec", "search_repo:spkg.layers.BlurDownsample", "--md", "--home", home).stdout
    assert md.startswith("# BlurDownsample") and "## Provenance" in md
    ambiguous = run_cli("spec", "SqueezeExcite", "--home", home, check=False)
    assert ambiguous.returncode == 1 and "search_mirror:mpkg.copied.SqueezeExcite" in ambiguous.stderr


def test_incremental_update_and_reopening(lib: dict[str, object], tmp_path: Path) -> None:
    home, src = Path(lib["home"]), Path(lib["src"])  # type: ignore[arg-type]
    # a fresh process reads the persisted index
    rows = json.loads(run_cli("search", "anti-aliased downsampling", "-k", "3", "--json", "--home", str(home)).stdout)
    assert rows[0]["name"] == "BlurDownsample" and {"name", "source", "path", "score", "id"} <= set(rows[0])
    # a new block is embedded alone; an unchanged library is not touched
    extra = src / "search_mirror" / "mpkg" / "extra.py"
    extra.write_text('import torch.nn as nn\n\n\nclass PixelGate(nn.Module):\n'
                     '    """Gates every pixel with a learned sigmoid mask."""\n\n'
                     '    def __init__(self, channels: int = 4) -> None:\n        super().__init__()\n'
                     '        self.mask = nn.Conv2d(channels, 1, 1)\n\n'
                     '    def forward(self, x):\n        return x * self.mask(x).sigmoid()\n')
    report = nnrag.build([str(src / "search_mirror")], home=home, limits=LIMITS)
    assert report.search["embedded"] == report.search["specs_built"] == report.search["reindexed"] == 1
    assert nnrag.search("sigmoid mask over pixels", 1, home=home)[0].name == "PixelGate"
    extra.unlink()
    nnrag.build([str(src / "search_mirror")], home=home, limits=LIMITS)
    assert "PixelGate" not in [h.name for h in nnrag.search("sigmoid mask over pixels", 10, home=home, validated=None)]
    again = nnrag.sync_search(home=home)
    assert (again.specs_built, again.reindexed, again.embedded, again.upserted) == (0, 0, 0, 0)
    # a search ranks by exact cosine over the vectors the collection holds, read from the index
    import numpy as np
    from nnrag.db import connect
    from nnrag.retrieval import neighbours
    from nnrag.retrieval.index import SearchIndex
    from nnrag.workspace import Workspace

    index = SearchIndex(Workspace.resolve(home))
    stored = index.vectors.collection.get(include=["embeddings"])
    matrix = np.asarray(stored["embeddings"], dtype=np.float32)
    query = index.embedder.embed(["sigmoid mask over pixels"])[0]
    cosines = matrix @ np.asarray(query, dtype=np.float32) / np.linalg.norm(matrix, axis=1)
    with connect(index.workspace) as store:
        near = neighbours.read(store.conn, index.embedder.name)
        assert near is not None and len(near) == len(stored["ids"])
        assert [i for i, _ in near.nearest(query, 5)] == [stored["ids"][i] for i in np.argsort(-cosines)[:5]]
        # vectors lost from the embedding cache are made again by the next search
        store.conn.execute("DELETE FROM embeddings")
        store.conn.commit()
        assert neighbours.read(store.conn, index.embedder.name) is None
    assert SearchIndex(Workspace.resolve(home)).search("anti-aliased downsampling", 1)[0].name == "BlurDownsample"
    with connect(index.workspace) as store:
        assert len(neighbours.read(store.conn, index.embedder.name) or []) == len(stored["ids"])


def test_the_dense_view_says_each_sentence_once(lib: dict[str, object]) -> None:
    """The embedder reads 256 tokens: a docstring sentence the summary already opens with (or a
    wrapper shares with its function) is not spent twice."""
    from nnrag.db import connect
    from nnrag.retrieval.views import dense_text
    from nnrag.specs import cache
    from nnrag.specs.docstrings import SENTENCE_END
    from nnrag.workspace import Workspace

    with connect(Workspace.resolve(lib["home"])) as store:  # type: ignore[arg-type]
        bundles = list(cache.bundles(store))
    repeated = [b for b in bundles if b.docstring and " ".join(b.docstring.split()).split(". ")[0] in b.spec.summary]
    assert repeated, "no fixture block whose summary opens with its docstring"
    for b in bundles:
        sentences = [" ".join(x.lower().rstrip(".").split()) for x in SENTENCE_END.split(dense_text(b))]
        assert len(sentences) == len(set(sentences)), dense_text(b)


@pytest.mark.parametrize("variant", ["DiceLoss", "DiceLossV2"])
def test_blocks_of_one_class_name_are_one_answer(lib: dict[str, object], variant: str) -> None:
    """Two libraries' ``DiceLoss`` with different code take one place among the hits, the other
    listed under it, so that they do not crowd out other answers; so does a version of it."""
    from nnrag.db import connect
    from nnrag.workspace import Workspace

    home, src = Path(lib["home"]), Path(lib["src"])  # type: ignore[arg-type]
    other = src / "search_mirror" / "mpkg" / "dice.py"
    other.write_text(f'import torch\nimport torch.nn as nn\n\n\nclass {variant}(nn.Module):\n'
                     '    """Dice loss over mask logits with a smoothing term."""\n\n'
                     '    def __init__(self, smooth: float = 1.0, eps: float = 1e-7) -> None:\n'
                     '        super().__init__()\n        self.smooth, self.eps = smooth, eps\n\n'
                     '    def forward(self, logits, target):\n        p = logits.sigmoid().flatten(1)\n'
                     '        t = target.flatten(1)\n        inter = (p * t).sum(1)\n'
                     '        dice = (2 * inter + self.smooth) / (p.sum(1) + t.sum(1) + self.smooth + self.eps)\n'
                     '        return (1 - dice).mean()\n')
    try:
        nnrag.build([str(src / "search_mirror")], home=home, limits=LIMITS)
        with connect(Workspace.resolve(home)) as store:
            prints = {r["fingerprint"] for r in store.conn.execute(
                "SELECT s.fingerprint FROM specs s JOIN library l USING (block_id) WHERE l.name IN ('DiceLoss', ?)",
                (variant,))}
        assert len(prints) == 2  # different code: only the name groups them
        hits = nnrag.search("overlap loss for segmentation masks", 5, home=home, validated=None)
        dice = [h for h in hits if h.name in ("DiceLoss", variant)]
        # one row, and the other class is an alternative of that name, never called a copy
        assert len(dice) == 1 and dice[0].also_in == [] and len(dice[0].same_name) == 1, [
            (h.name, h.also_in, h.same_name) for h in hits]
        assert {dice[0].id, dice[0].same_name[0]} == {"search_repo:spkg.layers.DiceLoss", f"search_mirror:mpkg.dice.{variant}"}
    finally:
        other.unlink()
        nnrag.build([str(src / "search_mirror")], home=home, limits=LIMITS)


def test_retrieval_eval(lib: dict[str, object], tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"query": "find anti-aliased downsampling", "gold": ["Blur"]},
        {"query": "gate channels after global pooling through a bottleneck", "gold": ["SqueezeExcite"]},
        {"query": "graph convolution with Chebyshev polynomials", "gold": ["ChebConv"]},
    ]) + "\n")
    report = evaluate(nnrag.search_index(home=lib["home"]), load_queries(queries))  # type: ignore[arg-type]
    data = report.to_dict()
    assert set(data) >= {"lexical", "dense", "hybrid"}
    assert report.evaluated == 2 and report.not_in_corpus == ["graph convolution with Chebyshev polynomials"]
    for method in ("lexical", "dense", "hybrid"):
        figures = data[method]
        assert set(figures) >= {"recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "misses"}
        assert all(0.0 <= figures[k] <= 1.0 for k in ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10"))
    assert data["hybrid"]["recall@5"] == 1.0
    # an index that is out of date is brought up to date first, with progress
    import shutil
    import sqlite3

    home = tmp_path / "stale"
    shutil.copytree(str(lib["home"]), home)
    with sqlite3.connect(home / "index.sqlite3") as conn:
        conn.execute("DELETE FROM specs")
        conn.execute("DELETE FROM search_state")
    heard: list[tuple[str, int, int]] = []
    again = evaluate(nnrag.search_index(home=home), load_queries(queries), progress=lambda *a: heard.append(a))
    figures = ("recall@1", "recall@10", "mrr@10", "ndcg@10")
    assert ("specs", 7, 7) in heard
    assert [again.to_dict()["hybrid"][k] for k in figures] == [data["hybrid"][k] for k in figures]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "x"}\n')
    with pytest.raises(nnrag.ConfigError, match="bad.jsonl:1"):
        load_queries(bad)


def test_the_fusion_study_at_the_shipped_setting_is_the_search(lib: dict[str, object], tmp_path: Path) -> None:
    from nnrag.evals.bench_fusion import Setting, study

    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"query": "find anti-aliased downsampling", "gold": ["Blur"], "split": "dev"},
        {"query": "gate channels after global pooling through a bottleneck", "gold": ["SqueezeExcite"], "split": "test"},
        {"query": "normalise the activations", "gold": ["Norm"], "split": "test"},
    ]) + "\n")
    index = nnrag.search_index(home=lib["home"])
    settings = [Setting(1.0, 100), Setting(3.0, 100), Setting(1.0, 1)]
    rows = study(index, load_queries(queries), settings)
    assert [(r.lexical_weight, r.candidates, r.split) for r in rows] == [
        (s.lexical_weight, s.candidates, split) for s in settings for split in ("dev", "test")]
    for split in ("dev", "test"):
        shipped = evaluate(index, [q for q in load_queries(queries) if q.split == split]).to_dict()["hybrid"]
        row = next(r for r in rows if (r.lexical_weight, r.candidates, r.split) == (1.0, 100, split))
        assert (row.recall_at_10, row.mrr_at_10) == (shipped["recall@10"], shipped["mrr@10"])
    # one candidate per method: at most two blocks to fuse
    one = index.fused(index.candidates("normalise the activations", 1, validated=None), 10, 1.0, 1)
    assert 1 <= len(one) <= 2


def test_shared_chroma_server(lib: dict[str, object], tmp_path: Path) -> None:
    """`--chroma-url` puts the vectors in a `chroma run` server; texts embedded before are reused."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    chroma = Path(sys.executable).parent / "chroma"
    server = subprocess.Popen([str(chroma), "run", "--path", str(tmp_path / "db"), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        report = nnrag.sync_search(home=lib["home"], chroma_url=url)  # type: ignore[arg-type]
        assert report.upserted == report.blocks and report.embedded == 0
        hits = nnrag.search("find anti-aliased downsampling", 3, home=lib["home"], chroma_url=url, method="dense")  # type: ignore[arg-type]
        assert hits[0].name == "BlurDownsample"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_numpy_encoder_gives_sentence_transformers_vectors() -> None:
    import numpy as np

    from nnrag.retrieval.embedders import DEFAULT_MODEL, SentenceTransformerEmbedder, make_embedder

    texts = [f"{adjective} {noun} for {task}" for adjective in ("anti-aliased", "depthwise", "gated", "sparse", "residual")
             for noun in ("downsampling", "attention", "convolution", "normalisation") for task in ("images", "tokens", "graphs", "audio", "video")]
    texts += ["", "a", "ÄÖÜ straße 日本語 🚀", "Conv2d " * 400, "x" * 3000]  # empty, unicode, longer than 256 tokens
    fast = make_embedder(DEFAULT_MODEL)
    assert type(fast).__name__ == "NumpyEmbedder" and fast.name == DEFAULT_MODEL
    ours = np.array(fast.embed(texts[:60]) + fast.embed(texts[60:]))  # two calls of at most 64: numpy both times
    reference = np.array(SentenceTransformerEmbedder(DEFAULT_MODEL).embed(texts))
    assert len(texts) >= 100 and ours.shape == reference.shape == (len(texts), 384)
    assert float((ours * reference).sum(1).min()) >= 0.999
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # the GELU's erf, here without scipy, stays within float32 rounding of the exact one
    import math

    from nnrag.retrieval.minilm import _erf

    grid = np.linspace(-9, 9, 36001, dtype=np.float32)
    exact = np.array([math.erf(float(x)) for x in grid])
    assert float(np.abs(_erf(grid) - exact).max()) < 1e-6


def test_a_sync_of_many_texts_runs_on_sentence_transformers_and_a_query_on_numpy(tmp_path: Path) -> None:
    """numpy answers a few texts without loading torch; a sync's batches go to
    sentence-transformers, twice as fast per text (batches of exactly numpy's limit once sent
    every build to numpy)."""
    from nnrag.db import connect
    from nnrag.retrieval.embedders import DEFAULT_MODEL, _numpy_embedder
    from nnrag.retrieval.index import SyncReport, _embed_cached
    from nnrag.workspace import Workspace

    embedder = _numpy_embedder(DEFAULT_MODEL)  # a fresh one: the process-wide one may be loaded already
    assert embedder is not None
    embedder.embed(["one query"])
    assert not embedder._bulk.loaded
    report = SyncReport()
    with connect(Workspace.resolve(tmp_path / "home"), create=True) as store:
        _embed_cached(store.conn, embedder, [f"block number {i}" for i in range(100)], report, None)
    assert embedder._bulk.loaded and report.embedded == 100


def test_a_search_process_never_imports_torch(lib: dict[str, object]) -> None:
    """Nor chromadb or scipy, once the library is synced: each costs a cold search half a second."""
    import subprocess
    import sys

    nnrag.sync_search(home=lib["home"])  # type: ignore[arg-type]  # an earlier test may have synced to a Chroma server
    script = ("import sys, nnrag; hits = nnrag.search('find anti-aliased downsampling', 3, home=sys.argv[1]); "
              "print(hits[0].name, *(m in sys.modules for m in ('torch', 'sentence_transformers', 'chromadb', 'scipy')))")
    out = subprocess.run([sys.executable, "-c", script, str(lib["home"])], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["BlurDownsample", "False", "False", "False", "False"], out.stdout + out.stderr


def test_technique_definitions_match_class_names_and_never_restate_an_eval_query() -> None:
    """The glossary is written in its own words: a definition sharing four words in a row with a
    query of the retrieval evaluations would answer that query by construction."""
    import re

    from nnrag.evals.retrieval import SHIPPED_QUERIES
    from nnrag.retrieval.lexical import split_words
    from nnrag.retrieval.techniques import _ENTRIES, describe

    assert "LayerScale" in describe(split_words("LayerScale"))[0]
    assert describe(split_words("SEModule"))[0].startswith("squeeze-and-excitation")  # through the abbreviation
    assert describe(split_words("SigmoidFocalLoss"))[0].startswith("focal loss")
    # keys match however capitals split a name
    assert describe(split_words("ReLU6"))[0].startswith("rectified linear unit clipped")  # re lu 6
    assert describe(split_words("ResNeSt"))[0].startswith("ResNeSt split-attention")  # res ne st
    assert describe(split_words("CoordAttn"))[0].startswith("coordinate attention")
    assert describe(split_words("Scale")) == [] and describe(split_words("ResidualBlockOfMine")) == []
    # model-level abbreviations are spelled out beside the name's words; GRU's "gated ... unit" is not
    from nnrag.retrieval.abbreviations import expand
    assert expand(split_words("PerformerEncDec")) == "performer enc dec (encoder; decoder)"
    assert expand(split_words("ReformerLM")) == "reformer lm (language model)" and expand(split_words("GRUCell")) == "gru cell"

    def grams(text: str) -> set[tuple[str, ...]]:
        words = re.findall(r"[a-z0-9]+", text.lower())
        return {tuple(words[i:i + 4]) for i in range(len(words) - 3)}

    queries = [json.loads(line)["query"] for path in (SHIPPED_QUERIES, SHIPPED_QUERIES.with_name("wide-queries.jsonl"))
               for line in path.read_text().splitlines() if line.strip()]
    restated = [(keys[0], q) for keys, text in _ENTRIES for q in queries if grams(text) & grams(q)]
    assert restated == []


def test_spec_facts_of_a_class_defined_under_a_condition() -> None:
    """A library defines its own class only where torch lacks one (``if version < ...: class
    SiLU``); the spec reads it there, and copies of one block under other model prefixes share a
    fingerprint while different code does not."""
    from nnrag.specs.static import class_facts

    code = (
        "import torch.nn as nn\n"
        "if OLD_TORCH:\n"
        "    class SiLU(nn.Module):\n"
        "        '''Sigmoid weighted linear unit.'''\n"
        "        def forward(self, x):\n"
        "            return x * x.sigmoid()\n"
        "else:\n"
        "    SiLU = nn.SiLU\n"
        "try:\n"
        "    from fast import Mix\n"
        "except ImportError:\n"
        "    class Mix(nn.Module):\n"
        "        def forward(self, x):\n"
        "            return x\n"
    )
    assert class_facts(code, "SiLU").docstring == "Sigmoid weighted linear unit."
    assert class_facts(code, "Mix").name == "Mix"

    llama = ("import torch.nn as nn\nclass LlamaMLP(nn.Module):\n    def __init__(self, c):\n"
             "        super().__init__()\n        self.norm = LlamaRMSNorm(c.hidden_size)\n"
             "    def forward(self, x):\n        return self.norm(x)\n")
    mistral = llama.replace("Llama", "Mistral")
    other = llama.replace("return self.norm(x)", "return self.norm(x) * 2")
    assert class_facts(llama, "LlamaMLP").fingerprint == class_facts(mistral, "MistralMLP").fingerprint
    assert class_facts(llama, "LlamaMLP").fingerprint != class_facts(other, "LlamaMLP").fingerprint
    thin = "class A(Base1):\n    pass\nclass B(Base2):\n    pass\n"
    assert class_facts(thin, "A").fingerprint != class_facts(thin, "B").fingerprint  # no method: names matter


def test_spec_facts_read_from_the_class_alone_equal_those_of_the_whole_file() -> None:
    """A spec reads one class and the top-level imports, not the whole file; where that reading
    cannot settle a fact it falls back to the file's tree, with the same facts either way."""
    import ast

    from nnrag.specs import static

    code = (
        "'''A module.\n"
        "class Conv(nn.Module):   (a docstring line that looks like a class)\n"
        "'''\n"
        "import torch\n"
        "from torch import (\n"
        "    nn as tnn,\n"
        "    Tensor)\n"
        "import torch.nn.functional as F\n"
        "class Base(tnn.Module):\n"
        "    def __init__(self, width: int = 8, depth=2):\n"
        "        super().__init__()\n"
        "        self.proj = tnn.Linear(width, width)\n"
        "class Child(Base):\n"
        "    '''Inherits its constructor.\n"
        "Unindented docstring line.\n"
        "    '''\n"
        "    def forward(self, x: Tensor) -> Tensor:\n"
        "        return F.gelu(self.proj(x)) + torch.tanh(x)\n"
        "class Conv(tnn.Module):\n"
        "    def forward(self, x):\n"
        "        return tnn.functional.relu(x)\n"
        "    class Inner(tnn.Module):\n"
        "        pass\n"
        "def helper():\n"
        "    pass\n"
    )
    tree = ast.parse(code)  # the whole file's reading, every fact taken from the full tree
    classes = static._classes(tree)
    for name in ("Base", "Child", "Conv", "Conv.Inner"):
        cls = classes[name]
        init, fwd = static._method(cls, "__init__", classes), static._method(cls, "forward", classes)
        whole = static.ClassFacts(
            name=cls.name, bases=[ast.unparse(b) for b in cls.bases], docstring=ast.get_docstring(cls),
            constructor=static.parameters(init) if init else [],
            forward=static.ForwardSignature(parameters=static.parameters(fwd), returns=static._text(fwd.returns))
            if fwd else None,
            operations=static.operations(tree, code), fingerprint=static._fingerprint(cls),
            identifiers=sorted(n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))),
            attributes=static.attributes(cls)[0], config_fields=static.attributes(cls)[1])
        assert static.class_facts(code, name) == whole, name
    child = static.class_facts(code, "Child")
    assert [p.name for p in child.constructor] == ["width", "depth"]
    assert child.operations == ["F.gelu", "F.relu", "nn.Linear", "torch.tanh"]
    assert child.identifiers == ["Base", "Child", "Conv", "helper"]
    with pytest.raises(KeyError):
        static.class_facts(code, "Missing")


def test_lexical_tables_hold_exactly_the_documents_given(tmp_path: Path) -> None:
    """Many changes rewrite the tables at once, a few are written one by one; either way the
    tables end up holding exactly the documents of the last sync."""
    from nnrag.db import connect
    from nnrag.retrieval import lexical
    from nnrag.workspace import Workspace

    def doc(i: int, extra: str = "") -> lexical.LexicalDoc:
        return lexical.LexicalDoc(f"s:m.Block{i}", f"block {i} {extra}", "m", f"doc {i}", "ident")

    with connect(Workspace.resolve(tmp_path), create=True) as store:
        conn = store.conn

        def contents() -> set[tuple[str, str]]:
            return {(r[0], r[1]) for r in conn.execute("SELECT block_id, text FROM search_name")}

        assert lexical.sync(conn, [doc(i) for i in range(500)]) == 500  # all at once
        assert lexical.sync(conn, [doc(i) for i in range(500)]) == 0
        assert lexical.sync(conn, [doc(i, "gated" if i == 7 else "") for i in range(1, 500)]) == 1  # one by one
        assert contents() == {(f"s:m.Block{i}", f"block {i} {'gated' if i == 7 else ''}") for i in range(1, 500)}
        assert [b for b, _ in lexical.search(conn, "gated", 5)] == ["s:m.Block7"]
        assert lexical.sync(conn, [doc(i, "new") for i in range(300)]) == 300  # rewritten again
        assert contents() == {(f"s:m.Block{i}", f"block {i} new") for i in range(300)}
        assert conn.execute("SELECT count(*) FROM search_doc").fetchone()[0] == 300
        # tables an earlier release wrote, their rowids unrelated to the keys', are written again whole
        for f in lexical.SEARCH_FIELDS:
            conn.execute(f"DELETE FROM search_{f}")
        conn.execute("DELETE FROM search_keys")
        for i in range(5):
            for f in lexical.SEARCH_FIELDS:
                conn.execute(f"INSERT INTO search_{f} (rowid, block_id, text) VALUES (?,?,?)",
                             (100 + i, f"s:m.Block{i}", f"old {i}"))
        conn.executemany("INSERT INTO search_keys VALUES (?,?)", [(f"s:m.Block{i}", "old") for i in (4, 3, 2, 1, 0)])
        assert lexical.sync(conn, [doc(i, "gated" if i == 2 else "") for i in range(5)]) == 5
        assert contents() == {(f"s:m.Block{i}", f"block {i} {'gated' if i == 2 else ''}") for i in range(5)}
        assert [b for b, _ in lexical.search(conn, "gated", 5)] == ["s:m.Block2"]


def test_lexical_scores_are_fts5_scores_and_follow_the_library(tmp_path: Path) -> None:
    """The one-term scores a search keeps add up to FTS5's own score of the whole query, field
    by field, at FTS5's k1 and b; at the shipped k1 they are BM25 counted from the words
    themselves. Kept scores are dropped with the library version they were read for."""
    import math
    import random

    from nnrag.db import connect
    from nnrag.retrieval import lexical
    from nnrag.workspace import Workspace

    words = "gate norm pool conv attention sigmoid residual channel spatial blur shift mixer".split()
    rng = random.Random(3)

    def doc(i: int) -> lexical.LexicalDoc:
        def some(n: int) -> str:
            return " ".join(rng.choice(words) for _ in range(n))
        return lexical.LexicalDoc(f"s:m.B{i}", some(2), some(1), some(12), some(6))

    def bm25(docs: list[lexical.LexicalDoc], query: str, k1: float, b: float) -> dict[str, float]:
        """The textbook sum, each field's text counted word by word (every word here is its own stem)."""
        total: dict[str, float] = {}
        for f in lexical.SEARCH_FIELDS:
            texts = {d.block_id: getattr(d, f).split() for d in docs}
            mean = sum(map(len, texts.values())) / len(texts)
            for term in (t for t in lexical.query_terms(query) if t in words):
                holding = {i: t.count(term) for i, t in texts.items() if term in t}
                idf = max(math.log((len(texts) - len(holding) + 0.5) / (len(holding) + 0.5)), 1e-6)
                for i, tf in holding.items():
                    norm = 1 - b + b * len(texts[i]) / mean
                    total[i] = total.get(i, 0.0) + lexical._WEIGHTS[f] * idf * tf * (k1 + 1) / (tf + k1 * norm)
        return total

    def close(got: dict[str, float], expected: dict[str, float]) -> bool:
        return got.keys() == expected.keys() and all(
            abs(got[b] - expected[b]) <= 1e-4 * max(1.0, abs(expected[b])) for b in got)

    with connect(Workspace.resolve(tmp_path), create=True) as store:
        conn = store.conn
        docs = [doc(i) for i in range(60)]
        lexical.sync(conn, docs)
        kept = lexical.TermScores(k1=1.2, b=0.75)
        kept.reset("v1")
        shipped = lexical.TermScores()
        shipped.reset("v1")
        for query in ("gate pool", "attention over channel and spatial", "blur shift mixer norm"):
            match = " OR ".join(f'"{t}"' for t in lexical.query_terms(query))
            expected: dict[str, float] = {}
            for f in lexical.SEARCH_FIELDS:
                for block_id, score in conn.execute(
                        f"SELECT block_id, bm25(search_{f}) FROM search_{f} WHERE search_{f} MATCH ?", (match,)):
                    expected[block_id] = expected.get(block_id, 0.0) - lexical._WEIGHTS[f] * score
            assert close(dict(lexical.search(conn, query, 100, None, kept)), expected)
            assert close(expected, bm25(docs, query, 1.2, 0.75))
            ours = dict(lexical.search(conn, query, 100, None, shipped))
            assert close(ours, bm25(docs, query, lexical._K1, lexical._B)) and not close(ours, expected)
        # the stems read ahead serve every form of their words, with the same scores
        ahead = lexical.TermScores()
        assert ahead.read_ahead(conn, "v1", share=0.01) == sum(
            conn.execute(f"SELECT count(DISTINCT term) FROM temp.rows_{f}").fetchone()[0] for f in lexical.SEARCH_FIELDS)
        held = len(ahead._terms)
        for query in ("gates pooled", "attentions over channels, spatially", "blurred shifts mixers norms"):
            assert lexical.search(conn, query, 100, None, ahead) == lexical.search(conn, query, 100, None, lexical.TermScores())
        assert len(ahead._terms) == held  # nothing read again
        # a filter keeps the allowed blocks' places: every field's best 400 are all of its matches here
        everything = lexical.search(conn, "gate pool norm", 100, None, kept)
        allowed = {b for b, _ in everything[1::3]}
        assert lexical.search(conn, "gate pool norm", 100, allowed, kept) == [(b, s) for b, s in everything if b in allowed]
        # a block added afterwards is found once the kept scores are for the new version
        lexical.sync(conn, [doc(i) for i in range(60)] + [lexical.LexicalDoc("s:m.New", "zebra", "m", "zebra", "")])
        assert lexical.search(conn, "zebra", 3, None, kept) == []  # still the first version's scores
        kept.reset("v2")
        assert [b for b, _ in lexical.search(conn, "zebra", 3, None, kept)] == ["s:m.New"]


def test_british_and_american_spellings_meet(tmp_path: Path) -> None:
    """The stemmer keeps ``normalisation`` and ``normalization`` apart; folding both sides lets a
    query in either spelling find a document in the other, and leaves look-alikes ("four") alone."""
    from nnrag.db import connect
    from nnrag.retrieval import lexical
    from nnrag.workspace import Workspace

    docs = [lexical.LexicalDoc("s:m.A", "a", "m", "Filter response normalization of each neighbor", ""),
            lexical.LexicalDoc("s:m.B", "b", "m", "codebook quantiser in a colour space", ""),
            lexical.LexicalDoc("s:m.C", "c", "m", "for four channels", "")]
    with connect(Workspace.resolve(tmp_path), create=True) as store:
        lexical.sync(store.conn, docs)
        assert [b for b, _ in lexical.search(store.conn, "normalisation over neighbours", 3)] == ["s:m.A"]
        assert [b for b, _ in lexical.search(store.conn, "vector quantizer, color", 3)] == ["s:m.B"]
        assert [b for b, _ in lexical.search(store.conn, "four", 3)] == ["s:m.C"]
    assert lexical.fold_spelling("standardised optimisers") == "standardized optimizers"


def test_a_letter_and_digit_word_is_looked_for_whole(tmp_path: Path) -> None:
    """Split like a class name, ``L2`` leaves only ``2``, which every ``2d`` block matches; the
    whole word is looked for too, so a docstring's ``L2`` is found, while a name's ``Conv2d``
    (held split) still matches the split form."""
    from nnrag.db import connect
    from nnrag.retrieval import lexical
    from nnrag.workspace import Workspace

    docs = [lexical.LexicalDoc("s:m.A", "channel scale", "m", "scales each position by its L2 norm", ""),
            lexical.LexicalDoc("s:m.B", "conv 2d", "m", "a 2d convolution over a feature map", ""),
            lexical.LexicalDoc("s:m.C", "layer norm", "m", "divides each token by its norm", "")]
    with connect(Workspace.resolve(tmp_path), create=True) as store:
        lexical.sync(store.conn, docs)
        assert lexical.search(store.conn, "L2 norm", 3)[0][0] == "s:m.A"
        assert lexical.search(store.conn, "Conv2d", 3)[0][0] == "s:m.B"
    assert lexical.query_terms("L2 and SiLU in 3x3") == ["2", "l2", "si", "lu", "3x", "3"]


def test_docstrings_are_read_as_prose() -> None:
    """The dense view reads what a docstring says the block does: example sessions, shape and
    reference sections and code directives go, math and markup become their words; summaries
    take the first sentence without markup."""
    from nnrag.specs.docstrings import first_sentence, prose

    doc = """Compute the total variation of an image as in
    `"Nonlinear total variation" <https://example.org/tv>`_ [1].

    Convention:
        See the Convention block of :func:`~kornia.losses.total_variation`.

    The module has no ``reduction`` and always sums.

    .. math::
        \\text{Normalization}\\to\\text{Activation}

    .. code-block:: python

        tv = TotalVariation()

    Shape:
        - Input: :math:`(*, H, W)`.

    Examples:
        >>> tv = TotalVariation()
        >>> tv(torch.ones(2, 3, 4, 4)).data
        tensor([[0., 0., 0.],
                [0., 0., 0.]])

    Reference:
        [1] https://en.wikipedia.org/wiki/Total_variation
    """
    assert prose(doc) == ('Compute the total variation of an image as in "Nonlinear total variation". '
                          "The module has no reduction and always sums. Normalization Activation")
    assert first_sentence(doc) == 'Compute the total variation of an image as in "Nonlinear total variation".'
    numpy_style = "Block.\n\nParameters\n----------\ndim : int\n    Width.\n\nExamples\n--------\n>>> Block(3)\n"
    assert prose(numpy_style) == "Block. Parameters dim : int Width."


def test_a_config_built_block_is_described_by_its_package_docs(tmp_path: Path) -> None:
    """A block built from a config has no parameters or docstring to say what it does; the config
    fields it reads do, and the package documents them in its config class: both reach the spec's
    bundle (identifiers and notes), read from a real index."""
    from nnrag.db import connect
    from nnrag.specs import static
    from nnrag.specs.config_docs import PackageDocs, argument_docs
    from nnrag.workspace import Workspace

    pkg = tmp_path / "repo" / "lm" / "models" / "nys"
    pkg.mkdir(parents=True)
    for d in (pkg.parent.parent, pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "configuration_nys.py").write_text(
        'class NysConfig:\n'
        '    r"""\n'
        '    num_landmarks (`int`, *optional*, defaults to 64):\n'
        '        The number of landmark points of the Nystrom approximation\n'
        '        of the attention matrix.\n'
        '    hidden_act (`str`): the activation\n'
        '    """\n')
    model = ("import torch.nn as nn\n"
             "class NysAttention(nn.Module):\n"
             "    def __init__(self, config):\n"
             "        super().__init__()\n"
             "        self.num_landmarks = config.num_landmarks\n"
             "        self.__kernel = self.config.conv_kernel_size\n"
             "    def forward(self, x):\n"
             "        return x * self.scale\n")
    (pkg / "modeling_nys.py").write_text(model)
    facts = static.class_facts(model, "NysAttention")
    assert (facts.attributes, facts.config_fields) == (["kernel", "num_landmarks"], ["num_landmarks", "conv_kernel_size"])

    home = tmp_path / "home"
    nnrag.index([str(tmp_path / "repo")], home=home)
    source = nnrag.sources(home=home)[0].name
    with connect(Workspace.resolve(home)) as store:
        notes = PackageDocs(store.conn).notes(source, "lm.models.nys.modeling_nys", facts.config_fields)
    assert notes == ("num_landmarks: The number of landmark points of the Nystrom approximation of the attention "
                     "matrix.")
    numpy_style = argument_docs("Parameters\n----------\nwidth : int\n    Channels of the input.\n")
    assert numpy_style == {"width": "Channels of the input."}
    assert argument_docs("Args:\n    width: channels\n")["width"] == "channels"


def test_a_readme_section_describes_the_classes_it_shows(tmp_path: Path) -> None:
    """A README section's prose goes to the classes its example imports or its text names: a name
    two modules define to the one the package re-exports, never through a table of contents or an
    installation section, and a class every example builds only under its own heading."""
    from nnrag.db import connect
    from nnrag.specs.readme import ReadmeNotes, mentions, prose, sections
    from nnrag.workspace import Workspace

    pkg = tmp_path / "repo" / "rpkg"
    pkg.mkdir(parents=True)
    block = "import torch.nn as nn\nclass {}(nn.Module):\n    def forward(self, x):\n        return x\n"
    (pkg / "quant.py").write_text(block.format("FSQ") + block.format("ResidualFSQ"))
    (pkg / "vit.py").write_text(block.format("ViT"))
    (pkg / "mae.py").write_text(block.format("ViT") + block.format("MAE"))
    (pkg / "wrap.py").write_text(block.format("Wrapper"))
    (pkg / "__init__.py").write_text("from rpkg.vit import ViT\nfrom .mae import MAE\nfrom rpkg.quant import FSQ\n")
    (tmp_path / "repo" / "README.md").write_text(
        "# rpkg\n\n- [FSQ](#fsq)\n- [MAE](#mae)\n\n"
        "## Installation\n\nInstall it, then `FSQ` and `MAE` can be imported from rpkg.\n\n"
        "## Finite Scalar Quantization\n\n<img src=\"fsq.png\">\n\nThey round each scalar into a few levels "
        "with [straight through](https://arxiv.org) gradients.\n\n"
        "```python\nfrom rpkg import FSQ, Wrapper\nq = Wrapper(FSQ(levels = [8, 5]))\n```\n\n"
        "Masked Autoencoder\n==================\n\nThe encoder sees a few unmasked patches and a small decoder "
        "rebuilds the pixels.\n\n```python\nfrom rpkg import ViT, MAE, Wrapper\n```\n\n"
        "## Residual quantisation\n\nQuantise what the previous quantiser left, again and again, with "
        "ResidualFSQ.\n\n```python\nw = Wrapper(ResidualFSQ())\n```\n\n"
        "## The Wrapper\n\nWraps any quantiser so that it runs on images of any size and shape.\n")
    assert prose("Turn on **kmeans_init** or `use_cosine_sim`, *then* x_y.\n| a | b |\n![](i.png) [paper](https://x.org)") == \
        "Turn on kmeans_init or use_cosine_sim, then x_y. paper"
    # an import names what its own line (or its brackets) lists, aliases by their class
    assert mentions("```python\nfrom a.b import X as Y, Z\n\nw = X()\nfrom c import (P,\n    Q)\n```") == [
        ("X", "a.b"), ("Z", "a.b"), ("P", "c"), ("Q", "c"), ("X", None)]
    assert [s.title for s in sections((tmp_path / "repo" / "README.md").read_text())] == [
        "rpkg", "Installation", "Finite Scalar Quantization", "Masked Autoencoder", "Residual quantisation", "The Wrapper"]
    home = tmp_path / "home"
    nnrag.index([str(tmp_path / "repo")], home=home)
    source = nnrag.sources(home=home)[0].name
    with connect(Workspace.resolve(home)) as store:
        notes = ReadmeNotes(store.conn)
        said = {(m, n): notes.note(source, m, n) for m, n in [
            ("rpkg.quant", "FSQ"), ("rpkg.quant", "ResidualFSQ"), ("rpkg.vit", "ViT"), ("rpkg.mae", "ViT"),
            ("rpkg.mae", "MAE"), ("rpkg.wrap", "Wrapper")]}
        assert len(notes.key(source)) == 40
    assert said[("rpkg.quant", "FSQ")] == ("Finite Scalar Quantization: They round each scalar into a few levels with "
                                           "straight through gradients.")
    assert said[("rpkg.quant", "ResidualFSQ")].startswith("Residual quantisation: Quantise what")
    assert said[("rpkg.vit", "ViT")] == said[("rpkg.mae", "MAE")] != ""
    assert said[("rpkg.mae", "MAE")].startswith("Masked Autoencoder: The encoder sees")
    assert said[("rpkg.mae", "ViT")] == ""  # the package re-exports the other ViT
    assert said[("rpkg.wrap", "Wrapper")].startswith("The Wrapper: Wraps any quantiser")  # not the first example's

    # a released package's README is the long description of its metadata, under its one-line summary
    meta = tmp_path / "meta"
    (meta / "mpkg").mkdir(parents=True)
    (meta / "mpkg" / "__init__.py").write_text(block.format("Siren"))
    (meta / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: mpkg\nSummary: Networks with *periodic* activations\n\n"
                                   "## Sine layers\n\nA linear map followed by a sine of a scaled input, for `Siren`.\n")
    nnrag.index([str(meta)], home=home)
    with connect(Workspace.resolve(home)) as store:
        notes = ReadmeNotes(store.conn)
        assert notes.summary("meta") == "Networks with periodic activations" and notes.summary(source) == ""
        assert notes.note("meta", "mpkg", "Siren").startswith("Sine layers: A linear map followed by a sine")


def test_the_readme_tells_search_what_the_code_does_not(lib: dict[str, object]) -> None:
    """The fixture README describes the undocumented ConvNormAct in words no code holds."""
    for method in ("lexical", "hybrid"):
        hits = nnrag.search("stem of stacked hourglass networks", 3, home=lib["home"], method=method)  # type: ignore[arg-type]
        assert hits[0].name == "ConvNormAct", (method, [h.name for h in hits])


def test_the_comment_above_an_undocumented_class_describes_it(lib: dict[str, object]) -> None:
    """ConvNormAct has no docstring; the comment above it gives its summary and is searched."""
    conv = nnrag.spec("ConvNormAct", home=lib["home"])  # type: ignore[arg-type]
    assert conv.summary.startswith("A unit with no shortcut: every plain VGG-style backbone repeats it. 2-D ")
    for method in ("lexical", "dense", "hybrid"):
        hits = nnrag.search("the unit a VGG backbone repeats", 3, home=lib["home"], method=method)  # type: ignore[arg-type]
        assert hits[0].name == "ConvNormAct", (method, [h.name for h in hits])


def test_mechanisms_are_read_from_the_class_own_code() -> None:
    """Blocks named opaquely are described by what their code does: a softmax over a product
    of tensors is attention, a sigmoid that multiplies is a gate, a wrapper says what the
    function it calls says (a signature spread over lines, closed at the margin, included); a
    block that only holds an attention part is not itself one."""
    from nnrag.specs.static import class_facts

    code = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "class GPSA(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.qk = nn.Linear(dim, 2 * dim)\n"
        "        self.gate = nn.Parameter(torch.zeros(1))\n"
        "    def forward(self, x):\n"
        "        q, k = self.qk(x).chunk(2, dim=-1)\n"
        "        scores = q @ k.transpose(-1, -2)\n"
        "        attn = self._mix(scores.softmax(dim=-1))\n"
        "        return attn @ x\n"
        "    def _mix(self, a):\n"
        "        g = torch.sigmoid(self.gate)\n"
        "        return (1.0 - g) * a + g * torch.eye(a.shape[-1])\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.attn = GPSA(dim)\n"
        "        self.dw = nn.Conv2d(dim, dim, 3, padding=2, dilation=2, groups=dim)\n"
        "    def forward(self, x):\n"
        "        return x + self.attn(x)\n"
        "class SoftArgmax(nn.Module):\n"
        "    def forward(self, heat):\n"
        "        return soft_argmax(\n"
        "            heat,\n"
        "        )\n"
        "def soft_argmax(\n"
        "    heat: torch.Tensor,\n"
        ") -> torch.Tensor:\n"
        "    '''Expected coordinates of each heatmap under its softmax.\n\n    Args: heat.'''\n"
        "    return heat\n"
        "class Loss(nn.Module):\n"
        "    def forward(self, logits, target):\n"
        "        return F.binary_cross_entropy_with_logits(logits, target)\n"
    )
    gpsa = class_facts(code, "GPSA").mechanisms
    assert gpsa[0].startswith("attention: softmax") and any("sigmoid" in m for m in gpsa)
    assert "mixes two terms with weights g and 1 - g" in gpsa
    assert not any("gated unit" in m for m in gpsa)  # chunk(2) without a product of the halves
    block = class_facts(code, "Block").mechanisms
    assert not any(m.startswith("attention") for m in block)
    assert {"residual connection adds the input back", "dilated (atrous) convolutions",
            "depthwise convolution (one filter per channel)"} <= set(block)
    assert class_facts(code, "SoftArgmax").mechanisms == ["soft_argmax: Expected coordinates of each heatmap under its softmax."]
    assert class_facts(code, "Loss").mechanisms == ["binary cross-entropy of probabilities or logits"]


def test_mechanisms_read_undocumented_code() -> None:
    """Code written without a docstring says what it does through the layers it stores (a softmax
    held as ``self.attend``, first in a Sequential), local names (a mask value of minus infinity),
    and patterns a textbook names: an input times its own softmax, a learned scalar temperature,
    a diagonal mask, sines and cosines, shifts by padding, a scale and shift predicted together,
    log-sigmoid of a score difference, every layer of a list mapped over one input, a per-channel
    scale started at a chosen value (not a norm's plain weight), a convolution that cuts patches."""
    from nnrag.specs.static import class_facts

    code = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "class Lsa(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.temperature = nn.Parameter(torch.log(torch.tensor(dim ** -0.5)))\n"
        "        self.attend = nn.Sequential(nn.Softmax(dim=-1), nn.Dropout(0.1))\n"
        "    def forward(self, q, k):\n"
        "        dots = torch.matmul(q, k.transpose(-1, -2)) * self.temperature.exp()\n"
        "        mask = torch.eye(dots.shape[-1], dtype=torch.bool)\n"
        "        mask_value = -torch.finfo(dots.dtype).max\n"
        "        # each token's score with itself is left out\n"
        "        return self.attend(dots.masked_fill(mask, mask_value))\n"
        "class Solu(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return self.norm(x.softmax(dim=-1) * x)\n"
        "class Sines(nn.Module):\n"
        "    def forward(self, pos):\n"
        "        emb = pos[:, None] * self.inv_freq\n"
        "        return torch.cat((emb.sin(), emb.cos()), dim=-1)\n"
        "class Shift(nn.Module):\n"
        "    def forward(self, x):\n"
        "        shifts = ((1, -1, 0, 0), (0, 0, 1, -1))\n"
        "        return torch.cat([x, *[F.pad(x, s) for s in shifts]], dim=1)\n"
        "class Film(nn.Module):\n"
        "    def forward(self, tokens, cond):\n"
        "        gamma, beta = self.to_gamma_beta(cond)\n"
        "        return tokens * gamma + beta\n"
        "class Pref(nn.Module):\n"
        "    def forward(self, chosen, rejected):\n"
        "        return -F.logsigmoid(self.beta * (chosen - rejected)).mean()\n"
        "class Multi(nn.Module):\n"
        "    def forward(self, x):\n"
        "        fmaps = tuple(map(lambda conv: conv(x), self.convs))\n"
        "        return torch.cat(fmaps, dim=1)\n"
        "class Mean(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.mean(dim=(-2, -1))\n"
        "class Pos(nn.Module):\n"
        "    def forward(self, x):\n"
        "        for i in range(2):\n"
        "            x = x + getattr(self, f'param_{i}')\n"
        "        return x + self.pos_emb[:, :x.shape[1]].to(x)\n"
        "class Res(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x + self.mlp(x)\n"
        "def attend(q, k, v):\n"
        "    return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v\n"
        "class Handed(nn.Module):\n"
        "    def forward(self, q, k, v):\n"
        "        fn = partial(attend) if self.training else attend\n"
        "        return fn(q, k, v)\n"
        "class Scale(nn.Module):\n"
        "    def __init__(self, dim, init_values=1e-5):\n"
        "        self.gamma = nn.Parameter(init_values * torch.ones(dim))\n"
        "    def forward(self, x):\n"
        "        return x.mul_(self.gamma) if self.inplace else x * self.gamma\n"
        "class Affine(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        self.weight = nn.Parameter(torch.ones(dim))\n"
        "    def forward(self, x):\n"
        "        return x * self.weight\n"
        "class Patches(nn.Module):\n"
        "    def __init__(self, patch_size, dim):\n"
        "        self.proj = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)\n"
        "        self.mix = nn.Conv2d(dim, dim, 1, 1)\n"
        "    def forward(self, x):\n"
        "        return self.mix(self.proj(x)).flatten(2)\n"
    )
    lsa = class_facts(code, "Lsa")
    assert lsa.mechanisms[0].startswith("attention: softmax")
    assert {"masks positions out before the softmax", "masks the diagonal: each position's score with itself",
            "multiplied by a learned scalar (a learnable scale or temperature)"} <= set(lsa.mechanisms)
    assert lsa.comments == ["each token's score with itself is left out"] and {"dots", "mask_value"} <= set(lsa.locals)
    assert class_facts(code, "Solu").mechanisms == ["self-gating: the input multiplied by its own softmax"]
    assert any(m.startswith("sinusoids") for m in class_facts(code, "Sines").mechanisms)
    assert any(m.startswith("shifts features") for m in class_facts(code, "Shift").mechanisms)
    assert class_facts(code, "Film").mechanisms == ["modulation: features scaled and shifted by values predicted from a condition"]
    assert any(m.startswith("pairwise logistic loss") for m in class_facts(code, "Pref").mechanisms)
    assert class_facts(code, "Multi").mechanisms == ["parallel branches combined"]
    assert class_facts(code, "Mean").mechanisms == []  # (-2, -1) names dimensions; it shifts nothing
    # a table the module keeps, added to the input, is no residual connection; the input added back is
    assert class_facts(code, "Pos").mechanisms == [
        "adds a tensor the module keeps to its input (a learned bias or a position table)"]
    assert class_facts(code, "Res").mechanisms == ["residual connection adds the input back"]
    # a function handed on (to partial, to a name) is read like one called
    assert class_facts(code, "Handed").mechanisms[0].startswith("attention: softmax")
    assert class_facts(code, "Scale").mechanisms == ["scaled by a learned per-channel vector that starts at a chosen value"]
    assert class_facts(code, "Affine").mechanisms == []
    assert class_facts(code, "Patches").mechanisms == [
        "cuts the input into non-overlapping patches: a convolution whose stride equals its kernel size"]


def test_comments_are_prose_only() -> None:
    """Comments that say something count; directives, code left commented out and a heading at the
    margin that introduces the next definition do not."""
    from nnrag.specs.static import class_facts

    code = (
        "import torch.nn as nn\n"
        "class Block(nn.Module):\n"
        "    def __init__(self):\n"
        "        '''Build the window tokens.\n\n        Args: none.'''\n"
        "        super().__init__()  # noqa: E501 type ignore here\n"
        "        # x = self.norm(x)\n"
        "        # width connection\n"
        "    def forward(self, x):  # fold in windows for attention\n"
        "        return x\n"
        "# skip connection combining\n"
        "class Next(nn.Module):\n"
        "    pass\n"
    )
    assert class_facts(code, "Block").comments == ["width connection", "fold in windows for attention",
                                                   "Build the window tokens."]


def test_the_comments_above_a_class_are_its_heading() -> None:
    """What an author wrote right above a class (over its decorators, one blank line between
    allowed) is its heading; code left commented out, directives, copy notes, licence headers and
    comments cut off by code or by two blank lines are not."""
    from nnrag.specs.static import heading, opening

    code = (
        "import torch.nn as nn\n"              # 1
        "# helpers\n"                           # 2
        "x = 1\n"                               # 3
        "# magnitude preserving concat\n"       # 4
        "# x = torch.cat(xs)\n"                 # 5
        "# equation (103) - default to 0.5\n"   # 6
        "\n"                                    # 7
        "@register(\n"                          # 8
        "    name='cat')\n"                     # 9
        "class MPCat(nn.Module):\n"             # 10
        "    pass\n"                            # 11
        "# Copied from lib.models.Other with Other->Mine\n"  # 12
        "class Mine(nn.Module):\n"              # 13
        "    pass\n"                            # 14
        "# mp activations\n"                    # 15
        "\n"                                    # 16
        "\n"                                    # 17
        "class Far(nn.Module):\n"               # 18
        "    pass\n"                            # 19
        "# attention\n"                         # 20
        "class Attention(nn.Module):\n"         # 21
        "    pass\n"                            # 22
        "# Copyright 2024 The Authors.\n"       # 23
        "# Licensed under the Apache License, Version 2.0\n"  # 24
        "class Licensed(nn.Module):\n"          # 25
        "    pass\n"                            # 26
        "# Original code is Copyright@Lab\n"    # 27
        "# SoftTriple Loss: metric learning without triplet sampling\n"  # 28
        "class Credited(nn.Module):\n"          # 29
        "    pass\n"                            # 30
    )
    assert heading(code, 10) == "magnitude preserving concat\nequation (103) - default to 0.5"
    assert opening(None, heading(code, 10)) == "Magnitude preserving concat."
    assert opening("Concatenates.\n\nMore.", heading(code, 10)) == "Concatenates."
    assert heading(code, 13) == "" and heading(code, 18) == "" and heading(code, 3) == ""
    assert heading(code, 21) == ""  # a lone word reads as a name in code, not as prose
    assert heading(code, 25) == ""  # a licence header
    assert heading(code, 29) == "SoftTriple Loss: metric learning without triplet sampling"  # a credit line
    assert opening(None, "") is None


def test_mechanisms_tell_normalisations_and_gates_apart() -> None:
    """Lookalike code gets told apart: an RMS norm from a standardisation, a norm's spatial mean
    from a pooling, a condition's chunk(2) (scale and shift) from a gated unit's halves."""
    from nnrag.specs.static import class_facts

    code = (
        "import torch\nimport torch.nn as nn\n"
        "class AdaNorm(nn.Module):\n"
        "    def forward(self, x, emb):\n"
        "        scale, shift = self.linear(emb).chunk(2, dim=1)\n"
        "        x = self.norm(x) * (1 + scale) + shift\n"
        "        return x\n"
        "class Glu(nn.Module):\n"
        "    def forward(self, x):\n"
        "        x, gate = x.chunk(2, dim=-1)\n"
        "        gate = self.act(gate)\n"
        "        return self.out(x * gate)\n"
        "class Frn(nn.Module):\n"
        "    def forward(self, x):\n"
        "        nu2 = x.pow(2).mean(dim=(2, 3), keepdim=True)\n"
        "        return torch.max(self.weight * x * torch.rsqrt(nu2 + 1e-6), self.tau)\n"
        "class Ln2d(nn.Module):\n"
        "    def forward(self, x):\n"
        "        u = x.mean((2, 3), keepdim=True)\n"
        "        return (x - u) / torch.sqrt((x - u).pow(2).mean((2, 3), keepdim=True) + 1e-6)\n"
        "class Head(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return self.fc(x.mean((2, 3)))\n"
    )
    ada, glu = class_facts(code, "AdaNorm").mechanisms, class_facts(code, "Glu").mechanisms
    assert any(m.startswith("modulation") for m in ada) and not any("gated unit" in m for m in ada)
    assert any("gated unit" in m for m in glu)
    frn, ln = class_facts(code, "Frn").mechanisms, class_facts(code, "Ln2d").mechanisms
    assert [m.split(":")[0] for m in frn] == ["RMS normalisation"]
    assert [m.split(":")[0] for m in ln] == ["standardises features"]
    assert class_facts(code, "Head").mechanisms == ["global average pooling of each channel"]


def test_tuning_pairs_describe_a_block_without_its_name_or_boilerplate(lib: dict[str, object]) -> None:
    """A pair is what a docstring says a block does, its own name and argument sections taken
    out, against the block's text view without the docstring; sentences that many docstrings
    share with other names are templates, not descriptions."""
    import dataclasses

    from nnrag.db import connect
    from nnrag.retrieval.tuning import training_pairs
    from nnrag.specs import cache
    from nnrag.workspace import Workspace

    with connect(Workspace.resolve(lib["home"])) as store:  # type: ignore[arg-type]
        bundles = list(cache.bundles(store))
    blur = next(b for b in bundles if b.spec.name == "BlurDownsample")
    copies = [dataclasses.replace(blur, spec=blur.spec.model_copy(update={"id": f"t:m.Stack{i}", "name": f"Stack{i}"}),
                                  docstring=f"Transformer encoder consisting of Layer{i} layers. Each stacks "
                                            f"{'one two three four'.split()[i]} plain sublayers in a row.\n\n"
                                            "Args:\n    dim: the width of every layer in it.")
              for i in range(4)]
    pairs = {p.block_id: p for p in training_pairs(bundles + copies)}
    anchor = pairs[blur.spec.id].anchor
    assert anchor.startswith("Anti-aliased downsampling:") and "blur" not in anchor.lower().split()
    positive = pairs[blur.spec.id].positive
    assert "binomial" not in positive and positive.startswith("blur downsample")
    # a class without a docstring is described by its README note
    assert "hourglass" in next(p.anchor for p in pairs.values() if p.block_id.endswith(".ConvNormAct"))
    stacks = [pairs[c.spec.id].anchor for c in copies if c.spec.id in pairs]
    # the shared first sentence and the argument section are gone; what differs stays
    assert stacks and all(a.startswith("Each stacks") and "encoder" not in a and "width" not in a for a in stacks)


def test_a_library_that_grew_since_its_tune_is_advised_to_tune_again() -> None:
    from nnrag.retrieval.index import SyncReport

    assert SyncReport(blocks=1_200, tuned_blocks=1_000).retune_advised  # a fifth more
    assert not SyncReport(blocks=1_090, tuned_blocks=1_000).retune_advised  # less than a tenth
    assert not SyncReport(blocks=90, tuned_blocks=10).retune_advised  # fewer than a hundred new ones
    assert SyncReport(blocks=16_000, tuned_blocks=14_400).retune_advised
    assert not SyncReport(blocks=16_000).retune_advised  # never tuned


def test_tune_adapts_the_embedder_to_the_library_and_search_uses_it(lib: dict[str, object], tmp_path: Path) -> None:
    import shutil

    import numpy as np

    from nnrag.retrieval.embedders import DEFAULT_MODEL, NumpyEmbedder, SentenceTransformerEmbedder
    import chromadb
    from chromadb.config import Settings

    from nnrag.db import connect
    from nnrag.retrieval.index import SearchIndex
    from nnrag.retrieval.vectors import collection_name
    from nnrag.workspace import Workspace

    home = tmp_path / "home"
    shutil.copytree(lib["home"], home)  # type: ignore[arg-type]
    index = nnrag.search_index(home=home)  # as a running server holds it
    assert index.embedder.name == DEFAULT_MODEL
    report = json.loads(run_cli("tune", "--home", str(home), "--json").stdout)
    model = Path(report["model"])
    assert model.parent == home / "models" and model.is_dir() and report["pairs"] >= 4 and report["steps"] >= 1

    assert nnrag.search_index(home=home) is index and not index.stale()  # tune re-embedded the library
    assert index.embedder.name == str(model) and isinstance(index.embedder, NumpyEmbedder)  # and it switched
    texts = ["blur then subsample by two", "gate every channel with a sigmoid"]
    tuned = np.array(index.embedder.embed(texts))
    reference = np.array(SentenceTransformerEmbedder(str(model)).embed(texts))
    assert (tuned * reference).sum(1).min() >= 0.9999  # queries on numpy, the library on sentence-transformers
    base = np.array(nnrag.search_index(home=lib["home"]).embedder.embed(texts))  # type: ignore[arg-type]
    assert (tuned * base).sum(1).max() < 0.99999  # the weights moved
    hits = nnrag.search("find anti-aliased downsampling", 3, home=home, method="dense")
    assert hits[0].name == "BlurDownsample", [h.name for h in hits]
    synced = index.sync()  # the home remembers the library it was tuned on: no new blocks, no advice
    assert synced.tuned_blocks == synced.blocks > 0 and not synced.to_dict()["retune_advised"]
    moved = tmp_path / "moved"  # a home moved or copied keeps the tuned model's vectors
    shutil.copytree(home, moved)
    with connect(Workspace.resolve(moved)) as store:  # its next sync reads every block again
        store.conn.execute("DELETE FROM search_state WHERE name='made_with'")
        store.conn.commit()
    again = nnrag.sync_search(home=moved)
    assert again.blocks == synced.blocks and again.embedded == 0 and again.upserted == 0

    same = json.loads(run_cli("tune", "--home", str(home), "--json").stdout)  # same library: nothing to train
    assert same["model"] == str(model) and same["steps"] == 0 and same["first_loss"] is None

    reset = run_cli("tune", "--reset", "--home", str(home), "--json")
    assert json.loads(reset.stdout) == {"reset": True} and not list((home / "models").iterdir())
    with connect(Workspace.resolve(home)) as store:  # its vectors went with it
        assert store.conn.execute("SELECT count(*) FROM embeddings WHERE model=?", (model.name,)).fetchone()[0] == 0
        assert store.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] > 0
    client = chromadb.PersistentClient(str(home / "chroma"), settings=Settings(anonymized_telemetry=False, allow_reset=False))
    assert collection_name(str(model)) not in {c.name for c in client.list_collections()}
    assert SearchIndex(Workspace.resolve(home)).embedder.name == DEFAULT_MODEL
    assert nnrag.search("find anti-aliased downsampling", 3, home=home)[0].name == "BlurDownsample"
    assert index.embedder.name == DEFAULT_MODEL and not index.stale()  # the kept index switched back
    from nnrag.retrieval import embedders

    assert str(model) not in embedders._LOADED  # and let the replaced model go

    (home / "config.toml").write_text('[search]\nembedder = "some/model"\n')
    named = run_cli("tune", "--home", str(home), check=False)
    assert named.returncode != 0 and "unset it first" in named.stderr and "Traceback" not in named.stderr
