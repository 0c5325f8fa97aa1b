"""Pieces of Markdown handouts shared by related-work lists and session plans."""

from __future__ import annotations

import re

from ..corpus.papers import Paper
from ..corpus.text import shorten
from ..corpus.summary import summary

SNIPPET_WIDTH = 160
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|])")


def snippet(paper: Paper, width: int = SNIPPET_WIDTH) -> str:
    """The paper's summary sentence, shortened to one line."""
    return shorten(summary(paper), width)


def md(text: str) -> str:
    """Text shown as is in Markdown (no accidental emphasis, links or HTML)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def code_links(paper: Paper) -> str:
    """The paper's code links as Markdown autolinks."""
    return ", ".join(f"<{link}>" for link in paper.code_links)
