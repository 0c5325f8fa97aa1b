"""Semantic Scholar Graph API paper objects (paperId, externalIds, title, abstract,
year, venue, url, authors[].name), one a line, a JSON array (the batch endpoint),
or a search page with `data`."""

from __future__ import annotations

from ...errors import InputError
from .base import Record, expect

NAME = "Semantic Scholar"
DESCRIPTION = "a JSON object (a Semantic Scholar paper)"
PAPER_URL = "https://www.semanticscholar.org/paper/"


def looks_like(data: dict) -> bool:
    return "paperId" in data


def record(data: dict, source: str, label: str = "") -> Record:
    where = label or source
    paper_id = expect(where, data.get("paperId"), str, "paperId")
    if not paper_id or not paper_id.strip():
        raise InputError(f"{where}: Semantic Scholar paper has no 'paperId'")
    expect(where, data.get("externalIds"), dict, "externalIds")
    venue = data.get("venue")
    if not venue and isinstance(data.get("publicationVenue"), dict):
        venue = data["publicationVenue"].get("name")
    if not venue and isinstance(data.get("journal"), dict):
        venue = data["journal"].get("name")
    url = expect(where, data.get("url"), str, "url") or PAPER_URL + paper_id.strip()
    fields = {
        "id": paper_id.strip(),
        "title": data.get("title"),
        "abstract": data.get("abstract"),
        "authors": _authors(where, data.get("authors")),
        "year": data.get("year"),
        "venue": venue,
        "url": url,
    }
    return Record(fields, source, label, bulk=True, categories=_fields_of_study(data))


def _authors(where: str, authors) -> list[str]:
    if authors is None:
        return []
    if not isinstance(authors, list) or not all(isinstance(author, dict) for author in authors):
        raise InputError(f"{where}: 'authors' must be a list of objects with 'name'")
    names = [expect(where, author.get("name"), str, "authors[].name") for author in authors]
    return [name for name in names if name]


def _fields_of_study(data: dict) -> tuple[str, ...]:
    names = (
        list(data.get("fieldsOfStudy") or []) if isinstance(data.get("fieldsOfStudy"), list) else []
    )
    for item in (
        data.get("s2FieldsOfStudy") or [] if isinstance(data.get("s2FieldsOfStudy"), list) else []
    ):
        if isinstance(item, dict):
            names.append(item.get("category"))
    return tuple(dict.fromkeys(name for name in names if isinstance(name, str) and name))
