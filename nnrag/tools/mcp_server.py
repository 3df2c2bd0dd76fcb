"""`nnrag mcp`: the toolbox served over stdio with the official MCP SDK, for coding agents."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

from .functions import Toolbox
from .langchain_tools import TOOLS


def _flagged(tool: Callable[..., Any]) -> Callable[..., Any]:
    """A toolbox function whose error answer (``{"error", "kind"}``) is raised as the MCP's tool
    error, so that the client sees ``isError`` set and the message with its kind."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(tool)  # keeps the signature the tool's input schema is read from
    def call(*args: Any, **kwargs: Any) -> Any:
        result = tool(*args, **kwargs)
        if isinstance(result, dict) and "error" in result:
            raise ToolError(f"{result.get('kind', 'error')}: {result['error']}")
        return result

    return call


def make_server(home: str | Path | None = None, allow_weak_sandbox: bool = False) -> Any:
    from mcp.server.mcpserver import MCPServer

    from .. import __version__

    toolbox = Toolbox(home, allow_weak_sandbox)
    server = MCPServer("nnrag", version=__version__,
                       instructions="Find, inspect, extract and validate PyTorch neural-network blocks.")
    for name, (_, description) in TOOLS.items():
        server.tool(name=name, description=description, structured_output=True)(_flagged(getattr(toolbox, name)))
    return server


def serve(home: str | Path | None = None, allow_weak_sandbox: bool = False) -> None:
    make_server(home, allow_weak_sandbox).run("stdio")
