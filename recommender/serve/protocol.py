"""uvicorn's HTTP/1.1 protocol with the bounds it lacks: a time limit on reading a request head,
a bound on the connections of a worker, and answers in the server's own shape (JSON with the
security headers) where uvicorn would write a bare text page.

Why not uvicorn's own settings: `limit_concurrency` answers 503 only once a head has arrived, so
clients that never finish a head still hold their sockets, and uvicorn has no head timeout at all.
Here a connection that has not sent a whole head within HEAD_SECONDS gets a 408 and is closed, and
when HEAD_WAITING connections of a worker are all still sending heads, the one waiting longest is
closed to make room: a client that sends its head at once (every browser, every HTTP library) is
never the one that waits longest, so a flood of slow clients cannot keep it out. Past
MAX_CONNECTIONS a worker answers 503 at once (no file descriptor exhausted, no accept loop error).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .security import response_headers

HEAD_SECONDS = (
    10.0  # to send a whole request head (nginx's client_header_timeout is 60 s; ours are tiny)
)
HEAD_WAITING = 256  # connections of a worker still sending their head; past it the oldest is closed
MAX_CONNECTIONS = 1000  # connections of a worker; past it a new one gets 503 and is closed
DESCRIPTORS_KEPT = 100  # file descriptors left for the index, the logs and the background work
HEAD_BYTES = 64 * 1024  # a request head larger than this is refused with 431
LINGER_SECONDS = 1.0  # a refused connection stays half open this long, for the client to read why
LOG_EVERY = 60.0  # seconds between two log lines about refused or timed-out clients
log = logging.getLogger("papers.serve")


def fit_descriptor_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (as far as 65,536), and bound
    the connections under it: running out of descriptors is what made a flood of clients take a
    server down.
    """
    global MAX_CONNECTIONS
    try:
        import resource
    except ImportError:  # not POSIX: keep the bound
        return MAX_CONNECTIONS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY:
        MAX_CONNECTIONS = max(16, min(MAX_CONNECTIONS, soft - DESCRIPTORS_KEPT))
    return MAX_CONNECTIONS


class Refusals:
    """Counts refused and timed-out connections, and logs them at most once every LOG_EVERY
    seconds."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.logged_at = -LOG_EVERY

    def note(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        now = time.monotonic()
        if now - self.logged_at >= LOG_EVERY:
            summary = ", ".join(f"{count} {name}" for name, count in sorted(self.counts.items()))
            log.warning(
                "clients refused since the last note: %s (bounds: %d connections, a head within"
                " %g s)",
                summary,
                MAX_CONNECTIONS,
                HEAD_SECONDS,
            )
            self.counts.clear()
            self.logged_at = now


REFUSALS = Refusals()


class CountInvalidRequests(logging.Filter):
    """uvicorn logs a line per malformed request, which any client can repeat at will: counted
    instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Invalid HTTP request"):
            REFUSALS.note("malformed requests")
            return False
        return True


def quiet_accept_errors(loop, context: dict) -> None:
    """The event loop's error handler: running out of file descriptors while accepting is one line a
    while, not a traceback per accept; every other error as asyncio reports it."""
    message = str(context.get("message", ""))
    if "accept" in message and isinstance(context.get("exception"), OSError):
        REFUSALS.note(f"accept errors ({context['exception'].strerror})")
        return
    loop.default_exception_handler(context)


def raw_response(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 response, `{"error": message}`, with the security headers; the connection
    closes."""
    body = json.dumps({"error": message}).encode()
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}".encode()]
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ] + response_headers("/api/")
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


_REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def quiet_server_errors(loop) -> None:
    """Count (see Refusals) what uvicorn and asyncio would log once per client: accept errors,
    malformed requests. Once per event loop; before the first connection (a burst of connections is
    accepted before any of them is handled)."""
    if loop in QUIETED:
        return
    loop.set_exception_handler(quiet_accept_errors)
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(kind, CountInvalidRequests) for kind in uvicorn_log.filters):
        uvicorn_log.addFilter(CountInvalidRequests())
    QUIETED.add(loop)


QUIETED: weakref.WeakSet = weakref.WeakSet()


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with a head timeout, a connection bound and JSON error answers (see the
    module)."""

    waiting: dict = {}  # per worker process: connection -> when it began waiting for its head
    live: set = set()  # per worker process: connections neither closed nor being closed
    head_timer: asyncio.TimerHandle | None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        quiet_server_errors(self.loop)
        if len(self.live) >= MAX_CONNECTIONS:
            REFUSALS.note("connections over the bound")
            self.refuse(
                503, f"the server has {MAX_CONNECTIONS} connections open: try again in a moment"
            )
            return
        if len(self.waiting) >= HEAD_WAITING:
            oldest = min(self.waiting, key=self.waiting.__getitem__)
            REFUSALS.note("slow request heads closed to make room")
            oldest.refuse(408, "the request head was not sent in time for the connections waiting")
        self.live.add(self)
        self.await_head()

    def await_head(self) -> None:
        """Start the clock for the next request head on this connection."""
        self.waiting[self] = time.monotonic()
        self.head_bytes = 0
        self.head_timer = self.loop.call_later(HEAD_SECONDS, self.head_expired)

    def head_arrived(self) -> None:
        self.waiting.pop(self, None)
        timer = getattr(self, "head_timer", None)
        if timer is not None:
            timer.cancel()
            self.head_timer = None

    def head_expired(self) -> None:
        self.head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            REFUSALS.note("request heads not sent in time")
            self.refuse(408, f"the request head was not sent within {HEAD_SECONDS:g} s")

    def refuse(self, status: int, message: str) -> None:
        self.head_arrived()
        self.live.discard(self)
        self.answer_and_close(raw_response(status, message))

    def answer_and_close(self, response: bytes) -> None:
        """Write a last response, then close: the write side at once (the client reads the answer),
        the connection a moment later (closing with unread request bytes would reset it before the
        client has read the answer)."""
        if self.transport.is_closing():
            return
        self.transport.write(response)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.transport.pause_reading()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self.head_bytes = getattr(self, "head_bytes", 0) + len(data)
            if self.head_bytes > HEAD_BYTES:
                REFUSALS.note("request heads too large")
                self.refuse(
                    431,
                    f"the request head is larger than this server reads ({HEAD_BYTES // 1024} KiB):"
                    " send a shorter address or fewer headers",
                )
                return
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if (
            self.conn.their_state is not h11.IDLE
            or self.cycle is not None
            and not self.cycle.response_complete
        ):
            self.head_arrived()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            # uvicorn's keep-alive timeout closes an idle connection; a trickled next head is ours
            self.head_arrived()
            self.await_head()

    def connection_lost(self, exc) -> None:
        self.head_arrived()
        self.live.discard(self)
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        too_long = "too large" in msg.lower() or "too long" in msg.lower()
        status = 431 if too_long else 400
        self.head_arrived()
        self.live.discard(self)
        text = (
            "the request head is larger than this server reads: send a shorter address or fewer"
            " headers"
            if too_long
            else f"malformed HTTP request ({msg.rstrip('.')}): send HTTP/1.1"
        )
        self.answer_and_close(raw_response(status, text))
