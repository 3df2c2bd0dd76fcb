"""Commands that use an LLM or serve the tools: agent, synthesize, mcp."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

import nnrag
from .common import (
    app,
    BaseUrlOpt,
    HomeOpt,
    JsonOpt,
    MemoryOpt,
    ModelOpt,
    TimeoutOpt,
    VerboseOpt,
    WeakSandboxOpt,
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
def agent(
    question: Annotated[str, typer.Argument(help="What you want, in words.")],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Model calls allowed before giving up.")] = 12,
    allow_weak: WeakSandboxOpt = False,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Ask the agent: it searches the library, reads specs and validates code with the block tools."""
    setup_logging(verbose)

    def show(step: Any) -> None:
        if step.kind == "tool_call":
            err.print(styled((f"→ {step.name}", "cyan"), f" {step.content}"), highlight=False)
        elif step.kind == "tool_result":
            err.print(f"← {step.name}: {step.content[:200]}", style="dim", highlight=False)

    with errors():
        result = nnrag.ask(question, model=model, base_url=base_url, max_steps=max_steps, home=home,
                           on_step=None if as_json else show, allow_weak_sandbox=allow_weak)
    if as_json:
        print_json(result.to_dict())
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
    allow_weak: WeakSandboxOpt = False,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Have the LLM implement blocks from their neutral specs; every answer goes through the gate."""
    setup_logging(verbose)
    if (target is None) == (not all_blocks):
        fail("give a block name or spec file, or --all", 2)
    limits = nnrag.limits(timeout, memory_mb)
    with errors():
        if target is not None:
            show = None if as_json else (lambda a: err.print(
                styled(f"attempt {a.number}: ", ("passes and conforms", "green")) if a.conformant else
                styled(f"attempt {a.number}: ", (f"{a.code or 'non-conformant'} at {a.stage}", "yellow"), f" {a.message[:160]}"),
                highlight=False))
            result = nnrag.synthesize(target, attempts=attempts, model=model, base_url=base_url, limits=limits, home=home,
                                      on_attempt=show, allow_weak_sandbox=allow_weak)
            if output is not None and result.ok:
                output.write_text(result.code, encoding="utf-8")
            if as_json:
                print_json(result.to_dict())
            else:
                verdict = ("passed", "green") if result.ok else ("failed", "red")
                out.print(styled(f"{result.spec_id}: ", verdict, f" after {len(result.attempts)} attempt(s); parameters "
                                 f"{result.params} (original {result.original_params}); transcript {result.transcript}"))
            if not result.ok:
                raise typer.Exit(1)
            return
        with progress_bar(not as_json) as progress:
            summary = nnrag.synthesize_all(attempts=attempts, category=category, limit=limit, model=model,
                                           base_url=base_url, limits=limits, home=home, progress=progress,
                                           allow_weak_sandbox=allow_weak)
    if as_json:
        print_json(summary)
    else:
        out.print(f"{summary['tried']} blocks: pass@1 {summary['pass@1']:.1%}, pass@{attempts} "
                  f"{summary['pass@attempts']:.1%}; {summary['skipped']} already done")
        for code, n in summary["failures"].items():  # type: ignore[union-attr]
            out.print(f"  {code}: {n}")


@app.command()
def mcp(allow_weak: WeakSandboxOpt = False, home: HomeOpt = None) -> None:
    """Serve the block tools over stdio to coding agents (Model Context Protocol)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)  # stdout carries the protocol
    from nnrag.tools.mcp_server import serve

    serve(home, allow_weak)
