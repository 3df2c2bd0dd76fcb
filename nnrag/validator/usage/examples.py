"""Documented examples: the ``>>>`` lines of a block's docstrings show how its authors build and
call it (``BilateralBlur((3, 3), 0.1, (1.5, 1.5))`` on ``torch.rand(2, 4, 5, 5)``), which no guess
from parameter names finds. Found statically here; run by the harvest (see harvest.py) like a
model factory, with every block class of the source recording its construction and first call.
"""

from __future__ import annotations

import ast
import codeop
import doctest

from . import module_tree

# The docstrings of a class that are read: its own and those of the methods that show its use.
_METHODS = ("__init__", "forward", "__call__")
EXAMPLE_SUFFIX = ".__doc__"  # a harvest unit named "Class.__doc__" runs that class's examples


def _has_example(doc: str | None) -> bool:
    return bool(doc) and ">>>" in doc  # type: ignore[operator]


def documented_classes(text: str) -> list[str]:
    """Top-level classes of a module's source whose docstring, or a docstring of their
    ``__init__``/``forward``, holds an example, in source order."""
    tree = module_tree(text)
    if tree is None:
        return []
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name in _METHODS]
        if any(_has_example(ast.get_docstring(n, clean=False)) for n in [node, *methods]):
            found.append(node.name)
    return found


def example_sources(obj: object) -> list[str]:
    """The statements of the examples in ``obj``'s docstrings (the class's first), in order."""
    docs = [getattr(obj, "__doc__", None)]
    members = vars(obj) if isinstance(obj, type) else {}
    docs += [getattr(members[m], "__doc__", None) for m in _METHODS if m in members]
    parser = doctest.DocTestParser()
    out: list[str] = []
    for doc in docs:
        if isinstance(doc, str) and ">>>" in doc:
            try:
                out += statements([example.source for example in parser.get_examples(doc)])
            except ValueError:  # a malformed example (inconsistent indentation): the rest still runs
                continue
    return out


def _incomplete(source: str) -> bool:
    try:
        return codeop.compile_command(source, symbol="exec") is None
    except (SyntaxError, ValueError, OverflowError):
        return False


def statements(sources: list[str]) -> list[str]:
    """Whole statements from doctest sources, for documentation that writes ``>>>`` where
    ``...`` belongs: a source that leaves a bracket or block open, or an indented one, continues
    the statement before it."""
    out: list[str] = []
    pending = ""
    for source in sources:
        if pending:
            pending += source
        elif out and source[:1].isspace():
            out[-1] += source
            continue
        else:
            pending = source
        if not _incomplete(pending):
            out.append(pending)
            pending = ""
    if pending:
        out.append(pending)
    return out
