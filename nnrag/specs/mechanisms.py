"""What a block's own code does, in words: "softmax attention over query-key products", "a
sigmoid gate multiplies the features", "residual connection".

A class name like ``GPSA`` or ``MSCAAttention`` says nothing to someone who asks for "attention
mixed with a positional map through a learned gate", and many blocks have no docstring. The
code says it: which torch operations the class's ``forward`` (and the methods it calls on
``self``) combines, and which layers its constructor builds with which arguments. Each rule
below reads one textbook pattern from the syntax tree and names it; nothing is run.

Only the class's own methods are read (also those inherited from classes of the same file), not
the whole standalone file: the file holds every helper of the closure, and a block that merely
contains an attention submodule is not itself an attention.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterator

from .docstrings import first_sentence

Finder = Callable[[str], "ast.FunctionDef | None"]
_MAX_DEPTH = 2  # methods called from forward, and the ones those call
_DOC_CHARS = 200  # of a called function's first docstring sentence
_PRODUCTS = {"matmul", "bmm", "einsum", "baddbmm", "mm"}
_SIGMOIDS = {"sigmoid", "hardsigmoid", "hard_sigmoid", "sigmoid_"}
_UPSAMPLE = {"interpolate", "upsample", "upsample_bilinear", "upsample_nearest", "upsamplingbilinear2d",
             "upsamplingnearest2d"}
_SCATTER = {"scatter", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_mean", "scatter_max", "index_add",
            "index_add_", "segment_csr", "propagate"}
_SELF_GATES = {"sigmoid", "softmax", "tanh", "relu6", "hardtanh", "hardsigmoid", "erf"}
_FFT = {"fft", "rfft", "fft2", "rfft2", "fftn", "rfftn", "ifft", "irfft", "irfft2", "ifft2", "irfftn", "ifftn"}
_LOSSES = (
    ({"cross_entropy", "nll_loss", "crossentropyloss", "nllloss"}, "cross-entropy (negative log-likelihood) of the target class"),
    ({"binary_cross_entropy_with_logits", "binary_cross_entropy", "bcewithlogitsloss", "bceloss"},
     "binary cross-entropy of probabilities or logits"),
    ({"mse_loss", "mseloss"}, "mean squared error"),
    ({"l1_loss", "smooth_l1_loss", "l1loss", "smoothl1loss", "huber_loss"}, "absolute (L1 or smooth L1) error"),
    ({"kl_div", "kldivloss"}, "Kullback-Leibler divergence between distributions"),
)


def _name(func: ast.expr) -> str:
    """The called name, lower-case and without its owner: ``F.softmax`` and ``x.softmax`` -> ``softmax``."""
    if isinstance(func, ast.Attribute):
        return func.attr.lower()
    if isinstance(func, ast.Name):
        return func.id.lower()
    return ""


def _owner(func: ast.expr) -> str:
    """``torch.fft.rfft2`` -> ``fft``; ``self.conv`` -> ``self``."""
    if isinstance(func, ast.Attribute):
        return _name(func.value)
    return ""


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _constant(node: ast.expr | None) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
        return tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value if isinstance(node.operand.value, (int, float)) else None
    return None


def _keyword(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


class _Facts:
    """The names the methods call, the layers the constructor builds, and the shapes of a few
    expressions, gathered in one walk."""

    def __init__(self, methods: list[ast.FunctionDef], init: ast.FunctionDef | None) -> None:
        self.calls: set[str] = set()
        self.owners: set[str] = set()
        self.layers: dict[str, str] = {}  # self.attr -> lower-case layer type built in __init__
        self.built: list[ast.Call] = []  # every layer construction call in __init__
        self.mult = self.matmul = self.div = self.masked_inf = self.modulation = False
        self.mixing = False  # g * a + (1 - g) * b: one weight and its complement both multiply
        self.centred = False  # something minus a mean: x - x.mean(...)
        self.squares: set[str] = set()  # reductions ("mean", "sum") taken over squared values
        self.branches = False  # a list of calls (or a comprehension over self layers) concatenated or summed
        self.residual = False
        self.adds_stored = False  # the input plus a tensor the module keeps: x + self.pos_emb, x += self.bias
        self.gated_halves = False  # a, b = x.chunk(2, ...) and a product of what each became
        self.mean_over_two_dims = False
        self.attention = False  # a softmax over a product of two tensors (query-key scores)
        self.self_gate = ""  # x * f(x): the function of itself an input is multiplied by
        self.affine = False  # x * a + b with a and b predicted together (a, b = self.to_ab(cond))
        self.scalar_scale = False  # a learned one-element parameter multiplies something
        self.vector_scale = False  # a learned per-channel vector, set to a chosen start, multiplies something
        self.opposite = False  # a tuple of amounts holding a and -a: (1, -1, 0, 0), as pad widths that shift
        self.entropy = False  # p * log(p)
        self.score_difference = False  # log-sigmoid of a difference of two scores
        scalars: set[str] = set()  # self attributes holding a learned one-element parameter
        self._vectors: set[str] = set()  # self attributes holding a learned per-channel vector (``_is_scaled_vector``)
        self._infs: set[str] = set()  # the method's local names bound to minus infinity (a mask value)
        self._values: dict[str, ast.expr] = {}  # the method's local names and what each was last assigned
        if init is not None:
            for node in ast.walk(init):
                if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                    self.built.append(node)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for target in node.targets:
                        if attr := _self_attr(target):
                            self.layers[attr] = _first_layer(node.value)
                            if _is_scalar_parameter(node.value):
                                scalars.add(attr)
                            elif _is_scaled_vector(node.value):
                                self._vectors.add(attr)
        for fn in methods:
            inputs = {a.arg for a in fn.args.args[1:2]} | {"identity", "shortcut", "residual", "skip", "res", "inp", "x_in"}
            scores, means = _products(fn), _bound_to(fn, {"mean"})
            self._infs = {t for n in _assigns(fn) if _is_minus_inf(n.value) for t in _targets(n)}
            self._values = {n.targets[0].id: n.value for n in _assigns(fn)
                            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
            self.gated_halves |= _gated_halves(fn)
            self.affine |= _affine(fn)
            factors = [side for n in ast.walk(fn) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
                       for side in (n.left, n.right)]
            weights = {ast.dump(f) for f in factors}
            self.mixing |= any(isinstance(f, ast.BinOp) and isinstance(f.op, ast.Sub) and _constant(f.left) in (1, 1.0)
                               and ast.dump(f.right) in weights for f in factors)
            for node in ast.walk(fn):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _is_mean(node.right, means):
                    self.centred = True
                self._visit(node, inputs)
                if isinstance(node, ast.Call) and self._called(node) in ("softmax", "softmax_"):
                    self.attention |= any(_is_product(o, scores) for o in _operands(node))
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                    self.self_gate = self.self_gate or _self_gate(node)
                    self.scalar_scale |= any(_self_attr(n) in scalars for side in (node.left, node.right)
                                             for n in ast.walk(side) if isinstance(n, ast.Attribute))
                    # the vector itself as a factor; reading one reshaped first (``self.gamma[:, None, None] * x``,
                    # ConvNeXt's channels-first form) lost a dev-b query on the wide library, so it is not read
                    self.vector_scale |= any(_self_attr(side) in self._vectors for side in (node.left, node.right))
                    self.entropy |= _is_entropy(node)

    def _called(self, call: ast.Call) -> str:
        """What a call runs: ``self.attend(x)`` runs the ``nn.Softmax`` the constructor stored as ``attend``."""
        attr = _self_attr(call.func)
        return self.layers.get(attr, "") if attr else _name(call.func)

    def _visit(self, node: ast.AST, inputs: set[str]) -> None:
        if isinstance(node, ast.Call):
            name = _name(node.func)
            self.calls.add(name)
            self.owners.add(_owner(node.func))
            attr = _self_attr(node.func)
            if attr and attr in self.layers:
                self.calls.add(self.layers[attr])
            if name in ("cat", "stack", "sum") and node.args and _is_branches(
                    self._values.get(node.args[0].id, node.args[0]) if isinstance(node.args[0], ast.Name) else node.args[0]):
                self.branches = True
            if name in ("masked_fill", "masked_fill_", "where") and any(
                    _is_minus_inf(a) or (isinstance(a, ast.Name) and a.id in self._infs) for a in node.args):
                self.masked_inf = True
            if name == "logsigmoid" and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
                                            for a in node.args[:1] for n in ast.walk(a)):
                self.score_difference = True
            if name in ("mul", "mul_") and any(_self_attr(a) in self._vectors for a in node.args[:1]):
                self.vector_scale = True  # x.mul_(self.gamma)
            if name in ("mean", "sum") and _squared(node):
                self.squares.add(name)
            elif name == "mean" and isinstance(_constant(_keyword(node, "dim", 0)), tuple):
                self.mean_over_two_dims |= len(_constant(_keyword(node, "dim", 0))) == 2  # type: ignore[arg-type]
        elif isinstance(node, ast.Tuple):
            self.opposite |= _has_opposites(node)
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mult):
                self.mult = True
                self.modulation |= _is_one_plus(node.left) or _is_one_plus(node.right)
            elif isinstance(node.op, ast.Div):
                self.div = True
            elif isinstance(node.op, ast.MatMult):
                self.matmul = True
            elif isinstance(node.op, ast.Add) and (_is_input(node.left, inputs) or _is_input(node.right, inputs)):
                other = node.right if _is_input(node.left, inputs) else node.left
                if _is_stored(other):  # x + self.pos_emb[:n]: a table added, not the input added back
                    self.adds_stored = True
                else:
                    self.residual = True
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.op, ast.Mult):
                self.mult = True
            elif isinstance(node.op, ast.Add) and _is_input(node.value, inputs):
                self.residual = True
            elif isinstance(node.op, ast.Add) and _is_input(node.target, inputs) and _is_stored(node.value):
                self.adds_stored = True

    def any(self, names: set[str]) -> bool:
        return bool(self.calls & names)

    def builds(self, names: set[str]) -> Iterator[ast.Call]:
        return (c for c in self.built if _name(c.func) in names)


def _is_input(node: ast.expr, inputs: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in inputs


def _is_stored(node: ast.expr) -> bool:
    """A tensor the module keeps, not computed from the input: ``self.pos_emb``, a slice of it
    (``self.pos_emb[:, :n]``, ``self.bias.to(x)``), or ``getattr(self, f"param_{i}")``."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("to", "type_as", "expand", "expand_as", "view", "reshape", "unsqueeze"):
            node = node.func.value
        else:
            break
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"
    return _self_attr(node) is not None


def _is_product(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` multiplies two tensors (``@``, ``matmul``, ``einsum``, ...) or reads a name that holds such a product."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
            return True
        if isinstance(sub, ast.Call) and _name(sub.func) in _PRODUCTS:
            return True
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
    return False


def _assigns(fn: ast.FunctionDef) -> list[ast.Assign | ast.AugAssign]:
    return sorted((n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))), key=lambda n: n.lineno)


def _targets(node: ast.Assign | ast.AugAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _products(fn: ast.FunctionDef) -> set[str]:
    """Local names assigned a product of tensors, directly or through other such names, in source order."""
    names: set[str] = set()
    for node in _assigns(fn):
        if _is_product(node.value, names):
            names |= _targets(node)
    return names


def _gated_halves(fn: ast.FunctionDef) -> bool:
    """Whether the two halves of a ``chunk(2)`` (``u, v = x.chunk(2, dim=-1)``), or what is
    computed from each (``v = self.proj(v)``), are multiplied together, as in GLU. Read in source
    order: in ``x = self.norm(x) * (1 + scale) + shift`` only one half meets the features."""
    origin: dict[str, set[tuple[int, int]]] = {}  # name -> (line of the chunk, which half)

    def halves(node: ast.AST) -> set[tuple[int, int]]:
        return {h for n in ast.walk(node) if isinstance(n, ast.Name) for h in origin.get(n.id, ())}

    def pairs(node: ast.AST | None) -> bool:
        return node is not None and any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
            and any(a[0] == b[0] and a[1] != b[1] for a in halves(n.left) for b in halves(n.right))
            for n in ast.walk(node))

    for node in _assigns(fn):
        if pairs(node.value):
            return True
        value = node.value
        if (isinstance(value, ast.Call) and _name(value.func) == "chunk" and _constant(_keyword(value, "chunks", 0)) == 2
                and isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)):
            for i, elt in enumerate(node.targets[0].elts):
                if isinstance(elt, ast.Name):
                    origin[elt.id] = {(node.lineno, i)}
        else:
            came = halves(value)
            for name in _targets(node):
                origin[name] = came | (origin.get(name, set()) if isinstance(node, ast.AugAssign) else set())
    return any(pairs(n.value) for n in ast.walk(fn) if isinstance(n, ast.Return))


def _bound_to(fn: ast.FunctionDef, calls: set[str]) -> set[str]:
    """Local names assigned straight from one of ``calls`` (``mu = x.mean(-1, keepdim=True)``)."""
    return {t for n in _assigns(fn) if isinstance(n.value, ast.Call) and _name(n.value.func) in calls for t in _targets(n)}


def _is_mean(node: ast.expr, means: set[str]) -> bool:
    return (isinstance(node, ast.Call) and _name(node.func) == "mean") or (isinstance(node, ast.Name) and node.id in means)


def _operands(call: ast.Call) -> list[ast.expr]:
    """What a call reduces or transforms: ``F.softmax(s)`` and ``s.softmax()`` both read ``s``
    (for a module-qualified call the module comes along; it is never a product or a square)."""
    return [*call.args[:1], *([call.func.value] if isinstance(call.func, ast.Attribute) else [])]


def _squared(call: ast.Call) -> bool:
    """Whether a reduction call reads squared values: ``x.pow(2).mean()``, ``(x ** 2).sum()``, ``torch.mean(x * x)``."""
    for node in (n for o in _operands(call) for n in ast.walk(o)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _constant(node.right) in (2, 2.0):
            return True
        if isinstance(node, ast.Call) and (_name(node.func) == "square" or (_name(node.func) == "pow" and 2 in (
                _constant(a) for a in node.args))):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and ast.dump(node.left) == ast.dump(node.right):
            return True
    return False


def _first_layer(call: ast.Call) -> str:
    """The layer a constructed module applies first: ``nn.Sequential(nn.Softmax(-1), nn.Dropout(p))`` applies a softmax."""
    if _name(call.func) == "sequential" and call.args and isinstance(call.args[0], ast.Call):
        return _first_layer(call.args[0])
    return _name(call.func)


def _is_scalar_parameter(call: ast.Call) -> bool:
    """``nn.Parameter(torch.ones(1) * s)``, ``nn.Parameter(torch.tensor(0.5))``: one learned number."""
    if _name(call.func) != "parameter" or not call.args:
        return False
    for node in ast.walk(call.args[0]):
        if isinstance(node, ast.Call) and node.args:
            made, first = _name(node.func), node.args[0]
            if made in ("ones", "zeros", "full", "empty") and _constant(first) in (1, (1,), ()):
                return True
            if made == "tensor" and not isinstance(first, (ast.List, ast.Tuple, ast.ListComp)):
                return True
    return False


def _is_scaled_vector(call: ast.Call) -> bool:
    """``nn.Parameter(init_values * torch.ones(dim))``, ``nn.Parameter(torch.ones(dim) * scale)``,
    ``nn.Parameter(torch.full((dim,), 1e-5))``: one learned number per channel, started at a value the
    caller chooses. A plain ``torch.ones(dim)`` (a norm's weight) is not one."""
    if _name(call.func) != "parameter" or not call.args:
        return False
    made = call.args[0]
    if isinstance(made, ast.BinOp) and isinstance(made.op, ast.Mult):
        sides = (made.left, made.right)
        return any(_sized_by_input(s, ("ones",)) for s in sides) and all(_constant(s) not in (1, 1.0) for s in sides)
    return _sized_by_input(made, ("full",))


def _sized_by_input(node: ast.expr, makers: tuple[str, ...]) -> bool:
    """``torch.ones(dim)``, ``torch.full((dim,), v)``: made by one of ``makers`` with a size that is not a constant."""
    return isinstance(node, ast.Call) and _name(node.func) in makers and bool(node.args) and _constant(node.args[0]) is None


def _self_gate(mult: ast.BinOp) -> str:
    """``x * torch.sigmoid(x)``, ``x.softmax(-1) * x``: a name multiplied by a function of itself
    (that function's name; empty when it is not)."""
    for this, other in ((mult.left, mult.right), (mult.right, mult.left)):
        if isinstance(this, ast.Name):
            for n in ast.walk(other):
                if isinstance(n, ast.Call) and _name(n.func) in _SELF_GATES and any(_is_of(o, this.id) for o in _operands(n)):
                    return _name(n.func)
    return ""


def _is_of(node: ast.expr, name: str) -> bool:
    """``x``, ``1.702 * x`` or ``F.softplus(x)``: ``name`` itself, scaled by a constant or passed through one call."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return any(_constant(a) is not None and _is_of(b, name) for a, b in ((node.left, node.right), (node.right, node.left)))
    return isinstance(node, ast.Call) and any(_is_of(o, name) for o in _operands(node))


def _is_entropy(mult: ast.BinOp) -> bool:
    """``p * torch.log(p)``, ``probs * probs.log()``: the terms of an entropy."""
    for this, other in ((mult.left, mult.right), (mult.right, mult.left)):
        if isinstance(this, ast.Name) and isinstance(other, ast.Call) and _name(other.func) == "log" and any(
                isinstance(o, ast.Name) and o.id == this.id for o in _operands(other)):
            return True
    return False


def _has_opposites(node: ast.Tuple) -> bool:
    """``(1, -1, 0, 0)``, ``(amount, -amount)``: amounts that move something by a and -a."""
    plain = {ast.dump(e) for e in node.elts}
    return any(isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and ast.dump(e.operand) in plain
               and _constant(e.operand) != 0 for e in node.elts) or any(
        isinstance(c := _constant(e), int) and c > 0 and -c in {_constant(x) for x in node.elts} for e in node.elts)


def _affine(fn: ast.FunctionDef) -> bool:
    """``x * gamma + beta`` (or ``x * (1 + scale) + shift``) where both came from one call:
    ``gamma, beta = self.to_gamma_beta(cond)``."""
    pairs = [{e.id for e in n.targets[0].elts if isinstance(e, ast.Name)} for n in _assigns(fn)
             if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple) and len(n.targets[0].elts) == 2
             and isinstance(n.value, ast.Call)]
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Name) and \
                isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mult):
            factors = {n.id for n in ast.walk(node.left) if isinstance(n, ast.Name)}
            if any(node.right.id in p and (p - {node.right.id}) & factors for p in pairs):
                return True
    return False


def _is_one_plus(node: ast.expr) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _constant(node.left) in (1, 1.0)


def _is_minus_inf(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return "-inf" in text.replace(" ", "") or "finfo" in text or "-1e9" in text or "-10000" in text


def _is_branches(node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.Tuple)):
        return sum(isinstance(e, ast.Call) for e in node.elts) >= 2
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return isinstance(node.elt, ast.Call)
    if isinstance(node, ast.Call) and _name(node.func) in ("tuple", "list") and node.args:
        return _is_branches(node.args[0])
    # map(lambda conv: conv(x), self.convs): every layer of a list applied to one input
    return isinstance(node, ast.Call) and _name(node.func) == "map" and len(node.args) == 2 and isinstance(
        node.args[0], ast.Lambda) and isinstance(node.args[0].body, ast.Call) and _self_attr(node.args[1]) is not None


def _methods(find: Finder, function: Finder) -> list[ast.FunctionDef]:
    """``forward``, the methods it calls on ``self`` and the file's functions it calls or hands on
    by name (``return conv_soft_argmax2d(x, ...)``, ``partial(softmax_kernel, ...)``), to ``_MAX_DEPTH``."""
    start = find("forward")
    if start is None:
        return []
    seen = {"forward": start}
    frontier = [start]
    for _ in range(_MAX_DEPTH):
        nxt = []
        for fn in frontier:
            for node in ast.walk(fn):
                if isinstance(node, ast.Call):
                    attr = _self_attr(node.func)
                    key = attr or (node.func.id if isinstance(node.func, ast.Name) else None)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    # a function handed on rather than called: partial(softmax_kernel, ...), fn = linear_attention
                    attr, key = None, node.id
                else:
                    continue
                if key is None or (attr or "def " + key) in seen:
                    continue
                if (target := find(key) if attr else function(key)) is not None:
                    seen[attr or "def " + key] = target
                    nxt.append(target)
        frontier = nxt
    return list(seen.values())


def _rules(f: _Facts) -> Iterator[str]:
    products = f.matmul or f.any(_PRODUCTS)
    softmax = f.any({"softmax", "softmax2d"})
    if f.attention or f.any({"scaled_dot_product_attention", "multiheadattention", "flash_attn_func"}):
        yield "attention: softmax weights from query-key products, applied to the values"
    if f.masked_inf:
        yield "masks positions out before the softmax"
    if f.any({"eye", "fill_diagonal_"}) and f.any({"masked_fill", "masked_fill_"}):
        yield "masks the diagonal: each position's score with itself"
    if softmax and f.any({"meshgrid", "linspace", "create_meshgrid", "arange"}) and not products:
        yield "soft-argmax: coordinates averaged with softmax weights"
    if f.any(_SIGMOIDS) and f.mult:
        yield "gating: a sigmoid output multiplies the features"
    if f.mixing or f.any({"lerp", "lerp_"}):
        yield "mixes two terms with weights g and 1 - g"
    if f.gated_halves:
        yield "splits the features in two and multiplies one half by the other (gated unit)"
    if f.modulation or f.affine:
        yield "modulation: features scaled and shifted by values predicted from a condition"
    if f.self_gate:
        yield f"self-gating: the input multiplied by its own {f.self_gate}"
    if f.scalar_scale:
        yield "multiplied by a learned scalar (a learnable scale or temperature)"
    if f.vector_scale:
        yield "scaled by a learned per-channel vector that starts at a chosen value"
    roots = f.any({"rsqrt", "sqrt"}) or f.div
    standardises = f.any({"var", "var_mean", "std", "std_mean"}) or (f.centred and roots)
    rms = "mean" in f.squares and roots and not standardises
    if f.any({"normalize"}) or (f.div and f.any({"norm"})) or ("sum" in f.squares and f.any({"sqrt", "rsqrt"})):
        yield "L2-normalises vectors to unit length"
    if standardises:
        yield "standardises features: subtracts the mean and divides by the standard deviation, computed on the fly"
    if rms:
        yield "RMS normalisation: divides by the root mean square, without subtracting the mean"
    if f.branches:
        yield "parallel branches combined"
    if f.residual:
        yield "residual connection adds the input back"
    if f.adds_stored:
        yield "adds a tensor the module keeps to its input (a learned bias or a position table)"
    if f.any(_UPSAMPLE):
        yield "resizes feature maps by interpolation"
    if f.any({"pixel_shuffle", "pixelshuffle"}):
        yield "pixel shuffle: sub-pixel upsampling that moves channels into space"
    if f.any({"pixel_unshuffle", "pixelunshuffle"}):
        yield "space-to-depth: moves spatial blocks into channels"
    if f.any({"grid_sample"}):
        yield "samples features at computed locations by bilinear interpolation"
    if f.any({"deform_conv2d", "deformconv2d", "modulateddeformconv2d", "deformconv"}):
        yield "deformable convolution with learned sampling offsets"
    if f.calls & _FFT and ("fft" in f.owners or f.any({"rfft", "irfft"})):
        yield "works in the frequency domain through a Fourier transform"
    if f.any({"unfold"}):
        yield "extracts sliding local patches (unfold)"
    if f.any({"topk"}):
        yield "keeps the top-k scoring elements"
    if f.any(_SCATTER):
        yield "message passing: aggregates features from neighbouring nodes"
    # a mean over height and width inside a normalisation is its statistics, not a pooling
    if f.any({"adaptive_avg_pool2d", "adaptiveavgpool2d", "adaptive_avg_pool1d", "adaptiveavgpool1d"}) or (
            f.mean_over_two_dims and not (standardises or rms)):
        yield "global average pooling of each channel"
    if f.any({"cumsum"}):
        yield "cumulative sum along a dimension"
    if f.any({"sin"}) and f.any({"cos"}):
        yield "sinusoids: sines and cosines of positions at several frequencies"
    if (f.opposite and any("pad" in c for c in f.calls)) or f.any({"roll"}):
        yield "shifts features along an axis (rolled, or padded on one side and cropped on the other)"
    if f.any({"randperm"}) or (f.any({"rand", "rand_like"}) and f.any({"argsort"})):
        yield "picks a random subset of positions (random masking or shuffling)"
    if f.entropy:
        yield "entropy of a predicted probability distribution"
    if f.score_difference:
        yield "pairwise logistic loss: log-sigmoid of the difference between two scores"
    for names, phrase in _LOSSES:
        if f.any(names):
            yield phrase
            break
    yield from _conv_rules(f)


def _conv_rules(f: _Facts) -> Iterator[str]:
    convs = list(f.builds({"conv1d", "conv2d", "conv3d"}))
    if any(_constant(_keyword(c, "dilation", 5)) not in (None, 1, (1, 1)) or
           (_keyword(c, "dilation", 5) is not None and _constant(_keyword(c, "dilation", 5)) is None) for c in convs):
        yield "dilated (atrous) convolutions"
    for c in convs:
        groups, channels = _keyword(c, "groups", 6), _keyword(c, "in_channels", 0)
        if groups is not None and channels is not None and ast.dump(groups) == ast.dump(channels):
            yield "depthwise convolution (one filter per channel)"
            break
    kernels = {_constant(_keyword(c, "kernel_size", 2)) for c in convs}
    if any(isinstance(k, tuple) and len(k) == 2 and 1 in k and max(k) > 1 for k in kernels):  # type: ignore[arg-type]
        yield "strip convolutions with 1 x k and k x 1 kernels"
    for c in f.builds({"conv1d", "conv2d", "conv3d", "build_conv_layer"}):
        positional = _name(c.func) != "build_conv_layer"  # its first argument is a config
        kernel, stride = _keyword(c, "kernel_size", 2 if positional else None), _keyword(c, "stride", 3 if positional else None)
        if kernel is not None and stride is not None and ast.dump(kernel) == ast.dump(stride) and \
                _constant(kernel) not in (1, (1, 1), (1, 1, 1)):
            yield "cuts the input into non-overlapping patches: a convolution whose stride equals its kernel size"
            break
    if any(True for _ in f.builds({"convtranspose1d", "convtranspose2d", "convtranspose3d"})):
        yield "transposed convolution (learned upsampling)"


def mechanisms(find: Finder, function: Finder) -> list[str]:
    """Phrases naming the textbook patterns in a class's own code, in a fixed order. ``find``
    resolves a method name on the class (inherited ones included), ``function`` a function
    defined at the top of the file; either returns None for a name it does not know."""
    methods = _methods(find, function)
    if not methods:
        return []
    return list(dict.fromkeys([*_rules(_Facts(methods, find("__init__"))), *_delegated(methods[0], function)]))


def _delegated(forward: ast.FunctionDef, function: Finder) -> Iterator[str]:
    """What the file's functions that ``forward`` calls say of themselves: a wrapper class
    (``ConvSoftArgmax2d``) leaves its technique to a function (``conv_soft_argmax2d``)."""
    for node in ast.walk(forward):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (fn := function(node.func.id)) is not None:
            if first := first_sentence(ast.get_docstring(fn), _DOC_CHARS):
                yield f"{node.func.id}: {first}"
