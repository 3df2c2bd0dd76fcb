"""``nnrag serve``: the web view and JSON API of one home."""

from __future__ import annotations

import errno
import ipaddress
from typing import Annotated, Optional

import typer

from .common import HomeOpt, WeakSandboxOpt, app, err, errors, fail


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind; other than loopback, anyone who reaches it can search and validate.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8765,
    allow_host: Annotated[Optional[list[str]], typer.Option(
        "--allow-host", help="Another name clients reach the server by (the loopback names and --host are always "
        "served); requests for any other name are refused.")] = None,
    allow_weak: WeakSandboxOpt = False,
    home: HomeOpt = None,
) -> None:
    """Browse and search the library in a web browser; the same operations as JSON (see /openapi.json)."""
    import uvicorn

    from nnrag.serve import create_app
    from nnrag.workspace import Workspace

    with errors():
        workspace = Workspace.resolve(home)
        if not workspace.index_path.is_file():
            fail(f"no library in {workspace.home}: run `nnrag build` first (or give --home)")
        application = create_app(workspace.home, allow_weak_sandbox=allow_weak, hosts=[host, *(allow_host or [])])
    if not _loopback(host):
        err.print(f"warning: serving on {host}: anyone who can reach it can read the library and run code through the gate",
                  markup=False)
    err.print(f"nnrag serve: http://{host}:{port}/ (library {workspace.home}); Ctrl-C stops", markup=False, highlight=False)
    try:
        uvicorn.run(application, host=host, port=port, log_level="warning")
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            fail(f"port {port} on {host} is in use: give another with --port")
        raise
