"""The package reads as the pipeline: each stage's folder imports only stages below it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nnrag

PACKAGE = Path(nnrag.__file__).parent
# Bottom to top. Shared ground first: errors, settings, the home, the database.
LAYERS = [
    {"_version", "errors", "progress", "workspace", "config", "codekeys", "db"},
    {"sourcing"}, {"indexing"}, {"extraction"}, {"validator"}, {"library"}, {"specs"}, {"curate"}, {"retrieval"}, {"synthesis"}, {"datasets"},
    {"tools"}, {"agent"}, {"serve"}, {"lemur"}, {"evals"}, {"cli", "__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}
CLIENTS = {"tools", "agent", "serve", "evals", "cli", "__main__"}  # may call the public API (nnrag/__init__.py)


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "nnrag" else None


def _imports(path: Path) -> list[tuple[int, str]]:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" for a in node.names] if target == "nnrag" else [target]
            found += [(node.lineno, t) for t in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return [(line, t) for line, t in found if t == "nnrag" or t.startswith("nnrag.")]


def test_every_module_belongs_to_a_known_stage() -> None:
    stages = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert stages <= set(RANK), stages - set(RANK)


def test_imports_point_down_the_pipeline() -> None:
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts == ("__init__.py",) or "plugins" in rel.parts:
            continue  # the facade sits on top; LEMUR's plugins run inside LEMUR
        own = rel.parts[0].removesuffix(".py")
        for line, target in _imports(path):
            stage = _stage(target)
            if stage not in RANK:  # ``import nnrag`` or a name of the facade
                if own not in CLIENTS:
                    wrong.append(f"{rel}:{line} calls the public API from below it")
            elif RANK[stage] > RANK[own]:
                wrong.append(f"{rel}:{line} imports {target} (stage {stage} is above {own})")
    assert not wrong, "\n".join(wrong)


def test_every_module_imports_by_its_dotted_path_and_the_api_survives() -> None:
    """No public name of the facade is a package's name: ``import nnrag.retrieval.techniques as t``
    works for every module, and importing them all leaves ``nnrag.index``, ``nnrag.search``, ...
    the facade's functions."""
    import importlib
    import inspect

    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert not packages & set(nnrag.__all__), packages & set(nnrag.__all__)
    functions = {name for name in nnrag.__all__ if inspect.isfunction(getattr(nnrag, name))}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if "plugins" in rel.parts or rel.name == "__main__":
            continue
        dotted = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        # what ``import a.b.c as m`` does: the attribute chain from the top package, not sys.modules
        module = importlib.import_module(dotted)
        reached = nnrag
        for part in dotted.split(".")[1:]:
            reached = getattr(reached, part)
        assert reached is module, dotted
    hidden = sorted(name for name in functions if not inspect.isfunction(getattr(nnrag, name)))
    assert not hidden and {"index", "search", "extract", "sources"} <= functions, hidden


_WRITE = re.compile(r"\b(?:INSERT(?: OR \w+)? INTO|REPLACE INTO|UPDATE|DELETE FROM)\s+(\w+)")
_READ = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)")


def _sql(path: Path) -> list[tuple[int, str]]:
    """The SQL-looking text of a module's string literals (an f-string's literal parts, with each
    placeholder as ``{}``), with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            found.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)))
    return found


def test_every_table_has_one_owner_module_that_alone_writes_it_and_no_stage_below_reads_it() -> None:
    from nnrag.db.schema import OWNERS, SEARCH_FIELDS, TABLES

    created = set(re.findall(r"CREATE (?:VIRTUAL )?TABLE IF NOT EXISTS (\w+)", TABLES))
    created |= {f"search_{f}" for f in SEARCH_FIELDS} if "search_" in created else set()
    assert created - {"search_"} == set(OWNERS), set(OWNERS) ^ (created - {"search_"})
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        own = rel.parts[0].removesuffix(".py")
        module = ".".join(rel.with_suffix("").parts)
        if own == "db":
            continue
        for line, text in _sql(path):
            for table in _WRITE.findall(text.replace("search_{}", "search_name")):
                if table in OWNERS and OWNERS[table] != module:
                    wrong.append(f"{rel}:{line} writes {table}, which {OWNERS[table]} owns")
            for table in _READ.findall(text.replace("search_{}", "search_name")):
                stage = OWNERS.get(table, "").split(".")[0]
                if table in OWNERS and RANK[own] < RANK[stage]:
                    wrong.append(f"{rel}:{line} reads {table} of {OWNERS[table]}, a stage above {own}")
    for table, owner in OWNERS.items():  # each owner is a module that exists
        assert (PACKAGE / (owner.replace(".", "/") + ".py")).is_file() or (PACKAGE / owner).is_dir(), (table, owner)
    assert not wrong, "\n".join(wrong)
