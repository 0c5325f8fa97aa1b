"""The ASGI application: the API under /api, the pages, their guards and error shapes."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from .. import __version__
from ..errors import (
    IndexBusyError, IndexCorruptError, IndexMismatchError, IndexMissingError, InputError, ModelError,
    PaperNotFoundError, RecommenderError,
)
from ..reading.tags import TagStore
from .security import INLINE_STYLE_POLICY, SECURITY_HEADERS, STRICT_POLICY, TOKEN_COOKIE, Access, Refused
from .state import LiveIndex

HERE = Path(__file__).resolve().parent
# How `papers serve` hands its settings to uvicorn's worker processes.
INDEX_VARIABLE, TOKEN_VARIABLE, LOOPBACK_VARIABLE = "PAPERS_SERVE_INDEX", "PAPERS_SERVE_TOKEN", "PAPERS_SERVE_LOOPBACK"
STATUS = [  # the most specific first
    (PaperNotFoundError, 404), (InputError, 400), (IndexMissingError, 503), (IndexBusyError, 503),
    (IndexCorruptError, 503), (IndexMismatchError, 503), (ModelError, 503), (RecommenderError, 500),
]
INLINE_STYLE_PATHS = ("/map", "/docs")
log = logging.getLogger("papers.serve")


def status_of(error: RecommenderError) -> int:
    return next(status for kind, status in STATUS if isinstance(error, kind))


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path == "/api"


def error_response(request: Request, status: int, message: str):
    """{"error": "one line"} for the API; the same line on an HTML page for the pages."""
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=status)
    from .pages import render

    return render(request, "error.html", {"status": status, "message": message}, status=status)


class Guard:
    """Pure ASGI middleware: the Host check on loopback, `?token=` sign-in, and the security headers."""

    def __init__(self, app, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        path = scope["path"]
        policy = INLINE_STYLE_POLICY if path in INLINE_STYLE_PATHS else STRICT_POLICY
        extra = [(b"content-security-policy", policy.encode())] + [
            (name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]

        async def send_guarded(message):
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        if not self.access.host_allowed(host):
            message = f"host '{host[:100]}' is not this server's: open it as http://127.0.0.1 or http://localhost"
            response = (JSONResponse({"error": message}, 400) if path.startswith("/api/")
                        else PlainTextResponse(message, 400))
            return await response(scope, receive, send_guarded)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for name, value in query if name == "token"]
        if given and scope["method"] == "GET":
            if not self.access.token_matches(given[0]):
                response = PlainTextResponse("that token is not this server's: use the URL `papers serve` printed", 403)
                return await response(scope, receive, send_guarded)
            rest = urlencode([(name, value) for name, value in query if name != "token"])
            response = RedirectResponse(path + (f"?{rest}" if rest else ""), status_code=303)
            response.set_cookie(TOKEN_COOKIE, given[0], httponly=True, samesite="strict")
            return await response(scope, receive, send_guarded)
        await self.app(scope, receive, send_guarded)


def create_app(index_dir: str | os.PathLike, token: str | None = None, loopback: bool = True) -> FastAPI:
    """The application over one index (its live version, followed across rebuilds)."""
    from . import api, pages

    app = FastAPI(
        title="papers", version=__version__, docs_url=None, redoc_url=None, openapi_url="/openapi.json",
        description="Find related research papers in one index: the JSON objects `papers ... --format json` prints.",
    )
    app.state.live = LiveIndex(Path(index_dir))
    app.state.tags = TagStore(Path(index_dir))
    app.state.access = Access(token, loopback)
    app.include_router(api.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    swagger = pages.swagger_folder()
    if swagger is not None:
        app.mount("/swagger", StaticFiles(directory=swagger), name="swagger")

    @app.exception_handler(RecommenderError)
    async def library_error(request: Request, error: RecommenderError):
        return error_response(request, status_of(error), str(error))

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused):
        return error_response(request, error.status, error.message)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, error: RequestValidationError):
        return error_response(request, 422, describe_validation(error))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException):
        message = {404: f"no page {request.url.path[:200]}: see /docs for the API, / for the papers",
                   405: f"{request.method} is not allowed on {request.url.path[:200]}"}.get(
            error.status_code, str(error.detail))
        return error_response(request, error.status_code, message)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception):
        log.exception("unexpected error on %s", request.url.path)
        return error_response(request, 500, f"internal error ({type(error).__name__}): the server's log has the details")

    app.add_middleware(Guard, access=app.state.access)
    return app


def describe_validation(error: RequestValidationError) -> str:
    """The first bad parameter and what is wrong with it, on one line."""
    first = error.errors()[0]
    location = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "body")]
    name = location[0] if location else "request"
    given = first.get("input")
    shown = f" (got {given!r:.60})" if isinstance(given, (str, int, float)) else ""
    return f"parameter {name}: {first.get('msg', 'invalid')}{shown}"


def app_from_environment() -> FastAPI:
    """uvicorn's factory in each worker process: the settings `papers serve` put in the environment."""
    return create_app(os.environ[INDEX_VARIABLE], os.environ.get(TOKEN_VARIABLE) or None,
                      os.environ.get(LOOPBACK_VARIABLE, "1") == "1")
