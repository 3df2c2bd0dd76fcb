"""Which release of a distribution provides what the corpus imports from it: read from the
releases' archives (sdists or pure-Python wheels) as data, newest first, nothing of them run.
Used to lend a distribution pip cannot install (:mod:`nnrag.library.lent`) and to pin an older
release of one installed here that moved a module away (:mod:`nnrag.library.pins`)."""

from __future__ import annotations

import ast
import logging
import re
import sqlite3
import tarfile
import zipfile
from pathlib import Path
from typing import Callable

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ..db import file_text
from ..errors import SourceError
from ..indexing.bindings import module_bindings
from ..sourcing.index_files import ReleasedFile, download

log = logging.getLogger(__name__)

_READS = 10  # archives read per distribution before the best one read is taken


def imported_names(conn: sqlite3.Connection, package: str, sources: set[str] | None = None) -> set[tuple[str, str | None]]:
    """What the indexed sources (or those named ``sources``) import from ``package``: (module,
    name) pairs, name None for a module imported whole."""
    sql = ("SELECT DISTINCT i.module, i.name FROM imports i JOIN files f ON f.id = i.file_id JOIN sources s ON s.id = f.source_id"
           " WHERE i.level = 0 AND (i.module = ? OR i.module LIKE ?)")
    args: list[str] = [package, package + ".%"]
    if sources is not None:
        sql += f" AND s.name IN ({','.join('?' * len(sources))})"
        args += sorted(sources)
    return {(r["module"], r["name"] if r["name"] != "*" else None) for r in conn.execute(sql, args)}


def stated_bounds(conn: sqlite3.Connection, package: str, sources: set[str]) -> SpecifierSet:
    """The versions of ``package`` the named sources' own top-level packages say they work with:
    module-level strings named for it and a minimum or maximum (``MMCV_MIN = '1.1.4'``,
    ``mmcv_maximum_version = '1.8.0'``), which the package checks as it is imported and refuses
    to load outside. An empty set where none is stated."""
    bounds: list[str] = []
    rows = conn.execute("SELECT f.sha1 FROM files f JOIN sources s ON s.id = f.source_id WHERE f.status = 'ok'"
                        " AND f.module IS NOT NULL AND instr(f.module, '.') = 0 AND f.path LIKE '%__init__.py'"
                        f" AND s.name IN ({','.join('?' * len(sources))})", sorted(sources)).fetchall()
    for row in rows:
        text = file_text(conn, row["sha1"])
        if package.lower() not in text.lower():
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                continue
            words = set(re.findall(r"[a-z0-9]+", node.targets[0].id.lower()))
            side = ">=" if words & {"min", "minimum"} else "<=" if words & {"max", "maximum"} else None
            if side and package.lower() in words:
                try:
                    bounds.append(f"{side}{Version(node.value.value)}")
                except InvalidVersion:
                    continue
    return SpecifierSet(",".join(bounds))


def within(files: list[ReleasedFile], bounds: SpecifierSet) -> list[ReleasedFile]:
    """The releases of ``files`` inside ``bounds``, or all of them when none is (bounds stated for
    a fork that never reached the index tell nothing about which release to take)."""
    kept = [f for f in files if bounds.contains(f.version)]
    return kept or files


def newest_providing(files: list[ReleasedFile], package: str, wanted: set[tuple[str, str | None]],
                     cache: Path) -> tuple[ReleasedFile, int] | None:
    """Of ``files`` (newest first), the newest whose modules provide every name of ``wanted``,
    with how many it provides; else the one read that provides the most. Releases are read at
    doubling distances from the newest (the 1st, 2nd, 4th, 8th, 16th, ...) until one provides everything, then
    bisected back towards the newer one read before it: what a corpus imports from an older API
    is provided by a band of releases (mmcv's ``mmcv.runner`` from 1.x until 2.0 moved it, its
    ``BaseModule`` only from 1.3), which this finds from its newer end in about ten reads."""
    scores: dict[int, int] = {}

    def score(i: int) -> int:
        if i not in scores:
            try:
                release = _Release(_modules_of(download(files[i], cache), package))
                scores[i] = sum(release.provides(module, name) for module, name in wanted)
            except (SourceError, OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
                log.info("%s: cannot read %s: %s", package, files[i].filename, exc)
                scores[i] = -1
        return scores[i]

    if not files:
        return None
    full, n = len(wanted), len(files)

    def newest_full(newer: int, older: int) -> None:
        """Bisect (newer, older], ``older`` providing everything, for the newest that does."""
        lo, hi = newer + 1, older - 1
        while lo <= hi and len(scores) < _READS + 6:
            mid = (lo + hi) // 2
            if score(mid) == full:
                hi = mid - 1
            else:
                lo = mid + 1

    probes, at, step = [], 0, 1
    while at < n and len(scores) < _READS:  # 0, 1, 3, 7, 15, ...: doubling distances
        probes.append(at)
        if score(at) == full:
            newest_full(probes[-2] if len(probes) > 1 else -1, at)
            break
        at, step = at + step, step * 2
    else:
        # none provides everything: look between the oldest read that provides the most and the
        # next older one read, where a band of releases that provides more may lie
        best = max(scores.values())
        a = max(i for i in probes if scores[i] == best)
        b = next((i for i in probes if i > a), n)
        while b - a > 1 and len(scores) < _READS + 6:
            mid = (a + b) // 2
            if score(mid) == full:
                newest_full(a, mid)
                break
            if scores[mid] >= best:
                a, best = mid, scores[mid]
            else:
                b = mid
    best = min(scores, key=lambda i: (-scores[i], i))
    return (files[best], scores[best]) if scores[best] >= 0 else None


def _modules_of(archive: Path, package: str) -> dict[str, str]:
    """module -> source text of every module of ``package`` in an sdist or a wheel."""
    wheel = archive.name.endswith(".whl")
    if archive.name.endswith((".zip", ".whl")):
        with zipfile.ZipFile(archive) as zf:
            return _collect([(n, lambda n=n: zf.read(n)) for n in zf.namelist()], package, wheel)
    with tarfile.open(archive) as tf:
        return _collect([(m.name, lambda m=m: tf.extractfile(m).read())  # type: ignore[union-attr]
                         for m in tf.getmembers() if m.isfile()], package, wheel)


def _collect(members: list[tuple[str, Callable[[], bytes]]], package: str, wheel: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, read in members:
        parts = name.split("/") if wheel else name.split("/")[1:]  # an sdist holds one folder, NAME-VERSION/
        if not parts or parts[0] != package or not name.endswith(".py"):
            continue
        dotted = ".".join(parts)[: -len(".py")].removesuffix(".__init__")
        out[dotted] = read().decode("utf-8", "replace")
    return out


class _Release:
    """The modules of ``package`` in one release, and the names each binds, read when first asked."""

    def __init__(self, modules: dict[str, str]) -> None:
        self.modules = modules
        self._bound: dict[str, set[str] | None] = {}

    def provides(self, module: str, name: str | None) -> bool:
        if module not in self.modules:
            return False
        if name is None or f"{module}.{name}" in self.modules:
            return True
        if module not in self._bound:
            self._bound[module] = module_bindings(self.modules[module])
        bound = self._bound[module]
        return bound is None or name in bound
