"""Requirement environments: a block whose third-party requirements are not installed here is
validated in a virtual environment that has them, made once per requirement set under
``HOME/envs/`` and reused.

The environment is layered over this one: a ``.pth`` file puts this Python's site-packages on its
path, so torch and nnrag are not downloaded again and pip installs only what is missing (pip sees
the layered distributions as installed). Installing runs a package's own build code only when no
wheel exists, as any ``pip install`` does; nothing is installed unless the user asks
(``nnrag build --requirements install``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..workspace import Workspace

log = logging.getLogger(__name__)

REQUIREMENTS = ("off", "install")
_LAYER = "zz_nnrag_parent.pth"  # last in the environment's site-packages: this Python's come after its own
_PIP_TIMEOUT_S = 900.0
# Import names the mapping pipreqs maintains (data/import_names.txt) lacks, and cv2's headless build
# (the one that imports without a display server's libraries).
_NOT_IN_MAPPING = {
    "cv2": "opencv-python-headless", "skimage": "scikit-image", "attr": "attrs", "pkg_resources": "setuptools",
    "mpl_toolkits": "matplotlib",
}


@dataclass(frozen=True)
class Environment:
    """A requirement environment: its interpreter, or why it could not be made."""

    requirements: tuple[str, ...]
    python: str | None
    error: str | None = None


def check_requirements(mode: str) -> str:
    if mode not in REQUIREMENTS:
        raise ConfigError(f"requirements must be one of {', '.join(REQUIREMENTS)}, not {mode!r}")
    return mode


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def missing_module(message: str, dotted: bool = False) -> str | None:
    """The top-level module an import error names (``No module named 'cv2.x'`` -> ``cv2``); with
    ``dotted``, the whole name (``cv2.x``)."""
    m = _NO_MODULE.search(message)
    return (m.group(1) if dotted else m.group(1).split(".")[0]) if m else None


def distribution_for(module: str) -> str | None:
    """The PyPI distribution that provides an import name (``cv2`` -> ``opencv-python-headless``);
    None for a private module (``_k2``): the compiled part of a distribution named otherwise, and
    spelt as a distribution it would reach pip as an option (``-k2``)."""
    if module.startswith("_"):
        return None
    return _NOT_IN_MAPPING.get(module) or _import_names().get(module) or module.replace("_", "-")


@functools.cache
def _import_names() -> dict[str, str]:
    """pipreqs' mapping of import names to distributions (``sklearn`` -> ``scikit-learn``)."""
    text = (Path(__file__).parent / "data" / "import_names.txt").read_text(encoding="utf-8")
    pairs = (line.split(":", 1) for line in text.splitlines() if line and not line.startswith("#") and ":" in line)
    return {name.strip(): distribution.strip().replace("_", "-") for name, distribution in pairs}


# Distributions whose import needs a display server's libraries; their headless builds provide the same modules.
_HEADLESS = {"opencv-python": "opencv-python-headless", "opencv-contrib-python": "opencv-contrib-python-headless"}


def to_install(names: list[str], corpus: frozenset[str]) -> set[str]:
    """Of declared requirement names, those an environment must add: not installed here, not a
    package of the corpus (never installed), headless where a build needs a display."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    skip = {canonicalize_name(p) for p in corpus}
    wanted: set[str] = set()
    for name in names:
        if canonicalize_name(name) in skip:
            continue
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            wanted.add(_HEADLESS.get(canonicalize_name(name), name))
    return wanted


def _key(requirements: tuple[str, ...]) -> str:
    return hashlib.sha1("\n".join(requirements).encode()).hexdigest()[:16]


def _python_of(folder: Path) -> Path:
    return folder / "bin" / "python"


def _marker(workspace: Workspace, requirements: tuple[str, ...]) -> Path:
    return workspace.home / "envs" / _key(tuple(sorted(set(requirements)))) / "nnrag-env.json"


def site_packages(workspace: Workspace, requirements: tuple[str, ...]) -> Path | None:
    """The site-packages folder of the environment of ``requirements``, if it was made."""
    if made(workspace, requirements) is not True:
        return None
    found = sorted((_marker(workspace, requirements).parent / "lib").glob("python*/site-packages"))
    return found[0] if found else None


def made(workspace: Workspace, requirements: tuple[str, ...]) -> bool | None:
    """Whether the environment of ``requirements`` was made (True), pip could not install it
    (False, and it is not tried again), or it was never tried (None)."""
    marker = _marker(workspace, requirements)
    if not marker.exists():
        return None
    return bool(json.loads(marker.read_text(encoding="utf-8")).get("ok"))


def _layered(folder: Path) -> bool:
    """Layer the environment in ``folder`` over this Python's site-packages, again if it was layered
    over others: a virtual environment made again or moved leaves the old path in the layer, and
    the environment without torch. False when the environment's interpreter is gone or of another
    version, whose site-packages this one's cannot serve."""
    cfg = folder / "pyvenv.cfg"
    if not _python_of(folder).exists() or not cfg.exists():
        return False
    settings = dict(line.split("=", 1) for line in cfg.read_text(encoding="utf-8").splitlines() if "=" in line)
    version = {k.strip(): v.strip() for k, v in settings.items()}
    if platform.python_version() not in (version.get("version"), version.get("version_info")):
        return False
    here = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    # after the environment's own site-packages, so what pip installs there wins; as site dirs,
    # so their own .pth files (editable installs) work there too
    text = "".join(f"import site; site.addsitedir({p!r})\n" for p in here)
    layer = Path(sysconfig.get_path("purelib", vars={"base": str(folder), "platbase": str(folder)})) / _LAYER
    if not layer.exists() or layer.read_text(encoding="utf-8") != text:
        layer.write_text(text, encoding="utf-8")
    return True


def environment(workspace: Workspace, requirements: tuple[str, ...]) -> Environment:
    """The environment with ``requirements`` installed (made on first use, then reused); a failed
    install is recorded beside it with pip's last line, and not tried again for the same set."""
    requirements = tuple(sorted(set(requirements)))
    marker = _marker(workspace, requirements)
    folder = marker.parent
    if marker.exists():
        state = json.loads(marker.read_text(encoding="utf-8"))
        if not state.get("ok"):
            return Environment(requirements, None, state.get("error"))
        if _layered(folder):
            return Environment(requirements, str(_python_of(folder)))
        log.info("the environment of %s was made by another Python: making it again", ", ".join(requirements))
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp)
        _layered(tmp)
        error = _pip_install(_python_of(tmp), requirements, workspace.home / "envs" / _UNBUILDABLE)
    except (OSError, subprocess.SubprocessError) as e:
        error = f"{type(e).__name__}: {e}"
    state = json.dumps({"requirements": list(requirements), "ok": error is None, "error": error})
    shutil.rmtree(folder, ignore_errors=True)
    if error is None:
        (tmp / marker.name).write_text(state, encoding="utf-8")
        os.replace(tmp, folder)
        return Environment(requirements, str(_python_of(folder)))
    shutil.rmtree(tmp, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text(state, encoding="utf-8")
    log.warning("cannot install %s: %s", ", ".join(requirements), error)
    return Environment(requirements, None, error)


def _pip_install(python: Path, requirements: tuple[str, ...], unbuildable: Path) -> str | None:
    """Install into the environment with this Python's pip; None on success, else pip's reason.

    A source distribution whose ``setup.py`` imports torch to decide what to build (mmcv 1.x,
    whose release without compiled ops is pure Python) fails in pip's isolated build
    environment, which has no torch. Where a build failed, the set is installed once more built
    against the environment itself (torch and setuptools of the layer below); if
    that fails too, the first reason stands, and the distributions whose builds failed are noted
    in ``unbuildable``, so that no other set that holds them tries again."""
    proc = _pip(python, requirements)
    if proc.returncode == 0:
        return None
    reason = pip_reason(proc.stderr) or f"pip exited {proc.returncode}"
    if not _BUILD_FAILED.search(proc.stderr):
        return reason
    from packaging.utils import canonicalize_name

    failed = {canonicalize_name(a or b) for a, b in _BUILD_OF.findall(proc.stderr)}
    known = set(json.loads(unbuildable.read_text(encoding="utf-8"))) if unbuildable.exists() else set()
    if failed and failed <= known:
        return reason
    try:
        if _pip(python, ("setuptools",)).returncode == 0 \
                and _pip(python, requirements, "--no-build-isolation", timeout_s=_UNISOLATED_TIMEOUT_S).returncode == 0:
            log.info("built %s against the environment's own torch", ", ".join(sorted(failed)) or "the set")
            return None
    except subprocess.TimeoutExpired:  # compiling kernels for minutes: what fails in isolation fails here too
        pass
    unbuildable.parent.mkdir(parents=True, exist_ok=True)
    unbuildable.write_text(json.dumps(sorted(known | failed)), encoding="utf-8")
    return reason


# the build failed, or pip could not make its isolated build environment (offline: no setuptools)
_BUILD_FAILED = re.compile(r"Failed to build|Failed building wheel|metadata-generation-failed|install build dependencies")
_BUILD_OF = re.compile(r"Failed to build '([\w.-]+)'|Failed building wheel for ([\w.-]+)")
_UNBUILDABLE = "unbuildable.json"  # distributions that built neither in isolation nor against an environment
# a build that needs only the environment's torch is Python and takes seconds; one that compiles
# C++/CUDA kernels on two cores takes tens of minutes and rarely ends well without a GPU toolkit
_UNISOLATED_TIMEOUT_S = 300.0


def _pip(python: Path, requirements: tuple[str, ...], *options: str,
         timeout_s: float = _PIP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    extra = os.environ.get("NNRAG_PIP_ARGS", "").split()
    # requirements come from the corpus: after "--" none of them is read as an option of pip's
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check",
           *extra, *options, "--", *requirements]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)


def pip_reason(stderr: str) -> str | None:
    """pip's one-line reason for a failed install, naming the distribution where pip does: its last
    ``ERROR:`` line ("Failed to build 'mmcv' ...", "No matching distribution found for detectron2"),
    else its ``error:`` kind with the package it points at ("metadata-generation-failed: py3nj"),
    never the closing hint ("See above for details")."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    errors = [line for line in lines if line.startswith("ERROR:")]
    if errors:
        return errors[-1]
    kind = next((line.removeprefix("error:").strip() for line in lines if line.startswith("error:")), None)
    pointed = [line.split(">", 1)[1].strip() for line in lines if line.startswith("╰─>")]
    if kind and pointed:
        return f"{kind}: {', '.join(pointed)}"
    return kind or (lines[-1] if lines else None)


def named_in(reason: str | None, requirements: tuple[str, ...]) -> list[str]:
    """The requirements pip's ``reason`` names as the ones it could not install."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    if not reason:
        return []
    words = {canonicalize_name(w) for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", reason)}
    named = []
    for requirement in requirements:
        try:
            name = Requirement(requirement).name
        except InvalidRequirement:
            continue
        if canonicalize_name(name) in words:
            named.append(requirement)
    return named


def widest_environment(workspace: Workspace, required: tuple[str, ...],
                       optional: tuple[str, ...]) -> tuple[Environment, dict[str, str]]:
    """The environment of ``required`` and as many of ``optional`` as pip installs (a package's
    declared requirements, some of which never build here): a set pip refuses is tried again
    without the optional distributions its reason names, then with ``required`` alone (with none
    required, this interpreter). Returns the environment and the optional ones left out, each with
    pip's reason."""
    optional = tuple(sorted(set(optional) - set(required)))
    dropped: dict[str, str] = {}
    while optional:
        env = environment(workspace, (*required, *optional))
        if env.python is not None:
            return env, dropped
        named = named_in(env.error, optional) or list(optional)  # none named: none of them, then
        dropped.update((n, env.error or "") for n in named)
        optional = tuple(o for o in optional if o not in named)
    # nothing required: this interpreter, not an environment with nothing installed
    return (environment(workspace, required) if required else Environment((), sys.executable)), dropped
