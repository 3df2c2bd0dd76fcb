"""Docstrings as summaries and search read them: the first sentence, and the prose without
examples or markup."""

from __future__ import annotations

import re


# where a sentence ends: after a full stop, question or exclamation mark and a space, not after
# "e.g.", "i.e." or "et al."
SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bet al\.)\s+")


def first_sentence(doc: str | None, limit: int = 240) -> str | None:
    """The docstring's first sentence: its first paragraph up to the first full stop, one line,
    markup reduced to words (``inline``)."""
    if not doc:
        return None
    para = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    para = " ".join(para.split())
    if not para or para.lower().startswith(("args", "arguments", "parameters", "example", ">>>")):
        return None
    sentence = SENTENCE_END.split(inline(para), maxsplit=1)[0]
    if not sentence:
        return None
    if len(sentence) > limit:
        sentence = sentence[: limit - 3].rsplit(" ", 1)[0] + "..."
    return sentence


# sections that show how to call a block or where it comes from, not what it does
_ASIDE_SECTIONS = frozenset(
    "example examples usage shape shapes convention conventions reference references raises see also todo".split())
_ASIDE_DIRECTIVES = frozenset("code-block code sourcecode image figure testcode testoutput doctest plot".split())
_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]{1,20}?)\s*:?$")
_DIRECTIVE = re.compile(r"^\.\.\s+([\w-]+)::")
_UNDERLINE = re.compile(r"^\s*[-=~^]{3,}\s*$")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_{0,2}")
_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`<]+?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]*)``")
_URL = re.compile(r"<?https?://\S+>?")
_CITATION = re.compile(r"\s*\[\d+\]_?")
_LATEX_WORDS = re.compile(r"\\(?:text|mathrm|textrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}")
_LATEX = re.compile(r"\\[A-Za-z]+|[{}]")


def inline(text: str) -> str:
    """``text`` with reST links, roles and literals reduced to their words, web links, citation
    marks and LaTeX commands dropped (``\\text{GraphConv}\\to\\text{Res}`` -> ``GraphConv Res``)."""
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text)))
    text = _LATEX.sub(" ", _LATEX_WORDS.sub(r" \1 ", text))
    return " ".join(_CITATION.sub("", text).split())


def prose(doc: str | None) -> str:
    """A docstring as words about the block, on one line: doctest sessions, the sections of
    examples, shapes, conventions, references and raised errors, and code directives left out;
    the rest ``inline``. A small text model reads a few hundred tokens, and kornia's
    ``TotalVariation`` docstring spent most of them on an example session."""
    if not doc:
        return ""
    lines = doc.expandtabs().splitlines()
    kept: list[str] = []
    skip_deeper: int | None = None  # inside an aside: skip lines indented deeper than this
    skip_all = doctest = False  # inside an underlined aside section; inside a doctest's output
    for i, line in enumerate(lines):
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        if not text:
            doctest = False
            continue
        underlined = i + 1 < len(lines) and bool(_UNDERLINE.match(lines[i + 1]))
        header, directive = _HEADER.match(text), _DIRECTIVE.match(text)
        if _UNDERLINE.match(line):
            continue
        if underlined and header:  # numpy style: the section runs to the next underlined header
            skip_all = header.group(1).lower() in _ASIDE_SECTIONS
            skip_deeper = None
            if skip_all:
                continue
        elif skip_deeper is not None and indent > skip_deeper:
            continue
        else:
            skip_deeper = None
            if header and text.endswith(":") and header.group(1).lower() in _ASIDE_SECTIONS:
                skip_deeper = indent
                continue
            if directive:
                if directive.group(1).lower() in _ASIDE_DIRECTIVES:
                    skip_deeper = indent
                continue
        if skip_all:
            continue
        if text.startswith(">>>") or doctest:
            doctest = True
            continue
        kept.append(text)
    return inline(" ".join(kept))
