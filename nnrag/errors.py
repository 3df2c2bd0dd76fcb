"""The error hierarchy of nnrag.

Every error carries a message a user can act on. Errors are plain exceptions with picklable
arguments so they survive being raised in a worker process and re-raised in the parent.
"""

from __future__ import annotations


class NnragError(Exception):
    """Base class of every error nnrag raises on purpose."""


class ConfigError(NnragError):
    """A corpus file, source specification or setting is malformed."""


class SourceError(NnragError):
    """A corpus source cannot be located, fetched or read."""


class IndexStoreError(NnragError):
    """The index database is missing, locked, corrupted or of an unknown schema."""


class NotFoundError(NnragError):
    """A requested block, source or file is not in the index."""


__all__ = ["NnragError", "ConfigError", "SourceError", "IndexStoreError", "NotFoundError"]
