"""Extraction of one block: its closure over the index, assembled into one standalone file."""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Iterator

from ..db import connect
from ..indexing.lookup import BlockRef, resolve_block
from ..sourcing.spec import origin
from ..workspace import Workspace
from .assemble import Assembled, Provenance, assemble
from .closure import Extractor
from .lending import check_prefer
from .plan import Closure, ClosureIssue


@dataclass(frozen=True)
class Extraction:
    block_id: str
    source: str
    qualname: str
    class_name: str
    code: str
    requirements: list[str]
    files: dict[str, str]
    issues: list[ClosureIssue]
    seconds: float
    # names bound nowhere that the copied code uses only when it runs, left free as the original
    # leaves them: NameError there if that code runs (a branch not taken: vit-pytorch's ``einsum``)
    free: list[ClosureIssue] = field(default_factory=list)
    imports: str | None = None  # what of its own package the file imports instead of copying, and why

    @property
    def ok(self) -> bool:
        return not self.issues

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["issues"] = [asdict(i) for i in self.issues]
        d["free"] = [asdict(i) for i in self.free]
        return d


def provenance(conn: sqlite3.Connection, source: str) -> Provenance:
    row = conn.execute("SELECT kind, spec, version, git_commit, license FROM sources WHERE name=?", (source,)).fetchone()
    return Provenance(source, origin(row["kind"], row["spec"], row["version"], row["git_commit"]), row["license"],
                      row["version"])


class Extractors:
    """One cached :class:`Extractor` per source (parsed modules are shared by its blocks).
    ``prefer``: where a package another indexed source provides comes from (``installed`` or ``corpus``)."""

    def __init__(self, conn: sqlite3.Connection, prefer: str = "installed") -> None:
        self.conn = conn
        self.prefer = check_prefer(prefer)
        self._by_source: dict[str, tuple[Extractor, Provenance]] = {}
        self._provenance: dict[str, Provenance] = {}

    def provenance_of(self, source: str) -> Provenance:
        if source not in self._provenance:
            self._provenance[source] = provenance(self.conn, source)
        return self._provenance[source]

    def extract(self, ref: BlockRef, registered: frozenset[str] = frozenset(),
                classes: frozenset[tuple[str, str]] = frozenset()) -> tuple[Closure, Assembled | None, float]:
        """The closure of a block and its file. Where its closure cannot be copied, the block's own
        module is, with the rest of its package imported (:meth:`Extractor.importing`); the
        closure's ``imported_for`` says why. Only the extractor of the latest source is kept:
        callers taking blocks source by source hold one source's parsed modules at a time.
        ``registered``, ``classes``: see :meth:`Extractor.closure`."""
        if ref.source not in self._by_source:
            self._by_source.clear()
            self._by_source[ref.source] = (Extractor(self.conn, ref.source, self.prefer), self.provenance_of(ref.source))
        extractor, prov = self._by_source[ref.source]
        started = time.perf_counter()
        with _collector_paused():
            closure = extractor.closure(ref.module, ref.name_in_module, registered, classes)
            importing = extractor.importing(ref.module) if closure.issues else None
            if importing is not None:
                imported = importing.closure(ref.module, ref.name_in_module, registered, classes)
                if not imported.issues:
                    closure = replace(imported, imported_for=closure.issues[0])
            lenders = tuple(self.provenance_of(s) for s in closure.lenders)
            assembled = None if closure.issues else assemble(closure, prov, lenders)
        return closure, assembled, time.perf_counter() - started


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while one block is extracted: a closure allocates thousands of
    objects beside the source's parsed modules, and each collection they set off walked that whole
    heap (a third of the time on transformers' blocks; 80 of them took 25 s, 16 s paused). What
    the block leaves behind is collected after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def extract_block(workspace: Workspace, name: str, source: str | None = None, prefer: str = "installed") -> Extraction:
    with connect(workspace) as db:
        ref = resolve_block(db.conn, name, source)
        closure, assembled, seconds = Extractors(db.conn, prefer).extract(ref)
    return Extraction(
        block_id=ref.block_id,
        source=ref.source,
        qualname=ref.qualname,
        class_name=assembled.class_name if assembled else ref.name_in_module,
        code=assembled.code if assembled else "",
        requirements=[r.pep508 for r in assembled.requirements] if assembled else [],
        files=closure.files,
        issues=closure.issues,
        seconds=seconds,
        free=closure.free,
        imports=assembled.imports if assembled else None,
    )
