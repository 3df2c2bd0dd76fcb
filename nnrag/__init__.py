"""nnrag: turn PyTorch repositories into a searchable, executable library of neural-network blocks.

The public API. Importing this package is cheap: torch, LibCST, chromadb and LangChain are
imported only by the functions that need them.

    >>> import nnrag
    >>> report = nnrag.index(["dist:timm"])          # doctest: +SKIP
    >>> [b.path for b in nnrag.blocks("BlurPool*")]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Callable, Sequence

from ._version import __version__
from .errors import (
    AmbiguousBlockError,
    ConfigError,
    IndexStoreError,
    LLMNotConfigured,
    NnragError,
    NotFoundError,
    SourceError,
    VendorError,
)
from .progress import ProgressFn
from .workspace import Workspace

if TYPE_CHECKING:
    from .agent.agent import AgentResult, Step
    from .curate.dedup import DedupReport
    from .datasets.export import ExportReport, Format
    from .curate.lookup import Duplicates
    from .extraction.block import Extraction
    from .indexing.catalog import Block, SourceInfo, Stats
    from .indexing.indexer import IndexReport
    from .lemur.register import Registration, Setup
    from .library.report import BuildReport
    from .library.vendor import VendorReport
    from .retrieval.index import Hit, Method, SearchIndex, SyncReport
    from .retrieval.tuning import TuneReport
    from .sourcing.spec import SourceSpec
    from .specs.model import BlockSpec
    from .synthesis.llm import LLMSettings
    from .synthesis.synthesize import Attempt, SynthesisResult
    from .validator.record import Limits, ValidationRecord

PathLike = str | os.PathLike[str]


def resolve_sources(sources: Sequence["str | SourceSpec"] = (), corpus: PathLike | None = None) -> list["SourceSpec"]:
    """Source specifications from strings, a corpus file, or the embedded default corpus."""
    from .sourcing.corpus import load_corpus
    from .sourcing.spec import SourceSpec, default_corpus, parse_source

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
    progress: ProgressFn | None = None,
    refresh_all: bool = False,
) -> "IndexReport":
    """Index sources (default: the torch-ecosystem distributions installed beside nnrag).

    ``refresh_all`` re-indexes every source already in the index, with its stored settings,
    besides any given ones.
    """
    from .indexing.catalog import indexed_specs
    from .indexing.indexer import index_sources

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
    from .indexing.catalog import list_blocks

    return list_blocks(Workspace.resolve(home), pattern, source=source, category=category)


def sources(*, home: PathLike | None = None) -> list["SourceInfo"]:
    """The sources in the index."""
    from .indexing.catalog import list_sources

    return list_sources(Workspace.resolve(home))


def forget(name: str, *, home: PathLike | None = None) -> None:
    """Remove a source and everything indexed from it."""
    from .indexing.catalog import forget_source

    forget_source(Workspace.resolve(home), name)


def stats(*, home: PathLike | None = None) -> "Stats":
    """Counts per source and category, and file failures by reason."""
    from .indexing.catalog import index_stats

    return index_stats(Workspace.resolve(home))


def extract(name: str, *, source: str | None = None, prefer: str = "installed",
            home: PathLike | None = None) -> "Extraction":
    """The standalone file of one block (``Name``, ``module.Name`` or ``source:module.Name``).
    ``prefer``: ``installed`` keeps importing a package an installed distribution provides even when
    another indexed source holds it; ``corpus`` copies it from that source."""
    from .extraction.block import extract_block

    return extract_block(Workspace.resolve(home), name, source, prefer)


def vendor(
    names: Sequence[str],
    into: PathLike,
    *,
    package: str | None = None,
    source: str | None = None,
    prefer: str = "installed",
    check: bool = True,
    limits: "Limits | None" = None,
    home: PathLike | None = None,
    progress: ProgressFn | None = None,
) -> "VendorReport":
    """Write blocks into a package of your project: a module per block, one ``_shared.py`` holding
    what several need (written once, imported relatively), ``__init__.py``, ``NOTICE`` and
    ``requirements.txt``. ``into`` is the package folder, or with ``package`` (dotted) the folder
    that holds it. Blocks vendored there before are kept. With ``check``, each block then goes
    through the gate imported from the package."""
    from pathlib import Path

    from .extraction.lending import check_prefer
    from .library.vendor import vendor_blocks

    return vendor_blocks(Workspace.resolve(home), names, Path(into), package=package, source=source,
                         prefer=check_prefer(prefer), check=check, limits=limits, progress=progress)


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
    progress: ProgressFn | None = None,
    harvest: bool = True,
    search: bool = True,
    scheduler: str | None = None,
    prefer: str = "installed",
    requirements: str = "off",
    validate: bool = True,
) -> "BuildReport":
    """Index, discover, extract and validate; store every block's file and verdict in the library.

    With no sources, every source already indexed is refreshed (or the default corpus on a new home).
    Blocks that fail on guessed arguments are retried with usage recorded from their source's own
    model factories unless ``harvest`` is False. Then specs and the search index are brought up to
    date unless ``search`` is False. ``scheduler`` (else ``NNRAG_SCHEDULER``, else ``[build]
    scheduler`` in ``HOME/config.toml``) is a Dask scheduler whose workers validate the blocks.
    ``prefer``: where a package another indexed source provides comes from (see :func:`extract`).
    ``requirements``: ``install`` validates blocks that miss a third-party distribution again in a
    cached environment that has it (pip); ``off`` installs nothing and reports what they wait for.
    Without ``validate`` blocks are stored unjudged (``not-run``) and searchable at once; the next
    build that validates judges them.
    """
    from .config import build_config
    from .indexing.catalog import indexed_specs
    from .library.build import build_library
    from .validator.envs import check_requirements

    from .extraction.lending import check_prefer

    check_prefer(prefer)  # before any indexing
    check_requirements(requirements)
    started = time.perf_counter()
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
        progress=progress, harvest=harvest, scheduler=scheduler, prefer=prefer, requirements=requirements,
        validate=validate,
    )
    if search and not built.interrupted:
        built.search = sync_search(home=home, progress=progress).to_dict()
    built.wall_seconds = round(time.perf_counter() - started, 1)
    return built


def spec(name: str, *, source: str | None = None, home: PathLike | None = None) -> "BlockSpec":
    """The neutral specification of a library block (``Name``, ``module.Name`` or an id)."""
    from .db import connect
    from .specs.build import spec_for

    workspace = Workspace.resolve(home)
    with connect(workspace) as db:
        return spec_for(db, workspace, name, source)


def spec_schema() -> dict[str, object]:
    """The JSON Schema of :class:`~nnrag.specs.BlockSpec`."""
    from .specs.model import json_schema

    return json_schema()


_INDEXES: dict[tuple[str, str | None, str | None], "SearchIndex"] = {}


def search_index(*, home: PathLike | None = None, embedder: str | None = None,
                 chroma_url: str | None = None) -> "SearchIndex":
    """The search index of a home; kept per process so the embedding model loads once."""
    from .retrieval.index import SearchIndex

    workspace = Workspace.resolve(home)
    key = (str(workspace.home), embedder, chroma_url)
    if key not in _INDEXES:
        _INDEXES[key] = SearchIndex(workspace, embedder, chroma_url)
    return _INDEXES[key]


def sync_search(*, home: PathLike | None = None, embedder: str | None = None, chroma_url: str | None = None,
                progress: ProgressFn | None = None) -> "SyncReport":
    """Bring specs, the lexical index and the vector index up to date with the library."""
    return search_index(home=home, embedder=embedder, chroma_url=chroma_url).sync(progress)


def tune_search(*, home: PathLike | None = None, progress: ProgressFn | None = None) -> "TuneReport":
    """Fine-tune the embedder on this library's own descriptions (no queries, no labels) and
    re-embed the library with it; the home's searches use the tuned model from then on (a running
    server from its next query)."""
    from .retrieval.index import SearchIndex
    from .retrieval.tuning import adopt, tune_home

    workspace = Workspace.resolve(home)
    report = tune_home(workspace, progress=progress)
    synced = SearchIndex(workspace, report.model).sync(progress)  # not kept: searches take the model from the home
    adopt(workspace, report.model, synced.blocks)
    return report


def untune_search(*, home: PathLike | None = None, progress: ProgressFn | None = None) -> bool:
    """Go back to the untuned embedder (re-embedding the library with it); False if none was tuned."""
    from .retrieval.embedders import DEFAULT_MODEL
    from .retrieval.index import SearchIndex
    from .retrieval.tuning import reset, tuned_model

    workspace = Workspace.resolve(home)
    if tuned_model(workspace):  # the library embedded with the untuned model before searches switch back
        SearchIndex(workspace, DEFAULT_MODEL).sync(progress)
    return reset(workspace)


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
    from .library.report import library_report

    return library_report(Workspace.resolve(home))


def dedup(
    *,
    home: PathLike | None = None,
    against: PathLike | None = None,
    against_lemur: PathLike | None = None,
    candidates: float = 0.85,
    near: float = 0.90,
    structural: float = 0.90,
    progress: ProgressFn | None = None,
) -> "DedupReport":
    """Copies among the library's blocks at four levels (raw text, exact after formatting, near:
    MinHash-LSH over normalised shingles, structural), stored as clusters with a canonical member.
    ``against`` (a folder of ``.py`` files) and ``against_lemur`` (an ``nn-dataset`` wheel or folder)
    also count the validated blocks that have no copy there."""
    from pathlib import Path

    from .curate.clusters import Thresholds
    from .curate.dedup import dedup as run, read_folder
    from .curate.lemur_code import lemur_models
    from .db import connect

    others: dict[str, dict[str, str]] = {}
    if against is not None:
        if not Path(against).is_dir():
            raise NotFoundError(f"--against {against} is not a folder")
        others[f"folder:{Path(against).name}"] = read_folder(Path(against))
    if against_lemur is not None:
        others["lemur"] = lemur_models(against_lemur)
    workspace = Workspace.resolve(home)
    with connect(workspace) as db:
        return run(db, workspace, Thresholds(candidates, near, structural), others, progress)


def export(
    folder: PathLike,
    *,
    home: PathLike | None = None,
    format: "Format" = "messages",
    validated_only: bool = True,
    licenses: Sequence[str] | None = None,
    splits: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    synthesized: bool = False,
    spec_format: str = "markdown",
    progress: ProgressFn | None = None,
) -> "ExportReport":
    """A fine-tuning dataset of spec -> code pairs under ``folder``, in leakage-free splits, with a
    manifest and a dataset card (see docs/curation.md)."""
    from pathlib import Path

    from .datasets.export import ExportOptions, export as run
    from .db import connect

    options = ExportOptions(format=format, validated_only=validated_only, licenses=tuple(licenses) if licenses else None,
                            splits=tuple(splits), seed=seed, synthesized=synthesized,  # type: ignore[arg-type]
                            spec_format=spec_format)  # type: ignore[arg-type]
    workspace = Workspace.resolve(home)
    with connect(workspace) as db:
        return run(db, workspace, Path(folder), options, progress)


def find_duplicates(name: str, *, home: PathLike | None = None, lemur: PathLike | None | bool = None) -> "Duplicates":
    """Is this block already in the library, or in LEMUR? Its copies at each level. ``lemur`` is an
    ``nn-dataset`` wheel or folder; ``True`` uses the installed nn-dataset's models."""
    from .curate.lemur_code import installed_models, lemur_models
    from .curate.lookup import find_duplicates as run
    from .db import connect

    other = None
    if lemur is True:
        folder = installed_models()
        if folder is None:
            raise NotFoundError("nn-dataset is not installed: give the path of its wheel or model folder")
        other = lemur_models(folder)
    elif lemur:
        other = lemur_models(lemur)
    workspace = Workspace.resolve(home)
    with connect(workspace) as db:
        return run(db, workspace, name, other)


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
    source: str | None = None,
    home: PathLike | None = None,
    progress: ProgressFn | None = None,
) -> "tuple[Setup, list[Registration]]":
    """Adapt validated blocks to LEMUR's model contract, gate them, and train and score them with
    LEMUR's ``check_nn`` in the gate's sandbox. ``source`` picks among blocks of one name in several
    sources. Outcomes are recorded; re-runs skip them."""
    from pathlib import Path

    from .lemur.register import register

    return register(Workspace.resolve(home), names, everything=everything, category=category, dataset=dataset,
                    epochs=epochs, prefix=prefix, root=Path(lemur_root) if lemur_root else None, limit=limit,
                    synthesized=synthesized, retry=retry, offline=offline, timeout_s=timeout_s, source=source,
                    progress=progress)


def lemur_summary(results: "list[Registration]") -> dict[str, object]:
    """Outcomes of a registration run by status, and the median seconds per trained model."""
    from .lemur.register import summarize

    return summarize(results)


def lemur_list(*, prefix: str = "nnrag", lemur_root: PathLike | None = None,
               home: PathLike | None = None) -> list[dict[str, object]]:
    """The models with the prefix in LEMUR's database, read with LEMUR's own ``ab.nn.api.data()``."""
    from pathlib import Path

    from .lemur.register import listed

    return listed(Workspace.resolve(home), prefix, Path(lemur_root) if lemur_root else None)


def library_entries(status: str | None = None, *, home: PathLike | None = None) -> list[dict[str, object]]:
    """Every library block (id, name, source, category, verdict, file, requirements); ``status``:
    ``validated`` or ``failed`` only."""
    from .db import connect
    from .library.records import entries

    with connect(Workspace.resolve(home)) as db:
        return entries(db.conn, status)


def read_names(path: PathLike) -> set[str]:
    """Block names for ``build(names=...)`` from a JSON list or a text file, one per line."""
    from .library.names import read_names as read

    return read(path)


def limits(timeout_s: float | None = None, memory_mb: int | None = None) -> "Limits":
    """The gate's limits per candidate, the defaults where not given (CPU time follows the wall clock)."""
    from .validator.record import Limits

    return Limits.scaled(timeout_s, memory_mb)


def llm_settings(model: str | None = None, base_url: str | None = None, *, home: PathLike | None = None) -> "LLMSettings":
    """The chat model to use: arguments, else the environment, else ``[llm]`` in ``HOME/config.toml``.
    Raises :class:`LLMNotConfigured` naming every setting when none is given."""
    from .synthesis.llm import resolve

    return resolve(Workspace.resolve(home), model, base_url)


def synthesize(
    target: "str | BlockSpec",
    *,
    attempts: int = 3,
    model: str | None = None,
    base_url: str | None = None,
    limits: "Limits | None" = None,
    home: PathLike | None = None,
    on_attempt: "Callable[[Attempt], None] | None" = None,
    allow_weak_sandbox: bool = False,
) -> "SynthesisResult":
    """Have the LLM implement a block from its neutral spec alone; every answer goes through the gate
    and a conformance check, failures go back as diagnostics. ``target``: a spec, a spec JSON file,
    or a library block's name or id."""
    from pathlib import Path

    from .specs.model import BlockSpec
    from .synthesis.synthesize import load_spec, synthesize as run

    workspace = Workspace.resolve(home)
    settings = llm_settings(model, base_url, home=home)
    if isinstance(target, BlockSpec):
        block_spec = target
    elif target.strip().startswith("{"):
        block_spec = BlockSpec.model_validate_json(target)
    elif target.endswith(".json") and Path(target).is_file():
        block_spec = load_spec(Path(target))
    else:
        block_spec = spec(target, home=home)
    return run(block_spec, settings, workspace, attempts, limits, on_attempt=on_attempt,
               allow_weak_sandbox=allow_weak_sandbox)


def synthesize_all(
    *,
    attempts: int = 3,
    category: str | None = None,
    limit: int | None = None,
    model: str | None = None,
    base_url: str | None = None,
    limits: "Limits | None" = None,
    home: PathLike | None = None,
    progress: ProgressFn | None = None,
    allow_weak_sandbox: bool = False,
) -> dict[str, object]:
    """Synthesis for every validated library block (of a category); resumable; pass@1 and pass@attempts."""
    from .synthesis.batch import synthesize_all as run

    settings = llm_settings(model, base_url, home=home)
    return run(Workspace.resolve(home), settings, attempts, limits, category, limit, progress, allow_weak_sandbox)


def ask(
    question: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    max_steps: int = 12,
    home: PathLike | None = None,
    on_step: "Callable[[Step], None] | None" = None,
    allow_weak_sandbox: bool = False,
) -> "AgentResult":
    """Ask the agent: an LLM that searches the library, reads specs and validates code with the block tools."""
    from .agent.agent import run_agent
    from .tools.functions import Toolbox

    settings = llm_settings(model, base_url, home=home)
    return run_agent(question, settings, Toolbox(home, allow_weak_sandbox), on_step, max_steps)


__all__ = [
    "__version__",
    "Workspace",
    "ProgressFn",
    "NnragError",
    "ConfigError",
    "SourceError",
    "IndexStoreError",
    "NotFoundError",
    "AmbiguousBlockError",
    "LLMNotConfigured",
    "VendorError",
    "library_entries",
    "read_names",
    "limits",
    "llm_settings",
    "synthesize",
    "synthesize_all",
    "ask",
    "resolve_sources",
    "index",
    "blocks",
    "sources",
    "lemur_register",
    "lemur_summary",
    "lemur_list",
    "forget",
    "stats",
    "extract",
    "vendor",
    "validate",
    "build",
    "report",
    "spec",
    "spec_schema",
    "search",
    "search_index",
    "sync_search",
    "tune_search",
    "untune_search",
]
