"""Corpus files: a TOML list of sources, or the repository-list JSON of the ``nn-rag`` package.

TOML::

    [[source]]
    spec = "git+https://github.com/huggingface/pytorch-image-models@v1.0.15"
    name = "timm"                 # optional; derived from the spec
    priority = 1                  # lower is preferred when two sources define a module
    include = ["timm/layers", "timm/models"]
    exclude = ["**/_builder.py"]
    symbols = ["*Attention*", "BlurPool*"]   # keep only blocks whose class name matches
    default_excludes = true       # tests/, docs/, setup.py, ... (see nnrag.sourcing.spec)
    lends = false                 # true: only lends code to the other sources' blocks, its own are not built

nn-rag JSON::

    {"huggingface/pytorch-image-models": {"url": "https://github.com/huggingface/pytorch-image-models.git",
                                          "priority": 1, "paths": ["timm/models", "timm/layers"]}}
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .spec import DEFAULT_MAX_FILE_BYTES, SourceSpec, parse_source

_TOML_KEYS = {"spec", "name", "priority", "include", "exclude", "symbols", "default_excludes", "max_file_bytes", "lends"}


def load_corpus(path: str | Path) -> list[SourceSpec]:
    """Read a corpus file (``.toml`` or nn-rag ``.json``); relative local paths are relative to it."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read corpus file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
                          "a corpus file is TOML or JSON in UTF-8") from exc
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
        return _from_nnrag_json(data, path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    return _from_toml(data, path)


def _strings(value: Any, where: str, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _resolve_local(spec: str, base: Path) -> str:
    if spec.startswith(("git+", "dist:", "pypi:", "/", "~")):
        return spec
    candidate = base / spec
    return str(candidate) if candidate.exists() else spec


def _from_toml(data: dict[str, Any], path: Path) -> list[SourceSpec]:
    entries = data.get("source")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: expected one or more [[source]] tables")
    specs = []
    for i, entry in enumerate(entries, 1):
        where = f"{path}: source #{i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("spec"), str):
            raise ConfigError(f"{where}: needs spec = \"...\" (a path, git+URL, dist:NAME or pypi:REQ)")
        unknown = set(entry) - _TOML_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_TOML_KEYS)}")
        try:
            priority = int(entry.get("priority", 1))
            max_bytes = int(entry.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: priority and max_file_bytes must be integers") from exc
        specs.append(
            parse_source(
                _resolve_local(entry["spec"], path.parent),
                name=entry.get("name"),
                priority=priority,
                include=_strings(entry.get("include"), where, "include"),
                exclude=_strings(entry.get("exclude"), where, "exclude"),
                symbols=_strings(entry.get("symbols"), where, "symbols"),
                default_excludes=bool(entry.get("default_excludes", True)),
                max_file_bytes=max_bytes,
                lends=bool(entry.get("lends", False)),
            )
        )
    return specs


def _from_nnrag_json(data: Any, path: Path) -> list[SourceSpec]:
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path}: expected an object {{\"owner/name\": {{\"url\": ..., \"priority\": ..., \"paths\": [...]}}}}")
    specs = []
    for key, info in data.items():
        where = f"{path}: {key}"
        if not isinstance(info, dict) or not isinstance(info.get("url"), str):
            raise ConfigError(f"{where}: needs a \"url\"")
        url = info["url"]
        spec = url if url.startswith(("git+", "dist:", "pypi:")) else f"git+{url}"
        ref = info.get("ref") or info.get("branch")
        if ref and "@" not in spec.split("://", 1)[-1]:
            spec = f"{spec}@{ref}"
        specs.append(
            parse_source(
                spec,
                name=key.rsplit("/", 1)[-1],
                priority=int(info.get("priority", 1)),
                include=_strings(info.get("paths"), where, "paths"),
            )
        )
    return specs
