"""Related-work lists written as a Markdown handout, JSON, JSON lines, CSV or BibTeX."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TextIO

from ..corpus.citation import citation_key, unique_citation_key
from ..corpus.papers import Paper
from ..errors import OptionError
from ..reading.related import RelatedList
from .bibtex import EntryGaps, bibtex_entry
from .markdown import code_links, md, md_latex, reference, snippet
from .tables import LIST_SEPARATOR, csv_writer

if TYPE_CHECKING:
    from ..query.paper_index import PaperIndex

RELATED_FORMATS = ("markdown", "json", "jsonl", "csv", "bibtex", "miniconf")
CSV_COLUMNS = (
    "paper_id",
    "paper_handle",
    "rank",
    "id",
    "handle",
    "title",
    "authors",
    "year",
    "venue",
    "score",
    "snippet",
    "url",
    "code_links",
    "why",
)


def write_related(
    lists: Iterable[RelatedList],
    out: TextIO,
    fmt: str,
    why: bool = False,
    keys: Callable[[Paper], str] | None = None,
) -> int:
    """Write the lists to `out` as they come (nothing is held back); returns how many were written.
    "miniconf" is the similar-papers file (`paper_recs.json`) that conference sites built on
    Mini-Conf read (ICLR 2020's, ACL 2020's, EMNLP 2020's; Mini-Conf itself reads none).

    `keys` gives each paper's BibTeX key ("bibtex"): `BibtexKeys` over the index, so that the
    keys are unique; without it, each paper's own `citation_key`. Entries written without a year
    or an author are named once a field, as an IncompleteEntriesWarning, once all are written."""
    if fmt not in RELATED_FORMATS:
        raise OptionError(f"unknown format '{fmt}': use one of {', '.join(RELATED_FORMATS)}", "fmt")
    writer = _RelatedWriter(out, fmt, why, keys)
    count = 0
    for item in lists:
        writer.write(item, count)
        count += 1
    writer.close(count)
    return count


class _RelatedWriter:
    """Writes one related-work list at a time in one format, after the format's opening."""

    def __init__(self, out: TextIO, fmt: str, why: bool, keys: Callable[[Paper], str] | None):
        self.out, self.why = out, why
        self.key = keys or citation_key
        self.seen: set[str] = set()  # papers already written as BibTeX entries
        self.gaps = EntryGaps()
        if fmt == "json":
            out.write("[")
        elif fmt == "miniconf":
            out.write("{")
        elif fmt == "csv":
            self.write_row = csv_writer(out)
            self.write_row(CSV_COLUMNS if why else CSV_COLUMNS[:-1])
        elif fmt == "markdown":
            out.write(_MARKDOWN_INTRO)
        self.fmt = fmt
        self.write: Callable[[RelatedList, int], None] = getattr(self, f"_write_{fmt}")

    def close(self, count: int) -> None:
        """End the format's text after `count` lists."""
        if self.fmt == "json":
            self.out.write("\n]\n" if count else "]\n")
        elif self.fmt == "miniconf":
            self.out.write("\n}\n" if count else "}\n")
        elif self.fmt == "bibtex":
            self.gaps.warn()  # each field some entries lack, named once (IncompleteEntriesWarning)

    def _write_json(self, item: RelatedList, count: int) -> None:
        text = json.dumps(related_record(item, self.why), ensure_ascii=False, indent=2)
        self.out.write(
            ("\n" if count == 0 else ",\n") + "\n".join("  " + line for line in text.splitlines())
        )

    def _write_jsonl(self, item: RelatedList, count: int) -> None:
        self.out.write(json.dumps(related_record(item, self.why), ensure_ascii=False) + "\n")

    def _write_csv(self, item: RelatedList, count: int) -> None:
        for related in item.related:
            other = related.paper
            row = [
                item.paper.id,
                item.paper.handle,
                related.rank,
                related.id,
                other.handle,
                other.label,
                LIST_SEPARATOR.join(other.authors),
                other.year,
                other.venue,
                f"{related.score:.4f}",
                snippet(other, 10_000),
                other.url,
                LIST_SEPARATOR.join(other.code_links),
            ]
            self.write_row(row + [LIST_SEPARATOR.join(related.why)] if self.why else row)

    def _write_markdown(self, item: RelatedList, count: int) -> None:
        self.out.write(_markdown(item, self.why))

    def _write_miniconf(self, item: RelatedList, count: int) -> None:
        self.out.write(
            ("\n" if count == 0 else ",\n")
            + "  "
            + json.dumps(item.paper.id, ensure_ascii=False)
            + ": "
            + json.dumps(miniconf_similar(item), ensure_ascii=False)
        )

    def _write_bibtex(self, item: RelatedList, count: int) -> None:
        for paper in (item.paper, *(related.paper for related in item.related)):
            if paper.id not in self.seen:
                self.seen.add(paper.id)
                key = self.key(paper)
                self.out.write(bibtex_entry(paper, key))
                self.gaps.note(paper, key)


def miniconf_similar(item: RelatedList) -> list[str]:
    """A paper's "similar papers" as a Mini-Conf site reads them (its `paper_recs.json`, a list of
    IDs by paper ID): the paper itself first, as the site leaves out the first, then the related
    papers, best first."""
    return [item.paper.id, *(related.paper.id for related in item.related)]


_MARKDOWN_INTRO = (
    "# Related work\n\nFor each paper, the papers most like it in the collection, best first. The"
    " score (-1 to 1, higher is closer) combines the cosine of the two papers' embeddings and the"
    " cosine of their TF-IDF word vectors, each measured against the paper's other candidates, and"
    " reads like an embedding cosine.\n"
)


def related_record(item: RelatedList, why: bool) -> dict:
    """One related-work list as the JSON object `related-work --format json` prints and the API
    returns."""
    row = item.to_dict()
    if not why:
        for related in row["related"]:
            for key in ("why", "phrases", "sentences"):
                related.pop(key)
    return row


def _markdown(item: RelatedList, why: bool) -> str:
    paper = item.paper
    lines = ["", f"## {md_latex(paper.label)}", ""]
    if reference(paper):
        lines += [reference(paper), ""]
    lines.append(md_latex(snippet(paper, 400)))
    if paper.code_links:
        lines += ["", f"Code: {code_links(paper)}"]
    lines.append("")
    if not item.related:
        lines.append("No related papers in the collection.")
    for related in item.related:
        other = related.paper
        line = (
            f"{related.rank}. **{md_latex(other.label)}** ({related.score:.2f}):"
            f" {md_latex(snippet(other))}"
        )
        if reference(other):
            line += f" {reference(other)}"
        if other.code_links:
            line += f" Code: {code_links(other)}"
        lines.append(line)
        if why and (related.phrases or related.why):
            lines.append(f"   Shares: {md(', '.join(related.phrases or related.why))}")
        for pair in related.sentences if why else ():
            lines.append(
                f"   “{md(pair.seed_sentence)}” ~ “{md(pair.paper_sentence)}” ({pair.cosine:.2f})"
            )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- BibTeX


class BibtexKeys:
    """BibTeX keys unique among an index's papers and papers from outside it (`outside`, those the
    index does not hold): a key several papers share gets "a", "b", ... in index order, outside
    papers after (`corpus.citation.unique_citation_key`). A key costs a few lookups of the
    index's table of citation keys, whatever the corpus size."""

    def __init__(self, index: PaperIndex, outside: Sequence[Paper] = ()):
        self.index = index
        held = index.find_papers(list(outside)) if outside else []
        self.outside = {
            paper.id: position
            for position, (paper, row) in enumerate(zip(outside, held))
            if row is None
        }
        self.outside_by_key: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for paper, row in zip(outside, held):
            if row is None:
                self.outside_by_key[citation_key(paper).casefold()].append(
                    ("outside", self.outside[paper.id])
                )
        self._sharing: dict[str, tuple] = {}  # the same few keys are asked for again and again

    def __call__(self, paper: Paper) -> str:
        if paper.id in self.outside:
            member = ("outside", self.outside[paper.id])
        else:
            row = self.index.keys.row_of_id(paper.id)
            if row is None:  # neither the index's nor an outside paper: its own key
                return citation_key(paper)
            member = ("index", row)
        return unique_citation_key(
            citation_key(paper), member, self._sharers, own_key=bool(paper.citation_key)
        )

    def _sharers(self, folded: str) -> tuple:
        if folded not in self._sharing:
            self._sharing[folded] = tuple(
                ("index", row) for row in self.index.citation_key_rows(folded)
            ) + tuple(self.outside_by_key.get(folded, ()))
        return self._sharing[folded]
