"""Released files of a distribution, read from a package index (the Simple Repository API: PEP 691
JSON, or PEP 503 HTML), and its source distributions downloaded as they are.

Nothing here runs a package's code: pip, asked for an sdist, prepares its metadata by running its
build backend (code from the internet, outside any sandbox), and stops where that build fails
(``mmcv``: "Failed to build 'mmcv' when getting requirements to build wheel"). A source
distribution fetched here is an archive, checked against the index's SHA-256 and read as data.

The index is pip's own: ``PIP_INDEX_URL``, else pip's configured ``index-url``, else PyPI.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename,
                             parse_wheel_filename)
from packaging.version import Version

from ..errors import SourceError

DEFAULT_INDEX = "https://pypi.org/simple/"
_TIMEOUT_S = 60
_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class ReleasedFile:
    filename: str
    url: str
    sha256: str | None
    version: Version
    yanked: bool = False


def index_url() -> str | None:
    """The package index pip uses here: ``--index-url`` (or ``-i``) in ``NNRAG_PIP_ARGS`` (the
    arguments nnrag gives pip), ``PIP_INDEX_URL``, pip's configured ``index-url``, else PyPI;
    None under ``--no-index``."""
    args = os.environ.get("NNRAG_PIP_ARGS", "").split()
    if "--no-index" in args:
        return None
    for flag in ("--index-url", "-i"):
        if flag in args[:-1]:
            return args[args.index(flag) + 1]
    return os.environ.get("PIP_INDEX_URL") or _configured_index()


@lru_cache(maxsize=1)
def _configured_index() -> str:
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                             capture_output=True, text=True, timeout=_TIMEOUT_S)
        if out.returncode == 0 and out.stdout.strip().startswith(("http://", "https://")):
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return DEFAULT_INDEX


def source_distributions(name: str, index: str | None = None) -> list[ReleasedFile]:
    """The sdists the index holds of distribution ``name``, newest first (yanked ones left out)."""
    found = []
    for filename, url, sha256 in _released(name, index):
        try:
            dist, version = parse_sdist_filename(filename)
        except InvalidSdistFilename:
            continue
        if canonicalize_name(dist) == canonicalize_name(name):
            found.append(ReleasedFile(filename, url, sha256, version))
    return sorted(found, key=lambda f: f.version, reverse=True)


def is_released(name: str, index: str | None = None) -> bool:
    """Whether the index lists any file of distribution ``name``; False where it has no page for
    it (404) or there is no index to ask. One request per name and index."""
    return _listed(name, index or index_url())


@lru_cache(maxsize=512)  # asked again for every block that stops at a module of the same name
def _listed(name: str, index: str | None) -> bool:
    if index is None:
        return False
    try:
        return bool(_released(name, index))
    except SourceError:
        return False


def pure_wheels(name: str, index: str | None = None) -> list[ReleasedFile]:
    """The pure-Python wheels (``py3-none-any``) the index holds of ``name``, newest first, one per version."""
    return _wheels(name, index, pure=True)


def wheels(name: str, index: str | None = None) -> list[ReleasedFile]:
    """Wheels of ``name`` for any platform, newest first, one per version: what they install is named alike."""
    return _wheels(name, index, pure=False)


def _wheels(name: str, index: str | None, pure: bool) -> list[ReleasedFile]:
    found: dict[Version, ReleasedFile] = {}
    for filename, url, sha256 in _released(name, index):
        try:
            dist, version, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        if canonicalize_name(dist) == canonicalize_name(name) and (not pure or any(
                t.interpreter.startswith("py3") and t.abi == "none" and t.platform == "any" for t in tags)):
            found.setdefault(version, ReleasedFile(filename, url, sha256, version))
    return [found[v] for v in sorted(found, reverse=True)]


def _released(name: str, index: str | None) -> list[tuple[str, str, str | None]]:
    """(filename, absolute url, sha256) of every file the index page of ``name`` lists, yanked ones left out."""
    index = index or index_url()
    if index is None:
        raise SourceError("pip is told to use no package index (--no-index)")
    base = index.rstrip("/") + "/"
    page = urllib.parse.urljoin(base, canonicalize_name(name) + "/")
    request = urllib.request.Request(page, headers={"Accept": f"{_JSON}, text/html;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:  # noqa: S310 - the configured index
            body = response.read()
            kind = response.headers.get("Content-Type", "")
    except OSError as exc:
        raise SourceError(f"cannot read the index page of {name} ({page}): {exc}") from exc
    entries = _json_files(body) if _JSON in kind else _html_files(body.decode("utf-8", "replace"))
    return [(filename, urllib.parse.urljoin(page, url), sha256) for filename, url, sha256, yanked in entries if not yanked]


def _json_files(body: bytes) -> list[tuple[str, str, str | None, bool]]:
    data = json.loads(body)
    return [(f["filename"], f["url"], (f.get("hashes") or {}).get("sha256"), bool(f.get("yanked")))
            for f in data.get("files", [])]


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str | None, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        given = dict(attrs)
        href = given.get("href") or ""
        url, _, fragment = href.partition("#")
        sha256 = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        self.found.append((urllib.parse.unquote(url.rsplit("/", 1)[-1]), url, sha256, "data-yanked" in given))


def _html_files(text: str) -> list[tuple[str, str, str | None, bool]]:
    parser = _Anchors()
    parser.feed(text)
    return parser.found


def download(file: ReleasedFile, folder: Path) -> Path:
    """The released file under ``folder`` (kept there: a second call reads it again), its SHA-256
    checked against the index's."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(file.filename).name
    if target.is_file() and (file.sha256 is None or _sha256(target) == file.sha256):
        return target
    part = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(file.url, timeout=_TIMEOUT_S) as response, part.open("wb") as out:  # noqa: S310
            while chunk := response.read(1 << 20):
                out.write(chunk)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise SourceError(f"cannot download {file.filename}: {exc}") from exc
    if file.sha256 and _sha256(part) != file.sha256:
        part.unlink(missing_ok=True)
        raise SourceError(f"{file.filename}: its SHA-256 differs from the index's")
    os.replace(part, target)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
