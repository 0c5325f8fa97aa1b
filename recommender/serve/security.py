"""Who may write (tags), cross-site request forgery, and the headers every response carries."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass

TOKEN_COOKIE = "papers_token"
CSRF_COOKIE = "papers_csrf"
CSRF_FIELD = "csrf"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

# Scripts only from this server's own files; nothing inline, no eval, no other origin.
STRICT_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# The map (render.map) and Swagger UI set styles inline; their scripts still come from files.
INLINE_STYLE_POLICY = STRICT_POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # not no-referrer: that makes a form post say "Origin: null"
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


INLINE_STYLE_PATHS = ("/map", "/docs")


def response_headers(path: str) -> list[tuple[bytes, bytes]]:
    """The security headers of every response to `path` (its content security policy included)."""
    policy = INLINE_STYLE_POLICY if path in INLINE_STYLE_PATHS else STRICT_POLICY
    return [(b"content-security-policy", policy.encode())] + [
        (name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()
    ]


def cookie_name(base: str, port: int | None) -> str:
    """A cookie per server: browsers scope cookies by host, not port, so two servers on one host (or
    any other service there) would otherwise read and overwrite each other's."""
    return f"{base}_{port}" if port else base


def local_path(target: str | None) -> str:
    """Where to send a browser back to: a path of this server only (no open redirect through
    `//host`)."""
    if (
        target
        and target.startswith("/")
        and not target.startswith(("//", "/\\"))
        and "\\" not in target[:2]
        and target.isprintable()
    ):
        return target
    return "/"


def is_loopback(host: str) -> bool:
    """Whether an address to bind is reachable from this machine only."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Access:
    """Writes need `token` when it is set (always on an address other than loopback); reads are
    open. On loopback, requests must name a loopback host (no DNS rebinding onto 127.0.0.1)."""

    token: str | None
    loopback: bool

    def host_allowed(self, host_header: str | None) -> bool:
        if not self.loopback:
            return True
        if not host_header:
            return False
        host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        return is_loopback(
            host.strip("[]").lower()
        )  # 127.0.0.2 and every other loopback address too

    def may_write(self, authorization: str | None, cookie: str | None) -> bool:
        if self.token is None:
            return True
        given = None
        if authorization and authorization.lower().startswith("bearer "):
            given = authorization[7:].strip()
        elif cookie:
            given = cookie
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())


def same_origin(origin: str | None, host_header: str | None) -> bool:
    """A request a browser sent from another site carries its Origin: refuse writes from it."""
    if origin is None:
        return True
    if origin == "null" or host_header is None:
        return False
    return origin.split("://", 1)[-1].rstrip("/").lower() == host_header.lower()


def csrf_matches(cookie: str | None, field: str | None) -> bool:
    if not cookie or not field:
        return False
    return hmac.compare_digest(cookie.encode(), field.encode())


class Refused(Exception):
    """A request this server will not carry out (a write without the token, a forged form), as one
    line."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message
