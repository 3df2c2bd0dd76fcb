"""Usage harvest: run a source's own model factories and record how its blocks are really built and called.

Guessing constructor arguments from names fails for blocks whose arguments are structured
(``ResNet(block=Bottleneck, layers=[3, 4, 6, 3])``, a list of stage configs, a backbone module)
and for inputs that are not one tensor (Swin blocks take channels-last maps, RoI pooling takes
boxes). The source's factories (``resnet18()``, ``@register_model def vit_tiny(...)``) know both.
Each factory runs once in the sandbox with every block class of the source wrapped: the wrappers
record the recipe of each construction and of the first calls of ``forward`` on that instance.
The probe later rebuilds those arguments and inputs inside the block's own file.

Runs inside the sandbox child (torch imported).
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.abc
import importlib.util
import inspect
import json
import os
import signal
import sys
import time
import traceback
import types
import typing
from typing import Any, Callable

import torch
from torch import nn

from . import PASSED_SUFFIX
from ..probing import cpu
from ..record import Limits
from .configs import CONFIG_UNIT
from .defaults import DEFAULTS_UNIT, run_defaults
from .described import DESCRIBED_UNIT, run_described
from .examples import EXAMPLE_SUFFIX, example_sources
from .readme import README_UNIT, code_blocks, imported_modules
from ..record import CANDIDATE_MODULE
from .recipes import RecipeResolver, Unrecordable, call_args, dump, ref
from .tables import TABLE_UNIT, run_tables

_ENTRIES_PER_CLASS = 3
_INPUTS = ((1, 3, 64, 64), (1, 3, 224, 224), "list", (1, 3, 8, 64, 64), (1, 3, 16, 112, 112), "pair")


def _no_downloads(factory: Callable[..., Any]) -> dict[str, Any]:
    """Arguments that turn pretrained weights off, for the switches the factory has."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    off: dict[str, Any] = {}
    for name in params:
        if "weights" in name:
            off[name] = None
        elif "pretrained" in name and name != "pretrained_cfg":
            off[name] = False
    return off


class FactoryTimeout(BaseException):
    pass


class Recorder:
    """Wraps ``__init__`` and ``forward`` of the block classes of some packages."""

    def __init__(self, packages: list[str]) -> None:
        self.packages = packages
        self.instances: dict[int, dict[str, Any]] = {}
        self.keep: list[nn.Module] = []  # ids stay unique while recipes refer to them
        self.entries: dict[int, dict[str, Any]] = {}
        self.building: set[int] = set()
        self.wrapped: set[type] = set()

    def _ours(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self.packages)

    def wrap_loaded(self) -> None:
        for name, module in list(sys.modules.items()):
            ours = self._ours(name)
            if not (ours or name.startswith("torch.nn.modules")) or module is None:
                continue
            for obj in list(vars(module).values()):
                if (isinstance(obj, type) and issubclass(obj, nn.Module) and obj.__module__ == name
                        and obj not in self.wrapped):
                    self.wrapped.add(obj)
                    if "__init__" in obj.__dict__:
                        obj.__init__ = self._init(obj.__dict__["__init__"])  # type: ignore[misc]
                    if ours and "forward" in obj.__dict__ and callable(obj.__dict__["forward"]):
                        obj.forward = self._forward(obj.__dict__["forward"])  # type: ignore[method-assign]

    def _init(self, orig: Callable[..., None]) -> Callable[..., None]:
        recorder = self

        @functools.wraps(orig)
        def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:
            key = id(self)
            outer = key not in recorder.building
            recipe = None
            if outer:
                recorder.building.add(key)
                try:
                    recipe = {"cls": ref(type(self)), "args": [dump(a, recorder.instances) for a in args],
                              "kwargs": {k: dump(v, recorder.instances) for k, v in kwargs.items()}}
                except Unrecordable:
                    recipe = None
            try:
                orig(self, *args, **kwargs)
            finally:
                if outer:
                    recorder.building.discard(key)
            if recipe is not None:
                recorder.instances[key] = recipe
                recorder.keep.append(self)
                if recorder._ours(type(self).__module__):
                    recorder.entries[key] = {"init": recipe}

        return __init__

    def _forward(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        @functools.wraps(orig)
        def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            entry = recorder.entries.get(id(self))
            if entry is not None and "call" not in entry:
                try:
                    entry["call"] = {"args": [dump(a, recorder.instances) for a in args],
                                     "kwargs": {k: dump(v, recorder.instances) for k, v in kwargs.items()}}
                except Unrecordable:
                    entry["call"] = None
            return orig(self, *args, **kwargs)

        return forward

    def take(self, scope: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Entries per block class (``module.Qualname``), those with a recorded call first;
        ``scope``: the registry scope they were built in."""
        per_class: dict[str, list[dict[str, Any]]] = {}
        seen: set[str] = set()
        ordered = sorted(self.entries.values(), key=lambda e: not e.get("call"))
        for entry in ordered:
            if scope:
                entry["scope"] = scope
            module, qualname = entry["init"]["cls"]
            key = f"{module}.{qualname}"
            bucket = per_class.setdefault(key, [])
            text = json.dumps(entry, sort_keys=True)
            if len(bucket) < _ENTRIES_PER_CLASS and text not in seen:
                seen.add(text)
                bucket.append({k: v for k, v in entry.items() if v is not None})
        self.instances.clear()
        self.entries.clear()
        self.keep.clear()
        return per_class


def _call(model: nn.Module, kind: Any) -> None:
    if kind == "list":  # detection models take a list of images
        model([torch.rand(3, 64, 64)])
    elif kind == "pair":  # optical flow takes two frames
        model(torch.rand(1, 3, 128, 128), torch.rand(1, 3, 128, 128))
    else:
        model(torch.rand(kind))


# a detector's smallest level stays above a 3x3 kernel, DINO keeps 900 of its tokens; SSD wants 300
_BATCH_SIDES = (256, 512)


def _sample_class(model: nn.Module, base: type) -> type:
    """The data-sample class the model's forward declares (``data_samples: List[DetDataSample]``),
    else the base every one derives from."""
    try:
        hint = typing.get_type_hints(type(model).forward).get("data_samples")
    except Exception:  # noqa: BLE001 - annotations that do not resolve here
        hint = None
    stack = [hint]
    while stack:
        t = stack.pop()
        if isinstance(t, type) and issubclass(t, base):
            return t
        stack.extend(typing.get_args(t))
    return base


def _run_batch(model: nn.Module) -> None:
    """An mmengine model called as its test loop calls it: a batch of images with data samples
    that carry the meta information heads read (image and padded shapes, scale), put through
    the model's own data preprocessor, then the forward pass that returns the raw outputs."""
    from mmengine.structures import BaseDataElement

    for n in _BATCH_SIDES:
        side = (n, n)
        meta = {"img_shape": side, "ori_shape": side, "pad_shape": side, "batch_input_shape": side,
                "scale_factor": (1.0, 1.0), "img_id": 0, "flip": False}
        sample = _sample_class(model, BaseDataElement)(metainfo=meta)
        data = model.data_preprocessor({"inputs": [torch.randint(0, 256, (3, *side), dtype=torch.uint8)], "data_samples": [sample]}, False)
        try:
            model(**data, mode="tensor")
            return
        except RuntimeError as e:
            if n == _BATCH_SIDES[-1] or "size" not in str(e):
                raise


def _exercise(model: Any) -> str | None:
    """Run a forward pass on the first input shape that fits; the error text when none does."""
    if not isinstance(model, nn.Module):
        return f"the factory returned {type(model).__name__}, not a module"
    model.eval()
    first: str | None = None
    if callable(getattr(model, "forward_dummy", None)):  # an mmcv 1.x model: its inference path without meta information
        try:
            with torch.no_grad():
                model.forward_dummy(torch.rand(1, 3, _BATCH_SIDES[0], _BATCH_SIDES[0]))
            return None
        except FactoryTimeout:
            raise
        except Exception as e:
            first = f"{type(e).__name__}: {e}"[:300]
    if isinstance(getattr(model, "data_preprocessor", None), nn.Module) and callable(getattr(model, "test_step", None)):
        try:
            with torch.no_grad():
                _run_batch(model)
            return None
        except FactoryTimeout:
            raise
        except Exception as e:
            first = f"{type(e).__name__}: {e}"[:300]
    for kind in _INPUTS:
        try:
            with torch.no_grad():
                _call(model, kind)
            return None
        except FactoryTimeout:
            raise
        except Exception as e:
            first = first or f"{type(e).__name__}: {e}"[:300]
    return first


def _run_examples(module: Any, qualname: str) -> str | None:
    """Run the examples of a class's docstrings in its module's namespace, with the names
    documentation takes for granted (``torch``, ``nn``, ``F``, ``np``, the top-level package);
    the error of the first statement that fails ends them (the rest builds on it)."""
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    sources = example_sources(obj)
    if not sources:
        return "no examples"
    top = module.__name__.split(".")[0]
    namespace = {"torch": torch, "nn": nn, "F": torch.nn.functional, **vars(module)}
    namespace.setdefault(top, importlib.import_module(top))
    try:
        namespace.setdefault("np", importlib.import_module("numpy"))
    except ImportError:
        pass
    for i, source in enumerate(sources, 1):
        try:
            exec(compile(source, f"<example {i} of {qualname}>", "exec"), namespace)
        except Exception as e:
            return f"example line {i}: {type(e).__name__}: {e}"[:300]
    return None


def _run_passed(module_name: str, qualname: str, recipe: dict[str, Any], recorder: "Recorder") -> str | None:
    """Build a block that passed the gate as the gate built it and call it as the gate did, in
    its package: the blocks it builds inside record how they are built and called, which serves
    those of them that fail on their own (a U-Net's up block needs the skip connections its
    model passes it). Names the gate's copy defined are looked up in the block's module."""
    module = importlib.import_module(module_name)
    recorder.wrap_loaded()
    cls: Any = module
    for part in qualname.split("."):
        cls = getattr(cls, part)
    resolve = RecipeResolver(vars(module), lambda name: name != CANDIDATE_MODULE)
    args, kwargs = call_args(recipe["init"], resolve)
    model = cls(*args, **kwargs)
    model.eval()
    args, kwargs = call_args(recipe["call"], resolve)
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception as e:
        return f"{type(e).__name__}: {e}"[:300]
    return None


@functools.lru_cache(maxsize=4)  # a job runs many blocks of one README
def _readme_blocks(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return code_blocks(f.read())


def _run_readme(unit: str, packages: list[str], recorder: "Recorder") -> str | None:
    """Run code block N of the README at ``PATH#N`` in a fresh namespace, the modules of the
    source it imports loaded and wrapped first; its first error ends it."""
    path, _, index = unit.rpartition("#")
    blocks = _readme_blocks(path)
    if not index.isdigit() or int(index) >= len(blocks):
        return "no such code block"
    block = blocks[int(index)]
    for name in imported_modules(block, packages):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the block's own import reports it
            pass
    recorder.wrap_loaded()
    try:
        exec(compile(block, f"<README block {index}>", "exec"), {"__name__": "__readme__"})
    except Exception as e:
        return f"{type(e).__name__}: {e}"[:300]
    return None


class _Absent(types.ModuleType):
    """A module of a package of the corpus that no file provides: its attributes are functions
    that raise the ImportError when called."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        error = ImportError(f"{self.__name__} is not provided by any file (a compiled extension that is not built)")

        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise error

        return unavailable


class AbsentModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: a submodule that no finder found, of a package loaded from the
    corpus's folders, is a compiled extension the distribution ships unbuilt (mmcv-lite's
    ``mmcv._ext``, which ``mmcv.ops`` loads and every mmdet model module imports). Standing in
    for it lets the package import, so its models can be built; what calls into it fails there.
    Block files get the same treatment from ``extract.unavailable``."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = [os.path.join(os.path.realpath(r), "") for r in roots]

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        parent = fullname.rpartition(".")[0]
        file = getattr(sys.modules.get(parent), "__file__", None) if parent else None
        if not file or not any(os.path.realpath(file).startswith(r) for r in self.roots):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        return _Absent(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _extensions_unbuilt() -> None:
    """``fused = load("fused", sources=[...])`` at a module's top (torch's ``cpp_extension``) fails
    where no compiler, CUDA toolkit or source file is, and with it the import of every model
    module that imports that one. A build that fails gives the absent module instead: the models
    import and build, and only what calls into the extension fails, as in a block's own file
    (see ``extraction.unavailable``)."""
    from torch.utils import cpp_extension

    def unbuilt(build: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(build)
        def load(name: str, *args: Any, **kwargs: Any) -> Any:
            try:
                return build(name, *args, **kwargs)
            except Exception:  # noqa: BLE001 - whatever stopped the build, the extension is not here
                return _Absent(str(name))
        return load

    for name in ("load", "load_inline"):
        if not getattr(getattr(cpp_extension, name), "__wrapped__", None):
            setattr(cpp_extension, name, unbuilt(getattr(cpp_extension, name)))


def _load_config(path: str, packages: list[str]) -> tuple[Any, Any, str]:
    """The registry that builds a config file's model (mmengine's, in the config's scope, by
    default the source's first package), the model's config and that scope; the registry's model
    modules are imported first, so that the recorder can wrap their classes before the build."""
    if (legacy := _legacy_config(path, packages)) is not None:
        return legacy
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope

    cfg = Config.fromfile(path)
    scope = cfg.get("default_scope") or packages[0]
    init_default_scope(scope)
    with MODELS.switch_scope_and_registry(scope) as registry:
        registry.import_from_location()
    return registry, _built_here(cfg.model), scope


def _legacy_config(path: str, packages: list[str]) -> tuple[Any, Any, str] | None:
    """The same for the packages of mmcv 1.x (``mmcv.Config``, a ``Registry`` per package that
    ``<package>.models`` fills as it imports: mmseg 0.x, mmdet 2.x and the research repositories
    built on them), whose configs mmengine reads but whose types no mmengine registry holds: the
    registry of the source's packages that holds the model's type, and the package it is of as
    the scope. None where mmcv is not of that kind."""
    try:
        mmcv = importlib.import_module("mmcv")
    except ModuleNotFoundError as e:
        if e.name != "mmcv":  # mmcv is there and misses a requirement of its own (addict): that is the error
            raise
        return None
    config_class = getattr(mmcv, "Config", None)  # mmcv 2.x left it to mmengine
    if config_class is None:
        return None
    cfg = config_class.fromfile(path)
    model = cfg.model
    wanted = model.get("type") if isinstance(model, dict) else None
    failed: ImportError | None = None  # what stopped a package's models from registering (a requirement not here)
    for package in packages:
        for name in (package, f"{package}.models"):
            try:
                importlib.import_module(name)
            except ImportError as e:
                if not (isinstance(e, ModuleNotFoundError) and e.name in (package, name)):
                    failed = failed or e
        registry = next((obj for name, module in list(sys.modules.items())
                         if (name == package or name.startswith(package + ".")) and module is not None
                         for obj in list(vars(module).values())
                         if type(obj).__name__ == "Registry" and callable(getattr(obj, "get", None))
                         and isinstance(wanted, str) and obj.get(wanted) is not None), None)
        if registry is not None:
            if not callable(getattr(registry, "build", None)):  # before mmcv 1.3.x a function builds from a registry
                build_from_cfg = importlib.import_module("mmcv.utils").build_from_cfg
                registry = types.SimpleNamespace(build=functools.partial(_build_from, build_from_cfg, registry))
            # older configs keep the training and test settings beside the model; the builder passes them in
            extra = {k: cfg.get(k) for k in ("train_cfg", "test_cfg") if k not in model and cfg.get(k) is not None}
            return registry, _built_here(type(model)({**model, **extra}) if extra else model), package
    if failed is not None:
        raise failed
    raise LookupError(f"no registry of {', '.join(packages)} holds {wanted!r}")


def _built_here(config: Any) -> Any:
    """The config as it can be built here: synchronised batch norms as plain ones (the same layer
    in one process, and mmcv 1.x builds ``SyncBN`` through a method of torch's that torch has since
    removed, ``_specify_ddp_gpu_num``), and no pretrained weights: nothing is downloaded here, and
    older loaders fail on the name before trying (mmcv 1.x looks ``torchvision://resnet50`` up in
    a table torchvision no longer has). Weights are named by a ``pretrained`` path or switch (mmdet
    2.x, mmseg 0.x) or a ``Pretrained`` ``init_cfg`` (mmengine's packages)."""
    if isinstance(config, dict):
        out = {}
        for k, v in config.items():
            if k == "type" and v == "SyncBN":
                v = "BN"
            elif k == "pretrained" and isinstance(v, (str, bool)):
                v = None if isinstance(v, str) else False
            elif k == "init_cfg" and _loads_weights(v):
                v = None
            out[k] = _built_here(v)
        return type(config)(out)
    if isinstance(config, (list, tuple)):
        return type(config)(_built_here(v) for v in config)
    return config


def _loads_weights(init_cfg: Any) -> bool:
    entries = init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]
    return any(isinstance(e, dict) and e.get("type") == "Pretrained" for e in entries)


def _build_from(build_from_cfg: Callable[..., Any], registry: Any, cfg: Any) -> Any:
    return build_from_cfg(cfg, registry)


def _on_alarm(signum: int, frame: Any) -> None:
    raise FactoryTimeout()


def harvest(factories: list[list[str]], packages: list[str], paths: list[str], emit: Callable[[dict[str, Any]], None],
            per_factory_s: float = 60.0, import_s: float = Limits().import_s) -> None:
    """Run ``[module, function]`` factories in turn, emitting one record per factory. A function
    named ``Class.__doc__`` stands for the examples in that class's docstrings; one named
    ``<config>`` builds the model of the config file at the path given as its module; one named
    ``<readme>`` runs code block N of the README at the ``PATH#N`` given as its module; one named
    ``<tables>`` builds the classes the module's registry tables name (see tables.py); one named
    ``<defaults>`` builds the failing classes given third (JSON) with the module's default configs
    (see defaults.py); one named ``<described>`` builds the modules the YAML file at the path given
    as its module describes (see described.py); one named
    ``Class.<passed>`` runs a block that passed the gate, by the recipe (JSON) given third.
    Examples run real models at real sizes (SAM's at 1024 pixels takes 27 s on two quiet cores):
    ``per_factory_s`` leaves room for a loaded machine; what a factory recorded before its time
    ran out is kept. A unit's module is imported first, within ``import_s`` of its own."""
    sys.path[:0] = [p for p in paths if p not in sys.path]
    sys.meta_path.append(AbsentModules(paths))
    cpu.install()  # examples move models and data to a GPU (``model.cuda()``): here they stay on the CPU
    _extensions_unbuilt()
    recorder = Recorder(packages)
    recorder.wrap_loaded()
    signal.signal(signal.SIGALRM, _on_alarm)
    for module_name, function, *given in factories:
        started = time.perf_counter()
        record: dict[str, Any] = {"factory": f"{module_name}.{function}", "ok": False}
        model = None
        scope = None
        importing = False
        try:
            if function not in (CONFIG_UNIT, README_UNIT, DESCRIBED_UNIT):
                # the unit's module and what it imports first, on a clock of their own, as the
                # gate times a candidate's import (numba compiles librosa's kernels at import)
                importing = True
                before = set(sys.modules)
                signal.setitimer(signal.ITIMER_REAL, import_s)
                try:
                    importlib.import_module(module_name)
                except FactoryTimeout:
                    # modules cut off halfway (matplotlib without its ``get_data_path``) would
                    # fail the next units' imports in their stead: gone, they import afresh
                    for name in set(sys.modules) - before:
                        sys.modules.pop(name, None)
                    raise
                except BaseException:  # the unit meets it again below and reports it as it does
                    pass
            importing = False
            signal.setitimer(signal.ITIMER_REAL, per_factory_s)
            if function == CONFIG_UNIT:
                registry, config, scope = _load_config(module_name, packages)
                recorder.wrap_loaded()
                model = registry.build(config)
                error = _exercise(model)
            elif function == README_UNIT:
                error = _run_readme(module_name, packages, recorder)
            elif function.endswith(PASSED_SUFFIX) and given:
                error = _run_passed(module_name, function.removesuffix(PASSED_SUFFIX), json.loads(given[0]), recorder)
            elif function == DESCRIBED_UNIT:
                error = run_described(module_name, recorder.wrap_loaded, _exercise)
            elif function == DEFAULTS_UNIT and given:
                wanted = json.loads(given[0])
                error = run_defaults(module_name, wanted["modules"], wanted["names"], recorder.wrap_loaded, _exercise,
                                     wanted.get("overrides", []), wanted.get("settings", []))
            elif function == TABLE_UNIT:
                module = importlib.import_module(module_name)
                recorder.wrap_loaded()
                error = run_tables(module, _exercise)
            elif function.endswith(EXAMPLE_SUFFIX):
                module = importlib.import_module(module_name)
                recorder.wrap_loaded()
                error = _run_examples(module, function.removesuffix(EXAMPLE_SUFFIX))
            else:
                module = importlib.import_module(module_name)
                recorder.wrap_loaded()
                factory = getattr(module, function)
                model = factory(**_no_downloads(factory))
                error = _exercise(model)
            record.update(ok=error is None, message=error)
        except FactoryTimeout:
            record["message"] = (f"its import did not end within {import_s:g} s" if importing
                                 else f"no result within {per_factory_s:g} s of its import")
        except BaseException as e:  # a sandbox violation ends this factory, not the harvest
            record["message"] = "".join(traceback.format_exception_only(type(e), e))[-300:].strip()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        record["usage"] = recorder.take(scope)
        record["seconds"] = round(time.perf_counter() - started, 3)
        emit(record)
        del model
        gc.collect()
