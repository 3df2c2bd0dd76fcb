"""Scope-aware renaming of one statement, preserving everything else byte for byte: spliced with
the compiler's scoping where :mod:`nnrag.extraction.splice` models the statement, else with
LibCST's scope analysis (which the splice reproduces, at a fraction of its cost)."""

from __future__ import annotations

from functools import lru_cache

import libcst as cst
import libcst.helpers
from libcst.metadata import GlobalScope, MetadataWrapper, ScopeProvider

from .splice import spliced


def _dotted(node: cst.BaseExpression) -> tuple[str, cst.Name] | None:
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    return ".".join([node.value, *reversed(parts)]), node


class _Renamer(cst.CSTTransformer):
    def __init__(self, wrapper: MetadataWrapper, renames: dict[str, str], chains: dict[str, str]) -> None:
        super().__init__()
        self.renames = renames
        self.chains = chains
        wanted = set(renames) | {c.split(".", 1)[0] for c in chains}
        self.globals: set[int] = set()  # ids of Name nodes that refer to a module-level name
        self.defs: set[int] = set()
        scopes = {s for s in wrapper.resolve(ScopeProvider).values() if s is not None}
        for scope in scopes:
            for name in wanted:
                for access in scope.accesses[name]:
                    if all(isinstance(r.scope, GlobalScope) for r in access.referents):
                        self.globals.add(id(access.node))
                if isinstance(scope, GlobalScope) and name in renames:
                    for assignment in scope.assignments[name]:
                        self.defs.add(id(getattr(assignment, "node", None)))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if (id(original) in self.globals or id(original) in self.defs) and original.value in self.renames:
            return updated.with_changes(value=self.renames[original.value])
        return updated

    def _rename_def(self, original, updated):  # type: ignore[no-untyped-def]
        if id(original) in self.defs and original.name.value in self.renames:
            return updated.with_changes(name=cst.Name(self.renames[original.name.value]))
        return updated

    leave_ClassDef = _rename_def
    leave_FunctionDef = _rename_def

    def _rename_import(self, original, updated):  # type: ignore[no-untyped-def]
        """An import that binds a renamed name (inside a ``try`` kept as written) binds the new name."""
        if id(original) not in self.defs or isinstance(updated.names, cst.ImportStar):
            return updated
        names = []
        for alias in updated.names:
            bound = alias.asname.name.value if alias.asname is not None else cst.helpers.get_full_name_for_node(alias.name)
            if bound in self.renames:
                alias = alias.with_changes(asname=cst.AsName(name=cst.Name(self.renames[bound])))
            names.append(alias)
        return updated.with_changes(names=names)

    leave_Import = _rename_import
    leave_ImportFrom = _rename_import

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        found = _dotted(original)
        if found is not None and found[0] in self.chains and id(found[1]) in self.globals:
            return cst.parse_expression(self.chains[found[0]])
        return updated


def rename(text: str, renames: dict[str, str], chains: dict[str, str]) -> str:
    """Rename module-level ``renames`` and replace module-attribute ``chains`` in ``text``."""
    return _rename(text, tuple(sorted(renames.items())), tuple(sorted(chains.items())))


@lru_cache(maxsize=4096)  # blocks of one source share most statements, and their renames
def _rename(text: str, renames: tuple[tuple[str, str], ...], chains: tuple[tuple[str, str], ...]) -> str:
    done = spliced(text, dict(renames), dict(chains))
    return done if done is not None else with_libcst(text, renames, chains)


def with_libcst(text: str, renames: tuple[tuple[str, str], ...], chains: tuple[tuple[str, str], ...]) -> str:
    """The renaming done with LibCST's scope analysis."""
    wrapper = MetadataWrapper(cst.parse_module(text))
    return wrapper.module.visit(_Renamer(wrapper, dict(renames), dict(chains))).code
