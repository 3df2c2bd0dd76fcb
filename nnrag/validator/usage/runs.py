"""Recorded usage: how a source's own model factories and documented examples build and call its blocks.

``nnrag build`` validates every block from guessed arguments first. Blocks whose arguments or
inputs could not be guessed get a second chance with recipes recorded by running the source's
factories and the ``>>>`` examples of its class docstrings in the sandbox (see ``harvest.py``).
Recipes are stored per factory or example in the index database and reused until its module or
the source's version changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import PASSED_SUFFIX, configs, described
from .defaults import DEFAULTS_UNIT, choose_overrides, defines_defaults
from .examples import EXAMPLE_SUFFIX, documented_classes
from .factories import factory_functions
from .readme import README_UNIT, blocks_using, code_blocks, readme_files
from .settings import choose_settings, keys_read
from .tables import TABLE_UNIT, table_names
from ...db import Database
from ...extraction.lending import imported_lenders
from ..envs import missing_module
from ..record import gate_version

if TYPE_CHECKING:
    from ..gate import Gate

log = logging.getLogger(__name__)

_FACTORIES_PER_JOB = 40
_README_BLOCKS = 60  # README code blocks run per source, those naming still failing classes
_CONFIGS = 100  # registry configs run per source: enough to name every model type in most packages
_DEFAULT_MODULES = 3  # modules of default configs run per source (a repository keeps them in one or two)
_OVERRIDES = 4  # yacs override files merged into them: the experiments naming the most different settings
_SETTINGS = 4  # settings files and parsers the failing classes are built with (see settings.py)
_JOB_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Factory:
    """A unit the harvest runs: a model factory, the examples of a class (``Class.__doc__``), the
    registry tables of a module (``<tables>``), a module's default configs (``<defaults>``), or a
    registry config file or a YAML model description (function ``<config>`` or ``<described>``,
    module its path relative to the source's root)."""

    source: str
    module: str
    function: str
    stamp: str
    recipe: str = ""  # JSON: how the gate built and called a passing block (``Class.<passed>``), or the
    # failing classes to build with default configs (``<defaults>``)

    @property
    def key(self) -> str:
        return f"{self.module}:{self.function}"

    @property
    def is_example(self) -> bool:
        return self.function.endswith(EXAMPLE_SUFFIX) or self.function == README_UNIT

    @property
    def is_config(self) -> bool:
        """A registry config or a model described in YAML."""
        return self.function in (configs.CONFIG_UNIT, described.DESCRIBED_UNIT)

    @property
    def is_passed(self) -> bool:
        return self.function.endswith(PASSED_SUFFIX)

    @property
    def is_file(self) -> bool:
        """A unit named by a file of the source (a config, a README's code block), not a module."""
        return self.is_config or self.function == README_UNIT


@dataclass(frozen=True)
class Passed:
    """A block that passed the gate and built failing blocks inside it; the harvest runs it as the
    gate did (``recipe``, JSON) to record how it builds and calls them."""

    module: str
    qualname: str  # within the module
    recipe: str


_IN_STAMP = 4  # a harvest's stamp: gate version, source version, commit, text SHA-1, then the environment


@dataclass
class HarvestStats:
    factories: int = 0
    examples: int = 0
    configs: int = 0
    passed: int = 0
    ok: int = 0
    seconds: float = 0.0
    not_run: int = 0  # factories whose job ended before them (a time limit, a crash, a harvest that could not start)
    why_not_run: str | None = None  # the first such job's reason

    def add(self, other: "HarvestStats") -> None:
        self.factories += other.factories
        self.examples += other.examples
        self.configs += other.configs
        self.passed += other.passed
        self.ok += other.ok
        self.seconds += other.seconds
        self.not_run += other.not_run
        self.why_not_run = self.why_not_run or other.why_not_run


def plan(store: Database, source: str, focus: set[str], requirements: tuple[str, ...] = (),
         per_focus_module: int = 2, classes: frozenset[str] = frozenset(), passed: Sequence[Passed] = ()) -> list[Factory]:
    """What to run for ``source``: the blocks in ``passed`` as the gate ran them, the documented
    examples, registry tables and up to ``per_focus_module`` factories of the modules in ``focus`` (those holding
    blocks that still fail), then the source's default configs with those blocks' classes, then registry config files that together name every model type and
    the README's code blocks that name a class in ``classes`` (the blocks that still fail), then
    the examples and the smallest factory of every other module, since a block of a shared layers
    module is built by the models and examples of other modules. Units already run against the
    same module text, by the same gate, in the same requirement environment (``requirements``),
    are left out."""
    conn = store.conn
    row = conn.execute("SELECT id, version, git_commit, root FROM sources WHERE name=?", (source,)).fetchone()
    if row is None:
        return []
    source_id, version, commit = row["id"], row["version"], row["git_commit"]

    def stamp(sha1: str) -> str:
        return "|".join([gate_version(), version or "", commit or "", sha1, *requirements])  # see _IN_STAMP

    done = {r["factory"]: r["stamp"] for r in conn.execute("SELECT factory, stamp FROM harvests WHERE source=?", (source,))}
    files = conn.execute(
        "SELECT module, sha1 FROM files WHERE source_id=? AND status='ok' AND module IS NOT NULL ORDER BY module",
        (source_id,),
    ).fetchall()
    first: list[Factory] = []
    rest: list[Factory] = []
    sha1s = dict(files)  # module -> the sha1 of its text
    for p in passed:
        if p.module in sha1s:
            unit = Factory(source, p.module, p.qualname + PASSED_SUFFIX,
                           stamp(sha1s[p.module] + hashlib.sha1(p.recipe.encode()).hexdigest()), p.recipe)
            if done.get(unit.key) != unit.stamp:
                first.append(unit)
    defaults: list[tuple[str, str]] = []  # modules that make default configs
    parsers: list[str] = []  # texts of modules that declare command-line options
    for module, sha1 in files:
        text = store.file_text(sha1) if sha1 else ""
        if defines_defaults(text):
            defaults.append((module, sha1))
        if "add_argument(" in text:
            parsers.append(text)
        if "def " not in text:
            continue
        names = factory_functions(text)[: per_focus_module if module in focus else 1]
        if ">>>" in text:
            names += [name + EXAMPLE_SUFFIX for name in documented_classes(text)]
        if table_names(text):
            names.append(TABLE_UNIT)
        chosen = [Factory(source, module, n, stamp(sha1)) for n in names]
        (first if module in focus else rest).extend(f for f in chosen if done.get(f.key) != f.stamp)
    settings: list[dict[str, Any]] = []
    if focus and classes:  # the repository's settings files and parsers that hold what failing classes read
        read = set().union(*(keys_read(store.file_text(sha1s[m]), set(classes)) for m in sorted(focus) if sha1s.get(m)))
        settings = choose_settings(Path(row["root"]) if row["root"] else None, parsers, read, _SETTINGS)
    if focus and classes and (defaults or settings):  # each failing class that takes a config, built with the source's defaults
        overrides = [str(Path(row["root"], rel)) for rel in choose_overrides(Path(row["root"]), _OVERRIDES)] if row["root"] else []
        # the settings once, with the first module of defaults or, where there is none, a module of the failing classes
        makers = defaults[:_DEFAULT_MODULES] or [(m, sha1s[m]) for m in sorted(focus) if sha1s.get(m)][:1]
        for i, (module, sha1) in enumerate(makers):
            wanted = json.dumps({"modules": sorted(focus), "names": sorted(classes), "overrides": overrides,
                                 "settings": settings if i == 0 else []})
            digest = hashlib.sha1(wanted.encode()).hexdigest()
            unit = Factory(source, module, DEFAULTS_UNIT, stamp(hashlib.sha1((sha1 + digest).encode()).hexdigest()), wanted)
            if done.get(unit.key) != unit.stamp:
                first.append(unit)
    if focus and row["root"]:
        root = Path(row["root"])
        chosen = [(rel, configs.CONFIG_UNIT) for rel in configs.choose(root, _CONFIGS)]
        chosen += [(rel, described.DESCRIBED_UNIT) for rel in described.choose(root, _CONFIGS)]
        for rel, kind in chosen:
            unit = Factory(source, rel, kind, stamp(hashlib.sha1((root / rel).read_bytes()).hexdigest()))
            if done.get(unit.key) != unit.stamp:
                first.append(unit)
        packages = _packages(store, source)[0]
        for path in readme_files(root, packages):
            blocks = code_blocks(path.read_text(encoding="utf-8", errors="replace"))
            for i in blocks_using(blocks, packages, set(classes))[:_README_BLOCKS]:
                unit = Factory(source, f"{path.relative_to(root)}#{i}", README_UNIT,
                               stamp(hashlib.sha1(blocks[i].encode()).hexdigest()))
                if done.get(unit.key) != unit.stamp:
                    first.append(unit)
    return first + rest


def stopped_at(store: Database, source: str, requirements: tuple[str, ...] = ()) -> set[str]:
    """The top-level modules the units of ``source`` stopped at, not importable, as this gate last
    ran them in the environment ``requirements``: those of the run just made and of earlier
    builds' runs, which :func:`plan` does not run again."""
    found: set[str] = set()
    for r in store.conn.execute("SELECT stamp, message FROM harvests WHERE source=? AND ok=0", (source,)):
        parts = (r["stamp"] or "").split("|")
        if (parts[0] == gate_version() and parts[_IN_STAMP:] == list(requirements)
                and (top := missing_module(r["message"] or ""))):
            found.add(top)
    return found


def _packages(store: Database, source: str) -> tuple[list[str], list[str]]:
    """The source's top-level packages (their blocks are recorded) and the folders to import from:
    the source's own, then those of the indexed sources it imports packages from (mmdet needs
    mmcv and mmengine), as its blocks were extracted."""
    conn = store.conn
    row = conn.execute("SELECT id FROM sources WHERE name=?", (source,)).fetchone()
    if row is None:
        return [], []
    modules = {r["module"].split(".")[0] for r in conn.execute(
        "SELECT DISTINCT module FROM files WHERE source_id=? AND module IS NOT NULL", (row["id"],))}
    paths: list[str] = []
    for root in roots(store, source):
        paths += [str(p) for p in (root, root / "src") if p.is_dir() and str(p) not in paths]
    return sorted(modules), paths


def roots(store: Database, source: str) -> list[Path]:
    """The folders of the source and of the indexed sources it imports packages from (mmdet: mmcv
    and mmengine), the source's first; never those of the corpus's other sources, whose declared
    requirements would join the harvest's environment."""
    conn = store.conn
    row = conn.execute("SELECT id, root FROM sources WHERE name=?", (source,)).fetchone()
    if row is None:
        return []
    lent = set(imported_lenders(conn, row["id"]).values())
    found = [row["root"]] + [r["root"] for r in conn.execute("SELECT id, root FROM sources ORDER BY priority, name")
                             if r["id"] in lent]
    return [Path(r) for r in found if r]


def run(store: Database, gate: "Gate", source: str, factories: list[Factory],
        progress: Callable[[int, int], None] | None = None) -> HarvestStats:
    """Run the factories on the gate's workers, in jobs of a few dozen, storing recipes as they come."""
    stats = HarvestStats()
    if not factories:
        return stats
    started = time.perf_counter()
    packages, paths = _packages(store, source)
    row = store.conn.execute("SELECT root FROM sources WHERE name=?", (source,)).fetchone()
    root = Path(row["root"] or "") if row else Path()

    def sent(f: Factory) -> tuple[str, str]:  # a config or a README block runs from its absolute path
        return (str(root / f.module) if f.is_file else f.module, f.function)

    # interleaved, so that every worker starts on the focus modules
    count = max(gate.workers, -(-len(factories) // _FACTORIES_PER_JOB))
    jobs = [job for i in range(count) if (job := factories[i::count])]
    done = 0

    def work(job: list[Factory]) -> dict[str, Any]:
        # room for one factory that takes its whole limit (60 s) beside quick ones
        return gate.harvest([(*sent(f), f.recipe) if f.recipe else sent(f) for f in job], packages, paths,
                            timeout_s=min(_JOB_TIMEOUT_S, 120.0 + 30.0 * len(job)))

    # workers only talk to the gate; this thread alone writes the database
    with ThreadPoolExecutor(max_workers=gate.workers) as pool:
        futures = {pool.submit(work, job): job for job in jobs}
        for future in as_completed(futures):
            job, result = futures[future], future.result()
            by_key = {".".join(sent(f)): f for f in job}
            reported = set()
            for record in result.get("factories", []):
                factory = by_key.get(record.get("factory", ""))
                if factory is None:
                    continue
                reported.add(factory.key)
                _save(store.conn, factory, record)
                stats.examples += factory.is_example
                stats.configs += factory.is_config
                stats.passed += factory.is_passed
                stats.factories += not (factory.is_example or factory.is_config or factory.is_passed)
                stats.ok += bool(record.get("ok"))
            # the job ended (a time limit, a crash, a harvest that could not start) before these reported
            stored, why = _why_not_reached(result)
            for factory in job:
                if factory.key not in reported:
                    _save(store.conn, factory, {"ok": False, "message": stored, "usage": {}})
                    stats.not_run += 1
                    stats.why_not_run = stats.why_not_run or why
            store.conn.commit()
            done += len(job)
            if progress:
                progress(done, len(factories))
    stats.seconds = time.perf_counter() - started
    return stats


def _why_not_reached(result: dict[str, Any]) -> tuple[str, str]:
    """Why a harvest job ended before a factory reported: killed (and for what), stopped by a
    violation, or failed as a whole (a harvest that could not start says so). The message stored
    for the factory names the cause alone (``stopped_at`` reads module names out of stored
    messages: a harvest's own failure must not pass for a missing distribution); the second, whole
    reason is for the build's summary."""
    if result.get("killed"):
        return f"not reached ({result['killed']})", f"the harvest was killed ({result['killed']})"
    if result.get("violations"):
        return "not reached (sandbox-violation)", "; ".join(result["violations"])[:300]
    if result.get("message"):
        return "not reached (the harvest failed)", str(result["message"]).strip().splitlines()[-1][:300]
    return "not reached", "the harvest ended before it"


def _save(conn: sqlite3.Connection, factory: Factory, record: dict[str, Any]) -> None:
    conn.execute("DELETE FROM usage WHERE source=? AND factory=?", (factory.source, factory.key))
    conn.executemany(
        "INSERT INTO usage (source, factory, block, entries) VALUES (?,?,?,?)",
        [(factory.source, factory.key, block, json.dumps(entries)) for block, entries in record.get("usage", {}).items()],
    )
    conn.execute(
        "INSERT OR REPLACE INTO harvests (source, factory, stamp, ok, message, seconds) VALUES (?,?,?,?,?,?)",
        (factory.source, factory.key, factory.stamp, int(bool(record.get("ok"))), record.get("message"), record.get("seconds")),
    )


def hints(conn: sqlite3.Connection, source: str, block: str, limit: int = 4) -> list[dict[str, Any]]:
    """Recorded usages of one block (``module.Qualname``), those with a recorded call first. A
    block nothing built itself (a base class: mmdet's ``SingleStageInstanceSegmentor``, PyG's
    ``BasicGNN``) gets those of its direct subclasses, as constructions of the block itself: a
    subclass that passes its arguments through (``SOLO(backbone, neck, mask_head, ...)``) was
    built with what the base takes; where it was not, the probe's attempt fails and guesses follow."""
    entries = _recorded(conn, source, block)
    row = None if entries else conn.execute(
        "SELECT f.module, b.qualname FROM blocks b JOIN files f ON f.id = b.file_id JOIN sources s ON s.id = b.source_id"
        " WHERE s.name=? AND b.qualname=?", (source, block)).fetchone()
    if row is not None and row["qualname"].startswith(row["module"] + "."):
        own = [row["module"], row["qualname"][len(row["module"]) + 1:]]
        for sub in conn.execute("SELECT b.qualname FROM blocks b JOIN sources s ON s.id = b.source_id WHERE s.name=?"
                                " AND json_extract(b.bases_chain, '$[1]')=? ORDER BY b.qualname", (source, block)):
            entries += [{**e, "init": {**e["init"], "cls": own}} for e in _recorded(conn, source, sub["qualname"])
                        if isinstance(e.get("init"), dict)]
    entries.sort(key=lambda e: not e.get("call"))
    return entries[:limit]


def _recorded(conn: sqlite3.Connection, source: str, block: str) -> list[dict[str, Any]]:
    return [e for (text,) in conn.execute("SELECT entries FROM usage WHERE source=? AND block=? ORDER BY factory", (source, block))
            for e in json.loads(text)]


@dataclass(frozen=True)
class Named:
    """What recorded arguments name beyond a block's own code: the ``type`` strings of their
    config dicts (``loss_cls=dict(type='FocalLoss')``; ``'mmdet.FocalLoss'`` names FocalLoss),
    which a registry builds, and the classes they pass, build or take values of
    (``block=BasicBlock``), as ``(module, qualname)``."""

    types: frozenset[str] = frozenset()
    classes: frozenset[tuple[str, str]] = frozenset()


def named_by(entries: list[dict[str, Any]]) -> Named:
    types: set[str] = set()
    classes: set[tuple[str, str]] = set()

    def walk(recipe: Any, objects: bool) -> None:
        if isinstance(recipe, dict):
            pairs = recipe.get("dict")
            for key, value in pairs if isinstance(pairs, list) else []:
                if key == "type" and isinstance(value, dict) and isinstance(value.get("v"), str):
                    types.add(value["v"].rsplit(".", 1)[-1])
            # not the class of a settings object given to the constructor: an object with its
            # attributes stands in for it. An object given to forward is data (a detector's data
            # samples), whose class computes what the block reads (``sample.metainfo``).
            for key in ("ref", "enum", "cls", "object") if objects else ("ref", "enum", "cls"):
                named = recipe.get(key)
                if isinstance(named, list) and len(named) == 2 and all(isinstance(x, str) for x in named):
                    classes.add((named[0], named[1]))
            for value in recipe.values():
                walk(value, objects)
        elif isinstance(recipe, list):
            for value in recipe:
                walk(value, objects)

    for entry in entries:
        walk(entry.get("init"), False)
        walk(entry.get("call"), True)
    return Named(frozenset(types), frozenset(classes))
