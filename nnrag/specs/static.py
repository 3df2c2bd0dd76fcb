"""What a block's standalone file says without running it: signatures, bases, the docstring's
first sentence, the torch operations it uses, and a structural fingerprint.

Works on the extracted file, which holds exactly the block's dependency closure, so the
operations are those of the block and of everything it needs, and nothing else.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import re
import tokenize
from collections import Counter
from dataclasses import dataclass, field

from ..indexing.parse import branches
from .docstrings import first_sentence
from .mechanisms import mechanisms
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
    attributes: list[str] = field(default_factory=list)  # names the class keeps on self
    config_fields: list[str] = field(default_factory=list)  # what it reads from a model config
    mechanisms: list[str] = field(default_factory=list)  # textbook patterns its own code shows
    comments: list[str] = field(default_factory=list)  # the prose of its comments and its methods' docstrings
    locals: list[str] = field(default_factory=list)  # names its methods assign (``attn_residual``, ``shifted_x``)


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


def _method(cls: ast.ClassDef, name: str, classes: _Source | dict[str, ast.ClassDef]) -> ast.FunctionDef | None:
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


# a name of a class in ``ast.dump`` text: ``Name(id='LlamaMLP', ctx=Load())``
_CLASS_NAME = re.compile(r"Name\(id='([^']+)'")


def _anonymised(match: re.Match[str]) -> str:
    return "Name(id='_C'" if match.group(1)[:1].isupper() else match.group(0)


def attributes(cls: ast.ClassDef) -> tuple[list[str], list[str]]:
    """The attribute names a class stores on ``self`` (sorted), and the fields it reads from a
    ``config`` (in the order the code first reads them): a block built from a model config
    (``config.num_landmarks``) often names the parts of its technique nowhere else, having
    neither parameters nor a docstring."""
    stored: set[str] = set()
    fields: list[tuple[int, int, str]] = []
    for node in ast.walk(cls):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (isinstance(owner, ast.Attribute) and owner.attr == "config") or (isinstance(owner, ast.Name) and owner.id == "config"):
            fields.append((node.lineno, node.col_offset, node.attr))
        elif isinstance(owner, ast.Name) and owner.id == "self" and isinstance(node.ctx, ast.Store):
            stored.add(node.attr)
    return sorted({n.strip("_") for n in stored} - {""}), list(dict.fromkeys(f for _, _, f in sorted(fields)))


# directives, and the notes of libraries that copy code between models (``Copied from ...``)
_DIRECTIVE = re.compile(r"^(?:noqa|type:|pragma|fmt:|pylint|mypy|isort|ruff|cop(?:ied|y-pasted) from)", re.IGNORECASE)
_COPYRIGHT = re.compile(r"\bcopyright\b", re.IGNORECASE)
_LICENCE = re.compile(r"\b(?:spdx|licen[cs]ed under|the licen[cs]e)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]{3,}")
_COMMENT_CHARS = 600


def _is_prose(text: str, words: int = 2) -> bool:
    """A comment that says something in ``words`` words or more: not a directive, nor code left
    commented out."""
    if len(_WORD.findall(text)) < words or _DIRECTIVE.match(text):
        return False
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return True
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


def comments(segment: str, cls: ast.ClassDef) -> list[str]:
    """What the author wrote beside a class's code: its comments in prose (``# width connection``,
    ``# fold in windows for attention``) and the first paragraph of each method's docstring. An
    undocumented block often explains itself only there. At most ``_COMMENT_CHARS`` characters."""
    found: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(segment).readline):
            # a comment at the margin heads what follows the class (``# attention``), not the class
            if tok.type == tokenize.COMMENT and tok.start[1] > 0 and _is_prose(text := tok.string.lstrip("#").strip()):
                found.append(text)
    except (tokenize.TokenError, SyntaxError):  # a cut that ends inside brackets: what was read counts
        pass
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (doc := ast.get_docstring(node)):
            found.append(" ".join(re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0].split()))
    kept, size = [], 0
    for text in dict.fromkeys(found):
        if size + len(text) > _COMMENT_CHARS:
            break
        kept.append(text)
        size += len(text) + 2
    return kept


_HEADING_CHARS = 300


@functools.lru_cache(maxsize=64)
def _lines(code: str) -> list[str]:
    return code.splitlines()


def _start(lines: list[str], i: int) -> int:
    """Where the class statement on line ``i`` (0-based) starts, its decorators included: a line
    scan, since parsing every module again to find them made a spec half again as slow."""
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    start, j = i, i - 1
    while j >= 0 and (text := lines[j]).strip() and not text.lstrip().startswith("#"):
        if not text.startswith(indent):
            break
        rest = text[len(indent):]
        if rest.startswith("@"):
            start = j
        elif not rest[:1].isspace() and not rest.startswith((")", "]", "}")):
            break  # code at the class's own indentation that is no decorator's
        j -= 1
    return start


def heading(code: str, line: int) -> str:
    """The prose of the comments right above the class whose statement is on ``line`` of a module
    (above its decorators; one blank line between is allowed): code without docstrings often says
    what a class is only there (``# magnitude preserving concat``). One line per comment line, at
    most ``_HEADING_CHARS`` characters."""
    lines = _lines(code)
    if not 0 < line <= len(lines):
        return ""
    i = _start(lines, line - 1) - 1  # the line above, 0-based
    if i >= 0 and not lines[i].strip():
        i -= 1
    found: list[str] = []
    while i >= 0 and lines[i].lstrip().startswith("#"):
        found.append(lines[i].strip().lstrip("#").strip())
        i -= 1
    if any(_LICENCE.search(t) for t in found):  # a file's licence header, not words about the class
        return ""
    kept, size = [], 0
    # one word will do above a class (``# mp activations``); a lone name (``# attention``) reads as code
    for text in (t for t in reversed(found) if _is_prose(t, words=1) and not _COPYRIGHT.search(t)):
        if size + len(text) > _HEADING_CHARS:
            break
        kept.append(text)
        size += len(text) + 1
    return "\n".join(kept)


def opening(docstring: str | None, heading: str) -> str | None:
    """The sentence a summary opens with: the docstring's first, else the heading's first line as a
    sentence (``magnitude preserving concat`` -> ``Magnitude preserving concat.``)."""
    if sentence := first_sentence(docstring):
        return sentence
    line = heading.split("\n", 1)[0].strip()
    if not line:
        return None
    return line[0].upper() + line[1:] + ("" if line[-1] in ".!?" else ".")


def local_names(cls: ast.ClassDef) -> list[str]:
    """The names a class's methods assign, in order, once each: in code without documentation
    they name the parts of the technique (``ref_preferred_logprob``, ``x_with_shifts``)."""
    names = (n.id for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(fn)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and len(n.id.strip("_")) >= 3)
    return list(dict.fromkeys(names))


def _fingerprint(cls: ast.ClassDef) -> str:
    """Hash of the class's structure without its docstring, its name or the names of the classes
    it refers to: the same block copied into two repositories, or under another model's prefix,
    has the same fingerprint whatever its formatting and comments. A class with no method of its
    own keeps its names: it is what its bases make it.

    Class names (capitalised names) become one placeholder in the dump's text, not in a copy of
    the tree: libraries copy a block under each model's prefix (``LlamaMLP`` -> ``MistralMLP``,
    with ``MistralRMSNorm`` inside), and copying the tree cost a third of building a spec."""
    body = cls.body[1:] if ast.get_docstring(cls) is not None else cls.body
    own = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in body)
    clone = ast.ClassDef(name="_C" if own else cls.name, bases=cls.bases, keywords=cls.keywords, body=body,
                         decorator_list=[], type_params=[])
    dump = ast.dump(clone, include_attributes=False)
    return hashlib.sha1((_CLASS_NAME.sub(_anonymised, dump) if own else dump).encode()).hexdigest()


_TOP_IMPORT = re.compile(r"^(?:import|from)[ \t]", re.MULTILINE)
_TOP_DEF = re.compile(r"^(?:class|def)[ \t]+(\w+)", re.MULTILINE)
_ANY_CLASS = re.compile(r"^([ \t]*)class[ \t]+(\w+)", re.MULTILINE)
_TOP_FUNCTION = re.compile(r"^def[ \t]+(\w+)", re.MULTILINE)
_TOP_LINE = re.compile(r"^[^\s#)\]}]", re.MULTILINE)  # a line that starts a top-level statement (not a closing bracket)


@dataclass(frozen=True)
class _ClassStarts:
    """Offsets of ``class`` lines in a file, found in one pass."""

    first: dict[str, int]  # each class's first ``class`` line, for classes whose first one is at the margin
    margin: dict[str, int]  # each class's first ``class`` line at the margin


class _Source:
    """One file's text, read as little as a spec needs. A standalone block file holds its whole
    closure (thousands of lines for a diffusion or language-model block) and a language-model
    library defines dozens of blocks per modelling file: parsing the class alone, and the
    top-level imports for the torch aliases, is ten to a hundred times cheaper than the file.
    Whatever the cheap reading cannot settle (a nested or conditional class, an import that does
    not parse alone) comes from the whole file's tree, as before."""

    def __init__(self, code: str) -> None:
        self.code = code
        self._tree: ast.Module | None = None
        self._classes: dict[str, ast.ClassDef] | None = None
        self._alone: dict[str, ast.ClassDef | None] = {}
        self._functions: dict[str, ast.FunctionDef | None] = {}

    @property
    def tree(self) -> ast.Module:
        if self._tree is None:
            self._tree = ast.parse(self.code)
        return self._tree

    @property
    def classes(self) -> dict[str, ast.ClassDef]:
        if self._classes is None:
            self._classes = _classes(self.tree)
        return self._classes

    def _cut(self, start: int) -> str:
        """The text from offset ``start`` up to the next top-level line."""
        nxt = _TOP_LINE.search(self.code, self.code.find("\n", start) + 1 or len(self.code))
        return self.code[start: nxt.start() if nxt else len(self.code)]

    def _statement(self, start: int) -> list[ast.stmt] | None:
        """The statements from offset ``start`` up to the next top-level line, parsed alone; None
        when the cut falls inside a string or brackets (the whole file decides then)."""
        try:
            return ast.parse(self._cut(start)).body
        except SyntaxError:
            return None

    def _segment(self, name: str) -> ast.ClassDef | None:
        """The class parsed from its own lines, when its first definition is a top-level one."""
        start = self._class_starts.first.get(name)
        if start is None:  # not defined, or first defined nested or under a condition
            return None
        body = self._statement(start)
        return body[0] if body is not None and len(body) == 1 and isinstance(body[0], ast.ClassDef) else None

    def text(self, cls: ast.ClassDef) -> str:
        """The lines of a top-level class (nested and conditional ones give nothing)."""
        start = self._class_starts.margin.get(cls.name)
        return self._cut(start) if start is not None else ""

    def get(self, name: str) -> ast.ClassDef | None:
        if self._classes is None and "." not in name:
            if name not in self._alone:
                self._alone[name] = self._segment(name)
            if self._alone[name] is not None:
                return self._alone[name]
            if not re.search(rf"\bclass[ \t]+{re.escape(name)}\b", self.code):
                return None
        return self.classes.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    # Where each name is first defined, found in one pass: a block file's helpers are looked up by
    # name, and a search of the whole text per name was a quarter of the time of a spec.
    @functools.cached_property
    def _class_starts(self) -> _ClassStarts:
        first: dict[str, tuple[str, int]] = {}
        margin: dict[str, int] = {}
        for m in _ANY_CLASS.finditer(self.code):
            first.setdefault(m.group(2), (m.group(1), m.start()))
            if not m.group(1):
                margin.setdefault(m.group(2), m.start())
        return _ClassStarts({n: at for n, (indent, at) in first.items() if not indent}, margin)

    @functools.cached_property
    def _def_starts(self) -> dict[str, int]:
        """Offset of each function's first ``def`` line at the margin."""
        found: dict[str, int] = {}
        for m in _TOP_FUNCTION.finditer(self.code):
            found.setdefault(m.group(1), m.start())
        return found

    def function(self, name: str) -> ast.FunctionDef | None:
        """The top-level function ``name``, parsed from its own lines."""
        if name not in self._functions:
            start = self._def_starts.get(name)
            body = self._statement(start) if start is not None else None
            self._functions[name] = body[0] if body and isinstance(body[0], ast.FunctionDef) else None
        return self._functions[name]

    def __getitem__(self, name: str) -> ast.ClassDef:
        cls = self.get(name)
        if cls is None:
            raise KeyError(name)
        return cls

    def _imports(self) -> ast.Module:
        """The top-level imports, each parsed alone (the whole tree if one does not parse)."""
        body: list[ast.stmt] = []
        for m in _TOP_IMPORT.finditer(self.code):
            statements = self._statement(m.start())
            if statements is None:
                return self.tree
            body += statements
        return ast.Module(body=body, type_ignores=[])

    @functools.cached_property
    def operations(self) -> list[str]:
        return operations(self._imports(), self.code)

    @functools.cached_property
    def identifiers(self) -> list[str]:
        return sorted(set(_TOP_DEF.findall(self.code)))


@functools.lru_cache(maxsize=4)
def _source(code: str) -> _Source:
    return _Source(code)


def class_facts(code: str, class_name: str) -> ClassFacts:
    module = _source(code)
    cls = module.get(class_name)
    if cls is None:
        raise KeyError(f"the file defines no class {class_name!r}")
    init = _method(cls, "__init__", module)
    fwd = _method(cls, "forward", module)
    forward = None
    if fwd is not None:
        forward = ForwardSignature(parameters=parameters(fwd), returns=_text(fwd.returns))
    stored, fields = attributes(cls)
    return ClassFacts(
        name=cls.name,
        bases=[ast.unparse(b) for b in cls.bases],
        docstring=ast.get_docstring(cls),
        constructor=parameters(init) if init is not None else [],
        forward=forward,
        operations=list(module.operations),
        fingerprint=_fingerprint(cls),
        identifiers=list(module.identifiers),
        attributes=stored,
        config_fields=fields,
        mechanisms=mechanisms(lambda name: _method(cls, name, module), module.function),
        comments=comments(module.text(cls), cls),
        locals=local_names(cls),
    )
