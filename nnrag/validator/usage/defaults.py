"""Default configs: repositories whose blocks take one config object (``ResNet(cfg)``, ``build(args)``)
keep its defaults in code, as a yacs ``CfgNode`` (``_C = CfgNode(); _C.MODEL.DEPTH = 50`` and a
``get_cfg()`` that clones it), an ``EasyDict``, or an ``argparse`` parser whose defaults are the
settings (``get_args_parser()``). A stand-in that answers every attribute with a number cannot
say that ``cfg.MODEL`` is a section; the repository's own defaults can.

A harvest unit named ``<defaults>`` imports a module that defines such defaults, makes the config
objects it holds or returns, and builds with each the failing classes (and the builder functions
of their modules) whose one required parameter is a config, with the recorder on. Modules are
found in the source text, so planning costs no import.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from ...indexing.attributes import read_off
from ..probing.source import keys_off, source_tree
from . import covering_files, files_under

DEFAULTS_UNIT = "<defaults>"
CONFIG_PARAMETERS = ("config", "cfg", "args", "opt", "opts", "hparams", "params", "conf", "configs", "hp")
_MARKS = re.compile(r"\bCfgNode\b|\bCN\(\)|\bEasyDict\b|\bedict\(|\bArgumentParser\(")
_PROVIDER = re.compile(r"cfg|config|args|parser|defaults|options|opts", re.I)


# A yacs override file: every top-level key upper case (``MODEL:``, ``TRAIN:``), as merge_from_file reads it
_TOP_KEY = re.compile(r"^([A-Za-z_][\w.]*)\s*:", re.M)
_STRING_SETTING = re.compile(r"^\s*([A-Z][A-Z0-9_]*)\s*:\s*['\"]?([A-Za-z_][\w.-]*)['\"]?\s*$", re.M)
_OVERRIDE_BYTES = 100_000


def settings_named(text: str) -> set[str] | None:
    """The string settings a yacs override file makes (``NAME=seg_hrnet``, ``ARCH=slowfast``);
    None for any other YAML."""
    tops = _TOP_KEY.findall(text)
    if not tops or not all(t.isupper() for t in tops):
        return None
    return {f"{key}={value}" for key, value in _STRING_SETTING.findall(text)}


def choose_overrides(root: Path, limit: int) -> list[str]:
    """Up to ``limit`` yacs override files of ``root`` (paths relative to it) that together make
    the most different string settings: the experiments a repository keeps beside its defaults
    (``experiments/cityscapes/seg_hrnet_w48.yaml``), each naming a model's settings the defaults
    leave empty."""
    return covering_files(root, files_under(root, lambda folder, name: name.endswith((".yaml", ".yml")), 2000),
                          settings_named, limit, _OVERRIDE_BYTES)


def defines_defaults(text: str) -> bool:
    """Whether a module's source makes a config of the kinds above."""
    return bool(_MARKS.search(text))


def _config_like(value: Any) -> bool:
    """A settings object read by attribute: a yacs node or an EasyDict (dicts whose keys are also
    attributes), or an ``argparse.Namespace``."""
    if isinstance(value, argparse.Namespace):
        return True
    if not (isinstance(value, dict) and type(value) is not dict and value):
        return False
    key = next(iter(value))
    return isinstance(key, str) and key.isidentifier() and hasattr(value, key)


def default_configs(module: Any) -> list[Any]:
    """The config objects ``module`` holds or its zero-argument functions named for configs return
    (a parser's defaults for a parser), the largest first: the whole settings before a section."""
    found: list[Any] = [v for name, v in vars(module).items() if not name.startswith("__") and _config_like(v)]
    for name, fn in list(vars(module).items()):
        if not (inspect.isfunction(fn) and fn.__module__ == module.__name__ and _PROVIDER.search(name)):
            continue
        try:
            if any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                   for p in inspect.signature(fn).parameters.values()):
                continue
            made = fn()
            if isinstance(made, argparse.ArgumentParser):
                made = made.parse_known_args([])[0]
        except (Exception, SystemExit):  # a parser with a required option exits
            continue
        if _config_like(made):
            found.append(made)
    unique = {id(v): v for v in found}
    return sorted(unique.values(), key=lambda v: -len(vars(v) if isinstance(v, argparse.Namespace) else v))


def _merged(config: Any, path: str) -> Any:
    """A copy of a yacs config with the override file at ``path`` merged in; None when it is not
    a yacs config or the file does not fit it (a key the defaults do not have)."""
    if not callable(getattr(config, "merge_from_file", None)) or not callable(getattr(config, "clone", None)):
        return None
    try:
        merged = config.clone()
        if callable(getattr(merged, "defrost", None)):
            merged.defrost()
        merged.merge_from_file(path)
    except Exception:  # noqa: BLE001 - a file for another config, or for a newer version of it
        return None
    return merged


def _takes_config(fn: Any) -> bool:
    """Whether the one required parameter of ``fn`` (a class's constructor or a function) is a
    config: named as one, or read by attribute or key where it is taken (``h.upsample_rates``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(required) != 1:
        return False
    name = required[0].name
    if name.lower() in CONFIG_PARAMETERS:
        return True
    tree = source_tree(fn.__init__ if inspect.isclass(fn) else fn)
    return tree is not None and bool(read_off([tree], {name}) or keys_off(tree, {name}))


def settings_object(settings: Any) -> Any:
    """Settings read from a file or a parser as the code reads them: keys as attributes too, in
    every section (an ``AttrDict``, a parsed ``Namespace``)."""
    from .recipes import AttributeDict  # the harvest's side: torch is imported there

    if isinstance(settings, dict):
        return AttributeDict((k, settings_object(v)) for k, v in settings.items())
    if isinstance(settings, list):
        return [settings_object(v) for v in settings]
    return settings


def _builders(module: Any) -> list[Callable[..., Any]]:
    """Public functions of a failing class's module that take one config (``build(args)``,
    ``build_model(cfg)``): they build the class with the rest of what it needs."""
    return [fn for name, fn in vars(module).items() if inspect.isfunction(fn) and fn.__module__ == module.__name__
            and not name.startswith("_") and "build" in name.lower() and _takes_config(fn)]


def run_defaults(module_name: str, modules: list[str], names: list[str], wrap: Callable[[], None],
                 exercise: Callable[[Any], str | None], overrides: Sequence[str] = (),
                 settings: Sequence[dict[str, Any]] = ()) -> str | None:
    """Build the classes named ``names`` of ``modules`` (the failing blocks) that take one config,
    and the builder functions of those modules, with the first default config of ``module_name``
    that builds each (then those defaults with each yacs override file of ``overrides`` merged,
    then the repository's ``settings``, see settings.py), and run what they make once; the first
    error, or None when each ran."""
    try:
        configs = default_configs(importlib.import_module(module_name))
    except Exception:  # noqa: BLE001 - a module of the failing classes that does not import: the settings still build the others
        if not settings:
            raise
        configs = []
    configs += [merged for path in overrides for config in configs if (merged := _merged(config, path)) is not None]
    configs += [settings_object(s) for s in settings]
    if not configs:
        return "no default configs"
    todo: list[Callable[..., Any]] = []
    first: str | None = None
    for module_path in modules:
        try:
            module = importlib.import_module(module_path)
        except Exception as e:  # noqa: BLE001 - the other modules still run
            first = first or f"{module_path}: {type(e).__name__}: {e}"[:300]
            continue
        for name in names:
            obj = getattr(module, name, None)
            if inspect.isclass(obj) and obj.__module__ == module_path and _takes_config(obj) and obj not in todo:
                todo.append(obj)
        todo += [fn for fn in _builders(module) if fn not in todo]
    if not todo:
        return first or "no failing class takes a config"
    wrap()  # the modules are loaded: their classes record from here on
    for build in todo:
        error: str | None = "not built"
        for config in configs:
            try:
                made = build(config)
            except Exception as e:  # noqa: BLE001 - another config may build it
                error = f"{getattr(build, '__name__', build)}: {type(e).__name__}: {e}"[:300]
                continue
            made_list = made if isinstance(made, (tuple, list)) else [made]
            model = next((m for m in made_list if callable(getattr(m, "forward", None))), None)
            error = exercise(model) if model is not None else None
            break
        first = first or error
    return first
