"""Agent tools over the public API: plain functions, LangChain tools, and an MCP server."""

from .functions import Toolbox

__all__ = ["Toolbox"]
