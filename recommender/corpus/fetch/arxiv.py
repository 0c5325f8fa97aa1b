"""arXiv's OAI-PMH interface: the records of a category since a date, as arXiv metadata snapshot
lines.

OAI-PMH (https://www.openarchives.org/OAI/openarchivesprotocol.html, arXiv's guide at
https://info.arxiv.org/help/oa/index.html): `ListRecords` with `metadataPrefix=arXiv`, a `set`
(`cs:cs:LG` for cs.LG) and `from`; each page ends with a `resumptionToken` until the last.
arXiv asks for one request every three seconds and answers 503 with `Retry-After` when asked too
fast: both are honoured, and dropped connections are retried with back-off. The records are
written as lines of the arXiv metadata snapshot (id, title, abstract, authors, categories,
update_date), which `papers build` and `papers add` read, so IDs match those of an index built
from the snapshot. A stopped fetch resumes from its last page (`<out>.resume`).
"""

from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError, RecommenderError
from .http import RESUMES, PoliteClient, Service
from .pages import Page, Pages, fingerprint, folder_for, page_through

BASE_URL = "https://oaipmh.arxiv.org/oai"
DELAY_SECONDS = 3.0  # arXiv's documented politeness: one request every three seconds
RETRIES = 6
OAI = "{http://www.openarchives.org/OAI/2.0/}"
ARXIV = "{http://arxiv.org/OAI/arXiv/}"
CATEGORY = re.compile(r"^([a-z-]+)(?:\.([A-Za-z-]+))?$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class FetchReport:
    records: Pages  # the fetched records, to deliver
    written: int
    malformed: int
    pages: int
    until: str  # the date the next `--since last` starts from
    odd: int = 0  # records skipped for an ID with control or text-direction characters


def oai_set(category: str) -> str:
    """The OAI-PMH set of an arXiv category: cs.LG -> cs:cs:LG, math.PR -> math:math:PR, hep-th ->
    physics:hep-th."""
    found = CATEGORY.match(category.strip())
    if not found:
        raise InputError(
            f"'{category}' is not an arXiv category: give one such as cs.LG or math.PR"
        )
    archive, subject = found.groups()
    if subject is None:
        return (
            f"physics:{archive}"
            if archive not in ("cs", "math", "stat", "q-bio", "q-fin", "econ", "eess")
            else archive
        )
    return f"{archive}:{archive}:{subject}"


def fetch_arxiv(
    category: str,
    pages_root: str | os.PathLike,
    target: str = "-",
    since: str | None = None,
    service: Service | None = None,
) -> FetchReport:
    """Every record of `category` changed since `since` (YYYY-MM-DD; None: all), fetched page by
    page from `service` (default: arXiv's, one request every three seconds) into a folder under
    `pages_root` (see `pages`; `target` names the output the records are for). A stopped fetch
    resumes from the page it stopped at; the report's `records` are then delivered by the caller
    (`Pages.deliver`)."""
    if since is not None and not DATE.match(since):
        raise InputError(f"'{since}' is not a date: give it as YYYY-MM-DD, or 'last'")
    service = service or Service(BASE_URL, DELAY_SECONDS, RETRIES)
    wanted = {
        "service": "arxiv",
        "category": category,
        "since": since,
        "base_url": service.base_url,
        "target": target,
    }
    fresh: dict = {"token": None, "pages": 0, "written": 0, "malformed": 0, "odd": 0, "seen": []}
    store = Pages(folder_for(Path(pages_root), wanted), wanted, fresh)
    until = time.strftime("%Y-%m-%d", time.gmtime())
    page_through(store, PoliteClient(service), _Category(category, since))
    state = store.state
    return FetchReport(
        store, state["written"], state["malformed"], state["pages"], until, state["odd"]
    )


@dataclass(frozen=True)
class _Category:
    """A category's records as OAI-PMH lists them, page by page (`pages.Listing`)."""

    category: str
    since: str | None
    noun: str = "record"
    counts: tuple[str, ...] = ("written",)

    def more(self, state: dict) -> bool:
        return state["token"] != ""  # None before the first page; "" after the last

    def of(self, state: dict) -> str:
        return ""

    def page(self, client: PoliteClient, state: dict) -> Page | None:
        if state["token"]:
            query = {"verb": "ListRecords", "resumptionToken": state["token"]}
        else:
            query = {
                "verb": "ListRecords",
                "metadataPrefix": "arXiv",
                "set": oai_set(self.category),
            }
            if self.since:
                query["from"] = self.since
        root = _parse(client.get(query), client.base_url)
        if root is None:  # noRecordsMatch
            return None
        records, malformed = _records(root)
        token = root.find(f"{OAI}ListRecords/{OAI}resumptionToken")
        token_text = (token.text or "").strip() if token is not None else ""
        _check_new_page(state, root, token_text, client.base_url)
        return Page(records, malformed, "written", {"token": token_text})

    def after(self, state: dict, page: Page) -> str:
        state["token"] = page.next["token"]
        return f"page {state['pages']}: {state['written']} records"


def _check_new_page(state: dict, root: ElementTree.Element, token: str, base_url: str) -> None:
    """A page seen before (the same records and resumption token), or a resumption token given
    twice, would be followed for ever: stop."""
    names = [
        (item.findtext(f"{OAI}header/{OAI}identifier") or "")
        for item in root.iterfind(f"{OAI}ListRecords/{OAI}record")
    ]
    marks = [fingerprint(["page", token, *names])]
    if token:
        marks.append(fingerprint(["token", token]))
    if any(mark in state["seen"] for mark in marks):
        raise RecommenderError(
            f"{base_url} answered a page it had given before (resumption token {token!r}): the"
            f" pages would never end; stopped ({RESUMES} when the service is mended)"
        )
    state["seen"].extend(marks)


def _parse(body: bytes, base_url: str) -> ElementTree.Element | None:
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as error:
        raise RecommenderError(
            f"{base_url} answered something that is not OAI-PMH XML ({error}): try again later"
        ) from None
    refusal = root.find(f"{OAI}error")
    if refusal is not None:
        if refusal.get("code") == "noRecordsMatch":
            return None
        raise RecommenderError(
            f"{base_url} refused the request: {refusal.get('code')}: {(refusal.text or '').strip()}"
        )
    return root


def _records(root: ElementTree.Element) -> tuple[list[dict], int]:
    """The arXiv records of a page as snapshot lines, and how many were malformed (no ID, title or
    abstract); deleted records are left out."""
    records, malformed = [], 0
    for item in root.iterfind(f"{OAI}ListRecords/{OAI}record"):
        header = item.find(f"{OAI}header")
        if header is not None and header.get("status") == "deleted":
            continue
        data = item.find(f"{OAI}metadata/{ARXIV}arXiv")

        def text(name: str, data=data) -> str:
            found = data.find(f"{ARXIV}{name}") if data is not None else None
            return " ".join((found.text or "").split()) if found is not None else ""

        arxiv_id, title, abstract = text("id"), text("title"), text("abstract")
        if data is None or not (arxiv_id and title and abstract):
            malformed += 1
            continue
        authors = []
        for author in data.iterfind(f"{ARXIV}authors/{ARXIV}author"):
            last = (author.findtext(f"{ARXIV}keyname") or "").strip()
            first = (author.findtext(f"{ARXIV}forenames") or "").strip()
            suffix = (author.findtext(f"{ARXIV}suffix") or "").strip()
            if last or first:
                authors.append([last, first, suffix])
        records.append(
            {
                "id": arxiv_id,
                "title": title,
                "abstract": abstract,
                "authors_parsed": authors,
                "categories": text("categories"),
                "doi": text("doi") or None,
                "journal-ref": text("journal-ref") or None,
                "update_date": text("updated") or text("created"),
            }
        )
    return records, malformed
