"""nnrag: turn PyTorch repositories into a searchable, executable library of neural-network blocks.

The public API. Importing this package is cheap: torch, LibCST, chromadb and LangChain are
imported only by the functions that need them.

    >>> import nnrag
    >>> report = nnrag.index(["dist:timm"])          # doctest: +SKIP
    >>> [b.path for b in nnrag.blocks("BlurPool*")]  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence

from ._version import __version__
from .errors import ConfigError, IndexStoreError, NnragError, NotFoundError, SourceError
from .workspace import Workspace

if TYPE_CHECKING:
    from .retrieval.catalog import Block, SourceInfo, Stats
    from .retrieval.indexer import IndexReport, ProgressFn
    from .library import BuildReport, Extraction
    from .block_search import Hit, Method, SearchIndex, SyncReport
    from .specs.model import BlockSpec
    from .retrieval.sources import SourceSpec
    from .validator.record import Limits, ValidationRecord
    from .agent.lemur.register import Registration, Setup
    from typing import Callable

PathLike = str | os.PathLike[str]


def resolve_sources(sources: Sequence["str | SourceSpec"] = (), corpus: PathLike | None = None) -> list["SourceSpec"]:
    """Source specifications from strings, a corpus file, or the embedded default corpus."""
    from .retrieval.corpus import load_corpus
    from .retrieval.sources import SourceSpec, default_corpus, parse_source

    specs = [s if isinstance(s, SourceSpec) else parse_source(s) for s in sources]
    if corpus is not None:
        specs.extend(load_corpus(corpus))
    return specs or default_corpus()


def index(
    sources: Sequence["str | SourceSpec"] = (),
    *,
    corpus: PathLike | None = None,
    home: PathLike | None = None,
    workers: int | None = None,
    progress: "ProgressFn | None" = None,
    refresh_all: bool = False,
) -> "IndexReport":
    """Index sources (default: the torch-ecosystem distributions installed beside nnrag).

    ``refresh_all`` re-indexes every source already in the index, with its stored settings,
    besides any given ones.
    """
    from .retrieval.catalog import indexed_specs
    from .retrieval.indexer import index_sources

    workspace = Workspace.resolve(home)
    if refresh_all:
        given = resolve_sources(sources, corpus) if (sources or corpus) else []
        names = {s.name for s in given}
        specs = given + [s for s in indexed_specs(workspace) if s.name not in names]
    else:
        specs = resolve_sources(sources, corpus)
    return index_sources(workspace, specs, workers=workers, progress=progress)


def blocks(
    pattern: str | None = None,
    *,
    source: str | None = None,
    category: str | None = None,
    home: PathLike | None = None,
) -> list["Block"]:
    """Discovered blocks; ``pattern`` is an fnmatch on the class name or ``source/Name``."""
    from .retrieval.catalog import list_blocks

    return list_blocks(Workspace.resolve(home), pattern, source=source, category=category)


def sources(*, home: PathLike | None = None) -> list["SourceInfo"]:
    """The sources in the index."""
    from .retrieval.catalog import list_sources

    return list_sources(Workspace.resolve(home))


def forget(name: str, *, home: PathLike | None = None) -> None:
    """Remove a source and everything indexed from it."""
    from .retrieval.catalog import forget_source

    forget_source(Workspace.resolve(home), name)


def stats(*, home: PathLike | None = None) -> "Stats":
    """Counts per source and category, and file failures by reason."""
    from .retrieval.catalog import index_stats

    return index_stats(Workspace.resolve(home))


def extract(name: str, *, source: str | None = None, home: PathLike | None = None) -> "Extraction":
    """The standalone file of one block (``Name``, ``module.Name`` or ``source:module.Name``)."""
    from .library import extract_block

    return extract_block(Workspace.resolve(home), name, source)


def validate(
    path: PathLike | None = None,
    *,
    code: str | None = None,
    class_name: str | None = None,
    limits: "Limits | None" = None,
) -> "ValidationRecord":
    """Run the gate on a file or on source text: parse, compile, sandboxed import/instantiate/forward/backward."""
    from .validator.gate import Gate

    if (path is None) == (code is None):
        raise ValueError("pass exactly one of path or code")
    with Gate(1, limits) as gate:
        return gate.check_file(path, class_name) if path is not None else gate.check_code(code or "", class_name)


def build(
    sources: Sequence["str | SourceSpec"] = (),
    *,
    corpus: PathLike | None = None,
    names: "set[str] | None" = None,
    limit: int | None = None,
    home: PathLike | None = None,
    workers: int | None = None,
    limits: "Limits | None" = None,
    progress: "ProgressFn | None" = None,
    harvest: bool = True,
    search: bool = True,
    scheduler: str | None = None,
) -> "BuildReport":
    """Index, discover, extract and validate; store every block's file and verdict in the library.

    With no sources, every source already indexed is refreshed (or the default corpus on a new home).
    Blocks that fail on guessed arguments are retried with usage recorded from their source's own
    model factories unless ``harvest`` is False. Then specs and the search index are brought up to
    date unless ``search`` is False. ``scheduler`` (else ``NNRAG_SCHEDULER``, else ``[build]
    scheduler`` in ``HOME/config.toml``) is a Dask scheduler whose workers validate the blocks.
    """
    from .config import build_config
    from .library import build_library
    from .retrieval.catalog import indexed_specs

    workspace = Workspace.resolve(home)
    scheduler = build_config(workspace, scheduler).scheduler
    if sources or corpus is not None:
        specs = resolve_sources(sources, corpus)
    else:
        specs = (indexed_specs(workspace) if workspace.index_path.exists() else []) or resolve_sources()
    indexed = index(specs, home=home, workers=workers, progress=progress)
    built = build_library(
        workspace,
        sources=[s.name for s in indexed.sources], names=names, limit=limit, workers=workers, limits=limits,
        progress=progress, harvest=harvest, scheduler=scheduler,
    )
    if search and not built.interrupted:
        built.search = sync_search(home=home, progress=progress).to_dict()
    return built


def spec(name: str, *, source: str | None = None, home: PathLike | None = None) -> "BlockSpec":
    """The neutral specification of a library block (``Name``, ``module.Name`` or an id)."""
    from .library import open_library
    from .specs.build import spec_for

    workspace = Workspace.resolve(home)
    with open_library(workspace) as store:
        return spec_for(store, workspace, name, source)


def spec_schema() -> dict[str, object]:
    """The JSON Schema of :class:`~nnrag.specs.BlockSpec`."""
    from .specs.model import json_schema

    return json_schema()


_INDEXES: dict[tuple[str, str | None, str | None], "SearchIndex"] = {}


def search_index(*, home: PathLike | None = None, embedder: str | None = None,
                 chroma_url: str | None = None) -> "SearchIndex":
    """The search index of a home; kept per process so the embedding model loads once."""
    from .block_search import SearchIndex

    workspace = Workspace.resolve(home)
    key = (str(workspace.home), embedder, chroma_url)
    if key not in _INDEXES:
        _INDEXES[key] = SearchIndex(workspace, embedder, chroma_url)
    return _INDEXES[key]


def sync_search(*, home: PathLike | None = None, embedder: str | None = None, chroma_url: str | None = None,
                progress: "ProgressFn | None" = None) -> "SyncReport":
    """Bring specs, the lexical index and the vector index up to date with the library."""
    return search_index(home=home, embedder=embedder, chroma_url=chroma_url).sync(progress)


def search(
    query: str,
    k: int = 10,
    *,
    source: str | None = None,
    category: str | None = None,
    validated: bool | None = True,
    method: "Method" = "hybrid",
    home: PathLike | None = None,
    embedder: str | None = None,
    chroma_url: str | None = None,
) -> list["Hit"]:
    """Blocks best matching a natural-language query. ``validated``: True (default) only blocks
    that passed the gate, False only failed ones, None all."""
    index = search_index(home=home, embedder=embedder, chroma_url=chroma_url)
    return index.search(query, k, source=source, category=category, validated=validated, method=method)


def report(*, home: PathLike | None = None) -> "BuildReport":
    """Pass rate, failures by code and per-source figures of the stored library."""
    from .library import library_report

    return library_report(Workspace.resolve(home))


def lemur_register(
    names: Sequence[str] = (),
    *,
    everything: bool = False,
    category: str | None = None,
    dataset: str = "synthetic",
    epochs: int = 1,
    prefix: str = "nnrag",
    lemur_root: PathLike | None = None,
    limit: int | None = None,
    synthesized: bool = False,
    retry: bool = False,
    offline: bool = False,
    timeout_s: float = 900.0,
    home: PathLike | None = None,
    progress: "Callable[[str, int, int, str], None] | None" = None,
) -> "tuple[Setup, list[Registration]]":
    """Adapt validated blocks to LEMUR's model contract, gate them, and train and score them with
    LEMUR's ``check_nn`` (one process per model). Outcomes are recorded; re-runs skip them."""
    from pathlib import Path

    from .agent.lemur.register import register

    return register(Workspace.resolve(home), names, everything=everything, category=category, dataset=dataset,
                    epochs=epochs, prefix=prefix, root=Path(lemur_root) if lemur_root else None, limit=limit,
                    synthesized=synthesized, retry=retry, offline=offline, timeout_s=timeout_s, progress=progress)


def lemur_list(*, prefix: str = "nnrag", lemur_root: PathLike | None = None,
               home: PathLike | None = None) -> list[dict[str, object]]:
    """The models with the prefix in LEMUR's database, read with LEMUR's own ``ab.nn.api.data()``."""
    from pathlib import Path

    from .agent.lemur.register import listed

    return listed(Workspace.resolve(home), prefix, Path(lemur_root) if lemur_root else None)


__all__ = [
    "__version__",
    "Workspace",
    "NnragError",
    "ConfigError",
    "SourceError",
    "IndexStoreError",
    "NotFoundError",
    "resolve_sources",
    "index",
    "blocks",
    "sources",
    "lemur_register",
    "lemur_list",
    "forget",
    "stats",
    "extract",
    "validate",
    "build",
    "report",
    "spec",
    "spec_schema",
    "search",
    "search_index",
    "sync_search",
]
