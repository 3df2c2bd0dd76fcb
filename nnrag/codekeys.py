"""Cache keys derived from the code that makes what they key.

A stored result (a gate verdict, a spec, a parse, a search row) stands only while the code that
made it is unchanged. Its key is a hash of that code: the stage's modules and every nnrag module
they import, read as syntax trees without docstrings, so a comment or a docstring changes no key
and any change of a rule does. Nobody bumps a number, so nobody can forget to.

Storage (``nnrag.db``) is left out: it keeps what a stage makes without deciding it, and a change
of what a table holds comes with a schema migration of its own.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

PACKAGE = Path(__file__).resolve().parent
_NOT_LOGIC = ("nnrag.db",)


def code_key(*roots: str, settings: tuple[str, ...] = (), base: Path = PACKAGE) -> str:
    """A 16-hex-digit key of the modules ``roots`` name (dotted: ``nnrag.validator`` is the whole
    package, ``nnrag.indexing.parse`` one module), the nnrag modules they import, transitively, and
    ``settings``. ``base`` is the ``nnrag`` package folder to read (another checkout in tests).

    The running package's files are read once per process: its code is what it imported, even if
    the files change on disk meanwhile. Another ``base`` is read afresh each time."""
    base = base.resolve()
    if base == PACKAGE:
        return _running_key(tuple(roots), tuple(settings))
    return _key(tuple(roots), tuple(settings), base, _read)


@cache
def _running_key(roots: tuple[str, ...], settings: tuple[str, ...]) -> str:
    return _key(roots, settings, PACKAGE, _read_once)


def _key(roots: tuple[str, ...], settings: tuple[str, ...], base: Path, read: Callable[[Path], _Read]) -> str:
    digest = hashlib.sha256()
    for name, path in sorted(modules(roots, base, read).items()):
        digest.update(f"{name}\0{read(path).digest}\0".encode())
    for setting in settings:
        digest.update(f"setting\0{setting}\0".encode())
    return digest.hexdigest()[:16]


def modules(roots: tuple[str, ...], base: Path = PACKAGE, read: Callable[[Path], _Read] | None = None) -> dict[str, Path]:
    """Dotted name -> file of every module a key over ``roots`` reads."""
    read = read or _read
    found: dict[str, Path] = {}
    todo = [m for root in roots for m in _expand(root, base)]
    while todo:
        name = todo.pop()
        if name in found or name.startswith(_NOT_LOGIC):
            continue
        path = _file(name, base)
        if path is None:
            continue
        found[name] = path
        for target, names in read(path).imports:
            absolute = _absolute(name, path, target)
            if absolute.split(".")[0] == "nnrag":
                todo.append(absolute)
                todo.extend(f"{absolute}.{n}" for n in names if _file(f"{absolute}.{n}", base) is not None)
    return found


def _file(name: str, base: Path) -> Path | None:
    """The file of module ``name`` under ``base`` (a package's ``__init__.py``), None if none."""
    here = base.joinpath(*name.split(".")[1:])
    for path in (here / "__init__.py", here.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _expand(root: str, base: Path) -> list[str]:
    """``root`` and, for a package, every module below it."""
    folder = base.joinpath(*root.split(".")[1:])
    if not folder.is_dir():
        return [root]
    return [root + "".join("." + p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__")
            for path in sorted(folder.rglob("*.py")) if "__pycache__" not in path.parts]


def _absolute(name: str, path: Path, target: str) -> str:
    """The dotted name an import in module ``name`` refers to (``target`` as ``_Read`` keeps it)."""
    level = len(target) - len(target.lstrip("."))
    if not level:
        return target
    parts = name.split(".")
    anchor = parts[: len(parts) - level + (path.name == "__init__.py")]
    return ".".join(anchor + ([target[level:]] if target[level:] else []))


@dataclass(frozen=True)
class _Read:
    digest: str  # of the syntax tree without docstrings or positions: what it does, not how it reads
    imports: tuple[tuple[str, tuple[str, ...]], ...]  # (module with its leading dots, names it takes)


def _read(path: Path) -> _Read:
    """One parse of a module serves both its digest and its imports (a key over the validator reads
    34 modules: 0.25 s)."""
    tree = ast.parse(path.read_bytes())
    imports: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.extend((a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.append(("." * node.level + (node.module or ""), tuple(a.name for a in node.names)))
        elif isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return _Read(hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest(), tuple(imports))


_read_once = cache(_read)
