"""The seed text format: a heading line, then one abstract a paragraph (.txt)."""

from __future__ import annotations

from pathlib import Path

from ...errors import InputError
from .base import Record

# A seed file opens with a heading line ("NeurIPS 2025 Papers"); an abstract is
# never this short, so a short single-line first paragraph with no closing
# punctuation is taken as the heading (and kept as each paper's venue).
HEADING_MAX_WORDS = 12


def read(path: Path, text: str) -> list[Record]:
    lines = text.splitlines()
    paragraphs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(lines, start=1):
        if line.strip():
            if not current:
                start = number
            current.append(line.strip())
        elif current:
            paragraphs.append((start, current))
            current = []
    if current:
        paragraphs.append((start, current))
    heading = ""
    if paragraphs:
        first_line, first = paragraphs[0]
        looks_like_heading = len(first[0].split()) <= HEADING_MAX_WORDS and not first[0].endswith(
            (".", "!", "?")
        )
        if len(first) == 1 and looks_like_heading:
            if len(paragraphs) == 1:
                raise InputError(
                    f"{path}: only a heading line ('{first[0]}'), no abstracts: put one abstract a"
                    " paragraph below it"
                )
            heading = first[0]
            paragraphs = paragraphs[1:]
    records = []
    for number, paragraph in paragraphs:
        abstract = " ".join(paragraph)
        records.append(Record({"abstract": abstract, "venue": heading}, f"{path}:{number}"))
    return records
