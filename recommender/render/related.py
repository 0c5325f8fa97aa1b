"""Related-work lists written as a Markdown handout, JSON, JSON lines, CSV or BibTeX."""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from collections import Counter
from typing import Iterable, Sequence, TextIO

from ..corpus.papers import Paper
from ..errors import InputError
from ..query.ranking import DENSE_WEIGHT
from ..reading.related import RelatedList
from .markdown import code_links, md, snippet
from .tables import LIST_SEPARATOR

RELATED_FORMATS = ("markdown", "json", "jsonl", "csv", "bibtex")
CSV_COLUMNS = ("paper_id", "paper_handle", "rank", "id", "handle", "title", "score", "snippet", "url", "code_links", "why")


def write_related(lists: Iterable[RelatedList], out: TextIO, fmt: str, why: bool = False,
                  keys: dict[str, str] | None = None) -> int:
    """Write the lists to `out` as they come (nothing is held back); returns how many were written.

    `keys` maps paper IDs to BibTeX keys (see `bibtex_keys`); needed for "bibtex"."""
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
            text = json.dumps(_json_row(item, why), ensure_ascii=False, indent=2)
            out.write(("\n" if count == 0 else ",\n") + "\n".join("  " + line for line in text.splitlines()))
        elif fmt == "jsonl":
            out.write(json.dumps(_json_row(item, why), ensure_ascii=False) + "\n")
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
                    out.write(bibtex_entry(paper, (keys or {}).get(paper.id) or bibtex_key(paper.handle, paper.id)))
        count += 1
    if fmt == "json":
        out.write("\n]\n" if count else "]\n")
    return count


_MARKDOWN_INTRO = (
    "# Related work\n\n"
    "For each paper, the papers most like it in the collection, best first. The score (-1 to 1, higher is closer) is "
    f"{DENSE_WEIGHT:g} x the cosine of the two papers' sentence embeddings + {1 - DENSE_WEIGHT:g} x the cosine "
    "of their TF-IDF word vectors.\n"
)


def _json_row(item: RelatedList, why: bool) -> dict:
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

def bibtex_key(handle: str, paper_id: str) -> str:
    """A citation key from the handle ("Thompson sampling" -> "ThompsonSampling"), else from the ID."""
    ascii_text = unicodedata.normalize("NFKD", handle).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[A-Za-z0-9]+", ascii_text)
    key = "".join(word[:1].upper() + word[1:] for word in words)[:40]
    if not key:
        return f"paper-{paper_id}"
    return key if key[0].isalpha() else f"p{key}"


def bibtex_keys(ids: Sequence[str], handles: Sequence[str]) -> dict[str, str]:
    """Keys for every paper of an index, unique: a key two handles share gets the ID appended."""
    keys = [bibtex_key(handle, paper_id) for paper_id, handle in zip(ids, handles)]
    counts = Counter(key.casefold() for key in keys)
    return {
        paper_id: key if counts[key.casefold()] == 1 else f"{key}-{paper_id}"
        for paper_id, key in zip(ids, keys)
    }


_ESCAPED = re.compile(r"\\[%&$#_{}]")
_SPECIAL = {
    "\\": r"\textbackslash{}", "{": r"\textbraceleft{}", "}": r"\textbraceright{}", "%": r"\%", "&": r"\&",
    "$": r"\$", "#": r"\#", "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}",
}


def bibtex_escape(text: str) -> str:
    """A field value safe inside BibTeX braces: LaTeX specials escaped (already escaped ones kept),
    braces never left unbalanced."""
    out = []
    position = 0
    for match in _ESCAPED.finditer(text):
        out.append("".join(_SPECIAL.get(c, c) for c in text[position: match.start()]))
        escaped = match.group()
        out.append(_SPECIAL[escaped[1]] if escaped[1] in "{}" else escaped)
        position = match.end()
    out.append("".join(_SPECIAL.get(c, c) for c in text[position:]))
    return " ".join("".join(out).split())


def bibtex_entry(paper: Paper, key: str) -> str:
    """A @misc entry with the metadata the paper has, and nothing made up."""
    fields = []
    if paper.title:
        fields.append(("title", "{" + bibtex_escape(paper.title) + "}"))
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
