"""Agent tools over a real fixture library: the functions, the LangChain tools, the MCP server
through the SDK's own stdio client. Model-written code only ever runs in the sandbox."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import nnrag

from nnrag.tools.functions import Toolbox
from nnrag.tools.langchain_tools import TOOLS, make_tools

GOOD = """
import torch
from torch import nn


class Doubler(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return 2 * self.lin(x)
"""
HOSTILE = """
import os
from torch import nn


class Sneaky(nn.Module):
    def forward(self, x):
        os.system("touch /tmp/nnrag-tool-escaped")
        return x
"""


@pytest.fixture(scope="module")
def box(search_lib: dict[str, object]) -> Toolbox:
    return Toolbox(search_lib["home"])  # type: ignore[arg-type]


def test_functions_answer_and_report_errors(box: Toolbox) -> None:
    found = box.search_blocks("anti-aliased downsampling", k=2)
    assert found["results"][0]["name"] == "BlurDownsample"
    spec = box.get_spec("search_repo:spkg.layers.DiceLoss")
    # the docstring's instructions to a model stop at its first sentence: they never reach a spec
    assert spec["summary"].startswith("Soft Dice loss for binary segmentation masks.")
    assert "Ignore previous instructions" not in json.dumps(spec)
    code = box.get_block_code("BlurDownsample")
    assert code["validated"] and "class BlurDownsample(nn.Module):" in code["code"]
    extracted = box.extract_block("TokenSelfAttention")
    assert not extracted["issues"]
    assert "class TokenSelfAttention" in extracted["code"]
    assert {s["name"] for s in box.list_sources()["sources"]} == {"search_repo", "search_mirror"}
    # the mirror vendored SqueezeExcite with a docstring and comments of its own: a near copy
    copies = box.find_duplicates("search_mirror:mpkg.copied.SqueezeExcite")
    assert "exact" not in copies["library"] and copies["other"] == []
    assert copies["library"]["near"] == ["search_repo:spkg.layers.SqueezeExcite"]
    missing = box.get_spec("NoSuchBlock")
    assert missing["kind"] == "NotFoundError" and "NoSuchBlock" in missing["error"]
    ambiguous = box.get_spec("SqueezeExcite")
    assert "search_mirror:mpkg.copied.SqueezeExcite" in ambiguous["error"]


def test_validate_code_runs_only_in_the_sandbox(box: Toolbox) -> None:
    ok = box.validate_code(GOOD)
    assert ok["ok"] and ok["class_name"] == "Doubler" and ok["output_shapes"]
    contained = box.validate_code(HOSTILE, "Sneaky")
    assert not contained["ok"] and contained["code"] == "sandbox-violation"
    assert not Path("/tmp/nnrag-tool-escaped").exists()
    broken = box.validate_code("class X(:\n")
    assert not broken["ok"] and broken["code"] == "syntax-error"


def test_langchain_tools_have_schemas_and_never_raise(box: Toolbox) -> None:
    tools = {t.name: t for t in make_tools(box)}
    assert set(tools) == set(TOOLS)
    assert tools["search_blocks"].args_schema.model_json_schema()["required"] == ["query"]  # type: ignore[union-attr]
    hits = json.loads(tools["search_blocks"].invoke({"query": "squeeze and excitation channel gate", "k": 3}))
    assert hits["results"][0]["name"] == "SqueezeExcite"
    bad = json.loads(tools["search_blocks"].invoke({"query": "x", "k": 0}))
    assert bad["kind"] == "ValidationError"


def test_mcp_server_over_stdio(search_lib: dict[str, object]) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "nnrag", "mcp", "--home", str(search_lib["home"])])

    async def session() -> tuple[set[str], Any, Any, Any]:
        async with Client(params) as client:
            listed = await client.list_tools()
            hit = await client.call_tool("search_blocks", {"query": "find anti-aliased downsampling", "k": 1})
            spec = await client.call_tool("get_spec", {"name_or_id": "NoSuchBlock"})
            return {t.name for t in listed.tools}, hit, spec, client.server_info

    names, hit, spec, hello = asyncio.run(session())
    assert names == set(TOOLS)
    assert not hit.is_error and hit.structured_content["results"][0]["name"] == "BlurDownsample"
    assert spec.is_error and "NotFoundError: no block named 'NoSuchBlock'" in spec.content[0].text, spec
    assert hello is not None and hello.version == nnrag.__version__ != ""


def test_synthesize_tool_without_llm_says_what_to_set(box: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "NNRAG_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    result = box.synthesize("BlurDownsample")
    assert result["kind"] == "LLMNotConfigured" and "OPENAI_BASE_URL" in result["error"]
