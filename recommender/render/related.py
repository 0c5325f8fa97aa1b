"""Related-work lists written as a Markdown handout, JSON, JSON lines, CSV or BibTeX."""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from collections import Counter
from typing import Iterable, TextIO

from ..corpus.papers import Paper
from ..errors import InputError
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
                    out.write(bibtex_entry(paper, (keys or {}).get(paper.id) or bibtex_key(paper)))
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

# Words a reference manager skips when it picks the title word of a key.
_KEY_SKIP = frozenset("a an the on of in for and to with towards toward via from by is are at as do does".split())


def _ascii_word(text: str) -> str:
    return "".join(re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()))


def _family_name(author: str) -> str:
    """"Ada Lovelace" -> "lovelace"; "Lovelace, Ada" -> "lovelace"."""
    name = author.split(",")[0] if "," in author else (author.split() or [""])[-1]
    return _ascii_word(name)


def bibtex_key(paper: Paper) -> str:
    """A citation key as reference managers make them, author-year-word ("lovelace1843notes"),
    else the paper's ID (its characters outside BibTeX's key set replaced by "-")."""
    family = _family_name(paper.authors[0]) if paper.authors else ""
    year = str(paper.year or "").strip()
    if family and year.isdigit():
        words = [_ascii_word(word) for word in (paper.title or paper.handle).split()]
        word = next((w for w in words if w and w not in _KEY_SKIP), "")
        return f"{family}{year}{word}"
    return re.sub(r"[^A-Za-z0-9_:.+/-]", "-", paper.id)


def bibtex_keys(papers: Iterable[Paper]) -> dict[str, str]:
    """Keys for every paper of an index, unique and stable: a key several papers share gets
    "a", "b", ... appended in index order, as reference managers do."""
    keys = {paper.id: bibtex_key(paper) for paper in papers}
    counts = Counter(key.casefold() for key in keys.values())
    taken = {key.casefold() for key, count in counts.items() if count == 1}
    unique = {}
    for paper_id, key in keys.items():
        if counts[key.casefold()] > 1:
            number = 0
            while (key + _suffix(number)).casefold() in taken:
                number += 1
            key += _suffix(number)
            taken.add(key.casefold())
        unique[paper_id] = key
    return unique


def _suffix(number: int) -> str:
    """0 -> "a", 25 -> "z", 26 -> "aa"."""
    letters = ""
    number += 1
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


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
