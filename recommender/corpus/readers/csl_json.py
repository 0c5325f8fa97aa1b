"""CSL-JSON, as Zotero and other reference managers export it: an array of items with
id (or citation-key), type, title, abstract, author[] (family/given or literal), issued.date-parts,
container-title, DOI and URL."""

from __future__ import annotations

from ...errors import InputError
from .base import Record, expect, strip_prefix, year_from_text

NAME = "CSL-JSON"
DESCRIPTION = "a JSON object (a CSL-JSON item)"
DOI_URL = "https://doi.org/"


def looks_like(data: dict) -> bool:
    return "type" in data and any(
        key in data for key in ("issued", "author", "container-title", "DOI", "URL")
    )


def record(data: dict, source: str, label: str = "") -> Record:
    where = label or source
    doi = expect(where, data.get("DOI"), str, "DOI") or ""
    doi = strip_prefix(doi.strip(), "https://doi.org/", "http://dx.doi.org/", "doi:")
    item_id = expect(where, data.get("citation-key"), str, "citation-key") or expect(
        where, data.get("id"), (str, int), "id"
    )
    venue = data.get("container-title")
    if isinstance(venue, list):  # some exporters give a list of titles
        venue = venue[0] if venue else None
    url = expect(where, data.get("URL"), str, "URL") or (DOI_URL + doi if doi else "")
    fields = {
        "id": doi or ("" if item_id is None else str(item_id).strip()),
        "title": data.get("title"),
        "abstract": data.get("abstract"),
        "authors": _authors(where, data.get("author")),
        "year": _year(where, data.get("issued")),
        "venue": venue,
        "url": url,
    }
    return Record(fields, source, label, bulk=True)


def _authors(where: str, authors) -> list[str]:
    if authors is None:
        return []
    if not isinstance(authors, list) or not all(isinstance(author, dict) for author in authors):
        raise InputError(
            f"{where}: 'author' must be a list of name objects (family, given or literal)"
        )
    names = []
    for author in authors:
        parts = [
            author.get(key)
            for key in ("given", "dropping-particle", "non-dropping-particle", "family", "suffix")
        ]
        if author.get("literal") is not None:
            parts = [author["literal"]]
        if not all(part is None or isinstance(part, str) for part in parts):
            raise InputError(f"{where}: author name parts must be text")
        name = " ".join(part.strip() for part in parts if part and part.strip())
        if name:
            names.append(name)
    return names


def _year(where: str, issued) -> int | None:
    if issued is None:
        return None
    if isinstance(issued, str):
        return year_from_text(issued)
    if not isinstance(issued, dict):
        raise InputError(f"{where}: 'issued' must be a date object with 'date-parts'")
    parts = issued.get("date-parts")
    if parts is not None:
        if not isinstance(parts, list) or not parts or not isinstance(parts[0], list):
            raise InputError(
                f"{where}: 'issued.date-parts' must be a list of [year, month, day] lists"
            )
        if parts[0]:
            year = parts[0][0]
            if isinstance(year, int) and not isinstance(year, bool):
                return year
            if isinstance(year, str) and year.strip().lstrip("-").isdigit():
                return int(year)
            raise InputError(f"{where}: year '{year}' in 'issued.date-parts' is not a whole number")
    return year_from_text(issued.get("raw")) or year_from_text(issued.get("literal"))
