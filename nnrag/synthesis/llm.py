"""Which chat model to use: any OpenAI-compatible endpoint through langchain-openai.

Resolution, first found wins: explicit arguments (``--model``, ``--base-url``), the environment
(``NNRAG_LLM_MODEL``, ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``), then ``HOME/config.toml``:

    [llm]
    model = "qwen2.5-coder-7b-instruct"
    base_url = "http://127.0.0.1:8000/v1"   # vLLM, llama.cpp server, Ollama (.../v1)
    api_key = "unused"                      # local servers accept anything
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..config import table
from ..errors import LLMNotConfigured
from ..workspace import Workspace

_KEYS = ("model", "base_url", "api_key", "temperature", "timeout_s")


@dataclass(frozen=True)
class LLMSettings:
    model: str
    base_url: str | None
    api_key: str
    temperature: float = 0.0
    timeout_s: float = 120.0

    def describe(self) -> str:
        return f"{self.model} at {self.base_url or 'the OpenAI API'}"


def resolve(workspace: Workspace, model: str | None = None, base_url: str | None = None) -> LLMSettings:
    cfg = table(workspace, "llm", _KEYS)
    model = model or os.environ.get("NNRAG_LLM_MODEL") or cfg.get("model")
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or cfg.get("base_url")
    api_key = os.environ.get("OPENAI_API_KEY") or cfg.get("api_key")
    if not model or not (base_url or api_key):
        missing = [n for n, v in (("a model", model), ("an endpoint or API key", base_url or api_key)) if not v]
        raise LLMNotConfigured(
            f"no LLM configured ({' and '.join(missing)} missing). Give a model and an endpoint (--model and "
            "--base-url on the command line, model= and base_url= in Python), or set NNRAG_LLM_MODEL and "
            f"OPENAI_BASE_URL (or OPENAI_API_KEY), or an [llm] table with model, base_url and api_key in "
            f"{workspace.home / 'config.toml'}"
        )
    return LLMSettings(str(model), base_url, str(api_key or "unused"), float(cfg.get("temperature", 0.0)),
                       float(cfg.get("timeout_s", 120.0)))


def chat_model(settings: LLMSettings) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=settings.model, base_url=settings.base_url, api_key=settings.api_key,  # type: ignore[arg-type]
                      temperature=settings.temperature, timeout=settings.timeout_s, max_retries=1)
