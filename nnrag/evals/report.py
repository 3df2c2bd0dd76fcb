"""A self-contained HTML report of the block library: pass/fail per source, failures by code."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ..validator.record import CODE_HELP

_BAR_H = 22


def _bars(rows: list[tuple[str, list[tuple[int, str]]]], total: int, width: int = 520) -> str:
    """Horizontal stacked bars as inline SVG; each row is (label, [(value, colour), ...])."""
    height = _BAR_H * len(rows) + 10
    parts = [f'<svg width="{width + 260}" height="{height}" role="img" xmlns="http://www.w3.org/2000/svg">']
    for i, (label, segments) in enumerate(rows):
        y = 5 + i * _BAR_H
        parts.append(f'<text x="0" y="{y + 15}" font-size="13">{html.escape(label)}</text>')
        x = 180.0
        for value, colour in segments:
            w = width * value / total if total else 0
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{_BAR_H - 6}" fill="{colour}"/>')
            x += w
        text = " / ".join(str(v) for v, _ in segments)
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 15}" font-size="12">{text}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(report: Any) -> str:
    sources = sorted(report.per_source.items())
    widest = max([s["tried"] for _, s in sources] or [1])
    per_source = _bars([(name, [(s["passed"], "#2e7d32"), (s["tried"] - s["passed"], "#c62828")]) for name, s in sources], widest)
    failures = sorted(report.failures.items(), key=lambda kv: -kv[1])
    most = max([n for _, n in failures] or [1])
    by_code = _bars([(code, [(n, "#c62828")]) for code, n in failures], most)
    rows = "".join(
        f"<tr><td>{html.escape(code)}</td><td>{n}</td><td>{html.escape(CODE_HELP.get(code, 'the closure could not be completed'))}</td></tr>"
        for code, n in failures
    )
    pending = f" {report.not_validated:,} more are not validated yet." if report.not_validated else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>nnrag block library</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:left}}</style></head>
<body><h1>nnrag block library</h1>
<p>{report.passed:,} of {report.tried:,} blocks pass the gate ({report.pass_rate:.1%}).{pending}</p>
<h2>Pass (green) and fail (red) per source</h2>{per_source}
<h2>Failures by code</h2>{by_code}
<table><tr><th>code</th><th>blocks</th><th>meaning</th></tr>{rows}</table>
</body></html>
"""


def write_html(report: Any, path: Path) -> None:
    path.write_text(render_html(report), encoding="utf-8")


def render_dedup_html(report: Any) -> str:
    """Cluster sizes per level and which sources share near copies, as a self-contained page."""
    levels = "".join(f"<tr><td>{html.escape(c.level)}</td><td>{c.clusters:,}</td><td>{c.in_clusters:,}</td>"
                     f"<td>{c.removed:,}</td><td>{c.kept:,}</td></tr>" for c in report.levels)
    sections = []
    for level in ("exact", "near", "structural"):
        sizes: dict[int, int] = {}
        for c in report.clusters[level]:
            sizes[len(c.members)] = sizes.get(len(c.members), 0) + 1
        rows = [(f"{size} members", [(n, "#1565c0")]) for size, n in sorted(sizes.items())]
        chart = _bars(rows, max([n for _, [(n, _)] in rows] or [1])) if rows else "<p>no clusters</p>"
        sections.append(f"<h2>{level}: clusters by size</h2>{chart}")
    sources = sorted(set(report.overlaps) | {b for row in report.overlaps.values() for b in row})
    if sources:
        head = "".join(f"<th>{html.escape(s)}</th>" for s in sources)
        body = "".join(f"<tr><th>{html.escape(a)}</th>" + "".join(
            f"<td>{report.overlaps.get(a, {}).get(b, '') if a != b else '&middot;'}</td>" for b in sources) + "</tr>"
            for a in sources)
        overlap = f"<table><tr><th></th>{head}</tr>{body}</table>"
    else:
        overlap = "<p>no near copies span two sources</p>"
    against = "".join(f"<li>{html.escape(u.corpus)} ({u.files:,} files): " + ", ".join(
        f"{lv} {u.unique[lv]:,} of {u.blocks:,}" for lv in u.unique) + " validated blocks have no copy there</li>"
        for u in report.against)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>nnrag dedup</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:right}}</style></head>
<body><h1>Copies among {report.items:,} library blocks</h1>
<table><tr><th>level</th><th>clusters</th><th>blocks in clusters</th><th>removed</th><th>kept</th></tr>{levels}</table>
{''.join(sections)}
<h2>Near-copy clusters shared by two sources</h2>{overlap}
{f'<h2>Uniqueness</h2><ul>{against}</ul>' if against else ''}
</body></html>
"""


def write_dedup_html(report: Any, path: Path) -> None:
    path.write_text(render_dedup_html(report), encoding="utf-8")
