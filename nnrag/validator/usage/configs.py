"""Registry configs: packages built on a registry (mmengine's, the convention of the OpenMMLab
packages) ship no model factories; their models are Python config files (``model = dict(type=
'ATSS', backbone=dict(type='ResNet', depth=50), bbox_head=dict(type='ATSSHead', loss_cls=...))``,
with ``_base_`` files they extend) that the package's registry builds. Those files know the
structured arguments (loss, coder and assigner configs, channel lists) no guess finds. Found
statically here, a few configs that together name every model type the files name; run by the
harvest like a model factory.
"""

from __future__ import annotations

import ast
from pathlib import Path

from . import covering_files, files_under

CONFIG_UNIT = "<config>"  # a harvest unit of this name builds the model of the config file it names
_FOLDER = "configs"
_MAX_FILES = 5000  # a source with more is read in part
_MAX_BYTES = 200_000


def config_files(root: Path) -> list[Path]:
    """Python files under folders named ``configs`` (or ``..._configs``) of ``root`` (``.mim/configs`` of a wheel too),
    in path order; links are not followed, so every file lies inside ``root``."""
    return files_under(root, _in_configs, _MAX_FILES)


def _in_configs(folder: Path, name: str) -> bool:
    return name.endswith(".py") and any(part == _FOLDER or part.endswith("_" + _FOLDER) for part in folder.parts)


def _type_name(value: ast.expr) -> str | None:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.split(".")[-1]  # 'mmdet.CrossEntropyLoss' names CrossEntropyLoss of scope mmdet
    if isinstance(value, ast.Name):  # new-style configs import the class: type=ATSS
        return value.id
    if isinstance(value, ast.Attribute):
        return value.attr
    return None


def model_types(text: str) -> set[str] | None:
    """The types a config's ``model = ...`` names (``type=`` keywords and ``'type'`` keys of its
    value); None when the file assigns no model."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    model = next((st.value for st in tree.body if isinstance(st, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "model" for t in st.targets)), None)
    if model is None:
        return None
    types: set[str] = set()
    for node in ast.walk(model):
        pairs: list[tuple[str | None, ast.expr]] = []
        if isinstance(node, ast.Call):
            pairs = [(k.arg, k.value) for k in node.keywords]
        elif isinstance(node, ast.Dict):
            pairs = [(k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None, v)
                     for k, v in zip(node.keys, node.values)]
        types.update(t for key, value in pairs if key == "type" and (t := _type_name(value)))
    return types


def choose(root: Path, limit: int) -> list[str]:
    """Up to ``limit`` config files (paths relative to ``root``) that together name the most model
    types: each next file is the one naming most types not yet named, the shorter on a tie."""
    return covering_files(root, config_files(root), model_types, limit, _MAX_BYTES)
