"""What registries build from strings: the classes and statements that register a name
(``@MODELS.register_module()``, ``@MODELS.register_module('deconv')``,
``MODELS.register_module('Linear', module=nn.Linear)``), found in the modules a closure may copy,
for the closure to follow strings such as ``dict(type='DropPath')`` that no import names."""

from __future__ import annotations

import ast
import re
import sqlite3
from functools import cached_property
from typing import Callable

from ..db import file_text
from ..indexing.resolve import ModuleInfo
from .plan import DefTarget, UnitKey
from .units import ModuleUnits

# a registering call as a statement of its own, and a decorator naming the class it registers
_REGISTERING_STATEMENT = re.compile(r"(?m)^[A-Za-z_][\w.]*\.register_module\(")
_REGISTERED_AS = re.compile(
    r"(?m)^@[\w.]*register_module\(\s*(?:name\s*=\s*)?['\"]([\w.]+)['\"][^\n]*\n(?:@[^\n]*\n)*class\s+(\w+)")


class RegistryNames:
    """Registered names of the modules an :class:`~nnrag.extraction.closure.Extractor` may copy from
    (its own source first, then its lenders)."""

    conn: sqlite3.Connection
    source_id: int
    infos: dict[str, ModuleInfo]
    _sha1: dict[int, str]
    units_of: Callable[[str], ModuleUnits]  # the extractor's parsed modules

    @cached_property
    def registered(self) -> dict[str, DefTarget]:
        """Top-level classes a decorator registers (``@MODELS.register_module()``), by class name:
        what a registry builds from ``dict(type='DropPath')``, a string no import names. The
        block's own source first, then by module name."""
        ids = sorted({m.source_id for m in self.infos.values()})
        rows = self.conn.execute(
            "SELECT f.id AS file_id, f.source_id, f.module, d.qualname FROM definitions d JOIN files f ON f.id = d.file_id"
            f" WHERE f.source_id IN ({','.join('?' * len(ids))}) AND d.kind = 'class'"
            " AND d.decorators LIKE '%register_module%' AND instr(d.qualname, '.') = 0", ids).fetchall()
        found: dict[str, DefTarget] = {}
        for r in sorted(rows, key=lambda r: (r["source_id"] != self.source_id, r["module"] or "")):
            info = self.infos.get(r["module"] or "")
            if info is not None and info.file_id == r["file_id"]:
                found.setdefault(r["qualname"], DefTarget(r["module"], r["qualname"]))
        return found

    @cached_property
    def aliases(self) -> dict[str, DefTarget]:
        """Classes a decorator registers under a name of its own (``@MODELS.register_module('deconv')``
        on ConvTranspose2d), by that name."""
        found: dict[str, DefTarget] = {}
        modules = sorted({t.module for t in self.registered.values()},
                         key=lambda m: (self.infos[m].source_id != self.source_id, m))
        for module in modules:
            for m in _REGISTERED_AS.finditer(self.text_of(module)):
                found.setdefault(m.group(1), DefTarget(module, m.group(2)))
        return found

    def text_of(self, module: str) -> str:
        """A module's text, without parsing it."""
        return file_text(self.conn, self._sha1[self.infos[module].file_id])

    @cached_property
    def registrations(self) -> dict[str, UnitKey]:
        """Top-level statements that register a class under a name without decorating it
        (``MODELS.register_module('Linear', module=nn.Linear)``, ``register_module(module=nn.GELU)``),
        by that name: what a registry builds from ``dict(type='Linear')`` in code that never
        imports the module holding the statement. The block's own source first."""
        found: dict[str, UnitKey] = {}
        for module in sorted(self.infos, key=lambda m: (self.infos[m].source_id != self.source_id, m)):
            if not _REGISTERING_STATEMENT.search(self.text_of(module)):
                continue
            mu = self.units_of(module)
            for k, st in enumerate(mu.stmts):
                call = st.node.value if isinstance(st.node, ast.Expr) else None
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "register_module"):
                    continue
                keywords = {kw.arg: kw.value for kw in call.keywords}
                name = keywords.get("name", call.args[0] if call.args else None)
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    found.setdefault(name.value, (module, k))
                elif name is None and isinstance(keywords.get("module"), (ast.Name, ast.Attribute)):
                    value = keywords["module"]
                    found.setdefault(value.id if isinstance(value, ast.Name) else value.attr, (module, k))
        return found
