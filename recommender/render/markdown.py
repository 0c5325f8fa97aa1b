"""Markdown for every writer that makes it (tables, `show`, related-work handouts, session
plans): the one escaping function, links, and the pieces the handouts share.

Markdown is read as CommonMark with raw HTML allowed (as the spec has it, and as GitHub,
editors and static-site tools render it), so text from the data must never become markup:
no HTML (`<img onerror=...>`), no link or image (`[x](javascript:...)`, `<javascript:...>`),
no entity, no emphasis, list, heading, quote or table cell border it did not mean."""

from __future__ import annotations

import re
from urllib.parse import quote

from ..corpus.latex import latex_text
from ..corpus.papers import Paper
from ..corpus.summary import summary
from ..corpus.text import shorten

SNIPPET_WIDTH = 160
# Every ASCII punctuation character that starts or ends markup somewhere in CommonMark or
# GitHub's extensions (HTML, entities, links, images, emphasis, code, strikethrough, tables,
# headings); CommonMark allows a backslash before any ASCII punctuation and shows it as is.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&!{}])")
# At the start of a line: a list item, quote, heading underline or thematic break.
_LINE_START = re.compile(r"^(?:([-+=])(?=[\s=+-]|$)|(\d{1,9})([.)])(?=\s|$))")
_WEB_URL = re.compile(r"https?://[^\s/?#]+[^\s]*", re.IGNORECASE)


def md(text) -> str:
    """Text shown exactly as is in Markdown, on one line: nothing in it is markup."""
    text = " ".join(str(text).split())
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return _LINE_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", text)


def md_latex(text: str) -> str:
    """A title or abstract in Markdown: its LaTeX read as every document reads it
    (corpus.latex), then escaped."""
    return md(latex_text(text))


def md_link(url: str, text: str | None = None, escaped: bool = False) -> str:
    """A web link (http or https only; any other scheme, `javascript:` say, is shown as text).
    Characters that could end the link are percent-encoded. `text`: the link's text (Markdown
    already, when `escaped`), else the URL itself."""
    url = url.strip()
    shown = text if escaped and text is not None else md(text if text is not None else url)
    if not _WEB_URL.fullmatch(url):
        return shown if text is not None else md(url)
    safe = quote(url, safe="/:?#=&%@+,;~!$'*-._")
    safe = safe.replace("(", "%28").replace(")", "%29")
    return f"<{safe}>" if text is None else f"[{shown}]({safe})"


def snippet(paper: Paper, width: int = SNIPPET_WIDTH) -> str:
    """The paper's summary sentence, shortened to one line."""
    return shorten(summary(paper), width)


def code_links(paper: Paper) -> str:
    """The paper's code links as Markdown links."""
    return ", ".join(md_link(link) for link in paper.code_links)


def byline(paper: Paper) -> str:
    """Authors, year and venue in one line ("Ada Lovelace, C. Babbage (1843). Notes."), escaped;
    "" when the paper has none of them. The venue is left out of the year when it holds it."""
    parts = []
    if paper.authors:
        parts.append(md_latex(", ".join(paper.authors)))
    venue = latex_text(paper.venue)
    if paper.year and str(paper.year) not in venue:
        parts.append(f"({paper.year})")
    line = " ".join(parts)
    if venue:
        line = f"{line}. {md(venue)}" if line else md(venue)
    return line + "." if line and not line.endswith(".") else line


def reference(paper: Paper) -> str:
    """Byline and link of a paper, for the line under its title ("" when it has neither)."""
    parts = [byline(paper)] if byline(paper) else []
    if paper.url:
        parts.append(md_link(paper.url))
    return " ".join(parts)
