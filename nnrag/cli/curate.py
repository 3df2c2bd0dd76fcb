"""Commands that curate the library into datasets: ``dedup`` and ``export``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

import nnrag

from .common import HomeOpt, JsonOpt, app, errors, fail, out, print_json, progress_bar, setup_logging, styled


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{what} takes comma-separated numbers, not {text!r}", 2)


@app.command()
def dedup(
    against: Annotated[Optional[Path], typer.Option("--against", help="Also compare with a folder of .py model files.")] = None,
    against_lemur: Annotated[Optional[Path], typer.Option(
        "--against-lemur", help="Also compare with LEMUR's models: an nn-dataset wheel (.whl) or folder.")] = None,
    near: Annotated[float, typer.Option("--near", help="Jaccard of shingles that confirms a near copy.")] = 0.90,
    candidates: Annotated[float, typer.Option("--candidates", help="MinHash-LSH threshold of near candidates.")] = 0.85,
    structural: Annotated[float, typer.Option("--structural", help="Jaccard of structural features for a structural copy.")] = 0.90,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write an HTML page of cluster sizes and overlaps.")] = None,
    top: Annotated[int, typer.Option("--top", help="Largest clusters shown per level.")] = 5,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Find copies among the library's blocks (raw, exact, near, structural) and store the clusters."""
    setup_logging(False)
    with errors(), progress_bar(not as_json) as progress:
        report = nnrag.dedup(home=home, against=against, against_lemur=against_lemur, candidates=candidates,
                             near=near, structural=structural, progress=progress)
    if html is not None:
        from nnrag.evals.report import write_dedup_html

        write_dedup_html(report, html)
    if as_json:
        print_json(report.to_dict())
        return
    table = Table(title=f"Copies among {report.items:,} blocks", title_justify="left")
    for column in ("level", "clusters", "blocks in clusters", "removed", "kept"):
        table.add_column(column, justify="left" if column == "level" else "right")
    for c in report.levels:
        table.add_row(c.level, f"{c.clusters:,}", f"{c.in_clusters:,}", f"{c.removed:,}", f"{c.kept:,}")
    out.print(table)
    for level in ("exact", "near", "structural"):
        for c in report.clusters[level][:top]:
            out.print(styled(f"  {level:<10} {len(c.members):>3}  {c.canonical}  ",
                             (f"{', '.join(c.members[1:4])}{' ...' if len(c.members) > 4 else ''}", "dim")), highlight=False)
    for u in report.against:
        ratios = ", ".join(f"{lv} {u.unique[lv]:,} ({u.ratio(lv):.1%})" for lv in u.unique if u.blocks)
        out.print(f"unique against {u.corpus} ({u.files:,} files), of {u.blocks:,} validated blocks: {ratios}",
                  highlight=False)
    out.print(f"{report.seconds:.1f} s; {report.computed:,} signatures computed, the rest cached", style="dim")
    if html is not None:
        out.print(f"wrote {html}")


@app.command()
def export(
    folder: Annotated[Path, typer.Argument(help="Folder to write the dataset into.")],
    format: Annotated[str, typer.Option("--format", help="messages | prompt-completion | alpaca.")] = "messages",
    validated: Annotated[bool, typer.Option("--validated/--all", help="Only blocks that pass the gate (default), or all with a file.")] = True,
    license: Annotated[Optional[str], typer.Option(
        "--license", help="Allowed licenses, comma-separated SPDX ids (default: every known license).")] = None,
    splits: Annotated[str, typer.Option("--splits", help="Train,validation,test fractions.")] = "0.8,0.1,0.1",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split assignment.")] = 0,
    synthesized: Annotated[bool, typer.Option("--synthesized", help="Add passing LLM implementations of exported blocks.")] = False,
    spec_format: Annotated[str, typer.Option("--spec-format", help="How the prompt renders the spec: markdown | json.")] = "markdown",
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a fine-tuning dataset of spec -> code pairs with leakage-free splits and a dataset card."""
    setup_logging(False)
    fractions = _floats(splits, "--splits")
    licenses = [x.strip() for x in license.split(",") if x.strip()] if license else None
    with errors(), progress_bar(not as_json) as progress:
        report = nnrag.export(folder, home=home, format=format, validated_only=validated, licenses=licenses,  # type: ignore[arg-type]
                              splits=fractions, seed=seed, synthesized=synthesized, spec_format=spec_format,
                              progress=progress)
    if as_json:
        print_json(report.to_dict())
        return
    _print_export(report)


def _print_export(report: Any) -> None:
    parts = ", ".join(f"{name} {n:,}" for name, n in report.splits.items())
    out.print(f"{report.examples:,} examples in {report.groups:,} groups: {parts}", highlight=False)
    if report.excluded:
        out.print("left out: " + ", ".join(f"{reason} {n:,}" for reason, n in sorted(report.excluded.items())), highlight=False)
    crossing = sum(report.straddling.values())
    out.print(styled(f"copy pairs across splits: {crossing}", (" (none)", "") if not crossing else (" (see manifest.json)", "red")))
    out.print(f"wrote {report.folder}: {', '.join(report.files)}", highlight=False)
