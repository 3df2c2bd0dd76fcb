"""The fine-tuning export: one spec -> code example per library block, in leakage-free splits.

The prompt is the block's neutral spec (no code, no provenance); the target is its standalone
file. A split never separates copies: blocks are grouped by the union of their dedup clusters
(every level), their defining source file and their class name, and whole groups are dealt to
the splits in the order of a stable hash of the group and the seed, each to the split furthest
below its share. The same library and seed give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..db import Database
from ..errors import ConfigError
from ..library.records import library_rows
from ..progress import ProgressFn
from ..specs import cache
from ..specs.model import BlockSpec
from ..workspace import Workspace
from .card import dataset_card
from ..curate.clusters import LEVELS, Thresholds, UnionFind
from ..curate.dedup import DedupReport, dedup, signature_version

log = logging.getLogger(__name__)

Format = Literal["messages", "prompt-completion", "alpaca"]
FORMATS: tuple[Format, ...] = ("messages", "prompt-completion", "alpaca")
SPLITS = ("train", "validation", "test")

SYSTEM = ("You write PyTorch code. Given the specification of a neural-network block, reply with one "
          "self-contained Python file that defines it as a torch.nn.Module subclass with the specified "
          "constructor and forward, importing only what it uses.")


@dataclass(frozen=True)
class ExportOptions:
    format: Format = "messages"
    validated_only: bool = True
    licenses: tuple[str, ...] | None = None  # allowed licenses (SPDX ids); None: every known license
    splits: tuple[float, float, float] = (0.8, 0.1, 0.1)
    seed: int = 0
    synthesized: bool = False
    spec_format: Literal["markdown", "json"] = "markdown"
    thresholds: Thresholds = Thresholds()

    def check(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"unknown format {self.format!r}: use one of {', '.join(FORMATS)}")
        if len(self.splits) != 3 or any(f < 0 for f in self.splits) or abs(sum(self.splits) - 1.0) > 1e-6:
            raise ConfigError(f"--splits takes three fractions that sum to 1 (train,validation,test), not {self.splits}")


@dataclass
class ExportReport:
    folder: str
    examples: int
    splits: dict[str, int]
    groups: int
    excluded: dict[str, int]  # reason -> blocks left out
    straddling: dict[str, int]  # level -> copy pairs in two different splits (0 expected)
    files: list[str]
    seconds: float = 0.0
    per_source: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Example:
    id: str  # block id, or block id + "#" + model for a synthesised implementation
    block: str
    kind: str  # block | synthesized
    spec: BlockSpec
    code: str
    meta: dict[str, Any]


def license_allowed(expression: str, allowed: set[str]) -> bool:
    """Whether an SPDX expression is satisfied by the allowed ids (lower case): one ``OR``
    alternative whose ``AND`` parts are all allowed; ``WITH`` exceptions go with their license."""
    for alternative in re.split(r"\s+OR\s+", expression.strip("() ")):
        parts = [re.split(r"\s+WITH\s+", p.strip("() "))[0].lower() for p in re.split(r"\s+AND\s+", alternative)]
        if parts and all(p in allowed for p in parts):
            return True
    return False


def _prompt(spec: BlockSpec, spec_format: str) -> str:
    if spec_format == "json":
        return json.dumps(spec.model_dump(mode="json", exclude={"provenance", "validation", "id"}), indent=2, sort_keys=True)
    return spec.to_markdown(provenance=False)


def _record(example: _Example, fmt: Format, spec_format: str, split: str) -> dict[str, Any]:
    user = _prompt(example.spec, spec_format)
    meta = {**example.meta, "split": split}
    if fmt == "messages":
        return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user},
                             {"role": "assistant", "content": example.code}], "meta": meta}
    if fmt == "prompt-completion":
        return {"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                "completion": [{"role": "assistant", "content": example.code}], "meta": meta}
    return {"instruction": SYSTEM, "input": user, "output": example.code, "meta": meta}


def _fraction(seed: int, group: str) -> float:
    digest = hashlib.sha256(f"{seed}\0{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _assign(group_of: dict[str, str], options: ExportOptions) -> tuple[dict[str, str], list[str]]:
    """Each block's split, whole groups at a time: groups in the order of a stable hash of the
    group and the seed, each to the split furthest below its share of the examples. A group
    larger than half the smallest held-out share goes first, so to train: chained by shared class
    names, one group can hold half a library."""
    sizes = Counter(group_of.values())
    total = len(group_of)
    held_out = [f for f in options.splits[1:] if f > 0]
    limit = min(held_out) * total / 2 if held_out and options.splits[0] > 0 else float("inf")
    large = sorted(g for g, n in sizes.items() if n > limit)
    order = sorted(sizes, key=lambda g: (g not in large, _fraction(options.seed, g), g))
    filled = dict.fromkeys(SPLITS, 0)
    split_of_group: dict[str, str] = {}
    for g in order:
        name = max((n for n, share in zip(SPLITS, options.splits) if share > 0),
                   key=lambda n: options.splits[SPLITS.index(n)] * total - filled[n])
        split_of_group[g] = name
        filled[name] += sizes[g]
    return {block: split_of_group[g] for block, g in group_of.items()}, large


def _cluster_of(report: DedupReport) -> dict[str, dict[str, str]]:
    """Block -> level -> the canonical member of its cluster there."""
    out: dict[str, dict[str, str]] = {}
    for level, clusters in report.clusters.items():
        for c in clusters:
            for member in c.members:
                out.setdefault(member, {})[level] = c.canonical
    return out


def _examples(store: Database, workspace: Workspace, options: ExportOptions,
              clusters: dict[str, dict[str, str]]) -> tuple[list[_Example], Counter[str]]:
    excluded: Counter[str] = Counter()
    rows = {r["block_id"]: r for r in library_rows(store.conn)}
    specs = {b.spec.id: b.spec for b in cache.bundles(store)}
    allowed = {x.lower() for x in options.licenses} if options.licenses else None
    examples: list[_Example] = []
    for block_id, row in rows.items():
        if options.validated_only and row["status"] != "validated":
            excluded["not validated"] += 1
            continue
        if not row["path"]:
            excluded["no standalone file"] += 1
            continue
        license_ = row["license"]
        if not license_ or license_.lower() in ("unknown", "noassertion"):
            excluded["license unknown"] += 1
            continue
        if allowed is not None and not license_allowed(license_, allowed):
            excluded["license not allowed"] += 1
            continue
        spec = specs.get(block_id)
        if spec is None:
            excluded["no spec"] += 1
            continue
        try:
            code = workspace.inside(row["path"]).read_text(encoding="utf-8")
        except (OSError, ValueError, UnicodeDecodeError):
            excluded["file unreadable"] += 1
            continue
        meta = {"id": block_id, "kind": "block", "block_id": block_id, "source": row["source"],
                "origin": spec.provenance.origin, "version": row["version"], "commit": row["git_commit"],
                "path": row["file_path"], "lines": [row["line"], row["end_line"]], "file_sha1": row["file_sha1"],
                "license": license_, "category": row["category"], "class_name": row["name"],
                "validated": row["status"] == "validated", "clusters": {lv: clusters.get(block_id, {}).get(lv) or "" for lv in LEVELS}}
        # no nulls: a loader infers one type per column over all splits, and null is a type of its own
        meta = {k: "" if v is None else v for k, v in meta.items()}
        examples.append(_Example(block_id, block_id, "block", spec, code, meta))
    if options.synthesized:
        chosen = {e.block: e for e in examples}
        for r in store.conn.execute("SELECT spec_id, model, code_path FROM synthesized WHERE ok=1 ORDER BY spec_id, model"):
            base = chosen.get(r["spec_id"])
            if base is None or not r["code_path"]:
                excluded["synthesized without an exported block"] += 1
                continue
            try:
                code = workspace.inside(r["code_path"]).read_text(encoding="utf-8")
            except (OSError, ValueError, UnicodeDecodeError):
                excluded["file unreadable"] += 1
                continue
            meta = {**base.meta, "id": f"{base.block}#{r['model']}", "kind": "synthesized", "model": r["model"]}
            examples.append(_Example(meta["id"], base.block, "synthesized", base.spec, code, meta))
    return sorted(examples, key=lambda e: e.id), excluded


def _groups(examples: list[_Example]) -> dict[str, str]:
    """Example block -> its group: blocks linked by any dedup cluster, defining file or class name."""
    union = UnionFind()
    for e in examples:
        m = e.meta
        union.union(e.block, f"file:{m['source']}:{m['path']}")
        union.union(e.block, f"class:{m['class_name']}")
        for level, canonical in m["clusters"].items():
            if canonical:
                union.union(e.block, f"cluster:{level}:{canonical}")
    return {e.block: union.find(e.block) for e in examples}


def _straddling(examples: list[_Example], split_of: dict[str, str]) -> dict[str, int]:
    """Copy pairs (at each level) whose members landed in different splits."""
    out: dict[str, int] = {}
    for level in LEVELS:
        members: dict[str, list[str]] = {}
        for e in examples:
            if e.kind == "block" and (canonical := e.meta["clusters"].get(level)):
                members.setdefault(canonical, []).append(e.block)
        out[level] = sum(1 for blocks in members.values() for i, a in enumerate(blocks) for b in blocks[i + 1:]
                         if split_of[a] != split_of[b])
    return out


def _write_parquet(path: Path, records: list[dict[str, Any]]) -> bool:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    pq.write_table(pa.Table.from_pylist(records), path, compression="zstd")
    return True


def export(store: Database, workspace: Workspace, folder: Path, options: ExportOptions = ExportOptions(),
           progress: ProgressFn | None = None) -> ExportReport:
    """Write the dataset under ``folder``: ``{train,validation,test}.jsonl`` (and ``.parquet`` when
    pyarrow is installed), ``manifest.json`` and a ``README.md`` dataset card."""
    options.check()
    started = time.perf_counter()
    copies = dedup(store, workspace, options.thresholds, progress=progress)  # of the library as it is now
    cache.refresh(store, workspace, progress=(lambda d, t: progress("specs", d, t)) if progress else None)
    examples, excluded = _examples(store, workspace, options, _cluster_of(copies))
    group_of = _groups(examples)
    split_of, large = _assign(group_of, options)
    by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for e in examples:
        split = split_of[e.block]
        record = _record(e, options.format, options.spec_format, split)
        record["meta"]["group"] = group_of[e.block]
        by_split[split].append(record)
    straddling = _straddling(examples, split_of)
    folder.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    for split, records in by_split.items():
        path = folder / f"{split}.jsonl"
        path.write_text("".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        files.append(path.name)
        if records and _write_parquet(folder / f"{split}.parquet", records):
            files.append(f"{split}.parquet")
    metas = [e.meta for e in examples]
    counts = {
        "splits": {s: len(r) for s, r in by_split.items()},
        "per_source": dict(sorted(Counter(m["source"] for m in metas).items())),
        "per_category": dict(sorted(Counter(m["category"] or "uncategorised" for m in metas).items())),
        "per_license": dict(sorted(Counter(m["license"] for m in metas).items())),
        "per_kind": dict(sorted(Counter(m["kind"] for m in metas).items())),
    }
    manifest = {
        "format": options.format, "spec_format": options.spec_format, "seed": options.seed,
        "split_fractions": dict(zip(SPLITS, options.splits)), "validated_only": options.validated_only,
        "licenses_allowed": list(options.licenses) if options.licenses else "every known license",
        "examples": len(examples), "groups": len(set(group_of.values())), **counts,
        "excluded": dict(sorted(excluded.items())),
        "dedup": {"thresholds": options.thresholds.to_dict(), "signatures": signature_version(), "levels": list(LEVELS)},
        "grouping": "union of dedup clusters (all levels), defining source file and class name",
        "groups_sent_to_train_by_size": {g: n for g, n in sorted(Counter(group_of.values()).items()) if g in large},
        "check": {"copy_pairs_across_splits": straddling, "ok": not any(straddling.values())},
        "files": files,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(dataset_card(manifest, files), encoding="utf-8")
    files += ["manifest.json", "README.md"]
    return ExportReport(str(folder), len(examples), counts["splits"], manifest["groups"], dict(excluded), straddling,
                        files, time.perf_counter() - started, counts["per_source"])
