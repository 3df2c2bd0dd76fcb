"""Recorded usage: a source's own model factories supply the arguments and inputs no guess can."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import nnrag
from conftest import FIXTURES, write_wheel
from nnrag.validator.usage import runs as usage
from nnrag.db import connect
from nnrag.validator.usage.examples import documented_classes, statements
from nnrag.validator.usage.factories import factory_functions
from nnrag.validator.record import Limits
from nnrag.workspace import Workspace

LIMITS = Limits(timeout_s=8.0, cpu_s=20, memory_mb=2048)
# BandMix: its docstring's example; Masked: the README's; PlanBlock: PlanNet's, which passes on guesses
# StageBase: built only as its subclass ScaledStage, whose recorded construction it takes;
# TableEncoder: built by the first entry of its module's registry table; ArchNet: a guessed name is
# a missing key of its table (dynamic-registry), its factory's is not
RECORDED = {"ConvStage", "BoxPool", "TinyNet", "BandMix", "Masked", "PlanBlock", "ScaledStage", "StageBase", "TableEncoder",
            "ArchNet"}


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(FIXTURES / "usage_repo", src / "usage_repo")
    with_usage, guesses_only = tmp_path_factory.mktemp("with"), tmp_path_factory.mktemp("without")
    return {
        "with": with_usage,
        "without": guesses_only,
        "report": nnrag.build([str(src / "usage_repo")], home=with_usage, limits=LIMITS),
        "guess_report": nnrag.build([str(src / "usage_repo")], home=guesses_only, limits=LIMITS, harvest=False),
    }


def _entries(home: object) -> dict[str, dict[str, object]]:
    entries = {str(e["name"]): e for e in nnrag.library_entries(home=home)}  # type: ignore[arg-type]
    with connect(Workspace.resolve(home)) as store:  # type: ignore[arg-type]
        for name, record in store.conn.execute("SELECT name, record FROM library"):
            entries[name]["record"] = json.loads(record)
    return entries


def test_documented_examples_are_found_statically() -> None:
    text = (FIXTURES / "usage_repo" / "upkg" / "blocks.py").read_text()
    assert documented_classes(text) == ["BandMix"]
    text = 'class A:\n    def forward(self, x):\n        """>>> A()(1)"""\n\nclass B:\n    """No example."""\n'
    assert documented_classes(text) == ["A"]
    # ``>>>`` written where ``...`` belongs still makes whole statements
    assert statements(["T([\n", "    a,\n", "])\n", "for i in x:\n", "    f(i)\n", "    g(i)\n", "y\n"]) == [
        "T([\n    a,\n])\n", "for i in x:\n    f(i)\n    g(i)\n", "y\n"]


def test_readme_code_blocks_are_found_statically() -> None:
    from nnrag.validator.usage.readme import blocks_using, code_blocks, imported_modules

    text = (FIXTURES / "usage_repo" / "README.md").read_text()
    (block,) = code_blocks(text)  # the bash block is not Python
    assert block.startswith("import torch\nfrom upkg.models import Encoder")
    assert imported_modules(block, ["upkg"]) == ["upkg.models", "upkg.blocks"]
    blocks = code_blocks(text)
    assert blocks_using(blocks, ["upkg"], {"Masked"}) == [0] and blocks_using(blocks, ["upkg"], {"TinyNet"}) == []
    assert blocks_using(blocks, ["other"], set()) == []
    doc = "Use it:\n\n    ```py\n    >>> from upkg import x\n    >>> x(1)\n    ```\n\n```python\nnot python(\n```\n"
    assert code_blocks(doc) == ["from upkg import x\nx(1)"]  # indented, with prompts; one that does not parse is left


def test_a_readme_is_the_sources_own(tmp_path: Path) -> None:
    from nnrag.validator.usage.readme import readme_files

    site = tmp_path / "site-packages"  # an installed distribution's root holds every other one's metadata
    for info, top in (("aaa-1.0.dist-info", None), ("upkg-1.0.dist-info", None), ("open_clip_torch-3.0.dist-info", "open_clip")):
        (site / info).mkdir(parents=True)
        (site / info / "METADATA").write_text("Name: x\n")
        if top:
            (site / info / "top_level.txt").write_text(top + "\n")
    assert readme_files(site, ["upkg"]) == [site / "upkg-1.0.dist-info" / "METADATA"]
    assert readme_files(site, ["open_clip"]) == [site / "open_clip_torch-3.0.dist-info" / "METADATA"]
    assert readme_files(site, ["other"]) == []
    (site / "README.md").write_text("# a root README comes first\n")
    assert readme_files(site, ["upkg"]) == [site / "README.md"]


def test_factories_are_found_statically() -> None:
    text = (FIXTURES / "usage_repo" / "upkg" / "models.py").read_text()
    assert factory_functions(text) == ["tiny_net"]
    assert factory_functions("def helper(x, y=1):\n    return x\n\ndef _private(pretrained=False):\n    return 1\n") == []
    ranked = factory_functions("".join(f"def {n}(pretrained=False, **kw):\n    return 1\n" for n in ("net_large", "net_tiny", "net_base")))
    assert ranked[0] == "net_tiny"


def test_registry_tables_are_found_statically() -> None:
    from nnrag.validator.usage.tables import table_names

    assert table_names((FIXTURES / "usage_repo" / "upkg" / "encoders.py").read_text()) == ["table_encoders"]
    # settings without a class, a class without arguments, a table inside a function: none
    assert table_names('URLS = {"a": {"url": "x", "mean": [0.5]}}\nNAMES = {"a": {"cls": Net}}\n'
                       'def f():\n    T = {"a": {"cls": Net, "params": {"w": 1}}}\n') == []


def test_guesses_alone_fail_these_blocks(homes: dict[str, object]) -> None:
    entries = _entries(homes["without"])
    for name in RECORDED:
        assert entries[name]["status"] == "failed", name
        assert entries[name]["code"] in ("constructor-args", "input-inference", "dynamic-registry"), (name, entries[name]["message"])


def test_recorded_usage_validates_them(homes: dict[str, object]) -> None:
    entries = _entries(homes["with"])
    for name in RECORDED:
        e = entries[name]
        assert e["status"] == "validated", (name, e["message"])
        record = e["record"]
        assert record["arguments"] == "recorded", name  # type: ignore[index]
    conv = entries["ConvStage"]["record"]
    # the settings class is the caller's, not part of the block: an object with its attributes stands in
    assert conv["init_args"]["setting"] == "namespace(out_chs=8, depth=1, stride=2)"  # type: ignore[index]
    assert entries["BoxPool"]["record"]["input_shapes"][0] == {"p2": [1, 16, 16, 16]}  # as the factory's model called it  # type: ignore[index]
    assert entries["BandMix"]["record"]["input_shapes"] == [[2, 8, 8, 6]]  # as the example called it
    assert entries["BandMix"]["record"]["output_shapes"] == [2, 8, 8, 1]
    harvest = homes["report"].harvest  # type: ignore[attr-defined]
    # ten with recorded usage, WindowScorer and PairScorer with companions; the table counts as a factory
    assert harvest["rescued"] == 12 and harvest["factories"] == 3 and harvest["examples"] == 2 and harvest["passed"] == 1
    assert homes["report"].passed == homes["guess_report"].passed + 12
    assert entries["TableEncoder"]["record"]["init_args"]["layout"] == "[(3, 8), (8, 16)]"  # type: ignore[index]
    assert entries["StageBase"]["record"]["init_args"]["setting"] == "namespace(out_chs=16, depth=1, stride=1)"  # type: ignore[index]
    # built as the passing network built it; its network's record holds how the gate ran it
    assert entries["PlanBlock"]["record"]["init_args"]["plan"] == "(('conv', 8), ('pool', 2), ('conv', 16))"  # type: ignore[index]
    assert entries["PlanBlock"]["record"]["input_shapes"][0][1] == 3  # type: ignore[index]
    assert entries["PlanNet"]["record"]["arguments"] == "guessed" and entries["PlanNet"]["record"]["recipe"]["call"]  # type: ignore[index]
    masked = entries["Masked"]["record"]
    assert masked["init_args"]["encoder"].startswith("Encoder(") and masked["input_shapes"] == [[2, 12]]  # type: ignore[index]  # type: ignore[attr-defined]


def test_a_wrapper_gets_a_block_of_its_source(homes: dict[str, object]) -> None:
    """No usage builds WindowScorer; the guess gives it a number, which has no ``dim``. The second
    chance finds the source's blocks that set ``self.dim``, adds TokenModel to the file and passes
    one built as it passed the gate; the forward takes exactly its ``max_seq_len`` tokens."""
    without = _entries(homes["without"])["WindowScorer"]
    assert without["status"] == "failed" and "'int' object has no attribute 'dim'" in str(without["message"])
    entries = _entries(homes["with"])
    scorer, model = entries["WindowScorer"], entries["TokenModel"]
    assert scorer["status"] == "validated", scorer["message"]
    record = scorer["record"]
    assert record["init_args"]["net"].startswith("TokenModel(")  # type: ignore[index]
    assert model["status"] == "validated" and record["input_shapes"] == [[2, 24]]  # TokenModel's default context
    # recorded as built: the model by its own recipe, so a harvest can run the wrapper again
    assert record["recipe"]["init"]["kwargs"]["net"]["module"]["cls"] == ["upkg.wrappers", "TokenModel"]  # type: ignore[index]
    assert "class TokenModel(nn.Module):" in (Path(str(homes["with"])) / str(scorer["path"])).read_text()
    # two parts read off: a companion for each, not only for the attribute the first failure names
    pair = entries["PairScorer"]
    assert pair["status"] == "validated", pair["message"]
    assert pair["record"]["init_args"]["head"].startswith("ClassHead(")  # type: ignore[index]


def test_harvest_is_stored_and_not_rerun(homes: dict[str, object]) -> None:
    again = nnrag.build(home=homes["with"], limits=LIMITS)  # type: ignore[arg-type]
    assert again.cached == again.tried and again.harvest == {}
    with connect(Workspace.resolve(homes["with"])) as store:  # type: ignore[arg-type]
        assert usage.plan(store, "usage_repo", {"upkg.models", "upkg.blocks"}) == []  # ran against this very text
        assert [tuple(r) for r in store.conn.execute("SELECT factory, ok FROM harvests ORDER BY factory")] == [
            ("README.md#0:<readme>", 1), ("upkg.archs:arch_net", 1), ("upkg.blocks:BandMix.__doc__", 1), ("upkg.encoders:<tables>", 1),
            ("upkg.models:PlanNet.<passed>", 1), ("upkg.models:tiny_net", 1)]


_RUNNER = """
import importlib.util, json, sys
assert importlib.util.find_spec("upkg") is None
import torch
from nnrag.validator.usage.recipes import RecipeResolver, call_args
spec = importlib.util.spec_from_file_location("block", "block.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
entry = json.loads(sys.argv[2])
resolve = RecipeResolver(vars(mod), lambda m: m.split(".")[0] in sys.stdlib_module_names | {"torch"})
args, kwargs = call_args(entry["init"], resolve)
model = getattr(mod, sys.argv[1])(*args, **kwargs)
args, kwargs = call_args(entry["call"], resolve)
print("ran", type(model(*args, **kwargs)).__name__)
"""


def test_recorded_blocks_run_alone_from_their_recipes(homes: dict[str, object], tmp_path: Path) -> None:
    home = homes["with"]
    with connect(Workspace.resolve(home)) as store:  # type: ignore[arg-type]
        rows = store.conn.execute("SELECT name, qualname, path FROM library WHERE status='validated'").fetchall()
        hints = {name: usage.hints(store.conn, "usage_repo", qualname) for name, qualname, _ in rows}
    for name, _, path in rows:
        if name not in RECORDED:
            continue
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(Path(str(home)) / path, folder / "block.py")
        entry = next(h for h in hints[name] if h.get("call"))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NNRAG_HOME")}
        proc = subprocess.run([sys.executable, "-I", "-c", _RUNNER, name, json.dumps(entry)], cwd=folder,
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0 and "ran Tensor" in proc.stdout, (name, proc.stderr[-2000:])


def test_usage_is_harvested_from_a_wheel_source(tmp_path: Path) -> None:
    """A wheel is unpacked under the home: the gate, which runs a root build's candidates and
    harvests as the user nobody, must still import the package from there (a 0700 unpack folder
    once made every harvest of a ``pypi:`` source fail with "No module named")."""
    files = {f"upkg/{path.name}": path.read_text() for path in sorted((FIXTURES / "usage_repo" / "upkg").glob("*.py"))}
    readme = (FIXTURES / "usage_repo" / "README.md").read_text()  # travels as the metadata's long description
    wheel = write_wheel(tmp_path, "upkg", files, metadata=f"\n{readme}")
    home = tmp_path / "home"
    report = nnrag.build([str(wheel)], home=home, limits=LIMITS)
    assert report.harvest["rescued"] == 12, report.harvest  # ten by usage, two with companions
    with connect(Workspace.resolve(home)) as store:
        assert [tuple(r) for r in store.conn.execute("SELECT factory, ok, message FROM harvests ORDER BY factory")] == [
            ("upkg-1.0.dist-info/METADATA#0:<readme>", 1, None), ("upkg.archs:arch_net", 1, None), ("upkg.blocks:BandMix.__doc__", 1, None),
            ("upkg.encoders:<tables>", 1, None), ("upkg.models:PlanNet.<passed>", 1, None), ("upkg.models:tiny_net", 1, None)]


def test_registry_configs_are_chosen_statically(tmp_path: Path) -> None:
    from nnrag.validator.usage.configs import choose, model_types

    root = FIXTURES / "registry_repo"
    assert model_types((root / "regpkg/configs/tiny_detector.py").read_text()) == {
        "TinyDetector", "Normalizer", "StageStack", "ScoreHead", "AbsLoss"}
    assert model_types((root / "regpkg/configs/overrides_only.py").read_text()) == set()
    assert model_types("default_scope = 'x'\n") is None
    # the override names nothing new
    assert choose(root, 10) == ["regpkg/configs/tiny_detector.py", "regpkg/configs/sampled_detector.py"]
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.py").write_text("model = dict(type='A', head=dict(type='H'))\n")
    (tmp_path / "configs" / "b.py").write_text("model = dict(type='B', head=dict(type='H'), neck=dict(type='N'))\n")
    (tmp_path / "configs" / "c.py").write_text("model = dict(type='A')\n")
    (tmp_path / "configs" / "d.py").symlink_to(root / "regpkg/configs/tiny_detector.py")  # links are not read
    assert choose(tmp_path, 10) == ["configs/b.py", "configs/c.py"]  # A again: the shorter file
    assert choose(tmp_path, 1) == ["configs/b.py"]


def test_registry_configs_supply_usage(tmp_path: Path) -> None:
    """A package built on mmengine's registry (the corpus holds mmengine itself, from PyPI) has no
    model factories: its configs are built by the registry in the harvest, in an environment with
    what the distributions declare, and the recorded arguments rescue blocks whose guesses fail,
    including a head whose config asks the registry for a class no statement of its file names,
    and a detector on mmengine's BaseModel that reads its data samples: the harvest calls it as its
    test loop does, and the recorded samples are rebuilt as the class they were."""
    root = FIXTURES / "registry_repo"
    wheel = write_wheel(tmp_path, "regpkg", {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))},
                        metadata="Requires-Dist: mmengine-lite\n")
    home = tmp_path / "home"
    blocks = {"StageStack", "ScoreHead", "TinyDetector", "SampledDetector"}
    guessed = nnrag.build([str(wheel), "pypi:mmengine-lite==0.10.7"], home=tmp_path / "guess", limits=LIMITS,
                          names=blocks, harvest=False, search=False, requirements="install")
    assert guessed.passed == 0, guessed.failures
    report = nnrag.build([str(wheel), "pypi:mmengine-lite==0.10.7"], home=home, limits=LIMITS, names=blocks,
                         search=False, requirements="install")
    assert report.harvest["configs"] == 2 and report.harvest["rescued"] == 4, report.harvest
    entries = _entries(home)
    assert {n for n in blocks if entries[n]["status"] == "validated"} == blocks
    head = (home / str(entries["ScoreHead"]["path"])).read_text()
    assert "class AbsLoss" in head  # copied for the config's loss, though the file never names it
    loss = entries["ScoreHead"]["record"]["recipe"]["init"]["kwargs"]["loss"]  # type: ignore[index]
    assert loss["type"] == ["mmengine.config.config", "ConfigDict"]  # read by attribute: rebuilt as one
    # the package's registry keeps the scope it infers in the source, so the root registry finds
    # it by the config's default scope (the preprocessor) and by scoped keys ('regpkg.AbsLoss')
    detector = (home / str(entries["TinyDetector"]["path"])).read_text()
    assert 'locations=["regpkg.models"], scope=\'regpkg\')\n' in detector
    assert "Registry('model', build_model_from_cfg, scope='mmengine')\n" in detector  # the root, copied
    with connect(Workspace.resolve(home)) as store:
        recorded = usage.hints(store.conn, "regpkg", "regpkg.models.TinyDetector")
    assert [e["scope"] for e in recorded] == ["regpkg"]
    with connect(Workspace.resolve(home)) as store:
        assert [tuple(r) for r in store.conn.execute("SELECT factory, ok FROM harvests WHERE factory LIKE '%<config>' ORDER BY factory")] == [
            ("regpkg/configs/sampled_detector.py:<config>", 1), ("regpkg/configs/tiny_detector.py:<config>", 1)]
    sampled = entries["SampledDetector"]["record"]
    assert sampled["arguments"] == "recorded" and sampled["output_shapes"] == [1, 4]  # one score per channel
    # called with the recorded batch: its data sample rebuilt as the class it was, copied into the file
    sample = sampled["recipe"]["call"]["kwargs"]["data_samples"]["list"][0]  # type: ignore[index]
    assert sample["object"] == ["nnrag_candidate", "BaseDataElement"] and "img_shape" in sample["state"]["_metainfo_fields"]["set"]


_IMPORTS_WHAT_IS_NOT_THERE = '''
import subprocess

from torch import nn

from . import _native  # a compiled extension this distribution ships unbuilt


class Lifted(nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, width, 1)

    def forward(self, x):
        return self.conv(x)


def lifted_tiny(pretrained=False):
    try:  # as matplotlib runs fc-list: a tool that is not there is handled
        subprocess.run(["touch", MARK], check=True)
    except OSError:
        pass
    try:
        _native.nms()
    except ImportError:
        pass
    return Lifted(6)
'''


def test_harvest_imports_a_package_with_an_unbuilt_extension(tmp_path: Path) -> None:
    """The harvest imports the whole package: a submodule no file provides stands in, raising
    ImportError only when called, and starting a process fails with an OSError the factory can
    handle, while nothing is started."""
    from nnrag.validator.gate import Gate

    package = tmp_path / "src" / "liftpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    mark = tmp_path / "started"
    (package / "models.py").write_text(f"MARK = {str(mark)!r}\n" + _IMPORTS_WHAT_IS_NOT_THERE)
    with Gate(1, LIMITS) as gate:
        result = gate.harvest([("liftpkg.models", "lifted_tiny")], ["liftpkg"], [str(tmp_path / "src")], timeout_s=60)
    (record,) = result["factories"]
    assert record["ok"], record
    assert record["usage"]["liftpkg.models.Lifted"][0]["init"]["args"] == [{"v": 6}]
    assert not mark.exists() and not result.get("violations"), result


def test_recipes_keep_small_integer_tensors_and_sets() -> None:
    """A deformable attention's level shapes and start indices must come back as they were, not
    as fresh random integers in their range; a data sample's field names are a set."""
    import torch

    from nnrag.validator.usage.recipes import RecipeResolver, dump, load

    resolve = RecipeResolver({}, lambda module: False)
    shapes = torch.tensor([[32, 32], [16, 16], [8, 8]])
    again = load(dump(shapes, {}), resolve)
    assert again.dtype == torch.int64 and again.tolist() == shapes.tolist()
    big = load(dump(torch.arange(1000), {}), resolve)  # too many to keep: drawn again within the range
    assert big.shape == (1000,) and int(big.min()) >= 0 and int(big.max()) <= 999
    assert load(dump({"img_shape", "pad_shape"}, {}), resolve) == {"img_shape", "pad_shape"}
    # a config dict whose class the file lacks still reads by attribute, as the block reads it
    settings = load(dump(_Settings(loss_weight=2.0), {}), resolve)
    assert settings == {"loss_weight": 2.0} and settings.loss_weight == 2.0
    # a named tuple whose class the file lacks reads by field and by position (EfficientNet's BlockArgs)
    args = load(dump(_BlockArgs(3, 6), {}), resolve)
    assert args == (3, 6) and args.expand_ratio == 6 and type(args).__name__ == "_BlockArgs"
    assert type(load(dump(_BlockArgs(3, 6), {}), RecipeResolver({"_BlockArgs": _BlockArgs}, lambda m: False))) is _BlockArgs


class _Settings(dict):
    """A dict subclass standing for a config dict (mmengine's ``ConfigDict``)."""


_BlockArgs = collections.namedtuple("_BlockArgs", ["kernel_size", "expand_ratio"])


_WRAPPER_SOURCE = '''
class Wrapper(nn.Module):
    expansion = 4

    def __init__(self, net, mask_id=0):
        super().__init__()
        self.net = net
        self.width = net.dim
        self.mask_id = mask_id

    def forward(self, x):
        assert x.shape[1] == self.net.max_seq_len
        return self.net(x).logits + self.width
'''


def test_attributes_a_class_defines_and_reads_off_its_arguments() -> None:
    """What companions are chosen by: the attributes a class defines (its body, ``self.x`` in
    ``__init__``) and those it reads off its constructor's arguments, directly or through
    ``self.net = net``; a result read off a call (``self.net(x).logits``) is not the argument's."""
    import ast

    from nnrag.indexing.attributes import constructor_arguments, defined_by, read_off

    node = ast.parse(_WRAPPER_SOURCE).body[0]
    assert isinstance(node, ast.ClassDef)
    assert defined_by(node) == {"expansion", "net", "width", "mask_id"}
    assert constructor_arguments(node) == {"net", "mask_id"}
    assert read_off([node], constructor_arguments(node)) == {"dim", "max_seq_len"}


def test_companions_are_built_one_block_deep_where_their_recipe_gives_a_depth() -> None:
    """A companion recorded at its real size (a 12-layer decoder inside its wrapper) is built with
    one block first: the block that needs it reads its attributes, not its depth."""
    from nnrag.validator.probing.companions import shallow

    decoder = {"cls": ["m", "Decoder"], "args": [], "kwargs": {"dim": {"v": 512}, "depth": {"v": 12}}}
    recipe = {"cls": ["m", "TransformerWrapper"], "args": [{"v": 20000}],
              "kwargs": {"attn_layers": {"module": decoder}, "num_layers": {"v": 6}, "heads": {"v": 8}, "use_layers": {"v": True}}}
    assert shallow(recipe) == {
        "cls": ["m", "TransformerWrapper"], "args": [{"v": 20000}],
        "kwargs": {"attn_layers": {"module": {"cls": ["m", "Decoder"], "args": [], "kwargs": {"dim": {"v": 512}, "depth": {"v": 1}}}},
                   "num_layers": {"v": 1}, "heads": {"v": 8}, "use_layers": {"v": True}}}
    assert recipe["kwargs"]["num_layers"] == {"v": 6}  # the recorded recipe is left as it was


def test_a_class_that_takes_one_config_is_built_with_the_repositorys_default_config(tmp_path: Path) -> None:
    """``Mixer(cfg)`` reads sections of a yacs-style settings object (``cfg.MODEL.WIDTH``) that no
    stand-in answering attributes with numbers can be; the repository sets the defaults in code
    and returns a copy from ``get_cfg()``. The harvest builds the class with that, and the block
    passes with the recorded settings, rebuilt in its file as an object read by attribute."""
    repo = tmp_path / "defaults_repo"
    shutil.copytree(FIXTURES / "defaults_repo", repo)
    guessed = nnrag.build([str(repo)], home=tmp_path / "guess", limits=LIMITS, harvest=False, search=False)
    assert guessed.failures == {"constructor-args": 1}
    home = tmp_path / "home"
    report = nnrag.build([str(repo)], home=home, limits=LIMITS, search=False)
    assert report.passed == 1 and report.harvest["rescued"] == 1, report.harvest
    record = _entries(home)["Mixer"]["record"]
    assert record["arguments"] == "recorded" and record["input_shapes"][0][-1] == 12  # type: ignore[index]
    with connect(Workspace.resolve(home)) as store:
        (message,) = store.conn.execute("SELECT message FROM harvests WHERE factory='dpkg.config:<defaults>'").fetchone()
    assert "query should be" in message  # built; the harvest's image inputs do not fit an attention over tokens


def test_classes_that_read_a_settings_file_are_built_with_the_repositorys_own(tmp_path: Path) -> None:
    """``Generator(h)`` reads its strides, kernels and widths off ``h``, which the training script
    loads from ``config_v1.json``; ``ResBlock(h, channels)`` is built inside it. No guess is a
    settings object whose lists agree; the repository's file is. The harvest builds the class
    that takes only ``h`` with it, and both blocks pass with what it recorded."""
    repo = tmp_path / "settings_repo"
    shutil.copytree(FIXTURES / "settings_repo", repo)
    guessed = nnrag.build([str(repo)], home=tmp_path / "guess", limits=LIMITS, harvest=False, search=False)
    # a stand-in settings object builds one of them, whose guessed lists then disagree in forward
    assert guessed.passed == 0 and sum(guessed.failures.values()) == 2, guessed.failures
    home = tmp_path / "home"
    report = nnrag.build([str(repo)], home=home, limits=LIMITS, search=False)
    assert report.passed == 2 and report.harvest["rescued"] == 2, report.harvest
    entries = _entries(home)
    assert {entries[n]["record"]["arguments"] for n in ("Generator", "ResBlock")} == {"recorded"}  # type: ignore[index]
    assert entries["Generator"]["record"]["input_shapes"][0][1] == 20  # type: ignore[index]  # num_mels of the file


def test_settings_are_read_from_files_and_parsers_that_hold_what_the_classes_read(tmp_path: Path) -> None:
    """Settings objects: a JSON file and its nested sections, a YAML file, a parser's declared
    defaults (a flag's off, a computed default left out); chosen by the keys the constructors read."""
    from nnrag.validator.usage.settings import choose_settings, keys_read, parser_defaults

    (tmp_path / "model.json").write_text('{"model": {"dim": 8, "depth": 2, "heads": 2}, "lr": 0.1, "epochs": 3, "seed": 0}')
    (tmp_path / "data.yaml").write_text("root: /data\nsplit: train\nworkers: 4\n")
    (tmp_path / "package.json").write_text('{"name": "x", "version": "1", "license": "MIT"}')
    script = textwrap.dedent("""
        import argparse, os
        if __name__ == "__main__":
            p = argparse.ArgumentParser()
            p.add_argument("--seq-len", type=int, default=96)
            p.add_argument("--task_name", default="forecast")
            p.add_argument("--use_amp", action="store_true")
            p.add_argument("--out", default=os.getcwd())
    """)
    assert parser_defaults(script) == {"seq_len": 96, "task_name": "forecast", "use_amp": False}
    models = textwrap.dedent("""
        class Mixer:
            def __init__(self, cfg, width=3):
                self.layers = [cfg.dim] * cfg["depth"]
                self.heads = cfg.heads
        class Forecaster:
            def __init__(self, configs):
                self.n = configs.seq_len
                self.task = configs.task_name
        class Unrelated:
            def __init__(self, opt):
                self.x = opt.other
    """)
    wanted = keys_read(models, {"Mixer", "Forecaster"})
    assert wanted == {"dim", "depth", "heads", "seq_len", "task_name"}
    chosen = choose_settings(tmp_path, [script], wanted, 4)
    assert chosen == [{"dim": 8, "depth": 2, "heads": 2}, {"seq_len": 96, "task_name": "forecast", "use_amp": False}]
    assert choose_settings(tmp_path, [script], {"root", "nothing"}, 4) == []  # one shared key is no settings


def test_settings_build_the_classes_where_the_module_the_unit_runs_on_does_not_import(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings' unit runs on a module of the failing classes where the source makes no
    defaults in code; one that does not import (a missing dependency) leaves the settings to build
    the classes of the modules that do."""
    from nnrag.validator.usage.defaults import run_defaults

    pkg = tmp_path / "spkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "broken.py").write_text("import a_module_nowhere\n")
    (pkg / "models.py").write_text("import torch.nn as nn\n\n\nclass G(nn.Module):\n    def __init__(self, h):\n"
                                   "        super().__init__()\n        self.proj = nn.Linear(h.width, h.width)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    built: list[Any] = []
    error = run_defaults("spkg.broken", ["spkg.models"], ["G"], lambda: None, lambda m: built.append(m),
                         settings=[{"width": 4, "depth": 2, "lr": 0.1}])
    assert error is None and built[0].proj.in_features == 4
    with pytest.raises(ModuleNotFoundError):
        run_defaults("spkg.broken", ["spkg.models"], ["G"], lambda: None, lambda m: None)


def test_default_configs_are_the_settings_objects_a_module_holds_or_returns() -> None:
    """A parser's defaults are settings too (``get_args_parser()``); a parser with a required
    option and functions that need arguments are left alone; the whole settings come first."""
    import argparse
    import types

    from nnrag.validator.usage.defaults import default_configs

    module = types.ModuleType("settings")

    def get_args_parser() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser()
        parser.add_argument("--hidden_dim", default=12, type=int)
        parser.add_argument("--nheads", default=3, type=int)
        return parser

    def required_parser() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser()
        parser.add_argument("--data", required=True)
        return parser

    def config_for(name: str) -> dict[str, str]:
        return {"name": name}

    for fn in (get_args_parser, required_parser, config_for):
        fn.__module__ = "settings"
        setattr(module, fn.__name__, fn)
    (found,) = default_configs(module)
    assert vars(found) == {"hidden_dim": 12, "nheads": 3}


def test_an_mmcv_1x_package_is_harvested_from_its_configs_with_the_release_it_accepts(tmp_path: Path) -> None:
    """A package of the mmcv 1.x kind (its own ``Registry``, configs beside it, the mmcv range it
    accepts checked as it imports) whose mmcv pip cannot build here: mmcv is lent from the newest
    sdist inside that range, the harvest reads the config with ``mmcv.Config``, builds it with the
    package's registry (``build_from_cfg``: mmcv 1.3.0's registries have no ``build``), its
    ``SyncBN`` as ``BN`` and without its ``pretrained`` weights, and runs ``forward_dummy``; the segmentor, which takes config dicts, passes
    with what was recorded."""
    repo = tmp_path / "legacy_registry_repo"
    shutil.copytree(FIXTURES / "legacy_registry_repo", repo)
    home = tmp_path / "home"
    report = nnrag.build([str(repo)], home=home, limits=LIMITS, search=False, requirements="install")
    (lent,) = report.requirements["lent"]  # type: ignore[misc]
    assert (lent["distribution"], lent["version"]) == ("mmcv", "1.3.0"), lent
    entries = _entries(home)
    segmentor = entries["TinySegmentor"]
    assert segmentor["status"] == "validated", segmentor["message"]
    assert segmentor["record"]["arguments"] == "recorded"  # type: ignore[index]
    backbone = segmentor["record"]["recipe"]["init"]["kwargs"]["backbone"]  # type: ignore[index]
    assert dict(backbone["dict"])["norm_cfg"]["dict"][0] == ["type", {"v": "BN"}]
    with connect(Workspace.resolve(home)) as store:
        (ok,) = store.conn.execute("SELECT ok FROM harvests WHERE factory='configs/tiny_segmentor.py:<config>'").fetchone()
    assert ok == 1


def test_models_described_in_yaml_supply_usage(tmp_path: Path) -> None:
    """A repository builds its models from YAML files (``target:`` with ``params:``, as
    taming-transformers does; Hydra's ``_target_``): the harvest builds the modules they describe,
    not the data module beside them, and the autoencoder, whose settings dict names a torch layer
    no guess names, passes with what was recorded."""
    from nnrag.validator.usage.described import choose

    repo = tmp_path / "described_repo"
    shutil.copytree(FIXTURES / "described_repo", repo)
    assert sorted(choose(repo, 10)) == ["conf/head.yaml", "configs/autoencoder.yaml"]
    guessed = nnrag.build([str(repo)], home=tmp_path / "guess", limits=LIMITS, harvest=False, search=False,
                          names={"Autoencoder"})
    assert guessed.failures == {"constructor-args": 1}, guessed.failures
    home = tmp_path / "home"
    report = nnrag.build([str(repo)], home=home, limits=LIMITS, search=False, names={"Autoencoder"})
    assert report.passed == 1 and report.harvest["configs"] == 2, report.harvest
    record = _entries(home)["Autoencoder"]["record"]
    assert record["arguments"] == "recorded" and record["init_args"]["embed_dim"] == "4"  # type: ignore[index]
    with connect(Workspace.resolve(home)) as store:
        rows = dict(store.conn.execute("SELECT factory, ok FROM harvests WHERE factory LIKE '%<described>'").fetchall())
        (head,) = usage.hints(store.conn, "described_repo", "vqpkg.models.Head")
    # both built; the head takes no image, the harvest's input, so it did not run
    assert rows == {"configs/autoencoder.yaml:<described>": 1, "conf/head.yaml:<described>": 0}
    assert head["init"]["kwargs"]["act"]["module"]["cls"] == ["torch.nn.modules.activation", "GELU"]  # built as Hydra does


def test_a_described_target_whose_module_misses_a_requirement_says_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harvest reads a missing requirement off the unit's message to install it next round:
    a target's module that imports what is not here must say that, not that the class is absent."""
    from nnrag.validator.usage.described import _resolve

    pkg = tmp_path / "descpkg"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "vq.py").write_text("import not_installed_here\n\n\nclass VQ:\n    class Inner:\n        pass\n")
    (pkg / "models" / "plain.py").write_text("class Outer:\n    class Inner:\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="not_installed_here"):
        _resolve("descpkg.models.vq.VQ")
    assert _resolve("descpkg.models.plain.Outer.Inner").__qualname__ == "Outer.Inner"


def test_a_class_whose_config_an_experiment_file_completes_is_built_with_it_merged(tmp_path: Path) -> None:
    """The defaults in code leave the model section empty (``MODEL.EXTRA``, made to take new keys); each
    experiment's YAML fills it for yacs's ``merge_from_file``. The harvest merges the override
    files into the defaults and builds the class with the first that builds it."""
    from nnrag.validator.usage.defaults import choose_overrides

    repo = tmp_path / "overrides_repo"
    shutil.copytree(FIXTURES / "overrides_repo", repo)
    assert choose_overrides(repo, 4) == ["experiments/staged_small.yaml"]  # upper-case sections only
    home = tmp_path / "home"
    report = nnrag.build([str(repo)], home=home, limits=LIMITS, search=False)
    assert report.passed == 1 and report.harvest["rescued"] == 1, report.harvest
    record = _entries(home)["Staged"]["record"]
    assert record["arguments"] == "recorded" and record["input_shapes"][0][1] == 3  # type: ignore[index]


_COMPILES_AT_IMPORT = '''
import os
import torch
from torch import nn
from torch.utils.cpp_extension import load

module_path = os.path.dirname(__file__)
fused = load("fused", sources=[os.path.join(module_path, "fused_bias_act.cpp")])


class Blur(nn.Module):
    def __init__(self, kernel, pad):
        super().__init__()
        self.register_buffer("kernel", torch.tensor(kernel, dtype=torch.float32))
        self.pad = pad

    def forward(self, x):
        if x.device.type != "cpu":
            return fused.blur(x, self.kernel, self.pad)
        return nn.functional.pad(x, self.pad) * self.kernel.sum()


class Generator(nn.Module):
    def __init__(self, blur_kernel=[1, 3, 3, 1]):
        super().__init__()
        self.blur = Blur(blur_kernel, pad=(1, 1, 1, 1))

    def forward(self, x):
        return self.blur(x)
'''


def test_harvest_imports_a_module_whose_extension_does_not_build(tmp_path: Path) -> None:
    """A module that compiles its extension as it is imported, from a C++ file that is not there:
    the build fails, the module imports with the extension absent, and a passed block built as the
    gate built it records how it builds the block inside it."""
    from nnrag.validator.gate import Gate
    from nnrag.validator.usage import PASSED_SUFFIX

    package = tmp_path / "src" / "ganpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(_COMPILES_AT_IMPORT)
    recipe = json.dumps({"init": {"args": [], "kwargs": {}},
                         "call": {"args": [{"tensor": [2, 3, 8, 8], "dtype": "float32", "lo": -1.0, "hi": 1.0}], "kwargs": {}}})
    with Gate(1, LIMITS) as gate:
        result = gate.harvest([("ganpkg.model", "Generator" + PASSED_SUFFIX, recipe)], ["ganpkg"], [str(tmp_path / "src")],
                              timeout_s=120)
    (record,) = result["factories"]
    assert record["ok"], record
    init = record["usage"]["ganpkg.model.Blur"][0]["init"]
    assert [e["v"] for e in init["args"][0]["list"]] == [1, 3, 3, 1], init


def test_a_pass_on_a_stand_in_layer_is_judged_again_with_recorded_usage(tmp_path: Path) -> None:
    """``Residual(fn)`` passes its first check with the probe's stand-in layer as ``fn``, which says
    little of it; the factory builds it with a real ``Mixer``. It gets the usage retry like a
    failure, and keeps the recorded verdict; ``Gated``, which no usage builds, keeps its pass."""
    pkg = tmp_path / "standin_repo" / "spkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(
        "from torch import nn\n\n\nclass Mixer(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
        "        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\n"
        "class Residual(nn.Module):\n    def __init__(self, fn):\n        super().__init__()\n        self.fn = fn\n\n"
        "    def forward(self, x):\n        return x + self.fn(x)\n\n\n"
        "class Gated(nn.Module):\n    def __init__(self, fn):\n        super().__init__()\n        self.fn = fn\n\n"
        "    def forward(self, x):\n        return x * self.fn(x).sigmoid()\n\n\n"
        "class MixerNet(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
        "        self.body = Residual(Mixer(dim))\n        self.head = nn.Linear(dim, 2)\n\n"
        "    def forward(self, x):\n        return self.head(self.body(x))\n\n\n"
        "def mixer_net(dim=8):\n    \"\"\"The factory a model zoo would register.\"\"\"\n    return MixerNet(dim)\n")
    home = tmp_path / "home"
    report = nnrag.build([str(tmp_path / "standin_repo")], home=home, limits=LIMITS, search=False)
    entries = _entries(home)
    residual, gated = entries["Residual"]["record"], entries["Gated"]["record"]
    assert entries["Residual"]["status"] == "validated" and residual["arguments"] == "recorded", residual  # type: ignore[index]
    assert residual["init_args"]["fn"].startswith("Mixer(")  # type: ignore[index]
    assert entries["Gated"]["status"] == "validated" and "Passthrough" in gated["init_args"]["fn"]  # type: ignore[index]
    assert report.harvest["rescued"] == 0 and report.passed == report.tried == 4, report.harvest


def test_a_harvest_units_import_has_its_own_clock_and_what_it_left_halfway_is_imported_afresh(tmp_path: Path) -> None:
    """The first unit's import runs past its allowance inside a module it shares with the next
    unit: that unit imports the module afresh rather than meet it cut off halfway."""
    from nnrag.validator.gate import Gate

    package = tmp_path / "src" / "halfpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "shared.py").write_text(
        "import builtins, time\nFIRST = 1\n"
        "if not getattr(builtins, '_halfpkg_seen', False):\n    builtins._halfpkg_seen = True\n    time.sleep(30)\n"
        "SECOND = 2\n")
    (package / "slow.py").write_text("from halfpkg.shared import FIRST\n\ndef build():\n    return None\n")
    (package / "quick.py").write_text(
        "from torch import nn\nfrom halfpkg.shared import SECOND\n\n"
        "class Tiny(nn.Conv2d):\n    pass\n\ndef build():\n    return Tiny(3, SECOND, 3)\n")
    limits = Limits(timeout_s=8.0, cpu_s=20, memory_mb=2048, import_s=3.0)
    with Gate(1, limits) as gate:
        result = gate.harvest([("halfpkg.slow", "build"), ("halfpkg.quick", "build")], ["halfpkg"],
                              [str(tmp_path / "src")], timeout_s=60)
    slow, quick = result["factories"]
    assert not slow["ok"] and "import did not end within 3 s" in slow["message"], slow
    assert quick["ok"], quick
    assert quick["usage"]["halfpkg.quick.Tiny"][0]["init"]["args"] == [{"v": 3}, {"v": 2}, {"v": 3}], quick
