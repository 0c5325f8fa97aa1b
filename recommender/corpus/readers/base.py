"""What every reader shares: the record it yields, decoding, and the checks on raw values."""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import InputError


class InputWarning(UserWarning):
    """Something in the input a user may want to fix; the build goes on."""


@dataclass
class Record:
    """A paper as read, before IDs are checked and handles assigned.

    `fields` uses the names of our own JSONL format (id, title, abstract, authors,
    year, venue, url); `source` ("file:line") is stored with the paper; `label`
    names the record in error messages (source and, say, a BibTeX key).
    `bulk` records come from exports that often lack abstracts: those are skipped
    with one warning per file instead of refused. `categories` feed `--where`.
    """

    fields: dict
    source: str
    label: str = ""
    bulk: bool = False
    categories: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)

    @property
    def where(self) -> str:
        return self.label or self.source


# A source is its file's path and where in the file: ":LINE" or ":KEY" (a Zotero item key, a
# line), or " item N" (an item of a JSON array); the locator holds no colon, space or slash.
_SOURCE = re.compile(r"(.+)(?::[^:\s/]+| item [0-9]+)", re.DOTALL)


def source_file(source: str) -> str:
    """The path of the file a paper's recorded source names (`Record.source`), whole: "refs
    old.jsonl:3" is of "refs old.jsonl", never of "refs"; "" when it names none."""
    found = _SOURCE.fullmatch(source)
    return found.group(1) if found else ""


def decode(path: Path) -> str:
    """The whole file as text: UTF-8 (a BOM allowed), no NUL bytes."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(
            f"{path}: cannot read file ({error.strerror}): fix its permissions or leave it out"
        ) from None
    if data.startswith(UTF16_BOMS) or b"\x00" in data:
        raise binary_file(path, data[:4096])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise not_utf8(path, line, data[error.start]) from None


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def binary_file(path: Path, start: bytes = b"") -> InputError:
    """The error for a file with NUL bytes: UTF-16 text (Windows' "Unicode") said as such."""
    encoding = utf16_encoding(start)
    if encoding:
        return InputError(
            f"{path}: {encoding} text, not UTF-8: re-save it as UTF-8 (e.g. `iconv -f {encoding} -t"
            " UTF-8`)"
        )
    return InputError(
        f"{path}: looks like a binary file (contains NUL bytes): give a UTF-8 text file"
    )


def utf16_encoding(start: bytes) -> str:
    """ "UTF-16LE" or "UTF-16BE" when `start` (a file's first bytes) is UTF-16 text, else ""."""
    if start.startswith(b"\xff\xfe"):
        return "UTF-16LE"
    if start.startswith(b"\xfe\xff"):
        return "UTF-16BE"
    pairs = len(start) // 2
    if pairs < 2:
        return ""
    # Without a BOM: text in UTF-16 has a NUL in every (or nearly every) other byte, none in the
    # rest.
    even, odd = start[0 : 2 * pairs : 2].count(0), start[1 : 2 * pairs : 2].count(0)
    for nuls, others, name in ((odd, even, "UTF-16LE"), (even, odd, "UTF-16BE")):
        if nuls >= 0.7 * pairs and others == 0:
            try:
                text = start[: 2 * pairs].decode(name.lower())
            except UnicodeDecodeError:
                return ""
            if all(char.isprintable() or char in "\t\r\n" for char in text):
                return name
    return ""


def not_utf8(path: Path, line: int, byte: int) -> InputError:
    return InputError(
        f"{path} line {line}: not valid UTF-8 (byte 0x{byte:02x}): re-save the file as UTF-8"
    )


def iter_lines(path: Path) -> Generator[tuple[int, str], None, None]:
    """(line number, text) of every non-blank line, read a line at a time (the arXiv
    snapshot is gigabytes): the same checks as `decode`, line by line."""
    try:
        stream = open(path, "rb")
    except OSError as error:
        raise InputError(
            f"{path}: cannot read file ({error.strerror}): fix its permissions or leave it out"
        ) from None
    with stream:
        start = stream.peek(4096)[:4096] if hasattr(stream, "peek") else b""
        if start.startswith(UTF16_BOMS):
            raise binary_file(path, start)
        for number, raw in enumerate(stream, start=1):
            if b"\x00" in raw:
                raise binary_file(path, start)
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise not_utf8(path, number, raw[error.start]) from None
            if line.strip():
                yield number, line.rstrip("\r\n")


def parse_json_line(path: Path, number: int, line: str):
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path} line {number}: not valid JSON ({error.msg}): fix or remove the line"
        ) from None
    except RecursionError:
        raise InputError(
            f"{path} line {number}: JSON nested too deeply: give one flat object a line"
        ) from None


def expect(record_label: str, value, kinds, what: str):
    """`value` when it is of one of `kinds` (or None), else an InputError naming the record."""
    if value is None or isinstance(value, kinds) and not isinstance(value, bool):
        return value
    raise InputError(
        f"{record_label}: '{what}' must be {_describe(kinds)}, got {type(value).__name__}"
    )


def _describe(kinds) -> str:
    names = {str: "text", int: "a number", float: "a number", list: "a list", dict: "an object"}
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(dict.fromkeys(names.get(kind, kind.__name__) for kind in kinds))


def year_from_text(text) -> int | None:
    """The first four-digit year in a date such as '2020-03-01' or 'Mon, 2 Apr 2007 19:18:42
    GMT'."""
    import re

    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        return None
    found = re.search(r"(?<!\d)(\d{4})(?!\d)", text)
    return int(found.group(1)) if found else None


def strip_prefix(value: str, *prefixes: str) -> str:
    for prefix in prefixes:
        if value.lower().startswith(prefix):
            return value[len(prefix) :]
    return value
