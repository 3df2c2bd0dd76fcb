"""Hostile candidates (tests/hostile/): each is contained, classified, and leaves nothing behind.
Every payload is bounded in time and size, so a failed containment cannot harm the machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nnrag.validator.gate import Gate
from nnrag.validator.record import Limits

HOSTILE = Path(__file__).parent / "hostile"


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


@pytest.fixture(scope="module")
def gate() -> Gate:
    with Gate(1, Limits(timeout_s=15.0, memory_mb=500)) as g:
        yield g  # type: ignore[misc]


@pytest.mark.parametrize("payload, code", [
    ("daemon.py", "sandbox-violation"),
    ("fork_bomb.py", "sandbox-violation"),
    ("grandchildren_memory.py", "memory"),
])
def test_a_hostile_candidate_is_classified_and_leaves_no_process(gate: Gate, payload: str, code: str) -> None:
    record = gate.check_file(HOSTILE / payload)
    assert (record.ok, record.code) == (False, code), record.message
    pids = [int(p) for p in re.findall(r"\b\d{2,7}\b", record.message.split("killed (", 1)[-1])] if "killed (" in record.message else []
    assert not _alive(pids)
    if payload == "daemon.py":
        assert "still running after the check" in record.message and pids
