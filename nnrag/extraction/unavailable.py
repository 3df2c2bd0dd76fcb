"""What a standalone file cannot load by name: modules its code imports by a name computed at run
time (mmcv's ``load_ext('_ext')`` of a compiled extension, mmengine's registries importing their
package's ``locations``). The copy holds the definitions it needs, not the package, so such a load
yields a stand-in that raises the original ImportError when used: what never uses it runs, what
does fails there, as ``missing-dependency``.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Mapping

from .plan import ExtImport, Target

_HELPER = '''\
class _Unavailable:
    """A module this file could not load by name (a compiled extension, or a package of the code
    it copies, which it holds only in part): using it raises the original ImportError."""

    COPIED = frozenset({packages})  # packages this file copies code from

    def __init__(self, error):
        self.error = error

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise self.error

    def __call__(self, *args, **kwargs):
        raise self.error

    @classmethod
    def load(cls, load):
        """The value of a module-level statement, or a stand-in where its import or the build of
        its compiled extension failed."""
        try:
            return load()
        except ImportError as error:
            return cls(error)
        except Exception as error:  # the build of a compiled extension (no compiler, no CUDA toolkit)
            unbuilt = ImportError(f"a compiled extension could not be built here: {type(error).__name__}: {error}")
            unbuilt.__cause__ = error
            return cls(unbuilt)

    @classmethod
    def import_module(cls, name, package=None):
        """importlib.import_module, with a stand-in for a module of a copied package."""
        import importlib

        try:
            return importlib.import_module(name, package)
        except ModuleNotFoundError as error:
            if (error.name or "").split(".")[0] not in cls.COPIED:
                raise
            return cls(error)
'''


def helper(name: str, packages: set[str]) -> str:
    """The stand-in class, named ``name``, for a file copying code from ``packages``."""
    return _HELPER.replace("_Unavailable", name).replace("{packages}", repr(sorted(packages)))


def loads_by_name(node: ast.AST) -> bool:
    """Whether ``node`` calls ``importlib.import_module``/``__import__`` with a name not written literally."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and call.args and not isinstance(call.args[0], ast.Constant):
            func = call.func
            if (isinstance(func, ast.Name) and func.id in ("import_module", "__import__")) or \
                    (isinstance(func, ast.Attribute) and func.attr == "import_module"):
                return True
    return False


_COMPILERS = ("load", "load_inline")  # of torch.utils.cpp_extension: they build a module from its C++/CUDA source


def builds_extension(node: ast.AST, refs: Mapping[str, Target]) -> bool:
    """Whether ``node`` compiles an extension as it runs (``fused = load("fused", sources=[...])``
    of ``torch.utils.cpp_extension``): where no compiler or CUDA toolkit is, that fails as the
    module is imported, before any code that never calls the extension runs."""
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        if isinstance(func, ast.Name):
            t = refs.get(func.id)
            if isinstance(t, ExtImport) and t.module == "torch.utils.cpp_extension" and t.name in _COMPILERS:
                return True
        elif isinstance(func, ast.Attribute) and func.attr in _COMPILERS and ast.unparse(func.value).endswith("cpp_extension"):
            return True
    return False


def _offsets(text: str):  # type: ignore[no-untyped-def]
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode())
    return at


def deferrable(node: ast.stmt) -> list[ast.Assign]:
    """The assignments of a module-level statement that :func:`defer` wraps: the statement itself
    when it assigns names, else those that assign names from a call in the branches of an
    ``if``/``try``/``with`` (mmcv's ``else: ext_module = ext_loader.load_ext(...)``), never inside
    a function or class it defines."""
    if isinstance(node, ast.Assign):
        return [node] if all(isinstance(t, ast.Name) for t in node.targets) else []
    if not isinstance(node, (ast.If, ast.Try, ast.With)):
        return []
    found: list[ast.Assign] = []
    todo: list[ast.stmt] = [node]
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, ast.Assign):
            if all(isinstance(t, ast.Name) for t in stmt.targets) and any(isinstance(n, ast.Call) for n in ast.walk(stmt.value)):
                found.append(stmt)
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
            todo += [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", []),
                     *(s for h in getattr(stmt, "handlers", []) for s in h.body)]
    return found


def defer(text: str, name: str) -> str:
    """``x = load_ext(...)`` as ``x = name.load(lambda: (load_ext(...)))``, each assignment
    :func:`deferrable` finds in the statement."""
    at = _offsets(text)
    values = [a.value for a in deferrable(ast.parse(text).body[0])]
    for value in sorted(values, key=lambda v: (v.lineno, v.col_offset), reverse=True):
        start, end = at(value.lineno, value.col_offset), at(value.end_lineno, value.end_col_offset)  # type: ignore[arg-type]
        text = f"{text[:start]}{name}.load(lambda: ({text[start:end]})){text[end:]}"
    return text


_HANDLES_IMPORT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _handles_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(isinstance(k, ast.Name) and k.id in _HANDLES_IMPORT for k in kinds)


@lru_cache(maxsize=8192)  # the statements of one source recur in many of its blocks' files
def guard_imports(text: str, name: str) -> str | None:
    """``importlib.import_module(...)`` calls as ``name.import_module(...)``, except inside a ``try``
    that handles the ImportError itself (an optional import keeps its fallback); None when the
    statement has none."""
    if "import_module" not in text:
        return None
    spots: list[ast.expr] = []

    def visit(node: ast.AST, handled: bool) -> None:
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            inner = handled or any(_handles_import_error(h) for h in node.handlers)
            for child in node.body:
                visit(child, inner)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, handled)
            return
        if isinstance(node, ast.Call) and not handled:
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "import_module") or (
                    isinstance(func, ast.Attribute) and func.attr == "import_module" and isinstance(func.value, ast.Name)):
                spots.append(func)
        for child in ast.iter_child_nodes(node):
            visit(child, handled)

    visit(ast.parse(text), False)
    if not spots:
        return None
    at = _offsets(text)
    for func in sorted(spots, key=lambda f: (f.lineno, f.col_offset), reverse=True):
        start, end = at(func.lineno, func.col_offset), at(func.end_lineno, func.end_col_offset)  # type: ignore[arg-type]
        text = f"{text[:start]}{name}.import_module{text[end:]}"
    return text
