"""The tool functions agents call: thin wrappers over the public API that take plain arguments,
return JSON-serialisable dicts, and report every failure as a result (``{"error": ...}``) a model
can read, never as an exception.

Nothing here runs repository or model-written code outside the validator's sandbox, and nothing
writes outside the nnrag home.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any, Callable, TypeVar

import nnrag
from nnrag.workspace import Workspace

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., dict[str, Any]])
MAX_CODE_CHARS = 200_000


def _as_result(fn: F) -> F:
    """Turn any error into a result the model can read and act on."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except nnrag.NnragError as e:
            return {"error": str(e), "kind": type(e).__name__}
        except Exception as e:  # a bug or bad argument must not end the agent's run
            log.exception("tool %s failed", fn.__name__)
            return {"error": f"{type(e).__name__}: {e}", "kind": "internal"}

    return wrapper  # type: ignore[return-value]


class Toolbox:
    """The tools bound to one nnrag home."""

    def __init__(self, home: str | Path | None = None, allow_weak_sandbox: bool = False, warm_gate: bool = False) -> None:
        self.workspace = Workspace.resolve(home)
        self.home = str(self.workspace.home)
        self.allow_weak_sandbox = allow_weak_sandbox  # code from a model runs only under the kernel's confinement
        # a long-lived caller (a server) keeps one gate worker warm: each new one imports torch again
        self.warm_gate = warm_gate
        self._gate: Any = None

    def close(self) -> None:
        """Stop the warm gate worker, if one was started."""
        if self._gate is not None:
            self._gate.close()
            self._gate = None

    @_as_result
    def search_blocks(self, query: str, k: int = 5, source: str | None = None, category: str | None = None) -> dict[str, Any]:
        """Natural-language search over validated blocks."""
        hits = nnrag.search(query, max(1, min(int(k), 50)), source=source or None, category=category or None, home=self.home)
        return {"query": query, "results": [h.to_dict() for h in hits]}

    @_as_result
    def get_spec(self, name_or_id: str) -> dict[str, Any]:
        """The neutral specification of a block: no code."""
        return nnrag.spec(name_or_id, home=self.home).model_dump(mode="json")

    @_as_result
    def get_block_code(self, name_or_id: str) -> dict[str, Any]:
        """The standalone file of a block already in the library."""
        from nnrag.db import connect
        from nnrag.specs.build import find_row

        with connect(self.workspace) as db:
            row = find_row(db.conn, name_or_id)
        block_id, path, status = row["block_id"], row["path"], row["status"]
        if not path:
            return {"error": f"{block_id} has no standalone file (its extraction failed)", "kind": "NotFoundError"}
        code = self.workspace.inside(path).read_text(encoding="utf-8")  # a path from the database stays in the home
        return {"id": block_id, "validated": status == "validated", "code": code[:MAX_CODE_CHARS]}

    @_as_result
    def extract_block(self, name: str, source: str | None = None) -> dict[str, Any]:
        """Extract a discovered block into one standalone file (returned, not written)."""
        ex = nnrag.extract(name, source=source or None, home=self.home)
        d = ex.to_dict()
        d["code"] = str(d["code"])[:MAX_CODE_CHARS]
        return d

    @_as_result
    def validate_code(self, code: str, class_name: str | None = None) -> dict[str, Any]:
        """Run the validator gate (sandboxed) on Python source text."""
        if len(code) > MAX_CODE_CHARS:
            return {"error": f"code is {len(code)} characters; the limit is {MAX_CODE_CHARS}", "kind": "ValueError"}
        from nnrag.validator.sandbox import require_kernel_confinement

        require_kernel_confinement(self.allow_weak_sandbox)
        if self.warm_gate:
            from nnrag.validator.gate import Gate

            if self._gate is None:
                self._gate = Gate(1)
            record = self._gate.check_code(code, class_name or None)
        else:
            record = nnrag.validate(code=code, class_name=class_name or None)
        d = record.to_dict()
        d.pop("traceback", None)
        d["traceback_tail"] = record.traceback[-800:]
        return d

    @_as_result
    def synthesize(self, spec_or_name: str, attempts: int = 3) -> dict[str, Any]:
        """Have the configured LLM implement a block from its neutral spec, gated by the validator."""
        from nnrag.synthesis.llm import resolve
        from nnrag.synthesis.synthesize import synthesize
        from nnrag.specs.model import BlockSpec

        settings = resolve(self.workspace)
        text = spec_or_name.strip()
        spec = BlockSpec.model_validate_json(text) if text.startswith("{") else nnrag.spec(text, home=self.home)
        result = synthesize(spec, settings, self.workspace, max(1, min(int(attempts), 5)),
                            allow_weak_sandbox=self.allow_weak_sandbox)
        return result.to_dict()

    @_as_result
    def find_duplicates(self, name_or_id: str, lemur: bool = False) -> dict[str, Any]:
        """Is this block already in the library, or (``lemur``) in the installed LEMUR's models?"""
        return nnrag.find_duplicates(name_or_id, home=self.home, lemur=bool(lemur)).to_dict()

    @_as_result
    def list_sources(self) -> dict[str, Any]:
        """The indexed sources."""
        from dataclasses import asdict

        return {"sources": [asdict(s) for s in nnrag.sources(home=self.home)]}
