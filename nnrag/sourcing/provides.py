"""Which distribution provides an import name, read from the files it releases.

An import name and the distribution that provides it need not share a word: ``tltorch`` is
``tensorly-torch``'s, and no mapping of import names holds every one. A distribution's released
wheel says what it provides: the top-level folders and modules it installs. Read for the
distributions a source declares, only after pip failed on the name the import is spelt as;
nothing here runs a package's code.
"""

from __future__ import annotations

import importlib.util
import logging
import tarfile
import zipfile
from pathlib import Path
from typing import Iterable

from ..errors import SourceError
from .index_files import ReleasedFile, download, is_released, pure_wheels, source_distributions, wheels

log = logging.getLogger(__name__)


def providing(module: str, distributions: Iterable[str], cache: Path) -> str | None:
    """The first of ``distributions`` whose newest release installs the top-level ``module``."""
    for name in distributions:
        try:
            tops = top_level(name, cache)
        except SourceError as exc:
            log.info("cannot read what %s provides: %s", name, exc)
            continue
        if module in tops:
            return name
    return None


def namespace_distribution(module: str) -> str | None:
    """The distribution of a module inside a namespace package, named for its dotted path as such
    distributions are (``opentelemetry.exporter.otlp.proto.http`` ->
    ``opentelemetry-exporter-otlp-proto-http``, ``google.cloud.storage`` -> ``google-cloud-storage``):
    the longest prefix of two parts or more that the package index releases. None where the
    top-level is a regular package here (what it lacks is of another release of it, not of
    another distribution), where the index releases a distribution of the top-level's own name
    (``pytorch_lightning.callbacks`` is ``pytorch-lightning``'s, whatever else is released under
    a longer name), or where it releases none of them."""
    parts = module.split(".")
    if len(parts) < 2 or not all(p.isidentifier() and not p.startswith("_") for p in parts):
        return None
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin not in (None, "namespace"):
        return None
    if spec is None and is_released(parts[0]):
        return None  # a distribution of the top-level's own name: no namespace package, and no guessing past it
    return next((name for name in ("-".join(parts[:k]) for k in range(len(parts), 1, -1)) if is_released(name)), None)


def top_level(distribution: str, cache: Path) -> frozenset[str]:
    """The top-level import names the newest release of ``distribution`` installs: of a wheel
    (pure-Python first, else any), else of a source distribution."""
    files: list[ReleasedFile] = pure_wheels(distribution) or wheels(distribution) or source_distributions(distribution)
    if not files:
        return frozenset()
    archive = download(files[0], cache)
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zf:
            return _tops(zf.namelist(), 0)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            return _tops(zf.namelist(), 1)
    try:
        with tarfile.open(archive) as tf:
            return _tops([m.name for m in tf.getmembers() if m.isfile()], 1)
    except tarfile.TarError as exc:
        raise SourceError(f"{archive.name}: {exc}") from exc


def _tops(names: list[str], strip: int) -> frozenset[str]:
    """Packages (folders with ``__init__.py``) and modules at the top of an archive's tree, past
    ``strip`` folders (an sdist's ``NAME-VERSION/``) and an sdist's ``src/``."""
    out: set[str] = set()
    for name in names:
        parts = name.split("/")[strip:]
        if strip and parts[:1] == ["src"]:
            parts = parts[1:]
        if len(parts) == 2 and parts[1] == "__init__.py" and parts[0].isidentifier():
            out.add(parts[0])
        elif len(parts) == 1 and parts[0].endswith(".py") and parts[0][:-3].isidentifier() and parts[0] != "setup.py":
            out.add(parts[0][:-3])
    return frozenset(out)
