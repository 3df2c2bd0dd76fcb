"""Distributions pip cannot install here, lent from their source distributions.

A block that imports a distribution pip fails to build (``mmcv``: "Failed to build 'mmcv' when
getting requirements to build wheel") stays ``missing-dependency`` although what it uses of it
is mostly Python. For each such distribution nnrag reads the sdists the package index holds and
picks the newest whose modules provide every name the waiting blocks' sources import from it,
within the versions their packages state they accept (``MMCV_MAX = '1.3.0'``)
(:func:`~nnrag.library.releases.newest_providing`: a repository written against ``mmcv.runner``
needs a release from before that module moved away);
the release is indexed as a source that only lends (``lends``), below the corpus, and the next
pass of the build copies the Python the blocks need from it. Its compiled parts stay absent: a
block that calls them fails there, as ``native-extension`` or at the call. A package declared under
a variant name (``mmcv-full``) is lent for it; an installed distribution that imports a package
only lent (mmdet 2 importing mmcv) is lent too; a distribution no index has is lent from the git
repository a source names for it (detectron2).

Nothing of an sdist runs while it is chosen or indexed: archives are read as data.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from ..errors import SourceError
from ..sourcing.index_files import source_distributions
from ..sourcing.declared import repository_of
from ..sourcing.spec import KIND_GIT, KIND_PYPI, SourceSpec
from ..validator.envs import distribution_for, missing_module
from ..workspace import Workspace
from . import records
from .environments import installed_importer
from .pins import outdated_package
from .releases import imported_names, newest_providing, stated_bounds, within

_PRIORITY = 1000  # below every source a corpus names: a corpus source that provides the package lends it first
_PIP_FAILED = re.compile(r"pip cannot install ([^:]+): (.+?)\)?$", re.S)
# as :func:`~nnrag.library.environments.explain_corpus_import` words it
_IMPORTED_BY = re.compile(r"the installed (\w+) imports (\w+), which the corpus holds")


@dataclass(frozen=True)
class Missing:
    """A distribution pip could not install, as the blocks that need it show."""

    distribution: str
    package: str  # the top-level import name the blocks miss
    reason: str  # pip's last line
    blocks: int
    sources: frozenset[str]  # of those blocks: what they import from it decides the release


@dataclass(frozen=True)
class Lending:
    """What became of one distribution pip could not install."""

    distribution: str
    package: str
    reason: str  # pip's
    blocks: int
    version: str | None = None  # the release lent from its sdist; None: not lent (or lent from ``repository``)
    repository: str = ""  # the git repository lent from, which a source names for a distribution no index has
    covers: str = ""  # of the names the corpus imports from it, how many that release provides
    why_not: str = ""

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


def missing_distributions(conn: sqlite3.Connection, unpinned: frozenset[str] = frozenset(),
                          corpus: frozenset[str] = frozenset()) -> list[Missing]:
    """The distributions the library's ``missing-dependency`` blocks wait for and pip could not
    install, with the package each misses, most wanted first; and the installed ones whose own
    import stopped at what a package of ``unpinned`` (installed, too new, with no release to pin)
    no longer has."""
    found: dict[tuple[str, str], list[str]] = {}
    sources: dict[tuple[str, str], set[str]] = {}
    for missing in records.missing_dependencies(conn):
        source, message = missing.source, missing.message
        if unpinned and (top := outdated_package(message, corpus, missing.environment)) in unpinned:
            importer = installed_importer(missing.traceback)
            distribution = distribution_for(importer) if importer and importer not in (top, *corpus) else None
            if distribution:
                gone = missing_module(message, dotted=True) or top
                found.setdefault((distribution, importer), []).append(
                    f"the installed {importer} imports {gone}, which the installed {top} no longer has")
                sources.setdefault((distribution, importer), set()).add(source)
            continue
        if (chain := _IMPORTED_BY.search(message)) and (distribution := distribution_for(chain.group(1))):
            # an installed distribution imports what is only lent: lent too, its code copied with the rest
            found.setdefault((distribution, chain.group(1)), []).append(
                f"the installed {chain.group(1)} imports {chain.group(2)}, which is lent, not installed")
            sources.setdefault((distribution, chain.group(1)), set()).add(source)
            continue
        package, pip = missing_module(message), _PIP_FAILED.search(message)
        if not (package and pip):
            continue
        distribution = _provider(package, [d.strip() for d in pip.group(1).split(",")])
        if distribution:
            found.setdefault((distribution, package), []).append(pip.group(2).strip())
            sources.setdefault((distribution, package), set()).add(source)
    return sorted((Missing(d, p, reasons[0], len(reasons), frozenset(sources[d, p])) for (d, p), reasons in found.items()),
                  key=lambda m: (-m.blocks, m.distribution))


def _provider(package: str, failed: list[str]) -> str | None:
    """Of the distributions pip failed on, the one that provides ``package``: the distribution its
    import name maps to, else the one variant of that name among them (``mmcv-full`` for ``mmcv``,
    which mmrotate and GCVit declare: the same package built with its compiled ops)."""
    named = distribution_for(package)
    if named is None:
        return None
    if named in failed:
        return named
    variants = [d for d in failed if canonicalize_name(d).startswith(canonicalize_name(named) + "-")]
    return variants[0] if len(variants) == 1 else None


def lending_sources(workspace: Workspace, conn: sqlite3.Connection, indexed: set[str],
                    corpus: frozenset[str], unpinned: frozenset[str] = frozenset()) -> tuple[list[SourceSpec], list[Lending]]:
    """For each distribution the library waits for and pip could not install, the source that
    lends it from the release :func:`~nnrag.library.releases.newest_providing` picks, and what became of each.
    ``indexed``: names of the sources already in the index; ``corpus``: the top-level packages they
    hold (a package one of them provides is lent by it already); ``unpinned``: installed packages
    too new for the code that no release pins (:func:`missing_distributions`)."""
    specs: list[SourceSpec] = []
    outcome: list[Lending] = []
    missing_all = missing_distributions(conn, unpinned, corpus)
    lent: dict[str, str] = {}  # package -> the distribution it is lent from
    for missing in missing_all:
        base = Lending(missing.distribution, missing.package, missing.reason, missing.blocks)
        if missing.package in corpus:
            outcome.append(replace(base, why_not="an indexed source provides it; the blocks load it by a name "
                                                 "computed at run time"))
            continue
        if missing.package in lent or canonicalize_name(missing.distribution) in indexed:
            # one package declared as two distributions (mmcv, mmcv-full), or lent in an earlier
            # round under a name its release does not install: lent once, reported once
            continue
        # what every source waiting for the package imports from it decides the release
        waiting = set().union(*(m.sources for m in missing_all if m.package == missing.package))
        wanted = imported_names(conn, missing.package, waiting)
        try:
            files = [f for f in source_distributions(missing.distribution) if not f.version.is_prerelease]
            files = within(files, stated_bounds(conn, missing.package, waiting))
            chosen = newest_providing(files, missing.package, wanted, workspace.cache_dir / "sdists")
            why_not = "the index holds no sdist that could be read"
        except SourceError as exc:
            chosen, why_not = None, str(exc)
        if chosen is not None and 2 * chosen[1] < len(wanted):
            # at best a few of the names: another project under that name (PyPI's ``mmseg`` for
            # mmsegmentation's package, ``corr`` for a repository's own ``corr.py``), not the code's
            chosen, why_not = None, f"no release provides what the corpus imports (at best {chosen[1]}/{len(wanted)})"
        if chosen is None:
            repository = _named_repository(conn, missing.distribution, waiting)
            if repository is None:
                outcome.append(replace(base, why_not=why_not))
                continue
            name = _free_name(canonicalize_name(missing.distribution), indexed | {s.name for s in specs})
            specs.append(SourceSpec(name=name, kind=KIND_GIT, location=repository, priority=_PRIORITY, lends=True))
            lent[missing.package] = missing.distribution
            outcome.append(replace(base, repository=repository))
            continue
        file, covered = chosen
        name = _free_name(canonicalize_name(missing.distribution), indexed | {s.name for s in specs})
        specs.append(SourceSpec(name=name, kind=KIND_PYPI, location=f"{missing.distribution}=={file.version}",
                                priority=_PRIORITY, lends=True))
        lent[missing.package] = missing.distribution
        outcome.append(replace(base, version=str(file.version), covers=f"{covered}/{len(wanted)}"))
    return specs, outcome


def _named_repository(conn: sqlite3.Connection, distribution: str, sources: set[str]) -> str | None:
    """The git repository one of ``sources`` names for ``distribution`` (:func:`repository_of`)."""
    rows = conn.execute(f"SELECT root FROM sources WHERE name IN ({','.join('?' * len(sources))}) ORDER BY name",
                        sorted(sources)).fetchall()
    for row in rows:
        if row["root"] and (found := repository_of(Path(row["root"]), distribution)) is not None:
            return found
    return None


def _free_name(name: str, taken: set[str]) -> str:
    n, candidate = 2, name
    while candidate in taken:
        candidate, n = f"{name}-{n}", n + 1
    return candidate
