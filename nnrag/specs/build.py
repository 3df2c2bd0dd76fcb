"""Build a block's neutral spec from the library: static facts of its standalone file, the
validator's probe record, and provenance from the index."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError
from ..library import AmbiguousBlockError
from ..retrieval.store import Store
from ..workspace import Workspace
from .model import BlockSpec, Parameter, Provenance, ShapeProbe, Submodule, Validation
from .static import ClassFacts, class_facts, first_sentence
from .summary import summarize

_ROW = """
SELECT l.block_id, l.source, l.qualname, l.name, l.category, l.class_name, l.path, l.files, l.requirements,
       l.status, l.stage, l.code, l.message, l.record, l.gate_version,
       b.line, b.end_line, f.path, f.module, f.sha1,
       s.kind, s.spec, s.version, s.git_commit, s.license
FROM library l
JOIN sources s ON s.name = l.source
JOIN blocks b ON b.source_id = s.id AND b.qualname = l.qualname
JOIN files f ON f.id = b.file_id
"""


@dataclass(frozen=True)
class SpecBundle:
    """A spec with what search indexes beside it but a spec must not hold (the full docstring)."""

    spec: BlockSpec
    docstring: str | None
    identifiers: list[str]
    fingerprint: str
    context: str = ""  # the defining module's docstring and definition names


_CONTEXT_NAMES = 60


@functools.lru_cache(maxsize=64)
def module_context(text: str) -> str:
    """What the defining module says around the block: its docstring's first paragraph and the
    names it defines (``create_aa`` tells a search that BlurPool2d is about anti-aliasing)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ""
    doc = ast.get_docstring(tree) or ""
    para = " ".join(re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0].split())[:300]
    names = [n.name.strip("_") for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return f"{para} | {' '.join(names[:_CONTEXT_NAMES])}"


def swhid(data: bytes) -> str:
    """The Software Heritage content id: the git blob hash of the bytes."""
    return "swh:1:cnt:" + hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _origin(kind: str, spec: str, version: str | None, commit: str | None) -> str:
    if kind == "dist":
        return f"{spec} {version}" if version else spec
    if kind == "git":
        return f"{spec} @ {commit}" if commit else spec
    return f"{spec} ({version})" if version else spec


def _probe(record: dict[str, Any]) -> ShapeProbe | None:
    if not record.get("ok"):
        return None
    return ShapeProbe(
        inputs=record.get("input_shapes") or [], input_dtypes=record.get("input_dtypes") or [],
        outputs=record.get("output_shapes") or [], arguments=record.get("arguments") or "guessed",
        parameter_count=record.get("params"), backward=record.get("backward"),
    )


def _with_probe_values(params: list[Parameter], used: dict[str, str]) -> list[Parameter]:
    return [p.model_copy(update={"probe_value": used[p.name]}) if p.name in used else p for p in params]


def _spatial_rank(name: str, probe: ShapeProbe | None) -> int | None:
    """1, 2 or 3 spatial dimensions: from the name (``MaxPool3d``) where it says, else the probe's input rank."""
    if m := re.search(r"([123])[dD]$", name):
        return int(m.group(1))
    if probe and probe.inputs and isinstance(probe.inputs[0], list) and len(probe.inputs[0]) >= 3:
        return len(probe.inputs[0]) - 2
    return None


def _facts(store: Store, workspace: Workspace, row: tuple) -> ClassFacts:
    (_, _, qualname, _, _, class_name, path, *_rest) = row
    module, file_sha1 = row[18], row[19]
    if path and (workspace.home / path).exists():
        code = (workspace.home / path).read_text(encoding="utf-8")
        try:
            return class_facts(code, class_name)
        except (KeyError, SyntaxError):
            pass
    # no standalone file (its closure failed): read the defining module itself
    inner = qualname[len(module) + 1:] if module and qualname.startswith(module + ".") else qualname
    return class_facts(store.file_text(file_sha1), inner)


def bundle_from_row(store: Store, workspace: Workspace, row: tuple) -> SpecBundle:
    (block_id, source, qualname, name, category, _cls, _path, files, requirements, status, stage, code, message,
     record_json, gate_version, line, end_line, file_path, module, file_sha1, kind, spec, version, commit,
     license_) = row
    record = json.loads(record_json or "{}")
    facts = _facts(store, workspace, row)
    probe = _probe(record)
    submodules = [Submodule(type=t, count=n) for t, n in (record.get("submodules") or {}).items()]
    try:
        content_id = swhid(store.file_bytes(file_sha1)) if file_sha1 else None
    except Exception:  # content collected away: the id is optional
        content_id = None
    used = record.get("init_args") or {}
    spec_ = BlockSpec(
        id=block_id, name=name, qualname=qualname, category=category,
        summary=summarize(category, first_sentence(facts.docstring), submodules, probe, _spatial_rank(name, probe)),
        bases=facts.bases,
        constructor=_with_probe_values(facts.constructor, used if record.get("ok") else {}),
        forward=facts.forward, probe=probe, submodules=submodules, operations=facts.operations,
        requirements=json.loads(requirements or "[]"),
        provenance=Provenance(
            source=source, origin=_origin(kind, spec, version, commit), version=version, commit=commit,
            module=module or "", path=file_path, line_start=line, line_end=end_line, file_sha1=file_sha1,
            swhid=content_id, license=license_, files=json.loads(files or "{}"),
        ),
        validation=Validation(status=status if status in ("validated", "failed") else "not-run", stage=stage,
                              code=code, message=(message or "")[:300] or None, gate_version=gate_version),
    )
    try:
        context = module_context(store.file_text(file_sha1)) if file_sha1 else ""
    except Exception:
        context = ""
    return SpecBundle(spec_, facts.docstring, facts.identifiers, facts.fingerprint, context)


def library_rows(conn: sqlite3.Connection, where: str = "", args: tuple = ()) -> list[tuple]:
    return conn.execute(_ROW + where + " ORDER BY l.block_id", args).fetchall()


def find_rows(conn: sqlite3.Connection, name: str, source: str | None = None) -> list[tuple]:
    """Library rows for a name, a module-qualified name or a block id."""
    if ":" in name:
        source, name = name.split(":", 1)
    where = " WHERE (l.name=? OR l.qualname=?)" + (" AND l.source=?" if source else "")
    return library_rows(conn, where, (name, name, source) if source else (name, name))


def find_row(conn: sqlite3.Connection, name: str, source: str | None = None) -> tuple:
    """The one library row a name means; an unknown or ambiguous name is an error that says what to do."""
    rows = find_rows(conn, name, source)
    if not rows:
        where = f" in source {source!r}" if source else ""
        raise NotFoundError(f"no block named {name!r}{where} in the library; `nnrag build` extracts and validates "
                            "blocks, `nnrag blocks` lists discovered ones")
    if len(rows) > 1:
        raise AmbiguousBlockError(name, [r[0] for r in rows])
    return rows[0]


def spec_for(store: Store, workspace: Workspace, name: str, source: str | None = None) -> BlockSpec:
    return bundle_from_row(store, workspace, find_row(store.conn, name, source)).spec
