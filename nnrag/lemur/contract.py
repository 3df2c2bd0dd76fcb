"""LEMUR's model contract, checked before LEMUR sees a model.

Static: a module-level ``supported_hyperparameters()`` and a ``class Net`` with
``__init__(self, in_shape, out_shape, prm, device)``, ``train_setup(self, prm)``,
``learn(self, train_data)`` and ``forward``. Dynamic, through the one validator gate: a harness
appended to the model builds ``Net`` as LEMUR does at 224x224 (one forward) and at 32x32, runs
``train_setup`` and ``learn`` on two random batches, and is then probed like any block (forward
on a 32x32 batch and backward), in the gate's sandbox.
"""

from __future__ import annotations

import ast

from ..validator.gate import Gate
from ..validator.record import ValidationRecord

HARNESS_CLASS = "NnragLemurContract"
_SIGNATURES = {
    "__init__": ["self", "in_shape", "out_shape", "prm", "device"],
    "train_setup": ["self", "prm"],
    "learn": ["self", "train_data"],
}

_HARNESS = '''


# --- LEMUR contract harness (nnrag; not part of the registered model) -------------------------
import torch as _nnrag_contract_torch


class NnragLemurContract(_nnrag_contract_torch.nn.Module):
    """Builds Net as LEMUR does, trains it two steps, then serves its forward to the gate's probe."""

    def __init__(self):
        import torch

        super().__init__()
        names = supported_hyperparameters()
        prm = {name: 0.5 for name in names}
        prm.update(lr=0.01, momentum=0.9)
        bad = [n for n, v in prm.items() if n in names and not 0.0 <= v <= 1.0]
        if bad:
            raise ValueError(f"hyperparameters outside [0, 1]: {bad}")
        device = torch.device("cpu")
        big = Net((1, 3, 224, 224), (10,), dict(prm), device).eval()
        with torch.no_grad():
            out = big(torch.randn(2, 3, 224, 224))
        if tuple(out.shape) != (2, 10):
            raise ValueError(f"Net at 224x224 with 10 classes returned {tuple(out.shape)}, not (2, 10)")
        del big
        net = Net((1, 3, 32, 32), (10,), dict(prm), device)
        net.train_setup(dict(prm))
        if getattr(net, "optimizer", None) is None:
            raise ValueError("train_setup set no self.optimizer")
        net.learn([(torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))) for _ in range(2)])
        self.net = net

    def forward(self, x):
        out = self.net(x)
        if tuple(out.shape) != (x.shape[0], 10):
            raise ValueError(f"Net returned {tuple(out.shape)} for a batch of {x.shape[0]}, not logits of 10 classes")
        return out
'''

# what the gate tries first: the harness as written, on a LEMUR-shaped batch
_HINTS = [{"init": {"args": [], "kwargs": {}},
           "call": {"args": [{"tensor": [2, 3, 32, 32], "dtype": "float32"}], "kwargs": {}}}]


def static_problems(code: str) -> list[str]:
    """What the file lacks of LEMUR's contract; empty when the signatures are all there."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return [f"syntax error: {e}"]
    problems = []
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "supported_hyperparameters" not in functions:
        problems.append("no module-level supported_hyperparameters()")
    net = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Net"), None)
    if net is None:
        return problems + ["no class Net"]
    methods = {n.name: n for n in net.body if isinstance(n, ast.FunctionDef)}
    for name, wanted in _SIGNATURES.items():
        method = methods.get(name)
        got = [a.arg for a in method.args.args] if method else None
        if got != wanted:
            problems.append(f"Net.{name}({', '.join(wanted[1:])}) expected" + (f", found ({', '.join(got[1:])})" if got else ", missing"))
    if "forward" not in methods:
        problems.append("Net.forward missing")
    return problems


def harness(code: str) -> str:
    return code.rstrip() + "\n" + _HARNESS


def check(gate: Gate, code: str) -> ValidationRecord:
    """The gate's verdict on a model file under LEMUR's contract."""
    problems = static_problems(code)
    if problems:
        return ValidationRecord(False, "parse", "contract", "; ".join(problems))
    return gate.check_code(harness(code), HARNESS_CLASS, filename="lemur_model.py", hints=_HINTS)
