"""Kernels that installed libraries compile with numba, compiled once per environment.

numba compiles a library's kernels when the library is imported (librosa's ``util`` and ``filters``
declare theirs with signatures) and caches them beside nothing a fresh process can reuse: every
sandboxed check starts with an empty cache of its own, so every check of an audio block paid
10-40 s for librosa before its constructor ran. Here the kernels are compiled once per
environment, in a confined child like any check, by importing the modules of the installed
distributions that require numba (never a module of the corpus); what numba cached there comes
back over the result channel as data, is written under the user's cache folder keyed by the
environment, and is copied into each later check's own cache folder before its child starts.

Trust: the cache holds what those installed libraries compiled of their own code; numba runs it
only inside later checks of the same environment, whose candidates import those libraries
anyway. Paths are checked to stay inside the cache folder; nothing is followed.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import os
import pkgutil
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

KERNELS_TASK = "kernels"
CACHE_NAME = ".numba"  # the folder of a check that NUMBA_CACHE_DIR names (see server._child)
COMPILE_S = 240.0  # for all of an environment's libraries, once
_MAX_FILES = 5000
_MAX_BYTES = 256 << 20
_SAFE_PART = re.compile(r"^[\w.\-]+$")


def _numba_users(dists: list[md.Distribution] | None = None) -> list[str]:
    """Top-level packages of the installed distributions that require numba, read off their
    metadata (nothing is imported)."""
    users = set()
    for dist in md.distributions() if dists is None else dists:
        requires = dist.requires or []  # an extra's requirement (pandas's "performance") is not installed for it
        if any(re.match(r"numba\b", r.strip(), re.IGNORECASE) and "extra" not in r.partition(";")[2] for r in requires):
            users.add(dist.metadata["Name"])
    tops = md.packages_distributions() if users else {}
    return sorted(top for top, names in tops.items() if users & set(names) and top.isidentifier())


def cache_root() -> Path | None:
    """Where this environment's compiled kernels are kept; None where numba is not installed or
    no installed distribution uses it."""
    if importlib.util.find_spec("numba") is None:
        return None
    dists = list(md.distributions())
    if not _numba_users(dists):
        return None
    versions = sorted(f"{d.metadata['Name']}=={d.version}" for d in dists)
    key = hashlib.sha1("\n".join([sys.prefix, sys.version, *versions]).encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "nnrag" / "numba" / key


def compile_all(deadline_s: float = COMPILE_S) -> dict[str, str]:
    """In the confined child: import every module of the distributions that use numba, then
    return what numba cached, as {relative path: base64}."""
    until = time.monotonic() + deadline_s
    for top in _numba_users():
        _import_quietly(top)
        package = sys.modules.get(top)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []) or [], f"{top}.", onerror=lambda _: None):
            if time.monotonic() > until:
                break
            if not re.search(r"\.(?:tests?|testing|conftest|__main__)\b", info.name):
                _import_quietly(info.name)
    folder = Path(os.environ.get("NUMBA_CACHE_DIR", CACHE_NAME))
    files: dict[str, str] = {}
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            files[str(path.relative_to(folder))] = base64.b64encode(path.read_bytes()).decode()
    return files


def _import_quietly(name: str) -> None:
    try:
        importlib.import_module(name)
    except BaseException:  # noqa: BLE001 - a module that needs what is absent here compiles nothing
        pass


def store(root: Path, files: Any) -> bool:
    """Write the kernels a confined child sent (data: relative paths to base64) under ``root``;
    False when they are not what :func:`compile_all` sends."""
    if not isinstance(files, dict) or len(files) > _MAX_FILES:
        return False
    decoded: dict[Path, bytes] = {}
    total = 0
    for name, text in files.items():
        parts = name.split("/") if isinstance(name, str) else []
        if not parts or not all(_SAFE_PART.match(p) and p not in (".", "..") for p in parts) or not isinstance(text, str):
            return False
        try:
            data = base64.b64decode(text, validate=True)
        except ValueError:
            return False
        total += len(data)
        if total > _MAX_BYTES:
            return False
        decoded[Path(*parts)] = data
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root.parent))
    for relative, data in decoded.items():
        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
        (staging / relative).write_bytes(data)
    try:
        os.rename(staging, root)
    except OSError:  # another worker stored them first
        shutil.rmtree(staging, ignore_errors=True)
    return True


def ensure(root: Path, compile_in_child: Callable[[], Any]) -> bool:
    """The kernels of ``root``'s environment, compiled by ``compile_in_child`` (a confined run of
    :func:`compile_all`) unless another worker has, one worker at a time; whether they exist now."""
    if root.is_dir():
        return True
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not root.is_dir():
            files = compile_in_child()
            if not (files and store(root, files)):
                root.mkdir(exist_ok=True)  # nothing to keep: later workers do not try again
    return root.is_dir()


def seed(root: Path, folder: Path) -> None:
    """Copy the environment's kernels into a check's folder, where its numba looks for them."""
    shutil.copytree(root, folder / CACHE_NAME, symlinks=False, dirs_exist_ok=True)
