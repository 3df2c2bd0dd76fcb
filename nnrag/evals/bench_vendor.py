"""Vendoring figures: ``python -m nnrag.evals.bench_vendor --home HOME [--blocks N] [--seed S]``.

Takes N blocks the library of HOME holds as validated (a seeded sample, every source in
proportion), vendors them into one new package, checks each through the gate imported from that
package, then imports the whole package with ``python -I`` from an empty folder. Prints how many
pass from the package, how many statements were shared, and the package's lines against the sum
of the blocks' standalone files. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nnrag
from nnrag.db import connect
from nnrag.library.records import file_for
from nnrag.workspace import Workspace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, help="a home with a built library")
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    workspace = Workspace.resolve(args.home)
    with connect(workspace) as db:
        rows = [r["block_id"] for r in db.conn.execute("SELECT block_id FROM library WHERE status='validated' ORDER BY block_id")]
    chosen = sorted(random.Random(args.seed).sample(rows, min(args.blocks, len(rows))))
    standalone_lines = sum(file_for(workspace, b).read_text().count("\n") for b in chosen)
    project = Path(tempfile.mkdtemp(prefix="nnrag-vendor-"))
    started = time.perf_counter()
    report = nnrag.vendor(chosen, project, package="bench.blocks", home=args.home)
    seconds = time.perf_counter() - started
    folder = project / "bench" / "blocks"
    package_lines = sum(p.read_text().count("\n") for p in folder.glob("*.py"))
    empty = Path(tempfile.mkdtemp(prefix="nnrag-empty-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(project)!r}); import bench.blocks"],
                          cwd=empty, env=env, capture_output=True, text=True, timeout=600)
    failed = [{"block": b.block_id, "code": b.code, "message": (b.message or "")[:200]} for b in report.blocks if not b.ok]
    print(json.dumps({
        "blocks": len(chosen), "vendored": len(report.blocks), "skipped": report.skipped,
        "pass_from_package": report.passed, "failed": failed, "shared_statements": report.shared,
        "package_lines": package_lines, "standalone_lines": standalone_lines,
        "package_imports_under_python_I": proc.returncode == 0, "import_error": proc.stderr.strip()[-500:],
        "seconds": round(seconds, 1), "folder": str(folder),
    }, indent=2))


if __name__ == "__main__":
    main()
