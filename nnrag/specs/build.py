"""Build a block's neutral spec from the library: static facts of its standalone file, the
validator's probe record, and provenance from the index."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass, field

from ..db import Database
from ..errors import NotFoundError
from ..library.records import StoredRecord, library_row, resolve_library_block
from ..validator.record import ValidationRecord
from ..sourcing.spec import origin
from ..workspace import Workspace
from .model import BlockSpec, Parameter, Provenance, ShapeProbe, Submodule, Validation
from .config_docs import PackageDocs
from .readme import ReadmeNotes
from .static import ClassFacts, class_facts, heading, opening
from .summary import summarize

@dataclass(frozen=True)
class SpecBundle:
    """A spec with what search indexes beside it but a spec must not hold (the full docstring)."""

    spec: BlockSpec
    docstring: str | None
    identifiers: list[str]  # names the file defines, then the class's attributes, config fields and local names
    fingerprint: str
    context: str = ""  # the distribution's summary and the defining module's docstring, " | ", its definition names
    notes: str = ""  # what the package documents about the config fields the block reads
    comments: list[str] = field(default_factory=list)  # the prose of the class's comments and methods' docstrings
    readme: str = ""  # what the source's README says of the class
    heading: str = ""  # the comments right above the class in its module


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


def _probe(record: ValidationRecord | None) -> ShapeProbe | None:
    if record is None or not record.ok:
        return None
    return ShapeProbe(
        inputs=record.input_shapes, input_dtypes=record.input_dtypes, outputs=record.output_shapes,
        arguments=record.arguments or "guessed", parameter_count=record.params, backward=record.backward,
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


def _facts(db: Database, workspace: Workspace, row: sqlite3.Row) -> ClassFacts:
    path, module = row["path"], row["module"]
    if path and (workspace.home / path).exists():
        code = (workspace.home / path).read_text(encoding="utf-8")
        try:
            return class_facts(code, row["class_name"])
        except (KeyError, SyntaxError):
            pass
    # no standalone file (its closure failed): read the defining module itself
    qualname = row["qualname"]
    inner = qualname[len(module) + 1:] if module and qualname.startswith(module + ".") else qualname
    return class_facts(db.file_text(row["file_sha1"]), inner)


def bundle_from_row(db: Database, workspace: Workspace, row: sqlite3.Row, docs: PackageDocs | None = None,
                    readmes: ReadmeNotes | None = None) -> SpecBundle:
    """The spec of one library row (see ``nnrag.library.records.LIBRARY_ROW``) and what search keeps
    beside it. ``docs`` and ``readmes``: the packages' argument documentation and the sources'
    READMEs, shared by the rows of one refresh."""
    name, category, file_sha1, status = row["name"], row["category"], row["file_sha1"], row["status"]
    record = StoredRecord.read(row["record"]).gate
    facts = _facts(db, workspace, row)
    probe = _probe(record)
    submodules = [Submodule(type=t, count=n) for t, n in (record.submodules if record else {}).items()]
    try:
        content_id = swhid(db.file_bytes(file_sha1)) if file_sha1 else None
    except Exception:  # content collected away: the id is optional
        content_id = None
    try:
        text = db.file_text(file_sha1) if file_sha1 else ""
    except Exception:  # content collected away: what the module says is optional
        text = ""
    context = module_context(text) if text else ""
    above = heading(text, row["line"]) if text else ""
    used = record.init_args if record else {}
    spec_ = BlockSpec(
        id=row["block_id"], name=name, qualname=row["qualname"], category=category,
        summary=summarize(category, opening(facts.docstring, above), submodules, probe,
                          _spatial_rank(name, probe)),
        bases=facts.bases,
        constructor=_with_probe_values(facts.constructor, used if record and record.ok else {}),
        forward=facts.forward, probe=probe, submodules=submodules, operations=facts.operations, mechanisms=facts.mechanisms,
        requirements=json.loads(row["requirements"] or "[]"),
        provenance=Provenance(
            source=row["source"], origin=origin(row["source_kind"], row["source_spec"], row["version"], row["git_commit"]),
            version=row["version"], commit=row["git_commit"], module=row["module"] or "", path=row["file_path"],
            line_start=row["line"], line_end=row["end_line"], file_sha1=file_sha1, swhid=content_id,
            license=row["license"], files=json.loads(row["files"] or "{}"),
        ),
        validation=Validation(status=status if status in ("validated", "failed") else "not-run", stage=row["stage"],
                              code=row["code"], message=(row["message"] or "")[:300] or None,
                              gate_version=row["gate_version"]),
    )
    notes = (docs or PackageDocs(db.conn)).notes(row["source"], row["module"] or "", facts.config_fields)
    readmes = readmes or ReadmeNotes(db.conn)
    readme = readmes.note(row["source"], row["module"] or "", name)
    if package := readmes.summary(row["source"]):  # what the whole distribution is, before what its module is
        module_doc, _, names = context.partition(" | ")
        context = f"{package.rstrip('.')}. {module_doc} | {names}"
    return SpecBundle(spec_, facts.docstring, facts.identifiers + facts.attributes + facts.config_fields + facts.locals,
                      facts.fingerprint, context, notes, facts.comments, readme, above)


def find_row(conn: sqlite3.Connection, name: str, source: str | None = None) -> sqlite3.Row:
    """The library row of the one block a name means (see :func:`nnrag.indexing.lookup.resolve_block`)."""
    ref = resolve_library_block(conn, name, source)
    row = library_row(conn, ref.block_id)
    if row is None:  # pragma: no cover - resolve_library_block checked the library
        raise NotFoundError(f"{ref.block_id} is not in the library; `nnrag build` adds it")
    return row


def spec_for(db: Database, workspace: Workspace, name: str, source: str | None = None) -> BlockSpec:
    return bundle_from_row(db, workspace, find_row(db.conn, name, source)).spec
