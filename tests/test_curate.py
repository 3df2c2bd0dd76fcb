"""Dedup and the fine-tuning export, on a fixture repository with planted copies of one block:
verbatim, reformatted, renamed, with other constants, and the same layers written another way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import nnrag
from conftest import FIXTURES, run_cli, search_limits
from llm_stub import ScriptedLLM, answer

ORIGINAL = "copies_repo:cpkg.original.ConvBlock"
VERBATIM = "copies_repo:cpkg.verbatim.ConvBlock"
REFORMATTED = "copies_repo:cpkg.reformatted.ConvBlock"
RENAMED = "copies_repo:cpkg.renamed.ConvUnit"
CONSTANTS = "copies_repo:cpkg.constants.WideConvBlock"
RESTRUCTURED = "copies_repo:cpkg.restructured.ResidualConvNormAct"
UNRELATED = ("copies_repo:cpkg.gate.TokenGate", "copies_repo:cpkg.pool.StridedPool")


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("copies_src") / "copies_repo"
    shutil.copytree(FIXTURES / "copies_repo", src)
    home = tmp_path_factory.mktemp("copies_home")
    report = nnrag.build([str(src)], home=home, limits=search_limits())
    assert report.passed == report.tried == 8, report.to_dict()
    return home


def _members(report: Any, level: str) -> list[set[str]]:
    return [set(c.members) for c in report.clusters[level]]


def test_each_planted_copy_lands_in_the_cluster_of_its_level_and_unrelated_blocks_stay_apart(copies: Path) -> None:
    report = nnrag.dedup(home=copies)
    assert _members(report, "raw") == [{ORIGINAL, VERBATIM}]
    assert _members(report, "exact") == [{ORIGINAL, VERBATIM, REFORMATTED}]
    assert _members(report, "near") == [{ORIGINAL, VERBATIM, REFORMATTED, RENAMED, CONSTANTS}]
    assert _members(report, "structural") == [{ORIGINAL, VERBATIM, REFORMATTED, RENAMED, CONSTANTS, RESTRUCTURED}]
    assert [(c.level, c.removed, c.kept) for c in report.levels] == [
        ("raw", 1, 7), ("exact", 1, 6), ("near", 2, 4), ("structural", 1, 3)]
    # the canonical member: all validated, one source, so the shortest standalone file
    sizes = {b: (copies / str(e["path"])).stat().st_size for e in nnrag.library_entries(home=copies)
             if (b := str(e["id"])) in {ORIGINAL, VERBATIM, REFORMATTED}}
    assert report.clusters["exact"][0].canonical == min(sizes, key=lambda b: (sizes[b], b))

    # stored: a second run computes nothing and finds the same
    again = nnrag.dedup(home=copies)
    assert again.computed == 0 and _members(again, "near") == _members(report, "near")

    # search shows near copies under one hit, also those whose structure differs in names
    hits = nnrag.search("convolution batch norm activation with a residual path", k=5, home=copies)
    family = next(h for h in hits if h.id in {ORIGINAL, VERBATIM, REFORMATTED, RENAMED, CONSTANTS})
    assert {family.id, *family.also_in} >= {ORIGINAL, VERBATIM, REFORMATTED, RENAMED, CONSTANTS}

    dup = nnrag.find_duplicates("ConvUnit", home=copies)
    assert "raw" not in dup.library and set(dup.library["near"]) == {ORIGINAL, VERBATIM, REFORMATTED, CONSTANTS}
    assert nnrag.find_duplicates("TokenGate", home=copies).library == {}


def test_uniqueness_against_other_code_counts_blocks_without_a_copy_there(copies: Path, tmp_path: Path) -> None:
    other = tmp_path / "models"
    other.mkdir()
    source = (FIXTURES / "copies_repo" / "cpkg" / "gate.py").read_text()
    gate = source[source.index("class TokenGate"):]
    # LEMUR-style: a model file holding a renamed copy of one block beside a class of its own
    (other / "Net.py").write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
                                  + gate.replace("TokenGate", "Gating").replace("summary", "pooled")
                                  + "\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                  "        self.head = nn.Linear(16, 10)\n\n    def forward(self, x):\n        return self.head(x)\n")
    report = nnrag.dedup(home=copies, against=other)
    (u,) = report.against
    assert (u.files, u.blocks) == (1, 8)
    assert u.unique == {"raw": 8, "exact": 8, "near": 7, "structural": 7}
    assert u.matches["near"] == [("copies_repo:cpkg.gate.TokenGate", "Net.py::Gating")]

    dup = nnrag.find_duplicates("TokenGate", home=copies, lemur=other)
    assert dup.other_files == 1 and [(m["class"], m["level"]) for m in dup.other] == [("Gating", "near")]


def test_export_writes_leakage_free_splits_with_a_card_and_loads_with_datasets(copies: Path, tmp_path: Path) -> None:
    first = nnrag.export(tmp_path / "ds", home=copies, seed=3)
    folder = Path(first.folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert first.examples == manifest["examples"] == 8 and sum(manifest["splits"].values()) == 8
    assert manifest["check"]["ok"] and all(n == 0 for n in manifest["check"]["copy_pairs_across_splits"].values())
    records = {s: [json.loads(line) for line in (folder / f"{s}.jsonl").read_text().splitlines()]
               for s in ("train", "validation", "test")}
    split_of = {r["meta"]["block_id"]: s for s, rs in records.items() for r in rs}
    family = {ORIGINAL, VERBATIM, REFORMATTED, RENAMED, CONSTANTS, RESTRUCTURED}
    assert len({split_of[b] for b in family}) == 1  # copies never straddle two splits
    assert manifest["groups"] == 3  # the copies, and each unrelated block alone

    record = records[split_of[ORIGINAL]][0]
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system", "user", "assistant"]
    user, code = record["messages"][1]["content"], record["messages"][2]["content"]
    assert "def forward" not in user and "copies_repo" not in user and "## Constructor" in user
    assert code.startswith("# nnrag block: ") and "class " in code
    meta = record["meta"]
    assert {"block_id", "source", "origin", "path", "file_sha1", "license", "category", "clusters", "group"} <= set(meta)
    assert meta["license"] == "MIT"

    card = (folder / "README.md").read_text()
    assert card.startswith("---\nlicense: mit\n") and "configs:" in card and "path: \"train.jsonl\"" in card

    # deterministic: the same library and seed give the same bytes
    second = nnrag.export(tmp_path / "again", home=copies, seed=3)
    for name in first.files:
        assert (folder / name).read_bytes() == (Path(second.folder) / name).read_bytes(), name

    from datasets import load_dataset

    files = {s: str(folder / f"{s}.jsonl") for s, n in manifest["splits"].items() if n}
    loaded = load_dataset("json", data_files=files)
    assert sum(len(loaded[s]) for s in files) == 8 and loaded[next(iter(files))][0]["messages"][0]["role"] == "system"

    allowed = nnrag.export(tmp_path / "apache", home=copies, licenses=["Apache-2.0"])
    assert allowed.examples == 0 and allowed.excluded == {"license not allowed": 8}
    from nnrag.datasets.export import license_allowed

    ok = {"mit", "apache-2.0", "bsd-3-clause"}
    assert license_allowed("Apache-2.0 WITH LLVM-exception AND MIT", ok) and license_allowed("GPL-3.0 OR MIT", ok)
    assert not license_allowed("MIT AND GPL-3.0", ok) and not license_allowed("BSD", ok)


def test_dedup_and_export_commands(copies: Path, tmp_path: Path) -> None:
    report = json.loads(run_cli("dedup", "--home", str(copies), "--json", "--html", str(tmp_path / "d.html")).stdout)
    assert [lv["level"] for lv in report["levels"]] == ["raw", "exact", "near", "structural"]
    assert "<svg" in (tmp_path / "d.html").read_text()
    out = json.loads(run_cli("export", str(tmp_path / "alpaca"), "--home", str(copies), "--format", "alpaca",
                             "--splits", "0.5,0.5,0", "--json").stdout)
    assert out["splits"]["test"] == 0 and out["examples"] == 8
    lines = [line for s in ("train", "validation") for line in (tmp_path / "alpaca" / f"{s}.jsonl").read_text().splitlines()]
    line = json.loads(lines[0])
    assert set(line) == {"instruction", "input", "output", "meta"}
    bad = run_cli("export", str(tmp_path / "x"), "--home", str(copies), "--splits", "0.5,0.2", check=False)
    assert bad.returncode != 0 and "three fractions" in bad.stderr and "Traceback" not in bad.stderr


GATE = """```python
import torch
import torch.nn as nn
import torch.nn.functional as F


class TokenGate(nn.Module):
    def __init__(self, dim: int = 16, hidden: int = 32) -> None:
        super().__init__()
        self.down = nn.Linear(dim, hidden)
        self.up = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.sigmoid(self.up(F.gelu(self.down(x.mean(dim=1, keepdim=True)))))
        return x * weights
```"""


def test_export_adds_passing_synthesised_implementations_to_their_blocks_group(
        copies: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with ScriptedLLM([answer(GATE)]) as llm:
        result = nnrag.synthesize(UNRELATED[0], model="stub", base_url=llm.url, home=copies, limits=search_limits())
    assert result.ok
    report = nnrag.export(tmp_path / "ds", home=copies, synthesized=True)
    records = [json.loads(line) for s in ("train", "validation", "test")
               for line in (Path(report.folder) / f"{s}.jsonl").read_text().splitlines()]
    made = [r for r in records if r["meta"]["kind"] == "synthesized"]
    assert report.examples == 9 and len(made) == 1 and made[0]["meta"]["id"] == f"{UNRELATED[0]}#stub"
    block = next(r for r in records if r["meta"]["id"] == UNRELATED[0])
    assert made[0]["meta"]["split"] == block["meta"]["split"] and made[0]["meta"]["group"] == block["meta"]["group"]
    assert "weights = torch.sigmoid" in made[0]["messages"][2]["content"]
