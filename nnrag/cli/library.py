"""Commands over the index and the library: index, blocks, stats, sources, forget, extract, validate, build, report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

import nnrag
from .common import (
    app,
    CorpusOpt,
    HomeOpt,
    JsonOpt,
    MemoryOpt,
    PreferOpt,
    RequirementsOpt,
    SourcesArg,
    TimeoutOpt,
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
    setup_logging(verbose)
    with errors(), progress_bar(True) as progress:
        report = nnrag.index(
            sources or [], corpus=corpus, home=home, workers=workers, progress=progress, refresh_all=refresh_all
        )
    if as_json:
        print_json(report.to_dict())
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
                out.print(f"{s.name}: {s.note}", style="dim")
        if report.failures:
            out.print("Files not parsed, by reason: " + ", ".join(f"{k} {v}" for k, v in report.failures.items()))
        out.print(
            f"{report.files:,} files, {report.lines:,} lines, {report.blocks:,} blocks "
            f"in {report.seconds:.2f} s ({report.workers} workers)"
        )
    for name, message in report.errors.items():
        err.print(styled(("error:", "bold red"), f" source {name} was not indexed: {message}"), highlight=False)
    if report.interrupted:
        err.print(styled(("interrupted:", "yellow"), " committed work is kept; run the same command again to resume"))
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
    setup_logging(False)
    with errors():
        found = nnrag.blocks(pattern, source=source, category=category, home=home)
    if as_json:
        print_json([b.to_dict() for b in found])
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
    out.print(f"{len(found)} blocks", style="dim")


@app.command()
def stats(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Counts per source and category, and file failures by reason."""
    setup_logging(False)
    with errors():
        s = nnrag.stats(home=home)
    if as_json:
        print_json(s.to_dict())
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
        + (f"; {s.template_copies} classes of template files left out (a generated file defines them)"
           if s.template_copies else "")
    )


@app.command("sources")
def sources_cmd(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """List the sources in the index."""
    setup_logging(False)
    with errors():
        found = nnrag.sources(home=home)
    if as_json:
        print_json([s.__dict__ for s in found])
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
    setup_logging(False)
    with errors():
        nnrag.forget(name, home=home)
    out.print(f"forgot {name}")


@app.command()
def extract(
    name: Annotated[str, typer.Argument(help="Block: Name, module.Name, or source:module.Name.")],
    source: Annotated[Optional[str], typer.Option("--source", help="Source to take the block from.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the file here (default: stdout).")] = None,
    prefer: PreferOpt = "installed",
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one block as a standalone Python file."""
    setup_logging(False)
    with errors():
        result = nnrag.extract(name, source=source, prefer=prefer, home=home)
    if as_json:
        data = result.to_dict()
        if output is not None and result.ok:
            output.write_text(result.code, encoding="utf-8")
            data["output"] = str(output)
        print_json(data)
    elif not result.ok:
        for issue in result.issues:
            err.print(styled(("error:", "bold red"), f" {issue} ", (f"({issue.code})", "dim")), highlight=False)
    elif output is not None:
        output.write_text(result.code, encoding="utf-8")
        err.print(f"wrote {output} ({result.class_name}; requires {', '.join(result.requirements) or 'nothing'})", highlight=False)
    else:
        sys.stdout.write(result.code)
    if result.ok and not as_json:
        if result.imports:
            err.print(f"note: imports {result.imports}", highlight=False, markup=False)
        for free in result.free:  # left as the original has them
            err.print(styled(("warning:", "bold yellow"), f" {free.path}:{free.line}: {free.name} is bound nowhere; "
                             "the code using it raises NameError if it runs"), highlight=False)
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def vendor(
    names: Annotated[list[str], typer.Argument(help="Blocks: Name, module.Name, or source:module.Name.")],
    into: Annotated[Path, typer.Option("--into", help="Package folder to write (or, with --package, the folder holding it).")],
    package: Annotated[Optional[str], typer.Option("--package", help="Dotted package name under --into (default: --into is the package).")] = None,
    source: Annotated[Optional[str], typer.Option("--source", help="Source to take the blocks from.")] = None,
    prefer: PreferOpt = "installed",
    check: Annotated[bool, typer.Option("--check/--no-check", help="Run each vendored block through the gate.")] = True,
    timeout: TimeoutOpt = None,
    memory_mb: MemoryOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write blocks into a package of your project, shared definitions once, with NOTICE and requirements."""
    setup_logging(False)
    with errors(), progress_bar(True) as progress:
        report = nnrag.vendor(names, into, package=package, source=source, prefer=prefer, check=check,
                              limits=nnrag.limits(timeout, memory_mb), home=home, progress=progress)
    if as_json:
        print_json(report.to_dict())
    else:
        table = Table(title=f"Vendored into {report.folder}", title_justify="left")
        for col in ("block", "module", "class", "gate"):
            table.add_column(col)
        for b in report.blocks:
            verdict = "not checked" if b.ok is None else (styled(("pass", "green")) if b.ok else styled((str(b.code), "red")))
            table.add_row(b.block_id, b.module, b.class_name, verdict)
        out.print(table)
        optional = f"; optional: {', '.join(report.optional)}" if report.optional else ""
        shared = f"{report.shared} shared statements in _shared.py" if report.shared else "nothing shared"
        out.print(f"{shared}; requires {', '.join(report.requirements) or 'nothing'}{optional}", highlight=False)
        for s in report.skipped:
            err.print(styled(("skipped", "yellow"), f" {s['name']}: {s['reason']}"), highlight=False)
        for b in report.blocks:
            if b.ok is False:
                err.print(styled((b.block_id, "red"), f" {b.code}: {b.message or ''}"), highlight=False)
    if report.skipped or any(b.ok is False for b in report.blocks):
        raise typer.Exit(1)


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="Python file to check.")],
    class_name: Annotated[Optional[str], typer.Option("--class", help="Class to check (default: the header's, else the last nn.Module).")] = None,
    timeout: TimeoutOpt = None,
    memory_mb: MemoryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the validator gate on a file; exit code 0 only if it passes."""
    setup_logging(False)
    if not file.is_file():
        fail(f"{file}: {'a folder, not a file' if file.is_dir() else 'no such file'}")
    with errors():
        rec = nnrag.validate(file, class_name=class_name, limits=nnrag.limits(timeout, memory_mb))
    if as_json:
        print_json(rec.to_dict())
    else:
        mark = styled(("pass", "green")) if rec.ok else styled(("fail", "red"), " ", (str(rec.code), "bold"), f" at stage {rec.stage}")
        out.print(styled(f"{file}: ", mark), highlight=False)
        if rec.ok:
            out.print(f"  {rec.class_name}({', '.join(f'{k}={v}' for k, v in rec.init_args.items())})", highlight=False)
            out.print(f"  input {rec.input_shapes} -> output {rec.output_shapes}; {rec.params:,} parameters; backward: {rec.backward}", highlight=False)
        else:
            out.print(f"  {rec.message}", highlight=False)
        costs = f"{rec.seconds:.2f} s" + (f", peak +{rec.peak_mb:g} MB" if rec.peak_mb is not None else "")
        out.print(f"  {costs}", style="dim", highlight=False)
        if rec.isolation:
            out.print("  isolation: " + "; ".join(f"{k} {v}" for k, v in rec.isolation.items()), style="dim",
                      highlight=False)
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
        if report.extracted < report.tried:  # nothing their files depend on changed
            line += f", {report.tried - report.extracted:,} of them without extracting"
    if report.tried or not report.not_validated:
        out.print(line)
    if report.not_validated:
        out.print(f"{report.not_validated:,} blocks extracted and not validated yet: `nnrag build` validates them")
    timing = []
    if report.extract_median_s is not None:
        timing.append(f"extraction median {report.extract_median_s * 1000:.1f} ms/block")
    if report.validate_per_s:
        timing.append(f"validation {report.validate_per_s:.1f} blocks/s")
    if report.cluster:
        served = report.cluster.get("served") or {}
        timing.append(f"validated on {len(served)} Dask worker(s) of {report.cluster['scheduler']}")
    if report.requirements.get("needs_install"):
        waits = report.requirements["needs_install"]
        timing.append(f"{sum(waits.values())} blocks wait for a distribution not installed here "
                      f"({', '.join(f'{d} {n}' for d, n in list(waits.items())[:5])}; --requirements install)")
    elif report.requirements.get("blocks"):
        r = report.requirements
        timing.append(f"{r['rescued']} of {r['blocks']} blocks pass in {r['environments']} requirement environment(s)")
        for spelt, declared in (r.get("declared_instead") or {}).items():
            timing.append(f"pip cannot install {spelt}; installed {declared} instead, as the source declares it")
    for lending in report.requirements.get("lent") or []:
        if lending.get("repository"):
            timing.append(f"{lending['distribution']} lent from {lending['repository']}, which its source names "
                          f"(no index has it: {lending['reason']})")
        elif lending.get("version"):
            timing.append(f"{lending['distribution']} lent from its sdist {lending['version']} (pip: {lending['reason']}; "
                          f"it provides {lending['covers']} of the names the corpus imports)")
        else:
            timing.append(f"{lending['distribution']} missing for {lending['blocks']} blocks: {lending['why_not']}")
    if report.harvest.get("retried"):
        h = report.harvest
        timing.append(f"{h['rescued']} of {h['retried']} failed blocks pass with usage recorded from "
                      f"{h['factories']} model factories, {h['examples']} documented examples, {h.get('configs', 0)} registry configs "
                      f"and {h.get('passed', 0)} passing blocks that build them ({h['seconds']:.0f} s)")
        if h.get("not_run"):
            timing.append(f"the usage harvest did not reach {h['not_run']} factories ({h['why_not_run']})")
        if h.get("usage_waits_for"):
            waits = h["usage_waits_for"]
            timing.append(f"{h['usage_waiting']} failed blocks wait for a usage harvest that stops at a distribution "
                          f"not installed here ({', '.join(f'{d} {n}' for d, n in list(waits.items())[:5])}; "
                          f"--requirements install)")
        for src in h.get("widening_undone") or []:
            timing.append(f"{src}'s usage harvest ran fewer units with what it stopped at installed; "
                          f"its blocks were judged without")
        for src, dists in (h.get("left_out") or {}).items():
            timing.append(f"{src}'s usage harvest ran without {', '.join(sorted(dists))}, which pip cannot install "
                          f"({next(iter(dists.values()))})")
    if report.seconds:
        timing.append(f"extracting and validating {report.seconds:.1f} s")
    if report.search:
        sr = report.search
        rate = f" at {sr['embed_per_s']:.1f} texts/s" if sr.get("embed_per_s") else ""
        timing.append(f"search index: {sr['specs_built']} specs built, {sr['embedded']} texts embedded{rate} "
                      f"({sr['seconds']:.0f} s)")
    if report.wall_seconds:  # a build's (the stored library's report has none)
        timing.append(f"total {report.wall_seconds:.1f} s")
    if timing:
        out.print("; ".join(timing), style="dim")
    if report.search and report.search.get("retune_advised"):
        sr = report.search
        out.print(f"{sr['blocks'] - sr['tuned_blocks']} blocks came in since the search's embedder was tuned "
                  f"on {sr['tuned_blocks']}: `nnrag tune` teaches it their descriptions")


@app.command()
def build(
    sources: SourcesArg = None,
    corpus: CorpusOpt = None,
    names: Annotated[Optional[Path], typer.Option("--names", help="Only these class names (JSON list, or one per line).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="At most this many blocks.")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", help="Parallel workers: extracting processes and validators (default: CPU count, at most 4 extracting and 2 validating).")] = None,
    timeout: TimeoutOpt = None,
    memory_mb: MemoryOpt = None,
    harvest: Annotated[bool, typer.Option("--harvest/--no-harvest", help="Retry failed blocks with arguments recorded from the source's own model factories and docstring examples.")] = True,
    search_index: Annotated[bool, typer.Option("--search-index/--no-search-index", help="Then update specs and the search index (embeds changed blocks).")] = True,
    validate: Annotated[bool, typer.Option("--validate/--no-validate", help="Validate the extracted blocks; without, they are stored and searchable at once, marked not validated, and the next build validates them.")] = True,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Validate on the workers of this Dask scheduler (tcp://HOST:PORT; else NNRAG_SCHEDULER or [build] in config.toml).")] = None,
    prefer: PreferOpt = "installed",
    requirements: RequirementsOpt = "off",
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Index, discover, extract and validate every block; store the library. Resumable."""
    setup_logging(verbose)
    with errors(), progress_bar(True) as progress:
        wanted = nnrag.read_names(names) if names is not None else None
        report = nnrag.build(
            sources or [], corpus=corpus, names=wanted, limit=limit, home=home, workers=workers,
            limits=nnrag.limits(timeout, memory_mb), progress=progress, harvest=harvest, search=search_index,
            scheduler=scheduler, prefer=prefer, requirements=requirements, validate=validate,
        )
    if as_json:
        print_json(report.to_dict())
    else:
        _print_build(report, "Build")
    if report.interrupted:
        err.print(styled(("interrupted:", "yellow"), " extracted blocks and stored verdicts are kept; run the same command again to resume"))
        raise typer.Exit(130)


@app.command()
def report(
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write an HTML report with charts.")] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pass rate, failures by code and per-source figures of the block library."""
    setup_logging(False)
    with errors():
        rep = nnrag.report(home=home)
    if html is not None:
        from nnrag.evals.report import write_html

        write_html(rep, html)
    if as_json:
        print_json(rep.to_dict())
    else:
        _print_build(rep, "Block library")
        if html is not None:
            out.print(f"wrote {html}")


