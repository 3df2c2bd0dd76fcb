"""Compare the libraries of two homes block for block: the figure behind "verdicts unchanged" of a
change that must not alter behaviour (a refactoring). For every block either home holds, its
status, failure code and the SHA-1 of its standalone file; prints the counts and every block that
differs, and exits 1 when any does.

    python -m nnrag.evals.compare_builds HOME_BEFORE HOME_AFTER [--files] [--json]

``--files`` counts a different file as a difference too (by default only the verdict: a change of
the extractor's output that leaves every verdict as it was is reported, not failed)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field

from nnrag.db import connect
from nnrag.workspace import Workspace


@dataclass
class Comparison:
    blocks: int = 0
    passed: tuple[int, int] = (0, 0)
    same_verdict: int = 0
    same_file: int = 0
    only_in: dict[str, list[str]] = field(default_factory=dict)
    verdicts_differ: list[tuple[str, str, str]] = field(default_factory=list)  # block, before, after
    files_differ: list[str] = field(default_factory=list)


def _library(home: str) -> dict[str, tuple[str, str | None, str | None]]:
    with connect(Workspace.resolve(home)) as db:
        return {r["block_id"]: (r["status"], r["code"], r["code_sha1"])
                for r in db.conn.execute("SELECT block_id, status, code, code_sha1 FROM library")}


def compare(before_home: str, after_home: str) -> Comparison:
    before, after = _library(before_home), _library(after_home)
    out = Comparison(blocks=len(before.keys() | after.keys()),
                     passed=(sum(v[0] == "validated" for v in before.values()), sum(v[0] == "validated" for v in after.values())),
                     only_in={"before": sorted(before.keys() - after.keys()), "after": sorted(after.keys() - before.keys())})
    for block in sorted(before.keys() & after.keys()):
        (status_a, code_a, file_a), (status_b, code_b, file_b) = before[block], after[block]
        if (status_a, code_a) == (status_b, code_b):
            out.same_verdict += 1
        else:
            out.verdicts_differ.append((block, f"{status_a} {code_a or ''}".strip(), f"{status_b} {code_b or ''}".strip()))
        if file_a == file_b:
            out.same_file += 1
        else:
            out.files_differ.append(block)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--files", action="store_true", help="a different standalone file counts as a difference")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    c = compare(args.before, args.after)
    differs = bool(c.verdicts_differ or c.only_in["before"] or c.only_in["after"] or (args.files and c.files_differ))
    if args.json:
        print(json.dumps(asdict(c), indent=2))
        return int(differs)
    print(f"blocks {c.blocks}: passing {c.passed[0]} before, {c.passed[1]} after; "
          f"same verdict {c.same_verdict}, same file {c.same_file}")
    for side, blocks in c.only_in.items():
        for block in blocks:
            print(f"only {side}: {block}")
    for block, a, b in c.verdicts_differ:
        print(f"verdict: {block}: {a} -> {b}")
    for block in c.files_differ if args.files else c.files_differ[:20]:
        print(f"file: {block}")
    return int(differs)


if __name__ == "__main__":
    sys.exit(main())
