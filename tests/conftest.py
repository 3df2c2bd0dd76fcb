from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def write_wheel(folder: Path, name: str, files: dict[str, str | bytes], version: str = "1.0", metadata: str = "",
                metadata_version: str = "2.1") -> Path:
    """A pure-Python wheel in ``folder`` holding ``files`` (path in the wheel -> text); ``metadata``
    ends its METADATA (more headers, or a blank line and the long description)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: {metadata_version}\nName: {name}\nVersion: {version}\n{metadata}")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


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


@pytest.fixture(scope="session")
def search_lib(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A home built from the search fixture repositories: library, specs, FTS5 and Chroma index."""
    import nnrag

    src = tmp_path_factory.mktemp("search_src")
    for name in ("search_repo", "search_mirror"):
        shutil.copytree(FIXTURES / name, src / name)
    home = tmp_path_factory.mktemp("search_home")
    report = nnrag.build([str(src / "search_repo"), str(src / "search_mirror")], home=home, limits=search_limits())
    return {"home": home, "src": src, "report": report}


def search_limits() -> object:
    from nnrag.validator.record import Limits

    return Limits(timeout_s=8.0, cpu_s=20, memory_mb=2048)
