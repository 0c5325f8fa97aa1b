"""Our own JSON records: one object a paper with id, title, abstract, authors, year, venue, url,
categories, or the keys conference and library tools write for them (`UID`, `paper_id`,
`keywords`, ...: see `columns`). Keys none of our fields reads are named in one warning a file."""

from __future__ import annotations

import warnings

from ...errors import caller_stacklevel
from .base import InputWarning, Record
from .columns import Columns

NAME = "papers"
DESCRIPTION = "a JSON object with 'abstract'"


def looks_like(data: dict) -> bool:
    return True


class Reader:
    """Records of one file, and at the end the warning about keys that were not read."""

    def __init__(self) -> None:
        self.columns = Columns()

    def record(self, data: dict, source: str, label: str = "") -> Record:
        fields, categories = self.columns.fields(label or source, data)
        return Record(fields, source, label, categories=categories)

    def finish(self, path) -> None:
        unread = self.columns.unread_warning(path, "key")
        if unread:
            warnings.warn(unread, InputWarning, stacklevel=caller_stacklevel())


def record(data: dict, source: str, label: str = "") -> Record:
    """One record on its own (no warning about unread keys)."""
    return Reader().record(data, source, label)
