"""OpenAlex works: the work objects of the API (one a line, or a page with `results`).

The abstract comes as `abstract_inverted_index` (word -> positions) and is rebuilt here.
"""

from __future__ import annotations

from ...errors import InputError
from .base import Record, expect, strip_prefix

NAME = "OpenAlex"
DESCRIPTION = "a JSON object (an OpenAlex work)"
OPENALEX = "https://openalex.org/"


def looks_like(data: dict) -> bool:
    identifier = data.get("id")
    return "abstract_inverted_index" in data or (
        isinstance(identifier, str) and identifier.startswith(OPENALEX)
    )


def rebuild_abstract(where: str, index) -> str | None:
    """The abstract's words put back at their positions."""
    if index is None:
        return None
    if not isinstance(index, dict) or not all(
        isinstance(positions, list)
        and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in positions)
        for positions in index.values()
    ):
        raise InputError(
            f"{where}: 'abstract_inverted_index' must map each word to a list of positions"
        )
    placed = sorted((position, word) for word, positions in index.items() for position in positions)
    return " ".join(word for _, word in placed)


def record(data: dict, source: str, label: str = "") -> Record:
    where = label or source
    identifier = expect(where, data.get("id"), str, "id") or ""
    title = data.get("title") if data.get("title") is not None else data.get("display_name")
    doi = expect(where, data.get("doi"), str, "doi") or ""
    location = expect(where, data.get("primary_location"), dict, "primary_location") or {}
    venue_source = expect(where, location.get("source"), dict, "primary_location.source") or {}
    venue = venue_source.get("display_name")
    if venue is None and isinstance(data.get("host_venue"), dict):  # works exported before 2023
        venue = data["host_venue"].get("display_name")
    landing = (
        expect(where, location.get("landing_page_url"), str, "primary_location.landing_page_url")
        or ""
    )
    fields = {
        "id": strip_prefix(identifier.strip(), OPENALEX),
        "title": title,
        "abstract": rebuild_abstract(where, data.get("abstract_inverted_index")),
        "authors": _authors(where, data.get("authorships")),
        "year": data.get("publication_year"),
        "venue": venue,
        "url": doi or landing or identifier,
    }
    return Record(fields, source, label, bulk=True, categories=_topics(data))


def _authors(where: str, authorships) -> list[str]:
    if authorships is None:
        return []
    if not isinstance(authorships, list) or not all(isinstance(a, dict) for a in authorships):
        raise InputError(f"{where}: 'authorships' must be a list of objects")
    names = []
    for authorship in authorships:
        author = authorship.get("author") if isinstance(authorship.get("author"), dict) else {}
        name = author.get("display_name") or authorship.get("raw_author_name")
        if name is not None and not isinstance(name, str):
            raise InputError(f"{where}: author names must be text, got {type(name).__name__}")
        if name:
            names.append(name)
    return names


def _topics(data: dict) -> tuple[str, ...]:
    """Topic, subfield, field and concept names, for --where category=..."""
    names = []
    listed = data.get("topics")
    topics = [data.get("primary_topic")] + (listed if isinstance(listed, list) else [])
    for topic in topics:
        if isinstance(topic, dict):
            names.append(topic.get("display_name"))
            for level in ("subfield", "field", "domain"):
                if isinstance(topic.get(level), dict):
                    names.append(topic[level].get("display_name"))
    concepts = data.get("concepts")
    for concept in concepts if isinstance(concepts, list) else []:
        if isinstance(concept, dict):
            names.append(concept.get("display_name"))
    return tuple(dict.fromkeys(name for name in names if isinstance(name, str) and name))
