"""BibTeX entries: the entry type the venue calls for, fields that BibTeX reads back as written.

BibTeX ends a braced field where its braces balance, counting every `{` and `}`, escaped
or not (`\\}` closes a brace for BibTeX). So a field value written here has balanced braces
by BibTeX's count: prose is escaped for LaTeX, and inline maths is kept as written only when
it balances (`\\{`/`\\}` in maths are written `\\lbrace{}`/`\\rbrace{}`, which typeset the same);
maths that still does not balance is escaped like prose. Titles and abstracts are read by the
one LaTeX policy of every document (corpus.latex) before they are escaped.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from ..corpus.latex import latex_text, split_maths
from ..corpus.papers import Paper
from ..errors import caller_stacklevel

__all__ = [
    "EntryGaps",
    "IncompleteEntriesWarning",
    "arxiv_id",
    "bibtex_entry",
    "bibtex_escape",
    "entry_type",
    "missing_fields",
]

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\textbraceleft{}",
    "}": r"\textbraceright{}",
    "%": r"\%",
    "&": r"\&",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "^": r"\textasciicircum{}",
    "~": r"\textasciitilde{}",
}
_SPECIAL_RE = re.compile(r"[\\{}%&$#_^~]")


def bibtex_escape(text: str) -> str:
    """A field value safe inside BibTeX braces, on one line: the text as corpus.latex reads it,
    LaTeX specials escaped, inline maths kept where BibTeX's brace count allows it."""
    out = []
    for piece, maths in split_maths(latex_text(text)):
        if maths:
            kept = re.sub(
                r"(?<!\\)%", r"\%", piece.replace("\\{", r"\lbrace{}").replace("\\}", r"\rbrace{}")
            )
            if _balanced(kept):
                out.append(kept)
                continue
        out.append(_SPECIAL_RE.sub(lambda match: _SPECIAL[match.group()], piece))
    return "".join(out)


def _balanced(text: str) -> bool:
    """Whether the braces balance as BibTeX counts them: every brace, a backslash before it or
    not."""
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


# ---------------------------------------------------------------- entry types

_NEW_ARXIV = r"\d{4}\.\d{4,5}(?:v\d+)?"
_OLD_ARXIV = r"[a-z][a-z.-]*(?:\.[A-Z]{2})?/\d{7}(?:v\d+)?"
_ARXIV_ID = re.compile(rf"(?:arxiv:)?({_NEW_ARXIV}|{_OLD_ARXIV})", re.IGNORECASE)
_ARXIV_URL = re.compile(
    rf"https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/({_NEW_ARXIV}|{_OLD_ARXIV})",
    re.IGNORECASE,
)
_ARXIV_VENUE = re.compile(r"\b(?:arxiv|corr)\b", re.IGNORECASE)
_CONFERENCE = re.compile(
    r"\b(?:conference|proceedings|proc\.|workshops?|symposium|congress|meeting|neurips|nips|icml|iclr|acl|"
    r"emnlp|naacl|eacl|coling|aacl|cvpr|iccv|eccv|wacv|bmvc|aaai|ijcai|kdd|sigir|sigmod|vldb|www|wsdm|cikm|"
    r"recsys|aistats|uai|colt|corl|icra|iros|interspeech|icassp|soda|stoc|focs|icalp|chi|uist|osdi|sosp|"
    r"nsdi|eurosys|isca|micro|asplos|pldi|popl|icse|fse|ccs|usenix|ndss|miccai|ismir|lrec|conll)\b",
    re.IGNORECASE,
)
# Words that make a venue a journal even beside a conference's name ("Transactions of the ACL",
# "Proceedings of the National Academy of Sciences").
_JOURNAL_WORDS = re.compile(
    r"\b(?:journal|transactions|trans\.|letters|magazine|annals|bulletin|proceedings of the"
    r" (?:national academy|"
    r"ieee|royal society|american mathematical))\b",
    re.IGNORECASE,
)
_JOURNAL_NAMES = re.compile(
    r"\b(?:review|reviews|nature|science|pnas|jmlr|tmlr|tacl|tpami|ijcv|cell|plos|elife|acta|communications)\b",
    re.IGNORECASE,
)


def arxiv_id(paper: Paper) -> str:
    """The paper's arXiv identifier, from its URL or its ID; "" when it has none."""
    match = _ARXIV_URL.match(paper.url.strip())
    if match:
        return re.sub(r"v\d+$", "", match.group(1))
    match = _ARXIV_ID.fullmatch(paper.id.strip())
    if not match and _ARXIV_VENUE.search(paper.venue):  # "arXiv preprint arXiv:2101.00001"
        match = re.search(rf"arxiv:\s*({_NEW_ARXIV}|{_OLD_ARXIV})", paper.venue, re.IGNORECASE)
    return re.sub(r"v\d+$", "", match.group(1)) if match else ""


def entry_type(paper: Paper) -> tuple[str, str]:
    """(entry type, the field that holds the venue): a conference venue is `inproceedings`
    with `booktitle`, a journal `article` with `journal`, anything else (arXiv, a venue of no
    known kind, none) `misc`, with the venue as `howpublished`."""
    venue = paper.venue
    if not venue or _ARXIV_VENUE.search(venue) and not _CONFERENCE.search(venue):
        return "misc", "howpublished"
    if _JOURNAL_WORDS.search(venue):
        return "article", "journal"
    if _CONFERENCE.search(venue):
        return "inproceedings", "booktitle"
    if _JOURNAL_NAMES.search(venue):
        return "article", "journal"
    return "misc", "howpublished"


# The field that holds the venue in an entry of a type the input gave.
_VENUE_FIELD = {
    "article": "journal",
    "inproceedings": "booktitle",
    "conference": "booktitle",
    "incollection": "booktitle",
    "inbook": "booktitle",
}


def bibtex_entry(paper: Paper, key: str) -> str:
    """A paper read from a .bib: its entry as it was written (type and every field). Any other
    paper: an entry of the type its input gave (a Zotero item's) or else the venue calls for,
    with the metadata the paper has and nothing made up; an arXiv paper has `eprint` and
    `archivePrefix`; the BibTeX fields its input gave besides (a DOI, pages) follow."""
    given = dict(paper.bibtex_fields)
    if (
        paper.entry_type and "title" in given
    ):  # read from a .bib: the entry comes back as it went in
        body = ",\n".join(
            f"  {name} = {{{_as_written(value)}}}" for name, value in paper.bibtex_fields
        )
        return f"@{paper.entry_type}{{{key},\n{body}\n}}\n\n"
    kind, venue_field = entry_type(paper)
    if paper.entry_type:
        kind, venue_field = paper.entry_type, _VENUE_FIELD.get(paper.entry_type, "howpublished")
    fields = [("title", "{" + bibtex_escape(paper.title or paper.handle) + "}")]
    if paper.authors:
        fields.append(("author", " and ".join(_author(name) for name in paper.authors)))
    if paper.venue:
        fields.append((venue_field, bibtex_escape(paper.venue)))
    if paper.year:
        fields.append(("year", bibtex_escape(str(paper.year))))
    eprint = arxiv_id(paper)
    if eprint:
        fields += [("eprint", bibtex_escape(eprint)), ("archivePrefix", "arXiv")]
    if paper.url:
        fields.append(("url", bibtex_url(paper.url)))
    if paper.code_links:
        fields.append(
            (
                "note",
                "Code: " + ", ".join(f"\\url{{{_note_url(link)}}}" for link in paper.code_links),
            )
        )
    fields.append(("abstract", bibtex_escape(paper.abstract)))
    made = {name for name, _ in fields}
    fields += [
        (name, _as_written(value)) for name, value in paper.bibtex_fields if name not in made
    ]
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{kind}{{{key},\n{body}\n}}\n\n"


# The fields an entry may lack that a reader of the bibliography misses, and what BibTeX does then.
REPORTED_GAPS = {
    "year": "BibTeX styles print them without one",
    "author": "BibTeX styles print them without one and sort them by title",
}


class IncompleteEntriesWarning(UserWarning):
    """Entries written without a field a bibliography shows (a year, an author)."""


def missing_fields(paper: Paper) -> tuple[str, ...]:
    """The fields of REPORTED_GAPS that `bibtex_entry(paper, ...)` writes no value for."""
    given = {name.lower() for name, value in paper.bibtex_fields if value.strip()}
    if paper.entry_type and "title" in given:  # written as it was read
        has = {"year": bool(given & {"year", "date"}), "author": bool(given & {"author", "editor"})}
    else:
        has = {"year": bool(paper.year), "author": bool(paper.authors)}
    return tuple(name for name in REPORTED_GAPS if not has[name])


class EntryGaps:
    """Counts the entries written and those lacking each field of REPORTED_GAPS; `warn` names
    each gap once, with a few of its entries' keys."""

    SHOWN = 3

    def __init__(self) -> None:
        self.entries = 0
        self.without: dict[str, list[str]] = {name: [] for name in REPORTED_GAPS}

    def note(self, paper: Paper, key: str) -> None:
        self.entries += 1
        for name in missing_fields(paper):
            self.without[name].append(key)

    def messages(self) -> list[str]:
        messages = []
        for name, keys in self.without.items():
            if not keys:
                continue
            shown = ", ".join(keys[: self.SHOWN]) + (", ..." if len(keys) > self.SHOWN else "")
            entries = "entry has" if self.entries == 1 else "entries have"
            messages.append(
                f"{len(keys)} of {self.entries} BibTeX {entries} no {name} ({shown}):"
                f" {REPORTED_GAPS[name]}"
            )
        return messages

    def warn(self) -> None:
        import warnings

        for message in self.messages():
            warnings.warn(message, IncompleteEntriesWarning, stacklevel=caller_stacklevel())


def _as_written(value: str) -> str:
    """A field value as the input wrote it (BibTeX source) when BibTeX can read it back, on one
    line; else escaped like prose."""
    value = " ".join(value.split())
    return value if _balanced(value) else bibtex_escape(value)


def _author(name: str) -> str:
    """One name of the `author` list; a name holding the word "and" is braced, so that BibTeX
    does not split it into two people."""
    escaped = bibtex_escape(name)
    return f"{{{escaped}}}" if re.search(r"\band\b", escaped, re.IGNORECASE) else escaped


def bibtex_url(url: str) -> str:
    """A URL as the `url` field holds it (verbatim, as biblatex and reference managers read it):
    only the characters that could end the field or the line (braces, backslashes, spaces)
    are percent-encoded."""
    return quote(url.strip(), safe="".join(chr(c) for c in range(33, 127) if chr(c) not in "{}\\"))


def _note_url(url: str) -> str:
    """A URL inside `\\url{...}` in another field's text: `%` and `#` escaped for LaTeX as well."""
    return bibtex_url(url).replace("%", r"\%").replace("#", r"\#")
