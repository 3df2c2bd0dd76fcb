"""End to end on the real installed default corpus (torch.nn, torchvision models/ops, timm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.e2e


def test_default_corpus(home: Path) -> None:
    report = json.loads(run_cli("index", "--home", str(home), "--json").stdout)
    by_name = {s["name"]: s for s in report["sources"]}
    assert set(by_name) == {"torch", "torchvision", "timm"}
    assert report["failures"] == {}
    rows = json.loads(run_cli("blocks", "BlurPool*", "--home", str(home), "--json").stdout)
    blur = [r for r in rows if r["name"] == "BlurPool2d"]
    assert blur and blur[0]["path"] == "timm/layers/blur_pool.py" and blur[0]["source"] == "timm"
    import timm

    text = Path(timm.__file__).parent / "layers" / "blur_pool.py"
    assert text.read_text().splitlines()[blur[0]["line"] - 1].startswith("class BlurPool2d(")

    # Static discovery agrees with importing timm and inspecting every class.
    from nnrag.evals.check_discovery import runtime_blocks

    static = {r["qualname"] for r in json.loads(run_cli("blocks", "--source", "timm", "--home", str(home), "--json").stdout)}
    from nnrag.sourcing.spec import parse_source

    runtime, _ = runtime_blocks("timm", parse_source("dist:timm").path_filter)
    assert len(static & runtime) / len(runtime) > 0.98
    assert len(static & runtime) / len(static) > 0.98

    warm = json.loads(run_cli("index", "--home", str(home), "--json").stdout)
    assert warm["parsed"] == 0 and warm["blocks"] == report["blocks"]

    # The block extracts to one file that passes the gate, and building a slice of timm stores verdicts.
    out = home / "blur_pool.py"
    run_cli("extract", "timm:timm.layers.blur_pool.BlurPool2d", "-o", str(out), "--home", str(home))
    assert "# requirements: torch==" in out.read_text() and "import timm" not in out.read_text()
    record = json.loads(run_cli("validate", str(out), "--json").stdout)
    assert record["ok"] and record["output_shapes"] == [2, 16, 8, 8]
    built = json.loads(run_cli("build", "dist:timm", "--names", str(_names(home)), "--home", str(home), "--json").stdout)
    named = [r for r in json.loads(run_cli("blocks", "--source", "timm", "--home", str(home), "--json").stdout)
             if r["name"] in ("BlurPool2d", "SEModule", "Mlp")]
    assert built["tried"] == built["per_source"]["timm"]["tried"] == len(named) >= 3
    assert built["pass_rate"] == 1.0

    # The build indexed specs and vectors: search finds BlurPool2d, and its spec holds no code.
    assert built["search"]["blocks"] == built["tried"]
    hits = json.loads(run_cli("search", "find anti-aliased downsampling", "--json", "--home", str(home)).stdout)
    assert hits[0]["id"] == "timm:timm.layers.blur_pool.BlurPool2d"
    spec = json.loads(run_cli("spec", "BlurPool2d", "--json", "--home", str(home)).stdout)
    import jsonschema

    jsonschema.validate(spec, json.loads(run_cli("spec", "--schema").stdout))
    source_lines = {ln.strip() for ln in text.read_text().splitlines() if len(ln.strip()) > 12 and '"""' not in ln}
    assert not [ln for ln in source_lines if ln in json.dumps(spec)]


def _names(home: Path) -> Path:
    path = home / "names.json"
    path.write_text(json.dumps(["BlurPool2d", "SEModule", "Mlp"]))
    return path
