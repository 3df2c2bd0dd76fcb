"""Distributions pip cannot install here, lent from their source distributions.

A block that imports a distribution pip fails to build (``mmcv``: "Failed to build 'mmcv' when
getting requirements to build wheel") stays ``missing-dependency`` although what it uses of it
is mostly Python. For each such distribution nnrag reads the sdists the package index holds,
newest first, and picks the first whose modules provide every name the corpus imports from it (a
repository written against ``mmcv.runner`` needs a release from before that module moved away);
the release is indexed as a source that only lends (``lends``), below the corpus, and the next
pass of the build copies the Python the blocks need from it. Its compiled parts stay absent: a
block that calls them fails there, as ``native-extension`` or at the call.

Nothing of an sdist runs while it is chosen or indexed: archives are read as data.
"""

from __future__ import annotations

import ast
import logging
import re
import sqlite3
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..errors import SourceError
from ..sourcing.index_files import ReleasedFile, download, source_distributions
from ..sourcing.spec import KIND_PYPI, SourceSpec
from ..validator.envs import distribution_for
from ..workspace import Workspace
from . import records

log = logging.getLogger(__name__)

_TRIES = 12  # releases read per distribution, newest first, before the best one read is taken
_PRIORITY = 1000  # below every source a corpus names: a corpus source that provides the package lends it first
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_PIP_FAILED = re.compile(r"pip cannot install ([^:]+): (.+?)\)?$", re.S)


@dataclass(frozen=True)
class Missing:
    """A distribution pip could not install, as the blocks that need it show."""

    distribution: str
    package: str  # the top-level import name the blocks miss
    reason: str  # pip's last line
    blocks: int


@dataclass(frozen=True)
class Lending:
    """What became of one distribution pip could not install."""

    distribution: str
    package: str
    reason: str  # pip's
    blocks: int
    version: str | None = None  # the release lent from its sdist; None: not lent
    covers: str = ""  # of the names the corpus imports from it, how many that release provides
    why_not: str = ""

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


def missing_distributions(conn: sqlite3.Connection) -> list[Missing]:
    """The distributions the library's ``missing-dependency`` blocks wait for and pip could not
    install, with the package each misses, most wanted first."""
    found: dict[tuple[str, str], list[str]] = {}
    for message in records.missing_dependency_messages(conn):
        module, pip = _NO_MODULE.search(message), _PIP_FAILED.search(message)
        if not (module and pip):
            continue
        package = module.group(1).split(".")[0]
        distribution = distribution_for(package)
        if distribution and distribution in {d.strip() for d in pip.group(1).split(",")}:
            found.setdefault((distribution, package), []).append(pip.group(2).strip())
    return sorted((Missing(d, p, reasons[0], len(reasons)) for (d, p), reasons in found.items()),
                  key=lambda m: (-m.blocks, m.distribution))


def imported_names(conn: sqlite3.Connection, package: str) -> set[tuple[str, str | None]]:
    """What the indexed sources import from ``package``: (module, name) pairs, name None for a
    module imported whole."""
    rows = conn.execute(
        "SELECT DISTINCT i.module, i.name FROM imports i JOIN files f ON f.id = i.file_id"
        " WHERE i.level = 0 AND (i.module = ? OR i.module LIKE ?)", (package, package + ".%"))
    return {(r["module"], r["name"] if r["name"] != "*" else None) for r in rows}


def choose_release(distribution: str, package: str, wanted: set[tuple[str, str | None]],
                   cache: Path) -> tuple[ReleasedFile, int] | None:
    """The newest final sdist of ``distribution`` whose modules provide every name of ``wanted``;
    else the one, of the releases read, that provides the most. With the number of names it provides."""
    files = [f for f in source_distributions(distribution) if not f.version.is_prerelease]
    best: tuple[ReleasedFile, int] | None = None
    for file in files[:_TRIES]:
        try:
            modules = _modules_of(download(file, cache), package)
        except (SourceError, OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
            log.info("%s: cannot read %s: %s", distribution, file.filename, exc)
            continue
        covered = sum(_provides(modules, module, name) for module, name in wanted)
        if best is None or covered > best[1]:
            best = (file, covered)
        if covered == len(wanted):
            break
    return best


def _modules_of(archive: Path, package: str) -> dict[str, str]:
    """module -> source text of every module of ``package`` in an sdist (a tar or zip archive)."""
    out: dict[str, str] = {}
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            members = [(n, lambda n=n: zf.read(n)) for n in zf.namelist()]
            return _collect(members, package, out)
    with tarfile.open(archive) as tf:
        members = [(m.name, lambda m=m: tf.extractfile(m).read())  # type: ignore[union-attr]
                   for m in tf.getmembers() if m.isfile()]
        return _collect(members, package, out)


def _collect(members: list, package: str, out: dict[str, str]) -> dict[str, str]:
    for name, read in members:
        parts = name.split("/")[1:]  # an sdist holds one folder, NAME-VERSION/
        if not parts or parts[0] != package or not name.endswith(".py"):
            continue
        dotted = ".".join(parts)[: -len(".py")].removesuffix(".__init__")
        out[dotted] = read().decode("utf-8", "replace")
    return out


def _provides(modules: dict[str, str], module: str, name: str | None) -> bool:
    if module not in modules:
        return False
    if name is None or f"{module}.{name}" in modules:
        return True
    bound = _bound_names(modules[module])
    return bound is None or name in bound


def _bound_names(text: str) -> set[str] | None:
    """Names a module binds at its top level (in ``if``/``try`` too); None where a star import or a
    syntax this Python cannot read leaves it open."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    bound: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return None
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]
    return bound


def lending_sources(workspace: Workspace, conn: sqlite3.Connection, indexed: set[str]) -> tuple[list[SourceSpec], list[Lending]]:
    """For each distribution the library waits for and pip could not install, the source that
    lends it from the release :func:`choose_release` picks, and what became of each.
    ``indexed``: names of the sources already in the index (a distribution one of them provides is
    lent by it already)."""
    specs: list[SourceSpec] = []
    outcome: list[Lending] = []
    provided = {r["top"] for r in conn.execute(
        "SELECT DISTINCT substr(module, 1, instr(module || '.', '.') - 1) AS top FROM files WHERE module IS NOT NULL")}
    for missing in missing_distributions(conn):
        base = Lending(missing.distribution, missing.package, missing.reason, missing.blocks)
        if missing.package in provided:
            outcome.append(Lending(**{**base.__dict__, "why_not": "an indexed source provides it; the blocks load "
                                                                  "it by a name computed at run time"}))
            continue
        wanted = imported_names(conn, missing.package)
        try:
            chosen = choose_release(missing.distribution, missing.package, wanted, workspace.cache_dir / "sdists")
        except SourceError as exc:
            outcome.append(Lending(**{**base.__dict__, "why_not": str(exc)}))
            continue
        if chosen is None:
            outcome.append(Lending(**{**base.__dict__, "why_not": "the index holds no sdist that could be read"}))
            continue
        file, covered = chosen
        name = _free_name(canonicalize_name(missing.distribution), indexed | {s.name for s in specs})
        specs.append(SourceSpec(name=name, kind=KIND_PYPI, location=f"{missing.distribution}=={file.version}",
                                priority=_PRIORITY, lends=True))
        outcome.append(Lending(**{**base.__dict__, "version": str(file.version), "covers": f"{covered}/{len(wanted)}"}))
    return specs, outcome


def _free_name(name: str, taken: set[str]) -> str:
    n, candidate = 2, name
    while candidate in taken:
        candidate, n = f"{name}-{n}", n + 1
    return candidate
