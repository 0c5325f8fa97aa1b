"""Text helpers shared by every layer: sentences and one-line shortening."""

from __future__ import annotations

import re

# What a paper's text is (Paper.text_from), in the order a reader tries them (corpus/fulltext.py).
ABSTRACT, FULL_TEXT, PDF, TITLE_ONLY = "abstract", "full text", "pdf", "title only"
TEXT_FROM = (ABSTRACT, FULL_TEXT, PDF, TITLE_ONLY)

# A sentence ends at . ! or ? followed by space and something that can start a sentence.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def collapse_spaces(text: str) -> str:
    """The text on one line, runs of whitespace made one space."""
    # str.split() splits where the regex \s+ would (the same Unicode whitespace), 2-3x faster.
    return " ".join(text.split())


def split_sentences(text: str) -> list[str]:
    """The sentences of a text, whitespace collapsed."""
    return SENTENCE_END.split(collapse_spaces(text))


def first_sentence(text: str) -> str:
    """The first sentence of a text (the whole text when it has one sentence)."""
    return SENTENCE_END.split(collapse_spaces(text), maxsplit=1)[0]


def shorten(text: str, width: int) -> str:
    """One line of at most `width` characters, marked with an ellipsis when cut."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"
