"""Which blocks a build takes: a names file (``--names``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import NnragError


def read_names(path: str | os.PathLike[str]) -> set[str]:
    """Block names from a JSON list (the ``nn-rag`` names format) or a text file, one per line."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}
    if isinstance(data, dict):
        data = data.get("names") or list(data)
    if not isinstance(data, list):
        raise NnragError(f"{path}: expected a JSON list of block names")
    return {str(x) for x in data}
