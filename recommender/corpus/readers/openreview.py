"""OpenReview notes, as the API and venue sites publish them: API v2 notes (every content
field an object with its `value`: `content.title.value`), API v1 notes (plain `content`
values), one note a line, a JSON array, the API's answer (`{"notes": [...]}`), or the
dictionary of notes by ID a venue site publishes (the ICLR 2020 site's `papers.json`).

A note's ID is its forum's (the submission's); its link the forum page. The venue is the
note's `venue` (v2: "ICLR 2024 poster"), else its `decision` beside the conference its
invitation names ("ICLR 2020 (Accept (Poster))"). Withdrawn and desk-rejected submissions are
marked, so that the build leaves them out (or keeps them when asked)."""

from __future__ import annotations

import re
import urllib.parse
from datetime import datetime, timezone

from ...errors import InputError
from .base import Record, expect, year_from_text

NAME = "OpenReview"
DESCRIPTION = "a JSON object (an OpenReview note)"
# The last part of the venue ID (or invitation, or the decision) of a submission that is not a
# paper of the venue: ".../Withdrawn_Submission", ".../-/Desk_Rejected_Submission", "Desk Reject".
_WITHDRAWN = re.compile(r"withdrawn|desk[ _-]?reject", re.IGNORECASE)
_WITHDRAWN_ID = re.compile(
    r"(?:withdrawn|desk[ _-]?reject(?:ed)?)(?:[ _-]submissions?)?", re.IGNORECASE
)


def forum_url(forum: str) -> str:
    """The forum page of a note, its ID percent-encoded (`x&id=evil#frag` is not forum `x`)."""
    return "https://openreview.net/forum?" + urllib.parse.urlencode({"id": forum})


def is_withdrawn(venue_id: str, invitation: str = "", decision: str = "") -> bool:
    """Whether a note is a withdrawn or desk-rejected submission: decided by its venue ID
    (`ICLR.cc/2024/Conference/Withdrawn_Submission`), else (API v1) by its invitation or its
    decision; never by the venue's display name (a workshop may be called "Withdrawn ...")."""
    if venue_id:
        return bool(_WITHDRAWN_ID.fullmatch(venue_id.rstrip("/").rsplit("/", 1)[-1]))
    last = invitation.rstrip("/").rsplit("/", 1)[-1]
    return bool(_WITHDRAWN_ID.fullmatch(last) or _WITHDRAWN.search(decision))


def looks_like(data: dict) -> bool:
    """A note: a `content` object beside the note's `id`, `forum` or `invitation(s)`."""
    return isinstance(data.get("content"), dict) and any(
        key in data for key in ("forum", "invitation", "invitations", "replyto")
    )


def looks_like_notes_by_id(data: dict) -> bool:
    """A venue site's dictionary of notes keyed by their IDs."""
    return bool(data) and all(
        isinstance(value, dict) and looks_like(value) and value.get("id", key) == key
        for key, value in data.items()
    )


def _value(content: dict, name: str):
    """A content field's value: API v2 wraps each in {"value": ...}; v1 holds it plainly."""
    value = content.get(name)
    if isinstance(value, dict) and "value" in value:
        return value["value"]
    return value


def _text(where: str, content: dict, name: str, lists: bool = False) -> str:
    value = _value(content, name)
    if value is None:
        return ""
    if lists and isinstance(value, list):  # a few venues ask for an area or a decision as a list
        value = ", ".join(str(item) for item in value)
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise InputError(f"{where}: OpenReview '{name}' must be text, got {type(value).__name__}")
    return str(value).strip()


def _conference(group: str) -> str:
    """ "ICLR.cc/2020/Conference/-/Blind_Submission" -> "ICLR 2020"."""
    parts = [part for part in group.split("/-/")[0].split("/") if part]
    if len(parts) < 2:
        return ""
    name = re.sub(r"\.(?:cc|org|net|com)$", "", parts[0])
    year = next((part for part in parts[1:] if re.fullmatch(r"\d{4}", part)), "")
    return " ".join(piece for piece in (name, year) if piece)


def record(data: dict, source: str, label: str = "") -> Record:
    where = label or source
    content = data["content"]
    note_id = expect(where, data.get("forum") or data.get("id"), str, "forum")
    if not note_id or not note_id.strip():
        raise InputError(f"{where}: OpenReview note has no 'forum' or 'id'")
    note_id = note_id.strip()
    invitations = data.get("invitations") or [data.get("invitation") or ""]
    invitation = next((item for item in invitations if isinstance(item, str) and item), "")
    venue_id = _text(where, content, "venueid")
    venue = _text(where, content, "venue")
    decision = _text(where, content, "decision", lists=True) or _text(
        where, content, "recommendation", lists=True
    )
    if not venue:
        conference = _conference(venue_id or invitation)
        venue = f"{conference} ({decision})" if conference and decision else conference or decision
    authors = _value(content, "authors") or []
    if isinstance(authors, str):
        authors = [name.strip() for name in authors.split(",")]
    if not isinstance(authors, list) or not all(isinstance(name, str) for name in authors):
        raise InputError(f"{where}: OpenReview 'authors' must be a list of names")
    keywords = _value(content, "keywords") or []
    if isinstance(keywords, str):
        keywords = re.split(r"[,;]", keywords)
    elif isinstance(keywords, (int, float)) and not isinstance(keywords, bool):
        keywords = [keywords]  # a keyword given as a number: the number, as text
    elif not isinstance(keywords, list) or not all(
        isinstance(word, (str, int, float)) for word in keywords
    ):
        raise InputError(f"{where}: OpenReview 'keywords' must be a list of words")
    # Grouping fields conferences set on a note: its primary area, its track.
    groups = [
        _text(where, content, name, lists=True)
        for name in ("primary_area", "track", "area", "subject_areas")
    ]
    categories = tuple(str(word).strip() for word in [*keywords, *groups] if str(word).strip())
    fields = {
        "id": note_id,
        "title": _text(where, content, "title"),
        "abstract": _value(content, "abstract") if "abstract" in content else None,
        "authors": [name for name in authors if name.strip()],
        "year": _year(data, content),
        "venue": venue,
        "url": forum_url(note_id),
    }
    withdrawn = is_withdrawn(venue_id, invitation, decision)
    return Record(
        fields, source, label, bulk=True, categories=categories, extra={"withdrawn": withdrawn}
    )


def _year(data: dict, content: dict) -> int | None:
    """The year of the venue's name ("ICLR 2024 poster"), else of publication, else of the note."""
    for text in (_value(content, "venue"), _value(content, "venueid"), data.get("invitation")):
        if isinstance(text, str):
            found = re.search(r"(?<!\d)((?:19|20)\d\d)(?!\d)", text)
            if found:
                return int(found.group(1))
    for key in ("pdate", "odate", "cdate", "tcdate"):
        stamp = data.get(key)
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and stamp > 0:
            try:
                return datetime.fromtimestamp(stamp / 1000, tz=timezone.utc).year
            except (OverflowError, OSError, ValueError):  # 1e300, Infinity: not a date
                continue
    return year_from_text(_value(content, "year"))
