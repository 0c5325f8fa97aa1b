"""Reading papers from seed text, JSONL and CSV files into `Paper` records."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from ..errors import InputError
from .handles import derive_handle, extract_code_links, unique_handles
from .text import collapse_spaces, first_sentence

SUPPORTED_SUFFIXES = (".txt", ".jsonl", ".csv")
# A seed file opens with a heading line ("NeurIPS 2025 Papers"); an abstract is
# never this short, so a short single-line first paragraph with no closing
# punctuation is taken as the heading (and kept as each paper's venue).
HEADING_MAX_WORDS = 12
ID_LENGTH = 12


class InputWarning(UserWarning):
    """Something in the input a user may want to fix; the build goes on."""


class DuplicatePaperWarning(InputWarning):
    """The same paper twice in the input: kept once."""


@dataclass(frozen=True)
class Paper:
    """One paper: its ID, handle, text and whatever metadata the input gave."""

    id: str
    title: str
    abstract: str
    handle: str = ""
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str = ""
    url: str = ""
    code_links: tuple[str, ...] = ()
    source: str = ""

    @property
    def text(self) -> str:
        """The text that is embedded: title and abstract together."""
        if not self.title:
            return self.abstract
        separator = " " if self.title.rstrip()[-1:] in ".?!:" else ". "
        return f"{self.title.rstrip()}{separator}{self.abstract}"

    @property
    def label(self) -> str:
        """What to show where a title would be."""
        return self.title or self.handle

    @property
    def first_sentence(self) -> str:
        return first_sentence(self.abstract)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "handle": self.handle,
            "title": self.title,
            "abstract": self.abstract,
            "authors": list(self.authors),
            "year": self.year,
            "venue": self.venue,
            "url": self.url,
            "code_links": list(self.code_links),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Paper":
        return cls(
            id=data["id"],
            title=data.get("title", ""),
            abstract=data["abstract"],
            handle=data.get("handle", ""),
            authors=tuple(data.get("authors") or ()),
            year=data.get("year"),
            venue=data.get("venue", ""),
            url=data.get("url", ""),
            code_links=tuple(data.get("code_links") or ()),
            source=data.get("source", ""),
        )




def normalise_text(text: str) -> str:
    """Case- and whitespace-insensitive form used for IDs and duplicate detection."""
    return collapse_spaces(text).casefold()


def derive_id(title: str, abstract: str) -> str:
    """A short stable ID from the normalised text: same text, same ID, any run."""
    key = normalise_text(f"{title}\n{abstract}")
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:ID_LENGTH]


@dataclass
class _Record:
    """A paper as read, before IDs are checked and handles assigned."""

    fields: dict
    source: str
    extra: dict = field(default_factory=dict)


def read_papers(inputs: Iterable[str | Path]) -> list[Paper]:
    """Read every paper from the given files and folders.

    IDs given in the input are kept; others are derived from the text. The same
    text twice is kept once (with an `InputWarning` naming both places); one ID
    for two different texts is an `InputError`. Every paper gets a unique handle.
    """
    records: list[_Record] = []
    for path in _expand_inputs(inputs):
        records.extend(_read_file(path))
    return _assemble(records)


def _expand_inputs(inputs: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    inputs = list(inputs)
    if not inputs:
        raise InputError("no input given: name one or more files or folders of papers")
    for raw in inputs:
        path = Path(raw)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                raise InputError(
                    f"{path}: folder has no .txt, .jsonl or .csv files of papers"
                )
            files.extend(found)
        elif path.suffix.lower() in SUPPORTED_SUFFIXES:
            files.append(path)
        else:
            raise InputError(
                f"{path}: unsupported file type '{path.suffix or '(none)'}': use .txt (one abstract a paragraph), .jsonl or .csv"
            )
    return files


def _decode(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data:
        raise InputError(f"{path}: looks like a binary file (contains NUL bytes): give a UTF-8 text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError(
            f"{path} line {line}: not valid UTF-8 (byte 0x{data[error.start]:02x}): re-save the file as UTF-8"
        ) from None


def _read_file(path: Path) -> list[_Record]:
    text = _decode(path)
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        records = _read_seed_text(path, text)
    elif suffix == ".jsonl":
        records = _read_jsonl(path, text)
    else:
        records = _read_csv(path, text)
    if not records:
        raise InputError(f"{path}: no papers found")
    return records


def _read_seed_text(path: Path, text: str) -> list[_Record]:
    lines = text.splitlines()
    paragraphs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(lines, start=1):
        if line.strip():
            if not current:
                start = number
            current.append(line.strip())
        elif current:
            paragraphs.append((start, current))
            current = []
    if current:
        paragraphs.append((start, current))
    heading = ""
    if paragraphs:
        first_line, first = paragraphs[0]
        looks_like_heading = len(first[0].split()) <= HEADING_MAX_WORDS and not first[0].endswith((".", "!", "?"))
        if len(first) == 1 and len(paragraphs) > 1 and looks_like_heading:
            heading = first[0]
            paragraphs = paragraphs[1:]
    records = []
    for number, paragraph in paragraphs:
        abstract = " ".join(paragraph)
        records.append(_Record({"abstract": abstract, "venue": heading}, f"{path}:{number}"))
    return records


def _read_jsonl(path: Path, text: str) -> list[_Record]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path} line {number}: not valid JSON ({error.msg}): fix or remove the line") from None
        except RecursionError:
            raise InputError(f"{path} line {number}: JSON nested too deeply: give one flat object a line") from None
        if not isinstance(data, dict):
            raise InputError(f"{path} line {number}: expected a JSON object with 'abstract', got {type(data).__name__}")
        records.append(_Record(data, f"{path}:{number}"))
    return records


def _read_csv(path: Path, text: str) -> list[_Record]:
    # csv's default field limit (128 KiB) would refuse a long abstract; no field
    # can be longer than the file. The limit is process-wide, so put it back.
    limit = csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    try:
        return _read_csv_rows(path, text)
    finally:
        csv.field_size_limit(limit)


def _read_csv_rows(path: Path, text: str) -> list[_Record]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader)]
    except csv.Error as error:
        raise InputError(f"{path} line 1: not valid CSV ({error})") from None
    if "abstract" not in header:
        raise InputError(
            f"{path}: CSV has no 'abstract' column (columns: {', '.join(header) or 'none'}): name the columns id, title, abstract"
        )
    records = []
    try:
        for row in reader:
            number = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InputError(
                    f"{path} line {number}: {len(row)} fields where the header has {len(header)}: quote fields that contain commas"
                )
            records.append(_Record(dict(zip(header, row)), f"{path}:{number}"))
    except csv.Error as error:
        raise InputError(f"{path} line {reader.line_num}: not valid CSV ({error})") from None
    return records


# C0 and C1 control characters (terminal escapes among them) and the lone
# surrogates a JSON "\ud800" escape can produce, which UTF-8 cannot encode.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _clean(value) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        value = str(value)
    return collapse_spaces(_CONTROL.sub(" ", value))


def _text_field(record: _Record, name: str, numbers: bool = False) -> str:
    """A text field of a record, cleaned; a list or object there is an input error."""
    value = record.fields.get(name)
    if value is None or isinstance(value, str) or (numbers and isinstance(value, (int, float)) and not isinstance(value, bool)):
        return _clean(value)
    raise InputError(f"{record.source}: '{name}' must be text, got {type(value).__name__}")


def _paper_from_record(record: _Record) -> Paper:
    data = record.fields
    if "abstract" not in data:
        raise InputError(f"{record.source}: record has no 'abstract' field: every paper needs one")
    abstract = _text_field(record, "abstract")
    if not abstract:
        raise InputError(f"{record.source}: abstract is empty: give the text or remove the record")
    title = _text_field(record, "title")
    given_id = _text_field(record, "id", numbers=True)
    authors = data.get("authors") or ()
    if isinstance(authors, str):
        authors = [name for name in (part.strip() for part in re.split(r";|\band\b", authors)) if name]
    elif not isinstance(authors, (list, tuple)):
        raise InputError(f"{record.source}: 'authors' must be a list or a string")
    if not all(name is None or isinstance(name, str) for name in authors):
        raise InputError(f"{record.source}: 'authors' must be a list of names (strings)")
    year = data.get("year")
    if year in ("", None):
        year = None
    else:
        try:
            year = int(str(year).strip())
        except ValueError:
            raise InputError(f"{record.source}: year '{year}' is not a whole number") from None
    return Paper(
        id=given_id or derive_id(title, abstract),
        title=title,
        abstract=abstract,
        authors=tuple(_clean(name) for name in authors if _clean(name)),
        year=year,
        venue=_text_field(record, "venue", numbers=True),
        url=_text_field(record, "url"),
        code_links=extract_code_links(abstract),
        source=record.source,
    )


def _assemble(records: list[_Record]) -> list[Paper]:
    papers: list[Paper] = []
    by_text: dict[str, Paper] = {}
    by_id: dict[str, Paper] = {}
    for record in records:
        paper = _paper_from_record(record)
        key = normalise_text(f"{paper.title}\n{paper.abstract}")
        if key in by_text:
            kept = by_text[key]
            warnings.warn(
                f"{paper.source}: same paper as {kept.source}; kept once", DuplicatePaperWarning, stacklevel=2
            )
            continue
        if paper.id in by_id:
            raise InputError(
                f"{paper.source}: ID '{paper.id}' is also used by {by_id[paper.id].source} for a different paper: give each paper its own ID"
            )
        by_text[key] = paper
        by_id[paper.id] = paper
        papers.append(paper)
    # Disambiguate in ID order so a paper's handle does not depend on file order.
    order = sorted(range(len(papers)), key=lambda i: papers[i].id)
    handles = unique_handles([derive_handle(papers[i].title, papers[i].abstract) for i in order])
    handle_of = {i: handle for i, handle in zip(order, handles)}
    return [replace(paper, handle=handle_of[i]) for i, paper in enumerate(papers)]
