"""The nnrag home: the one directory under which everything nnrag writes lives.

Resolution order: an explicit ``home`` argument (``--home`` on the CLI), then ``$NNRAG_HOME``,
then ``~/.nnrag``. Two homes share nothing, so two indexes never interfere.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError

HOME_ENV = "NNRAG_HOME"
_IN_USE: set[Path] = set()


def in_use() -> frozenset[Path]:
    """The homes this process has opened: the sandbox covers each of them wherever it lies, so a
    candidate never reads an index, a config with an API key, or another block's files."""
    return frozenset(_IN_USE)


def private_folder(path: Path) -> None:
    """``path`` and its missing parents; a folder made here is its owner's alone (0700). A folder
    that cannot be made (read-only, not ours) is a ConfigError; a full disk stays an OSError."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise
        raise ConfigError(f"cannot make the folder {path} ({exc.strerror}): give a home where you may write "
                          "(--home or NNRAG_HOME)") from exc


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
        _IN_USE.add(path)
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
        private_folder(self.home)
        return self
