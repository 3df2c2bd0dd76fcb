"""README examples: the Python code blocks of a source's README (or of the long description a
wheel's ``METADATA`` carries) show how its authors build and call the models, wrappers included
(``MAE(encoder=ViT(...))``, ``AutoregressiveWrapper(TransformerWrapper(...))``), which neither a
guess nor a factory function finds. Found statically here, each block a harvest unit; run by the
harvest (see harvest.py) in the sandbox like a docstring's examples.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

README_UNIT = "<readme>"  # a harvest unit named so runs code block N of the file "PATH#N"

_NAMES = ("README.md", "README.rst", "README.markdown", "README.txt", "README", "readme.md", "Readme.md")
# a fenced block of a Markdown text (its language and body named), also used to leave code out of prose
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
                    re.M | re.S)
_PYTHON = {"python", "py", "python3", "pycon", ""}
_MAX_BLOCKS = 200


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def readme_files(root: Path, packages: list[str]) -> list[Path]:
    """The README at a source's root, else the long description in the metadata of the
    distribution of ``packages`` there: the one folder's, or in a ``site-packages`` the one named
    after a package or listing it in ``top_level.txt``."""
    found = [root / n for n in _NAMES if (root / n).is_file()]
    if found:
        return found[:1]
    if (root / "PKG-INFO").is_file():
        return [root / "PKG-INFO"]
    infos = sorted(p for p in root.glob("*.dist-info") if (p / "METADATA").is_file())
    wanted = {_normal(p) for p in packages}

    def ours(info: Path) -> bool:
        top = info / "top_level.txt"
        listed = top.read_text(errors="replace").split() if top.is_file() else []
        return _normal(info.name.split("-")[0]) in wanted or bool(wanted & {_normal(t) for t in listed})

    chosen = infos if len(infos) == 1 else [i for i in infos if ours(i)]
    return [i / "METADATA" for i in chosen[:1]]


def code_blocks(text: str) -> list[str]:
    """The fenced Python blocks of a Markdown text that parse, dedented, in order."""
    out: list[str] = []
    for m in FENCE.finditer(text):
        if m.group("lang").lower() not in _PYTHON:
            continue
        indent = len(m.group("indent"))
        body = "".join(line[indent:] if line[:indent].isspace() else line for line in m.group("body").splitlines(True))
        body = "\n".join(line[4:] if line.startswith((">>> ", "... ")) else line for line in body.splitlines())
        try:
            ast.parse(body)
        except (SyntaxError, ValueError):
            continue
        out.append(body)
        if len(out) >= _MAX_BLOCKS:
            break
    return out


def imported_modules(block: str, packages: list[str]) -> list[str]:
    """The modules of ``packages`` a block imports, in order: imported before it runs, so that the
    harvest's recorder wraps their classes first."""
    out: list[str] = []
    for node in ast.walk(ast.parse(block)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        out += [n for n in names if n.split(".")[0] in packages and n not in out]
    return out


def blocks_using(blocks: list[str], packages: list[str], names: set[str]) -> list[int]:
    """The indices of the code blocks that import one of ``packages`` and name one of ``names``
    (the classes still waiting for usage; every such block when ``names`` is empty)."""
    out = []
    for i, block in enumerate(blocks):
        if imported_modules(block, packages) and (not names or any(re.search(rf"\b{re.escape(n)}\b", block) for n in names)):
            out.append(i)
    return out
