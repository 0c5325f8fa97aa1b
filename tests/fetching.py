"""A loopback server for `papers fetch` (arXiv's OAI-PMH, OpenReview's notes) on 127.0.0.1 answering
from a script, and the misbehaviours of servers met in the wild: for tests/test_fetch.py,
tests/test_daily_routine.py and the fetch family of scripts/reliability_sweep.py."""

from __future__ import annotations

import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OaiServer:
    """Answers from a script: each request takes the next step ("503", "drop", "fail", a callable
    that answers itself, or a page's body), then `then` for every request after the script. `url` is
    its OAI-PMH endpoint, `base` the address OpenReview's client is given; `requests` what each
    request asked (its query) and its User-Agent."""

    def __init__(self, steps=(), then="fail"):
        self.steps, self.requests, self.then = list(steps), [], then
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                server.requests.append((query, self.headers.get("User-Agent", "")))
                step = server.steps.pop(0) if server.steps else server.then
                if callable(step):  # a misbehaviour of its own: it answers
                    step(self)
                    return
                if step == "drop":
                    self.connection.close()
                    return
                if step in ("503", "fail"):
                    self.send_response(503 if step == "503" else 400)
                    if step == "503":
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                body = step.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True  # a dripping answer never holds up the close
        self.base = f"http://127.0.0.1:{self.http.server_port}"
        self.url = self.base + "/oai"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def queries(self) -> list[dict]:
        """The query of each request, in order."""
        return [query for query, _ in self.requests]

    def close(self):
        self.http.shutdown()
        self.http.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()


def answer(body: str, status: int = 200, headers=()):
    """A step answering `status` with these headers and body."""

    def respond(handler):
        data = body.encode()
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return respond


def dripping(every: float, most: int):
    """A step sending headers, then one byte of a 100,000-byte body every `every` seconds (at most
    `most` bytes: bounded), until the client hangs up."""

    def drip(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        for _ in range(most):
            try:
                handler.wfile.write(b" ")
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(every)

    return drip


def short_body(sent: bytes):
    """A step whose Content-Length (1,000) is larger than the body it sends, `sent`."""

    def respond(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        handler.wfile.write(sent)
        handler.wfile.flush()
        handler.close_connection = True

    return respond
