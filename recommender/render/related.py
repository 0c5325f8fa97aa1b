"""Related-work lists written as a Markdown handout, JSON, JSON lines, CSV or BibTeX."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TextIO

from ..corpus.citation import citation_key, unique_citation_key
from ..corpus.papers import Paper
from ..errors import InputError
from ..reading.related import RelatedList
from .markdown import code_links, md, snippet
from .tables import LIST_SEPARATOR

if TYPE_CHECKING:
    from ..query.recommender import Recommender

RELATED_FORMATS = ("markdown", "json", "jsonl", "csv", "bibtex")
CSV_COLUMNS = ("paper_id", "paper_handle", "rank", "id", "handle", "title", "score", "snippet", "url", "code_links", "why")


def write_related(lists: Iterable[RelatedList], out: TextIO, fmt: str, why: bool = False,
                  keys: Callable[[Paper], str] | None = None) -> int:
    """Write the lists to `out` as they come (nothing is held back); returns how many were written.

    `keys` gives each paper's BibTeX key ("bibtex"): `BibtexKeys` over the index, so that the
    keys are unique; without it, each paper's own `citation_key`."""
    if fmt not in RELATED_FORMATS:
        raise InputError(f"unknown format '{fmt}': use one of {', '.join(RELATED_FORMATS)}")
    count = 0
    if fmt == "json":
        out.write("[")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS if why else CSV_COLUMNS[:-1])
    elif fmt == "markdown":
        out.write(_MARKDOWN_INTRO)
    seen: set[str] = set()
    for item in lists:
        if fmt == "json":
            text = json.dumps(related_record(item, why), ensure_ascii=False, indent=2)
            out.write(("\n" if count == 0 else ",\n") + "\n".join("  " + line for line in text.splitlines()))
        elif fmt == "jsonl":
            out.write(json.dumps(related_record(item, why), ensure_ascii=False) + "\n")
        elif fmt == "csv":
            for related in item.related:
                row = [item.paper.id, item.paper.handle, related.rank, related.id, related.paper.handle,
                       related.paper.title or related.paper.handle, f"{related.score:.4f}",
                       snippet(related.paper, 10_000), related.paper.url, LIST_SEPARATOR.join(related.paper.code_links)]
                writer.writerow(row + [LIST_SEPARATOR.join(related.why)] if why else row)
        elif fmt == "markdown":
            out.write(_markdown(item, why))
        else:
            for paper in (item.paper, *(related.paper for related in item.related)):
                if paper.id not in seen:
                    seen.add(paper.id)
                    out.write(bibtex_entry(paper, (keys or citation_key)(paper)))
        count += 1
    if fmt == "json":
        out.write("\n]\n" if count else "]\n")
    return count


_MARKDOWN_INTRO = (
    "# Related work\n\n"
    "For each paper, the papers most like it in the collection, best first. The score (-1 to 1, higher is closer) "
    "combines the cosine of the two papers' embeddings and the cosine of their TF-IDF word vectors, each measured "
    "against the paper's other candidates, and reads like an embedding cosine.\n"
)


def related_record(item: RelatedList, why: bool) -> dict:
    """One related-work list as the JSON object `related-work --format json` prints and the API returns."""
    row = item.to_dict()
    if not why:
        for related in row["related"]:
            related.pop("why")
    return row


def _markdown(item: RelatedList, why: bool) -> str:
    paper = item.paper
    lines = ["", f"## {md(paper.label)}", "", md(snippet(paper, 400))]
    if paper.code_links:
        lines += ["", f"Code: {code_links(paper)}"]
    lines.append("")
    if not item.related:
        lines.append("No related papers in the collection.")
    for related in item.related:
        other = related.paper
        line = f"{related.rank}. **{md(other.label)}** ({related.score:.2f}): {md(snippet(other))}"
        if other.code_links:
            line += f" Code: {code_links(other)}"
        lines.append(line)
        if why and related.why:
            lines.append(f"   Shared terms: {md(', '.join(related.why))}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- BibTeX


class BibtexKeys:
    """BibTeX keys unique among an index's papers and papers from outside it (`outside`, those the
    index does not hold): a key several papers share gets "a", "b", ... in index order, outside
    papers after (`corpus.citation.unique_citation_key`). A key costs a few lookups of the
    index's table of citation keys, whatever the corpus size."""

    def __init__(self, index: Recommender, outside: Sequence[Paper] = ()):
        self.index = index
        held = index.find_papers(list(outside)) if outside else []
        self.outside = {paper.id: position for position, (paper, row) in enumerate(zip(outside, held)) if row is None}
        self.outside_by_key: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for paper, row in zip(outside, held):
            if row is None:
                self.outside_by_key[citation_key(paper).casefold()].append(("outside", self.outside[paper.id]))
        self._sharing: dict[str, tuple] = {}  # the same few keys are asked for again and again

    def __call__(self, paper: Paper) -> str:
        if paper.id in self.outside:
            member = ("outside", self.outside[paper.id])
        else:
            row = self.index.keys.row_of_id(paper.id)
            if row is None:  # neither the index's nor an outside paper: its own key
                return citation_key(paper)
            member = ("index", row)
        return unique_citation_key(citation_key(paper), member, self._sharers)

    def _sharers(self, folded: str) -> tuple:
        if folded not in self._sharing:
            self._sharing[folded] = tuple(("index", row) for row in self.index.citation_key_rows(folded)) + tuple(
                self.outside_by_key.get(folded, ()))
        return self._sharing[folded]


_ESCAPED = re.compile(r"\\[%&$#_{}]")
_SPECIAL = {
    "\\": r"\textbackslash{}", "{": r"\textbraceleft{}", "}": r"\textbraceright{}", "%": r"\%", "&": r"\&",
    "$": r"\$", "#": r"\#", "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}",
}


_MATH = re.compile(r"(?<!\\)\$[^$]+(?<!\\)\$")


def bibtex_escape(text: str) -> str:
    """A field value safe inside BibTeX braces: LaTeX specials escaped (already escaped ones kept),
    inline maths ($...$ with balanced braces) kept as written, braces never left unbalanced."""
    out = []
    position = 0
    for match in _MATH.finditer(text):
        if _balanced(match.group()):
            out.append(_escape_prose(text[position: match.start()]))
            out.append(match.group())
            position = match.end()
    out.append(_escape_prose(text[position:]))
    return " ".join("".join(out).split())


def _balanced(text: str) -> bool:
    depth = 0
    for char in text.replace("\\{", "").replace("\\}", ""):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _escape_prose(text: str) -> str:
    out = []
    position = 0
    for match in _ESCAPED.finditer(text):
        out.append("".join(_SPECIAL.get(c, c) for c in text[position: match.start()]))
        escaped = match.group()
        out.append(_SPECIAL[escaped[1]] if escaped[1] in "{}" else escaped)
        position = match.end()
    out.append("".join(_SPECIAL.get(c, c) for c in text[position:]))
    return "".join(out)


def bibtex_entry(paper: Paper, key: str) -> str:
    """A @misc entry with the metadata the paper has, and nothing made up."""
    fields = []
    fields.append(("title", "{" + bibtex_escape(paper.title or paper.handle) + "}"))
    if paper.authors:
        fields.append(("author", " and ".join(bibtex_escape(author) for author in paper.authors)))
    if paper.year:
        fields.append(("year", str(paper.year)))
    if paper.venue:
        fields.append(("howpublished", bibtex_escape(paper.venue)))
    if paper.url:
        fields.append(("url", _bibtex_url(paper.url)))
    if paper.code_links:
        fields.append(("note", "Code: " + ", ".join(f"\\url{{{_bibtex_url(link)}}}" for link in paper.code_links)))
    fields.append(("abstract", bibtex_escape(paper.abstract)))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@misc{{{key},\n{body}\n}}\n\n"


def _bibtex_url(url: str) -> str:
    return re.sub(r"[{}\s\\]", "", url).replace("%", r"\%").replace("#", r"\#")
