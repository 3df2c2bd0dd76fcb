"""The nnrag home: the one directory under which everything nnrag writes lives.

Resolution order: an explicit ``home`` argument (``--home`` on the CLI), then ``$NNRAG_HOME``,
then ``~/.nnrag``. Two homes share nothing, so two indexes never interfere.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError

HOME_ENV = "NNRAG_HOME"


def safe_name(text: str) -> str:
    """``text`` as one file-name component: letters, digits, ``_.-`` kept, anything else (a
    slash, a space) an underscore, no leading dot (so never ``..``)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", text).lstrip(".")
    return name or "_"


@dataclass(frozen=True)
class Workspace:
    """Paths inside one nnrag home."""

    home: Path

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None) -> "Workspace":
        if home is None:
            home = os.environ.get(HOME_ENV) or Path.home() / ".nnrag"
        path = Path(home).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise ConfigError(f"the nnrag home {path} is a file, not a folder: give --home a folder (or NNRAG_HOME)")
        return cls(path)

    @property
    def index_path(self) -> Path:
        return self.home / "index.sqlite3"

    @property
    def cache_dir(self) -> Path:
        """Downloaded or cloned corpus sources (git clones, unpacked wheels)."""
        return self.home / "cache"

    def inside(self, relative: str | os.PathLike[str]) -> Path:
        """``home / relative``, refused (ValueError) when it resolves outside the home: paths
        read from the database are data, and an absolute one or ``..`` must not escape."""
        path = (self.home / relative).resolve()
        if not path.is_relative_to(self.home):
            raise ValueError(f"{relative} is outside the home {self.home}")
        return path

    def ensure(self) -> "Workspace":
        self.home.mkdir(parents=True, exist_ok=True)
        return self
