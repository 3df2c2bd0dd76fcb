"""Every table of the nnrag database, its schema version and the ordered migrations to it.

One SQLite file per home (``HOME/index.sqlite3``) holds the index (sources, files, content,
definitions, imports, blocks), the library (standalone files and verdicts), recorded usage,
specs, the lexical search tables, synthesised implementations and LEMUR registrations. No other
module creates a table: a stage reads and writes the tables it owns through the connection
:func:`nnrag.db.connect` gives.
"""

from __future__ import annotations

import sqlite3
from pathlib import PurePath
from typing import Callable

# Lexical search: one FTS5 table per field, so that bm25's term weights (IDF) are per field.
SEARCH_FIELDS = ("name", "module", "doc", "identifiers")
SEARCH_TOKENIZER = "porter unicode61"
NOT_RUN = "not-run"  # the status, and gate version, of a library block extracted but not validated

_INDEX = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    kind TEXT NOT NULL,
    root TEXT,
    module_style TEXT,
    priority INTEGER NOT NULL DEFAULT 1,
    config TEXT NOT NULL DEFAULT '{}',
    version TEXT,
    git_commit TEXT,
    license TEXT,
    note TEXT,
    state TEXT NOT NULL DEFAULT 'new',       -- new | indexing | complete
    indexed_at REAL
);
CREATE TABLE IF NOT EXISTS blobs (sha1 TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    module TEXT,
    sha1 TEXT,
    size INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    lines INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,                    -- ok | error
    reason TEXT,
    message TEXT,
    all_names TEXT,                          -- JSON list from __all__, or NULL
    generated_from TEXT,                     -- the template its header names (a generated module), or NULL
    UNIQUE (source_id, path)
);
CREATE TABLE IF NOT EXISTS definitions (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    qualname TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    lineno INTEGER NOT NULL,
    end_lineno INTEGER NOT NULL,
    cond TEXT NOT NULL DEFAULT '',
    bases TEXT,
    keywords TEXT,
    decorators TEXT,
    docstring TEXT,
    target TEXT,
    forward TEXT,
    methods TEXT,
    abstract TEXT,
    calls TEXT,                      -- class: {method: [names it calls on self on every run]}
    stubs TEXT                       -- class: methods that only raise NotImplementedError
);
CREATE INDEX IF NOT EXISTS definitions_file ON definitions(file_id);
CREATE TABLE IF NOT EXISTS imports (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    module TEXT,
    name TEXT,
    asname TEXT,
    level INTEGER NOT NULL DEFAULT 0,
    lineno INTEGER NOT NULL,
    cond TEXT NOT NULL DEFAULT '',
    scope TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS imports_file ON imports(file_id);
CREATE TABLE IF NOT EXISTS blocks (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    qualname TEXT NOT NULL,                  -- module.Class[.Inner]
    line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    category TEXT NOT NULL,
    bases_chain TEXT NOT NULL,               -- JSON list, the class first, torch.nn.Module last
    UNIQUE (source_id, qualname)
);
CREATE INDEX IF NOT EXISTS blocks_name ON blocks(name);
"""

_LIBRARY = """
CREATE TABLE IF NOT EXISTS library (
    block_id TEXT PRIMARY KEY,       -- source:module.Class
    source TEXT NOT NULL,
    qualname TEXT NOT NULL,
    name TEXT NOT NULL,
    category TEXT,
    class_name TEXT,
    path TEXT,                       -- the standalone file, relative to the home
    code_sha1 TEXT,
    files TEXT,                      -- JSON {path: sha1} of every contributing file
    requirements TEXT,               -- JSON list of PEP 508 strings
    status TEXT NOT NULL,            -- validated | failed | not-run
    stage TEXT,
    code TEXT,                       -- failure code
    message TEXT,
    record TEXT,                     -- JSON validation record
    gate_version TEXT,
    extract_s REAL,
    updated_at REAL
);
CREATE INDEX IF NOT EXISTS library_source ON library(source);
-- covers the search index's check that the library is unchanged (count, newest stamp, sum)
CREATE INDEX IF NOT EXISTS library_stamp ON library(updated_at, gate_version);
-- the SHA-1 of each block's file as made under its source's extraction key in meta ('extraction_keys')
CREATE TABLE IF NOT EXISTS extracted (block_id TEXT PRIMARY KEY, code_sha1 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS harvests (
    source TEXT NOT NULL,
    factory TEXT NOT NULL,                   -- module:function
    stamp TEXT NOT NULL,                     -- source version and module SHA-1 it ran against
    ok INTEGER NOT NULL,
    message TEXT,
    seconds REAL,
    PRIMARY KEY (source, factory)
);
CREATE TABLE IF NOT EXISTS usage (
    source TEXT NOT NULL,
    factory TEXT NOT NULL,
    block TEXT NOT NULL,                     -- module.Qualname
    entries TEXT NOT NULL,                   -- JSON list of {"init": recipe, "call": recipe}
    PRIMARY KEY (source, factory, block)
);
CREATE INDEX IF NOT EXISTS usage_block ON usage(source, block);
"""

_SEARCH = """
CREATE TABLE IF NOT EXISTS specs (
    block_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,          -- what the spec was built from; a new key rebuilds it
    spec TEXT NOT NULL,
    docstring TEXT,
    identifiers TEXT,
    fingerprint TEXT,
    context TEXT,
    notes TEXT,                 -- what the package documents about the config fields the block reads
    comments TEXT,              -- JSON list: the prose of the class's comments and its methods' docstrings
    readme TEXT,                -- what the source's README says of the class
    heading TEXT                -- the comments right above the class in its module
);
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL, text_sha1 TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_sha1)
);
CREATE TABLE IF NOT EXISTS search_state (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS search_keys (block_id TEXT PRIMARY KEY, key TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS search_vectors (block_id TEXT PRIMARY KEY, text_sha1 TEXT NOT NULL);  -- the text each block's vector is of
CREATE TABLE IF NOT EXISTS search_specs (block_id TEXT PRIMARY KEY, spec_key TEXT NOT NULL);  -- the spec each block's search rows are of
""" + "".join(
    f"CREATE VIRTUAL TABLE IF NOT EXISTS search_{f} USING fts5(block_id UNINDEXED, text, tokenize = '{SEARCH_TOKENIZER}');\n"
    for f in SEARCH_FIELDS
)

_ACTIONS = """
CREATE TABLE IF NOT EXISTS synthesized (
    spec_id TEXT NOT NULL,
    model TEXT NOT NULL,
    ok INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    code_path TEXT,
    transcript_path TEXT,
    code TEXT,                -- the gate's failure code of the last attempt, or NULL
    record TEXT,
    params INTEGER,
    original_params INTEGER,
    created_at REAL,
    PRIMARY KEY (spec_id, model)
);
CREATE TABLE IF NOT EXISTS lemur (
    lemur_name TEXT NOT NULL,     -- LEMUR's name: prefix-md5(code)
    block_id TEXT NOT NULL,
    dataset TEXT NOT NULL,
    lemur_root TEXT NOT NULL,
    epochs INTEGER NOT NULL,
    status TEXT NOT NULL,         -- registered | refused | not-adaptable | duplicate | below-floor | failed | timeout
    accuracy REAL,
    accuracy_to_time REAL,
    quality REAL,
    seconds REAL,
    reason TEXT,
    model_path TEXT,
    updated_at REAL,
    PRIMARY KEY (lemur_name, dataset, lemur_root)
);
"""

_CURATE = """
CREATE TABLE IF NOT EXISTS dedup_signatures (
    sha256 TEXT PRIMARY KEY,         -- of the text compared (a standalone file, a LEMUR model file)
    version TEXT NOT NULL,           -- how signatures were computed; another version recomputes
    raw_sha256 TEXT NOT NULL,
    exact_sha256 TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    shingles BLOB NOT NULL,          -- uint32 hashes of the normalised 10-token shingles
    minhash BLOB NOT NULL,           -- uint32 MinHash values of the shingles
    structure TEXT NOT NULL,         -- JSON list of structural features
    structure_minhash BLOB NOT NULL  -- uint32 MinHash values of the features
);
CREATE TABLE IF NOT EXISTS dedup_classes (
    sha256 TEXT PRIMARY KEY,         -- of a file of other code (a LEMUR model file)
    spans TEXT                       -- JSON [[class, first line, last line], ...]; NULL: the file does not parse
);
CREATE TABLE IF NOT EXISTS dedup_clusters (
    level TEXT NOT NULL,             -- raw | exact | near | structural
    block_id TEXT NOT NULL,
    cluster TEXT NOT NULL,           -- the canonical member's block id
    size INTEGER NOT NULL,
    PRIMARY KEY (level, block_id)
);
CREATE INDEX IF NOT EXISTS dedup_clusters_cluster ON dedup_clusters(level, cluster);
CREATE TABLE IF NOT EXISTS dedup_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

TABLES = _INDEX + _LIBRARY + _SEARCH + _ACTIONS + _CURATE

# The module that owns each table (a dotted path under ``nnrag``; its first part is its stage):
# only it writes the table, and only its stage and the stages above it read it
# (``tests/test_layers.py``). ``meta`` is the database's own key-value table, written through
# :func:`nnrag.db.write_meta`. The FTS5 tables ``search_<field>`` belong to the lexical index.
OWNERS: dict[str, str] = {
    "meta": "db",
    **dict.fromkeys(("sources", "blobs", "files", "definitions", "imports", "blocks"), "indexing.store"),
    **dict.fromkeys(("harvests", "usage"), "validator.usage.runs"),
    **dict.fromkeys(("library", "extracted"), "library.records"),
    "specs": "specs.cache",
    **dict.fromkeys(("dedup_signatures", "dedup_clusters", "dedup_classes", "dedup_state"), "curate.dedup"),
    **dict.fromkeys(("embeddings", "search_state"), "retrieval.state"),
    **dict.fromkeys(("search_keys", *(f"search_{f}" for f in SEARCH_FIELDS)), "retrieval.lexical"),
    "search_specs": "retrieval.index",
    "search_vectors": "retrieval.neighbours",
    "synthesized": "synthesis.synthesize",
    "lemur": "lemur.register",
}


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Release 0.1 versioned only the index tables and created the others on first use; every
    table it made has the same columns here, so the step creates the ones a home lacks."""
    conn.executescript(TABLES)


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Dedup's caches (signatures, classes of other code) and clusters."""
    conn.executescript(_CURATE)


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """An index covering the library's change stamps."""
    conn.execute("CREATE INDEX IF NOT EXISTS library_stamp ON library(updated_at, gate_version)")


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    """Each class's self-call graph and its stubs (methods that only raise NotImplementedError):
    a stub the forward reaches through other methods leaves the class abstract. The parser's
    version changes with it, so every source is parsed again and fills them."""
    conn.execute("ALTER TABLE definitions ADD COLUMN calls TEXT")
    conn.execute("ALTER TABLE definitions ADD COLUMN stubs TEXT")


def _v5_to_v6(conn: sqlite3.Connection) -> None:
    """Each block's file as made under the current extraction key: a build over an unchanged corpus
    extracts nothing."""
    conn.execute("CREATE TABLE IF NOT EXISTS extracted (block_id TEXT PRIMARY KEY, code_sha1 TEXT NOT NULL)")


def _v6_to_v7(conn: sqlite3.Connection) -> None:
    """Beside each spec, what its package documents about the config fields the block reads (a
    home that had no specs table got it, with the column, from an earlier step)."""
    if "notes" not in {r[1] for r in conn.execute("PRAGMA table_info(specs)")}:
        conn.execute("ALTER TABLE specs ADD COLUMN notes TEXT")


def _v7_to_v8(conn: sqlite3.Connection) -> None:
    """Beside each spec, the prose of the class's comments (the spec cache's key changes with it,
    so every spec is built again and fills them)."""
    if "comments" not in {r[1] for r in conn.execute("PRAGMA table_info(specs)")}:
        conn.execute("ALTER TABLE specs ADD COLUMN comments TEXT")


def _v8_to_v9(conn: sqlite3.Connection) -> None:
    """Beside each spec, what the source's README says of the class (the spec cache's key changes
    with it, so every spec is built again and fills them)."""
    if "readme" not in {r[1] for r in conn.execute("PRAGMA table_info(specs)")}:
        conn.execute("ALTER TABLE specs ADD COLUMN readme TEXT")


def _v9_to_v10(conn: sqlite3.Connection) -> None:
    """Beside each spec, the comments right above the class (the spec cache's key changes with it,
    so every spec is built again and fills them)."""
    if "heading" not in {r[1] for r in conn.execute("PRAGMA table_info(specs)")}:
        conn.execute("ALTER TABLE specs ADD COLUMN heading TEXT")


def _v10_to_v11(conn: sqlite3.Connection) -> None:
    """Which text's vector each block has, so that a search reads the vectors from the index
    (filled by the next sync, which the search index's new version calls for)."""
    conn.execute("CREATE TABLE IF NOT EXISTS search_vectors (block_id TEXT PRIMARY KEY, text_sha1 TEXT NOT NULL)")


def _v11_to_v12(conn: sqlite3.Connection) -> None:
    """Which spec each block's search rows were made from, so that a sync reads only the blocks
    whose spec changed (empty: the next sync reads every block, as before); vectors cached under
    a model's folder name."""
    conn.execute("CREATE TABLE IF NOT EXISTS search_specs (block_id TEXT PRIMARY KEY, spec_key TEXT NOT NULL)")
    # the embedding cache keys a model named by a path by the path's last part (``vector_key``), so a
    # home moved or copied keeps its tuned model's vectors
    for (model,) in conn.execute("SELECT DISTINCT model FROM embeddings").fetchall():
        if PurePath(model).name not in ("", model):
            conn.execute("UPDATE OR IGNORE embeddings SET model=? WHERE model=?", (PurePath(model).name, model))
            conn.execute("DELETE FROM embeddings WHERE model=?", (model,))


def _v12_to_v13(conn: sqlite3.Connection) -> None:
    """The template a generated module names; the parser's version changes with it, so every source
    is parsed again and fills it."""
    conn.execute("ALTER TABLE files ADD COLUMN generated_from TEXT")


# MIGRATIONS[v] turns a database of version v into one of version v + 1.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5,
                                                               5: _v5_to_v6, 6: _v6_to_v7, 7: _v7_to_v8, 8: _v8_to_v9,
                                                               9: _v9_to_v10, 10: _v10_to_v11,
                                                               11: _v11_to_v12, 12: _v12_to_v13}
# A table or column changes only with a new step above: the version is the one after the last step.
SCHEMA_VERSION = max(MIGRATIONS) + 1
