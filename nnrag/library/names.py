"""Which blocks a build takes: a names file (``--names``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigError, NotFoundError


def read_names(path: str | os.PathLike[str]) -> set[str]:
    """Block names from a JSON list (the ``nn-rag`` names format) or a text file, one per line.
    A missing or unreadable file, malformed JSON, or a file that names nothing is an error: a
    build over "no names" would report 0 of 0 and look like success."""
    file = Path(path)
    if not file.is_file():
        raise NotFoundError(f"names file {path} does not exist" if not file.exists() else f"names file {path} is not a file")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read names file {path}: {e}") from None
    if text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
        if isinstance(data, dict):
            data = data.get("names") or list(data)
        if not isinstance(data, list):
            raise ConfigError(f"{path}: expected a JSON list of block names")
        names = {str(x).strip() for x in data if str(x).strip()}
    else:
        names = {line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}
    if not names:
        raise ConfigError(f"{path} names no blocks")
    return names
