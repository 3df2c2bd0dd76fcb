"""What a block's standalone file says without running it: signatures, bases, the docstring's
first sentence, the torch operations it uses, and a structural fingerprint.

Works on the extracted file, which holds exactly the block's dependency closure, so the
operations are those of the block and of everything it needs, and nothing else.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

from ..index.parse import branches
from .model import ForwardSignature, Parameter

_SHORT = {"torch.nn.functional": "F", "torch.nn": "nn"}
_DEFAULT_CHARS = 80


@dataclass(frozen=True)
class ClassFacts:
    name: str
    bases: list[str]
    docstring: str | None
    constructor: list[Parameter]
    forward: ForwardSignature | None
    operations: list[str]
    fingerprint: str
    identifiers: list[str] = field(default_factory=list)  # names defined in the file, for lexical search


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """Classes by qualified name (``Outer.Inner`` for nested ones), also those defined under an
    ``if``, ``try`` or ``with`` (``if torch_version < 1.7: class SiLU(nn.Module): ...``); the
    first definition of a name counts."""
    found: dict[str, ast.ClassDef] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(prefix + node.name, node)
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
                visit(branches(node), prefix)

    visit(tree.body, "")
    return found


def _method(cls: ast.ClassDef, name: str, classes: dict[str, ast.ClassDef]) -> ast.FunctionDef | None:
    """``name`` as defined by ``cls`` or the nearest base defined in the same file (depth first, like
    the MRO of single inheritance)."""
    seen: set[str] = set()
    stack = [cls]
    while stack:
        node = stack.pop(0)
        if node.name in seen:
            continue
        seen.add(node.name)
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                return item  # type: ignore[return-value]
        stack.extend(classes[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in classes)
    return None


def _text(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    text = ast.unparse(node)
    return text if len(text) <= _DEFAULT_CHARS else text[: _DEFAULT_CHARS - 3] + "..."


def parameters(fn: ast.FunctionDef, skip_first: bool = True) -> list[Parameter]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out: list[Parameter] = []
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        if skip_first and i == 0:
            continue
        kind = "positional" if i < len(a.posonlyargs) else "positional-or-keyword"
        out.append(Parameter(name=arg.arg, kind=kind, annotation=_text(arg.annotation), default=_text(default),
                             required=default is None))
    if a.vararg:
        out.append(Parameter(name=a.vararg.arg, kind="var-positional", annotation=_text(a.vararg.annotation)))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append(Parameter(name=arg.arg, kind="keyword", annotation=_text(arg.annotation), default=_text(default),
                             required=default is None))
    if a.kwarg:
        out.append(Parameter(name=a.kwarg.arg, kind="var-keyword", annotation=_text(a.kwarg.annotation)))
    return out


def first_sentence(doc: str | None, limit: int = 240) -> str | None:
    """The docstring's first sentence: its first paragraph up to the first full stop, one line."""
    if not doc:
        return None
    para = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    para = " ".join(para.split())
    if not para or para.lower().startswith(("args", "arguments", "parameters", "example", ">>>")):
        return None
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bet al)[.!?](\s|$)", para)
    sentence = para[: m.end()].strip() if m else para
    if len(sentence) > limit:
        sentence = sentence[: limit - 3].rsplit(" ", 1)[0] + "..."
    return sentence


def _torch_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound to torch modules or torch objects: ``nn`` -> ``torch.nn``, ``Conv2d`` -> ``torch.nn.Conv2d``."""
    aliases: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "torch":
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        aliases["torch"] = "torch"
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and node.module.split(".")[0] == "torch":
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _short(name: str) -> str:
    for prefix, short in _SHORT.items():
        if name.startswith(prefix + "."):
            return short + name[len(prefix):]
    return name


def operations(tree: ast.Module, code: str) -> list[str]:
    """torch functions called and torch layers built anywhere in the file, most used first.

    Calls are found by a pattern over the text with the file's own torch aliases (``nn.``,
    ``F.``, imported names): a tree walk costs ten times more on large files."""
    aliases = _torch_aliases(tree)
    if not aliases:
        return []
    names = "|".join(sorted((re.escape(a) for a in aliases), key=len, reverse=True))
    counts: Counter[str] = Counter()
    for m in re.finditer(rf"(?<![\w.])({names})((?:\.\w+)*)\s*\(", code):
        full = aliases[m.group(1)] + m.group(2)
        if full.count(".") >= 1 and not full.startswith(("torch.jit", "torch._", "torch.fx", "torch.Tensor.")):
            counts[_short(full)] += 1
    return [name for name, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


class _Anonymise(ast.NodeTransformer):
    """Class names (capitalised names) become one placeholder: libraries copy a block under each
    model's prefix (``LlamaMLP`` -> ``MistralMLP``, with ``MistralRMSNorm`` inside)."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id="_C", ctx=node.ctx) if node.id[:1].isupper() else node


def _fingerprint(cls: ast.ClassDef) -> str:
    """Hash of the class's structure without its docstring, its name or the names of the classes
    it refers to: the same block copied into two repositories, or under another model's prefix,
    has the same fingerprint whatever its formatting and comments. A class with no method of its
    own keeps its names: it is what its bases make it."""
    body = cls.body[1:] if ast.get_docstring(cls) is not None else cls.body
    own = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in body)
    clone = ast.ClassDef(name="_C" if own else cls.name, bases=cls.bases, keywords=cls.keywords, body=body,
                         decorator_list=[], type_params=[])
    if own:
        clone = _Anonymise().visit(copy.deepcopy(clone))
    return hashlib.sha1(ast.dump(clone, include_attributes=False).encode()).hexdigest()


def class_facts(code: str, class_name: str) -> ClassFacts:
    tree = ast.parse(code)
    classes = _classes(tree)
    cls = classes.get(class_name)
    if cls is None:
        raise KeyError(f"the file defines no class {class_name!r}")
    init = _method(cls, "__init__", classes)
    fwd = _method(cls, "forward", classes)
    forward = None
    if fwd is not None:
        forward = ForwardSignature(parameters=parameters(fwd), returns=_text(fwd.returns))
    identifiers = sorted({n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))})
    return ClassFacts(
        name=cls.name,
        bases=[ast.unparse(b) for b in cls.bases],
        docstring=ast.get_docstring(cls),
        constructor=parameters(init) if init is not None else [],
        forward=forward,
        operations=operations(tree, code),
        fingerprint=_fingerprint(cls),
        identifiers=identifiers,
    )
