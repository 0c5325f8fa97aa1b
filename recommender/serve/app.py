"""The ASGI application: the API under /api, the pages, their guards and error shapes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from .. import __version__
from ..errors import (
    IndexBusyError,
    IndexCorruptError,
    IndexMismatchError,
    IndexMissingError,
    InputError,
    ModelError,
    OptionError,
    PaperNotFoundError,
    RecommenderError,
)
from .security import TOKEN_COOKIE, Access, Refused, cookie_name, local_path, response_headers
from .state import FollowedTags, LiveIndex

HERE = Path(__file__).resolve().parent
# How `papers serve` hands its settings to uvicorn's worker processes.
INDEX_VARIABLE, TOKEN_VARIABLE, LOOPBACK_VARIABLE = (
    "PAPERS_SERVE_INDEX",
    "PAPERS_SERVE_TOKEN",
    "PAPERS_SERVE_LOOPBACK",
)
SUPERVISOR_VARIABLE = "PAPERS_SERVE_SUPERVISOR"  # the pid of the --workers supervisor
STATUS = [  # the most specific first
    (PaperNotFoundError, 404),
    (InputError, 400),
    (IndexMissingError, 503),
    (IndexBusyError, 503),
    (IndexCorruptError, 503),
    (IndexMismatchError, 503),
    (ModelError, 503),
    (RecommenderError, 500),
]
log = logging.getLogger("papers.serve")


def status_of(error: RecommenderError) -> int:
    return next(status for kind, status in STATUS if isinstance(error, kind))


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path == "/api"


CLI_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z-]*)")
CLI_COMMAND = re.compile(r"`papers ([a-z-]+)[^`]*`")
API_OF_COMMAND = {"list": "/api/papers", "show": "/api/papers/ID", "info": "/api/info"}


def in_api_words(message: str) -> str:
    """A library message as the server's user reads it: the CLI's options named as the API's
    parameters (`--min-score` is `min_score`), a CLI command as the endpoint that does the same."""
    message = CLI_OPTION.sub(lambda match: "parameter " + match.group(1).replace("-", "_"), message)
    return CLI_COMMAND.sub(lambda match: API_OF_COMMAND.get(match.group(1), "/docs"), message)


def error_response(request: Request, status: int, message: str):
    """{"error": "one line"} for the API; the same line on an HTML page for the pages."""
    message = in_api_words(message)
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=status)
    from .pages import render

    return render(request, "error.html", {"status": status, "message": message}, status=status)


class GuardedSend:
    """A request's `send`, through the guard: the security headers added to the response's start,
    the body left out for HEAD, and whether the response has started."""

    def __init__(self, send, extra: list[tuple[bytes, bytes]], head: bool):
        self.send, self.extra, self.head = send, extra, head
        self.started = False

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.started = True
            message["headers"] = list(message.get("headers", [])) + self.extra
        elif self.head and message["type"] == "http.response.body":
            message = dict(message, body=b"")
        await self.send(message)


class Guard:
    """Pure ASGI middleware, outside everything else (the catch-all 500 handler included): the Host
    check on loopback, `?token=` sign-in, HEAD as GET without a body, the security headers on every
    response, and the answer to a request cut by the end of the shutdown bound."""

    def __init__(self, app, access: Access):
        self.app, self.access = app, access
        self.running: dict[
            asyncio.Task, str
        ] = {}  # what each request in progress is, for the shutdown note

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = response_headers(scope["path"])
        head = scope["method"] == "HEAD"
        if head:  # RFC 9110: HEAD is GET without the body, wherever GET is allowed
            scope = dict(scope, method="GET")
        guarded = GuardedSend(send, extra, head)
        answer = self.refused(scope)
        if answer is None:
            answer = self.signed_in(scope)
        if answer is not None:
            return await answer(scope, receive, guarded)
        await self.run_request(scope, receive, guarded)

    def refused(self, scope) -> PlainTextResponse | JSONResponse | None:
        """The answer to a request for a host that is not this server's, else None."""
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if self.access.host_allowed(host):
            return None
        message = (
            f"host '{host[:100]}' is not this server's: open it as http://127.0.0.1 or"
            " http://localhost"
        )
        return (
            JSONResponse({"error": message}, 400)
            if scope["path"].startswith("/api/")
            else PlainTextResponse(message, 400)
        )

    def signed_in(self, scope) -> PlainTextResponse | RedirectResponse | None:
        """The answer to a GET with `?token=`: the address without it, the token set as a cookie,
        or a refusal of a token that is not this server's; else None."""
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for name, value in query if name == "token"]
        if not given or scope["method"] != "GET":
            return None
        if not self.access.token_matches(given[0]):
            return PlainTextResponse(
                "that token is not this server's: use the URL `papers serve` printed", 403
            )
        rest = urlencode([(name, value) for name, value in query if name != "token"])
        response = RedirectResponse(
            local_path(scope["path"]) + (f"?{rest}" if rest else ""), status_code=303
        )
        response.set_cookie(
            cookie_name(TOKEN_COOKIE, server_port(scope)),
            given[0],
            httponly=True,
            samesite="strict",
        )
        return response

    async def run_request(self, scope, receive, guarded: GuardedSend) -> None:
        """Run the request as a task of its own, so that a stop past the shutdown bound can answer
        for it at once: the thread of a synchronous endpoint cannot be interrupted, and uvicorn's
        cancel would otherwise wait for it and then write a bare "Internal Server Error"."""
        path = scope["path"]
        work = asyncio.ensure_future(self.app(scope, receive, guarded))
        self.running[work] = f"{scope['method']} {path[:200]}"
        work.add_done_callback(lambda task: self.running.pop(task, None))
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            if not guarded.started:
                await JSONResponse(
                    {
                        "error": (
                            "the server stopped before this request finished (it ran past "
                            "the shutdown bound): send it again when the server is back"
                        )
                    },
                    503,
                    headers={"Connection": "close", "Retry-After": "10"},
                )(scope, receive, guarded)
        except (
            Exception
        ) as error:  # the catch-all handler has answered and logged it; else answer here
            if not guarded.started:
                log.error("unexpected error on %s", path, exc_info=error)
                await JSONResponse(
                    {
                        "error": (
                            f"internal error ({type(error).__name__}): the server's log has "
                            "the details"
                        )
                    },
                    500,
                )(scope, receive, guarded)

    def cut(self) -> list[str]:
        """The requests still running (their threads cannot be stopped)."""
        return [name for task, name in self.running.items() if not task.done()]


def server_port(scope) -> int | None:
    server = scope.get("server")
    return server[1] if server else None


class PapersAPI(FastAPI):
    """FastAPI with Guard outermost, so that every response, a 500 too, passes through it."""

    guard: Guard | None = None

    def build_middleware_stack(self):
        self.guard = Guard(super().build_middleware_stack(), self.state.access)
        return self.guard


def create_app(
    index_dir: str | os.PathLike, token: str | None = None, loopback: bool = True
) -> FastAPI:
    """The application over one index (its live version, followed across rebuilds)."""
    from . import api, pages

    app = PapersAPI(
        lifespan=stopping,
        title="papers",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        description=(
            "Find related research papers in one index: the JSON objects `papers ... --format json`"
            " prints."
        ),
    )
    app.state.live = LiveIndex(Path(index_dir))
    app.state.tags = FollowedTags(app.state.live)
    app.state.access = Access(token, loopback)
    app.include_router(api.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    swagger = pages.swagger_folder()
    if swagger is not None:
        app.mount("/swagger", StaticFiles(directory=swagger), name="swagger")

    @app.exception_handler(RecommenderError)
    async def library_error(request: Request, error: RecommenderError):
        if isinstance(error, OptionError) and error.parameter:  # the API's name: `not_` is `not`
            return error_response(
                request, status_of(error), f"parameter {error.parameter.rstrip('_')}: {error}"
            )
        return error_response(request, status_of(error), str(error))

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused):
        return error_response(request, error.status, error.message)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, error: RequestValidationError):
        return error_response(request, 422, describe_validation(error))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException):
        message = {
            404: f"no page {request.url.path[:200]}: see /docs for the API, / for the papers",
            405: f"{request.method} is not allowed on {request.url.path[:200]}",
        }.get(error.status_code, str(error.detail))
        return error_response(request, error.status_code, message)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception):
        log.exception("unexpected error on %s", request.url.path)
        return error_response(
            request,
            500,
            f"internal error ({type(error).__name__}): the server's log has the details",
        )

    return app


@contextlib.asynccontextmanager
async def stopping(app: PapersAPI):
    """At the start, errors of accepting connections counted, not logged one by one. At the end of a
    stop: the background work stopped at once, what was cut said in one line (requests past the
    shutdown bound, the background work), then exit at once rather than wait for their threads."""
    from .protocol import quiet_server_errors

    quiet_server_errors(asyncio.get_running_loop())
    yield
    from .jobs import stop_jobs

    background = stop_jobs()
    cut = app.guard.cut() if app.guard is not None else []
    if cut or background:
        log.error("stopped: %s", stop_note(cut, background))
        for handler in logging.getLogger().handlers + log.handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def stop_note(cut: list[str], background: list[str]) -> str:
    """One line: the requests cut past the shutdown bound, and the background work cut."""
    parts = []
    if cut:
        shown = ", ".join(cut[:5]) + (f" and {len(cut) - 5} more" if len(cut) > 5 else "")
        parts.append(
            f"{len(cut)} request{'s' if len(cut) != 1 else ''} still running past the shutdown"
            f" bound {'were' if len(cut) != 1 else 'was'} cut (answered 503): {shown}"
        )
    if background:
        unique = list(dict.fromkeys(background))
        parts.append(f"background work cut (made again on request): {', '.join(unique)}")
    return "; ".join(parts)


def describe_validation(error: RequestValidationError) -> str:
    """The first bad parameter and what is wrong with it, on one line."""
    first = error.errors()[0]
    location = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "body")]
    name = location[0] if location else "request"
    given = first.get("input")
    shown = f" (got {given!r:.60})" if isinstance(given, (str, int, float)) else ""
    return f"parameter {name}: {first.get('msg', 'invalid')}{shown}"


def app_from_environment() -> FastAPI:
    """uvicorn's factory in each worker process: the settings `papers serve` put in the
    environment."""
    from .protocol import fit_descriptor_limit

    fit_descriptor_limit()
    supervisor = os.environ.get(SUPERVISOR_VARIABLE)
    if supervisor:
        from .supervision import follow_supervisor

        follow_supervisor(int(supervisor))
    return create_app(
        os.environ[INDEX_VARIABLE],
        os.environ.get(TOKEN_VARIABLE) or None,
        os.environ.get(LOOPBACK_VARIABLE, "1") == "1",
    )
