"""The web view and JSON API of one home, as a FastAPI application.

Pages: ``/`` (search with live results and filters), ``/block/{id}`` (spec, file, provenance,
verdict), ``/library`` (figures and the failures table). API under ``/api``: the agent tools'
operations (search, spec, code, validate, sources) plus the block list and the library figures,
described at ``/openapi.json``. Every answer reads the home only through the same lookups the
tools use (a stored path is resolved inside the home); posted code goes through the gate and its
sandbox. Pages load nothing from other hosts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

import nnrag
from nnrag.errors import NnragError, NotFoundError
from nnrag.tools.functions import MAX_CODE_CHARS, Toolbox
from nnrag.workspace import Workspace

from . import views

log = logging.getLogger(__name__)

_HERE = Path(__file__).parent
MAX_BODY_BYTES = 4 * MAX_CODE_CHARS  # JSON escaping may grow code up to ~4x; past this, 413 unread
# a block's status as pages show it: (CSS class, sign, words)
MARKS = {"validated": ("ok", "✓", "passes the gate"), "failed": ("bad", "✗", "fails the gate"),
         "not-run": ("", "·", "not validated yet")}
_STATUS = {"NotFoundError": 404, "AmbiguousBlockError": 409, "ConfigError": 503, "LLMNotConfigured": 503,
           "ValueError": 422, "internal": 500}
State = Literal["validated", "failed", "all"]
_VALIDATED: dict[str, bool | None] = {"validated": True, "failed": False, "all": None}


class ValidateRequest(BaseModel):
    code: str = Field(description="Python source of one nn.Module block (a standalone file)")
    class_name: str | None = Field(None, description="the class to check; default: the file's last nn.Module")


class _BodyLimit:
    """Refuses a request whose declared body is larger than the limit before reading it, and one
    sent in chunks (no declared length) as soon as what arrived passes the limit: the rest is
    never read. A chunked body within the limit is read here and handed on whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: str) -> None:
        response = JSONResponse({"error": f"the request body is {size} bytes; the limit is {self.limit}"},
                                status_code=413)
        await response(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None or scope.get("method") in ("GET", "HEAD"):
            if length is not None and length.isdigit() and int(length) > self.limit:
                await self._refuse(scope, receive, send, f"{int(length):,}")
                return
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._refuse(scope, receive, send, f"more than {self.limit:,}")
                return
            if not message.get("more_body"):
                break
        handed = False

        async def whole() -> Any:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, whole, send)


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def host_name(header: str) -> str:
    """The name of a ``Host`` header without its port (``[::1]:8765`` -> ``::1``), lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class _HostCheck:
    """Answers only requests addressed to a name it serves: a page on another site that a DNS
    rebinding points at this address still sends its own name, and is refused."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if host_name(header) not in self.hosts:
                response = JSONResponse({"error": f"this server answers requests for {', '.join(sorted(self.hosts))}, "
                                                  f"not {header[:100]!r}"}, status_code=421)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _answer(result: dict[str, Any]) -> dict[str, Any]:
    """A tool's result, or its error as the HTTP status its kind means."""
    if "error" in result:
        raise HTTPException(_STATUS.get(str(result.get("kind")), 400), detail=result["error"])
    return result


def create_app(home: str | Path | None = None, *, allow_weak_sandbox: bool = False,
               hosts: Sequence[str] = ()) -> FastAPI:
    """The application for one home, answering requests addressed to the loopback names and
    ``hosts``. Validation starts one warm gate worker on first use."""
    workspace = Workspace.resolve(home)
    tools = Toolbox(workspace.home, allow_weak_sandbox=allow_weak_sandbox, warm_gate=True)
    search_lock, gate_lock = threading.Lock(), threading.Lock()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:  # the frequent words' scores, on a thread of their own: the first queries meet them read
            nnrag.search_index(home=workspace.home).read_ahead()
        except NnragError as e:  # a home with no index yet: searches say so when asked
            log.warning("search cannot read ahead: %s", e)
        yield
        tools.close()  # the warm gate worker ends with the server

    app = FastAPI(title="nnrag", version=nnrag.__version__, docs_url=None, redoc_url=None,  # their pages load a CDN
                  description="Search, read and validate the neural-network blocks of one nnrag home.", lifespan=lifespan)
    app.add_middleware(_BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(_HostCheck, hosts=frozenset(host_name(h) for h in (*LOOPBACK_NAMES, *hosts)))
    app.mount("/static", StaticFiles(directory=_HERE / "static"), name="static")
    templates = Jinja2Templates(directory=_HERE / "templates")
    templates.env.globals["version"] = nnrag.__version__
    templates.env.globals["marks"] = MARKS

    @app.exception_handler(StarletteHTTPException)  # also the router's own 404 and 405
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Any:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        return templates.TemplateResponse(request, "error.html", {"status": exc.status_code, "message": exc.detail},
                                          status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # only what can be written as JSON: an error may hold the raw input (bytes of a text body)
        detail = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                  for e in exc.errors()]
        first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
        return JSONResponse({"error": f"{'.'.join(first['loc'])}: {first['msg']}", "detail": detail}, status_code=422)

    def _search(q: str, k: int, source: str | None, category: str | None, state: State) -> list[dict[str, Any]]:
        if not q.strip():
            raise HTTPException(422, detail="q: the query is empty")
        with search_lock:  # one index object per home; its sync writes
            hits = nnrag.search(q, k, source=source or None, category=category or None,
                                validated=_VALIDATED[state], home=workspace.home)
        return [h.to_dict() for h in hits]

    # -- the JSON API --------------------------------------------------------------------
    @app.get("/api/search", tags=["api"], summary="Natural-language search over the library")
    def api_search(q: str = Query(..., min_length=1, max_length=1000, description="what the block does"),
                   k: int = Query(10, ge=1, le=50), source: str | None = None, category: str | None = None,
                   state: State = "validated") -> dict[str, Any]:
        return {"query": q, "results": _search(q, k, source, category, state)}

    @app.get("/api/blocks", tags=["api"], summary="Every library block, optionally by status")
    def api_blocks(status: Literal["validated", "failed", "not-run"] | None = None) -> dict[str, Any]:
        return {"blocks": nnrag.library_entries(status, home=workspace.home)}

    @app.get("/api/blocks/{block_id}/spec", tags=["api"], summary="The neutral spec of a block (no code)")
    def api_spec(block_id: str) -> dict[str, Any]:
        return _answer(tools.get_spec(block_id))

    @app.get("/api/blocks/{block_id}/code", tags=["api"], summary="The standalone file of a block")
    def api_code(block_id: str) -> dict[str, Any]:
        return _answer(tools.get_block_code(block_id))

    @app.post("/api/validate", tags=["api"], summary="Run the gate (sandboxed) on posted code")
    def api_validate(request: ValidateRequest = Body(...)) -> dict[str, Any]:
        if len(request.code) > MAX_CODE_CHARS:
            raise HTTPException(413, detail=f"code is {len(request.code)} characters; the limit is {MAX_CODE_CHARS}")
        with gate_lock:  # one warm worker, one candidate at a time
            return _answer(tools.validate_code(request.code, request.class_name))

    @app.get("/api/sources", tags=["api"], summary="The indexed sources")
    def api_sources() -> dict[str, Any]:
        return _answer(tools.list_sources())

    @app.get("/api/library", tags=["api"], summary="Pass rate, per-source figures and failures by code")
    def api_library() -> dict[str, Any]:
        return nnrag.report(home=workspace.home).to_dict()

    # -- pages ---------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page_search(request: Request, q: str = "", source: str = "", category: str = "", state: State = "validated") -> Any:
        hits = _search(q, 20, source, category, state) if q.strip() else []
        return templates.TemplateResponse(request, "search.html", {
            "q": q, "source": source, "category": category, "state": state, "hits": hits,
            **views.facets(workspace)})

    @app.get("/block/{block_id}", response_class=HTMLResponse, include_in_schema=False)
    def page_block(request: Request, block_id: str) -> Any:
        try:
            page = views.block_page(workspace, block_id)
        except NotFoundError as e:
            raise HTTPException(404, detail=str(e)) from e
        return templates.TemplateResponse(request, "block.html", page | {"highlight_css": views.highlight_css()})

    @app.get("/block/{block_id}/download", include_in_schema=False)
    def download(block_id: str) -> PlainTextResponse:
        try:
            page = views.block_page(workspace, block_id)
        except NotFoundError as e:
            raise HTTPException(404, detail=str(e)) from e
        if not page["code"]:
            raise HTTPException(404, detail=f"{block_id} has no standalone file (its extraction failed)")
        return PlainTextResponse(page["code"], media_type="text/x-python",
                                 headers={"Content-Disposition": f'attachment; filename="{page["filename"]}"'})

    @app.get("/library", response_class=HTMLResponse, include_in_schema=False)
    def page_library(request: Request, code: str = "", source: str = "") -> Any:
        return templates.TemplateResponse(request, "library.html", views.library_page(workspace, code, source))

    return app
