"""Papers: the `Paper` record, and reading files of papers into them (the formats
themselves are in `readers`)."""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from ..errors import InputError, caller_stacklevel
from .handles import derive_handle, extract_code_links, unique_handles
from .readers import SUPPORTED_SUFFIXES, InputWarning, Record, read_records
from .text import collapse_spaces, first_sentence

if TYPE_CHECKING:
    from .where import Where

__all__ = [
    "InputWarning",
    "Paper",
    "PaperSet",
    "SUPPORTED_SUFFIXES",
    "derive_id",
    "normalise_text",
    "read_papers",
    "scan_papers",
    "text_key",
]

ID_LENGTH = 12
# Abstracts run to a few thousand characters; past this a text is likely a whole paper
# (~25,000 tokens, ~100 model windows), so the build warns that encoding it takes a while.
LONG_ABSTRACT = 100_000
# Files that name their formats in the message for a folder without papers.
FORMAT_NAMES = ".txt, .jsonl, .json, .csv, .bib or .pdf"
K = TypeVar("K", covariant=True)  # how a caller of `same_paper` names a paper it holds
# The input that names the default Zotero profile's database.
ZOTERO = "zotero:"


class DuplicatePaperWarning(InputWarning):
    """The same paper twice in the input: kept once."""


@dataclass(frozen=True, slots=True)  # slots: no __dict__ per paper (~0.3 GB less at 1M papers)
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
    categories: tuple[
        str, ...
    ] = ()  # as the input gave them: arXiv categories, BibTeX keywords, OpenAlex topics
    # What a reference manager gave (a .bib, Zotero): the user's citation key, the entry type
    # ("inproceedings"), and the BibTeX fields not modelled above, as (name, BibTeX source) pairs.
    citation_key: str = ""
    entry_type: str = ""
    bibtex_fields: tuple[tuple[str, str], ...] = ()
    # The reference manager's folders holding the paper, as paths ("Thesis/Related work"): the
    # index records them, and its tag store shows each as a tag (reading/tags.py).
    collections: tuple[str, ...] = ()
    # What `abstract` holds (corpus/fulltext.py): "abstract"; "full text" or "pdf", the abstract or
    # opening of the paper's own text where the input gave no abstract; "title only" (empty).
    text_from: str = "abstract"

    @property
    def text(self) -> str:
        """The text that is embedded: title and abstract together."""
        if not self.title:
            return self.abstract
        if not self.abstract:
            return self.title.rstrip()
        return f"{self.title.rstrip()}{self._separator()}{self.abstract}"

    @property
    def head(self) -> int:
        """How many characters of `text` the title takes (with its separator); 0 without a title."""
        if not self.title:
            return 0
        return len(self.title.rstrip()) + (len(self._separator()) if self.abstract else 0)

    def _separator(self) -> str:
        return " " if self.title.rstrip()[-1:] in ".?!:" else ". "

    @property
    def label(self) -> str:
        """What to show where a title would be."""
        return self.title or self.handle

    @property
    def first_sentence(self) -> str:
        return first_sentence(self.abstract)

    def to_dict(self, stored: bool = False) -> dict:
        """The paper as every JSON output shows it; `stored` (the index's copy) adds the
        BibTeX entry as the input wrote it."""
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
            "categories": list(self.categories),
            # Only when the input had them: most papers come from no reference manager.
            **({"citation_key": self.citation_key} if self.citation_key else {}),
            **({"entry_type": self.entry_type} if self.entry_type else {}),
            **(
                {"bibtex_fields": dict(self.bibtex_fields)} if self.bibtex_fields and stored else {}
            ),
            **({"collections": list(self.collections)} if self.collections else {}),
            # Every output says it; the index's copy only where it is not an abstract (the
            # default: its papers, and those of indexes built before it was kept, are abstracts).
            **({"text_from": self.text_from} if self.text_from != "abstract" or not stored else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Paper:
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
            categories=tuple(
                data.get("categories") or ()
            ),  # none in indexes built before they were kept
            citation_key=data.get("citation_key", ""),
            entry_type=data.get("entry_type", ""),
            bibtex_fields=tuple((data.get("bibtex_fields") or {}).items()),
            collections=tuple(data.get("collections") or ()),
            text_from=data.get("text_from") or "abstract",  # none in indexes built before
        )


def normalise_text(text: str) -> str:
    """Case- and whitespace-insensitive form used for IDs and duplicate detection."""
    return collapse_spaces(text).casefold()


def text_key(title: str, abstract: str) -> str:
    """What makes two papers the same paper: their title and abstract, ignoring case and spacing."""
    return normalise_text(f"{title}\n{abstract}")


def derive_id(title: str, abstract: str) -> str:
    """A short stable ID from the normalised text: same text, same ID, any run."""
    return hashlib.sha256(text_key(title, abstract).encode("utf-8")).hexdigest()[:ID_LENGTH]


def read_papers(
    inputs: Iterable[str | Path],
    where: Sequence[str] | Where | None = None,
    without_abstract: list | None = None,
    keep_withdrawn: bool = False,
) -> list[Paper]:
    """Read every paper from the given files and folders.

    IDs given in the input are kept; others are derived from the text. The same
    text twice is kept once (with an `InputWarning` naming both places); one ID
    for two different texts is an `InputError`. Every paper gets a unique handle.
    Records of bulk exports (BibTeX, arXiv, OpenAlex, Semantic Scholar, CSL-JSON)
    without an abstract are skipped with one warning a file. `where` keeps only
    the papers that match every condition (`["category=cs.LG", "year>=2020"]`).
    Given a list as `without_abstract`, those bulk records are not skipped but put
    in it, as (paper with an empty abstract, label), for the caller to match by ID
    (a reading list of papers the index holds). Withdrawn and desk-rejected submissions
    (OpenReview) are left out with one warning a file, unless `keep_withdrawn`.

    A build reads the same papers without holding them all: `scan_papers` and `PaperSet`.
    """
    kept: list[Paper] = []
    chosen = PaperSet(lambda row: kept[row].source)
    for paper in scan_papers(inputs, where, without_abstract, keep_withdrawn):
        if chosen.add(paper):
            kept.append(paper)
    return [replace(paper, handle=handle) for paper, handle in zip(kept, chosen.handles())]


def scan_papers(
    inputs: Iterable[str | Path],
    where: Sequence[str] | Where | None = None,
    without_abstract: list | None = None,
    keep_withdrawn: bool = False,
    left_out: dict[str, dict[str, int]] | None = None,
) -> Generator[Paper, None, None]:
    """Every paper of the inputs as it is read, duplicates included and without handles (see
    `PaperSet`), with read_papers' warnings and errors (and its `without_abstract`).

    Given a dict as `left_out`, each reference-manager collection some of whose items are not made
    papers gets there how many were not, by reason: {"Thesis": {"have no title": 4}}."""
    from .where import Where, parse_where  # here, not at import: `papers like` reads no file

    condition = where if isinstance(where, Where) or where is None else parse_where(where)
    scan = _Scan(condition, without_abstract, keep_withdrawn, left_out)
    for path in _expand_inputs(inputs):
        yield from scan.file(path)
    scan.check_matched()


@dataclass
class _FileTally:
    """What one file's records came to, for the warnings and errors said after it."""

    found: int = 0
    skipped: int = 0  # records of a bulk export without an abstract
    first_skipped: str = ""
    withdrawn: list[str] = field(default_factory=list)
    odd: list[str] = field(default_factory=list)  # records whose ID has a control character


@dataclass
class _Scan:
    """`scan_papers` from file to file: its settings, and how many records it read and matched."""

    condition: Where | None
    without_abstract: list | None
    keep_withdrawn: bool
    left_out: dict[str, dict[str, int]] | None
    matched: int = 0
    read: int = 0
    present: set[str] = field(default_factory=set)  # the conditions' fields some record has
    pdf_names: set[str] = field(default_factory=set)  # the IDs PDFs took from their file names

    def file(self, path: Path) -> Iterator[Paper]:
        """The papers of one file, then what it left out said (or an error where it left out
        every one)."""
        tally = _FileTally()
        for record in read_records(path):
            tally.found += 1
            paper = self._paper(record, path, tally)
            if paper is not None:
                yield paper
        if tally.found or path.suffix.lower() != ".pdf":  # a PDF that cannot be read: said
            _check_file(path, tally, self.without_abstract)
        self.read += tally.found

    def _paper(self, record: Record, path: Path, tally: _FileTally) -> Paper | None:
        """The record's paper; None for one left out (counted in `tally`)."""
        fault = _odd_id(record)
        if fault:
            tally.odd.append(fault)
            return None
        if self.condition is not None and not self.condition.matches(record):  # the cheap test
            if not self.matched:
                self.present |= self.condition.fields_present(record)
            _count_left_out(self.left_out, record, "do not match the conditions")
            return None
        if record.extra.get("withdrawn") and not self.keep_withdrawn:
            given = record.fields.get("id")
            tally.withdrawn.append(f"{given} ({record.where})" if given else record.where)
            _count_left_out(self.left_out, record, "are withdrawn")
            return None
        text_from = record.extra.get("text_from")
        if (
            record.bulk
            and _lacks_abstract(record)
            and (not text_from or self.without_abstract is not None)
        ):
            self._without_abstract(record, tally)
            return None
        self.matched += 1
        if path.suffix.lower() == ".pdf":
            _unique_pdf_id(record, path, self.pdf_names)
        return _paper_from_record(record)

    def _without_abstract(self, record: Record, tally: _FileTally) -> None:
        """A bulk export's record without an abstract: given to `without_abstract`, else
        skipped."""
        if self.without_abstract is not None:
            self.without_abstract.append(
                (_paper_from_record(record, empty_abstract=True), record.where)
            )
            return
        tally.skipped += 1
        tally.first_skipped = tally.first_skipped or record.where
        titled = _text_field(record, "title") if "title" in record.fields else ""
        _count_left_out(self.left_out, record, "have no abstract" if titled else "have no title")

    def check_matched(self) -> None:
        """An error when no paper was read, or none matched the conditions."""
        if self.condition is None and not self.matched and self.without_abstract is None:
            # Every record was left out with a warning of its own (PDFs without text, withdrawn
            # submissions): an index of nothing would find nothing.
            raise InputError(
                "no paper could be read: every record was left out (as said above): give PDFs"
                " with a text layer, or other files of papers"
            )
        if self.condition is not None and not self.matched:
            raise InputError(
                f"no paper matches the condition {self.condition} (of {self.read} read): "
                f"{self.condition.no_match_reason(self.present, self.read)}"
            )


def _check_file(path: Path, tally: _FileTally, without_abstract: list | None) -> None:
    """The warnings and errors of one file read: no records, every one with an odd ID or (unless
    kept in a `without_abstract` list) without an abstract, and how many were left out, by
    reason."""
    if not tally.found:
        raise InputError(f"{path}: no papers found")
    if tally.odd and len(tally.odd) == tally.found:
        raise InputError(tally.odd[0])
    if tally.odd:
        records = "record" if len(tally.odd) == 1 else "records"
        warnings.warn(
            f"{path}: {len(tally.odd)} {records} skipped for their ID (the first: {tally.odd[0]})",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
    if tally.withdrawn:
        submissions = "submission" if len(tally.withdrawn) == 1 else "submissions"
        warnings.warn(
            f"{path}: {len(tally.withdrawn)} withdrawn or desk-rejected {submissions} left out"
            f" ({_named(tally.withdrawn)}); `papers build --keep-withdrawn` keeps them",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
    if tally.skipped == tally.found and without_abstract is None:
        raise InputError(
            f"{path}: none of its {tally.found} records has an abstract: papers are found by their"
            " abstracts"
        )
    if tally.skipped:
        records = "record" if tally.skipped == 1 else "records"
        warnings.warn(
            f"{path}: {tally.skipped} {records} without an abstract skipped (the first:"
            f" {tally.first_skipped})",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )


def _unique_pdf_id(record: Record, path: Path, taken: set[str]) -> None:
    """A PDF named as another in another folder (`a/paper.pdf`, `b/paper.pdf`) takes its folder's
    name too (`b/paper`), said in one line, rather than stopping the build on a shared ID."""
    given = record.fields.get("id")
    if given == path.stem and given in taken:
        record.fields["id"] = f"{path.parent.name}/{path.stem}"
        warnings.warn(
            f"{path}: another PDF is named '{path.name}' too: its ID is '{record.fields['id']}'",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
    taken.add(str(record.fields.get("id")))


def _count_left_out(left_out: dict | None, record: Record, reason: str) -> None:
    """Count a record not made a paper under each of its collections (scan_papers' `left_out`)."""
    if left_out is None:
        return
    for collection in record.extra.get("collections") or ():
        name = _clean(collection)
        if name:
            reasons = left_out.setdefault(name, {})
            reasons[reason] = reasons.get(reason, 0) + 1


class HeldPapers(Protocol[K]):
    """The papers a paper read is compared with (`same_paper`): each lookup gives the one held
    under that key (in the caller's terms: a row, a part and ID), or None."""

    def by_text(self, key: str) -> K | None:
        """The paper held with this text key (`text_key`)."""

    def by_work(self, work: str) -> K | None:
        """The paper held with this arXiv ID or DOI (`identifiers.work_identifier`)."""

    def by_id(self, paper_id: str) -> K | None:
        """The paper held under this ID."""


@dataclass(frozen=True)
class SamePaper(Generic[K]):
    """What `same_paper` found: `kind` "text" (the same title and abstract), "work" (the same
    arXiv ID or DOI, named by `work`) or "id" (the same ID for a different paper: refused,
    `id_conflict`), and the paper held (`kept`)."""

    kind: str
    kept: K
    work: str = ""


def same_paper(paper: Paper, held: HeldPapers[K]) -> SamePaper[K] | None:
    """The rule for two records of one paper, which a build applies among the papers it reads and
    `papers add` against the index too: the same text is the same paper, and so is the same work
    (arXiv ID or DOI) under another text; else the same ID names a different paper. None: a new
    paper."""
    kept = held.by_text(text_key(paper.title, paper.abstract))
    if kept is not None:
        return SamePaper("text", kept)
    from .identifiers import work_identifier  # here, not at import: `papers like` reads no file

    work = work_identifier(paper.url, paper.id)
    kept = held.by_work(work) if work else None
    if kept is not None:
        return SamePaper("work", kept, work)
    kept = held.by_id(paper.id)
    return None if kept is None else SamePaper("id", kept)


def duplicate_message(paper: Paper, found: SamePaper, kept_source: str, kept_id: str) -> str:
    """The warning for a record left out as the same paper as one kept (`same_paper`)."""
    if found.kind == "text":
        return f"{paper.source}: same paper as {kept_source}; kept once"
    also = f", '{paper.id}' naming it too" if paper.id != kept_id else ""
    return f"{paper.source}: same paper ({found.work}) as {kept_source}; kept once{also}"


def id_conflict(paper: Paper, other_source: str) -> InputError:
    """The error for an ID used for two different papers: the whole input is refused."""
    return InputError(
        f"{paper.source}: ID '{paper.id}' is also used by {other_source} for a"
        " different paper: give each paper its own ID"
    )


class PaperSet:
    """Which of the papers read, one at a time, are kept, and their handles, holding a few short
    strings a paper rather than the papers (a build streams them to disk).

    The same text twice is kept once, with a warning naming both places, and so is the same
    work (the same arXiv ID or DOI, `work_identifier`) under two texts; the ID of the record
    left out becomes an alias of the kept paper's (`aliases`). One ID for two different works
    is an InputError (`same_paper`). Texts and works are told apart by 128-bit hashes.
    `source_of(row)` gives the source of the row-th paper kept, for those messages."""

    def __init__(self, source_of: Callable[[int], str]):
        self._source_of = source_of
        self._by_text: dict[bytes, int] = {}
        self._by_id: dict[str, int] = {}
        self._by_work: dict[bytes, int] = {}
        self.ids: list[str] = []
        # The ID of a record left out as the same paper -> the kept paper's ID.
        self.aliases: dict[str, str] = {}
        self._bases: list[str] = []
        self._asked = (b"", b"")  # the hashes of the text and work `same_paper` last asked for

    def __len__(self) -> int:
        return len(self.ids)

    def by_text(self, key: str) -> int | None:
        self._asked = (_hashed(key), b"")  # kept for `add`: each key is hashed once
        return self._by_text.get(self._asked[0])

    def by_work(self, work: str) -> int | None:
        self._asked = (self._asked[0], _hashed(work))
        return self._by_work.get(self._asked[1])

    def by_id(self, paper_id: str) -> int | None:
        return self._by_id.get(paper_id)

    def add(self, paper: Paper) -> bool:
        """Whether `paper` is kept (False for the same paper again, with a warning)."""
        found = same_paper(paper, self)
        if found is not None and found.kind == "id":
            raise id_conflict(paper, self._source_of(found.kept))
        if found is not None:
            kept = found.kept
            warnings.warn(
                duplicate_message(paper, found, self._source_of(kept), self.ids[kept]),
                DuplicatePaperWarning,
                stacklevel=caller_stacklevel(),
            )
            self._alias(paper.id, kept)
            return False
        text, work = self._asked
        self._by_text[text] = self._by_id[paper.id] = len(self.ids)
        if work:
            self._by_work[work] = len(self.ids)
        self.ids.append(paper.id)
        self._bases.append(derive_handle(paper.title, paper.abstract))
        return True

    def _alias(self, alias: str, row: int) -> None:
        if alias != self.ids[row] and alias not in self._by_id:
            self.aliases.setdefault(alias, self.ids[row])

    def handles(self) -> list[str]:
        """Each kept paper's unique handle, in the order kept (no paper can be added after)."""
        # An alias that a paper read later has as its own ID names that paper, not an alias.
        self.aliases = {
            alias: kept for alias, kept in self.aliases.items() if alias not in self._by_id
        }
        self._by_text, self._by_id, self._by_work = {}, {}, {}
        # Disambiguate in ID order so a paper's handle does not depend on file order.
        order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        handles = unique_handles([self._bases[i] for i in order])
        self._bases = []
        out = [""] * len(order)
        for i, handle in zip(order, handles):
            out[i] = handle
        return out


def _hashed(key: str) -> bytes:
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _lacks_abstract(record: Record) -> bool:
    abstract = record.fields.get("abstract")
    # Empty once control characters are blanked (as _clean would make it), without collapsing
    # spaces.
    return abstract is None or (
        isinstance(abstract, str) and not _CONTROL.sub(" ", abstract).strip()
    )


def _expand_inputs(inputs: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    inputs = list(inputs)
    if not inputs:
        raise InputError("no input given: name one or more files or folders of papers")
    for raw in inputs:
        if str(raw) == ZOTERO:
            from .readers.zotero import default_database

            path = default_database()
            if not path.is_file():
                raise InputError(
                    f"zotero: no Zotero database at {path}: give the path of your zotero.sqlite"
                )
            files.append(path)
            continue
        path = Path(raw)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_dir():
            if _is_index_folder(path):
                raise InputError(
                    f"{path}: an index folder, not papers: give the files or folders it was built"
                    " from"
                )
            found = sorted(_files_in_folder(path))
            if not found:
                raise InputError(f"{path}: folder has no {FORMAT_NAMES} files of papers")
            files.extend(found)
        elif path.suffix.lower() in (*SUPPORTED_SUFFIXES, ".sqlite"):  # .sqlite: a Zotero database
            files.append(path)
        else:
            raise InputError(
                f"{path}: unsupported file type '{path.suffix or '(none)'}': use .txt (one abstract"
                " a paragraph), .jsonl, .json, .csv, .bib, .pdf or Zotero's zotero.sqlite (see"
                " docs/input-formats.md)"
            )
    return files


def _files_in_folder(folder: Path) -> Iterator[Path]:
    """Paper files under a folder, hidden ones and index folders left out.

    A subfolder that cannot be read stops the build, as an unreadable file does:
    skipping it would lose its papers without a word. Symbolic links to folders
    are not followed (no loops)."""

    def refuse(error: OSError) -> None:
        raise InputError(
            f"{error.filename}: cannot read folder ({error.strerror}): fix its permissions or leave"
            " it out"
        )

    for parent, folders, names in os.walk(folder, onerror=refuse):
        here = Path(parent)
        folders.sort()
        for name in list(folders):
            if name.startswith("."):
                folders.remove(name)
            elif (here / name).is_symlink():
                warnings.warn(
                    f"{here / name}: a link to a folder, not followed: give the folder itself",
                    InputWarning,
                    stacklevel=caller_stacklevel(),
                )
            elif _is_index_folder(here / name):
                # An index kept among its own inputs (`papers build s --index s/idx`) would be read
                # back.
                warnings.warn(
                    f"{here / name}: an index folder, not papers: skipped",
                    InputWarning,
                    stacklevel=caller_stacklevel(),
                )
                folders.remove(name)
        for name in names:
            path = here / name
            if name.startswith(".") or path.suffix.lower() not in SUPPORTED_SUFFIXES:
                continue
            if not path.exists():
                raise InputError(f"{path}: broken symbolic link: fix or remove it")
            if path.is_file():
                yield path


def _is_index_folder(folder: Path) -> bool:
    """What `papers build` writes (see index/layout.py): a CURRENT pointer, or v-*/ build
    folders."""
    try:
        versions = [path for path in folder.glob("v-*") if path.is_dir()]
        return bool(versions) and (
            (folder / "CURRENT").is_file() or any((v / "manifest.json").is_file() for v in versions)
        )
    except OSError:  # unreadable: os.walk reports it
        return False


# C0 and C1 control characters (terminal escapes among them) and the lone
# surrogates a JSON "\ud800" escape can produce, which UTF-8 cannot encode.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _clean(value) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        value = str(value)
    return collapse_spaces(_CONTROL.sub(" ", value))


def _text_field(record: Record, name: str, numbers: bool = False) -> str:
    """A text field of a record, cleaned; a list or object there is an input error."""
    value = record.fields.get(name)
    if (
        value is None
        or isinstance(value, str)
        or (numbers and isinstance(value, (int, float)) and not isinstance(value, bool))
    ):
        return _clean(value)
    raise InputError(f"{record.where}: '{name}' must be text, got {type(value).__name__}")


def _named(places: list[str], shown: int = 3) -> str:
    """The first few of `places`, then how many more."""
    named = ", ".join(places[:shown])
    return named + (f" and {len(places) - shown} more" if len(places) > shown else "")


def _odd_id(record: Record) -> str:
    """The message for a record whose given ID breaks `id_fault`'s rule, else ""."""
    from .identifiers import id_fault, shown_id  # here, not at import: `papers like` reads no file

    value = record.fields.get("id")
    if not isinstance(value, str):
        return ""
    fault = id_fault(value.strip())
    return f"{record.where}: ID {shown_id(value.strip())} {fault}" if fault else ""


def _given_id(record: Record) -> str:
    """The ID as given, kept as it is (surrounding spaces aside): one a lookup can be typed with."""
    value = record.fields.get("id")
    if value is None or isinstance(value, bool) or not isinstance(value, (str, int, float)):
        if value is None:
            return ""
        raise InputError(f"{record.where}: 'id' must be text, got {type(value).__name__}")
    from .identifiers import bare_arxiv_id, id_fault, shown_id

    value = str(value).strip()
    fault = id_fault(value)
    if fault:
        raise InputError(f"{record.where}: ID {shown_id(value)} {fault}")

    return bare_arxiv_id(value)  # "arXiv:2401.00001" is the paper 2401.00001 names


def _paper_from_record(record: Record, empty_abstract: bool = False) -> Paper:
    abstract, text_from = _abstract(record, empty_abstract)
    title = _text_field(record, "title")
    given_id = _given_id(record)
    authors = _authors(record)
    year = _year(record)
    return Paper(
        id=given_id or derive_id(title, abstract),
        title=title,
        abstract=abstract,
        authors=tuple(_clean(name) for name in authors if _clean(name)),
        year=year,
        venue=_text_field(record, "venue", numbers=True),
        url=_text_field(record, "url"),
        code_links=extract_code_links(abstract),
        # A file name that is not UTF-8 reaches us with surrogate escapes, which cannot be stored.
        source=record.source.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
        categories=tuple(
            dict.fromkeys(_clean(category) for category in record.categories if _clean(category))
        ),
        citation_key=_clean(record.extra.get("citation_key")),
        entry_type=_clean(record.extra.get("entry_type")).lower(),
        bibtex_fields=tuple(record.extra.get("bibtex_fields") or ()),
        collections=tuple(
            dict.fromkeys(
                _clean(name) for name in record.extra.get("collections") or () if _clean(name)
            )
        ),
        text_from=text_from,
    )


def _abstract(record: Record, empty_abstract: bool) -> tuple[str, str]:
    """The record's abstract, cleaned, and what it holds (`Paper.text_from`): an error where there
    is none and the record is not kept for its title (`empty_abstract`, or a full text that
    cleaned to nothing); a warning for one as long as a whole paper."""
    if "abstract" not in record.fields and not empty_abstract and not record.extra.get("text_from"):
        raise InputError(f"{record.where}: record has no 'abstract' field: every paper needs one")
    abstract = _text_field(record, "abstract")
    text_from = record.extra.get("text_from") or "abstract"
    if not abstract and (empty_abstract or text_from != "abstract"):
        # A full text that cleaned to nothing, or a record kept for its title: its title alone.
        text_from = "title only"
    empty_abstract = empty_abstract or (
        text_from == "title only" and bool(_text_field(record, "title"))
    )
    if not abstract and not empty_abstract:
        raise InputError(f"{record.where}: abstract is empty: give the text or remove the record")
    if len(abstract) > LONG_ABSTRACT:
        warnings.warn(
            f"{record.where}: abstract is {len(abstract):,} characters long (a whole paper?): "
            "encoding it takes minutes with the real model",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
    return abstract, text_from


def _authors(record: Record) -> list | tuple:
    """The record's authors as given: a list, or one string split at ';' and 'and'."""
    authors = record.fields.get("authors") or ()
    if isinstance(authors, str):
        authors = [
            name for name in (part.strip() for part in re.split(r";|\band\b", authors)) if name
        ]
    elif not isinstance(authors, (list, tuple)):
        raise InputError(f"{record.where}: 'authors' must be a list or a string")
    if not all(name is None or isinstance(name, str) for name in authors):
        raise InputError(f"{record.where}: 'authors' must be a list of names (strings)")
    return authors


def _year(record: Record) -> int | None:
    """The record's year as a whole number; None where it gives none."""
    year = record.fields.get("year")
    if year in ("", None):
        return None
    try:
        return int(str(year).strip())
    except ValueError:
        raise InputError(
            f"{record.where}: year {str(year)!r} is not a whole number"
        ) from None  # repr: one line
