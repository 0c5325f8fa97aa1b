"""HTTP for the fetchers: a User-Agent naming the tool, a delay between requests, and retries with
back-off on busy answers (429, 503 and other 5xx, their Retry-After honoured) and dropped
connections.
"""

from __future__ import annotations

import random
import time
import urllib.error
import urllib.parse
import urllib.request

from ... import __version__
from ...errors import RecommenderError

USER_AGENT = f"papers-like/{__version__} (papers fetch; https://pypi.org/project/papers-like/)"


class PoliteClient:
    """Requests to one service, one every `delay` seconds, retried with back-off on 429/503 (their
    Retry-After honoured), on 5xx and on dropped connections."""

    def __init__(self, base_url: str, delay: float, retries: int, notice, sleep):
        self.base_url, self.delay, self.retries, self.notice, self.sleep = (
            base_url,
            delay,
            retries,
            notice,
            sleep,
        )
        self.last = 0.0

    def get(self, query: dict, path: str = "") -> bytes:
        """The body of one answer to `query`, after the delay since the last request and any
        retries."""
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(query)}"
        for attempt in range(self.retries + 1):
            wait = self.delay - (time.monotonic() - self.last)
            if wait > 0:
                self.sleep(wait)
            self.last = time.monotonic()
            try:
                request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
                with urllib.request.urlopen(request, timeout=60) as response:
                    body = response.read()
            except urllib.error.HTTPError as error:
                with error:
                    if error.code not in (429, 500, 502, 503, 504) or attempt == self.retries:
                        raise RecommenderError(
                            f"{self.base_url} answered {error.code} {error.reason}: try again later"
                        ) from None
                    pause = _retry_after(error.headers.get("Retry-After"), attempt, self.delay)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as error:
                if attempt == self.retries:
                    reason = getattr(error, "reason", None) or error
                    raise RecommenderError(
                        f"cannot reach {self.base_url} ({reason}): check the network and try again "
                        "(a rerun resumes where this one stopped)"
                    ) from None
                pause = _retry_after(None, attempt, self.delay)
            else:
                return body
            if self.notice is not None:
                self.notice(
                    f"{self.base_url} is busy or dropped the connection: again in {pause:.0f} s"
                )
            self.sleep(pause)
        raise AssertionError("unreachable")


def _retry_after(header: str | None, attempt: int, delay: float) -> float:
    """The server's Retry-After in seconds where it gives one, else exponential back-off with
    jitter."""
    if header and header.strip().isdigit():
        return float(header.strip())
    return max(delay, 0.1) * (2**attempt) * (1 + random.random() / 4)
