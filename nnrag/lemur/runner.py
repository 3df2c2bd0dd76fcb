"""One LEMUR operation in its own process, run with the LEMUR root as current directory.

``python -m nnrag.lemur.runner RESULT_FILE`` reads one JSON request on stdin and writes one
JSON result to RESULT_FILE (LEMUR prints freely on stdout). LEMUR computes its root from the
current directory when first imported, keeps module state and a file lock, so every check gets a
fresh process. Requests:

- ``{"task": "prepare", "offline": bool}``: make sure LEMUR has a database. LEMUR's own download
  is tried first; only when none can be had is an empty one created with LEMUR's ``init_db``.
  Adds the ``acc`` metric row when the database has none.
- ``{"task": "check", "code", "dataset", "prm", "prefix", "epoch_limit_minutes"}``: ``check_nn``.
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


def prepare(offline: bool) -> dict[str, Any]:
    from ab.nn.util.Const import db_file

    bootstrapped, reason = False, None
    if not db_file.exists():
        try:
            if offline:
                raise RuntimeError("offline: LEMUR's database download was not tried")
            from ab.nn.util.hf.DB_from_HF import db_from_hf

            db_from_hf()
        except Exception as e:  # no network, no Hugging Face: an empty database of LEMUR's own schema
            from ab.nn.util.db.Init import init_db

            init_db()
            bootstrapped, reason = True, f"{type(e).__name__}: {e}"[:500]
    _metric_row(db_file)
    return {"ok": True, "db": str(db_file), "bootstrapped": bootstrapped, "reason": reason}


def check(request: dict[str, Any]) -> dict[str, Any]:
    _install_plugins()
    import ab.nn.api as api
    from ab.nn.util.Exception import AccuracyException

    try:
        name, accuracy, accuracy_to_time, quality = api.check_nn(
            request["code"], TASK, request["dataset"], METRIC, dict(request["prm"]), prefix=request["prefix"],
            save_path=None, epoch_limit_minutes=request.get("epoch_limit_minutes", 10), transform_dir=str(PLUGINS / "transform"))
    except AccuracyException as e:
        return {"ok": False, "kind": "below-floor", "accuracy": e.accuracy, "message": str(e.message)[:2000]}
    return {"ok": True, "name": name, "accuracy": accuracy, "accuracy_to_time": accuracy_to_time, "quality": quality}


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
        elif task == "check":
            result = check(request)
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
