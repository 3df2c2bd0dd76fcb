"""What the web pages show, read from one home: a block's page (spec, file, provenance, the gate's
record), the library's figures and failures, the values the search filters offer. Plain dicts for
the templates; reading only, through the same lookups the agent tools use."""

from __future__ import annotations

from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from ..db import connect
from ..errors import CODE_HELP
from ..library.records import StoredRecord
from ..library.report import library_report
from ..specs.build import bundle_from_row, find_row
from ..workspace import Workspace

_FORMATTER = HtmlFormatter(linenos="table", cssclass="source-code", wrapcode=True)


def highlight_css() -> str:
    return _FORMATTER.get_style_defs(".source-code")


def facets(workspace: Workspace) -> dict[str, list[str]]:
    """The sources and categories of the library, for the search filters."""
    with connect(workspace) as db:
        sources = [r["source"] for r in db.conn.execute("SELECT DISTINCT source FROM library ORDER BY source")]
        categories = [r["category"] for r in db.conn.execute(
            "SELECT DISTINCT category FROM library WHERE category IS NOT NULL ORDER BY category")]
    return {"sources": sources, "categories": categories}


def block_page(workspace: Workspace, block_id: str) -> dict[str, Any]:
    """A block's spec, standalone file (highlighted), provenance and verdict. Raises NotFoundError."""
    with connect(workspace) as db:
        row = find_row(db.conn, block_id)
        bundle = bundle_from_row(db, workspace, row)
    spec = bundle.spec
    gate = StoredRecord.read(row["record"]).gate
    record: dict[str, Any] = gate.to_dict() if gate is not None else {}
    code = ""
    if row["path"]:
        file = workspace.inside(row["path"])  # a path from the database stays inside the home
        code = file.read_text(encoding="utf-8") if file.is_file() else ""
    return {
        "spec": spec.model_dump(mode="json"),
        "readme": bundle.readme,
        "code": code,
        "code_html": highlight(code, PythonLexer(), _FORMATTER) if code else "",
        "status": row["status"],
        "failure": {"code": row["code"], "help": CODE_HELP.get(row["code"] or "", ""), "stage": row["stage"],
                    "message": row["message"], "traceback": record.get("traceback", "")} if row["status"] == "failed" else None,
        "record": {k: _shown(record[k]) for k in ("stage", "arguments", "init_args", "input_shapes", "input_dtypes",
                                                  "keyword_shapes", "keyword_dtypes", "output_shapes", "params", "submodules", "backward", "weights_not_fetched",
                                                  "seconds", "peak_mb", "isolation") if record.get(k) not in (None, "", [], {})},
        "filename": f"{row['name']}.py",
    }


def _shown(value: Any) -> Any:
    """A record value as a page shows it: mappings as ``key: value`` pairs, seconds rounded."""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    if isinstance(value, float):
        return round(value, 3)
    return value


def library_page(workspace: Workspace, code: str | None = None, source: str | None = None) -> dict[str, Any]:
    """The library's figures (per source, failures by code) and its failed blocks, filtered."""
    report = library_report(workspace)
    sql = "SELECT block_id, name, source, category, stage, code, message FROM library WHERE status = 'failed'"
    args: list[str] = []
    for column, value in (("code", code), ("source", source)):
        if value:
            sql += f" AND {column} = ?"
            args.append(value)
    with connect(workspace) as db:
        failed = [dict(r) | {"message": (r["message"] or "").splitlines()[0][:200] if r["message"] else ""}
                  for r in db.conn.execute(sql + " ORDER BY source, block_id", args)]
    widest = max([int(s["tried"]) for s in report.per_source.values()] or [1])
    most = max(list(report.failures.values()) or [1])
    return {
        "tried": report.tried, "passed": report.passed, "pass_rate": report.pass_rate,
        "not_validated": report.not_validated,
        "per_source": [{"name": name, "tried": int(s["tried"]), "passed": int(s["passed"]),
                        "pass_pct": 100 * s["passed"] / widest, "fail_pct": 100 * (s["tried"] - s["passed"]) / widest}
                       for name, s in sorted(report.per_source.items())],
        "failures": [{"code": c, "count": n, "pct": 100 * n / most, "help": CODE_HELP.get(c, "")}
                     for c, n in sorted(report.failures.items(), key=lambda kv: -kv[1])],
        "failed": failed, "code": code or "", "source": source or "",
    }
