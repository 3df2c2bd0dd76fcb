"""Cache keys are derived from code: a changed rule changes its stage's key, a changed comment or
docstring does not, and nor does code the stage never imports."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nnrag.codekeys import PACKAGE, code_key, modules
from nnrag.indexing.discovery import discovery_version
from nnrag.indexing.parse import parser_version
from nnrag.specs import spec_version
from nnrag.validator.record import gate_version


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A copy of the nnrag package to change."""
    copy = tmp_path / "nnrag"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "static", "templates", "data"))
    return copy


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_a_copy_of_the_code_has_the_same_keys(checkout: Path) -> None:
    for roots in (("nnrag.validator",), ("nnrag.specs",), ("nnrag.retrieval",), ("nnrag.indexing.parse",)):
        assert code_key(*roots, base=checkout) == code_key(*roots)
    assert gate_version() == code_key("nnrag.validator") and spec_version() == code_key("nnrag.specs")
    assert parser_version() == code_key("nnrag.indexing.parse") and discovery_version() == code_key("nnrag.indexing.discovery")


def test_a_changed_rule_changes_the_key_of_every_stage_that_imports_it(checkout: Path) -> None:
    before = {r: code_key(r, base=checkout) for r in ("nnrag.validator", "nnrag.specs", "nnrag.indexing.discovery")}
    # a guessing rule of the gate: the nodes of the graph a message-passing layer gets
    _edit(checkout / "validator" / "probing" / "inputs.py", "GRAPH_NODES = 8", "GRAPH_NODES = 9")
    after = {r: code_key(r, base=checkout) for r in before}
    assert after["nnrag.validator"] != before["nnrag.validator"]
    assert after["nnrag.indexing.discovery"] == before["nnrag.indexing.discovery"]  # discovery never imports the gate
    # a module of another stage that the gate imports (how attributes are read) counts for the gate too
    assert "nnrag.indexing.attributes" in modules(("nnrag.validator",), checkout)
    _edit(checkout / "indexing" / "attributes.py", "def ", "def _added_helper():\n    return 1\n\n\ndef ")
    assert code_key("nnrag.validator", base=checkout) != after["nnrag.validator"]


def test_comments_and_docstrings_change_no_key(checkout: Path) -> None:
    before = code_key("nnrag.validator", base=checkout)
    gate = checkout / "validator" / "gate.py"
    text = gate.read_text()
    first_doc = text.index('"""') + 3
    gate.write_text("# a comment that says why\n" + text[:first_doc] + "Reworded. " + text[first_doc:])
    _edit(checkout / "validator" / "probing" / "arguments.py", "\ndef ", "\n\n# a note between functions\ndef ")
    assert code_key("nnrag.validator", base=checkout) == before
    # storage is not what a stage makes: the database's module is left out
    assert not any(m.startswith("nnrag.db") for m in modules(("nnrag.validator", "nnrag.specs"), checkout))


def test_settings_are_part_of_a_key() -> None:
    assert code_key("nnrag.curate.signatures", settings=("128",)) != code_key("nnrag.curate.signatures", settings=("64",))
