"""What a package's documentation says about the config fields a block reads.

Libraries that build every block from one model config (``def __init__(self, config)``) leave the
block without parameters or a docstring; the technique's parts are named only by the fields it
reads (``config.num_landmarks``), and the package documents those fields once, in the config
class's docstring: "num_landmarks (`int`): The number of landmark (or Nystrom) points to use in
Nystrom approximation of the softmax self-attention matrix." That sentence is what a search for
the technique needs. Fields are looked up in the docstrings of the classes of the block's own
package (the block's module and its siblings), config classes first.
"""

from __future__ import annotations

import re
import sqlite3

_ARG = re.compile(r"^(?P<indent>[ \t]*)\**(?P<name>[A-Za-z_]\w*)(?P<type>\s*\([^)\n]*\))?(?P<sep>\s*):\s*(?P<rest>.*)$")
_NOTE_CHARS = 240  # of each field's description
_MAX_FIELDS = 8  # described per block, in the order its code first reads them


def argument_docs(docstring: str) -> dict[str, str]:
    """``name -> description`` of the arguments a Google-, Hugging Face- or NumPy-style docstring
    documents: a line ``name (type): text`` or ``name : type`` and the more indented lines under it."""
    docs: dict[str, str] = {}
    lines = docstring.expandtabs().splitlines()
    for i, line in enumerate(lines):
        m = _ARG.match(line)
        if m is None:
            continue
        indent = len(m["indent"])
        numpy_style = bool(m["sep"]) and not m["type"]  # "name : type", the description below
        body: list[str] = [] if numpy_style else [m["rest"]]
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt.strip())
        text = " ".join(" ".join(body).split())
        if text and m["name"] not in docs:
            docs[m["name"]] = text
    return docs


def _package_docs(conn: sqlite3.Connection, source: str, package: str) -> dict[str, str]:
    """Every argument documented by a class of ``package`` (a module's parent) in ``source``,
    config classes' descriptions winning over others'."""
    rows = conn.execute(
        "SELECT d.name, d.docstring FROM definitions d JOIN files f ON f.id = d.file_id JOIN sources s ON s.id = f.source_id"
        " WHERE s.name = ? AND d.kind = 'class' AND d.docstring IS NOT NULL"
        " AND (f.module = ? OR f.module LIKE ? ESCAPE '\\')",
        (source, package, package.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ".%")).fetchall()
    docs: dict[str, str] = {}
    for row in sorted(rows, key=lambda r: (not r["name"].endswith("Config"), r["name"])):
        for name, text in argument_docs(row["docstring"]).items():
            docs.setdefault(name, text)
    return docs


class PackageDocs:
    """The argument documentation of one database's packages, each package read once."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._docs: dict[tuple[str, str], dict[str, str]] = {}

    def notes(self, source: str, module: str, fields: list[str]) -> str:
        """``field: description`` for the config ``fields`` a block of ``module`` reads that its
        package documents, in one paragraph."""
        if not fields or not module:
            return ""
        package = module.rsplit(".", 1)[0] if "." in module else module
        if (source, package) not in self._docs:
            self._docs[(source, package)] = _package_docs(self.conn, source, package)
        return _notes(self._docs[(source, package)], fields)


def _notes(docs: dict[str, str], fields: list[str]) -> str:
    notes = [f"{f}: {docs[f][:_NOTE_CHARS]}" for f in fields if f in docs]
    return " ".join(n if n.endswith(".") else n + "." for n in notes[:_MAX_FIELDS])
