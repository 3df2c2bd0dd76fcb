"""What dedup compares, computed once per text: the signatures of its four levels.

- raw and exact: SHA-256 of the text, and of the code re-printed from its syntax tree
  (whitespace, comments and parentheses never make a copy new);
- near: the set of 10-token shingles of the token stream with identifiers, numbers and strings
  replaced by placeholders (a renamed variable or a changed constant is still a near copy), and
  its MinHash;
- structural: the layer types the code calls, with counts, in order (consecutive pairs), and
  their hyper-parameters bucketed to powers of two; classes and functions the file defines itself
  count by kind, not name.

Signatures are pure functions of the text, so they are cached by its SHA-256 (see ``dedup.py``).
"""

from __future__ import annotations

import ast
import hashlib
import keyword
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
from datasketch import MinHash

from ..indexing.parse import dotted

SHINGLE = 10
PERMUTATIONS = 256

# The header nnrag writes at the top of a standalone file: provenance, not code.
_HEADER = re.compile(r"\A(?:#[^\n]*\n)+\n?")
_LAYER_ROOTS = ("nn.", "F.", "torch.", "functional.")


@dataclass(frozen=True, eq=False)
class Signature:
    """Signatures of one text. ``shingles`` is the sorted array of its distinct 32-bit shingle
    hashes and ``minhash`` their MinHash values; ``structure_minhash`` is the MinHash of the
    structural features."""

    raw_sha256: str
    exact_sha256: str
    shingles: np.ndarray
    minhash: np.ndarray
    structure: frozenset[str]
    structure_minhash: np.ndarray
    tokens: int


def strip_header(code: str) -> str:
    """The code without nnrag's provenance header (a run of comment lines at the top)."""
    return _HEADER.sub("", code, count=1) if code.startswith("# nnrag block:") else code


# One pass of a regular expression instead of the tokenize module (a third of its cost): strings
# (any prefix, triple-quoted first), comments, numbers, names, operators.
_TOKEN = re.compile(r"""
    (?P<s>(?:[rRbBuUfF]{0,2})(?:\'\'\'[\s\S]*?\'\'\'|\"\"\"[\s\S]*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<c>\#[^\n]*)
  | (?P<n>(?:0[xXoObB][\da-fA-F_]+|\d[\d_]*\.?[\d_]*(?:[eE][+-]?\d+)?[jJ]?|\.\d[\d_]*(?:[eE][+-]?\d+)?[jJ]?))
  | (?P<w>[^\W\d]\w*)
  | (?P<o>\*\*=?|//=?|>>=?|<<=?|->|:=|[-+*/%@&|^<>!=]=|[-+*/%@&|^~<>=.,:;()\[\]{}])
""", re.VERBOSE)
_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)


# Modules whose attribute names say what the code computes: ``torch.sigmoid`` and ``torch.tanh``
# are different blocks even though both are "a name of torch", so these names are kept.
_API_MODULES = frozenset({"torch", "nn", "F", "functional", "math", "np", "numpy", "init", "einops"})


def normal_tokens(code: str) -> list[str]:
    """Python tokens with names, numbers and strings replaced by placeholders; comments and
    layout dropped. Kept: keywords, operators, the attribute names of torch's modules (``F.gelu``)
    and the names of functions called bare (``swish(x)``, ``Conv2d(...)``): they say what the
    code computes, where a variable's or an attribute's name does not."""
    raw = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(code) if m.lastgroup != "c"]
    out: list[str] = []
    append = out.append
    for i, (kind, text) in enumerate(raw):
        if kind == "w":
            previous = raw[i - 1][1] if i else ""
            if text in ("True", "False"):
                append("0")  # a constant, as a number is
            elif text in _KEYWORDS:
                append(text)
            elif previous == "." and i > 1 and raw[i - 2][1] in _API_MODULES:
                append(text)
            elif previous not in (".", "def", "class") and i + 1 < len(raw) and raw[i + 1][1] == "(":
                append(text)
            else:
                append("N")
        elif kind == "o":
            append(text)
        elif kind == "n":
            append("0")
        elif not out or out[-1] != "S":  # adjacent string literals are one string
            append("S")
    return out


def hash32(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "little")


_TOKEN_IDS: dict[str, int] = {}
_MULTIPLIERS = np.array([pow(0x9E3779B1, k + 1, 1 << 64) | 1 for k in range(SHINGLE)], dtype=np.uint64)


def _token_ids(tokens: list[str]) -> np.ndarray:
    ids = _TOKEN_IDS
    out = np.empty(len(tokens), dtype=np.uint64)
    for i, t in enumerate(tokens):
        v = ids.get(t)
        if v is None:
            v = ids[t] = zlib.crc32(t.encode()) | (len(t) << 32)
        out[i] = v
    return out


def shingles(tokens: list[str], size: int = SHINGLE) -> np.ndarray:
    """32-bit hashes of the runs of ``size`` tokens (a shorter text is one shingle): a fixed
    polynomial over the tokens' CRC-32s, mixed by MurmurHash3's finaliser, computed with numpy."""
    if not tokens:
        return np.empty(0, dtype=np.uint32)
    ids = _token_ids(tokens)
    n = max(1, len(ids) - size + 1)
    width = min(size, len(ids))
    acc = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(width):
            acc += ids[k:k + n] * _MULTIPLIERS[k]
        acc ^= acc >> np.uint64(33)
        acc *= np.uint64(0xFF51AFD7ED558CCD)
        acc ^= acc >> np.uint64(33)
    return np.unique((acc & np.uint64(0xFFFFFFFF)).astype(np.uint32))


SCHEME = "affine32"


def _identity(value: int) -> int:
    return value


def minhash(values: np.ndarray, permutations: int = PERMUTATIONS) -> np.ndarray:
    """MinHash values (datasketch's affine32 scheme) of 32-bit hashes."""
    m = MinHash(num_perm=permutations, hashfunc=_identity, scheme=SCHEME)
    m.update_batch(values.tolist())
    return np.asarray(m.hashvalues, dtype=np.uint32)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard of two sorted arrays of distinct values."""
    if not a.size and not b.size:
        return 0.0
    common = np.intersect1d(a, b, assume_unique=True).size
    return common / (a.size + b.size - common)


def set_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def estimate(a: np.ndarray, b: np.ndarray) -> float:
    """The Jaccard two MinHashes estimate."""
    return float(np.count_nonzero(a == b)) / len(a)


# -- structure ------------------------------------------------------------------------------
def _literal(node: ast.expr) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else _UNKNOWN
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_literal(e) for e in node.elts[:4])
    return _UNKNOWN


_UNKNOWN = object()


def _bucket_value(value: object) -> str:
    """A literal by magnitude (powers of two), a tuple element-wise, anything else by kind."""
    if value is _UNKNOWN:
        return "?"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            return repr(value)
        return "0" if value == 0 else ("-" if value < 0 else "") + str(round(math.log2(abs(value))))
    if isinstance(value, tuple):
        return "(" + ",".join(_bucket_value(v) for v in value) + ")"
    return type(value).__name__


# Keyword arguments that shape a layer; others (names, flags for logging) do not.
_HYPER = {"kernel_size", "stride", "padding", "dilation", "groups", "bias", "num_heads", "heads", "dim", "eps",
          "in_channels", "out_channels", "in_features", "out_features", "hidden_dim", "expansion", "ratio",
          "p", "inplace", "scale_factor", "mode", "batch_first", "dropout", "num_layers", "momentum", "affine"}


def structure(tree: ast.Module) -> frozenset[str]:
    """Features of what the code builds and calls: each layer type with its bucketed
    hyper-parameters and its count, each torch operation with its count, and each consecutive
    pair of them in source order. Classes and functions the code defines itself count as
    ``local``, whatever their names."""
    local: set[str] = set()
    calls: list[tuple[int, int, str, ast.Call]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            local.add(node.name)
        elif isinstance(node, ast.Call) and (name := dotted(node.func)) is not None:
            calls.append((node.lineno, node.col_offset, name, node))
    kinds: list[str] = []
    counts: Counter[str] = Counter()
    for _, _, name, node in sorted(calls, key=lambda c: c[:2]):
        short = name.rsplit(".", 1)[-1]
        if name in local or short in local:
            kind = "local"
        elif short[:1].isupper():
            kind = short
            args = [_bucket_value(_literal(a)) for a in node.args[:4]]
            args += sorted(f"{k.arg}={_bucket_value(_literal(k.value))}" for k in node.keywords if k.arg in _HYPER)
            counts[f"{short}({','.join(args)})"] += 1
        elif name.startswith(_LAYER_ROOTS):
            kind = short
        else:
            continue
        kinds.append(kind)
        counts[kind] += 1
    features = {f"{call}#{i}" for call, n in counts.items() for i in range(1, n + 1)}
    features |= {f"{a}>{b}" for a, b in zip(kinds, kinds[1:])}
    return frozenset(features)


def signature(code: str) -> Signature:
    """All signatures of a text; a text that does not parse is compared by its raw text only
    (its exact hash is the raw one, it has no structure)."""
    body = strip_header(code)
    raw = hashlib.sha256(body.encode()).hexdigest()
    try:
        tree = ast.parse(body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    normal = ast.unparse(tree) if tree is not None else body  # formatting and comments gone, docstrings kept
    exact = hashlib.sha256(normal.encode()).hexdigest() if tree is not None else raw
    tokens = normal_tokens(normal)  # of the normal form: parentheses, trailing commas and quotes never count
    sh = shingles(tokens)
    shape = structure(tree) if tree is not None else frozenset()
    shape_hashes = np.array(sorted({hash32(f) for f in shape}), dtype=np.uint32)
    return Signature(raw, exact, sh, minhash(sh), shape, minhash(shape_hashes), len(tokens))
