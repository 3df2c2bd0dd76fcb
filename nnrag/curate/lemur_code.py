"""LEMUR's model code, read as data: the ``ab/nn/nn/*.py`` files of an ``nn-dataset`` wheel (a zip)
or of a folder (an unpacked wheel, a checkout, or the ``nn`` folder itself). Never imported."""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

from ..errors import NotFoundError

_MODELS = "ab/nn/nn/"
_MAX_BYTES = 2_000_000  # a model file larger than this is data, not a model


def _model_name(member: str) -> str | None:
    path = PurePosixPath(member)
    if path.suffix != ".py" or path.name == "__init__.py" or len(path.parts) < 2 or "/".join(path.parts[-4:-1]) != _MODELS.rstrip("/"):
        return None
    return path.name


def lemur_models(path: str | Path) -> dict[str, str]:
    """LEMUR's model files (file name -> text) from a wheel or folder."""
    root = Path(path).expanduser()
    out: dict[str, str] = {}
    if root.is_file() and zipfile.is_zipfile(root):
        with zipfile.ZipFile(root) as z:
            for info in z.infolist():
                name = _model_name(info.filename)
                if name and info.file_size <= _MAX_BYTES:
                    out[name] = z.read(info).decode("utf-8", errors="replace")
    elif root.is_dir():
        folder = root if not (root / _MODELS).is_dir() else root / _MODELS
        for file in sorted(folder.glob("*.py")):
            if file.name != "__init__.py" and file.is_file() and not file.is_symlink() and file.stat().st_size <= _MAX_BYTES:
                out[file.name] = file.read_text(encoding="utf-8", errors="replace")
    else:
        raise NotFoundError(f"{root} is neither an nn-dataset wheel nor a folder")
    if not out:
        raise NotFoundError(f"{root} holds no LEMUR model files ({_MODELS}*.py)")
    return dict(sorted(out.items()))


def installed_models() -> Path | None:
    """The model folder of the installed ``nn-dataset`` (found without importing it), if any."""
    import importlib.util

    spec = importlib.util.find_spec("ab")
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "nn" / "nn"
        if folder.is_dir():
            return folder
    return None
