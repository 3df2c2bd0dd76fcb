"""Passing blocks that build failing ones: a block that fails on guessed arguments or inputs is
often built and called inside a larger block of its source that passes (a U-Net's up block, given
the skip connections it needs, inside the U-Net; an attention layer given the token shape inside
its transformer). The harvest runs such a block as the gate ran it (see
``nnrag.validator.usage.harvest``), recording how it builds and calls the blocks inside it.

Chosen from the gate's records alone: a passing block whose built submodules include the failing
block's class name, among passing blocks whose standalone file includes the failing class's file.
Passing here means that its forward pass ran; a failed backward pass does not matter.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Iterable

from ..indexing.lookup import BlockRef
from .records import StoredRecord
from ..validator.usage.runs import Passed

_PER_BLOCK = 2  # passing blocks run per failing block, those with the fewest parameters first
_PER_SOURCE = 150  # a run costs about a second of the harvest


def passing_parents(conn: sqlite3.Connection, source: str, failing: Iterable[BlockRef]) -> list[Passed]:
    """The passing blocks of ``source`` to run for the ``failing`` blocks, each once."""
    paths = {r["module"]: r["path"] for r in conn.execute(
        "SELECT f.module, f.path FROM files f JOIN sources s ON s.id = f.source_id WHERE s.name=? AND f.module IS NOT NULL",
        (source,))}
    passing = []
    # the forward ran: validated, or failed at the backward pass only (FlexAttention on the CPU)
    for row in conn.execute(
            "SELECT l.qualname, l.files, l.record, f.module FROM library l JOIN sources s ON s.name = l.source"
            " JOIN blocks b ON b.source_id = s.id AND b.qualname = l.qualname JOIN files f ON f.id = b.file_id"
            " WHERE l.source=? AND l.stage='backward'", (source,)):
        record = StoredRecord.read(row["record"]).gate
        if record is not None and record.recipe and record.submodules:
            passing.append((record.params or 0, row["qualname"], row["module"], set(json.loads(row["files"] or "{}")),
                            set(record.submodules), record.recipe))
    passing.sort(key=lambda p: (p[0], p[1]))
    chosen: dict[str, Passed] = {}
    for ref in failing:
        path = paths.get(ref.module)
        name = ref.name_in_module.split(".")[-1]
        taken = 0
        for _, qualname, module, files, built, recipe in passing:
            if taken == _PER_BLOCK or len(chosen) == _PER_SOURCE:
                break
            if name not in built or path not in files or qualname == ref.qualname:
                continue
            taken += 1
            chosen.setdefault(qualname, Passed(module, qualname[len(module) + 1:], json.dumps(recipe, sort_keys=True)))
    return list(chosen.values())
