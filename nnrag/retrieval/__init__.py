"""Corpus sources, the SQLite index, block discovery (and, later, closure and vector search)."""
