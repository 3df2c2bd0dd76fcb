"""numba kernels of installed libraries: compiled once per environment in a confined child, then
found compiled by every check (nnrag/validator/kernels.py)."""

from __future__ import annotations

import base64
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

from nnrag.validator import kernels
from nnrag.validator.envs import _layered
from nnrag.validator.gate import Gate
from nnrag.validator.record import Limits

pytest.importorskip("numba")

# a library that compiles its kernel at import, as librosa's ``util`` does (a signature given)
LIBRARY = '''
import numba


@numba.njit("float64(float64)", cache=True)
def doubled(x):
    return 2.0 * x
'''

# the check fails unless numba found the kernel compiled: a cache hit, not a compile
CANDIDATE = '''
import torch
from torch import nn

import kernellib


class UsesKernel(nn.Module):
    def forward(self, x):
        hits = sum(kernellib.doubled.stats.cache_hits.values())
        assert hits >= 1, f"compiled here: {dict(kernellib.doubled.stats.cache_misses)}"
        return x * kernellib.doubled(1.0)
'''


def _environment_with_library(folder: Path) -> str:
    """A requirement environment (layered over this Python's, as nnrag makes them) holding a
    distribution that requires numba."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    assert _layered(folder)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(folder), "platbase": str(folder)}))
    (site / "kernellib").mkdir()
    (site / "kernellib" / "__init__.py").write_text(textwrap.dedent(LIBRARY))
    info = site / "kernellib-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kernellib\nVersion: 0.1\nRequires-Dist: numba\n")
    (info / "top_level.txt").write_text("kernellib\n")
    (info / "RECORD").write_text("")
    return str(folder / "bin" / "python")


def test_a_librarys_numba_kernels_are_compiled_once_per_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    python = _environment_with_library(tmp_path / "env")
    with Gate(1, Limits(timeout_s=30.0, memory_mb=2000), python=python) as gate:
        first = gate.check_code(CANDIDATE, "UsesKernel")
        second = gate.check_code(CANDIDATE, "UsesKernel")
    assert first.ok and second.ok, (first.message, second.message)
    kept = list((tmp_path / "cache" / "nnrag" / "numba").glob("*/**/*.nbi"))
    assert kept and any("kernellib" in str(p) for p in kept), kept


def test_kernels_sent_back_stay_inside_their_folder(tmp_path: Path) -> None:
    data = base64.b64encode(b"x").decode()
    for bad in ({"../escape.nbi": data}, {"/abs.nbi": data}, {"a/../../b": data}, {"ok.nbi": "not base64!"}, ["list"]):
        assert not kernels.store(tmp_path / "root", bad)
        assert not (tmp_path / "root").exists() and not (tmp_path / "escape.nbi").exists()
    assert kernels.store(tmp_path / "root", {"pkg_abc/f-1.py311.nbi": data})
    assert (tmp_path / "root" / "pkg_abc" / "f-1.py311.nbi").read_bytes() == b"x"
