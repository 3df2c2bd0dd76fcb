"""Search over the library: BM25 (SQLite FTS5) and dense vectors (Chroma), fused."""
