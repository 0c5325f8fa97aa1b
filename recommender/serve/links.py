"""The addresses of the app's pages, for the pages and for what the background process draws (the
map's links to each paper's page)."""

from __future__ import annotations

from urllib.parse import quote


def url_part(value) -> str:
    return quote(str(value), safe="")


def address(prefix: str, name: str, parameter: str) -> str:
    """The page of a paper or tag: `prefix/NAME`, or `prefix?parameter=NAME` for a name that is a
    dot segment ("." or ".."), which a browser would fold into another path even when
    percent-encoded.
    """
    if name in (".", ".."):
        return f"{prefix}?{parameter}={url_part(name)}"
    return f"{prefix.rstrip('/')}/{url_part(name)}"
