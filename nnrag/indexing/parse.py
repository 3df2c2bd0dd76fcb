"""Parse one Python file into index records.

This runs in worker processes, so it imports nothing heavy and returns plain tuples that pickle
cheaply. It walks only module and class bodies (and the top level of function bodies, for lazy
imports) rather than the whole tree: a full ``ast.walk`` costs several times the parse itself,
and everything discovery needs lives at those levels. Code that needs the full tree (the
dependency closure) re-parses the one file it works on.
"""

from __future__ import annotations

import ast
import hashlib
import re
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterator

from ..codekeys import code_key
from ..db import decode_source
from ..sourcing.spec import (  # reasons a file is recorded but not parsed
    REASON_BINARY,
    REASON_ENCODING,
    REASON_PARSER_LIMIT,
    REASON_PY2,
    REASON_SYMLINK_LOOP,
    REASON_SYNTAX,
    REASON_UNREADABLE,
)

def parser_version() -> str:
    """What a parse records is made by this code: a source parsed by other code is parsed again in
    full on its next index, whatever its files' stats say."""
    return code_key("nnrag.indexing.parse")

_PY2_MESSAGES = (
    "Missing parentheses in call to 'print'",
    "Missing parentheses in call to 'exec'",
    "multiple exception types must be parenthesized",
    "leading zeros in decimal integer literals",
)
_PY2_PATTERNS = re.compile(
    rb"^\s*print\s+[\"'\w]|^\s*except\s+[\w.]+\s*,\s*\w+\s*:|^\s*raise\s+\w+\s*,|^\s*exec\s+[\"']"
    rb"|\bur[\"']|`\w+`",
    re.MULTILINE,
)

# Kinds of definition rows.
KIND_CLASS = "class"
KIND_FUNCTION = "function"
KIND_ALIAS = "alias"  # ``Name = other.name``: resolvable to another symbol
KIND_ASSIGN = "assign"  # any other module or class level binding

# Context an import or definition sits in.
COND_NONE = ""
COND_TRY = "try"
COND_EXCEPT = "except"
COND_IF = "if"
COND_TYPE_CHECKING = "type_checking"


@dataclass
class Definition:
    qualname: str
    kind: str
    lineno: int
    end_lineno: int
    cond: str = COND_NONE
    bases: list[str] = field(default_factory=list)
    keywords: dict[str, str] = field(default_factory=dict)
    decorators: list[str] = field(default_factory=list)
    docstring: str | None = None
    target: str | None = None  # for aliases: the dotted name assigned
    forward: str | None = None  # "concrete" | "abstract" | None (not defined here)
    methods: list[str] = field(default_factory=list)
    abstract: list[str] = field(default_factory=list)
    calls: dict[str, list[str]] = field(default_factory=dict)  # method -> names it calls on self
    stubs: list[str] = field(default_factory=list)  # methods that only raise NotImplementedError


@dataclass
class Import:
    module: str | None  # ``from X import`` module, or the module of ``import X``
    name: str | None  # imported name for ``from`` imports; "*" for star imports
    asname: str | None
    level: int
    lineno: int
    cond: str = COND_NONE
    scope: str = ""  # "" at module level, else the qualname of the enclosing def


@dataclass
class ParsedFile:
    """The result of parsing one file; ``reason`` set means it failed and nothing else is."""

    path: str
    sha1: str | None
    size: int
    lines: int = 0
    reason: str | None = None
    message: str | None = None
    blob: bytes | None = None
    definitions: list[Definition] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    all_names: list[str] | None = None
    generated_from: str | None = None  # the template file its header says it was generated from
    unchanged: bool = False  # content hash equals the one already indexed: nothing parsed


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain (subscripts unwrapped), else None."""
    if isinstance(node, ast.Subscript):
        node = node.value
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return dotted(node) or ast.unparse(node)


def _is_abstract_function(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for dec in fn.decorator_list:
        name = _decorator_name(dec)
        if name.endswith("abstractmethod") or name.endswith("abstractproperty"):
            return True
    return False


def only_raises_not_implemented(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return dotted(exc) in ("NotImplementedError", "builtins.NotImplementedError")


def _catches_not_implemented(node: ast.Try) -> bool:
    return any(h.type is None or "NotImplementedError" in ast.unparse(h.type) for h in node.handlers)


def _self_calls(node: ast.AST) -> Iterator[str]:
    """Names called as ``self.name(...)`` on every run through ``node``: leaving out calls in a
    ``try`` that catches NotImplementedError (an optional hook) and in the branches of an ``if`` or
    ``match`` (``elif mode == 'tensor': return self._forward(x)``: other modes run without it) unless
    both branches of the ``if`` make the call."""
    if isinstance(node, ast.Try) and _catches_not_implemented(node):
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            yield from _self_calls(part)
        return
    if isinstance(node, (ast.If, ast.Match)):
        yield from _self_calls(node.test if isinstance(node, ast.If) else node.subject)
        if isinstance(node, ast.If) and node.orelse:  # what both branches call runs either way
            yield from _calls_of(node.body) & _calls_of(node.orelse)
        return
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
        yield node.func.attr
    for child in ast.iter_child_nodes(node):
        yield from _self_calls(child)


def _calls_of(stmts: list[ast.stmt]) -> set[str]:
    return {name for stmt in stmts for name in _self_calls(stmt)}


def self_calls(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names ``fn`` calls on ``self`` on every run (see :func:`_self_calls`)."""
    return sorted(set(_self_calls(fn)))


def reached_stubs(resolve: Callable[[str], tuple[list[str], bool] | None]) -> list[str]:
    """The stubs ``forward`` reaches through calls on ``self``: ``resolve(name)`` gives the method
    the class would run for ``name`` as (names it calls on self, whether it only raises
    NotImplementedError), or None where the class does not define it. One rule for the index
    (which resolves along the MRO it computes) and for its runtime check (along ``__mro__``)."""
    found: set[str] = set()
    seen = {"forward"}
    todo = ["forward"]
    while todo:
        method = resolve(todo.pop())
        if method is None:
            continue
        for name in method[0]:
            if name in seen:
                continue
            seen.add(name)
            callee = resolve(name)
            if callee is not None and callee[1]:
                found.add(name)
            else:
                todo.append(name)
    return sorted(found)


def _docstring(node: ast.AST) -> str | None:
    try:
        doc = ast.get_docstring(node, clean=True)  # type: ignore[arg-type]
    except TypeError:
        return None
    return doc[:4000] if doc else None


def is_type_checking(test: ast.expr) -> bool:
    name = dotted(test)
    return name is not None and name.split(".")[-1] == "TYPE_CHECKING"


def is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"``, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {dotted(test.left), dotted(test.comparators[0])} | {
        s.value for s in (test.left, test.comparators[0]) if isinstance(s, ast.Constant) and isinstance(s.value, str)}
    return sides >= {"__name__", "__main__"}


def branches(stmt: ast.stmt) -> list[ast.stmt]:
    """The statements a compound statement (``if``, ``try``, ``with``, ``for``, ``while``) runs in
    the scope it is in: its body, handlers, ``else`` and ``finally``."""
    inner: list[ast.stmt] = []
    for part in ("body", "orelse", "finalbody"):
        inner += getattr(stmt, part, [])
    for handler in getattr(stmt, "handlers", []):
        inner += handler.body
    return inner


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((dotted(t) or "").split(".")[-1] in ("ImportError", "ModuleNotFoundError", "Exception") for t in types)


class _Collector:
    """Collects definitions and imports from module and class bodies."""

    def __init__(self) -> None:
        self.definitions: list[Definition] = []
        self.imports: list[Import] = []
        self.all_names: list[str] | None = None
        # module functions that only raise NotImplementedError: a class attribute bound to one
        # (``apply_transform = _apply_transform_unimplemented``) is a stub like a method
        self.stub_functions: set[str] = set()

    # -- statements --------------------------------------------------------------------
    def body(self, stmts: list[ast.stmt], prefix: str, cond: str, cls: Definition | None) -> None:
        for stmt in stmts:
            self.statement(stmt, prefix, cond, cls)

    def statement(self, stmt: ast.stmt, prefix: str, cond: str, cls: Definition | None) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.add_import(stmt, cond, prefix.rstrip("."))
        elif isinstance(stmt, ast.ClassDef):
            self.add_class(stmt, prefix, cond, cls)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.add_function(stmt, prefix, cond, cls)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.add_assign(stmt, prefix, cond, cls)
        elif isinstance(stmt, ast.If):
            if is_main_guard(stmt.test):  # demo code: none of it exists when the module is imported
                self.body(stmt.orelse, prefix, cond or COND_IF, cls)
            elif is_type_checking(stmt.test):
                self.body(stmt.body, prefix, COND_TYPE_CHECKING, cls)
                self.body(stmt.orelse, prefix, cond or COND_IF, cls)
            else:
                self.body(stmt.body, prefix, cond or COND_IF, cls)
                self.body(stmt.orelse, prefix, cond or COND_IF, cls)
        elif isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.body(stmt.body, prefix, cond or COND_TRY, cls)
            for handler in stmt.handlers:
                inner = COND_EXCEPT if _catches_import_error(handler) else (cond or COND_EXCEPT)
                self.body(handler.body, prefix, cond or inner, cls)
            self.body(stmt.orelse, prefix, cond or COND_TRY, cls)
            self.body(stmt.finalbody, prefix, cond, cls)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.body(stmt.body, prefix, cond, cls)

    # -- records -----------------------------------------------------------------------
    def add_import(self, stmt: ast.Import | ast.ImportFrom, cond: str, scope: str) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self.imports.append(Import(alias.name, None, alias.asname, 0, stmt.lineno, cond, scope))
        else:
            for alias in stmt.names:
                self.imports.append(
                    Import(stmt.module, alias.name, alias.asname, stmt.level or 0, stmt.lineno, cond, scope)
                )

    def add_class(self, node: ast.ClassDef, prefix: str, cond: str, outer: Definition | None) -> None:
        bases = [dotted(b) or ast.unparse(b) for b in node.bases]
        keywords = {k.arg: (dotted(k.value) or ast.unparse(k.value)) for k in node.keywords if k.arg}
        d = Definition(
            qualname=prefix + node.name,
            kind=KIND_CLASS,
            lineno=node.lineno,
            end_lineno=node.end_lineno or node.lineno,
            cond=cond,
            bases=bases,
            keywords=keywords,
            decorators=[_decorator_name(x) for x in node.decorator_list],
            docstring=_docstring(node),
        )
        self.definitions.append(d)
        if outer is not None:
            outer.methods.append(node.name)
        self.body(node.body, d.qualname + ".", COND_NONE, d)
        # What forward reaches through calls on self decides whether a stub leaves the class
        # abstract (``self._check_input_dim(x)``, or forward → apply_func → apply_transform,
        # defined across the classes of an MRO): discovery follows these along the MRO.
        for fn in node.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_abstract_function(fn):
                if calls := self_calls(fn):
                    d.calls[fn.name] = calls
                if fn.name != "forward" and only_raises_not_implemented(fn):
                    d.stubs.append(fn.name)

    def add_function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, prefix: str, cond: str, cls: Definition | None
    ) -> None:
        qualname = prefix + node.name
        if cls is None:
            if not prefix and only_raises_not_implemented(node):
                self.stub_functions.add(node.name)
            self.definitions.append(
                Definition(
                    qualname=qualname,
                    kind=KIND_FUNCTION,
                    lineno=node.lineno,
                    end_lineno=node.end_lineno or node.lineno,
                    cond=cond,
                    decorators=[_decorator_name(x) for x in node.decorator_list],
                    docstring=_docstring(node),
                )
            )
        else:
            abstract = _is_abstract_function(node)
            if abstract:
                cls.abstract.append(node.name)
            else:
                cls.methods.append(node.name)
            if node.name == "forward":
                # A later definition (e.g. after ``@overload`` stubs) wins, as at run time.
                cls.forward = "abstract" if abstract or only_raises_not_implemented(node) else "concrete"
        # Lazy imports at the top of a function body (``def forward(...): import x``).
        for stmt in node.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.add_import(stmt, cond, qualname)

    def add_assign(
        self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, prefix: str, cond: str, cls: Definition | None
    ) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:  # bare annotation: binds nothing
            return
        names: list[str] = []
        for t in targets:
            if isinstance(t, ast.Name):
                names.append(t.id)
            elif isinstance(t, (ast.Tuple, ast.List)):
                names.extend(e.id for e in t.elts if isinstance(e, ast.Name))
        if not names:
            return
        if cls is not None:
            stub = isinstance(value, ast.Name) and value.id in self.stub_functions
            for name in names:
                cls.methods.append(name)
                if name == "forward":
                    cls.forward = "abstract" if stub else "concrete"
                elif stub:
                    cls.stubs.append(name)
            return
        if "__all__" in names:
            self._record_all(node)
        target = dotted(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        single = len(names) == 1 and isinstance(node, (ast.Assign, ast.AnnAssign)) and len(targets) == 1
        for name in names:
            self.definitions.append(
                Definition(
                    qualname=prefix + name,
                    kind=KIND_ALIAS if (target and single) else KIND_ASSIGN,
                    lineno=node.lineno,
                    end_lineno=node.end_lineno or node.lineno,
                    cond=cond,
                    target=target if single else None,
                )
            )

    def _record_all(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        value = node.value
        if isinstance(value, (ast.List, ast.Tuple)):
            names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if isinstance(node, ast.AugAssign) and self.all_names is not None:
                self.all_names.extend(names)
            else:
                self.all_names = names


def _looks_like_python2(data: bytes, message: str) -> bool:
    return any(m in message for m in _PY2_MESSAGES) or _PY2_PATTERNS.search(data) is not None


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# a generated module's notice, in its first comment lines: transformers' ``modeling_x.py`` says "This
# file was automatically generated from src/transformers/models/x/modular_x.py"
_GENERATED_FROM = re.compile(rb"automatically generated from\s+[`'\"]?([\w./\\-]+\.py)", re.IGNORECASE)
_HEADER_BYTES = 4096


def generated_from(data: bytes) -> str | None:
    """The Python file a module's header says it was generated from, as the header spells it."""
    found = _GENERATED_FROM.search(data[:_HEADER_BYTES])
    return found.group(1).decode("ascii", "replace").replace("\\", "/") if found else None


def parse_bytes(path: str, data: bytes, known_sha1: str | None = None) -> ParsedFile:
    """Parse file content; never raises for bad input, the reason is recorded instead."""
    sha1 = hashlib.sha1(data).hexdigest()
    result = ParsedFile(path=path, sha1=sha1, size=len(data), lines=count_lines(data))
    if known_sha1 == sha1:
        result.unchanged = True
        return result
    if b"\x00" in data:
        result.reason, result.message = REASON_BINARY, "file contains NUL bytes: not Python source"
        return result
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        result.reason, result.message = REASON_ENCODING, f"cannot decode source: {exc}"
        return result
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        message = f"line {exc.lineno}: {exc.msg}"
        if _looks_like_python2(data, exc.msg or ""):
            result.reason, result.message = REASON_PY2, f"Python 2 source ({message})"
        else:
            result.reason, result.message = REASON_SYNTAX, message
        return result
    except (RecursionError, MemoryError, ValueError, OverflowError) as exc:
        result.reason, result.message = REASON_PARSER_LIMIT, f"{type(exc).__name__}: {exc}"[:500]
        return result
    collector = _Collector()
    try:
        collector.body(tree.body, "", COND_NONE, None)
    except RecursionError as exc:  # absurdly deep class nesting
        result.reason, result.message = REASON_PARSER_LIMIT, f"RecursionError: {exc}"
        return result
    result.definitions = collector.definitions
    result.imports = collector.imports
    result.all_names = collector.all_names
    result.generated_from = generated_from(data)
    result.blob = zlib.compress(data, 1)
    return result


def parse_path(path: str, abspath: str, known_sha1: str | None = None) -> ParsedFile:
    try:
        with open(abspath, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        reason = REASON_SYMLINK_LOOP if exc.errno == 40 else REASON_UNREADABLE  # ELOOP
        return ParsedFile(path=path, sha1=None, size=0, reason=reason, message=f"{exc.strerror}: {path}")
    return parse_bytes(path, data, known_sha1)


def parse_batch(tasks: list[tuple[str, str, str | None]]) -> list[ParsedFile]:
    """Worker entry point: parse ``(path, abspath, known_sha1)`` tasks."""
    return [parse_path(*task) for task in tasks]
