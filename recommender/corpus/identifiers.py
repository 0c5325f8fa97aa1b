"""A paper's persistent identifier (arXiv ID or DOI), from its URL or its ID.

The same work reaches us from different sources under different IDs: a BibTeX
key, an arXiv ID, an OpenAlex work ID, a DOI. What they share, when anything, is
the arXiv ID or the DOI, which the readers put in the URL (`arxiv.org/abs/...`,
`doi.org/...`) or use as the ID itself. Only the standard library is used.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

__all__ = ["bare_arxiv_id", "id_fault", "shown_id", "work_identifier"]

# C0 and C1 control characters (terminal escapes among them) and the lone surrogates a JSON
# "\ud800" escape can produce, which UTF-8 cannot encode.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def id_fault(paper_id: str) -> str:
    """What makes `paper_id` unfit to be a paper's ID ("" if nothing): a tab, line break or
    control character, or an invisible or text-direction character (U+202E, U+200B: two IDs that
    look alike). The one rule for every reader and fetcher."""
    if CONTROL.search(paper_id) or any(c in paper_id for c in "\t\n\r\v\f\u2028\u2029"):
        return "contains a tab, line break or control character: give an ID on one line"
    hidden = next((c for c in paper_id if unicodedata.category(c) == "Cf"), None)
    if hidden is not None:
        return (
            f"contains an invisible or text-direction character (U+{ord(hidden):04X}"
            f" {unicodedata.name(hidden, 'format character')}): give an ID of visible characters"
        )
    return ""


def shown_id(paper_id: str) -> str:
    """An ID as a message shows it: quoted, its control and invisible characters escaped."""
    if id_fault(paper_id).startswith("contains a tab"):
        return repr(paper_id)
    return "'" + paper_id.encode("unicode_escape").decode("ascii") + "'"


# arxiv.org/abs/2101.00001v2, /pdf/2101.00001.pdf, old style /abs/hep-th/9901001
_ARXIV_URL = re.compile(
    r"^https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/(.+?)(?:v\d+)?(?:\.pdf)?/?$",
    re.IGNORECASE,
)
_DOI_URL = re.compile(r"^https?://(?:dx\.)?doi\.org/(10\.\d{4,9}/\S+)$", re.IGNORECASE)
# An ID that is itself one: "2101.00001", "2101.00001v3", "hep-th/9901001",
# "10.1145/3292500.3330701"
_ARXIV_ID = re.compile(r"^(\d{4}\.\d{4,5}|[a-z][a-z.-]*/\d{7})(?:v\d+)?$", re.IGNORECASE)
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
# arXiv's own DOIs (DataCite, 2022 on) name the arXiv ID: 10.48550/arXiv.2101.00001
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)


# "arXiv:2101.00001", "arxiv: 2101.00001v2": an arXiv ID written with its prefix.
_PREFIXED_ARXIV = re.compile(r"^arxiv:\s*(.+)$", re.IGNORECASE)


def bare_arxiv_id(paper_id: str) -> str:
    """An ID written "arXiv:2101.00001" as the arXiv ID itself ("2101.00001", its version
    kept); any other ID as it is."""
    found = _PREFIXED_ARXIV.match(paper_id.strip())
    return found.group(1).strip() if found and _ARXIV_ID.match(found.group(1).strip()) else paper_id


def work_identifier(url: str, paper_id: str = "") -> str:
    """ "arxiv:<id>" or "doi:<doi>" (casefolded, no arXiv version), or "" when neither the URL
    nor the ID gives one."""
    url = unquote(url.strip())
    found = _ARXIV_URL.match(url)
    if found and _ARXIV_ID.match(found.group(1)):
        return _arxiv(found.group(1))
    found = _DOI_URL.match(url)
    if found:
        return _doi(found.group(1))
    paper_id = bare_arxiv_id(paper_id.strip())
    if _ARXIV_ID.match(paper_id):
        return _arxiv(paper_id)
    if _DOI.match(paper_id):
        return _doi(paper_id)
    return ""


def _arxiv(arxiv_id: str) -> str:
    found = _ARXIV_ID.match(arxiv_id)
    assert found is not None, arxiv_id  # every caller passes an identifier _ARXIV_ID matched
    return "arxiv:" + found.group(1).casefold()


def _doi(doi: str) -> str:
    found = _ARXIV_DOI.match(doi)
    if found and _ARXIV_ID.match(found.group(1)):
        return _arxiv(found.group(1))
    return "doi:" + doi.casefold()
