"""Corpus sources: what a source specification means and how it becomes files on disk.

A source is one of

- a local folder: ``/path/to/repo`` (or ``./repo``),
- a git repository: ``git+https://github.com/owner/name[@ref]`` (also ``git+file://``, ``git+ssh://``),
- an installed distribution: ``dist:timm``,
- a released wheel or sdist: ``pypi:name==version`` (downloaded and unpacked, never installed),
- a wheel or sdist file on disk: ``/path/to/pkg-1.0-py3-none-any.whl``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError
from .globs import PathFilter

log = logging.getLogger(__name__)

KIND_LOCAL = "local"
KIND_GIT = "git"
KIND_DIST = "dist"
KIND_PYPI = "pypi"
KIND_ARCHIVE = "archive"

# Module names come from the path below the root (installed trees: ``timm/layers/x.py`` is
# ``timm.layers.x``) or from the nearest enclosing package chain (repositories, which may use a
# ``src/`` layout or keep scripts beside their packages).
STYLE_PATH = "path"
STYLE_PACKAGE = "package"

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024

# Excluded unless a source sets ``default_excludes = false``: VCS and tool folders, virtual
# environments, build copies, tests and docs (their toy modules are not reusable blocks).
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".*",
    "__pycache__",
    "node_modules",
    "site-packages",
    "venv",
    "build",
    "tests",
    "test",
    "conftest.py",
    "setup.py",
    "docs",
)

_ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar")
_GIT_RE = re.compile(r"^git\+(?P<url>[a-z]+://[^@\s]+?|[^@\s]+?)(?:@(?P<ref>[^@/\s]+))?$")
_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")


# Why a file was not parsed: stable codes recorded in the index (files.reason).
REASON_SYNTAX = "syntax-error"
REASON_PY2 = "python2"
REASON_ENCODING = "encoding"
REASON_BINARY = "binary"
REASON_TOO_LARGE = "too-large"
REASON_PARSER_LIMIT = "parser-limit"
REASON_UNREADABLE = "unreadable"
REASON_SYMLINK_LOOP = "symlink-loop"
REASON_OUTSIDE_ROOT = "outside-root"  # a link whose target is outside the source: never read
REASON_PARSER_CRASH = "parser-crash"

@dataclass(frozen=True)
class SourceSpec:
    """A corpus source as configured: where it is and which of its files and symbols count."""

    name: str
    kind: str
    location: str
    ref: str | None = None
    priority: int = 1
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    default_excludes: bool = True
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    # a source that only lends: other sources' blocks copy the code they import from it (a
    # distribution pip cannot install here, read from its sdist), its own blocks are not built
    lends: bool = False

    @property
    def spec(self) -> str:
        """The canonical specification string, e.g. ``dist:timm`` or ``git+URL@ref``."""
        if self.kind == KIND_GIT:
            return f"git+{self.location}" + (f"@{self.ref}" if self.ref else "")
        if self.kind in (KIND_DIST, KIND_PYPI):
            return f"{self.kind}:{self.location}"
        return self.location

    @property
    def path_filter(self) -> PathFilter:
        excludes = (DEFAULT_EXCLUDES if self.default_excludes else ()) + self.exclude
        return PathFilter(self.include, excludes)

    def config(self) -> dict[str, object]:
        """The settings that change which files or blocks are indexed (stored with the source)."""
        return {
            "include": list(self.include),
            "exclude": list(self.exclude),
            "symbols": list(self.symbols),
            "default_excludes": self.default_excludes,
            "max_file_bytes": self.max_file_bytes,
            **({"lends": True} if self.lends else {}),  # absent otherwise: the settings of every other source stay as stored
        }


def _clean_name(text: str) -> str:
    return _NAME_RE.sub("-", text).strip("-") or "source"


def parse_source(
    text: str,
    *,
    name: str | None = None,
    priority: int = 1,
    include: tuple[str, ...] | list[str] = (),
    exclude: tuple[str, ...] | list[str] = (),
    symbols: tuple[str, ...] | list[str] = (),
    default_excludes: bool = True,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    lends: bool = False,
) -> SourceSpec:
    """Parse a source specification string into a :class:`SourceSpec`."""
    text = text.strip()
    if not text:
        raise ConfigError("empty source specification")
    ref: str | None = None
    if text.startswith("git+"):
        m = _GIT_RE.match(text)
        if not m:
            raise ConfigError(f"cannot parse git source {text!r}: expected git+https://host/owner/name[@ref]")
        kind, location, ref = KIND_GIT, m.group("url"), m.group("ref")
        default_name = location.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1]
    elif text.startswith("dist:"):
        kind, location = KIND_DIST, text[5:].strip()
        if not location:
            raise ConfigError("dist: needs a distribution name, e.g. dist:timm")
        default_name = location
    elif text.startswith("pypi:"):
        kind, location = KIND_PYPI, text[5:].strip()
        if not location:
            raise ConfigError("pypi: needs a requirement, e.g. pypi:timm==1.0.15")
        default_name = re.split(r"[=<>!~\[; ]", location, maxsplit=1)[0]
    elif text.lower().endswith(_ARCHIVE_SUFFIXES) and not Path(text).expanduser().is_dir():
        kind, location = KIND_ARCHIVE, str(Path(text).expanduser().resolve())
        base = Path(location).name
        default_name = re.split(r"-\d", base, maxsplit=1)[0]
    elif re.match(r"^[a-z][a-z0-9+.-]*://", text) or text.startswith(("http:", "https:")):
        raise ConfigError(
            f"unrecognised source {text!r}: prefix git URLs with 'git+' (git+https://github.com/owner/name)"
        )
    else:
        path = Path(text).expanduser()
        kind, location = KIND_LOCAL, str(path.resolve())
        default_name = path.resolve().name
    return SourceSpec(
        name=_clean_name(name or default_name),
        kind=kind,
        location=location,
        ref=ref,
        priority=int(priority),
        include=tuple(include),
        exclude=tuple(exclude),
        symbols=tuple(symbols),
        default_excludes=bool(default_excludes),
        max_file_bytes=int(max_file_bytes),
        lends=bool(lends),
    )


def default_corpus() -> list[SourceSpec]:
    """The embedded default corpus: torch-ecosystem distributions installed beside nnrag."""
    return [
        parse_source("dist:torch", include=("torch/nn",)),
        parse_source("dist:torchvision", include=("torchvision/models", "torchvision/ops")),
        parse_source("dist:timm"),
    ]


@dataclass(frozen=True)
class SourceFile:
    path: str  # POSIX path relative to the source root
    abspath: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class WalkIssue:
    """A path that could not be listed or followed (recorded in the index as a failed file)."""

    path: str
    reason: str
    message: str


@dataclass(frozen=True)
class Materialized:
    """A source made available on local disk, with its listing."""

    spec: SourceSpec
    root: Path
    module_style: str
    version: str | None = None
    commit: str | None = None
    license: str | None = None
    note: str | None = None  # e.g. "offline: using existing clone"
    files: tuple[SourceFile, ...] = ()
    issues: tuple[WalkIssue, ...] = field(default_factory=tuple)

    def with_listing(self, files: list[SourceFile], issues: list[WalkIssue]) -> "Materialized":
        return replace(self, files=tuple(files), issues=tuple(issues))


def module_names(paths: Sequence[str], style: str, package_dirs: frozenset[str]) -> dict[str, str]:
    """The import name of each file: ``a/b/c.py`` -> ``a.b.c``, ``a/b/__init__.py`` -> ``a.b``.

    With the package style, a name starts at the outermost directory of the chain of packages
    (folders with ``__init__.py``) that holds the file; files outside any package are named from
    the source root, as when a script runs from the repository root. Two chains of one source
    that would give the same name (FocalNet's ``segmentation/mmseg/models/backbones`` and
    ``detection/mmdet/models/backbones``, overlays for two toolboxes) are named from the folders
    above them, one at a time, until their names differ: a name stands for one file.
    """
    dirs = {p: p.split("/")[:-1] for p in paths}
    start = {p: _chain_start(dirs[p], package_dirs) if style == STYLE_PACKAGE else 0 for p in paths}
    while True:
        names = {p: _dotted(p, start[p]) for p in paths}
        holders: dict[str, list[str]] = {}
        for p, name in names.items():
            holders.setdefault(name, []).append(p)
        # a chain is its outermost package folder; every file in it is named from the same folder
        clashing = {tuple(dirs[p][:start[p] + 1]) for group in holders.values() if len(group) > 1
                    for p in group if start[p] > 0}
        if not clashing:
            return names
        for p in paths:
            if start[p] > 0 and tuple(dirs[p][:start[p] + 1]) in clashing:
                start[p] -= 1


def _chain_start(dirs: list[str], package_dirs: frozenset[str]) -> int:
    """How many folders above the file's chain of packages its name leaves out."""
    start = len(dirs)
    while start > 0 and "/".join(dirs[:start]) in package_dirs:
        start -= 1
    return start if start < len(dirs) else 0


def _dotted(relpath: str, start: int) -> str:
    parts = relpath[:-3].split("/") if relpath.endswith(".py") else relpath.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts[start:] if len(parts) > 1 else parts)


def namespace_dirs(files: Sequence[SourceFile], package_dirs: frozenset[str]) -> frozenset[str]:
    """Folders without ``__init__.py`` that the source's own code imports as packages (PEP 420
    namespace packages): NAFNet's ``basicsr/`` holds the packages ``models``, ``data``, ... and its
    code writes ``from basicsr.models.archs.arch_util import ...``, so its modules are named from
    the repository root. Only folders directly above a package are candidates, and only their
    imports are looked for: a source whose packages all have ``__init__.py`` reads no file here.
    Folders inside a package are looked at too (:func:`_inner_namespace_dirs`)."""
    package_dirs = package_dirs | _inner_namespace_dirs(files, package_dirs)
    return _outer_namespace_dirs(files, package_dirs) | package_dirs


def _outer_namespace_dirs(files: Sequence[SourceFile], package_dirs: frozenset[str]) -> frozenset[str]:
    candidates = {d.rsplit("/", 1)[0] for d in package_dirs if "/" in d} - package_dirs
    dotted = {d: d.replace("/", ".") for d in candidates if all(p.isidentifier() for p in d.split("/"))}
    if not dotted:
        return frozenset()
    pattern = re.compile(rb"^[ \t]*(?:from|import)[ \t]+(" + b"|".join(re.escape(n.encode()) for n in dotted.values())
                         + rb")(?:\.|[ \t]+import\b)", re.M)
    found: set[str] = set()
    for f in files:
        if f.path.endswith(".py"):
            found.update(m.group(1).decode() for m in pattern.finditer(_read(f)))
        if len(found) == len(dotted):
            break
    return frozenset(d for d, name in dotted.items() if name in found)


# ``from .ops.modules import X`` in the folder above, ``from ..functions import Y`` in a package
# below: imports that only work where the folder is a package
_REACHING_FROM_BELOW = re.compile(rb"^[ \t]*from[ \t]+\.\.(?:[A-Za-z_]|[ \t]+import\b)", re.M)


def _inner_namespace_dirs(files: Sequence[SourceFile], package_dirs: frozenset[str]) -> frozenset[str]:
    """Folders without ``__init__.py`` between a package and the packages inside them, which the
    code imports through (PEP 420 lets ``pkg/ops/`` be the package ``pkg.ops``): the DETR family's
    ``models/ops/`` holds ``functions/`` and ``modules/`` for its compiled deformable attention,
    imported as ``from .ops.modules import MSDeformAttn`` or ``from models.ops.modules import ...``,
    and ``modules/`` itself imports ``from ..functions import ...``. Without such an import the
    folder stays outside the chain (a folder of scripts inside a package). Repeated while new
    folders are found, for such folders inside one another."""
    by_dir: dict[str, list[SourceFile]] = {}
    for f in files:
        if f.path.endswith(".py"):
            by_dir.setdefault(f.path.rsplit("/", 1)[0] if "/" in f.path else "", []).append(f)
    found: set[str] = set()
    texts: dict[str, bytes] = {}
    while True:
        packages = package_dirs | found
        candidates = {d.rsplit("/", 1)[0] for d in packages if "/" in d} - packages
        candidates = {d for d in candidates if "/" in d and d.rsplit("/", 1)[0] in packages
                      and d.rsplit("/", 1)[1].isidentifier()}
        new = {d for d in candidates if _imported_through(d, by_dir, packages, texts)}
        if not new:
            return frozenset(found)
        found |= new


def _imported_through(folder: str, by_dir: dict[str, list[SourceFile]], packages: frozenset[str] | set[str],
                      texts: dict[str, bytes]) -> bool:
    parent, name = folder.rsplit("/", 1)
    parts = parent.split("/")
    dotted = ".".join(parts[_chain_start(parts, frozenset(packages)) :] + [name]).encode()
    relative = re.compile(rb"^[ \t]*from[ \t]+\." + re.escape(name.encode()) + rb"(?:\.|[ \t]+import\b)", re.M)
    absolute = re.compile(rb"^[ \t]*(?:from|import)[ \t]+" + re.escape(dotted) + rb"(?:\.|[ \t]+import\b)", re.M)
    below = [f for d in packages if d.rsplit("/", 1)[0] == folder for f in by_dir.get(d, [])]
    checks = [(relative, by_dir.get(parent, [])), (_REACHING_FROM_BELOW, below),
              (absolute, [f for group in by_dir.values() for f in group])]
    for pattern, group in checks:
        for f in group:
            if f.path not in texts:
                texts[f.path] = _read(f)
            if pattern.search(texts[f.path]):
                return True
    return False


def _read(f: SourceFile) -> bytes:
    try:
        with open(f.abspath, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def origin(kind: str, spec: str, version: str | None, commit: str | None) -> str:
    """Where a source's code came from, as block headers and specs print it:
    ``dist timm==1.0.31``, ``git https://host/o/r @ 1a2b3c``, ``pypi:mmcv==2.1.0 (2.1.0)``, ``local /path @ 1a2b``."""
    if kind == KIND_DIST:
        return f"dist {spec.split(':', 1)[-1]}=={version}" if version else f"dist {spec}"
    if kind == KIND_GIT:
        return f"git {spec.split('+', 1)[-1]}" + (f" @ {commit}" if commit else "")
    if kind == KIND_PYPI:
        return spec + (f" ({version})" if version else "")
    return f"{kind} {spec}" + (f" @ {commit}" if commit else "")
