"""Bring sources onto local disk: git clones, installed distributions, wheels and sdists.

Nothing fetched is ever installed or executed: wheels and sdists are unpacked as archives and
git clones are sparse (Python files, license texts, READMEs, YAML and requirement files).
"""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata as md
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from ..errors import ConfigError, SourceError
from .spec import (
    KIND_ARCHIVE,
    KIND_DIST,
    KIND_GIT,
    KIND_LOCAL,
    KIND_PYPI,
    STYLE_PACKAGE,
    STYLE_PATH,
    Materialized,
    SourceSpec,
)
from .index_files import ReleasedFile, download, source_distributions
from .walk import list_files, walk_tree

log = logging.getLogger(__name__)

GIT_TIMEOUT_S = 600
# Python files and license texts, and what the usage harvest reads beside them: the README's code
# blocks, model descriptions and settings in YAML (``target:``/``params:``) and JSON, the
# requirement files
_SPARSE_PATTERNS = ("/**/*.py", "/*.py", "/LICENSE*", "/LICENCE*", "/COPYING*", "/NOTICE*", "/README*", "/readme*",
                    "/**/*.yaml", "/**/*.yml", "/requirements*.txt", "/requirements/*.txt", "/setup.cfg", "/pyproject.toml",
                    # the C, C++ and CUDA sources an extension module is compiled from: beside the
                    # Python that imports it (``from . import deform_conv_ext``), they say it is one
                    "/**/*.c", "/**/*.cc", "/**/*.cpp", "/**/*.cxx", "/**/*.cu",
                    # settings files a model reads its sizes from (``config_v1.json``, ``configs/*.json``),
                    # not every JSON file: annotations and vocabularies are data, and large
                    "/**/*config*.json", "/**/configs/**/*.json", "/**/config/**/*.json")
_LICENSE_NAMES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING", "LICENSE.rst")
_LICENSE_HINTS = (
    ("Apache License", "Apache-2.0"),
    ("MIT License", "MIT"),
    ("Permission is hereby granted, free of charge", "MIT"),
    ("BSD 3-Clause", "BSD-3-Clause"),
    ("Redistribution and use in source and binary forms", "BSD"),
    ("GNU AFFERO GENERAL PUBLIC LICENSE", "AGPL-3.0"),
    ("GNU LESSER GENERAL PUBLIC LICENSE", "LGPL"),
    ("GNU GENERAL PUBLIC LICENSE", "GPL"),
    ("Mozilla Public License", "MPL-2.0"),
    ("Creative Commons", "CC"),
)


# -- licenses ------------------------------------------------------------------------------
def license_of_folder(root: Path) -> str | None:
    for name in _LICENSE_NAMES:
        path = root / name
        if path.is_file():
            return _license_of_file(path)
    return None


def _license_of_file(path: Path) -> str | None:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:4000]
    except OSError:
        return None
    for needle, spdx in _LICENSE_HINTS:
        if needle.lower() in head.lower():
            return spdx
    return "see " + path.name


def _license_of_dist_info(folder: Path) -> str | None:
    """From the license files a wheel carries in ``*.dist-info/`` (or ``licenses/`` below it), for
    metadata that names none."""
    for path in sorted([*folder.glob("LICEN[CS]E*"), *folder.glob("COPYING*"), *folder.glob("licenses/LICEN[CS]E*")]):
        if path.is_file():
            return _license_of_file(path)
    return None


def _license_of_metadata(meta: md.PackageMetadata) -> str | None:
    expr = meta.get("License-Expression")
    if expr:
        return expr
    lic = meta.get("License")
    if lic and len(lic) < 80 and "\n" not in lic:
        return lic
    for classifier in meta.get_all("Classifier") or []:
        if classifier.startswith("License ::"):
            return classifier.rsplit("::", 1)[-1].strip()
    return None


# -- git -----------------------------------------------------------------------------------
def _git(args: list[str], cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true")
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=True
        )
    except FileNotFoundError as exc:
        raise SourceError("git is not installed: install git to index git+ sources") from exc
    except subprocess.TimeoutExpired as exc:
        raise SourceError(f"git {args[0]} timed out after {timeout:.0f}s") from exc
    except subprocess.CalledProcessError as exc:
        raise SourceError(f"git {' '.join(args[:2])} failed: {exc.stderr.strip()[-500:]}") from exc
    return out.stdout.strip()


def git_head(root: Path) -> str | None:
    if not (root / ".git").exists():
        return None
    try:
        return _git(["rev-parse", "HEAD"], cwd=root, timeout=30)
    except SourceError:
        return None


def _clone_dir(spec: SourceSpec, base: Path) -> Path:
    digest = hashlib.sha1(f"{spec.location}@{spec.ref or ''}".encode()).hexdigest()[:10]
    return base / f"{spec.name}-{digest}"


def _is_commit(ref: str | None) -> bool:
    return ref is not None and re.fullmatch(r"[0-9a-f]{40}", ref) is not None


def _fetch_checkout(repo: Path, ref: str) -> str:
    _git(["fetch", "--quiet", "--depth", "1", "--filter=blob:none", "origin", ref], cwd=repo)
    _git(["checkout", "--quiet", "--force", "--detach", "FETCH_HEAD"], cwd=repo)
    return _git(["rev-parse", "HEAD"], cwd=repo)


def _widen_checkout(repo: Path) -> None:
    """A clone made with fewer sparse patterns gets the current ones; offline, where the files it
    lacks cannot be fetched, it stays as it is (its Python files are all there)."""
    current = repo / ".git" / "info" / "sparse-checkout"
    try:
        if current.read_text(encoding="utf-8").split() == list(_SPARSE_PATTERNS):
            return
        _git(["sparse-checkout", "set", "--no-cone", *_SPARSE_PATTERNS], cwd=repo)
    except (OSError, SourceError) as exc:
        log.info("%s: keeps its checkout (%s)", repo.name, exc)


def git_source(spec: SourceSpec, base: Path) -> Materialized:
    """Shallow, sparse clone (or update) of a git source under the home's cache."""
    repo = _clone_dir(spec, base)
    ref = spec.ref or "HEAD"
    note = None
    if not (repo / ".git").is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=repo.name + ".", dir=_ensure(base)))
        try:
            _git(["init", "--quiet", str(tmp)])
            _git(["remote", "add", "origin", spec.location], cwd=tmp)
            _git(["sparse-checkout", "set", "--no-cone", *_SPARSE_PATTERNS], cwd=tmp)
            commit = _fetch_checkout(tmp, ref)
        except SourceError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SourceError(f"cannot clone {spec.spec}: {exc}. Offline, only an existing clone can be used.") from exc
        _readable(tmp)
        tmp.rename(repo)  # only a complete clone takes the final name
        log.info("cloned %s at %s", spec.spec, commit[:12])
    else:
        _widen_checkout(repo)
        _readable(repo)  # cloned before sources were made readable
        commit = _git(["rev-parse", "HEAD"], cwd=repo, timeout=30)
        if not _is_commit(spec.ref):
            try:
                remote = _git(["ls-remote", "origin", ref], cwd=repo, timeout=60).split()
            except SourceError as exc:
                remote = []
                note = f"offline or unreachable ({exc}); using existing clone at {commit[:12]}"
                log.warning("%s: %s", spec.name, note)
            if remote and remote[0] != commit:
                commit = _fetch_checkout(repo, ref)
                note = f"updated to {commit[:12]}"
                log.info("%s: %s", spec.name, note)
    return Materialized(spec, repo, STYLE_PACKAGE, commit=commit, license=license_of_folder(repo), note=note)


# -- installed distributions -----------------------------------------------------------------
def dist_source(spec: SourceSpec) -> Materialized:
    try:
        dist = md.distribution(spec.location)
    except md.PackageNotFoundError as exc:
        raise SourceError(
            f"distribution {spec.location!r} is not installed in {sys.prefix}: pip install {spec.location}, "
            f"or index it with pypi:{spec.location} without installing it"
        ) from exc
    version = dist.version
    lic = _license_of_metadata(dist.metadata)
    if lic is None and isinstance(dist, md.PathDistribution):
        lic = _license_of_dist_info(Path(str(dist._path)))  # the dist-info folder itself
    relpaths = _record_paths(dist)
    editable_root = _editable_root(dist, relpaths)
    if editable_root is not None:
        m = Materialized(spec, editable_root, STYLE_PACKAGE, version=version, license=lic)
        files, issues = walk_tree(editable_root, spec.path_filter, spec.max_file_bytes)
        return m.with_listing(files, issues)
    root = Path(dist.locate_file("")).resolve()
    files, issues = list_files(root, relpaths, spec.path_filter, spec.max_file_bytes)
    return Materialized(spec, root, STYLE_PATH, version=version, license=lic).with_listing(files, issues)


def _record_paths(dist: md.Distribution) -> list[str]:
    """The installed files of a distribution, as POSIX paths relative to its root."""
    record = dist.read_text("RECORD")
    if record is not None:
        # Much cheaper than ``dist.files``, which builds a path object per row (31k for torch).
        return [row[0] for row in csv.reader(record.splitlines()) if row]
    return [str(f).replace("\\", "/") for f in (dist.files or [])]


def _editable_root(dist: md.Distribution, relpaths: list[str]) -> Path | None:
    """The project folder of an editable install, whose RECORD lists no sources."""
    if any(p.endswith(".py") for p in relpaths):
        return None
    raw = dist.read_text("direct_url.json")
    if not raw:
        return None
    try:
        info = json.loads(raw)
    except json.JSONDecodeError:
        return None
    url = info.get("url", "")
    if info.get("dir_info", {}).get("editable") and url.startswith("file://"):
        path = Path(url[7:])
        return path if path.is_dir() else None
    return None


# -- wheels and sdists -----------------------------------------------------------------------
def pypi_source(spec: SourceSpec, base: Path) -> Materialized:
    """Download a released wheel (sdist if there is none) with pip, and unpack it."""
    requirement = spec.location
    key = hashlib.sha1(requirement.encode()).hexdigest()[:10]
    download_dir = _ensure(base / "downloads" / f"{spec.name}-{key}")
    archive = _existing_archive(download_dir)
    note = None
    if archive is None:
        archive = _pip_download(requirement, download_dir)
    else:
        note = f"using cached {archive.name}"
    return archive_source(spec, archive, base / "unpacked", note=note)


def _existing_archive(folder: Path) -> Path | None:
    found = sorted(p for p in folder.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip", ".tgz")))
    return found[0] if found else None


def _pip_download(requirement: str, dest: Path) -> Path:
    """A released wheel of ``requirement``, downloaded by pip; else its newest sdist the
    requirement admits, fetched from the index as a file. pip would get an sdist by running the
    package's build backend (code from the internet), and stop where that build fails."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(dest), "--only-binary", ":all:",
           *os.environ.get("NNRAG_PIP_ARGS", "").split(), requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    found = _existing_archive(dest)
    if proc.returncode == 0 and found is not None:
        return found
    no_wheel = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
    try:
        return download(_newest_sdist(requirement), dest)
    except SourceError as exc:
        raise SourceError(f"cannot download {requirement!r}: no wheel ({no_wheel}); no sdist ({exc})") from exc


def _newest_sdist(requirement: str) -> ReleasedFile:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(requirement)
    except InvalidRequirement as exc:
        raise SourceError(f"not a requirement: {requirement!r}") from exc
    files = source_distributions(req.name)
    # a final release first, as pip picks; a pre-release where the requirement names one or nothing else fits
    for file in [f for f in files if not f.version.is_prerelease] + [f for f in files if f.version.is_prerelease]:
        if req.specifier.contains(file.version, prereleases=True):
            return file
    raise SourceError(f"the index has no sdist of {requirement}")


def archive_source(spec: SourceSpec, archive: Path, base: Path, note: str | None = None) -> Materialized:
    if not archive.is_file():
        raise SourceError(f"source {spec.name!r}: archive {archive} does not exist")
    digest = hashlib.sha1(archive.read_bytes()).hexdigest()[:12]
    target = base / f"{archive.name}-{digest}"
    if target.is_dir():
        _readable(target)  # unpacked before sources were made readable
    else:
        tmp = Path(tempfile.mkdtemp(prefix="unpack.", dir=_ensure(base)))
        try:
            _unpack(archive, tmp)
        except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SourceError(f"cannot unpack {archive.name}: {exc}") from exc
        _readable(tmp)
        tmp.rename(target)
    version = _version_from_archive_name(archive.name)
    if archive.name.endswith(".whl"):
        return Materialized(spec, target, STYLE_PATH, version=version, license=_wheel_license(target), note=note)
    children = [p for p in target.iterdir()]
    root = children[0] if len(children) == 1 and children[0].is_dir() else target  # sdists hold one folder
    return Materialized(spec, root, STYLE_PACKAGE, version=version, license=license_of_folder(root), note=note)


def _readable(folder: Path) -> None:
    """A source folder everyone may read (``mkdtemp`` makes it 0700): the gate runs a root
    build's candidates and usage harvests as the user nobody, who must import the source."""
    try:
        st = folder.stat()
        if st.st_mode & 0o777 == 0o700 and st.st_uid == os.getuid():
            folder.chmod(0o755)
    except OSError:
        pass


def _unpack(archive: Path, dest: Path) -> None:
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.infolist():
                if not _safe_member(member.filename):
                    continue
                zf.extract(member, dest)
        return
    with tarfile.open(archive) as tf:
        tf.extractall(dest, filter="data")  # refuses links out of dest, device files, absolute paths


def _safe_member(name: str) -> bool:
    parts = Path(name).parts
    return not (name.startswith("/") or ".." in parts)


def _version_from_archive_name(name: str) -> str | None:
    m = re.match(r"^[A-Za-z0-9_.]+?-(\d[^-]*?)(?:-|\.tar|\.zip|\.tgz)", name)
    return m.group(1) if m else None


def _wheel_license(root: Path) -> str | None:
    for meta in root.glob("*.dist-info/METADATA"):
        return _license_of_metadata(md.PathDistribution(meta.parent).metadata) or _license_of_dist_info(meta.parent)
    return None


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def materialize(spec: SourceSpec, cache_dir: Path) -> Materialized:
    """Make ``spec`` available on disk and list its Python files (no parsing)."""
    if spec.kind == KIND_LOCAL:
        root = Path(spec.location)
        if not root.is_dir():
            raise SourceError(f"source {spec.name!r}: folder {root} does not exist")
        m = Materialized(spec, root, STYLE_PACKAGE, commit=git_head(root), license=license_of_folder(root))
    elif spec.kind == KIND_GIT:
        m = git_source(spec, cache_dir / "git")
    elif spec.kind == KIND_DIST:
        return dist_source(spec)
    elif spec.kind == KIND_PYPI:
        m = pypi_source(spec, cache_dir / "pypi")
    elif spec.kind == KIND_ARCHIVE:
        m = archive_source(spec, Path(spec.location), cache_dir / "archives")
    else:  # pragma: no cover - parse_source makes only the kinds above
        raise ConfigError(f"unknown source kind {spec.kind!r}")
    files, issues = walk_tree(m.root, spec.path_filter, spec.max_file_bytes)
    return m.with_listing(files, issues)
