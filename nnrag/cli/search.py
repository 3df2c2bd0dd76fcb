"""Commands over specs and search: spec, search, tune, evals retrieval."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

import nnrag
from .common import (
    app,
    ChromaUrlOpt,
    EmbedderOpt,
    HomeOpt,
    JsonOpt,
    VerboseOpt,
    err,
    errors,
    fail,
    out,
    print_json,
    progress_bar,
    setup_logging,
    styled,
)


@app.command()
def spec(
    name: Annotated[Optional[str], typer.Argument(help="Block name, module.Name or id (source:module.Name).")] = None,
    source: Annotated[Optional[str], typer.Option("--source", "-s", help="Source of the block.")] = None,
    as_json: JsonOpt = False,
    as_md: Annotated[bool, typer.Option("--md", help="Print Markdown (the default for a terminal).")] = False,
    schema: Annotated[bool, typer.Option("--schema", help="Print the JSON Schema of block specs instead.")] = False,
    home: HomeOpt = None,
) -> None:
    """The neutral specification of a block: signature, shapes, structure, provenance; no code."""
    setup_logging(False)
    if schema:
        print_json(nnrag.spec_schema())
        return
    if not name:
        fail("give a block name, or --schema", 2)
    with errors():
        block_spec = nnrag.spec(name, source=source, home=home)
    if as_json and not as_md:
        sys.stdout.write(block_spec.to_json() + "\n")
    else:
        from rich.markdown import Markdown

        text = block_spec.to_markdown()
        if as_md or not out.is_terminal:
            sys.stdout.write(text)
        else:
            out.print(Markdown(text))


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What you are looking for, in words.")],
    k: Annotated[int, typer.Option("-k", "--top", help="How many results.")] = 10,
    source: Annotated[Optional[str], typer.Option("--source", "-s", help="Only blocks of this source.")] = None,
    category: Annotated[Optional[str], typer.Option("--category", "-c", help="Only blocks of this category.")] = None,
    validated: Annotated[bool, typer.Option("--validated/--all", help="Only blocks that pass the gate (default), or all.")] = True,
    method: Annotated[str, typer.Option("--method", help="hybrid, lexical (no model load) or dense.")] = "hybrid",
    embedder: EmbedderOpt = None,
    chroma_url: ChromaUrlOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Natural-language search over the block library (BM25 and embeddings, fused)."""
    setup_logging(verbose)
    if method not in ("hybrid", "lexical", "dense"):
        fail(f"--method must be hybrid, lexical or dense, not {method!r}", 2)
    with errors():
        index = nnrag.search_index(home=home, embedder=embedder, chroma_url=chroma_url)
        if index.stale():
            err.print("the library changed since the search index was built: updating it", style="dim")
            with progress_bar(True) as progress:
                index.sync(progress)
        hits = index.search(query, k, source=source, category=category, validated=True if validated else None,
                            method=method)  # type: ignore[arg-type]
        # what the filter hid: blocks that fail the gate among the top k of all
        hidden = [h for h in index.search(query, k, source=source, category=category, validated=None,
                                          method=method) if h.status == "failed"] if validated and not as_json else []  # type: ignore[arg-type]
    if as_json:
        print_json([h.to_dict() for h in hits])
        return
    more = (f"{len(hidden)} more {'match fails' if len(hidden) == 1 else 'matches fail'} the gate "
            f"({', '.join(h.name for h in hidden[:3])}{', ...' if len(hidden) > 3 else ''}): --all shows "
            f"{'it' if len(hidden) == 1 else 'them'}") if hidden else ""
    if not hits:
        out.print("no matching blocks" + ("" if not validated else f" among validated ones; {more or 'try --all'}"))
        return
    table = Table(title=f"Search: {query}", title_justify="left")
    for col in ("#", "name", "source", "path", "score", "summary", "ok"):
        # a narrow terminal wraps the summary, never a path or a name mid-word (``focalnet.py:2`` / ``96``)
        table.add_column(col, justify="right" if col in ("#", "score") else "left",
                         overflow="fold", ratio=1 if col == "summary" else None,
                         min_width=len(col) if col == "summary" else None, no_wrap=col != "summary")
    for h in hits:
        summary = styled(h.summary, (_grouped("copies in", h.also_in) + _grouped(f"other {h.name}", h.same_name), "dim"))
        table.add_row(str(h.rank), h.name, h.source, f"{h.path}:{h.line}", f"{h.score:.3f}", summary,
                      styled(("✓", "green")) if h.validated else styled(("✗", "red")) if h.status == "failed" else "·")
    out.print(table)
    if more:
        out.print(more, style="dim")


def _grouped(label: str, ids: list[str], shown: int = 3) -> str:
    """`` (label: a, b, c +2)`` for the blocks a row stands for; nothing when there are none."""
    if not ids:
        return ""
    more = f" +{len(ids) - shown}" if len(ids) > shown else ""
    return f" ({label}: {', '.join(ids[:shown])}{more})"


@app.command()
def tune(
    undo: Annotated[bool, typer.Option("--reset", help="Go back to the untuned model.")] = False,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Fine-tune the search's embedder on this library's own descriptions, then re-embed the library."""
    setup_logging(verbose)
    with errors(), progress_bar(True) as progress:
        if undo:
            gone = nnrag.untune_search(home=home, progress=progress)
            result: dict[str, object] = {"reset": gone}
        else:
            result = nnrag.tune_search(home=home, progress=progress).to_dict()
    if as_json:
        print_json(result)
    elif undo:
        out.print("searches use the untuned model again" if result["reset"] else "this home was not tuned")
    elif not result["steps"]:
        out.print(f"already tuned to these {result['pairs']} descriptions; model: {result['model']}")
    else:
        out.print(f"tuned on {result['pairs']} descriptions in {result['steps']} steps, {result['seconds']} s "
                  f"(loss {result['first_loss']} -> {result['last_loss']}); model: {result['model']}")


evals_app = typer.Typer(help="Evaluations: retrieval quality and speed.", no_args_is_help=True)
app.add_typer(evals_app, name="evals")


@evals_app.command("retrieval")
def evals_retrieval(
    queries: Annotated[Optional[Path], typer.Option("--queries", help="JSONL of {\"query\": str, \"gold\": [regex, ...]} (default: the shipped set).")] = None,
    validated: Annotated[bool, typer.Option("--validated/--all", help="Search only validated blocks, or all (default).")] = False,
    split: Annotated[Optional[str], typer.Option("--split", help="Only the queries of this split (their \"split\" field: dev, test).")] = None,
    embedder: EmbedderOpt = None,
    chroma_url: ChromaUrlOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Recall@1/5/10, MRR@10 and nDCG@10 of lexical, dense and hybrid search, with latency."""
    from nnrag.evals.retrieval import SHIPPED_QUERIES, evaluate, load_queries

    setup_logging(verbose)
    with errors():
        index = nnrag.search_index(home=home, embedder=embedder, chroma_url=chroma_url)
        chosen = [q for q in load_queries(queries or SHIPPED_QUERIES) if split is None or q.split == split]
        if not chosen:
            fail(f"no query has split {split!r}", 2)
        with progress_bar(True) as progress:
            rep = evaluate(index, chosen, validated=True if validated else None, progress=progress)
    if as_json:
        print_json(rep.to_dict())
        return
    table = Table(title=f"Retrieval: {rep.evaluated} of {rep.queries} queries in the corpus ({rep.blocks:,} blocks)",
                  title_justify="left")
    for col in ("method", "R@1", "R@5", "R@10", "MRR@10", "nDCG@10", "p50 ms", "p95 ms"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for m, r in rep.methods.items():
        table.add_row(m, *(f"{v:.3f}" for v in (r.recall_at_1, r.recall_at_5, r.recall_at_10, r.mrr_at_10, r.ndcg_at_10)),
                      f"{r.latency_p50_ms:.1f}", f"{r.latency_p95_ms:.1f}")
    out.print(table)
    for q in rep.not_in_corpus:
        out.print(f"not in the corpus: {q}", style="dim")
    for m, r in rep.methods.items():
        for miss in r.misses:
            out.print(styled((f"{m} miss:", "yellow"), f" {miss['query']} ",
                             (f"(gold {', '.join(miss['gold'])}; top {', '.join(miss['top'][:3])})", "dim")))
    out.print(f"index brought up to date in {rep.index_seconds:.1f} s", style="dim")


