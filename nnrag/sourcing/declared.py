"""What a source declares it requires: the names of the distributions its code needs installed.

Read from what the source ships, never by running it: a wheel's ``*.dist-info/METADATA``, and a
repository's ``requirements*.txt`` (with the files they include by ``-r``), ``pyproject.toml``'s
``[project] dependencies``, ``setup.cfg``'s ``install_requires`` and the literal
``install_requires=[...]`` of a ``setup.py`` (parsed, not executed). Names only: a repository's
pins are often for a torch and a Python this machine cannot have. A requirement named by URL
(``git+https://...``) is not on the package index and is left out.
"""

from __future__ import annotations

import ast
import configparser
import importlib.metadata as md
import re
import tomllib
from pathlib import Path
from typing import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

_MAX_BYTES = 1_000_000  # a requirements file larger than this is not one


def declared_requirements(root: Path) -> list[str]:
    """The distribution names ``root`` declares for this interpreter, without extras, sorted."""
    return sorted({name for line in _declared_lines(root) if (name := _name(line)) is not None})


def _declared_lines(root: Path) -> list[str]:
    """Every requirement line ``root`` declares, extras' marked as a wheel's metadata marks them."""
    lines: list[str] = []
    for meta in sorted(root.glob("*.dist-info/METADATA")):
        lines += md.PathDistribution(meta.parent).requires or []
    seen: set[Path] = set()
    listed = sorted(root.glob("requirements*.txt")) or sorted(root.glob("requirements/*.txt"))
    for path in listed:
        lines += _requirement_lines(root, path, seen)
    return lines + _pyproject(root / "pyproject.toml") + _setup_cfg(root / "setup.cfg") + _setup_py(root / "setup.py")


def declared_names(root: Path) -> list[str]:
    """Every distribution name ``root`` declares, extras' too, in the order declared."""
    names: dict[str, None] = {}
    for line in _declared_lines(root):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.url is None:
            names.setdefault(req.name)
    return list(names)


def import_names(root: Path) -> dict[str, str]:
    """Import names the distributions ``root`` declares may be named for, extras' too: where pip
    cannot install the distribution an import is spelt as, because that name of the package
    index belongs to an unrelated project (``pyro`` is not ``pyro-ppl``), the source's own
    declaration says which one it means. A distribution may be named for the import spelt like
    it (``linear-operator`` for ``linear_operator``), for the first word of its name (``pyro-ppl``
    for ``pyro``), and an extra requiring one distribution for the extra's name (gpytorch's
    ``pyro`` extra requires ``pyro-ppl``). Loose on purpose: it is read only after pip failed."""
    spelt: dict[str, str] = {}
    first_word: dict[str, str] = {}
    by_extra: dict[str, set[str]] = {}
    for line in _declared_lines(root):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.url is not None:
            continue
        name = canonicalize_name(req.name)
        spelt.setdefault(name.replace("-", "_"), req.name)
        if "-" in name:
            first_word.setdefault(name.split("-", 1)[0], req.name)
        extra = _EXTRA.search(str(req.marker or ""))
        if extra:
            by_extra.setdefault(canonicalize_name(extra.group(1)).replace("-", "_"), set()).add(req.name)
    extras = {e: next(iter(names)) for e, names in by_extra.items() if len(names) == 1}
    return {**first_word, **extras, **spelt}


_EXTRA = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")


def _name(line: str) -> str | None:
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    if req.url is not None or not (req.marker is None or req.marker.evaluate({"extra": ""})):
        return None
    return req.name


def _text(root: Path, path: Path) -> str | None:
    """A file of the source, never one a link leads out of it to."""
    try:
        resolved = path.resolve()
        if not resolved.is_relative_to(root.resolve()) or not resolved.is_file() or resolved.stat().st_size > _MAX_BYTES:
            return None
        return resolved.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _requirement_lines(root: Path, path: Path, seen: set[Path]) -> list[str]:
    """The requirements of a pip requirements file and of those it includes (``-r other.txt``), leaving out those for docs, tests and linting."""
    if path.resolve() in seen or not _for_running(path) or (text := _text(root, path)) is None:
        return []
    seen.add(path.resolve())
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            out += _requirement_lines(root, path.parent / line.split(None, 1)[1].strip(), seen)
        elif line and not line.startswith(("#", "-")) and "://" not in line:
            out.append(line)
    return out


# requirement files for building docs, testing and linting: not what the code needs to run
_NOT_FOR_RUNNING = {"doc", "docs", "readthedocs", "test", "tests", "testing", "dev", "lint", "ci", "style"}


def _for_running(path: Path) -> bool:
    return not _NOT_FOR_RUNNING & set(path.stem.lower().replace("-", "_").split("_"))


def _pyproject(path: Path) -> list[str]:
    """``[project] dependencies``, and those of its optional dependencies, each marked with its
    extra as a wheel's metadata marks it."""
    try:
        data = tomllib.loads(_text(path.parent, path) or "")
    except tomllib.TOMLDecodeError:
        return []
    project = data.get("project", {})
    found = project.get("dependencies", [])
    out = [d for d in found if isinstance(d, str)] if isinstance(found, list) else []
    optional = project.get("optional-dependencies", {})
    for extra, deps in optional.items() if isinstance(optional, dict) else ():
        out += [f'{d}; extra == "{extra}"' for d in deps if isinstance(d, str) and ";" not in d] if isinstance(deps, list) else []
    return out


def _setup_cfg(path: Path) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(_text(path.parent, path) or "")
    except configparser.Error:
        return []
    value = parser.get("options", "install_requires", fallback="")
    return [line.strip() for line in value.splitlines() if line.strip()]


def _setup_py(path: Path) -> list[str]:
    """The strings of ``install_requires=`` in a ``setup(...)`` call: a literal list, or a name the
    module binds to one."""
    try:
        tree = ast.parse(_text(path.parent, path) or "")
    except (SyntaxError, ValueError):
        return []
    bound = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "install_requires":
                    value = bound.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
                    return list(_strings(value))
    return []


def _strings(node: ast.expr) -> Iterable[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                yield e.value


# a GitHub repository, as ``git+https://github.com/o/r.git`` or a link in prose or a comment
_GITHUB_REPOSITORY = re.compile(r"(git\+)?https://github\.com/([\w.-]+)/([\w-]+(?:\.[\w-]+)*?)(?:\.git)?(?=[/\s'\"#@)\]>`]|$)")
_MENTIONING = (".md", ".rst", ".txt", ".cfg", ".toml", ".py")


def repository_of(root: Path, name: str) -> str | None:
    """The GitHub repository the source at ``root`` names for distribution ``name``, which no package
    index has (detectron2, installed from its repository): a ``git+`` requirement or install line
    whose repository is named for it, else a link to such a repository in the source's documents
    and comments near its root (Mask2Former's ``GETTING_STARTED.md`` links
    ``https://github.com/facebookresearch/detectron2``). None when it names none; read as text."""
    wanted = canonicalize_name(name)
    found: dict[str, bool] = {}  # repository -> named as a git+ requirement
    files = [p for depth in ("*", "*/*") for p in sorted(root.glob(depth)) if p.suffix in _MENTIONING]
    for path in files:
        text = _text(root, path)
        for m in _GITHUB_REPOSITORY.finditer(text or ""):
            if canonicalize_name(m.group(3)) == wanted:
                url = f"https://github.com/{m.group(2)}/{m.group(3)}"
                found[url] = found.get(url, False) or bool(m.group(1))
    if not found:
        return None
    return max(found, key=lambda url: (found[url], -list(found).index(url)))
