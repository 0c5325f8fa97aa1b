"""OpenReview's public API (v2): the papers of a venue, accepted and withdrawn told apart.

API v2 (https://docs.openreview.net/reference/api-v2): `GET
/notes?content.venueid=V&offset=N&limit=L`
pages through the notes whose venue ID is V, each `{"id", "forum", "cdate", "pdate", "content":
{"title": {"value"}, "abstract": {"value"}, "authors": {"value": [...]}, "venue": {"value"},
"venueid": {"value"}}}`, with `count`, the total. A venue's accepted papers carry its own ID
(`NeurIPS.cc/2025/Conference`); withdrawn submissions `<venue>/Withdrawn_Submission`. Records
are written as our own JSON lines (id `openreview:<forum>`, title, abstract, authors, year,
venue, url), withdrawn ones only with `withdrawn=True` and then with "(withdrawn)" in their venue.
Pages are kept for a resume and bounded as arXiv's are (`pages`, `http.Bounds`): a `count` above
the largest number of records is refused before paging, and a page answered twice stops the fetch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from ...errors import InputError, LimitError, RecommenderError
from ..readers.openreview import forum_url
from .http import RESUMES, PoliteClient, Service
from .pages import Page, Pages, fingerprint, folder_for, page_through

BASE_URL = "https://api2.openreview.net"
DELAY_SECONDS = 1.0
PAGE = 1000  # the API's largest page
WITHDRAWN = "Withdrawn_Submission"


@dataclass(frozen=True)
class VenueReport:
    records: Pages  # the fetched records, to deliver
    accepted: int
    withdrawn: int
    malformed: int
    pages: int
    odd: int = 0  # notes skipped for an ID with control or text-direction characters


def fetch_openreview(
    venue: str,
    pages_root: str | os.PathLike,
    target: str = "-",
    withdrawn: bool = False,
    service: Service | None = None,
    page: int = PAGE,
) -> VenueReport:
    """The accepted papers of `venue` (and its withdrawn ones with `withdrawn`), fetched page by
    page from `service` (default: OpenReview's API v2, one request a second), `page` notes a
    request, into a folder under `pages_root` (see `pages`; `target` names the output they are
    for); a stopped fetch resumes from its last page. The caller delivers the report's
    `records`."""
    venue = venue.strip().strip("/")
    if not venue or " " in venue or venue.count("/") < 1:
        raise InputError(
            f"'{venue}' is not an OpenReview venue ID: give one such as NeurIPS.cc/2025/Conference"
        )
    service = service or Service(BASE_URL, DELAY_SECONDS)
    service = replace(service, base_url=service.base_url.rstrip("/"))
    wanted = {
        "service": "openreview",
        "venue": venue,
        "withdrawn": withdrawn,
        "base_url": service.base_url,
        "target": target,
    }
    fresh = {
        "part": 0,
        "offset": 0,
        "pages": 0,
        "accepted": 0,
        "withdrawn": 0,
        "malformed": 0,
        "odd": 0,
        "seen": [],
    }
    store = Pages(folder_for(Path(pages_root), wanted), wanted, fresh)
    parts = [(venue, "accepted")] + ([(f"{venue}/{WITHDRAWN}", "withdrawn")] if withdrawn else [])
    page_through(store, PoliteClient(service), _Venue(tuple(parts), page))
    state = store.state
    return VenueReport(
        store,
        state["accepted"],
        state["withdrawn"],
        state["malformed"],
        state["pages"],
        state["odd"],
    )


@dataclass(frozen=True)
class _Venue:
    """A venue's notes, its accepted then (given) its withdrawn ones, page by page at `size` notes
    a page (`pages.Listing`)."""

    parts: tuple[tuple[str, str], ...]  # (venue ID, the count its notes add to)
    size: int
    noun: str = "note"
    counts: tuple[str, ...] = ("accepted", "withdrawn")

    def more(self, state: dict) -> bool:
        return state["part"] < len(self.parts)

    def of(self, state: dict) -> str:
        return f" of {self.parts[state['part']][0]}"

    def page(self, client: PoliteClient, state: dict) -> Page:
        venue_id, status = self.parts[state["part"]]
        notes, total = _notes(
            client, {"content.venueid": venue_id, "offset": state["offset"], "limit": self.size}
        )
        if total is not None and total > client.bounds.max_records:
            raise LimitError(
                f"{client.base_url} says {venue_id} has {total} notes, more than the most records"
                f" of {client.bounds.max_records}: not fetched",
                "max_records",
            )
        names = [str(note.get("id")) if isinstance(note, dict) else "?" for note in notes]
        mark = fingerprint([venue_id, *names])
        if notes and mark in state["seen"]:
            raise RecommenderError(
                f"{client.base_url} answered a page of {venue_id} it had given before (at offset"
                f" {state['offset']}): the pages would never end; stopped ({RESUMES})"
            )
        state["seen"].append(mark)
        records = [_record(note, status) for note in notes]
        kept = [record for record in records if record is not None]
        offset = state["offset"] + len(notes)
        # the last page of this part: by the count the API gives, else a short page
        last = not notes or (offset >= total if total is not None else len(notes) < self.size)
        return Page(kept, len(records) - len(kept), status, {"offset": offset, "last": last})

    def after(self, state: dict, page: Page) -> str:
        state["offset"] = page.next["offset"]
        progress = f"{self.parts[state['part']][0]}: {state['offset']} notes"
        if page.next["last"]:
            state["part"] += 1
            state["offset"] = 0
        return progress


def _notes(client: PoliteClient, query: dict) -> tuple[list, int | None]:
    """The notes of one page and the count the API gives of all (None where it gives none)."""
    body = client.get(query, "/notes")
    try:
        answer = json.loads(body)
        notes = answer["notes"]
        if not isinstance(notes, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise RecommenderError(
            f"{client.base_url} answered something that is not a page of notes: try again later"
        ) from None
    total = answer.get("count")
    if isinstance(total, bool) or not isinstance(total, int):
        total = None
    return notes, total


def _value(content: dict, name: str):
    field = content.get(name)
    return field.get("value") if isinstance(field, dict) else field


def _year(stamp) -> int | None:
    """The year of a time stamp in milliseconds, or None for one that is not a date."""
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(stamp / 1000, tz=timezone.utc).year
    except (OverflowError, OSError, ValueError):  # 1e300, NaN, Infinity
        return None


def _record(note, status: str) -> dict | None:
    """One note as our JSON record; None without an ID, title or abstract."""
    if not isinstance(note, dict) or not isinstance(note.get("content"), dict):
        return None
    content = note["content"]
    forum = note.get("forum") or note.get("id")
    title, abstract = _value(content, "title"), _value(content, "abstract")
    if not (
        isinstance(forum, str)
        and isinstance(title, str)
        and isinstance(abstract, str)
        and forum.strip()
        and title.strip()
        and abstract.strip()
    ):
        return None
    forum = forum.strip()
    authors = _value(content, "authors")
    venue = _value(content, "venue")
    venue = (
        venue if isinstance(venue, str) and venue.strip() else str(_value(content, "venueid") or "")
    )
    return {
        "id": f"openreview:{forum}",
        "title": " ".join(title.split()),
        "abstract": " ".join(abstract.split()),
        "authors": (
            [author for author in authors if isinstance(author, str)]
            if isinstance(authors, list)
            else []
        ),
        "year": _year(note.get("pdate")) or _year(note.get("cdate")),
        "venue": venue + (" (withdrawn)" if status == "withdrawn" else ""),
        "url": forum_url(forum),
    }
