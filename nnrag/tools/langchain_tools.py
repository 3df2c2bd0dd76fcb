"""The toolbox as LangChain tools, each with a pydantic argument schema and a JSON result."""

from __future__ import annotations

import json
from typing import Any, Callable

from pydantic import BaseModel, Field

from .functions import Toolbox


class SearchArgs(BaseModel):
    query: str = Field(description="what the block does, in words")
    k: int = Field(5, ge=1, le=50, description="how many results")
    source: str | None = Field(None, description="only blocks of this source (see list_sources)")
    category: str | None = Field(None, description="only this category, e.g. attention, convolution, loss")


class NameArgs(BaseModel):
    name_or_id: str = Field(description="a block name (BlurPool2d), module.Name, or id (source:module.Name)")


class ExtractArgs(BaseModel):
    name: str = Field(description="a block name, module.Name, or id")
    source: str | None = Field(None, description="the source, when the name is ambiguous")


class ValidateArgs(BaseModel):
    code: str = Field(description="a complete Python file defining an nn.Module subclass")
    class_name: str | None = Field(None, description="the class to check (default: the last nn.Module in the file)")


class SynthesizeArgs(BaseModel):
    spec_or_name: str = Field(description="a block name or id, or a BlockSpec as JSON")
    attempts: int = Field(3, ge=1, le=5, description="model answers allowed, repairs included")


class DuplicatesArgs(BaseModel):
    name_or_id: str = Field(description="a library block name, module.Name, or id")
    lemur: bool = Field(False, description="also look among the models of the installed LEMUR (nn-dataset)")


class NoArgs(BaseModel):
    pass


TOOLS: dict[str, tuple[type[BaseModel], str]] = {
    "search_blocks": (SearchArgs, "Search the block library in natural language; returns ids, names, sources, paths, summaries."),
    "get_spec": (NameArgs, "Get the neutral specification of a block: parameters, shapes, structure, provenance. No code."),
    "get_block_code": (NameArgs, "Get the standalone, validated Python file of a library block."),
    "extract_block": (ExtractArgs, "Extract any discovered block into one standalone file (returned as text)."),
    "validate_code": (ValidateArgs, "Run Python code through the sandboxed validator gate: parse, compile, import, "
                                    "instantiate, forward, backward. Returns the verdict and diagnostics."),
    "find_duplicates": (DuplicatesArgs, "Is this block already in the library (copies of it at the raw, exact, near and "
                                        "structural levels), or in LEMUR? Returns the copies and their level."),
    "list_sources": (NoArgs, "List the indexed source repositories and distributions."),
    "synthesize": (SynthesizeArgs, "Have the configured LLM write a new implementation from a block's neutral spec; "
                                   "the result passes the validator gate and a conformance check, or reports why not."),
}


def _json_tool(fn: Callable[..., dict[str, Any]]) -> Callable[..., str]:
    def call(**kwargs: Any) -> str:
        return json.dumps(fn(**kwargs), default=str)

    return call


def _bad_arguments(error: Exception) -> str:
    return json.dumps({"error": f"invalid arguments: {error}", "kind": "ValidationError"})


def make_tools(toolbox: Toolbox) -> list[Any]:
    from langchain_core.tools import StructuredTool

    return [
        StructuredTool.from_function(func=_json_tool(getattr(toolbox, name)), name=name, description=description,
                                     args_schema=schema, handle_validation_error=_bad_arguments)
        for name, (schema, description) in TOOLS.items()
    ]
