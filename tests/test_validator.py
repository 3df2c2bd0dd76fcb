"""The validator gate: real sandboxed processes, real torch forward passes, every failure classified."""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nnrag
from conftest import FIXTURES, run_cli
from nnrag.db import connect
from nnrag.workspace import Workspace
from nnrag.validator.record import Limits

LIMITS = Limits(timeout_s=8.0, cpu_s=20, memory_mb=2048)

FAILING = {
    "NativeBlock": ("extract", "native-extension"),
    "UnresolvedName": ("forward", "unresolved-name"),  # left free as the original leaves it: NameError when forward runs
    "ImportTimeName": ("extract", "unresolved-name"),
    "MissingDependency": ("import", "missing-dependency"),
    "RegistryBlock": ("instantiate", "dynamic-registry"),
    "InfiniteInit": ("instantiate", "timeout"),
    "HugeAlloc": ("instantiate", "memory"),
    "GiantNet": ("instantiate", "memory"),
    "NetworkCall": ("instantiate", "sandbox-violation"),
    "ShellOut": ("forward", "sandbox-violation"),
    "WriteOutside": ("forward", "sandbox-violation"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home where both fixture repositories were built (indexed, extracted, validated)."""
    home = tmp_path_factory.mktemp("home")
    src = tmp_path_factory.mktemp("src")
    for name in ("closure_repo", "failing_repo"):
        shutil.copytree(FIXTURES / name, src / name)
    report = nnrag.build([str(src / "closure_repo"), str(src / "failing_repo")], home=home, limits=LIMITS)
    assert report.tried == len(report_entries(home))
    return home


def report_entries(home: Path) -> dict[str, dict[str, object]]:
    return {str(e["name"]): e for e in nnrag.library_entries(home=home)}


def test_every_failure_is_contained_and_classified(built: Path) -> None:
    entries = report_entries(built)
    for name, (stage, code) in FAILING.items():
        e = entries[name]
        assert (e["status"], e["stage"], e["code"]) == ("failed", stage, code), (name, e["message"])
    assert "203.0.113.1" in str(entries["NetworkCall"]["message"])  # where it tried to go
    assert not Path("/tmp/nnrag-escaped").exists()
    assert not Path("/tmp/nnrag-written-outside").exists()
    # the run went on: every other block of both repositories passed
    passed = {n for n, e in entries.items() if e["status"] == "validated"}
    assert passed == set(entries) - set(FAILING)
    assert "Swish" in passed


def test_probe_reads_losses_layouts_and_depth(built: Path) -> None:
    with connect(Workspace.resolve(built)) as store:
        records = {name: json.loads(rec) for name, rec in store.conn.execute("SELECT name, record FROM library")}
    giant = records["GiantNet"]
    assert "too large to probe" in giant["message"] and giant["seconds"] < 5  # counted, not built
    assert records["DeepStack"]["init_args"] == {"depth": "1"}  # tried with one block first
    loss = records["FocalLoss"]
    assert loss["input_dtypes"] == ["float32", "int64"] and len(loss["input_shapes"][1]) == 1  # class indices
    pair = records["PairMarginLoss"]  # its labels default to None but are required: given as class indices
    assert pair["ok"] and (pair["keyword_shapes"], pair["keyword_dtypes"]) == ({"labels": [2]}, {"labels": "int64"})
    mix = records["ChannelsLastMix"]
    assert len(mix["input_shapes"][0]) == 4 and mix["input_shapes"][0][-1] == int(mix["init_args"]["dim"])


def test_build_is_resumable_and_report_matches(built: Path) -> None:
    again = nnrag.build(home=built, limits=LIMITS)
    unextractable = sum(1 for s, _ in FAILING.values() if s == "extract")
    assert again.cached == again.tried - unextractable
    assert again.extracted == unextractable  # the others' files depend on nothing that changed
    # another extraction key (here ``prefer``): every block extracted again, verdicts reused by text
    other = nnrag.build(home=built, limits=LIMITS, prefer="corpus", search=False)
    assert (other.extracted, other.cached) == (other.tried, again.cached)
    rep = nnrag.report(home=built)
    assert (rep.tried, rep.passed) == (again.tried, again.passed)
    assert rep.failures["sandbox-violation"] == 3
    proc = run_cli("report", "--json", "--home", str(built), "--html", str(built / "r.html"))
    data = json.loads(proc.stdout)
    assert data["pass_rate"] == pytest.approx(rep.passed / rep.tried, abs=1e-4)
    assert set(data["per_source"]) == {"closure_repo", "failing_repo"}
    by_source = {name: s["failures"] for name, s in data["per_source"].items()}
    assert sum(f.get(code, 0) for f in by_source.values() for code in rep.failures) == rep.tried - rep.passed
    assert by_source["failing_repo"]["sandbox-violation"] == 3  # every one of them in that repository
    assert "<svg" in (built / "r.html").read_text()


def test_a_new_category_guess_reaches_the_library_without_validating_again(built: Path) -> None:
    """Categories are guessed at discovery; a verdict that stands keeps its record but takes the
    block's category of the day, and a new discovery version guesses every category again."""
    def categories() -> tuple[str, str]:
        with connect(Workspace.resolve(built)) as store:
            return (store.conn.execute("SELECT category FROM blocks WHERE name='Swish'").fetchone()[0],
                    store.conn.execute("SELECT category FROM library WHERE name='Swish'").fetchone()[0])

    def stamp() -> float:
        with connect(Workspace.resolve(built)) as store:
            return store.conn.execute("SELECT updated_at FROM library WHERE name='Swish'").fetchone()[0]

    guessed = categories()
    assert guessed == ("activation", "activation")
    before = stamp()
    with connect(Workspace.resolve(built)) as store:
        store.conn.execute("UPDATE blocks SET category='recurrent' WHERE name='Swish'")
    again = nnrag.build(home=built, limits=LIMITS, search=False)
    unextractable = sum(1 for s, _ in FAILING.values() if s == "extract")
    assert categories() == ("recurrent", "recurrent")
    assert stamp() > before  # a written row is stamped: search's check of the library sees the change
    assert again.cached == again.tried - unextractable  # every verdict reused, none validated again
    with connect(Workspace.resolve(built)) as store:  # as an index discovered by an older nnrag
        store.conn.execute("UPDATE meta SET value=json_set(value, '$.version', '1') WHERE key='discovery'")
    nnrag.build(home=built, limits=LIMITS, search=False)
    assert categories() == guessed


_RUNNER = """
import ast, importlib.util, json, sys
assert importlib.util.find_spec("cpkg") is None and importlib.util.find_spec("fpkg") is None
import torch
spec = importlib.util.spec_from_file_location("block", "block.py")
mod = importlib.util.module_from_spec(spec)
sys.modules["block"] = mod  # as an import does: a dataclass looks its module up there
spec.loader.exec_module(mod)
cls = mod
for part in sys.argv[1].split("."):
    cls = getattr(cls, part)


def value(text):  # a literal, or a construction of the file's own config class: BlockConfig(width=16)
    try:
        return ast.literal_eval(text)
    except ValueError:  # a torch layer's repr builds it; the gate's stand-in layer passes its input through, as Identity
        return eval(text, {**vars(torch.nn), **vars(mod), "Passthrough": torch.nn.Identity})


def tensor(shape, dtype):
    return torch.randint(0, 2, shape) if dtype == "int64" else torch.randn(shape)


model = cls(**{k: value(v) for k, v in json.loads(sys.argv[3]).items()})
dtypes, keywords = json.loads(sys.argv[4]), json.loads(sys.argv[5])
out = model(*[tensor(s, d) for s, d in zip(json.loads(sys.argv[2]), dtypes)],
            **{k: tensor(s, d) for k, (s, d) in keywords.items()})
print("ran", type(out).__name__)
"""


def _third_party(code: str) -> set[str]:
    dists = md.packages_distributions()
    tops = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
            tops.add(node.module.split(".")[0])  # type: ignore[union-attr]
    return {f"{dists[t][0]}=={md.version(dists[t][0])}" for t in tops if t not in sys.stdlib_module_names}


def test_each_validated_block_runs_alone_in_an_isolated_interpreter(built: Path, tmp_path: Path) -> None:
    with connect(Workspace.resolve(built)) as store:
        rows = store.conn.execute("SELECT name, path, class_name, requirements, record FROM library WHERE status='validated'").fetchall()
    assert len(rows) >= 14
    for name, path, class_name, requirements, record in rows:
        code = (built / path).read_text()
        folder = tmp_path / name
        folder.mkdir()
        (folder / "block.py").write_text(code)
        probe = json.loads(record)
        shapes, init_args, dtypes = probe["input_shapes"], probe["init_args"], probe["input_dtypes"]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NNRAG_HOME")}
        keywords = {k: (s, probe["keyword_dtypes"][k]) for k, s in probe["keyword_shapes"].items()}
        argv = [class_name, json.dumps(shapes), json.dumps(init_args), json.dumps(dtypes), json.dumps(keywords)]
        proc = subprocess.run([sys.executable, "-I", "-c", _RUNNER, *argv], cwd=folder, capture_output=True, text=True,
                              env=env, timeout=120)
        assert proc.returncode == 0 and "ran" in proc.stdout, (name, proc.stderr[-2000:])
        assert set(json.loads(requirements)) == _third_party(code), name


def test_validate_command_exit_codes_and_record(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text("import torch.nn as nn\n\nclass Tiny(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
                    "        self.fc = nn.Linear(dim, 4)\n\n    def forward(self, x):\n        return self.fc(x)\n")
    proc = run_cli("validate", str(good), "--json")
    rec = json.loads(proc.stdout)
    assert rec["ok"] and rec["stage"] == "backward" and rec["class_name"] == "Tiny"
    assert rec["init_args"] == {"dim": "16"} and rec["output_shapes"][-1] == 4 and rec["params"] == 68
    assert rec["isolation"]["network"] in ("netns", "audit-hook") and rec["backward"] is True
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")
    proc = run_cli("validate", str(bad), "--json", check=False)
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == "syntax-error"
    shapes = tmp_path / "shapes.py"
    shapes.write_text("import torch, torch.nn as nn\n\nclass NeedsComplex(nn.Module):\n    def forward(self, x):\n"
                      "        if not x.is_complex():\n            raise ValueError('wants a complex input')\n        return x\n")
    proc = run_cli("validate", str(shapes), check=False)
    assert proc.returncode == 1 and "input-inference" in proc.stdout


def test_a_long_running_worker_keeps_forking_fresh_children() -> None:
    """Past its 40th candidate a worker moves its memory to huge pages; later children must still
    start fresh (no state from an earlier candidate) and pass or fail on their own."""
    from nnrag.validator.gate import Gate
    from nnrag.validator import server

    code = ("import torch.nn as nn\nimport sys\n\nassert not hasattr(sys, 'seen'), 'state leaked from an earlier candidate'\n"
            "sys.seen = True\n\nclass Count(nn.Module):\n    def forward(self, x):\n        return x * 2\n")
    with Gate(1) as gate:
        records = [gate.check_code(code, "Count") for _ in range(server._HUGE_AFTER + 5)]
        broken = gate.check_code(code.replace("return x * 2", "raise RuntimeError('boom')"), "Count")
    assert all(r.ok for r in records), [r.message for r in records if not r.ok][:1]
    assert not broken.ok and broken.stage == "forward" and "boom" in broken.message


def test_a_warmed_gate_starts_its_workers_in_the_background() -> None:
    """``warm`` returns at once and the workers come up on their own, so a build's extraction
    overlaps their import of torch; a gate closed while warming leaves no worker behind."""
    import time

    from nnrag.validator.gate import Gate

    code = "import torch.nn as nn\n\nclass Twice(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    with Gate(2) as gate:
        started = time.perf_counter()
        gate.warm()
        assert time.perf_counter() - started < 1.0 and gate._idle.qsize() == 0
        deadline = time.perf_counter() + 120
        while gate._idle.qsize() < 2 and time.perf_counter() < deadline:
            time.sleep(0.2)
        assert gate._idle.qsize() == 2
        workers = list(gate._idle.queue)
        assert gate.check_code(code, "Twice").ok
        assert {id(w) for w in gate._idle.queue} == {id(w) for w in workers}  # the warm ones served it
    assert all(w.proc.poll() is not None for w in workers)

    closing = Gate(1)
    closing.warm()
    closing.close()
    for thread in closing._warming:
        thread.join(120)
    assert closing._idle.qsize() == 0  # the worker that came up after close was stopped, not kept


def test_modules_a_gate_preloads_are_imported_by_its_workers_and_older_workers_are_replaced() -> None:
    """``Gate.preload``: workers started after it hold the modules before any candidate runs; one
    started before is closed when it comes free, not kept serving without them."""
    from nnrag.validator.gate import Gate

    code = ("import sys\nimport torch.nn as nn\n\nassert 'mailbox' in sys.modules, 'not preloaded'\n\n"
            "class Twice(nn.Module):\n    def forward(self, x):\n        return x * 2\n")
    with Gate(1) as gate:
        before = gate.check_code(code, "Twice")
        first = gate._idle.queue[0]
        gate.preload(["mailbox"])
        after = gate.check_code(code, "Twice")
        assert first.proc.poll() is not None and gate._idle.queue[0] is not first
    assert not before.ok and "not preloaded" in before.message
    assert after.ok, after.message


PYRAMID = '''
from typing import Dict, List
import torch
from torch import nn


class Neck(nn.Module):
    """An FPN-style neck: one lateral conv per level, channels given per level."""

    def __init__(self, in_channels_list: List[int], out_channels: int) -> None:
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(c, out_channels, 1) for c in in_channels_list)

    def forward(self, x: Dict[str, torch.Tensor]) -> List[torch.Tensor]:
        return [conv(f) for conv, f in zip(self.lateral, x.values())]


class Head(nn.Module):
    """A detection head over a list of maps of one width, halving in size."""

    def __init__(self, channels: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.cls = nn.Conv2d(channels, classes, 3, padding=1)

    def forward(self, feats):
        assert feats[0].shape[-1] == 2 * feats[1].shape[-1]
        return [self.cls(f) for f in feats]
'''


def test_multi_level_blocks_get_one_feature_map_per_level() -> None:
    from nnrag.validator.gate import Gate

    with Gate(1) as gate:
        neck = gate.check_code(PYRAMID, "Neck")
        head = gate.check_code(PYRAMID, "Head")
    assert neck.ok and head.ok, (neck.message, head.message)
    levels = neck.input_shapes[0]
    channels = [int(c) for c in neck.init_args["in_channels_list"].strip("[]").split(",")]
    assert list(levels) == [str(i) for i in range(len(channels))]  # a dict, as the annotation asks
    assert [shape[1] for shape in levels.values()] == channels
    assert [shape[-1] for shape in levels.values()] == [levels["0"][-1] >> i for i in range(len(channels))]
    assert len(head.input_shapes[0]) == 3 and head.input_shapes[0][1][1] == 8


PROBES = '''
import socket
import torch.nn as nn


def _bind(port):
    sock = socket.socket(socket.AF_INET)
    try:
        sock.bind(("127.0.0.1", port))
    finally:
        sock.close()


class ProbesIPv6(nn.Module):
    def __init__(self):
        super().__init__()
        _bind(0)  # what urllib3 does at import to learn whether the host has IPv6

    def forward(self, x):
        return x * 2


class Listens(nn.Module):
    def __init__(self):
        super().__init__()
        _bind(8765)

    def forward(self, x):
        return x * 2
'''


def test_an_ephemeral_loopback_probe_is_no_violation_but_a_known_port_is() -> None:
    from nnrag.validator.gate import Gate

    with Gate(1) as gate:
        probe, listener = gate.check_code(PROBES, "ProbesIPv6"), gate.check_code(PROBES, "Listens")
    assert probe.ok, probe.message
    assert (listener.ok, listener.code) == (False, "sandbox-violation") and "socket.bind" in listener.message


PROBES_THE_MACHINE = '''
import os
import subprocess

import torch.nn as nn


def _physical_cores():
    """As libraries count cores at import (joblib's loky runs lscpu), with a fallback."""
    try:
        out = subprocess.run(["lscpu", "--parse=core"], capture_output=True, text=True).stdout
        return len({line for line in out.splitlines() if not line.startswith("#")})
    except OSError:
        return os.cpu_count()


CORES = _physical_cores()


class CountsCores(nn.Module):
    def forward(self, x):
        return x * 2


class NeedsTool(nn.Module):
    def forward(self, x):
        subprocess.run(["nvidia-smi"], check=True)
        return x
'''


def test_a_process_start_is_refused_and_a_library_that_handles_it_passes() -> None:
    """Starting a process fails with the error the kernel would give; the process never runs. A
    block whose library probes the machine that way and carries on passes, with the refusal in its
    record; a block that fails on the refusal is a sandbox violation."""
    from nnrag.validator.gate import Gate

    with Gate(1) as gate:
        probing, needing = gate.check_code(PROBES_THE_MACHINE, "CountsCores"), gate.check_code(PROBES_THE_MACHINE, "NeedsTool")
    assert probing.ok, probing.message
    assert probing.refused and "lscpu" in probing.refused[0]
    assert (needing.ok, needing.code, needing.stage) == (False, "sandbox-violation", "forward"), needing.message
    assert "nvidia-smi" in needing.message and "refused" in needing.message


RAMP_LIBRARY = '''
import numba


@numba.njit(cache=True)
def ramp(n):
    out = 0.0
    for i in range(n):
        out += i
    return out
'''

CACHES_COMPILED_CODE = '''
import torch.nn as nn
from ramplib import ramp


class CompiledRamp(nn.Module):
    def forward(self, x):
        return x * ramp(4)
'''


def test_a_library_that_caches_compiled_code_beside_its_source_caches_it_in_the_candidates_folder(tmp_path: Path) -> None:
    """numba's ``cache=True`` writes beside the module that defines the function: for a library
    (librosa's filters) that is site-packages, outside the candidate's folder. The worker points
    the cache at the folder."""
    from nnrag.validator.gate import Gate

    library = tmp_path / "lib"
    (library / "ramplib").mkdir(parents=True)
    (library / "ramplib" / "__init__.py").write_text(RAMP_LIBRARY)
    with Gate(1) as gate:
        result = gate.check_code(CACHES_COMPILED_CODE, "CompiledRamp", paths=[str(library)])
    assert result.ok, result.message
    assert not list(library.rglob("*.nbi"))  # nothing was written beside the library


PRETRAINED = '''
import torch.nn as nn
from torch.hub import load_state_dict_from_url

URL = "https://203.0.113.1/descriptor_weights.pth"


class Pretrained(nn.Module):
    """Loads its weights whatever it is given, as a descriptor network that ships them does."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        checkpoint = load_state_dict_from_url(URL, map_location="cpu")
        self.load_state_dict({k.replace("module.", ""): v for k, v in checkpoint["state_dict"].items()})

    def forward(self, x):
        return self.proj(x)


class Backbone(nn.Module):
    """torchvision's weights API bound the download function when the worker imported it."""

    def __init__(self):
        super().__init__()
        from torchvision.models import resnet18
        self.net = resnet18(weights="DEFAULT")

    def forward(self, x):
        return self.net(x)


class OwnDownloader(nn.Module):
    """Fetches its checkpoint into the hub cache itself, then loads the file, as libraries with a
    downloader of their own do; and a second one through torch's file download."""

    def __init__(self):
        super().__init__()
        import os
        import urllib.request

        import torch
        self.proj = nn.Linear(4, 4)
        cached = os.path.join(torch.hub.get_dir(), "checkpoints", "own.pth")
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        with urllib.request.urlopen(urllib.request.Request("https://203.0.113.1/own.pth")) as response, open(cached, "wb") as f:
            f.write(response.read())
        self.load_state_dict(torch.load(cached, map_location="cpu", weights_only=True)["model"])
        torch.hub.download_url_to_file("https://203.0.113.1/files/head.safetensors?download=1", cached + ".st")
        from safetensors.torch import load_file
        self.load_state_dict(load_file(cached + ".st"))

    def forward(self, x):
        return self.proj(x)


class LocalCheckpoint(nn.Module):
    """Loads the weights its README says to download to ``checkpoints/`` unless told otherwise;
    and a second one that opens its checkpoint itself, where None means no weights."""

    def __init__(self, model_type="vit_b"):
        super().__init__()
        import torch
        self.proj = nn.Linear(4, 4)
        paths = {"vit_b": "pretrained_checkpoint/decoder_vit_b.pth"}
        self.load_state_dict(torch.load(paths[model_type]))

    def forward(self, x):
        return self.proj(x)


class OpensCheckpoint(nn.Module):
    def __init__(self, checkpoint="./checkpoints/scaled_offline.pth", window_len=60):
        super().__init__()
        import torch
        self.proj = nn.Linear(4, 4)
        if checkpoint is not None:
            with open(checkpoint, "rb") as f:
                self.load_state_dict(torch.load(f, map_location="cpu"))

    def forward(self, x):
        return self.proj(x)


class Fetches(nn.Module):
    def __init__(self):
        super().__init__()
        import urllib.request
        urllib.request.urlopen("https://203.0.113.1/data/images.tar.gz")

    def forward(self, x):
        return x
'''


def test_pretrained_weights_a_block_always_loads_are_not_fetched_and_it_is_checked_at_random_init() -> None:
    from nnrag.validator.gate import Gate

    with Gate(1) as gate:
        pretrained, fetches = gate.check_code(PRETRAINED, "Pretrained"), gate.check_code(PRETRAINED, "Fetches")
        backbone = gate.check_code(PRETRAINED, "Backbone")
        own = gate.check_code(PRETRAINED, "OwnDownloader")
        local, opens = gate.check_code(PRETRAINED, "LocalCheckpoint"), gate.check_code(PRETRAINED, "OpensCheckpoint")
    assert pretrained.ok, pretrained.message
    assert own.ok and own.weights_not_fetched == ["https://203.0.113.1/own.pth",
                                                  "https://203.0.113.1/files/head.safetensors?download=1"], own
    assert pretrained.weights_not_fetched == ["https://203.0.113.1/descriptor_weights.pth"]
    assert backbone.ok and backbone.weights_not_fetched == ["https://download.pytorch.org/models/resnet18-f37072fd.pth"], backbone
    # any other request is still refused
    assert (fetches.ok, fetches.code) == (False, "sandbox-violation") and "203.0.113.1" in fetches.message
    # a checkpoint file the source does not hold is not there to load either: no weights, or the
    # path left unset where the constructor reads None as no weights
    assert local.ok and local.weights_not_fetched == ["pretrained_checkpoint/decoder_vit_b.pth"], local
    assert opens.ok and opens.init_args["checkpoint"] == "None", opens


GRAPH_BATCH = '''
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class LayerConfig:
    dim_in: int = -1  # set by the caller
    dim_out: int = -1
    has_bias: bool = True


class BatchLayer(nn.Module):
    """Reads and updates a graph batch, as graph-learning frameworks pass them between layers."""

    def __init__(self, layer_config: LayerConfig):
        super().__init__()
        self.lin = nn.Linear(layer_config.dim_in, layer_config.dim_out, bias=layer_config.has_bias)

    def forward(self, batch):
        messages = torch.zeros_like(batch.x).index_add_(0, batch.edge_index[1], batch.x[batch.edge_index[0]])
        batch.x = self.lin(messages)
        return batch
'''


def test_a_layer_of_graph_batches_gets_a_batch_and_its_config_is_set() -> None:
    from nnrag.validator.gate import Gate

    with Gate(1) as gate:
        record = gate.check_code(GRAPH_BATCH, "BatchLayer")
    assert record.ok, record.message
    assert "dim_in=16" in record.init_args["layer_config"]  # the -1 sentinels were set
    assert record.input_shapes[0]["x"] == [8, 16] and record.input_shapes[0]["edge_index"] == [2, 24]
    assert record.backward is True  # through the batch it returned


def test_a_block_gone_from_its_source_leaves_the_library(tmp_path: Path) -> None:
    """Building one source again drops the files and verdicts of its blocks that are gone, and
    keeps every other source's."""
    for name, classes in (("one", ("Kept", "Dropped")), ("two", ("Other",))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "layers.py").write_text("import torch.nn as nn\n" + "".join(
            f"\n\nclass {c}(nn.Module):\n    def forward(self, x):\n        return x\n" for c in classes))
    home = tmp_path / "home"
    first = nnrag.build([str(tmp_path / "one"), str(tmp_path / "two")], home=home, limits=LIMITS, search=False, harvest=False)
    assert first.passed == 3
    dropped = home / str(report_entries(home)["Dropped"]["path"])
    assert dropped.is_file()
    layers = tmp_path / "one" / "layers.py"
    layers.write_text(layers.read_text().split("\n\nclass Dropped")[0] + "\n")
    nnrag.build([str(tmp_path / "one")], home=home, limits=LIMITS, search=False, harvest=False)
    assert set(report_entries(home)) == {"Kept", "Other"} and not dropped.exists()



def test_a_network_violation_names_what_it_reached() -> None:
    from nnrag.validator.sandbox import _network_target

    assert _network_target("urllib.Request", ("https://example.org/weights.pth", None, {}, "GET")) == "'https://example.org/weights.pth'"
    assert _network_target("socket.connect", (object(), ("203.0.113.1", 80))) == "('203.0.113.1', 80)"


def test_a_forward_of_only_optional_arguments_gets_the_main_input_as_the_first() -> None:
    """A language model's ``forward(input_ids=None, inputs_embeds=None, ...)`` refuses a call with
    neither; the probe passes token ids as the first argument after the call without any."""
    from nnrag.validator.gate import Gate

    code = '''import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        hidden = self.embed(input_ids) if inputs_embeds is None else inputs_embeds
        return self.head(hidden)
'''
    with Gate(1) as gate:
        record = gate.check_code(code, "TinyLM")
    assert record.ok, record.message
    assert record.input_shapes and len(record.input_shapes[0]) == 2  # token ids (batch, tokens)


def test_an_unannotated_config_is_built_from_the_config_class_the_block_declares() -> None:
    """``config_class = TinyConfig`` on a class whose inherited ``__init__(self, config)`` carries no
    annotation (a language-model library's task heads): a small ``TinyConfig``, not the stand-in."""
    from nnrag.validator.gate import Gate

    code = '''import dataclasses
import torch.nn as nn


@dataclasses.dataclass
class TinyConfig:
    hidden_size: int = 16
    num_labels: int = 3


class Head(nn.Module):
    def __init__(self, config):
        super().__init__()
        if not isinstance(config, TinyConfig):
            raise TypeError("config should be an instance of TinyConfig")
        self.score = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, x):
        return self.score(x)


class TinyHead(Head):
    config_class = TinyConfig
'''
    with Gate(1) as gate:
        record = gate.check_code(code, "TinyHead")
    assert record.ok, record.message


LANGUAGE_MODEL_PARTS = '''import dataclasses
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class VisionConfig:
    hidden_size: int = 4096
    num_hidden_layers: int = 48


@dataclasses.dataclass
class ComposedConfig:
    vision_config: dict | None = None
    sub_configs = {"vision_config": VisionConfig}

    def __post_init__(self):
        if not isinstance(self.vision_config, VisionConfig):
            self.vision_config = VisionConfig(**(self.vision_config or {}))


class Tower(nn.Module):
    config_class = ComposedConfig

    def __init__(self, config):
        super().__init__()
        width = config.vision_config.hidden_size
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(config.vision_config.num_hidden_layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Intermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config._attn_implementation not in (None, "eager"):
            raise KeyError(f"{config._attn_implementation} is not a registered attention")
        self.dense = nn.Linear(config.text_config.hidden_size, config.intermediate_size)
        self.act = getattr(F, config.hidden_act)

    def forward(self, hidden_states):
        return self.act(self.dense(hidden_states))


class LastTokenClassifier(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.score = nn.Linear(width, 3)
        self.pad_token_id = None

    def forward(self, input_ids):
        if input_ids.shape[0] > 1 and self.pad_token_id is None:
            raise ValueError("Cannot handle batch sizes > 1 if no padding token is defined.")
        return self.score(self.embed(input_ids))[:, -1]


class RotaryAttention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, hidden_states, position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None):
        cos, sin = position_embeddings
        b, t, _ = hidden_states.shape
        q, k, v = (y.view(b, t, self.heads, self.head_dim).transpose(1, 2) for y in self.qkv(hidden_states).chunk(3, -1))
        half = lambda y: torch.cat([-y[..., self.head_dim // 2:], y[..., :self.head_dim // 2]], -1)
        q, k = (y * cos.unsqueeze(1) + half(y) * sin.unsqueeze(1) for y in (q, k))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.out(out.transpose(1, 2).reshape(b, t, -1))


class PatchRotaryAttention(nn.Module):
    """A vision attention that takes one image's rotary angles, (patches, head_dim)."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, hidden_states, position_embeddings: tuple[torch.Tensor, torch.Tensor]):
        cos, sin = (e.unsqueeze(0).unsqueeze(-2) for e in position_embeddings)  # (1, T, 1, D)
        b, t, _ = hidden_states.shape
        q, k, v = (y.view(b, t, self.heads, self.head_dim) for y in self.qkv(hidden_states).chunk(3, -1))
        half = lambda y: torch.cat([-y[..., self.head_dim // 2:], y[..., :self.head_dim // 2]], -1)
        q, k = (y * cos + half(y) * sin for y in (q, k))
        q, k, v = (y.permute(0, 2, 1, 3) for y in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, -1)


class OptionalPatchRotaryAttention(PatchRotaryAttention):
    """The same, its angles declared optional although it cannot do without them."""

    def forward(self, hidden_states, position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None):
        return super().forward(hidden_states, position_embeddings)


class ChoiceHead(nn.Module):
    """Scores each of several candidate sequences per sample: input (B, choices, T)."""

    def __init__(self, vocab: int = 100, dim: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.score = nn.Linear(dim, 1)

    def forward(self, input_ids):
        choices = input_ids.shape[1]
        logits = self.score(self.embed(input_ids.view(-1, input_ids.size(-1))).mean(1))
        return logits.view(-1, choices)


@dataclasses.dataclass
class BucketConfig:
    hidden_size: int = 768
    num_attention_heads: int = 12
    relative_attention_num_buckets: int = 64


class BucketBias(nn.Module):
    """A relative position bias whose buckets are computed for the default count, as MPNet's (32)."""

    def __init__(self, config: BucketConfig):
        super().__init__()
        self.bias = nn.Embedding(config.relative_attention_num_buckets, config.num_attention_heads)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states):
        _, t, _ = hidden_states.shape
        relative = torch.arange(t)[None, :] - torch.arange(t)[:, None]
        buckets = (relative.abs() + 32 * (relative > 0)).clamp(max=63)
        return self.proj(hidden_states) + self.bias(buckets).mean()


@dataclasses.dataclass
class HybridConfig:
    hidden_size: int = 1024
    num_hidden_layers: int = 24
    attention_hidden_size: int | None = None
    layer_types: list | None = None

    def __post_init__(self):
        self.attention_hidden_size = self.attention_hidden_size or 2 * self.hidden_size
        self.layer_types = self.layer_types or ["mamba", "mamba", "hybrid"] + ["mamba"] * (self.num_hidden_layers - 3)
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError("num_hidden_layers must equal the number of layer_types")


class SharedAttentionLayer(nn.Module):
    """Reads its input beside the embeddings, at a width its config derives; keeps a cache if given one."""

    def __init__(self, config: HybridConfig):
        super().__init__()
        self.proj = nn.Linear(config.attention_hidden_size, config.hidden_size)

    def forward(self, hidden_states, original_hidden_states: torch.Tensor | None = None, past_key_values=None):
        joined = torch.cat([hidden_states, original_hidden_states], -1)
        if past_key_values is not None:
            past_key_values.update(joined)
        return hidden_states + self.proj(joined)


@dataclasses.dataclass
class TokenConfig:
    vocab_size: int = 5000
    hidden_size: int = 1024
    pad_token_id: int = 4999


class TokenEmbedder(nn.Module):
    def __init__(self, config: TokenConfig):
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)

    def forward(self, input_ids):
        return self.embed(input_ids)
'''


def test_language_model_parts_get_what_their_model_would_hand_them() -> None:
    """Parts of a language model built alone: a config's nested configs that it names in
    ``sub_configs`` built small (not 48 layers of 4096), a stand-in config answering a private
    attribute with None, an activation with its name and a nested config with a config, a
    last-token classifier without a padding token given one sequence, an attention given the
    rotary ``(cos, sin)`` its model computes, a vision attention given them per patch (also when
    it declares them optional), and a
    layer whose config refuses one layer (its layer types must number its depth) built with that
    config at its own depth, given its optional embeddings and no cache, and an embedding whose
    config's padding token lies beyond a small vocabulary built with the config's own vocabulary, and
    a multiple-choice head given several sequences per sample, and a relative position bias built with
    its config's own bucket count."""
    from nnrag.validator.gate import Gate

    with Gate(1) as gate:
        records = {name: gate.check_code(LANGUAGE_MODEL_PARTS, name)
                   for name in ("Tower", "Intermediate", "LastTokenClassifier", "RotaryAttention",
                                "PatchRotaryAttention", "OptionalPatchRotaryAttention", "SharedAttentionLayer",
                                "TokenEmbedder", "ChoiceHead", "BucketBias")}
    for name, record in records.items():
        assert record.ok, f"{name}: {record.message}"
    assert records["Tower"].params < 100_000
    assert records["LastTokenClassifier"].input_shapes == [[1, 16]]
    assert records["RotaryAttention"].output_shapes == [2, 16, 16]
    assert records["PatchRotaryAttention"].input_shapes == [[2, 16, 16], [[16, 8], [16, 8]]]
    assert records["ChoiceHead"].input_shapes == [[2, 2, 16]]


def test_an_extension_compiled_as_its_module_is_imported_stands_in_until_called(tmp_path: Path) -> None:
    """``fused = load("fused", sources=[...])`` (torch's C++ extension builder) runs as the module
    is imported, and no compiler runs in the gate: the copied statement is deferred, so blocks that
    compute on the CPU without it pass, and the one that calls it fails there as a native extension."""
    repo = tmp_path / "jit_ops_repo"
    shutil.copytree(FIXTURES / "jit_ops_repo", repo)
    home = tmp_path / "home"
    nnrag.build([str(repo)], home=home, limits=LIMITS, search=False, harvest=False)
    entries = {e["name"]: e for e in nnrag.library_entries(home=home)}
    assert entries["StyledConv"]["status"] == entries["FusedLeakyReLU"]["status"] == "validated", \
        (entries["StyledConv"]["message"], entries["FusedLeakyReLU"]["message"])
    only = entries["FusedOnly"]
    assert (only["status"], only["code"]) == ("failed", "native-extension"), only["message"]
    assert "could not be built here" in str(only["message"])
    code = nnrag.extract("StyledConv", home=home).code
    assert "fused = _Unavailable.load(lambda: (load(" in code
    # an extension module its setup compiles from the sources beside it, never built in a checkout
    assert entries["Blur"]["status"] == "validated", entries["Blur"]["message"]
    unbuilt = entries["BlurOnly"]
    assert (unbuilt["status"], unbuilt["code"]) == ("failed", "native-extension"), unbuilt["message"]
    assert "op.upfirdn_ext" in str(unbuilt["message"])


def test_a_verdict_does_not_hang_on_the_random_state_a_worker_started_with() -> None:
    """numpy and Python seed their global generators from the operating system when imported, so
    two workers (or two builds) would draw differently: an augmentation that crops at random
    passes in one and fails in the other. Each check starts from the same state."""
    from nnrag.validator.gate import Gate

    code = ("import random\n\nimport numpy as np\nimport torch.nn as nn\n\nclass Draws(nn.Module):\n"
            "    def forward(self, x):\n        raise RuntimeError(f'drew {np.random.rand()} {random.random()}')\n")
    messages = set()
    for _ in range(2):
        with Gate(1) as gate:
            messages.add(gate.check_code(code, "Draws").message)
    assert len(messages) == 1 and "drew" in next(iter(messages)), messages


def test_a_layer_class_guessed_where_a_helper_clones_layers_is_tried_as_an_instance() -> None:
    """DETR's encoders clone ``encoder_layer`` in a helper (``_get_clones(module, N)``), whose
    failing line names no argument of the block: the layer classes guessed are tried as layers
    (before: ``ReLU is not a Module subclass``, a constructor-args failure)."""
    code = ("import copy\n\nimport torch.nn as nn\n\n\ndef _get_clones(module, N):\n"
            "    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])\n\n\n"
            "class Encoder(nn.Module):\n    def __init__(self, encoder_layer, num_layers):\n        super().__init__()\n"
            "        self.layers = _get_clones(encoder_layer, num_layers)\n\n"
            "    def forward(self, src, pos=None):\n        for layer in self.layers:\n"
            "            src = layer(src, pos=pos)\n        return src\n")
    record = nnrag.validate(code=code, class_name="Encoder")
    assert record.ok, record.message
    assert record.init_args["encoder_layer"] == "Passthrough()", record.init_args


def test_a_guessed_list_a_helper_indexes_past_its_end_is_grown() -> None:
    """pytorch-toolbelt's encoders hand ``filters`` to ``_take_ints(filters, layers)`` with
    ``layers`` defaulting to ``[1, 2, 3, 4]``: the list, found among the helper's locals, grows
    past the highest position there (before: ``list index out of range``, constructor-args)."""
    code = (
        "from typing import List\n\nimport torch.nn as nn\n\n\n"
        "def _take_ints(elements: List[int], indexes: List[int]) -> List[int]:\n"
        "    selected: List[int] = []\n    for i in indexes:\n        selected.append(elements[i])\n    return selected\n\n\n"
        "class Encoder(nn.Module):\n    def __init__(self, filters, strides, layers=None):\n        super().__init__()\n"
        "        if layers is None:\n            layers = [1, 2, 3, 4]\n"
        "        self.channels = _take_ints(filters, layers)\n        self.strides = _take_ints(strides, layers)\n"
        "        self.stem = nn.Conv2d(3, self.channels[0], 3, padding=1)\n\n"
        "    def forward(self, x):\n        return self.stem(x)\n")
    record = nnrag.validate(code=code, class_name="Encoder")
    assert record.ok, record.message
    assert record.init_args["filters"].count(",") == 4, record.init_args


def test_an_input_object_with_a_padding_mask_gets_one_that_masks_nothing() -> None:
    """The DETR family's position embeddings and backbones take a ``NestedTensor``: a batch of
    images (``.tensors``) and a padding mask (``.mask``, one flag per pixel) that they invert. The
    object read by field holds a boolean mask without the channel axis (before: a float tensor of
    the image's shape, ``~mask`` failed, input-inference)."""
    code = ("import math\n\nimport torch\nimport torch.nn as nn\n\n\nclass PositionEmbeddingSine(nn.Module):\n"
            "    def __init__(self, num_pos_feats=64, temperature=10000):\n        super().__init__()\n"
            "        self.num_pos_feats = num_pos_feats\n        self.temperature = temperature\n\n"
            "    def forward(self, tensor_list):\n        x = tensor_list.tensors\n        mask = tensor_list.mask\n"
            "        assert mask is not None\n        not_mask = ~mask\n"
            "        y_embed = not_mask.cumsum(1, dtype=torch.float32)\n        x_embed = not_mask.cumsum(2, dtype=torch.float32)\n"
            "        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=x.device)\n"
            "        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)\n"
            "        pos_x = x_embed[:, :, :, None] / dim_t\n        pos_y = y_embed[:, :, :, None] / dim_t\n"
            "        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2) + x.mean()\n")
    record = nnrag.validate(code=code, class_name="PositionEmbeddingSine")
    assert record.ok, record.message
    (given,) = record.input_shapes
    assert len(given["mask"]) == 3 and given["mask"][0] == given["tensors"][0], given


def test_a_layer_class_guessed_for_a_function_called_with_several_arguments_gives_way_to_the_stand_in() -> None:
    """norse's cells take their step function (``activation(input, state, p, dt)``) and torchdyn's
    vector fields are called as ``vf(t, x, args=args)``: a layer class guessed there is
    constructed with those arguments (``ReLU.__init__() takes from 1 to 2 positional arguments
    but 5 were given``, before an input-inference failure); an instance of the stand-in takes
    the call."""
    code = ("import torch\nimport torch.nn as nn\n\n\nclass Cell(nn.Module):\n"
            "    def __init__(self, activation, p=0.5, dt=0.001):\n        super().__init__()\n"
            "        self.activation = activation\n        self.p = p\n        self.dt = dt\n\n"
            "    def forward(self, x, state=None):\n        state = torch.zeros_like(x) if state is None else state\n"
            "        z, state = self.activation(x, state, self.p, self.dt)\n        return z + state\n")
    record = nnrag.validate(code=code, class_name="Cell")
    assert record.ok, record.message
    assert record.init_args["activation"] == "Passthrough()", record.init_args


def test_a_block_whose_parent_sets_the_map_size_before_each_call_gets_the_size_of_its_tokens() -> None:
    """Swin's detection and segmentation blocks (Swin-Transformer-Object-Detection, Mask2Former,
    FasterViT's DINO) take tokens and read the height and width of their map off ``self.H`` and
    ``self.W``, which their parent sets before each call and which are ``None`` until then (before:
    ``unsupported operand type(s) for *: 'NoneType' and 'NoneType'``, input-inference)."""
    code = ("import torch\nimport torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self, dim):\n"
            "        super().__init__()\n        self.norm = nn.LayerNorm(dim)\n        self.H = None\n        self.W = None\n\n"
            "    def forward(self, x):\n        B, L, C = x.shape\n        H, W = self.H, self.W\n"
            "        assert L == H * W, 'input feature has wrong size'\n"
            "        x = self.norm(x).view(B, H, W, C).permute(0, 3, 1, 2)\n"
            "        return torch.nn.functional.avg_pool2d(x, 3, 1, 1).flatten(2).transpose(1, 2)\n")
    record = nnrag.validate(code=code, class_name="Block")
    assert record.ok, record.message
    (tokens, *_) = record.input_shapes
    assert math.isqrt(tokens[1]) ** 2 == tokens[1], record.input_shapes


def test_a_head_built_from_a_config_object_passes_with_what_its_entries_name() -> None:
    """As effdet's ``HeadNet(config, num_outputs)``: the config's keyword entries go on with
    ``**`` (a mapping), its activation is named by a string (``head_act_type``), one entry's
    length is taken (``aspect_ratios``), and forward takes one map per pyramid level
    (``num_levels``). Before: ``'dict' object has no attribute 'num_levels'`` (the whole config
    replaced by a mapping), then ``'int' object is not callable``."""
    code = '''
from functools import partial
from typing import List

import torch
from torch import nn

_ACTS = {"relu": nn.ReLU, "silu": nn.SiLU}


class LevelHead(nn.Module):
    def __init__(self, config, num_outputs):
        super().__init__()
        self.num_levels = config.num_levels
        norm_layer = config.norm_layer or nn.BatchNorm2d
        if config.norm_kwargs:
            norm_layer = partial(norm_layer, **config.norm_kwargs)
        act_type = config.head_act_type if getattr(config, "head_act_type", None) else config.act_type
        self.act = _ACTS[act_type](inplace=True)
        self.conv = nn.Conv2d(config.fpn_channels, config.fpn_channels, 3, padding=1)
        self.bn = nn.ModuleList([norm_layer(config.fpn_channels) for _ in range(self.num_levels)])
        num_anchors = len(config.aspect_ratios) * config.num_scales
        self.predict = nn.Conv2d(config.fpn_channels, num_outputs * num_anchors, 3, padding=1)

    def forward(self, x: List[torch.Tensor]) -> List[torch.Tensor]:
        return [self.predict(self.act(self.bn[level](self.conv(x[level])))) for level in range(self.num_levels)]
'''
    record = nnrag.validate(code=code, class_name="LevelHead")
    assert record.ok, (record.code, record.message)


def test_a_second_input_handed_to_a_linear_map_or_an_embedding_table_gets_what_that_layer_takes() -> None:
    """A style vector a modulated convolution maps to per-channel scales (StyleGAN2's
    ``ModulatedConv2d(x, style)``) and class labels an embedding table looks up, beside a flag
    tested for truth (DiT's ``LabelEmbedder(labels, train)``), and RAFT's motion encoder, which
    builds its correlation branch first but takes the flow first. Before: each got a tensor like
    the image (or the flow the correlation's channels), and failed at ``.view``, at the lookup
    (float indices), at ``if train`` (a tensor's truth is ambiguous) or at the flow's convolution."""
    code = '''
import torch
from torch import nn
from torch.nn import functional as F


class Modulated(nn.Module):
    def __init__(self, in_channels, out_channels, num_style_feat):
        super().__init__()
        self.modulation = nn.Linear(num_style_feat, in_channels)
        self.weight = nn.Parameter(torch.randn(1, out_channels, in_channels, 3, 3))

    def forward(self, x, style):
        b, c, h, w = x.shape
        style = self.modulation(style).view(b, 1, c, 1, 1)
        weight = (self.weight * style).view(b * self.weight.shape[1], c, 3, 3)
        out = F.conv2d(x.view(1, b * c, h, w), weight, padding=1, groups=b)
        return out.view(b, -1, h, w)


class Labelled(nn.Module):
    def __init__(self, num_classes, hidden_size, dropout_prob=0.1):
        super().__init__()
        self.num_classes, self.dropout_prob = num_classes, dropout_prob
        self.proj = nn.Linear(hidden_size, hidden_size)
        self.table = nn.Embedding(num_classes + 1, hidden_size)

    def forward(self, x, y, train):
        if train and self.dropout_prob > 0:
            y = torch.where(torch.rand(y.shape[0]) < self.dropout_prob, self.num_classes, y)
        return self.proj(x) + self.table(y)[:, None, :]


class MotionEncoder(nn.Module):
    def __init__(self, corr_planes):
        super().__init__()
        self.convc1 = nn.Conv2d(corr_planes, 32, 1)
        self.convf1 = nn.Conv2d(2, 32, 7, padding=3)
        self.conv = nn.Conv2d(64, 30, 3, padding=1)

    def forward(self, flow, corr):
        cor = torch.relu(self.convc1(corr))
        flo = torch.relu(self.convf1(flow))
        return torch.cat([self.conv(torch.cat([cor, flo], dim=1)), flow], dim=1)
'''
    for name in ("Modulated", "Labelled", "MotionEncoder"):
        record = nnrag.validate(code=code, class_name=name)
        assert record.ok, (name, record.code, record.message)


def test_a_layer_class_annotated_by_its_private_base_gets_the_public_one_for_images() -> None:
    """nnU-Net's networks take ``conv_op: Type[_ConvNd]`` and check it against the real classes.
    Before: the base itself was given ("Invalid conv op: <class '..._ConvNd'>")."""
    code = '''
from typing import Type, Union

import torch
from torch import nn
from torch.nn.modules.conv import _ConvNd
from torch.nn.modules.dropout import _DropoutNd


class Stage(nn.Module):
    def __init__(self, input_channels: int, output_channels: int, conv_op: Type[_ConvNd],
                 dropout_op: Union[None, Type[_DropoutNd]]):
        super().__init__()
        if conv_op not in (nn.Conv1d, nn.Conv2d, nn.Conv3d):
            raise RuntimeError("Invalid conv op: %s" % str(conv_op))
        self.conv = conv_op(input_channels, output_channels, 3, padding=1)
        self.drop = dropout_op(0.1) if dropout_op is not None else nn.Identity()

    def forward(self, x):
        return self.drop(self.conv(x))
'''
    record = nnrag.validate(code=code, class_name="Stage")
    assert record.ok, (record.code, record.message)


SLOW = '''
import time
from torch import nn

time.sleep({import_s})


class Slow(nn.Module):
    def forward(self, x):
        time.sleep({forward_s})
        return x * 2
'''


def test_a_candidates_import_has_a_clock_of_its_own() -> None:
    """Libraries that compile at import (numba's kernels of librosa, in every fresh process) take
    longer than a whole check of the block may: the check's clock starts where the import ends,
    and the import has a bound of its own."""
    from nnrag.validator.gate import Gate

    with Gate(1, Limits(timeout_s=3.0, import_s=8.0, memory_mb=1000)) as gate:
        slow_import = gate.check_code(SLOW.format(import_s=4, forward_s=0), "Slow")
        endless_import = gate.check_code(SLOW.format(import_s=60, forward_s=0), "Slow")
        slow_forward = gate.check_code(SLOW.format(import_s=0, forward_s=5), "Slow")
    assert slow_import.ok, slow_import
    assert (endless_import.ok, endless_import.code) == (False, "timeout") and "import" in endless_import.message, endless_import
    assert endless_import.seconds < 20, endless_import.seconds
    assert (slow_forward.ok, slow_forward.code) == (False, "timeout"), slow_forward
