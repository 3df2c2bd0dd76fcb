"""The two text views of a block that search indexes: the dense one the embedder reads (short,
most telling first) and the lexical one BM25 reads (every field, in full)."""

from __future__ import annotations

from .abbreviations import expand, expand_only
from .lexical import LexicalDoc, split_words
from .techniques import describe
from ..specs.build import SpecBundle
from ..specs.docstrings import SENTENCE_END, prose

_DOC_CHARS = 600  # docstring characters in the dense text view: the model reads 256 tokens


def dense_text(b: SpecBundle) -> str:
    """What the embedder reads, most telling first, since the model stops at 256 tokens: name
    words, summary, mechanisms, the docstring as prose (no example sessions or markup) or else the
    comments above the class, and what the source's README says of the class, then category,
    module, parameters, config notes, the module's names and docstring, and last the torch
    operations (of the whole standalone file, its helpers included)."""
    s = b.spec
    params = ", ".join(p.name for p in s.constructor if p.name not in ("device", "dtype"))
    words = split_words(s.name)
    module_doc, _, names = b.context.partition(" | ")
    spelled = expand_only(" ".join(split_words(w) for w in names.split()))
    parts = [f"{expand(words)}.", *(f"{d}." for d in describe(words)), s.summary,
             f"Does: {'; '.join(m.rstrip('.') for m in s.mechanisms)}." if s.mechanisms else "",
             # the comments above an undocumented class say what it is where a docstring would
             prose(b.docstring)[:_DOC_CHARS] or b.heading, b.readme,
             f"Category: {s.category}." if s.category else "", f"Module: {split_words(s.provenance.module)}.",
             f"Parameters: {params}." if params else "",
             # notes here only: in the lexical view every block of a model matched its config's words
             b.notes[:_DOC_CHARS], f"Context: {spelled}." if spelled else "", module_doc[:200],
             f"Uses: {', '.join(s.operations[:12])}." if s.operations else ""]
    return _once(parts)


def _once(parts: list[str]) -> str:
    """The parts joined, each sentence said once: a summary often opens with the docstring's
    first sentence, a wrapper's docstring with its function's, and the model stops at 256 tokens."""
    said: set[str] = set()
    kept: list[str] = []
    for sentence in (x for p in parts if p for x in SENTENCE_END.split(p)):
        key = " ".join(sentence.lower().rstrip(".").split())
        if key not in said:
            said.add(key)
            kept.append(sentence)
    return " ".join(kept)


def lexical_doc(b: SpecBundle) -> LexicalDoc:
    s = b.spec
    names = b.identifiers + [p.name for p in s.constructor] + s.operations
    module_doc, _, context = b.context.partition(" | ")
    # what the defining module is about (its docstring, the abbreviations its names spell) counts as docs
    about = expand_only(" ".join(split_words(w) for w in context.split()))
    words = split_words(s.name)
    return LexicalDoc(
        block_id=s.id, name=f"{s.name} {expand(words)}", module=split_words(s.provenance.module),
        # the class's comments here only: in the dense view they pushed the telling parts out of its 256 tokens
        doc=" ".join(filter(None, [*describe(words), s.summary, *s.mechanisms, b.docstring or "", b.heading, *b.comments,
                                   b.readme, module_doc, about])),
        identifiers=expand(" ".join(split_words(w) for w in names + context.split())),
    )
