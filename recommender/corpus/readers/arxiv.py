"""The arXiv metadata snapshot (Kaggle's arxiv-metadata-oai-snapshot.json): JSON lines,
one object a paper with id, submitter, authors, title, comments, journal-ref, doi,
categories (space-separated), abstract, versions, update_date and authors_parsed."""

from __future__ import annotations

import re

from ...errors import InputError
from .base import Record, expect, year_from_text

NAME = "arXiv metadata"
DESCRIPTION = "a JSON object (an arXiv metadata record)"
ABS_URL = "https://arxiv.org/abs/"


def looks_like(data: dict) -> bool:
    return (
        "id" in data
        and "categories" in data
        and any(key in data for key in ("update_date", "versions", "authors_parsed", "submitter"))
    )


def record(data: dict, source: str, label: str = "") -> Record:
    where = label or source
    arxiv_id = expect(where, data.get("id"), (str, int, float), "id")
    if arxiv_id is None or not str(arxiv_id).strip():
        raise InputError(f"{where}: arXiv record has no 'id'")
    arxiv_id = str(arxiv_id).strip()
    categories = expect(where, data.get("categories"), str, "categories") or ""
    journal = expect(where, data.get("journal-ref"), str, "journal-ref") or ""
    fields = {
        "id": arxiv_id,
        "title": data.get("title"),
        "abstract": data.get("abstract"),
        "authors": _authors(where, data),
        "year": _year(where, data),
        "venue": journal.strip() or "arXiv",
        "url": ABS_URL + arxiv_id,
    }
    return Record(fields, source, label, bulk=True, categories=tuple(categories.split()))


def _authors(where: str, data: dict) -> list[str]:
    parsed = data.get("authors_parsed")
    if parsed is not None:
        if not isinstance(parsed, list) or not all(
            isinstance(parts, list) and all(isinstance(part, str) for part in parts)
            for parts in parsed
        ):
            raise InputError(
                f"{where}: 'authors_parsed' must be a list of [last, first, suffix] lists of text"
            )
        names = []
        for parts in parsed:
            last, first, suffix = (list(parts) + ["", "", ""])[:3]
            names.append(" ".join(part.strip() for part in (first, last, suffix) if part.strip()))
        return [name for name in names if name]
    authors = expect(where, data.get("authors"), str, "authors") or ""
    return [name.strip() for name in re.split(r",|\band\b", authors) if name.strip()]


def _year(where: str, data: dict) -> int | None:
    versions = data.get("versions")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        year = year_from_text(versions[0].get("created"))
        if year is not None:
            return year
    return year_from_text(expect(where, data.get("update_date"), str, "update_date"))
