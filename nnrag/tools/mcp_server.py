"""`nnrag mcp`: the toolbox served over stdio with the official MCP SDK, for coding agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .functions import Toolbox
from .langchain_tools import TOOLS


def make_server(home: str | Path | None = None, allow_weak_sandbox: bool = False) -> Any:
    from mcp.server.mcpserver import MCPServer

    toolbox = Toolbox(home, allow_weak_sandbox)
    server = MCPServer("nnrag", instructions="Find, inspect, extract and validate PyTorch neural-network blocks.")
    for name, (_, description) in TOOLS.items():
        server.tool(name=name, description=description, structured_output=True)(getattr(toolbox, name))
    return server


def serve(home: str | Path | None = None, allow_weak_sandbox: bool = False) -> None:
    make_server(home, allow_weak_sandbox).run("stdio")
