"""The ``nnrag`` command line: a thin Typer layer over the public API that renders with Rich.
Commands live in one module per area; importing them registers them on the app."""

from __future__ import annotations

import nnrag

from . import curate, lemur, library, llm, search, serve  # noqa: F401  (registers the commands)
from .common import app, err, out


@app.command()
def version() -> None:
    """Print the nnrag version."""
    out.print(nnrag.__version__)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted", style="yellow")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
