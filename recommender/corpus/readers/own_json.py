"""Our own JSON records: one object a paper with id, title, abstract, authors, year, venue, url."""

from __future__ import annotations

from .base import Record

NAME = "papers"
DESCRIPTION = "a JSON object with 'abstract'"


def looks_like(data: dict) -> bool:
    return True


def record(data: dict, source: str, label: str = "") -> Record:
    categories = data.get("categories")
    if isinstance(categories, str):
        categories = categories.split()
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        categories = []
    return Record(data, source, label, categories=tuple(categories))
