"""What a source's README says about a class.

Small research packages document their blocks in one place: the README (or the long description
a wheel's ``METADATA`` carries), one section per technique, where the prose says what the code
never does ("they simply round each scalar into discrete levels with straight through gradients")
and the example beside it imports the class. That prose is what a search for the technique needs.

A class gets the prose of the first section that imports or builds it in an example, names it in
backticks or as an identifier (``FSQ``, ``PerceiverIO``; a capitalised word such as "Attention"
could be English and does not count), or is headed by its name (``Finite Scalar Quantization`` for
``FSQ``). Sections that name more than three of the source's classes are lists (a model zoo, a
changelog) and describe none; news, installation and citation sections are skipped; a class that
more than two sections name is a framework they use (``TransformerWrapper``), described only under
its own heading. A name several modules define goes to the one the section imports it from (through
a package's re-export), or to none. Links, images, tables, HTML and code are dropped from the prose.
A distribution's one-line ``Summary:`` is read too: it says what a small package's every block is
about. The README is corpus text: it is only read as data, never run.
"""

from __future__ import annotations

import functools
import hashlib
import keyword
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from ..indexing.resolve import absolute_module
from ..validator.usage.readme import FENCE, readme_files

_NOTE_CHARS = 500  # of a section's prose
_README_CHARS = 400_000  # read of a README: the largest in the wide corpus has 108,000
_MAX_CLASSES = 3  # a section naming more of the source's classes is a list (a model zoo, a changelog)
_MAX_SECTIONS = 2  # a class more sections name is a framework the sections use, not their subject
_UNTOLD = re.compile(r"\b(news|updates?|what'?s new|change ?log|releases?|citations?|cite|citing|install\w*|licen[cs]e|"
                     r"acknowledge?ments?|contribut\w*|todo|faq|benchmarks?|model zoo|overview|highlights?|quick ?start|"
                     r"getting started|contents|requirements|sponsors?|community|(jan|febr)uary|march|april|may|june|july|"
                     r"august|september|october|november|december|\d{4})\b", re.I)
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
_RST_RULE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_IMPORT = re.compile(r"^[ \t]*from[ \t]+(?P<module>[\w.]+)[ \t]+import[ \t]+(?:\((?P<group>[\w\s,]+)\)|(?P<line>[\w \t,]+))",
                     re.M)  # the names of one line, or of a parenthesised group
_CALL = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*\(")
_TICKED = re.compile(r"`+(?P<name>[A-Za-z_][\w.]*)(?:\(\))?`+")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_LINK_ONLY = re.compile(r"^\s*(?:[-*+]|\d+\.)\s*\[[^\]]*\]\([^)]*\)\s*$", re.M)  # a table-of-contents entry
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_DROP = [re.compile(p, re.M | re.S) for p in (  # comments, HTML, tables, RST directives, BibTeX, addresses, rules
    r"<!--.*?-->", r"<[^>]+>", r"^[ \t]*\|[^\n]*$", r"^[ \t]*\.\. [^\n]*(\n[ \t]+[^\n]*)*",
    r"@\w+\{.*?\n\}", r"https?://\S+", r"^[ \t]*[-=_*]{3,}[ \t]*$")]
_LITERAL = re.compile(r"::[ \t]*\n(?:[ \t]*\n)*(?:[ \t]+[^\n]*\n?(?:[ \t]*\n)*)+")  # an RST literal block
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(?<!\w)([`*_]{1,3})(\S[^\n]*?)\1(?!\w)")  # *a*, **a**, `a`; not the _ of snake_case


@dataclass(frozen=True)
class Section:
    title: str
    body: str  # everything under the heading, code included

    @functools.cached_property
    def prose(self) -> str:
        return prose(self.body)


def sections(text: str) -> list[Section]:
    """The text cut at its Markdown (``## Title``) and reStructuredText (a title underlined with
    ``====``) headings; headings inside fenced code do not count. A ``METADATA`` file's header
    lines (``Name: ...``) are left out."""
    if text.startswith("Metadata-Version:"):
        text = text.partition("\n\n")[2]
    lines = text.splitlines()
    out: list[Section] = []
    title, body = "", []
    fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        heading = None
        if not fence:
            if m := _MD_HEADING.match(line):
                heading = m["title"]
            elif line.strip() and i + 1 < len(lines) and _RST_RULE.match(lines[i + 1]) and \
                    len(lines[i + 1].strip()) >= len(line.strip()) and not _RST_RULE.match(line):
                heading = line.strip()
                i += 1
        if heading is not None:
            out.append(Section(title, "\n".join(body)))
            title, body = _LINK.sub(r"\1", heading).strip(), []
        else:
            body.append(line)
        i += 1
    out.append(Section(title, "\n".join(body)))
    return [s for s in out if s.title or s.body.strip()]


def prose(body: str) -> str:
    """The sentences of a section: code, RST directives and literal blocks, tables, images,
    HTML, citations and addresses dropped, links kept as their words."""
    text = FENCE.sub(" ", body)
    text = _LINK.sub(r"\1", _IMAGE.sub(" ", _LITERAL.sub(". ", text)))
    for pattern in _DROP:
        text = pattern.sub(" ", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = re.sub(r"^\s*>>>.*$", " ", text, flags=re.M)
    return " ".join(text.split())


def _identifier_like(name: str) -> bool:
    """``FSQ``, ``ViT``, ``PerformerLM``, ``conv_block``: a capital after the first letter, a digit
    or an underscore; ``Attention`` or ``Transformer`` could be an English word."""
    return any(c.isupper() or c.isdigit() or c == "_" for c in name[1:])


def mentions(body: str) -> list[tuple[str, str | None]]:
    """``(name, module)`` of what a section names, in order: imports (with the module they come
    from), then names called in its code, in backticks, or written as identifiers in its prose."""
    found: list[tuple[str, str | None]] = []
    for m in _IMPORT.finditer(body):
        found += [(n.split()[0], m["module"]) for n in (m["group"] or m["line"]).split(",") if n.strip()]  # ViT as V: ViT
    code = " ".join(m.group(0) for m in FENCE.finditer(body))
    found += [(m["name"], None) for m in _CALL.finditer(code) if not keyword.iskeyword(m["name"])]
    text = _LINK_ONLY.sub(" ", FENCE.sub(" ", body))
    found += [(m["name"].rsplit(".", 1)[-1], None) for m in _TICKED.finditer(text)]
    found += [(w, None) for w in _WORD.findall(prose(text)) if _identifier_like(w)]
    return found


@dataclass(frozen=True)
class _Read:
    key: str  # the README's digest ("" without one)
    notes: dict[tuple[str, str], str]  # (module, class name) -> the prose about it
    summary: str  # the distribution's one-line summary


_NONE = _Read("", {}, "")


class ReadmeNotes:
    """Per block, what its source's README says of it, and the distribution's summary; each
    source's README read once."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._sources: dict[str, _Read] = {}

    def note(self, source: str, module: str, name: str) -> str:
        """The README prose about class ``name`` of ``module`` in ``source`` ("" when none)."""
        return self._load(source).notes.get((module, name), "")

    def summary(self, source: str) -> str:
        """The one line a distribution's metadata says it is (``Summary: Implicit Neural
        Representations with Periodic Activation Functions``); "" for a source without metadata."""
        return self._load(source).summary

    def key(self, source: str) -> str:
        """What the notes of ``source`` were read from: its README's digest ("" without one)."""
        return self._load(source).key

    def _load(self, source: str) -> _Read:
        if source not in self._sources:
            self._sources[source] = self._read(source)
        return self._sources[source]

    def _read(self, source: str) -> _Read:
        row = self.conn.execute("SELECT id, root FROM sources WHERE name=?", (source,)).fetchone()
        if row is None or not row["root"]:
            return _NONE
        modules = {r["module"]: (r["id"], r["path"].endswith("__init__.py")) for r in self.conn.execute(
            "SELECT id, module, path FROM files WHERE source_id=? AND module IS NOT NULL", (row["id"],))}
        try:
            paths = readme_files(Path(row["root"]), sorted({m.split(".")[0] for m in modules}))
            text = paths[0].read_text(encoding="utf-8", errors="replace")[:_README_CHARS] if paths else ""
        except OSError:
            return _NONE
        if not text:
            return _NONE
        # a wheel's METADATA or an sdist's PKG-INFO: RFC 822 headers, then the long description
        summary = prose(HeaderParser().parsestr(text).get("Summary") or "")[:200] if text.startswith("Metadata-Version:") else ""
        classes: dict[str, list[str]] = {}  # class name -> the modules defining a block of that name
        for r in self.conn.execute("SELECT b.name, f.module FROM blocks b JOIN files f ON f.id=b.file_id "
                                   "WHERE b.source_id=? AND f.module IS NOT NULL", (row["id"],)):
            classes.setdefault(r["name"], []).append(r["module"])
        by_fold: dict[str, list[str]] = {}  # a name folded as headings are (``fsq``) -> the class names
        for name in classes:
            by_fold.setdefault(_fold(name), []).append(name)
        told: list[tuple[Section, list[tuple[str, str]]]] = []
        for section in sections(text):
            if len(section.prose) < 40 or _UNTOLD.search(section.title):  # a bare example; news, installation, citations
                continue
            named = [(n, None) for key in _title_keys(section.title) for n in by_fold.get(key, [])]
            owners = list(dict.fromkeys((owner, name) for name, module in named + mentions(section.title + "\n" + section.body)
                                        if (owner := self._owner(classes.get(name, []), name, module, modules))))
            if len(owners) <= _MAX_CLASSES:
                told.append((section, owners))
        sections_naming = Counter(owner for _, owners in told for owner in owners)
        notes: dict[tuple[str, str], str] = {}
        for section, owners in told:
            note = _cut(f"{section.title}: {section.prose}" if section.title else section.prose)
            for owner in owners:
                # a class every example builds (a wrapper, a base model) is described only under its own heading
                if sections_naming[owner] <= _MAX_SECTIONS or _fold(owner[1]) in _title_keys(section.title):
                    notes.setdefault(owner, note)
        return _Read(hashlib.sha1(text.encode()).hexdigest(), notes, summary)

    def _owner(self, defined_in: list[str], name: str, imported_from: str | None,
               modules: dict[str, tuple[int, bool]]) -> str | None:
        """The module whose class ``name`` a mention means: the only one, or the one imported from
        (directly, or through the package that re-exports it)."""
        if len(defined_in) == 1:
            return defined_in[0]
        if not defined_in or imported_from is None:
            return None
        if imported_from in defined_in:
            return imported_from
        found = modules.get(imported_from)
        if found is None:
            return None
        file_id, is_package = found
        for r in self.conn.execute("SELECT module, level FROM imports WHERE file_id=? AND name=?", (file_id, name)):
            if (target := absolute_module(imported_from, is_package, r["level"], r["module"])) in defined_in:
                return target
        return None


def _fold(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _title_keys(title: str) -> set[str]:
    """The class names, folded, a heading is: ``Finite Scalar Quantization`` is ``FSQ`` (its
    initials) or ``FiniteScalarQuantization``; ``The Wrapper`` is ``Wrapper``; ``Flash Attention``
    is not ``Attention``."""
    words = re.sub(r"^(the|an?)\s+", "", title.strip(), flags=re.I).split()
    keys = {_fold("".join(words))}
    if len(words) > 1:
        keys.add(_fold("".join(w[0] for w in words)))
    return keys - {""}


def _cut(text: str) -> str:
    if len(text) <= _NOTE_CHARS:
        return text
    return text[:_NOTE_CHARS].rsplit(" ", 1)[0] + " ..."
