"""Installed distributions too new for the corpus, pinned to the release it was written against.

A repository written against an older release of a distribution installed here imports what has
since moved away (``timm.models.layers.helpers``, transformers' ``apply_chunking_to_forward``).
For each such distribution, under ``--requirements install``, the build picks the newest release
whose modules provide every name the corpus imports from it
(:func:`~nnrag.library.releases.newest_providing`, over its pure-Python wheels, else its sdists)
and judges the blocks that stopped there again in an environment with that release, layered over
this one. The distribution's own dependencies stay this environment's.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import sqlite3
import sysconfig
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from packaging.utils import canonicalize_name

from ..errors import SourceError
from ..extraction.requirements import installed
from ..sourcing.index_files import pure_wheels, source_distributions
from ..validator.envs import distribution_for, missing_module, site_packages
from ..validator.record import MISSING_DEPENDENCY, ValidationRecord
from ..workspace import Workspace
from . import records
from .releases import imported_names, newest_providing, stated_bounds, within

_GONE_MODULE = re.compile(r"No module named '(\w+)\.([\w.]+)'")
_GONE_NAME = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def outdated_package(message: str, corpus: frozenset[str], environment: Sequence[str] = ()) -> str | None:
    """The top-level package an import failure shows to be of another release than the code's: a
    submodule or a name missing from a package installed here, or in the requirement environment
    the block was judged in, that the corpus does not hold; or a top-level module gone from the
    release of its distribution installed here or in that environment (``pkg_resources``, which
    setuptools 81 stopped shipping)."""
    found = _GONE_MODULE.search(message) or _GONE_NAME.search(message)
    if found is None:
        top = missing_module(message)
        if top is None or top in corpus or installed(top) or not (distribution := distribution_for(top)):
            return None
        return top if _has_distribution(distribution, environment) else None
    top = (found.group(1) if found.re is _GONE_MODULE else found.group(2)).split(".")[0]
    return top if top not in corpus and (installed(top) or environment_site(message, top)) else None


def _has_distribution(distribution: str, environment: Sequence[str]) -> bool:
    """Whether ``distribution`` is installed here, or is among the requirements ``environment``."""
    wanted = canonicalize_name(distribution)
    if any(canonicalize_name(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) == wanted for r in environment):
        return True
    try:
        md.distribution(distribution)
        return True
    except md.PackageNotFoundError:
        return False


# "cannot import name 'x' from 'skbase.utils' (/home/.nnrag/envs/<set>/lib/python3.11/site-packages/skbase/...)"
_SITE = re.compile(r"\(([^()]*/site-packages)/(\w+)[/.]")


def environment_site(message: str, top: str) -> str | None:
    """The site-packages folder, not this Python's, that the failed import found ``top`` in: a
    requirement environment installed a release of it too new for the code."""
    here = {os.path.realpath(p) for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))}
    for site, package in _SITE.findall(message):
        if package == top and os.path.realpath(site) not in here and os.path.isdir(site):
            return site
    return None


def _installed_release(top: str, site: str | None) -> tuple[str, str] | None:
    """The distribution that provides ``top`` and its version, here or in the folder ``site``; of
    a top-level module its release no longer has, the distribution named for it, there or here."""
    if not (installed(top) if site is None else Path(site, top).is_dir() or Path(site, f"{top}.py").is_file()):
        wanted = canonicalize_name(distribution_for(top) or "")
        for dist in [*(md.distributions(path=[site]) if site else ()), *md.distributions()]:
            if wanted and canonicalize_name(dist.metadata["Name"] or "") == wanted:
                return dist.metadata["Name"], dist.version
        return None
    if site is None:
        distribution = (md.packages_distributions().get(top) or [top])[0]
        try:
            return distribution, md.version(distribution)
        except md.PackageNotFoundError:
            return None
    for dist in md.distributions(path=[site]):
        tops = (dist.read_text("top_level.txt") or "").split() or \
            [str(f).split("/")[0].removesuffix(".py") for f in dist.files or () if "/" in str(f) or str(f).endswith(".py")]
        if top in tops:
            return dist.metadata["Name"], dist.version
    return None


def pinned_requirement(record: ValidationRecord, pins: Mapping[str, str], corpus: frozenset[str]) -> str | None:
    """The pinned release a failed block waits for, if its failure is an outdated import of a pinned package."""
    if record.ok or record.code != MISSING_DEPENDENCY or not pins:
        return None
    top = outdated_package(record.message or "", corpus)
    return pins.get(top) if top else None


@dataclass(frozen=True)
class Pin:
    """What became of one installed distribution the corpus imports moved-away names from."""

    distribution: str
    package: str
    installed: str
    blocks: int
    version: str | None = None  # the release pinned; None: none provides more than the installed one
    covers: str = ""
    why_not: str = ""

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


def pins(workspace: Workspace, conn: sqlite3.Connection, corpus: frozenset[str]) -> list[Pin]:
    """For each installed package that the library's ``missing-dependency`` blocks show to be too
    new, the release to pin it to."""
    wanting: dict[str, int] = {}
    sources: dict[str, set[str]] = {}  # the sources of the blocks that stopped there: what they import decides
    sites: dict[str, str | None] = {}  # where the import found it: here (None) or a requirement environment
    for missing in records.missing_dependencies(conn):
        if top := outdated_package(missing.message, corpus, missing.environment):
            wanting[top] = wanting.get(top, 0) + 1
            sources.setdefault(top, set()).add(missing.source)
            site = environment_site(missing.message, top)
            if site is None and not installed(top) and missing.environment:  # a top-level module gone from it
                found = site_packages(workspace, missing.environment)
                site = str(found) if found is not None else None
            sites.setdefault(top, None if installed(top) else site)
    found: list[Pin] = []
    for top, blocks in sorted(wanting.items(), key=lambda kv: (-kv[1], kv[0])):
        release = _installed_release(top, sites[top])
        if release is None:
            continue
        distribution, current = release
        base = Pin(distribution, top, current, blocks)
        wanted = imported_names(conn, top, sources[top])
        try:
            files = [f for f in pure_wheels(distribution) if not f.version.is_prerelease]
            files = files or [f for f in source_distributions(distribution) if not f.version.is_prerelease]
            files = within(files, stated_bounds(conn, top, sources[top]))
            chosen = newest_providing(files, top, wanted, workspace.cache_dir / "releases")
        except SourceError as exc:
            found.append(replace(base, why_not=str(exc)))
            continue
        if chosen is None or str(chosen[0].version) == current:
            found.append(replace(base, why_not="no release provides more of what the corpus imports"))
            continue
        found.append(replace(base, version=str(chosen[0].version), covers=f"{chosen[1]}/{len(wanted)}"))
    return found
