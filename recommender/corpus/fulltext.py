"""The text of a paper that has no abstract: from a full text already extracted (Zotero's
`.zotero-ft-cache`), else from its PDF (the first pages), else its title alone.

From a full text the abstract is kept when the text has one (what follows an "Abstract" heading,
up to the introduction), else the opening of the body; both bounded (`OPENING` characters).

PDFs are read with pypdfium2 (PDFium): the first `PDF_PAGES` pages, at most `PDF_SECONDS` a PDF
(pages past that are left unread), and no file over `PDF_BYTES`. A PDF that cannot be read
(damaged, encrypted, too large, or pictures of pages with no text) is `PdfUnreadable`, whose
message names the file and why: a reader says it in one line and goes on. Nothing is written
anywhere; nothing is fetched."""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import caller_stacklevel
from .readers.base import InputWarning
from .text import ABSTRACT, FULL_TEXT, PDF, TEXT_FROM, TITLE_ONLY, collapse_spaces

__all__ = [
    "ABSTRACT",
    "FULL_TEXT",
    "PDF",
    "TEXT_FROM",
    "TITLE_ONLY",
    "TextKinds",
    "PdfLibraryMissing",
    "PdfText",
    "PdfUnreadable",
    "abstract_of",
    "complete",
    "read_full_text",
    "read_pdf",
    "say_once",
    "text_of_files",
]


# At most this many characters of an abstract found in a full text, or of a body's opening.
OPENING = 2_000
# A full text is read up to this many bytes: its opening is all that is kept.
FULL_TEXT_BYTES = 200_000
PDF_PAGES = 3
PDF_SECONDS = 10.0
PDF_BYTES = 200 * 1024 * 1024
# A PDF whose first pages give fewer letters than this has no text layer worth the name.
PDF_MIN_LETTERS = 40

_ABSTRACT_HEADING = re.compile(
    r"(?:^|\n)[ \t]*(?:a\s?b\s?s\s?t\s?r\s?a\s?c\s?t|summary)\b[ \t]*[.:—–-]?[ \t]*",
    re.IGNORECASE,
)
_INTRODUCTION = re.compile(
    r"(?:^|\n)[ \t]*(?:(?:\d{1,2}|[IVX]{1,3})\.?[ \t]*)?(?:introduction|keywords|index terms|"
    r"ccs concepts|background)\b",
    re.IGNORECASE,
)
_HYPHEN_BREAK = re.compile(r"(\w)-[ \t]*\r?\n[ \t]*(\w)")
_DOI = re.compile(r"\b10\.\d{4,9}/[^\s\"<>]+")


class TextKinds:
    """How many papers have texts of each kind (a build's line says it)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, kind: str) -> None:
        self._counts[kind] = self._counts.get(kind, 0) + 1

    def counts(self) -> tuple[tuple[str, int], ...]:
        """(kind, count) in the order of TEXT_FROM, the kinds with none left out."""
        return tuple((kind, self._counts[kind]) for kind in TEXT_FROM if kind in self._counts)


class PdfUnreadable(Exception):
    """A PDF whose text cannot be had; the message says which file and why, in one line."""


class PdfLibraryMissing(PdfUnreadable):
    """No PDF can be read here (pypdfium2 is not installed): said once a process."""


_said: set[str] = set()  # the one-a-process warnings already given


@dataclass(frozen=True)
class PdfText:
    title: str  # from the PDF's metadata, else its first line of text ("" when neither)
    text: str  # the first pages' text
    doi: str  # the first DOI written in it, or ""


def abstract_of(text: str) -> str:
    """What a full text says of itself: its abstract when it has one, else its opening; at most
    OPENING characters, ending at a sentence's end where one is near."""
    text = _HYPHEN_BREAK.sub(r"\1\2", text.replace("\r\n", "\n").replace("\x0c", "\n"))
    heading = _ABSTRACT_HEADING.search(text[: OPENING * 4])
    if heading:
        rest = text[heading.end() :]
        end = _INTRODUCTION.search(rest)
        found = collapse_spaces(rest[: end.start()] if end else rest)
        if len(found) >= 100:  # an "Abstract" heading with nothing under it: use the opening
            return _bounded(found)
    return _bounded(collapse_spaces(text))


def _bounded(text: str) -> str:
    if len(text) <= OPENING:
        return text
    cut = text[:OPENING]
    end = max(cut.rfind(". "), cut.rfind("? "), cut.rfind("! "))
    return cut[: end + 1] if end > OPENING // 2 else cut.rstrip()


def read_full_text(path: Path) -> str:
    """The opening of an extracted full text (UTF-8, its first FULL_TEXT_BYTES); "" when it cannot
    be read."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(FULL_TEXT_BYTES)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def read_pdf(path: Path) -> PdfText:
    """The title, first pages' text and DOI of a PDF (PdfUnreadable when it has none to give)."""
    try:
        import pypdfium2
    except ImportError:
        raise PdfLibraryMissing(
            "PDFs cannot be read without pypdfium2: install it (pip install pypdfium2)"
        ) from None
    try:
        size = path.stat().st_size
    except OSError as error:
        raise PdfUnreadable(f"{path}: cannot read the PDF ({error.strerror})") from None
    if not path.is_file():  # a pipe or a device would never end
        raise PdfUnreadable(f"{path}: not a regular file")
    if size > PDF_BYTES:
        raise PdfUnreadable(
            f"{path}: PDF of {size / 1024 / 1024:,.0f} MB left unread (over"
            f" {PDF_BYTES // 1024 // 1024} MB)"
        )
    start = time.monotonic()
    try:
        document = pypdfium2.PdfDocument(path)
    except pypdfium2.PdfiumError as error:
        why = "encrypted: it needs a password" if "password" in str(error).lower() else "damaged"
        raise PdfUnreadable(f"{path}: PDF {why} ({error})") from None
    except OSError as error:
        raise PdfUnreadable(f"{path}: cannot read the PDF ({error})") from None
    try:
        pages = []
        for number in range(min(PDF_PAGES, len(document))):
            if time.monotonic() - start > PDF_SECONDS:
                break
            page = document[number]
            textpage = page.get_textpage()
            try:
                pages.append(textpage.get_text_range())
            finally:
                textpage.close()
                page.close()
        try:
            title = collapse_spaces(document.get_metadata_dict().get("Title", ""))
        except pypdfium2.PdfiumError:
            title = ""
    except pypdfium2.PdfiumError as error:
        raise PdfUnreadable(f"{path}: PDF damaged ({error})") from None
    finally:
        document.close()
    text = "\n".join(pages)
    if sum(character.isalpha() for character in text) < PDF_MIN_LETTERS:
        raise PdfUnreadable(f"{path}: PDF has no text on its first pages (pictures of pages?)")
    if not title or title.lower().endswith((".pdf", ".doc", ".docx", ".dvi")):
        title = next(
            (line for line in map(collapse_spaces, text.splitlines()) if _titled(line)), ""
        )
        title = title[:300]
    found = _DOI.search(text)
    return PdfText(title, text, found.group().rstrip(".,;)]") if found else "")


_NOT_A_TITLE = re.compile(r"^(?:arxiv:|doi:|https?:|www\.|preprint|page \d|\d)", re.IGNORECASE)


def _titled(line: str) -> bool:
    """Whether a PDF's line may be its title: words, not an arXiv stamp, a link or a page number."""
    return sum(character.isalpha() for character in line) >= 8 and not _NOT_A_TITLE.match(line)


def text_of_files(
    full_texts: list[Path], pdfs: list[Path], where: str
) -> tuple[str, str, str] | None:
    """(text, what it is, the PDF's title or "") for an item without an abstract, from the first
    of its extracted full texts, else the first of its PDFs that gives text; None when none does.
    A PDF that cannot be read is said in one line (an InputWarning naming it and `where`)."""
    for path in full_texts:
        text = abstract_of(read_full_text(path))
        if text:
            return text, FULL_TEXT, ""
    for path in pdfs:
        try:
            read = read_pdf(path)
        except PdfLibraryMissing as error:
            say_once(
                f"{error}; until then papers without an abstract are read by their titles only"
            )
            return None
        except PdfUnreadable as error:
            warnings.warn(
                f"{where}: {error}: read by its title only",
                InputWarning,
                stacklevel=caller_stacklevel(),
            )
            continue
        return abstract_of(read.text), PDF, read.title
    return None


def say_once(message: str) -> None:
    """An InputWarning given once a process (the same cause for every PDF)."""
    if message not in _said:
        _said.add(message)
        warnings.warn(message, InputWarning, stacklevel=caller_stacklevel())


def complete(fields: dict, full_texts: list[Path], pdfs: list[Path], where: str) -> str | None:
    """What a record's text is (Paper.text_from), its abstract filled in from its files where it
    has none (`text_of_files`) and its title from its PDF where it has none (or a file name);
    None when it has neither abstract nor title (not a paper)."""
    abstract = fields.get("abstract")
    if isinstance(abstract, str) and abstract.strip():
        return ABSTRACT
    found = text_of_files(full_texts, pdfs, where) if full_texts or pdfs else None
    title = fields.get("title")
    title = title.strip() if isinstance(title, str) else ""
    if found and found[2] and (not title or title.lower().endswith(".pdf")):
        title = fields["title"] = found[2]
    if not title:
        return None
    if found is None:
        return TITLE_ONLY
    fields["abstract"] = found[0]
    return found[1]
