"""Figures of how safely the code can be changed, for any checkout of the package: the longest
functions, where SQL runs, which tables more than one module writes, and cache versions written
as literals (which someone must remember to bump). Reads the package's files as text and syntax;
imports nothing of it, so an old checkout can be measured beside the current one.

    python -m nnrag.evals.code_health [PACKAGE_DIR] [--top N] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

_WRITE = re.compile(r"\b(?:INSERT(?: OR \w+)? INTO|REPLACE INTO|UPDATE|DELETE FROM)\s+(\w+)")
_EXECUTE = frozenset({"execute", "executemany", "executescript"})
_VERSION_NAME = re.compile(r"(?:^|_)VERSION$")


def _strings(tree: ast.AST) -> list[str]:
    """String literals, an f-string's literal parts joined with ``{}`` for each placeholder."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
    return out


def measure(package: Path, top: int = 5) -> dict[str, object]:
    functions: list[tuple[int, str]] = []
    sites = 0
    modules_with_sql: set[str] = set()
    writers: dict[str, set[str]] = defaultdict(set)
    literals: list[str] = []
    modules = 0
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        modules += 1
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(((node.end_lineno or node.lineno) - node.lineno + 1, f"{rel}:{node.lineno} {node.name}"))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _EXECUTE
                  and node.args):
                sites += 1
                modules_with_sql.add(rel)
        for text in _strings(tree):
            for table in _WRITE.findall(text):
                writers[table].add(rel)
        for node in tree.body:  # module-level NAME_VERSION = "12"
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, (str, int)) and not isinstance(node.value.value, bool)):
                literals += [f"{rel}: {t.id} = {node.value.value!r}" for t in node.targets
                             if isinstance(t, ast.Name) and _VERSION_NAME.search(t.id)]
    functions.sort(reverse=True)
    shared = {t: sorted(ms) for t, ms in sorted(writers.items())
              if len({m for m in ms if "/db/" not in m}) > 1}  # the database's own migrations write any table
    return {"modules": modules, "longest_functions": [f"{where} ({n})" for n, where in functions[:top]],
            "sql_sites": sites, "modules_with_sql": len(modules_with_sql),
            "tables_with_several_writers": shared, "version_literals": literals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    found = measure(Path(args.package), args.top)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"modules {found['modules']}; SQL run at {found['sql_sites']} sites in {found['modules_with_sql']} modules")
    print("longest functions: " + "; ".join(found["longest_functions"]))  # type: ignore[arg-type]
    for table, ms in found["tables_with_several_writers"].items():  # type: ignore[union-attr]
        print(f"written by several modules: {table}: {', '.join(ms)}")
    for literal in found["version_literals"]:  # type: ignore[union-attr]
        print(f"version literal: {literal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
