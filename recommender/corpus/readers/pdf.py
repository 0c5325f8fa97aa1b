"""A PDF given to `papers build` (alone or in a folder): one paper, its title from the PDF's
metadata or else its first line, its text the abstract or opening of its first pages
(corpus/fulltext.py), its ID the first DOI written in it or else the file's name. A PDF that
cannot be read (damaged, encrypted, too large, pictures of pages) is left out with one line naming
it: it never stops the build."""

from __future__ import annotations

import warnings
from pathlib import Path

from ...errors import caller_stacklevel
from .base import InputWarning, Record

NAME = "PDF"


def read(path: Path) -> list[Record]:
    from ..fulltext import PDF, PdfLibraryMissing, PdfUnreadable, abstract_of, read_pdf, say_once

    try:
        found = read_pdf(path)
    except PdfLibraryMissing as error:
        say_once(f"{error}; until then PDFs given alone are left out")
        return []
    except PdfUnreadable as error:
        warnings.warn(f"{error}: left out", InputWarning, stacklevel=caller_stacklevel())
        return []
    if not found.title:
        warnings.warn(
            f"{path}: PDF has no title in its metadata or first line: left out",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
        return []
    fields = {
        "id": found.doi or path.stem,
        "title": found.title,
        "abstract": abstract_of(found.text),
        "url": f"https://doi.org/{found.doi}" if found.doi else "",
    }
    return [Record(fields, str(path), str(path), bulk=True, extra={"text_from": PDF})]
