"""LEMUR (nn-dataset) commands: lemur register, lemur list."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

import nnrag
from .common import (
    app,
    HomeOpt,
    JsonOpt,
    LemurRootOpt,
    PrefixOpt,
    VerboseOpt,
    err,
    errors,
    out,
    print_json,
    progress_bar,
    setup_logging,
)



lemur_app = typer.Typer(help="LEMUR (nn-dataset): register blocks as models trained and scored by LEMUR.", no_args_is_help=True)
app.add_typer(lemur_app, name="lemur")


@lemur_app.command("register")
def lemur_register(
    names: Annotated[Optional[list[str]], typer.Argument(help="Blocks (Name, module.Name or source:id).")] = None,
    source: Annotated[Optional[str], typer.Option("--source", "-s", help="The source of the named blocks, where a name is in several.")] = None,
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
    each with LEMUR's check_nn in the gate's sandbox. Resumable: recorded outcomes are skipped."""
    setup_logging(verbose)
    with errors(), progress_bar(True) as progress:
        setup, results = nnrag.lemur_register(
            names or [], everything=everything, category=category, dataset=dataset, epochs=epochs, prefix=prefix,
            lemur_root=lemur_root, limit=limit, synthesized=synthesized, retry=retry, offline=offline, timeout_s=timeout,
            source=source, home=home, progress=progress)
    summary = nnrag.lemur_summary(results)
    if as_json:
        print_json({"lemur_root": str(setup.root), "database": str(setup.db), "bootstrapped": setup.bootstrapped,
                     "bootstrap_reason": setup.reason, "counts": summary["counts"], "results": [r.to_dict() for r in results]})
        return
    if setup.bootstrapped and setup.reason is None:  # --offline: the download was not tried
        err.print(f"LEMUR had no database: created an empty one at {setup.db}", style="dim", highlight=False)
    elif setup.bootstrapped:
        err.print(f"LEMUR's database could not be downloaded ({setup.reason}); created an empty one at {setup.db}",
                  style="yellow", highlight=False)
    table = Table(title=f"LEMUR registration on {dataset} ({setup.root})", title_justify="left")
    for col in ("block", "status", "LEMUR name", "accuracy", "quality", "s", "reason"):
        table.add_column(col, justify="right" if col in ("accuracy", "quality", "s") else "left")
    for r in results:
        table.add_row(r.block_id, r.status + (" (earlier run)" if r.skipped else ""), r.lemur_name or "",
                      "" if r.accuracy is None else f"{r.accuracy:.3f}", "" if r.quality is None else f"{r.quality:.2f}",
                      f"{r.seconds:.1f}", (r.reason or "")[:90])
    out.print(table)
    median = summary["median_s"]
    out.print(", ".join(f"{n} {status}" for status, n in sorted(summary["counts"].items()))
              + (f"; median {median:.1f} s per trained model" if median is not None else ""))


@lemur_app.command("list")
def lemur_list(
    prefix: PrefixOpt = "nnrag",
    lemur_root: LemurRootOpt = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The models nnrag registered, as LEMUR's own ab.nn.api.data() reports them."""
    with errors():
        rows = nnrag.lemur_list(prefix=prefix, lemur_root=lemur_root, home=home)
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"LEMUR models with prefix {prefix!r}", title_justify="left")
    for col in ("LEMUR name", "block", "dataset", "epoch", "accuracy"):
        table.add_column(col, justify="right" if col in ("epoch", "accuracy") else "left")
    for r in rows:
        table.add_row(str(r["nn"]), str(r.get("block_id") or ""), str(r["dataset"]), str(r["epoch"]),
                      f"{r['accuracy']:.3f}" if r.get("accuracy") is not None else "")
    out.print(table)
    if not rows:
        out.print("none yet: `nnrag lemur register` adds them", style="dim")


