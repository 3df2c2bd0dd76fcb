"""Registration of library blocks as LEMUR models: adapt, check through the gate, look for
duplicates in LEMUR's database, then train and score with LEMUR's own ``check_nn`` in the gate's
sandbox, a fresh confined process per model, and store what LEMUR would save from outside it.
Outcomes are recorded in the index (table ``lemur``), so a re-run skips every model
already tried with the same LEMUR name and an interrupted run resumes where it stopped."""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import LemurError, LemurNotInstalled, NnragError
from ..db import connect
from ..progress import ProgressFn
from ..library.records import library_rows
from ..specs.build import bundle_from_row, find_row
from ..validator.gate import Gate
from ..validator.record import Limits
from ..workspace import Workspace
from . import contract
from .adapter import NotAdaptable, adapt

log = logging.getLogger(__name__)

STATUSES = ("registered", "refused", "not-adaptable", "duplicate", "below-floor", "failed", "timeout")
DEFAULT_PRM = {"lr": 0.01, "momentum": 0.9, "batch": 32, "transform": "nnrag_tensor", "num_workers": 0}
_WHITESPACE = re.compile(r"\s")


@dataclass(frozen=True)
class Registration:
    block_id: str
    lemur_name: str | None
    status: str
    accuracy: float | None = None
    accuracy_to_time: float | None = None
    quality: float | None = None
    seconds: float = 0.0
    reason: str | None = None
    model_path: str | None = None
    skipped: bool = False  # recorded by an earlier run, not tried again

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Setup:
    root: Path
    db: Path
    bootstrapped: bool
    reason: str | None


def lemur_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("ab.nn") is not None


def lemur_name(code: str, prefix: str) -> str:
    """The name LEMUR gives a model: the prefix and the MD5 of the code without whitespace."""
    return f"{prefix}-{_code_id(code)}"


def _code_id(code: str) -> str:
    """LEMUR's id of a code text (``ab.nn.util.Util.uuid4``): MD5 of the text without whitespace."""
    return hashlib.md5(_WHITESPACE.sub("", code).encode()).hexdigest()


def default_root(workspace: Workspace) -> Path:
    return workspace.home / "lemur"


def _run(root: Path, request: dict[str, Any], timeout_s: float, log_path: Path) -> dict[str, Any]:
    """One runner process in the LEMUR root; the whole process group dies at the time limit."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # pylint for LEMUR's quality score
    env.pop("PYTHONPATH", None)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_path = Path(f.name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log_path, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "nnrag.lemur.runner", str(result_path)], cwd=root,
                                    stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
            try:
                proc.communicate(json.dumps(request).encode(), timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return {"ok": False, "kind": "timeout", "message": f"no result within {timeout_s:g} s; process group killed"}
            except BaseException:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
        text = result_path.read_text(encoding="utf-8")
        if not text:
            tail = log_path.read_bytes()[-1500:].decode("utf-8", "replace")
            return {"ok": False, "kind": "failed", "message": f"LEMUR's process exited with {proc.returncode} and no result: {tail}"}
        return json.loads(text)
    finally:
        result_path.unlink(missing_ok=True)


class _Trained(BaseModel):
    """What LEMUR's training in the sandbox sends back: data from a process that ran the model's
    code, checked field by field before anything of it is used."""

    model_config = ConfigDict(extra="forbid")
    ok: bool
    kind: Literal["below-floor"] | None = None
    accuracy: float | None = Field(None, ge=0.0, le=1.0)
    accuracy_to_time: float | None = Field(None, ge=0.0)
    quality: float | None = None
    message: str = Field("", max_length=2000)
    saved: "_Saved | None" = None


class _Saved(BaseModel):
    model_config = ConfigDict(extra="forbid")
    epoch: int = Field(ge=0)
    prm: dict[str, Any]


_Trained.model_rebuild()
# What LEMUR adds to the hyperparameters it was given, in the statistics it saves.
_MEASURED = ("uid", "duration", "accuracy", "train_stat")
_MAX_STATS = 256 * 1024


@dataclass(frozen=True)
class Outcome:
    ok: bool
    kind: str  # a status of STATUSES when not ok
    accuracy: float | None = None
    accuracy_to_time: float | None = None
    quality: float | None = None
    message: str = ""


def _train(gate: Gate, setup: Setup, code: str, name: str, dataset: str, settings: dict[str, Any], prefix: str,
           timeout_s: float) -> Outcome:
    """LEMUR's ``check_nn`` on the model inside the gate's sandbox, then, where LEMUR would store the
    model, LEMUR's own ``save_nn`` here over what came back (the code as text, the hyperparameters
    as given, only the measurements from the sandbox)."""
    request = {"code": code, "dataset": dataset, "prm": settings, "prefix": prefix,
               "epoch_limit_minutes": max(1.0, timeout_s / 60), "root": str(setup.root)}
    limits = Limits.scaled(timeout_s=timeout_s)
    answer = gate.run("nnrag.lemur.runner:train", request, limits, paths=[str(setup.root / "data"), str(setup.root / "db")])
    (setup.root / "logs").mkdir(parents=True, exist_ok=True)
    (setup.root / "logs" / f"{name}.log").write_text(str(answer.get("output") or ""), encoding="utf-8")
    if answer.get("killed") == "timeout":
        return Outcome(False, "timeout", message=f"no result within {timeout_s:g} s; process group killed")
    if not answer.get("ok"):
        why = "; ".join(answer.get("violations") or []) or answer.get("message") or "no result"
        return Outcome(False, "failed", message=f"LEMUR's training in the sandbox failed: {why}")
    try:
        trained = _Trained.model_validate(answer.get("value"))
    except ValidationError as e:
        return Outcome(False, "failed", message=f"LEMUR's training sent back what it cannot have: {e}"[:2000])
    if not trained.ok:
        return Outcome(False, trained.kind or "failed", trained.accuracy, message=trained.message)
    if trained.saved is not None:
        measured = {k: trained.saved.prm[k] for k in _MEASURED if k in trained.saved.prm}
        if len(json.dumps(measured, default=str)) > _MAX_STATS or not isinstance(measured.get("uid", ""), str):
            return Outcome(False, "failed", message="LEMUR's training sent back statistics larger or other than LEMUR's")
        stored = _run(setup.root, {"task": "save", "code": code, "dataset": dataset, "epoch": trained.saved.epoch,
                                   "prm": {**settings, **measured}, "name": name}, 600,
                      setup.root / "logs" / f"{name}.save.log")
        if not stored.get("ok"):
            return Outcome(False, "failed", trained.accuracy, message=f"LEMUR could not save the model: {stored.get('message')}")
    return Outcome(True, "registered", trained.accuracy, trained.accuracy_to_time, trained.quality)


def prepare(root: Path, offline: bool = False) -> Setup:
    """A LEMUR root with a database (LEMUR's own if it can be had) and an ``acc`` metric."""
    if not lemur_installed():
        raise LemurNotInstalled()
    root.mkdir(parents=True, exist_ok=True)
    result = _run(root, {"task": "prepare", "offline": offline}, 600, root / "logs" / "prepare.log")
    if not result.get("ok"):
        raise LemurError(f"LEMUR could not be prepared in {root}: {result.get('message')}")
    if result.get("bootstrapped"):
        log.info("no LEMUR database could be had (%s); created an empty one with LEMUR's init_db in %s",
                    result.get("reason"), result["db"])
    return Setup(root, Path(result["db"]), bool(result.get("bootstrapped")), result.get("reason"))


def _structure(code: str) -> str | None:
    """A hash of the code's syntax tree without docstrings: equal for copies that differ only in
    layout, comments or docstrings."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return hashlib.sha1(ast.dump(tree).encode()).hexdigest()


class Novelty:
    """LEMUR's models, for exact (LEMUR's own code id) and structural duplicate checks."""

    def __init__(self, db: Path) -> None:
        self.exact: dict[str, str] = {}
        self.structural: dict[str, str] = {}
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            rows = conn.execute("SELECT name, code, id FROM nn").fetchall()
            conn.close()
        except sqlite3.Error:
            rows = []
        for name, code, code_id in rows:
            self.exact[code_id] = name
            if (h := _structure(code)) is not None:
                self.structural.setdefault(h, name)

    def duplicate_of(self, code: str) -> str | None:
        found = self.exact.get(_code_id(code))
        if found:
            return f"exact copy of LEMUR model {found}"
        found = self.structural.get(_structure(code) or "")
        return f"same structure as LEMUR model {found}" if found else None


def _candidates(conn: sqlite3.Connection, names: Iterable[str], everything: bool, category: str | None,
                synthesized: bool, source: str | None = None) -> list[tuple[sqlite3.Row, Path | None]]:
    """(library row, synthesized code path or None) for each selected block, in a stable order."""
    rows: list[tuple[sqlite3.Row, Path | None]] = []
    if everything:
        where, args = " WHERE l.status='validated'", ()
        if category:
            where, args = where + " AND l.category=?", (category,)
        rows = [(r, None) for r in library_rows(conn, where, args)]
    else:
        rows = [(find_row(conn, n, source), None) for n in names]
    if synthesized:
        by_id = {r["block_id"]: r for r, _ in rows} if not everything else {r["block_id"]: r for r in library_rows(conn)}
        for spec_id, path in conn.execute("SELECT spec_id, code_path FROM synthesized WHERE ok=1 ORDER BY spec_id, model"):
            if spec_id in by_id and path:
                rows.append((by_id[spec_id], Path(path)))
    return rows


def register(workspace: Workspace, names: Iterable[str] = (), *, everything: bool = False, category: str | None = None,
             dataset: str = "synthetic", epochs: int = 1, prefix: str = "nnrag", root: Path | None = None,
             limit: int | None = None, synthesized: bool = False, retry: bool = False, offline: bool = False,
             timeout_s: float = 900.0, prm: dict[str, Any] | None = None, gate_limits: Limits | None = None,
             source: str | None = None, progress: ProgressFn | None = None) -> tuple[Setup, list[Registration]]:
    """Register blocks as LEMUR models; returns the LEMUR set-up and one outcome per block tried.
    ``source`` picks among blocks of one name in several sources."""
    names = list(names)
    if not everything and not names:
        raise NnragError("name at least one block, or pass --all")
    with connect(workspace) as store:  # names that mean no block fail here, before LEMUR is set up
        selected = _candidates(store.conn, names, everything, category, synthesized, source)
    if limit is not None:
        selected = selected[:limit]
    setup = prepare(root or default_root(workspace), offline)
    novelty = Novelty(setup.db)
    settings = {**DEFAULT_PRM, **(prm or {}), "epoch": epochs}
    out: list[Registration] = []
    models = workspace.home / "lemur-models"
    with connect(workspace) as store, Gate(1, gate_limits) as gate:
        conn = store.conn
        for i, (row, synth_path) in enumerate(selected):
            block_id = row["block_id"] + (" (synthesized)" if synth_path else "")
            if progress:
                progress("register", i, len(selected))
            started = time.perf_counter()
            bundle = bundle_from_row(store, workspace, row)
            code_path = synth_path or workspace.home / row["path"]
            try:
                adapted = adapt(bundle.spec, code_path.read_text(encoding="utf-8"), None if synth_path else row["class_name"])
            except (NotAdaptable, OSError) as e:
                out.append(_record(conn, setup, Registration(block_id, None, "not-adaptable", reason=str(e)), dataset, epochs))
                continue
            name = lemur_name(adapted.code, prefix)
            before = conn.execute("SELECT status, accuracy, accuracy_to_time, quality, seconds, reason, model_path FROM lemur"
                                  " WHERE lemur_name=? AND dataset=? AND lemur_root=?",
                                  (name, dataset, str(setup.root))).fetchone()
            if before and (before["status"] == "registered" or not retry):
                out.append(Registration(block_id, name, **dict(before), skipped=True))
                continue
            path = models / f"{name}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(adapted.code, encoding="utf-8")
            if dup := novelty.duplicate_of(adapted.code):
                out.append(_record(conn, setup, Registration(block_id, name, "duplicate", reason=dup, model_path=str(path),
                                                             seconds=time.perf_counter() - started), dataset, epochs))
                continue
            verdict = contract.check(gate, adapted.code)
            if not verdict.ok:
                reason = f"gate refused at {verdict.stage} ({verdict.code}): {verdict.message}"[:2000]
                out.append(_record(conn, setup, Registration(block_id, name, "refused", reason=reason, model_path=str(path),
                                                             seconds=time.perf_counter() - started), dataset, epochs))
                continue
            outcome = _train(gate, setup, adapted.code, name, dataset, settings, prefix, timeout_s)
            seconds = time.perf_counter() - started
            if outcome.ok:
                reg = Registration(block_id, name, "registered", outcome.accuracy, outcome.accuracy_to_time,
                                   outcome.quality, seconds, model_path=str(path))
            else:
                reg = Registration(block_id, name, outcome.kind, outcome.accuracy, seconds=seconds,
                                   reason=outcome.message[:2000], model_path=str(path))
            out.append(_record(conn, setup, reg, dataset, epochs))
        if progress:
            progress("register", len(selected), len(selected))
    return setup, out


def _record(conn: sqlite3.Connection, setup: Setup, reg: Registration, dataset: str, epochs: int) -> Registration:
    conn.execute("INSERT OR REPLACE INTO lemur (lemur_name, block_id, dataset, lemur_root, epochs, status, accuracy,"
                 " accuracy_to_time, quality, seconds, reason, model_path, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (reg.lemur_name or f"-{reg.block_id}", reg.block_id, dataset, str(setup.root), epochs, reg.status,
                  reg.accuracy, reg.accuracy_to_time, reg.quality, round(reg.seconds, 2), reg.reason, reg.model_path,
                  time.time()))
    return reg


def summarize(results: list[Registration]) -> dict[str, Any]:
    """Outcomes by status, and the median seconds of the models this run trained."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    trained = sorted(r.seconds for r in results
                     if not r.skipped and r.status in ("registered", "below-floor", "failed", "timeout"))
    return {"counts": counts, "median_s": trained[len(trained) // 2] if trained else None}


def listed(workspace: Workspace, prefix: str = "nnrag", root: Path | None = None) -> list[dict[str, Any]]:
    """What LEMUR's own ``ab.nn.api.data()`` holds of the models with the prefix, with the block
    each came from (from nnrag's records)."""
    if not lemur_installed():
        raise LemurNotInstalled()
    root = root or default_root(workspace)
    if not (root / "db" / "ab.nn.db").exists():
        return []
    result = _run(root, {"task": "list", "prefix": prefix}, 600, root / "logs" / "list.log")
    if not result.get("ok"):
        raise LemurError(f"reading LEMUR's database failed: {result.get('message')}")
    with connect(workspace) as store:
        blocks = dict(store.conn.execute("SELECT lemur_name, block_id FROM lemur WHERE status='registered' AND lemur_root=?",
                                         (str(root),)).fetchall())
    return [{**r, "block_id": blocks.get(r["nn"])} for r in result["rows"]]


