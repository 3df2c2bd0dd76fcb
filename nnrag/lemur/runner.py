"""LEMUR's operations, each in a process of its own.

Training runs a model's code, so it runs only confined: :func:`train` is called inside the gate's
sandbox (``Gate.run``), with the candidate's own folder as LEMUR's root, and what LEMUR would save
to its database comes back as data. Everything else runs only LEMUR's own code over its database,
in a plain process with the LEMUR root as current directory: ``python -m nnrag.lemur.runner
RESULT_FILE`` reads one JSON request on stdin and writes one JSON result to RESULT_FILE (LEMUR
prints freely on stdout). LEMUR computes its root from the current directory when first imported,
keeps module state and a file lock, so every operation gets a fresh process. Requests:

- ``{"task": "prepare", "offline": bool}``: make sure LEMUR has a database. LEMUR's own download
  is tried first; only when none can be had is an empty one created with LEMUR's ``init_db``.
  Adds the ``acc`` metric row when the database has none.
- ``{"task": "save", "code", "dataset", "epoch", "prm", "name"}``: LEMUR's ``save_nn`` of a model
  trained in the sandbox (the code is stored as text; nothing of it runs).
- ``{"task": "list", "prefix"}``: LEMUR's ``ab.nn.api.data()`` rows of models with the prefix.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import traceback
from pathlib import Path
from typing import Any

PLUGINS = Path(__file__).parent / "plugins"
TASK = "img-classification"
METRIC = "acc"


def _install_plugins() -> None:
    """nnrag's metric and loaders go after LEMUR's own, so LEMUR's win where both exist."""
    import ab.nn.loader
    import ab.nn.metric

    ab.nn.metric.__path__.append(str(PLUGINS / "metric"))
    ab.nn.loader.__path__.append(str(PLUGINS / "loader"))


def _metric_row(db_file: Path) -> None:
    code = (PLUGINS / "metric" / "acc.py").read_text(encoding="utf-8")
    conn = sqlite3.connect(db_file)
    try:
        if conn.execute("SELECT 1 FROM metric WHERE name=?", (METRIC,)).fetchone() is None:
            conn.execute("INSERT INTO metric (name, code, id) VALUES (?,?,?)",
                         (METRIC, code, hashlib.md5(code.encode()).hexdigest()))
            conn.commit()
    finally:
        conn.close()


class _Offline(Exception):
    """LEMUR's download is not to be tried."""


def prepare(offline: bool) -> dict[str, Any]:
    from ab.nn.util.Const import db_file

    bootstrapped, reason = False, None
    if not db_file.exists():
        try:
            if offline:
                raise _Offline()
            from ab.nn.util.hf.DB_from_HF import db_from_hf

            db_from_hf()
        except Exception as e:  # no network, no Hugging Face: an empty database of LEMUR's own schema
            from ab.nn.util.db.Init import init_db

            init_db()
            bootstrapped = True
            reason = None if isinstance(e, _Offline) else f"{type(e).__name__}: {e}"[:500]
    _metric_row(db_file)
    return {"ok": True, "db": str(db_file), "bootstrapped": bootstrapped, "reason": reason}


_PYLINT_LINE = 120
_PYLINT_OFF = "C0116,C0115,C0114,C0304,C0303,C0305,C0325"  # LEMUR's own choice (ab.nn.util.CodeEval.run_pylint)


def _pylint(file_path: Any) -> list[dict[str, Any]]:
    """LEMUR's code-quality lint, in this process: the sandbox starts no other."""
    import io

    from pylint.lint import Run
    from pylint.reporters import JSONReporter

    out = io.StringIO()
    Run([str(file_path), f"--max-line-length={_PYLINT_LINE}", f"--disable={_PYLINT_OFF}"], reporter=JSONReporter(out),
        exit=False)
    return json.loads(out.getvalue() or "[]")


def _import_without_writing() -> None:
    """LEMUR writes a metric's or a model's code from its database into its installed package
    before importing it, where the file is missing: read-only here. A module that imports already
    (nnrag's plugins, LEMUR's own) is taken as it is."""
    import importlib.util

    import ab.nn.util.db.Util as util

    write_then_import = util.nn_mod

    def nn_mod(*names: str) -> str:
        module = ".".join((*util.to_nn, *names))
        try:
            if importlib.util.find_spec(module) is not None:
                return module
        except ImportError:
            pass
        return write_then_import(*names)

    import ab.nn.util.Train as training  # which took its own name for it (``from ... import *``)

    util.nn_mod = training.nn_mod = nn_mod


def train(request: dict[str, Any]) -> dict[str, Any]:
    """LEMUR's ``check_nn`` on one model, inside the sandbox: the current folder (the candidate's
    own) is LEMUR's root, the data sets and the database of LEMUR's real root (``root``) are seen
    read-only, and LEMUR's save to its database is taken down, not done. Returns the outcome and,
    when LEMUR would have saved the model, the statistics it would have saved (``saved``): data for
    the caller to check and save."""
    root = Path(request["root"])
    if (root / "data").is_dir() and not os.path.lexists("data"):
        os.symlink(root / "data", "data")  # the data sets: read-only beyond this folder
    # LEMUR's database, read-only, in a folder of this one where LEMUR may keep its lock file
    os.makedirs("db", exist_ok=True)
    if (root / "db" / "ab.nn.db").is_file() and not os.path.lexists("db/ab.nn.db"):
        os.symlink(root / "db" / "ab.nn.db", "db/ab.nn.db")
    sys.path.insert(0, os.getcwd())  # LEMUR imports the model under test as out.nn.tmp.<name>
    _install_plugins()
    import ab.nn.api as api
    import ab.nn.util.CodeEval as quality
    import ab.nn.util.db.Write as write
    from ab.nn.util.Exception import AccuracyException

    saved: dict[str, Any] = {}

    def take_down(nn_code: str, task: str, dataset: str, metric: str, epoch: int, prm: dict[str, Any],
                  force_name: str | None = None) -> str | None:
        saved.update(epoch=epoch, prm=dict(prm))
        return force_name

    write.save_nn = take_down
    quality.run_pylint = _pylint
    _import_without_writing()
    try:
        _, accuracy, accuracy_to_time, score = api.check_nn(
            request["code"], TASK, request["dataset"], METRIC, dict(request["prm"]), prefix=request["prefix"],
            save_path=None, epoch_limit_minutes=request.get("epoch_limit_minutes", 10), transform_dir=str(PLUGINS / "transform"))
    except AccuracyException as e:
        return {"ok": False, "kind": "below-floor", "accuracy": e.accuracy, "message": str(e.message)[:2000]}
    return {"ok": True, "accuracy": accuracy, "accuracy_to_time": accuracy_to_time, "quality": score,
            "saved": saved or None}


def save(request: dict[str, Any]) -> dict[str, Any]:
    import ab.nn.util.db.Write as write

    name = write.save_nn(request["code"], TASK, request["dataset"], METRIC, int(request["epoch"]), dict(request["prm"]),
                         force_name=request["name"])
    return {"ok": True, "name": name}


def listing(prefix: str) -> dict[str, Any]:
    _install_plugins()
    import ab.nn.api as api

    api.data.cache_clear()
    frame = api.data()
    rows = [] if frame.empty else frame[frame["nn"].astype(str).str.startswith(prefix + "-")].to_dict("records")
    keep = ("nn", "task", "dataset", "metric", "epoch", "accuracy", "duration")
    return {"ok": True, "rows": [{k: r.get(k) for k in keep} for r in rows]}


def main() -> None:
    result_file = Path(sys.argv[1])
    sys.path.insert(0, os.getcwd())  # LEMUR imports the model under test as out.nn.tmp.<name>
    request = json.loads(sys.stdin.read())
    try:
        task = request["task"]
        if task == "prepare":
            result = prepare(bool(request.get("offline")))
        elif task == "save":
            result = save(request)
        elif task == "list":
            result = listing(request["prefix"])
        else:
            result = {"ok": False, "kind": "error", "message": f"unknown task {task!r}"}
    except BaseException as e:
        result = {"ok": False, "kind": "error", "message": f"{type(e).__name__}: {e}"[:2000],
                  "traceback": traceback.format_exc()[-3000:]}
    result_file.write_text(json.dumps(result, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
