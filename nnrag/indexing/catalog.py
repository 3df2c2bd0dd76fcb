"""Read-side queries over the index: blocks, sources, statistics, forgetting a source."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase

from ..db import connect
from ..errors import NotFoundError
from ..workspace import Workspace
from ..sourcing.spec import DEFAULT_MAX_FILE_BYTES, SourceSpec, parse_source
from .store import DiscoveryStamp, Store


@dataclass(frozen=True)
class Block:
    """A discovered block: a non-abstract ``nn.Module`` subclass with a concrete ``forward``."""

    id: str  # "source:module.Class"
    name: str
    qualname: str
    source: str
    path: str
    line: int
    end_line: int
    category: str
    bases: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["bases"] = list(self.bases)
        return d


@dataclass(frozen=True)
class SourceInfo:
    name: str
    spec: str
    kind: str
    root: str | None
    priority: int
    version: str | None
    commit: str | None
    license: str | None
    state: str
    files: int
    blocks: int


@dataclass(frozen=True)
class Stats:
    sources: dict[str, dict[str, object]]  # per source: files, lines, failed, blocks, by category
    categories: dict[str, int]
    failures: dict[str, int]
    files: int
    lines: int
    blocks: int
    classes: int
    modules_not_blocks: int
    unresolved_bases: int
    template_copies: int  # classes left out: a file generated from their template defines them

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _open(workspace: Workspace) -> Store:
    return connect(workspace, kind=Store)


def _match(pattern: str | None, source: str, name: str, qualname: str) -> bool:
    if not pattern:
        return True
    pattern_l = pattern.lower()
    if "/" in pattern_l:
        src_pat, name_pat = pattern_l.split("/", 1)
        return fnmatchcase(source.lower(), src_pat) and (
            fnmatchcase(name.lower(), name_pat) or fnmatchcase(qualname.lower(), name_pat)
        )
    return fnmatchcase(name.lower(), pattern_l) or fnmatchcase(qualname.lower(), pattern_l)


def list_blocks(
    workspace: Workspace,
    pattern: str | None = None,
    *,
    source: str | None = None,
    category: str | None = None,
) -> list[Block]:
    """Blocks whose class name (or ``source/Name``) matches the fnmatch ``pattern``, case-insensitively."""
    with _open(workspace) as store:
        sql = (
            "SELECT b.name, b.qualname, s.name AS source, f.path, b.line, b.end_line, b.category, b.bases_chain"
            " FROM blocks b JOIN sources s ON s.id=b.source_id JOIN files f ON f.id=b.file_id"
        )
        where, params = [], []
        if source:
            where.append("s.name=?")
            params.append(source)
            if store.source_row(source) is None:
                known = ", ".join(r["name"] for r in store.sources()) or "none"
                raise NotFoundError(f"no source named {source!r} in the index (sources: {known})")
        if category:
            where.append("b.category=?")
            params.append(category)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY s.priority, s.name, b.qualname"
        rows = store.conn.execute(sql, params).fetchall()
    return [
        Block(
            id=f"{r['source']}:{r['qualname']}",
            name=r["name"],
            qualname=r["qualname"],
            source=r["source"],
            path=r["path"],
            line=r["line"],
            end_line=r["end_line"],
            category=r["category"],
            bases=tuple(json.loads(r["bases_chain"])),
        )
        for r in rows
        if _match(pattern, r["source"], r["name"], r["qualname"])
    ]


def list_sources(workspace: Workspace) -> list[SourceInfo]:
    with _open(workspace) as store:
        rows = store.conn.execute(
            "SELECT s.name, s.spec, s.kind, s.root, s.priority, s.version, s.git_commit AS 'commit', s.license, s.state,"
            " (SELECT COUNT(*) FROM files f WHERE f.source_id=s.id) AS files,"
            " (SELECT COUNT(*) FROM blocks b WHERE b.source_id=s.id) AS blocks"
            " FROM sources s ORDER BY s.priority, s.name"
        ).fetchall()
    return [SourceInfo(**dict(row)) for row in rows]


def indexed_specs(workspace: Workspace) -> list[SourceSpec]:
    """The specifications of every source in the index, with the settings they were indexed with."""
    with _open(workspace) as store:
        rows = store.sources()
    specs = []
    for row in rows:
        config = json.loads(row["config"] or "{}")
        specs.append(
            parse_source(
                row["spec"],
                name=row["name"],
                priority=row["priority"],
                include=config.get("include", ()),
                exclude=config.get("exclude", ()),
                symbols=config.get("symbols", ()),
                default_excludes=config.get("default_excludes", True),
                max_file_bytes=config.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES),
                lends=bool(config.get("lends", False)),
            )
        )
    return specs


def forget_source(workspace: Workspace, name: str) -> None:
    """Remove a source and everything indexed from it."""
    from .indexer import refresh_blocks

    with _open(workspace) as store:
        if store.source_row(name) is None:
            raise NotFoundError(f"no source named {name!r} in the index")
        store.forget_source(name)
        refresh_blocks(store)
        store.collect_garbage()


def index_stats(workspace: Workspace) -> Stats:
    with _open(workspace) as store:
        conn = store.conn
        per_source: dict[str, dict[str, object]] = {}
        for sid, name, spec, version in conn.execute("SELECT id, name, spec, version FROM sources ORDER BY priority, name"):
            files, lines, failed = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(lines),0), COALESCE(SUM(status='error'),0) FROM files WHERE source_id=?",
                (sid,),
            ).fetchone()
            cats = dict(
                conn.execute(
                    "SELECT category, COUNT(*) FROM blocks WHERE source_id=? GROUP BY category ORDER BY 2 DESC", (sid,)
                ).fetchall()
            )
            per_source[name] = {
                "spec": spec,
                "version": version,
                "files": files,
                "lines": lines,
                "failed": failed,
                "blocks": sum(cats.values()),
                "categories": cats,
            }
        categories: Counter[str] = Counter()
        for info in per_source.values():
            categories.update(info["categories"])  # type: ignore[arg-type]
        failures = dict(
            conn.execute("SELECT reason, COUNT(*) FROM files WHERE status='error' GROUP BY reason ORDER BY 2 DESC").fetchall()
        )
        discovery = DiscoveryStamp.read(conn)
    return Stats(
        sources=per_source,
        categories=dict(categories.most_common()),
        failures=failures,
        files=sum(int(s["files"]) for s in per_source.values()),  # type: ignore[call-overload]
        lines=sum(int(s["lines"]) for s in per_source.values()),  # type: ignore[call-overload]
        blocks=sum(categories.values()),
        classes=discovery.classes,
        modules_not_blocks=discovery.modules_not_blocks,
        unresolved_bases=discovery.unresolved_bases,
        template_copies=discovery.template_copies,
    )
