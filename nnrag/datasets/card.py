"""The dataset card of an export: a README.md with YAML front matter in the Hugging Face datasets
convention (license, task categories, ``configs``/``data_files``), then what the data is, how it
was split and what was left out, with counts per split, source, category and license."""

from __future__ import annotations

import json
from typing import Any

# SPDX ids as the Hub spells its license field; anything else is "other" with the SPDX id named.
_HUB_LICENSES = {"mit": "mit", "apache-2.0": "apache-2.0", "bsd-3-clause": "bsd-3-clause", "bsd-2-clause": "bsd-2-clause",
                 "bsd": "bsd", "gpl-3.0": "gpl-3.0", "gpl-2.0": "gpl-2.0", "lgpl-3.0": "lgpl-3.0", "mpl-2.0": "mpl-2.0",
                 "cc-by-4.0": "cc-by-4.0", "cc-by-nc-4.0": "cc-by-nc-4.0", "agpl-3.0": "agpl-3.0", "unlicense": "unlicense"}


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML scalar


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "100K<n<1M"


def _table(title: str, counts: dict[str, int]) -> list[str]:
    lines = [f"| {title} | examples |", "| --- | ---: |"]
    lines += [f"| {k} | {v:,} |" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return lines + [""]


def dataset_card(manifest: dict[str, Any], files: list[str]) -> str:
    licenses = sorted(manifest["per_license"])
    hub = {_HUB_LICENSES.get(x.lower(), "other") for x in licenses}
    license_ = hub.pop() if len(hub) == 1 else "other"
    data = "jsonl"
    front = ["---", f"license: {license_}"]
    if license_ == "other":
        front.append(f"license_name: {_q(' AND '.join(licenses) or 'none')}")
    front += ["task_categories:", "- text-generation", "language:", "- en", "tags:", "- code", "- pytorch",
              "- neural-networks", f"size_categories:\n- {_size_category(manifest['examples'])}",
              f"pretty_name: {_q('nnrag blocks: spec to PyTorch code')}", "configs:", "- config_name: default",
              "  data_files:"]
    for split, count in manifest["splits"].items():
        if count:
            front += [f"  - split: {split}", f"    path: {_q(f'{split}.{data}')}"]
    front.append("---")
    check = manifest["check"]
    body = [
        "", "# nnrag blocks: spec to PyTorch code", "",
        "Each example pairs the neutral specification of a neural-network block (what it is, its constructor and "
        "forward signatures, the shapes the validator probed, its submodules and operations; no code) with the "
        "block's standalone Python file, extracted from its source repository by nnrag"
        + (" and checked by its gate: the file imports, builds, runs forward and backward" if manifest["validated_only"] else "")
        + ".", "",
        f"Format: `{manifest['format']}`; the prompt renders the spec as {manifest['spec_format']}. Every record has a "
        "`meta` object: block id, source and origin (distribution and version, or git URL and commit), defining path "
        "and lines, file SHA-1, license, category, dedup clusters and split group.", "",
        "## Splits", "",
        f"{manifest['examples']:,} examples in {manifest['groups']:,} groups, seed {manifest['seed']}. A group is the "
        "union of a block's dedup clusters at every level (exact, near: MinHash-LSH over normalised 10-token shingles, "
        "structural: layer types and hyper-parameters), its defining source file and its class name; whole groups go "
        "to one split (in the order of a stable hash of the group and the seed, each to the split furthest below its "
        "share), so no copy of a test block is in train. A group larger than half the smallest held-out share goes "
        f"to train ({len(manifest['groups_sent_to_train_by_size'])} here).", "",
        f"Copy pairs across splits (computed): {json.dumps(check['copy_pairs_across_splits'], sort_keys=True)} "
        f"({'none' if check['ok'] else 'SOME: see manifest.json'}).", "",
        *_table("split", manifest["splits"]),
        "## Sources", "", *_table("source", manifest["per_source"]),
        "## Categories", "", *_table("category", manifest["per_category"]),
        "## Licenses", "",
        "Each file keeps its source's license; the dataset as a whole is under all of them. "
        "Blocks whose license is unknown or not allowed were left out.", "",
        *_table("license", manifest["per_license"]),
        "## Left out", "", *(_table("reason", manifest["excluded"]) if manifest["excluded"] else ["nothing", ""]),
        "## Loading", "",
        "```python",
        "from datasets import load_dataset",
        "ds = load_dataset(\"json\", data_files={"
        + ", ".join(f'"{s}": "{s}.jsonl"' for s, n in manifest["splits"].items() if n) + "})",
        "```", "",
        f"Files: {', '.join(f'`{f}`' for f in files)}.", "",
    ]
    return "\n".join(front + body)
