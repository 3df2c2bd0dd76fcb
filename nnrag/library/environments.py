"""Blocks that fail only for a third-party requirement not installed here: with ``nnrag build
--requirements install`` they are validated again in a requirement environment that has it
(:mod:`nnrag.validator.envs`); without it, the report says which distributions they wait for.

The requirement is the module the block's import stopped at (``No module named 'addict'``), not
every import of the file: optional imports under ``try``/``except ImportError`` of other
platforms (``torch_npu``, ``parrots``) must not be installed, and could not be, unless the
failure ran into the name the import's fallback bound (``cfg = None`` without yacs). A block that
then stops at a further missing module gets that one too, for a few rounds.
"""

from __future__ import annotations

import ast
import re
import sysconfig
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from packaging.utils import canonicalize_name

from ..db import Database
from ..errors import ValidatorUnavailable
from ..progress import ProgressFn
from ..extraction.requirements import installed
from ..sourcing.declared import declared_names, import_names
from ..sourcing.provides import namespace_distribution, providing
from ..sourcing.spec import KIND_PYPI
from ..validator.envs import distribution_for, environment, made, missing_module, to_install
from ..validator.gate import Gate
from ..validator.record import MISSING_DEPENDENCY, Limits, ValidationRecord
from ..validator.usage.runs import roots
from ..workspace import Workspace
from . import records
from .pins import pinned_requirement
from .report import BuildReport
from .retry import RETRY_CODES, Retry

_ROUNDS = 8  # environments a block may try, each with one more missing module (mmdet needs five, BoxInst a sixth)


def _stopped_at(record: ValidationRecord) -> str | None:
    """The top-level module a block's import stopped at (``No module named 'addict'``), if not here."""
    top = None if record.ok or record.code != MISSING_DEPENDENCY else missing_module(record.message)
    return None if top is None or installed(top) else top


_FRAME = re.compile(r'File "[^"]*candidate\.py", line (\d+)')


# a module-level ``try`` with its handlers: the lines up to the next statement at column 0
_TOP_TRY = re.compile(r"^try:.*\n(?:(?:[ \t#].*|except.*|else:.*|finally:.*|)\n)*", re.M)


def _fallbacks(code: str, guarded: bool = False) -> dict[str, str]:
    """Names a module-level ``except ImportError`` binds in place of an optional import, with the
    top-level module that import wanted (``try: from yacs.config import CfgNode`` ... ``except
    ImportError: cfg = None`` gives ``{'cfg': 'yacs'}``), and with ``guarded``, the names the
    optional import itself binds (``from torch_harmonics.filter_basis import
    PiecewiseLinearFilterBasis`` under a handler that only prints). Only those ``try`` statements
    are parsed: a block's file can hold thousands of lines, and this runs for every failed block."""
    out: dict[str, str] = {}
    for m in _TOP_TRY.finditer(code) if "ImportError" in code or "ModuleNotFoundError" in code else ():
        try:
            tree = ast.parse(m.group(0))
        except SyntaxError:
            continue
        for stmt in tree.body:
            if not isinstance(stmt, ast.Try):
                continue
            wanted = [(n.module if isinstance(n, ast.ImportFrom) else n.names[0].name) for n in stmt.body
                      if isinstance(n, (ast.Import, ast.ImportFrom)) and not getattr(n, "level", 0)]
            if not wanted or not wanted[0]:
                continue
            for handler in stmt.handlers:
                if handler.type is None or re.search(r"ImportError|ModuleNotFoundError", ast.unparse(handler.type)):
                    for node in handler.body:
                        for target in getattr(node, "targets", []):
                            if isinstance(target, ast.Name):
                                out[target.id] = wanted[0].split(".")[0]
            for node in stmt.body if guarded else ():
                if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
                    for alias in node.names:
                        bound = alias.asname or alias.name.split(".")[0]
                        module = node.module if isinstance(node, ast.ImportFrom) else alias.name
                        if alias.name != "*" and module:
                            out.setdefault(bound, module.split(".")[0])
    return out


_UNDEFINED = re.compile(r"NameError: name '(\w+)' is not defined")


def _fallback_met(code: str, record: ValidationRecord) -> str | None:
    """The top-level module of an optional import, not installed here, whose fallback the failure
    ran into: a line of the block's file in its traceback reads a name the fallback bound (graphgym
    reads ``cfg.gnn`` where ``cfg = None`` stands for yacs's config). Unlike every optional import
    of the file (other platforms' ``torch_npu``), that one is what the block needs."""
    if record.ok or not record.traceback:
        return None
    undefined = _UNDEFINED.match(record.message or "")
    if undefined:  # a name only the optional import binds, read where that import failed
        top = _fallbacks(code, guarded=True).get(undefined.group(1))
        if top is not None and not installed(top):
            return top
    lines = code.splitlines()
    failing = [lines[n - 1] for n in map(int, _FRAME.findall(record.traceback)) if 0 < n <= len(lines)]
    fallbacks = _fallbacks(code) if failing else {}
    for line in failing:
        for name, top in fallbacks.items():
            if re.search(rf"\b{re.escape(name)}\b", line) and not installed(top):
                return top
    return None


def missing_distribution(record: ValidationRecord, corpus: frozenset[str] = frozenset(), code: str = "",
                         pins: Mapping[str, str] | None = None) -> str | None:
    """The distribution a failed import stopped at, or (given the block's ``code``) an optional
    import whose fallback the failure ran into, when it is not installed here; or, where the
    import found a package installed here too new for the code, the release ``pins`` pins it to
    (:mod:`nnrag.library.pins`). A package of the corpus (``corpus``: its top-level modules) is a
    closure the block could not complete, never something to install, but for the release of a
    PyPI source ``pins`` names for it (:func:`corpus_releases`)."""
    dotted = missing_module(record.message, dotted=True) if not record.ok and record.code == MISSING_DEPENDENCY else None
    if dotted:
        # a module of a namespace package is of a distribution of its own (opentelemetry's
        # exporters); where the namespace itself is absent, Python names only it, and the
        # block's imports say which of its modules it wants: where the corpus holds a portion of
        # the namespace (pyannote.audio), what the copy still imports of it is another portion
        top = dotted.split(".")[0]
        wanted = [dotted] if "." in dotted else list(dict.fromkeys(re.findall(rf"^\s*(?:from|import)\s+({top}\.[\w.]+)", code, re.M)))
        for module in wanted:
            found = namespace_distribution(module)
            if found and to_install([found], frozenset()):
                return found
    top = _stopped_at(record) or (_fallback_met(code, record) if code else None)
    if top and top in corpus:
        # a package of a PyPI source the copy imports (a compiled module of its wheel): that release
        return (pins or {}).get(top)
    if top:
        # a top-level module gone from its distribution's newer releases: the release pinned for it
        return (pins or {}).get(top) or distribution_for(top)
    return pinned_requirement(record, pins, corpus) if pins else None


_STDLIB = sysconfig.get_paths()["stdlib"] + "/"  # requirement environments share this Python's
_FRAME_FILE = re.compile(r'File "([^"]+)", line \d+')
# an installed distribution's file: ``.../site-packages/mmdet/__init__.py``
_INSTALLED = re.compile(r"/site-packages/([A-Za-z_]\w*)/")


def installed_importer(traceback: str) -> str | None:
    """The installed package whose own import stopped the block (mmdet 2's ``import mmcv`` in its
    ``__init__``): the ``traceback``'s innermost frame outside the import machinery and the
    standard library is a file of it; None when the copied code itself stopped there
    (``importlib`` called from the copy)."""
    files = [f for f in _FRAME_FILE.findall(traceback or "")
             if not f.startswith("<") and ("/site-packages/" in f or not f.startswith(_STDLIB))]
    found = _INSTALLED.search(files[-1]) if files else None
    return found.group(1) if found else None


def explain_corpus_import(record: ValidationRecord, corpus: frozenset[str]) -> ValidationRecord:
    """A block stopped at a package of the corpus that is not installed. Where an installed
    distribution imports it (mmdet 2 imports mmcv, which is lent, not installed), say so: that
    distribution is lent from its source as well (:mod:`nnrag.library.lent`). Else its static
    imports of that package were copied, so the import is by a name computed at run time (mmcv's
    ``load_ext`` loading the compiled ``mmcv._ext``): say so, as only the installed distribution
    provides it."""
    top = _stopped_at(record)
    if top is None or top not in corpus:
        return record
    importer = installed_importer(record.traceback)
    if importer is not None and importer != top:
        return replace(record, message=f"{record.message} (the installed {importer} imports {top}, which the corpus "
                                       f"holds but no environment installs)")
    return replace(record, message=f"{record.message} ({top} is a source of the corpus: the block loads a module "
                                   f"of it by a name computed at run time, such as a compiled extension, which "
                                   f"only an installed {distribution_for(top) or top} provides)")


def settled_by_install(workspace: Workspace, judged_in: Sequence[str] | None, not_installable: Sequence[str] | None) -> bool:
    """Whether a block's missing-dependency verdict already had its requirement environment (the
    record's ``environment``, or ``not_installable`` when pip could not make it) and that
    environment stands as it did: another ``--requirements install`` build would find the same.
    Deleting ``HOME/envs/<set>`` tries the set again."""
    if judged_in:
        return made(workspace, tuple(judged_in)) is True
    return bool(not_installable) and made(workspace, tuple(not_installable)) is False


def needs_install(waiting: list[tuple[records.Candidate, ValidationRecord]], corpus: frozenset[str]) -> dict[str, int]:
    """Blocks per missing distribution, most wanted first (what ``--requirements install`` would add)."""
    counts: dict[str, int] = {}
    for candidate, record in waiting:
        dist = missing_distribution(record, corpus, candidate.code)
        if dist:
            counts[dist] = counts.get(dist, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def corpus_packages(db: Database) -> frozenset[str]:
    """The top-level packages the indexed sources hold."""
    return frozenset(r["top"] for r in db.conn.execute(
        "SELECT DISTINCT substr(module, 1, instr(module || '.', '.') - 1) AS top FROM files WHERE module IS NOT NULL"))


def corpus_releases(db: Database) -> dict[str, str]:
    """The top-level packages of the corpus's PyPI sources, each with the release its source is
    (``compressai`` -> ``compressai==1.2.8``): a copy that still imports one (a compiled module its
    wheel ships) is judged with that release installed. Sources that only lend are left out."""
    rows = db.conn.execute(
        "SELECT DISTINCT s.spec, substr(f.module, 1, instr(f.module || '.', '.') - 1) AS top FROM sources s"
        " JOIN files f ON f.source_id = s.id WHERE s.kind = ? AND f.module IS NOT NULL"
        " AND coalesce(json_extract(s.config, '$.lends'), 0) = 0", (KIND_PYPI,))
    return {r["top"]: r["spec"].removeprefix("pypi:") for r in rows if "==" in r["spec"]}


class _Declared:
    """Per source, the import names its declared distributions may be named for, read once."""

    def __init__(self, db: Database, cache: Path) -> None:
        self.db = db
        self.cache = cache
        self._names: dict[str, dict[str, str]] = {}

    def alternative(self, source: str, module: str, instead_of: str) -> str | None:
        if source not in self._names:
            self._names[source] = {k: v for root in reversed(roots(self.db, source)) for k, v in import_names(root).items()}
        found = self._names[source].get(module)
        if found is None:
            # no declared name says it: what the declared distributions release does (tensorly-torch installs tltorch)
            declared = list(dict.fromkeys(n for root in roots(self.db, source) for n in declared_names(root)))
            absent = to_install(declared, frozenset())
            unknown = [n for n in declared if n in absent and canonicalize_name(n) != canonicalize_name(instead_of)]
            found = self._names[source][module] = providing(module, unknown, self.cache) or ""
        return found if found and canonicalize_name(found) != canonicalize_name(instead_of) else None


def _declared_instead(items: list[tuple[records.Candidate, ValidationRecord]], requirements: tuple[str, ...],
                      declared: _Declared, later: dict[tuple[str, ...], list[tuple[records.Candidate, ValidationRecord]]],
                      instead_of: dict[str, str]) -> list[tuple[records.Candidate, ValidationRecord]]:
    """Of blocks whose requirement set pip could not install, those whose source declares another
    distribution for the import they stopped at go to ``later`` with that one instead (noted in
    ``instead_of``: the name pip failed on -> the declared one); the rest are returned."""
    kept = []
    for candidate, record in items:
        top = _stopped_at(record) or _fallback_met(candidate.code, record)
        spelt = distribution_for(top) if top else None
        instead = declared.alternative(candidate.ref.source, top, spelt) if top and spelt in requirements else None
        if instead is None:
            kept.append((candidate, record))
            continue
        assert spelt is not None  # an alternative is only found for a name pip was asked for
        later.setdefault(tuple(sorted({*requirements, instead} - {spelt})), []).append((candidate, record))
        instead_of[spelt] = instead
    return kept


def validate_in_environments(db: Database, workspace: Workspace, waiting: list[tuple[records.Candidate, ValidationRecord]],
                             corpus: frozenset[str], workers: int, limits: Limits, report: BuildReport,
                             progress: ProgressFn | None, retry: list[Retry] | None = None,
                             pins: Mapping[str, str] | None = None) -> dict[str, object]:
    """Check each waiting block in the environment of its missing requirements; a set pip cannot
    install leaves its blocks ``missing-dependency`` with pip's reason. A block that imports there
    but fails on guessed arguments or inputs joins ``retry`` (when given) instead of being settled."""
    queue: dict[tuple[str, ...], list[tuple[records.Candidate, ValidationRecord]]] = {}
    for candidate, first in waiting:
        dist = missing_distribution(first, corpus, candidate.code, pins)
        if dist:  # the build waits only blocks that miss one
            queue.setdefault((dist,), []).append((candidate, first))
    entered, rescued, done = 0, 0, 0
    failed: dict[str, str] = {}
    declared = _Declared(db, workspace.cache_dir / "releases")
    instead_of: dict[str, str] = {}

    def settle(verdict: records.Verdict) -> None:
        records.save(db.conn, workspace, verdict)
        report.count(verdict.source, verdict.status == "validated", verdict.code)

    def keep_first(items: list[tuple[records.Candidate, ValidationRecord]], why: str, **noted: object) -> None:
        """Settle ``items`` with the verdict they came with, ``why`` added to its message."""
        nonlocal done
        for candidate, last in items:
            settle(candidate.verdict(replace(last, message=f"{last.message} ({why})"[:2000])).noted(**noted))
        done += len(items)
        if progress:
            progress("environments", done, len(waiting))

    for round_ in range(_ROUNDS):
        later: dict[tuple[str, ...], list[tuple[records.Candidate, ValidationRecord]]] = {}
        for requirements, items in sorted(queue.items()):
            env = environment(workspace, requirements)
            if env.python is None:
                failed[" ".join(requirements)] = env.error or "unknown"
                if round_ + 1 < _ROUNDS:  # the name the source means, where its declaration says another
                    items = _declared_instead(items, requirements, declared, later, instead_of)
                keep_first(items, f"pip cannot install {', '.join(requirements)}: {env.error}",
                           not_installable=list(requirements))
                continue
            entered += 1
            judged: set[str] = set()
            try:
                with Gate(workers, limits, python=env.python) as gate:
                    for candidate, record in gate.check_many((c, c.code, c.class_name) for c, _ in items):
                        judged.add(candidate.ref.block_id)
                        more = missing_distribution(record, corpus, candidate.code, pins)
                        if more and more not in requirements and round_ + 1 < _ROUNDS:
                            later.setdefault(tuple(sorted({*requirements, more})), []).append((candidate, record))
                            continue
                        done += 1
                        if retry is not None and not record.ok and record.code in RETRY_CODES:
                            retry.append(Retry(candidate, record, requirements))
                        else:
                            settle(candidate.verdict(explain_corpus_import(record, corpus)).noted(environment=requirements))
                            rescued += record.ok
                        if progress:
                            progress("environments", done, len(waiting))
            except ValidatorUnavailable as e:
                # what pip installed there broke torch, or a worker ended before it was ready: the
                # blocks keep their first verdict with the reason, and the other environments go on
                failed[" ".join(requirements)] = str(e)
                keep_first([item for item in items if item[0].ref.block_id not in judged], str(e))
        queue = later
    return {"environments": entered, "blocks": len(waiting), "rescued": rescued, "not_installable": failed,
            **({"declared_instead": instead_of} if instead_of else {})}
