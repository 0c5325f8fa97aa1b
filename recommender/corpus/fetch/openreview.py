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
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ...errors import InputError, LimitError, RecommenderError, caller_stacklevel
from ..identifiers import id_fault, shown_id
from ..readers import InputWarning
from ..readers.openreview import forum_url
from .http import RESUMES, Bounds, PoliteClient
from .pages import Pages, fingerprint, folder_for

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
    base_url: str = BASE_URL,
    delay: float = DELAY_SECONDS,
    retries: int = 6,
    notice: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    page: int = PAGE,
    bounds: Bounds | None = None,
) -> VenueReport:
    """The accepted papers of `venue` (and its withdrawn ones with `withdrawn`), fetched page by
    page into a folder under `pages_root` (see `pages`; `target` names the output they are for);
    a stopped fetch resumes from its last page. The caller delivers the report's `records`."""
    venue = venue.strip().strip("/")
    if not venue or " " in venue or venue.count("/") < 1:
        raise InputError(
            f"'{venue}' is not an OpenReview venue ID: give one such as NeurIPS.cc/2025/Conference"
        )
    bounds = bounds or Bounds()
    base_url = base_url.rstrip("/")
    client = PoliteClient(base_url, delay, retries, notice, sleep, bounds)
    wanted = {
        "service": "openreview",
        "venue": venue,
        "withdrawn": withdrawn,
        "base_url": base_url,
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
    state = store.state
    parts = [(venue, "accepted")] + ([(f"{venue}/{WITHDRAWN}", "withdrawn")] if withdrawn else [])
    while state["part"] < len(parts):
        venue_id, status = parts[state["part"]]
        if state["pages"] >= bounds.max_pages:
            raise LimitError(
                f"{base_url} still had pages of {venue_id} after the most pages of"
                f" {bounds.max_pages}: stopped; {RESUMES}",
                "max_pages",
            )
        body = client.get(
            {"content.venueid": venue_id, "offset": state["offset"], "limit": page}, "/notes"
        )
        try:
            answer = json.loads(body)
            notes = answer["notes"]
            if not isinstance(notes, list):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise RecommenderError(
                f"{base_url} answered something that is not a page of notes: try again later"
            ) from None
        total = answer.get("count")
        if isinstance(total, bool) or not isinstance(total, int):
            total = None
        if total is not None and total > bounds.max_records:
            raise LimitError(
                f"{base_url} says {venue_id} has {total} notes, more than the most records of"
                f" {bounds.max_records}: not fetched",
                "max_records",
            )
        names = [str(note.get("id")) if isinstance(note, dict) else "?" for note in notes]
        mark = fingerprint([venue_id, *names])
        if notes and mark in state["seen"]:
            raise RecommenderError(
                f"{base_url} answered a page of {venue_id} it had given before (at offset"
                f" {state['offset']}): the pages would never end; stopped ({RESUMES})"
            )
        state["seen"].append(mark)
        records = []
        for note in notes:
            record = _record(note, status)
            if record is None:
                state["malformed"] += 1
            elif id_fault(record["id"]):
                if not state["odd"]:
                    warnings.warn(
                        f"skipped a note whose ID {shown_id(record['id'])}"
                        f" {id_fault(record['id'])}",
                        InputWarning,
                        stacklevel=caller_stacklevel(),
                    )
                state["odd"] += 1
            else:
                records.append(record)
        state[status] += store.add_page(records)
        state["pages"] += 1
        state["offset"] += len(notes)
        if notice is not None:
            notice(f"{venue_id}: {state['offset']} notes")
        if state["accepted"] + state["withdrawn"] > bounds.max_records:
            raise LimitError(
                f"{base_url} gave more than the most records of {bounds.max_records}: stopped;"
                f" {RESUMES}",
                "max_records",
            )
        if not notes or (state["offset"] >= total if total is not None else len(notes) < page):
            # the last page of this part: by the count the API gives, else a short page
            state["part"] += 1
            state["offset"] = 0
        store.save()
    store.finish()
    return VenueReport(
        store,
        state["accepted"],
        state["withdrawn"],
        state["malformed"],
        state["pages"],
        state["odd"],
    )


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
