"""Cross-source closure: a block of one indexed source that imports another indexed source
(borrower_repo imports baselib from lender_repo) is copied whole, with both provenances."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nnrag
from conftest import FIXTURES, search_limits

RUN = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from block import DetHead
out = DetHead()(torch.randn(2, 16, 8, 8))
print(tuple(out.shape))
"""


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    src = tmp_path_factory.mktemp("src")
    repos = {name: src / name for name in ("lender_repo", "borrower_repo")}
    for name, path in repos.items():
        shutil.copytree(FIXTURES / name, path)
    home = tmp_path_factory.mktemp("home")
    nnrag.index([str(repos["lender_repo"]), str(repos["borrower_repo"])], home=home)
    return home, repos


def test_a_block_takes_the_definitions_it_needs_from_the_source_that_holds_them(
        two_sources: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    home, _ = two_sources
    result = nnrag.extract("DetHead", home=home)
    assert result.ok, result.issues
    code = result.code
    assert "import baselib" not in code and "from baselib" not in code
    assert "class ConvBN(nn.Module):" in code and "def make_divisible(" in code and "def hard_swish(" in code
    assert "# also from: lender_repo (local " in code
    assert set(result.files) == {"app/heads.py", "lender_repo:baselib/layers.py", "lender_repo:baselib/ops.py"}
    # the file alone, in an empty folder, under an isolated interpreter
    (tmp_path / "block.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-I", "-c", RUN, str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(2, 5, 8, 8)"


def test_cross_source_blocks_pass_the_gate_and_prefer_installed_keeps_the_import(
        two_sources: tuple[Path, dict[str, Path]]) -> None:
    home, repos = two_sources
    report = nnrag.build([str(repos["lender_repo"]), str(repos["borrower_repo"])], home=home, limits=search_limits(),
                         search=False, harvest=False)
    assert report.per_source["borrower_repo"]["passed"] == report.per_source["borrower_repo"]["tried"] == 1
    # with baselib importable here, the default keeps it an import; --prefer corpus copies it
    sys.path.insert(0, str(repos["lender_repo"]))
    try:
        kept = nnrag.extract("DetHead", home=home)
        copied = nnrag.extract("DetHead", prefer="corpus", home=home)
    finally:
        sys.path.remove(str(repos["lender_repo"]))
    assert "from baselib import ConvBN" in kept.code and "class ConvBN" not in kept.code
    assert "class ConvBN" in copied.code
    with pytest.raises(nnrag.ConfigError, match="prefer must be one of installed, corpus"):
        nnrag.extract("DetHead", prefer="nowhere", home=home)
