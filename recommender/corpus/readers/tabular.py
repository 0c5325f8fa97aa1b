"""CSV with a header row: our columns (id, title, abstract, authors, year, venue, url, categories)
or the names conference and library tools write for them (`UID`, `Abstract Note`, `keywords`, ...:
see `columns`). Columns none of our fields reads are named in one warning."""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path

from ...errors import InputError, caller_stacklevel
from .base import InputWarning, Record
from .columns import Columns


def read(path: Path, text: str) -> list[Record]:
    # csv's default field limit (128 KiB) would refuse a long abstract; no field
    # can be longer than the file. The limit is process-wide, so put it back.
    limit = csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    try:
        return _read_rows(path, text)
    finally:
        csv.field_size_limit(limit)


def _read_rows(path: Path, text: str) -> list[Record]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader)]
    except csv.Error as error:
        raise InputError(f"{path} line 1: not valid CSV ({error})") from None
    repeated = sorted({name for name in header if name and header.count(name) > 1})
    if repeated:
        raise InputError(
            f"{path}: CSV column '{repeated[0]}' appears more than once: give each column once"
        )
    columns = Columns()
    if not columns.has("abstract", header):
        raise InputError(
            f"{path}: CSV has no 'abstract' column (columns: {', '.join(header) or 'none'}): name"
            " the columns id, title, abstract"
        )
    records = []
    try:
        for row in reader:
            number = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InputError(
                    f"{path} line {number}: {len(row)} fields where the header has {len(header)}:"
                    " quote fields that contain commas"
                )
            source = f"{path}:{number}"
            fields, categories = columns.fields(source, dict(zip(header, row)))
            records.append(Record(fields, source, categories=categories))
    except csv.Error as error:
        raise InputError(f"{path} line {reader.line_num}: not valid CSV ({error})") from None
    unread = columns.unread_warning(path)
    if unread:
        warnings.warn(unread, InputWarning, stacklevel=caller_stacklevel())
    return records
