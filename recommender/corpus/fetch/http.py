"""HTTP for the fetchers: a User-Agent naming the tool, a delay between requests, retries with
back-off on busy answers (429, 503 and other 5xx, their Retry-After honoured) and dropped
connections, and every wait bounded (`Bounds`): no Retry-After longer than the longest wait, no
answer read for longer than the response deadline (a server sending a byte at a time included),
no fetch running past its total deadline.
"""

from __future__ import annotations

import http.client
import io
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from ... import __version__
from ...errors import LimitError, RecommenderError

USER_AGENT = f"papers-like/{__version__} (papers fetch; https://pypi.org/project/papers-like/)"
RESUMES = "a rerun resumes where this one stopped"


@dataclass(frozen=True)
class Bounds:
    """How long a fetch may wait and how much it may read (each settable on `papers fetch`)."""

    longest_wait: float = 600.0  # the longest pause a server may ask for (Retry-After)
    response_seconds: float = 120.0  # the longest one answer may take, first byte to last
    total_seconds: float = 6 * 3600.0  # the longest a whole fetch may take
    max_pages: int = 10_000
    max_records: int = 1_000_000


@dataclass(frozen=True)
class Service:
    """A service and how it is asked: its address, the seconds between requests, how many times a
    busy answer or a dropped connection is retried, the bounds, who hears of each page and of each
    retry (`notice`), and how a pause is slept."""

    base_url: str
    delay: float
    retries: int = 6
    bounds: Bounds = field(default_factory=Bounds)
    notice: Callable[[str], None] | None = None
    sleep: Callable[[float], None] = time.sleep


class PoliteClient:
    """Requests to one service, one every `delay` seconds, retried with back-off on 429/503 (their
    Retry-After honoured), on 5xx and on dropped connections, within `bounds`."""

    def __init__(self, service: Service):
        self.base_url, self.delay, self.retries, self.notice, self.sleep = (
            service.base_url,
            service.delay,
            service.retries,
            service.notice,
            service.sleep,
        )
        self.bounds = service.bounds
        self.deadline = time.monotonic() + self.bounds.total_seconds
        self.last = 0.0

    def _pause(self, seconds: float) -> None:
        """Sleep `seconds`, unless that passes the fetch's total deadline (then stop)."""
        if time.monotonic() + seconds > self.deadline:
            self._past_deadline()
        if seconds > 0:
            self.sleep(seconds)

    def _past_deadline(self):
        raise LimitError(
            f"the fetch from {self.base_url} took longer than its deadline of"
            f" {self.bounds.total_seconds:g} s: stopped; {RESUMES}",
            "total_seconds",
        )

    def get(self, query: dict, path: str = "") -> bytes:
        """The body of one answer to `query`, after the delay since the last request and any
        retries."""
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(query)}"
        for attempt in range(self.retries + 1):
            self._pause(self.delay - (time.monotonic() - self.last))
            self.last = time.monotonic()
            left = self.deadline - self.last
            if left <= 0:
                self._past_deadline()
            seconds = min(self.bounds.response_seconds, left)
            try:
                body, final = _read(url, seconds)
            except urllib.error.HTTPError as error:
                with error:
                    if error.code not in (429, 500, 502, 503, 504) or attempt == self.retries:
                        raise RecommenderError(
                            f"{self.base_url} answered {error.code} {error.reason}: try again later"
                        ) from None
                    pause = _retry_after(error.headers.get("Retry-After"), attempt, self.delay)
                    if pause > self.bounds.longest_wait:
                        raise LimitError(
                            f"{self.base_url} asks to wait {pause:.0f} s, longer than the longest"
                            f" wait of {self.bounds.longest_wait:g} s: stopped; {RESUMES}",
                            "longest_wait",
                        ) from None
            except _TooSlow:
                if time.monotonic() >= self.deadline:
                    self._past_deadline()
                raise LimitError(
                    f"{self.base_url} took longer than {self.bounds.response_seconds:g} s to send"
                    f" one answer: stopped; {RESUMES}",
                    "response_seconds",
                ) from None
            except (
                urllib.error.URLError,
                http.client.HTTPException,
                ConnectionError,
                TimeoutError,
                OSError,
            ) as error:
                if attempt == self.retries:
                    reason = getattr(error, "reason", None) or _describe(error)
                    raise RecommenderError(
                        f"cannot reach {self.base_url} ({reason}): check the network and try again "
                        f"({RESUMES})"
                    ) from None
                pause = min(_retry_after(None, attempt, self.delay), self.bounds.longest_wait)
            else:
                _check_redirect(url, final, self.base_url)
                return body
            if self.notice is not None:
                self.notice(
                    f"{self.base_url} is busy or dropped the connection: again in {pause:.0f} s"
                )
            self._pause(pause)
        raise AssertionError("unreachable")


def _describe(error: BaseException) -> str:
    if isinstance(error, http.client.IncompleteRead):
        return f"the answer ended after {len(error.partial)} bytes of the length it announced"
    return str(error) or type(error).__name__


def _check_redirect(asked: str, final: str, base_url: str) -> None:
    """A redirect must keep the query (a resumption token, an offset): one that drops it would
    answer the first page again and again."""
    if final and final != asked:
        wanted = urllib.parse.parse_qs(urllib.parse.urlsplit(asked).query)
        got = urllib.parse.parse_qs(urllib.parse.urlsplit(final).query)
        if any(got.get(name) != values for name, values in wanted.items()):
            raise RecommenderError(
                f"{base_url} redirected the request to {final}, which drops part of its query:"
                " the pages cannot be followed; give the service's own address"
            )


class _TooSlow(Exception):
    """An answer took longer than its deadline."""


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read given only the time left until the deadline. `held` is the
    socket's own file, kept open until this one closes (it holds the socket open once urllib has
    let the connection go)."""

    def __init__(self, sock, deadline: float, held):
        super().__init__()
        self.sock, self.deadline, self.held = sock, deadline, held

    def close(self) -> None:
        self.held.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _TooSlow()
        self.sock.settimeout(left)
        try:
            return self.sock.recv_into(buffer)
        except TimeoutError:
            if time.monotonic() >= self.deadline:
                raise _TooSlow() from None
            raise


def _read(url: str, seconds: float) -> tuple[bytes, str]:
    """The body of the answer at `url` and the URL it came from (after redirects), read whole
    within `seconds` (headers included) or _TooSlow."""
    deadline = time.monotonic() + seconds

    class Response(http.client.HTTPResponse):
        def __init__(self, sock, *args, **kwargs):
            super().__init__(sock, *args, **kwargs)
            self.fp = io.BufferedReader(_DeadlineReader(sock, deadline, self.fp))

    class Plain(http.client.HTTPConnection):
        response_class = Response

    class Secure(http.client.HTTPSConnection):
        response_class = Response

    class PlainHandler(urllib.request.HTTPHandler):
        def do_open(self, http_class, request, **kwargs):
            return super().do_open(Plain, request, **kwargs)

    class SecureHandler(urllib.request.HTTPSHandler):
        def do_open(self, http_class, request, **kwargs):
            return super().do_open(Secure, request, **kwargs)

    opener = urllib.request.build_opener(PlainHandler(), SecureHandler())
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with opener.open(request, timeout=seconds) as response:
        return response.read(), response.geturl()


def _retry_after(header: str | None, attempt: int, delay: float) -> float:
    """The server's Retry-After in seconds where it gives one, else exponential back-off with
    jitter."""
    if header and header.strip().isdigit():
        return float(header.strip())
    return max(delay, 0.1) * (2**attempt) * (1 + random.random() / 4)
