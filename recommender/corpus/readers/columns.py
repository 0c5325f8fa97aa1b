"""The column names (CSV) and keys (JSON records) that conference and library tools write,
read as our fields: `UID` (Mini-Conf), `paper_id`, `arxiv_id`, `DOI`, `Abstract Note` (Zotero),
`Source title` (Scopus), `keywords`/`tags`/`subjects` and the columns conferences group papers
by (`track`, `area`, `session`, `primary_area`) as categories, CMT's `Authors` (`Jane Doe
(MIT)*; ...`: affiliations and the contact star dropped), and so on.

Names are matched ignoring case, spaces and punctuation (`Paper ID`, `paper_id` and `paperId`
are one name). For each field the names are tried in order and a record takes the first one
that holds a value. Lists written as text are split on `|` or `;` (the separators exports use),
and author lists also on commas between full names; `Last, First` names are turned round.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...errors import InputError

# The columns conferences group their papers by (Mini-Conf's sessions, ACL's tracks, OpenReview's
# primary area): categories, whose names may hold commas ("Phonology, Morphology and Word
# Segmentation"), so a list of them is split on `|` or `;` only.
GROUPS = (
    "track",
    "tracks",
    "area",
    "areas",
    "primaryarea",
    "subjectarea",
    "subjectareas",
    "researcharea",
    "primarysubjectarea",
    "secondarysubjectareas",
    "session",
    "sessions",
)
# Our field: the names it is read from, most specific first.
ALIASES: dict[str, tuple[str, ...]] = {
    "id": (
        "id",
        "uid",
        "paperid",
        "arxivid",
        "arxiv",
        "doi",
        "key",
        "citationkey",
        "citekey",
        "bibtexkey",
        "identifier",
        "eprint",
    ),
    "title": ("title", "papertitle", "articletitle", "documenttitle"),
    "abstract": ("abstract", "abstractnote", "summary", "abstracttext", "paperabstract"),
    "authors": ("authors", "author", "authornames", "authorfullnames", "creators"),
    "year": (
        "year",
        "publicationyear",
        "pubyear",
        "date",
        "publicationdate",
        "published",
        "issued",
    ),
    "venue": (
        "venue",
        "journal",
        "booktitle",
        "conference",
        "publicationtitle",
        "publication",
        "sourcetitle",
        "containertitle",
        "journaltitle",
        "proceedings",
    ),
    "url": ("url", "link", "paperurl", "htmlurl", "pdfurl", "pdf"),
    # Every one of these that a record has is read (their lists joined).
    "categories": (
        "categories",
        "category",
        "keywords",
        "keyword",
        "tags",
        "tag",
        "subjects",
        "subject",
        "topics",
        "manualtags",
        "automatictags",
        "authorkeywords",
        "indexkeywords",
        *GROUPS,
    ),
}
# What our own outputs add to a paper (`papers list --format jsonl` read back): derived, not lost.
DERIVED = ("handle", "codelinks", "source", "score", "rank")
# Identifier columns that, when not the ID, still give the paper's link (and so its arXiv ID or
# DOI).
LINKS = {
    "doi": "https://doi.org/",
    "arxivid": "https://arxiv.org/abs/",
    "arxiv": "https://arxiv.org/abs/",
}
_PREFIXES = {
    "doi": (
        "https://doi.org/",
        "http://doi.org/",
        "https://dx.doi.org/",
        "http://dx.doi.org/",
        "doi:",
    ),
    "arxivid": ("arxiv:",),
    "arxiv": ("arxiv:",),
}
# Category columns whose values are words separated by spaces, as arXiv writes them ("cs.LG cs.CL").
SPACED = ("categories", "category")
FIELD_NAMES = ", ".join(ALIASES)


def folded(name: str) -> str:
    """A column name as compared: `Paper ID`, `paper_id` and `paperId` are all `paperid`."""
    return re.sub(r"[\W_]+", "", name.casefold())


_KNOWN = {alias: field for field, names in ALIASES.items() for alias in names}


class Columns:
    """Which of a file's columns (or keys) feed which of our fields; the others are not read."""

    def __init__(self) -> None:
        self.unread: dict[str, None] = {}  # in the order met
        self._seen: dict[str, str | None] = {}  # name as written -> its folded alias, or None

    def _alias(self, name: str) -> str | None:
        if name not in self._seen:
            alias = folded(name)
            if alias in _KNOWN:
                self._seen[name] = alias
            else:
                self._seen[name] = None
                if alias not in DERIVED and name.strip():
                    self.unread[name] = None
        return self._seen[name]

    def fields(self, where: str, data: dict) -> tuple[dict, tuple[str, ...]]:
        """Our fields of one record (a row as a dict, or a JSON object), and its categories."""
        by_alias: dict[str, object] = {}
        for name, value in data.items():
            alias = self._alias(name)
            if alias is not None and alias not in by_alias:
                by_alias[alias] = value
        fields: dict = {}
        for field, names in ALIASES.items():
            if field == "categories":
                continue
            present = [alias for alias in names if alias in by_alias]
            if not present:
                continue
            chosen = next((alias for alias in present if _has_value(by_alias[alias])), present[0])
            value = by_alias[chosen]
            if isinstance(value, str) and chosen in _PREFIXES:
                value = _strip_prefix(value.strip(), _PREFIXES[chosen])
            fields[field] = value
        if not _has_value(fields.get("url")):  # a DOI or arXiv ID column gives the link
            for alias, base in LINKS.items():
                value = by_alias.get(alias)
                if isinstance(value, str) and value.strip():
                    fields["url"] = base + _strip_prefix(value.strip(), _PREFIXES[alias])
                    break
        if isinstance(fields.get("authors"), str):
            fields["authors"] = split_authors(fields["authors"])
        if isinstance(fields.get("year"), str):
            found = re.search(r"(?<!\d)(\d{4})(?!\d)", fields["year"])
            fields["year"] = found.group(1) if found else fields["year"]
        categories: list[str] = []
        for alias in ALIASES["categories"]:
            if alias in by_alias:
                categories.extend(
                    split_categories(
                        where, by_alias[alias], spaced=alias in SPACED, commas=alias not in GROUPS
                    )
                )
        return fields, tuple(dict.fromkeys(categories))

    def unread_warning(self, path, what: str = "column") -> str | None:
        """The one warning for a file: the columns (or keys) none of our fields reads."""
        if not self.unread:
            return None
        names = ", ".join(f"'{name}'" for name in self.unread)
        plural = f"{what}s" if len(self.unread) > 1 else what
        return f"{path}: {plural} {names} not read (papers read {FIELD_NAMES}; see docs: Inputs)"

    def has(self, field: str, names: Iterable[str]) -> bool:
        return any(folded(name) in ALIASES[field] for name in names)


def _has_value(value) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, (list, tuple, dict)):
        return bool(value)
    return True


def _strip_prefix(value: str, prefixes: Iterable[str]) -> str:
    for prefix in prefixes:
        if value.lower().startswith(prefix):
            return value[len(prefix) :].strip()
    return value


def split_list(text: str) -> list[str]:
    """`a|b|c` or `a; b; c`: the parts, stripped, empty ones left out."""
    separator = "|" if "|" in text else ";" if ";" in text else None
    parts = text.split(separator) if separator else [text]
    return [part.strip() for part in parts if part.strip()]


def split_authors(text: str) -> list[str]:
    """Authors written as one text: separated by `|` or `;` (a `Last, First` name turned round),
    else by commas and `and` between full names (`Ada Lovelace, Alan Turing and Grace Hopper`);
    one name (`Lovelace, Ada`) otherwise."""
    if "|" in text or ";" in text:
        return [_turned(_without_affiliation(name)) for name in split_list(text)]
    text = _without_affiliation(text)
    parts = [part.strip() for part in re.split(r",\s*(?:and\s+)?|\s+and\s+", text) if part.strip()]
    if len(parts) > 1 and all(len(part.split()) > 1 for part in parts):
        return parts
    if "," not in text:
        return parts
    return [_turned(text.strip())]


def _without_affiliation(name: str) -> str:
    """CMT's `Jane Doe (MIT)*`: the name, without the affiliation and the contact author's star."""
    name = name.strip().removesuffix("*").rstrip()
    if name.endswith(")"):
        depth = 0
        # The "(" that opens the last group, groups nested inside it counted.
        for position in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[position], 0)
            if depth == 0:
                if name[:position].strip():  # never a name that is all parentheses
                    name = name[:position].rstrip()
                break
    return name.removesuffix("*").rstrip()


def _turned(name: str) -> str:
    """`Kingma, Diederik P.` -> `Diederik P. Kingma`; a name with no comma or several as it is."""
    if name.count(",") != 1:
        return name
    last, first = (part.strip() for part in name.split(","))
    return f"{first} {last}".strip() if first and last else name


def split_categories(where: str, value, spaced: bool = False, commas: bool = True) -> list[str]:
    """Categories as a list, or as text separated by `|`, `;` or (unless not `commas`) commas (or
    spaces, as arXiv writes them, in a `categories` column)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        if not all(isinstance(item, str) for item in value):
            raise InputError(f"{where}: categories must be a list of text")
        return [item.strip() for item in value if item.strip()]
    if not isinstance(value, str):
        raise InputError(
            f"{where}: categories must be text or a list of text, got {type(value).__name__}"
        )
    if "|" in value or ";" in value:
        return split_list(value)
    if "," in value and commas:
        return [part.strip() for part in value.split(",") if part.strip()]
    return value.split() if spaced else ([value.strip()] if value.strip() else [])
