from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty nnrag home for one test."""
    path = tmp_path / "home"
    return path


@pytest.fixture
def forms_repo(tmp_path: Path) -> Path:
    """A writable copy of the import-forms fixture repository."""
    dest = tmp_path / "forms_repo"
    shutil.copytree(FIXTURES / "forms_repo", dest)
    return dest


def run_cli(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the real ``nnrag`` entry point in a subprocess."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "nnrag", *args], capture_output=True, text=True, env=full_env, timeout=600
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"nnrag {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc
