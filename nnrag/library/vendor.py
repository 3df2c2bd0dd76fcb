"""Vendoring: chosen blocks written into a package of the user's project (see
:mod:`nnrag.extraction.package`), then each checked by the gate as imported from that package.

A package folder remembers what was vendored into it (``vendor.json``): vendoring more blocks
into it later rewrites the whole package, so definitions the old and new blocks share are still
written once. Files nnrag did not write are never overwritten.
"""

from __future__ import annotations

import json
import keyword
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from .._version import __version__
from ..db import connect
from ..errors import NnragError, VendorError
from ..extraction.block import Extractors
from ..extraction.package import MANIFEST, Item, Member, vendor_package
from ..indexing.lookup import BlockRef, resolve_block
from ..progress import ProgressFn
from ..validator.record import Limits, ValidationRecord
from ..validator.usage import runs as usage
from ..workspace import Workspace
from .retry import RETRY_CODES, retry_limits


@dataclass(frozen=True)
class VendoredBlock:
    block_id: str
    module: str  # dotted, importable from the project folder
    class_name: str
    requirements: list[str]
    ok: bool | None = None  # the gate's verdict; None when not checked
    code: str | None = None
    message: str | None = None


@dataclass
class VendorReport:
    folder: str
    package: str
    blocks: list[VendoredBlock] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"name", "reason"}
    shared: int = 0
    files: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)  # pinned to the versions installed here
    optional: list[str] = field(default_factory=list)  # imported only if present (not installed here)

    @property
    def passed(self) -> int:
        return sum(1 for b in self.blocks if b.ok)

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"passed": self.passed}


def _target(into: Path, package: str | None) -> tuple[Path, Path, str]:
    """The package folder, the folder to put on ``sys.path`` and the package's import name."""
    into = into.expanduser().resolve()
    name = package or into.name
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in name.split(".")):
        raise VendorError(f"{name!r} is not an importable package name; pass --package NAME")
    if package:
        return into.joinpath(*package.split(".")), into, package
    return into, into.parent, name


def _manifest(folder: Path) -> tuple[list[str], list[str]]:
    """The blocks and files an earlier run vendored into ``folder``."""
    path = folder / MANIFEST
    if not path.exists():
        return [], []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise VendorError(f"{path} is not a manifest nnrag can read ({e}); remove it or choose another folder") from e
    return list(data.get("blocks", [])), list(data.get("files", []))


def _write(folder: Path, root: Path, package: str, files: dict[str, str], previous: list[str]) -> None:
    for rel in files:
        path = folder / rel
        if path.exists() and rel not in previous:
            raise VendorError(f"{path} exists and was not written by nnrag; remove it or vendor into another folder")
    folder.mkdir(parents=True, exist_ok=True)
    for part in range(1, len(package.split("."))):  # the enclosing packages of a dotted name
        init = root.joinpath(*package.split(".")[:part], "__init__.py")
        if not init.exists():
            init.write_text("", encoding="utf-8")
    for rel, text in files.items():
        (folder / rel).write_text(text, encoding="utf-8")
    for rel in previous:
        if rel not in files and (folder / rel).is_file():
            (folder / rel).unlink()  # a module of the last run no longer produced


def vendor_blocks(workspace: Workspace, names: Sequence[str], into: Path, *, package: str | None = None,
                  source: str | None = None, prefer: str = "installed", check: bool = True,
                  limits: Limits | None = None, progress: ProgressFn | None = None) -> VendorReport:
    folder, root, package = _target(into, package)
    kept, previous = _manifest(folder)
    report = VendorReport(str(folder), package)
    items: list[Item] = []
    with connect(workspace) as db:
        refs: dict[str, BlockRef] = {}
        for name, src in [(n, source) for n in names] + [(b, None) for b in kept]:
            try:
                ref = resolve_block(db.conn, name, src)
            except NnragError as e:
                report.skipped.append({"name": name, "reason": str(e).splitlines()[0]})
                continue
            refs.setdefault(ref.block_id, ref)
        extractors = Extractors(db.conn, prefer)
        # source by source: the extractor keeps one source's parsed modules at a time
        for done, ref in enumerate(sorted(refs.values(), key=lambda r: (r.source, r.qualname)), 1):
            closure, assembled, _ = extractors.extract(ref)
            if assembled is None:
                report.skipped.append({"name": ref.block_id, "reason": f"{closure.issues[0].code}: {closure.issues[0]}"})
                continue
            items.append(Item(ref.block_id, closure, assembled.requirements, extractors.provenance_of(ref.source),
                              tuple(extractors.provenance_of(s) for s in closure.lenders), assembled.imports))
            if progress:
                progress("extract", done, len(refs))
        if not items:
            reasons = "; ".join(f"{s['name']}: {s['reason']}" for s in report.skipped) or "no block named"
            raise VendorError(f"nothing to vendor ({reasons})")
        package_files = vendor_package(items)
        files = dict(package_files.files)
        files[MANIFEST] = json.dumps({"package": package, "nnrag": __version__, "blocks": sorted(i.block_id for i in items),
                                      "files": sorted(files) + [MANIFEST]}, indent=2) + "\n"
        _write(folder, root, package, files, previous)
        report.shared = package_files.shared
        report.files = sorted(files)
        report.requirements = [r for r in package_files.requirements if "==" in r]
        report.optional = [r for r in package_files.requirements if "==" not in r]
        hints = {m.block_id: usage.hints(db.conn, m.source, m.block_id.split(":", 1)[1]) for m in package_files.members}
    verdicts = _check(package_files.members, package, root, hints, limits, progress) if check else {}
    for m in package_files.members:
        record = verdicts.get(m.block_id)
        report.blocks.append(VendoredBlock(
            m.block_id, f"{package}.{m.module}", m.class_name, list(m.requirements),
            None if record is None else record.ok, None if record is None else record.code,
            None if record is None else record.message))
    return report


def _check(members: Sequence[Member], package: str, root: Path, hints: dict[str, list],  # type: ignore[type-arg]
           limits: Limits | None, progress: ProgressFn | None) -> dict[str, ValidationRecord]:
    """Each block through the gate, imported from the written package as a user's code would."""
    from ..validator.gate import Gate

    verdicts: dict[str, ValidationRecord] = {}
    with Gate(1, limits) as gate:
        for done, m in enumerate(members, 1):
            top = m.class_name.split(".")[0]
            # the module's names too: recorded usage may build arguments from its helpers
            code = f"from {package}.{m.module} import *  # noqa: F403\nfrom {package}.{m.module} import {top}\n"
            record = gate.check_code(code, m.class_name, f"check_{m.module}.py", paths=[str(root)])
            if not record.ok and record.code in RETRY_CODES and hints.get(m.block_id):  # as the build does
                retried = gate.check_code(code, m.class_name, f"check_{m.module}.py", hints=hints[m.block_id],
                                          limits=retry_limits(gate.limits), paths=[str(root)])
                record = retried if retried.ok else record
            verdicts[m.block_id] = record
            if progress:
                progress("validate", done, len(members))
    return verdicts
