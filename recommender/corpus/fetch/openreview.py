"""OpenReview's public API (v2): the papers of a venue, accepted and withdrawn told apart.

API v2 (https://docs.openreview.net/reference/api-v2): `GET
/notes?content.venueid=V&offset=N&limit=L`
pages through the notes whose venue ID is V, each `{"id", "forum", "cdate", "pdate", "content":
{"title": {"value"}, "abstract": {"value"}, "authors": {"value": [...]}, "venue": {"value"},
"venueid": {"value"}}}`, with `count`, the total. A venue's accepted papers carry its own ID
(`NeurIPS.cc/2025/Conference`); withdrawn submissions `<venue>/Withdrawn_Submission`. Records
are written as our own JSON lines (id `openreview:<forum>`, title, abstract, authors, year,
venue, url), withdrawn ones only with `withdrawn=True` and then with "(withdrawn)" in their venue.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ... import files
from ...errors import InputError, RecommenderError
from .http import PoliteClient

BASE_URL = "https://api2.openreview.net"
DELAY_SECONDS = 1.0
PAGE = 1000  # the API's largest page
WITHDRAWN = "Withdrawn_Submission"


@dataclass(frozen=True)
class VenueReport:
    out: Path
    accepted: int
    withdrawn: int
    malformed: int
    pages: int


def fetch_openreview(
    venue: str,
    out: str | os.PathLike,
    withdrawn: bool = False,
    base_url: str = BASE_URL,
    delay: float = DELAY_SECONDS,
    retries: int = 6,
    notice: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    page: int = PAGE,
) -> VenueReport:
    """The accepted papers of `venue` (and its withdrawn ones with `withdrawn`) into `out`, written
    whole."""
    venue = venue.strip().strip("/")
    if not venue or " " in venue or venue.count("/") < 1:
        raise InputError(
            f"'{venue}' is not an OpenReview venue ID: give one such as NeurIPS.cc/2025/Conference"
        )
    client = PoliteClient(base_url.rstrip("/"), delay, retries, notice, sleep)
    records, counts, pages = [], {"accepted": 0, "withdrawn": 0, "malformed": 0}, 0
    wanted = [(venue, "accepted")] + ([(f"{venue}/{WITHDRAWN}", "withdrawn")] if withdrawn else [])
    for venue_id, status in wanted:
        offset = 0
        while True:
            body = client.get(
                {"content.venueid": venue_id, "offset": offset, "limit": page}, "/notes"
            )
            pages += 1
            try:
                answer = json.loads(body)
                notes = answer["notes"]
                if not isinstance(notes, list):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                raise RecommenderError(
                    f"{base_url} answered something that is not a page of notes: try again later"
                ) from None
            for note in notes:
                record = _record(note, status)
                if record is None:
                    counts["malformed"] += 1
                else:
                    records.append(record)
                    counts[status] += 1
            if notice is not None:
                notice(f"{venue_id}: {offset + len(notes)} notes")
            offset += len(notes)
            total = answer.get("count")
            if not notes or (offset >= total if isinstance(total, int) else len(notes) < page):
                break  # the last page: by the count the API gives, else a short page
    out = Path(out)
    with files.replacing(out) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return VenueReport(out, counts["accepted"], counts["withdrawn"], counts["malformed"], pages)


def _value(content: dict, name: str):
    field = content.get(name)
    return field.get("value") if isinstance(field, dict) else field


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
        and title.strip()
        and abstract.strip()
    ):
        return None
    authors = _value(content, "authors")
    stamp = note.get("pdate") or note.get("cdate")
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
        "year": time.gmtime(stamp / 1000).tm_year if isinstance(stamp, (int, float)) else None,
        "venue": venue + (" (withdrawn)" if status == "withdrawn" else ""),
        "url": f"https://openreview.net/forum?id={forum}",
    }
