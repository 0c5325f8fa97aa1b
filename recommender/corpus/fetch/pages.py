"""The records a fetch has written so far, kept for the next run to resume from.

A fetch writes each page's records as it goes into a private folder (`records.jsonl` and
`state.json`, chosen by the caller: `papers fetch` keeps them under its data folder, one folder a
fetch), never beside the output the user named: that output may be a FIFO, a device or standard
output, which is written once, whole, through the one output mechanism (`files.output`) when the
fetch is complete. A stopped fetch (a network failure, a bound reached, Ctrl-C) leaves the folder
as it was after its last whole page; the next run with the same request resumes from there.

`page_through` is the loop both services' fetches share: a page asked for, its records written,
the state saved, within the fetch's bounds; each service says how to ask for its next page
(`Listing`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ... import files
from ...errors import LimitError, caller_stacklevel
from ..identifiers import id_fault, shown_id
from ..readers import InputWarning
from .http import RESUMES, PoliteClient


def folder_for(root: Path, wanted: dict) -> Path:
    """The folder under `root` that holds the pages of the fetch `wanted` describes (its service,
    what it asks for, and where it is written)."""
    digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:24]
    return root / digest


class Pages:
    """The records fetched so far and the fetch's state (`state`: a dict, saved after each page)."""

    def __init__(self, folder: Path, wanted: dict, fresh: dict):
        self.folder = Path(folder)
        self.records = self.folder / "records.jsonl"
        self.state_path = self.folder / "state.json"
        self.folder.mkdir(parents=True, exist_ok=True)
        files.remove_stale_partials(self.folder)  # of a run killed while saving its state
        state = _read_state(self.state_path)
        if (
            state.get("wanted") != wanted
            or state.get("done")
            or not files.is_plain_file(self.records)
        ):
            state = {"wanted": wanted, **json.loads(json.dumps(fresh))}
            self.records.unlink(missing_ok=True)
            files.open_exclusive(self.records).close()
        self.state = state
        self.ids: set[str] = set()
        with open(self.records, encoding="utf-8") as lines:
            for line in lines:
                try:
                    self.ids.add(json.loads(line)["id"])
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a crash: its page is fetched again

    def add_page(self, records: list[dict]) -> int:
        """Append a page's records not written before (by ID), durably, then save the state;
        how many were new."""
        new = 0
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(self.records, flags), "a", encoding="utf-8") as sink:
            for record in records:
                if record["id"] not in self.ids:
                    self.ids.add(record["id"])
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    new += 1
            sink.flush()
            os.fsync(sink.fileno())
        return new

    def save(self) -> None:
        files.write_text(self.state_path, json.dumps(self.state, sort_keys=True))

    def finish(self) -> None:
        """The fetch is complete: its records are the file to deliver (see `deliver`)."""
        self.state["done"] = True
        self.save()

    def deliver(self, stream) -> None:
        """Copy the records into `stream` (a binary file object) and forget the fetch."""
        import shutil

        with open(self.records, "rb") as records:
            shutil.copyfileobj(records, stream)
        stream.flush()

    def forget(self) -> None:
        for path in (self.records, self.state_path):
            path.unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:
            pass


def _read_state(path: Path) -> dict:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def fingerprint(parts: list[str]) -> str:
    """A short digest of a page's identifying parts (to tell a page given twice)."""
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "replace")).hexdigest()[:20]


@dataclass(frozen=True)
class Page:
    """One page a service answered: its well-formed records, how many were malformed, the state's
    count its new records add to, and what the service's `Listing.after` needs to go on."""

    records: list[dict]
    malformed: int
    count: str
    next: dict


class Listing(Protocol):
    """A service's side of `page_through`: `noun` is what it calls a record ("note"), `counts` the
    state's counts of records written."""

    @property
    def noun(self) -> str: ...

    @property
    def counts(self) -> tuple[str, ...]: ...

    def more(self, state: dict) -> bool:
        """Whether pages are left to ask for."""
        ...

    def of(self, state: dict) -> str:
        """What the next page is of, as the bound on pages says it ("" or " of <venue>")."""
        ...

    def page(self, client: PoliteClient, state: dict) -> Page | None:
        """The next page; None when the service has no records to give."""
        ...

    def after(self, state: dict, page: Page) -> str:
        """Move the state past `page` (its resumption token, its offset); the line of progress."""
        ...


def page_through(store: Pages, client: PoliteClient, listing: Listing) -> None:
    """Every page of `listing` into `store`, from where its state stands: each page's records
    written, the state saved, then the bounds on pages and on records checked (a rerun goes on
    after the last page saved); the store is finished at the end."""
    state, bounds = store.state, client.bounds
    while listing.more(state):
        if state["pages"] >= bounds.max_pages:
            raise LimitError(
                f"{client.base_url} still had pages{listing.of(state)} after the most pages of"
                f" {bounds.max_pages}: stopped; {RESUMES}",
                "max_pages",
            )
        page = listing.page(client, state)
        if page is None:
            break
        state[page.count] += store.add_page(_without_odd_ids(page.records, state, listing.noun))
        state["malformed"] += page.malformed
        state["pages"] += 1
        progress = listing.after(state, page)
        store.save()
        if client.notice is not None:
            client.notice(progress)
        if sum(state[name] for name in listing.counts) > bounds.max_records:
            raise LimitError(
                f"{client.base_url} gave more than the most records of {bounds.max_records}:"
                f" stopped; {RESUMES}",
                "max_records",
            )
    store.finish()


def _without_odd_ids(records: list[dict], state: dict, noun: str) -> list[dict]:
    """The records whose ID passes `id_fault`; the others counted in the state's "odd", the first
    of a fetch said in a warning."""
    kept = [record for record in records if not id_fault(record["id"])]
    if len(kept) < len(records) and not state["odd"]:
        first = next(record["id"] for record in records if id_fault(record["id"]))
        warnings.warn(
            f"skipped a {noun} whose ID {shown_id(first)} {id_fault(first)}",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
    state["odd"] += len(records) - len(kept)
    return kept
