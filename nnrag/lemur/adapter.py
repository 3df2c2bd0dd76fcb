"""Block -> LEMUR model source: the block's standalone code, then a ``Net`` that wires it for image
classification as the block's spec says it is called.

The wiring reads the validator's probe (the input the block was proven on and the output it gave):

- the stem maps an image ``(B, in_shape[1], H, W)`` to what the block was probed with: the
  probed image size and width for 4-D blocks, a probed-length token sequence for 3-D ones, a
  probed-width vector for 2-D ones;
- a block whose output has the shape of its input is stacked (two copies); one that changes
  width or resolution runs once, and the head reads its output width from a dry run;
- an architecture with a class-count argument is built with ``out_shape[0]`` classes (and
  ``in_shape[1]`` input channels when it takes them) and needs no head.

Only ``in_shape[1]`` and ``out_shape[0]`` are read from LEMUR's shapes, so the same file works at
32x32 and at 224x224. The hyperparameters read are exactly :data:`HYPERPARAMETERS`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .._version import __version__
from ..errors import NotAdaptable
from ..specs.model import BlockSpec
from ..validator.record import CANDIDATE_MODULE

HYPERPARAMETERS = ("lr", "momentum")
_CLASS_PARAMS = ("num_classes", "n_classes", "classes", "num_labels", "nb_classes", "class_num")
_IN_PARAMS = ("in_chans", "in_channels", "in_ch", "in_chs", "num_channels", "input_channels", "inp_channels", "in_dim")
_RESERVED = {"Net", "supported_hyperparameters"}
_PROBED_MODULE = CANDIDATE_MODULE + "."


@dataclass(frozen=True)
class Adapted:
    block_id: str
    mode: str  # "classifier", "image", "tokens" or "vector"
    stacked: int
    code: str
    kwargs: dict[str, str] = field(default_factory=dict)  # constructor argument -> source text
    hyperparameters: tuple[str, ...] = HYPERPARAMETERS


def _kwargs_source(spec: BlockSpec, defined: set[str]) -> dict[str, str]:
    """The constructor arguments the gate validated with, as source text: literals, or classes and
    functions the block's own file defines (``block=BasicBlock``)."""
    out: dict[str, str] = {}
    for p in spec.constructor:
        if p.probe_value is None:
            continue
        name = p.probe_value.removeprefix(_PROBED_MODULE)
        if p.probe_value.startswith(_PROBED_MODULE) and name in defined:
            out[p.name] = name
            continue
        try:
            out[p.name] = repr(ast.literal_eval(p.probe_value))
        except (ValueError, SyntaxError):
            raise NotAdaptable(f"constructor argument {p.name}={p.probe_value} is neither a literal nor defined in the "
                               "block's file; the model file could not re-create it") from None
    return out


def _first_shape(outputs: object) -> list[int] | None:
    """The first tensor shape in a probe's (possibly nested) outputs."""
    if isinstance(outputs, list) and outputs and all(isinstance(d, int) for d in outputs):
        return outputs
    items = outputs.values() if isinstance(outputs, dict) else outputs if isinstance(outputs, list) else []
    for item in items:
        if (found := _first_shape(item)) is not None:
            return found
    return None


def adapt(spec: BlockSpec, block_code: str, class_name: str | None = None) -> Adapted:
    """The LEMUR model file for a validated block; raises :class:`NotAdaptable` with the reason."""
    probe = spec.probe
    if spec.validation.status != "validated" or probe is None:
        raise NotAdaptable(f"{spec.id} has not passed the gate; only validated blocks become models")
    if spec.category == "loss":
        raise NotAdaptable(f"{spec.id} is a loss, not a layer of a classifier")
    if len(probe.inputs) != 1 or not isinstance(probe.inputs[0], list):
        raise NotAdaptable(f"{spec.id} takes {len(probe.inputs)} inputs; a classifier block takes one tensor")
    if probe.input_dtypes and probe.input_dtypes[0] not in (None, "float32"):
        raise NotAdaptable(f"{spec.id} takes {probe.input_dtypes[0]} input, not an image")
    shape_in = probe.inputs[0]
    shape_out = _first_shape(probe.outputs)
    if shape_out is None or len(shape_out) < 2:
        raise NotAdaptable(f"{spec.id} returns no batched tensor")
    if len(shape_in) not in (2, 3, 4):
        raise NotAdaptable(f"{spec.id} takes a {len(shape_in)}-D input; images, tokens and vectors are wired")
    tree = ast.parse(block_code)
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if clash := defined & _RESERVED:
        raise NotAdaptable(f"{spec.id}'s file defines {', '.join(sorted(clash))}, the names LEMUR's contract needs")
    kwargs = _kwargs_source(spec, defined)
    names = {p.name for p in spec.constructor}
    class_param = next((n for n in _CLASS_PARAMS if n in names), None)
    in_param = next((n for n in _IN_PARAMS if n in names), None)
    if len(shape_in) == 4 and len(shape_out) == 2 and class_param:
        mode = "classifier"
    else:
        mode = {4: "image", 3: "tokens", 2: "vector"}[len(shape_in)]
        class_param = in_param = None
    stacked = 2 if mode != "classifier" and shape_out == shape_in else 1
    cls = class_name or spec.qualname.rsplit(".", 1)[-1]
    header = (f"# LEMUR model generated by nnrag {__version__} from block {spec.id}\n"
              f"# wiring: {mode}, block x{stacked}; hyperparameters read: {', '.join(HYPERPARAMETERS)}\n"
              "# The block's standalone file follows, provenance header included.\n")
    settings = {
        "mode": mode, "probe_in": shape_in[1:], "stack": stacked,
        "class_param": class_param, "in_param": in_param,
    }
    adapter = _TEMPLATE.format(cls=cls, settings=repr(settings),
                               kwargs="{" + ", ".join(f"{k!r}: {v}" for k, v in kwargs.items()) + "}",
                               hyper=", ".join(repr(h) for h in HYPERPARAMETERS))
    return Adapted(spec.id, mode, stacked, header + block_code.rstrip() + "\n\n" + adapter, kwargs)


_TEMPLATE = '''

# --- LEMUR adapter (nnrag) -------------------------------------------------------------------
import torch as _nnrag_torch
import torch.nn.functional as _nnrag_F

_NNRAG = {settings}
_NNRAG_KWARGS = {kwargs}  # the constructor arguments the block was validated with


def supported_hyperparameters():
    return {{{hyper}}}


def _nnrag_first_tensor(value):
    if isinstance(value, _nnrag_torch.Tensor):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = _nnrag_first_tensor(item)
        if found is not None:
            return found
    return None


def _nnrag_features(x):
    x = _nnrag_first_tensor(x)
    if x.dim() == 4:
        return x.mean(dim=(2, 3))
    if x.dim() == 3:
        return x.mean(dim=1)
    return x.flatten(1)


class _NnragStem(_nnrag_torch.nn.Module):
    """Maps an image batch to the input the block was validated with."""

    def __init__(self, channels, mode, probe_in, keep_channels):
        super().__init__()
        self.mode, self.probe_in = mode, list(probe_in)
        width = probe_in[0] if mode in ("image", "classifier") else probe_in[-1]
        if mode == "vector":
            self.proj = _nnrag_torch.nn.Linear(channels, width)
        elif keep_channels or (mode in ("image", "classifier") and width == channels):
            self.proj = _nnrag_torch.nn.Identity()
        else:
            self.proj = _nnrag_torch.nn.Sequential(
                _nnrag_torch.nn.Conv2d(channels, width, 3, padding=1, bias=False),
                _nnrag_torch.nn.BatchNorm2d(width), _nnrag_torch.nn.ReLU())

    def forward(self, x):
        if self.mode == "vector":
            return self.proj(x.mean(dim=(2, 3)))
        if self.mode in ("image", "classifier"):
            size = tuple(self.probe_in[1:3])
            if tuple(x.shape[-2:]) != size:
                x = _nnrag_F.interpolate(x, size=size, mode="bilinear", align_corners=False)
            return self.proj(x)
        length = self.probe_in[0]
        rows = max(d for d in range(1, int(length ** 0.5) + 1) if length % d == 0)
        x = _nnrag_F.adaptive_avg_pool2d(self.proj(x), (rows, length // rows))
        return x.flatten(2).transpose(1, 2)


class Net(_nnrag_torch.nn.Module):
    def __init__(self, in_shape, out_shape, prm, device):
        super().__init__()
        self.device = device
        channels, classes = int(in_shape[1]), int(out_shape[0])
        kwargs = dict(_NNRAG_KWARGS)
        if _NNRAG["class_param"]:
            kwargs[_NNRAG["class_param"]] = classes
        if _NNRAG["in_param"]:
            kwargs[_NNRAG["in_param"]] = channels
        self.stem = _NnragStem(channels, _NNRAG["mode"], _NNRAG["probe_in"], bool(_NNRAG["in_param"]))
        self.blocks = _nnrag_torch.nn.ModuleList({cls}(**kwargs) for _ in range(_NNRAG["stack"]))
        self.head = _nnrag_torch.nn.Identity()
        if _NNRAG["mode"] != "classifier":
            self.eval()
            with _nnrag_torch.no_grad():
                width = _nnrag_features(self._body(_nnrag_torch.zeros(2, channels, *in_shape[2:]))).shape[-1]
            self.head = _nnrag_torch.nn.Linear(width, classes)
            self.train()

    def _body(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return x

    def forward(self, x):
        out = self._body(x)
        if _NNRAG["mode"] == "classifier":
            return _nnrag_first_tensor(out)
        return self.head(_nnrag_features(out))

    def train_setup(self, prm):
        self.to(self.device)
        self.criteria = (_nnrag_torch.nn.CrossEntropyLoss().to(self.device),)
        self.optimizer = _nnrag_torch.optim.SGD(self.parameters(), lr=prm["lr"], momentum=prm["momentum"])

    def learn(self, train_data):
        self.train()
        correct = seen = 0
        total = 0.0
        for inputs, labels in train_data:
            inputs, labels = inputs.to(self.device), labels.to(self.device)
            self.optimizer.zero_grad()
            outputs = self(inputs)
            loss = self.criteria[0](outputs, labels)
            loss.backward()
            _nnrag_torch.nn.utils.clip_grad_norm_(self.parameters(), 3.0)
            self.optimizer.step()
            total += loss.item() * labels.size(0)
            correct += int((outputs.argmax(1) == labels).sum())
            seen += labels.size(0)
        return correct / max(seen, 1), total / max(seen, 1)
'''
