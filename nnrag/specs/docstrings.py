"""The first sentence of a docstring, as summaries and search show it."""

from __future__ import annotations

import re


# where a sentence ends: after a full stop, question or exclamation mark and a space, not after
# "e.g.", "i.e." or "et al."
SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bet al\.)\s+")


def first_sentence(doc: str | None, limit: int = 240) -> str | None:
    """The docstring's first sentence: its first paragraph up to the first full stop, one line."""
    if not doc:
        return None
    para = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    para = " ".join(para.split())
    if not para or para.lower().startswith(("args", "arguments", "parameters", "example", ">>>")):
        return None
    sentence = SENTENCE_END.split(para, maxsplit=1)[0]
    if len(sentence) > limit:
        sentence = sentence[: limit - 3].rsplit(" ", 1)[0] + "..."
    return sentence
