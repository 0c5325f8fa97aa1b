"""A paper's persistent identifier (arXiv ID or DOI), from its URL or its ID.

The same work reaches us from different sources under different IDs: a BibTeX
key, an arXiv ID, an OpenAlex work ID, a DOI. What they share, when anything, is
the arXiv ID or the DOI, which the readers put in the URL (`arxiv.org/abs/...`,
`doi.org/...`) or use as the ID itself. Only the standard library is used.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["bare_arxiv_id", "work_identifier"]

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
