"""Settings a repository keeps outside its code: hyperparameter files (a ``config_v1.json`` read
into an attribute dict and handed to ``Generator(h)``, a YAML file of model parameters) and the
options the ``argparse`` parser of a script declares with their defaults
(``parser.add_argument('--d_model', type=int, default=512)`` under ``if __name__ == "__main__":``,
parsed into the ``configs`` a model takes). A stand-in that answers every attribute with a guess
cannot say that ``h.upsample_rates`` is a list of four strides that multiply to the hop length;
the repository's own settings can.

Found statically when the harvest is planned, in nnrag's process (no file of the source is read
in the sandbox for them): the settings that together hold the most of the keys the failing
classes read off their parameters (``h.resblock_kernel_sizes``, ``config["d_model"]``). The
``<defaults>`` unit builds each failing class that takes one config with them, beside the
configs the source's code makes (see defaults.py).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Iterable

from ...indexing.attributes import read_off
from ..probing.source import keys_off
from . import files_under, module_tree

_MAX_FILES = 2000
_MAX_BYTES = 100_000
_MIN_KEYS = 3  # fewer is a record, not a model's settings
_MIN_SHARED = 2  # keys the failing classes read that a settings object must hold


def _settings(value: Any) -> bool:
    """A mapping whose keys are all names (``resblock_kernel_sizes``), as settings read by attribute."""
    return isinstance(value, dict) and len(value) >= _MIN_KEYS and all(isinstance(k, str) and k.isidentifier() for k in value)


def _sections(document: Any) -> list[dict[str, Any]]:
    """``document`` and the sections nested in it (``model_params:`` of a training file), each a
    settings object of its own: a block may take the whole or one part."""
    found: list[dict[str, Any]] = []
    todo = [document]
    while todo:
        value = todo.pop(0)
        if _settings(value):
            found.append(value)
            todo += [v for v in value.values() if isinstance(v, dict)]
    return found


def _file_settings(path: Path) -> list[dict[str, Any]]:
    """The settings objects of a JSON or YAML file; none when it does not parse or holds none."""
    try:
        if path.stat().st_size > _MAX_BYTES:
            return []
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".json":
            document = json.loads(text)
        else:
            import yaml

            document = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - a file of another format under a settings suffix
        return []
    try:
        json.dumps(document)  # what the harvest is handed: YAML's dates and sets are no settings
    except (TypeError, ValueError):
        return []
    return _sections(document)


def parser_defaults(text: str) -> dict[str, Any] | None:
    """The options a module's ``argparse`` parsers declare, each with its default (``None`` when it
    has none, ``False`` for ``store_true``), under the name ``parse_args`` gives it; None when
    the module declares fewer than three or does not parse."""
    tree = module_tree(text) if "add_argument(" in text else None
    if tree is None:
        return None
    options: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        long = next((f for f in flags if f.startswith("--")), None)
        dest = keywords.get("dest")
        name = dest.value if isinstance(dest, ast.Constant) and isinstance(dest.value, str) else \
            (long or (flags[0] if flags and not flags[0].startswith("-") else "")).lstrip("-").replace("-", "_")
        if not name.isidentifier():
            continue
        action = keywords.get("action")
        action = action.value if isinstance(action, ast.Constant) else None
        default: Any = None
        if "default" in keywords:
            try:
                default = ast.literal_eval(keywords["default"])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue  # a default computed at run time: the parser's, not ours to guess
        elif action in ("store_true", "store_false"):
            default = action == "store_false"
        options.setdefault(name, default)
    return options if len(options) >= _MIN_KEYS else None


def keys_read(text: str, classes: set[str]) -> set[str]:
    """The attributes and string keys the constructors of ``classes`` in a module's source read off
    their parameters (``h.upsample_rates``, ``config["d_model"]``)."""
    tree = module_tree(text)
    if tree is None:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name in classes):
            continue
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            continue
        params = {a.arg for a in (*init.args.args[1:], *init.args.kwonlyargs)}
        found |= read_off([init], params) | set(keys_off(init, params))
    return found


def choose_settings(root: Path | None, modules: Iterable[str], wanted: set[str], limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` settings objects of a source, from the JSON and YAML files under ``root`` and
    the parsers of the source's ``modules`` (their texts), that together hold the most of the
    ``wanted`` keys: each next one holds most not held yet, the smaller on a tie; one that holds
    fewer than two is none."""
    if not wanted:
        return []
    candidates: list[dict[str, Any]] = []
    if root is not None:
        for path in files_under(root, lambda folder, name: name.endswith((".json", ".yaml", ".yml")), _MAX_FILES):
            candidates += _file_settings(path)
    candidates += [options for text in modules if (options := parser_defaults(text))]
    chosen: list[dict[str, Any]] = []
    covered: set[str] = set()
    while candidates and len(chosen) < limit:
        best = max(candidates, key=lambda s: (len((set(s) & wanted) - covered), -len(s)))
        if len(set(best) & wanted) < _MIN_SHARED or not (set(best) & wanted) - covered:
            break
        chosen.append(best)
        covered |= set(best) & wanted
        candidates.remove(best)
    return chosen
