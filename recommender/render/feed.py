"""A tag's feed (reading/feed.py) as a table, JSON, Markdown, or an HTML digest for e-mail.

The digest follows the daily digests researchers know (zotero-arxiv-daily): per paper its title
linked to the paper, authors, score, why (the seeds it is there because of) and abstract. It is
one self-contained file: inline styles only (mail clients drop <style> and never run a script),
no script, no image, every field escaped for HTML and only http(s) links followed.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from ..corpus.text import shorten
from .tables import render_results

FEED_FORMATS = ("table", "json", "markdown", "html")
AUTHORS_SHOWN = 6  # more are "et al." in the digest, as digests show them
ABSTRACT_CHARACTERS = 1200  # longer abstracts end in "…" in the digest; the link has the rest


def reading_date(iso: str) -> str:
    """An ISO time (UTC) as people read it: "4 December 2026", with the time of day ("4 December
    2026, 07:00 UTC") unless it is midnight."""
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        return iso
    day = f"{when.day} {when.strftime('%B')} {when.year}"
    if (when.hour, when.minute) == (0, 0):
        return day
    return f"{day}, {when.strftime('%H:%M')} UTC"


def feed_heading(tags: Sequence[str], after: str | None) -> str:
    """A feed's heading: "New papers for mine since 4 December 2026, 07:00 UTC"."""
    heading = f"New papers for {', '.join(tags)}"
    return heading + (f" since {reading_date(after)}" if after else "")


def render_feed(results: Sequence, fmt: str, heading: str = "", width: int | None = None) -> str:
    """A feed's results: `like --tag --why`'s table, JSON or Markdown, or the HTML digest."""
    if fmt == "html":
        return feed_html(results, heading)
    if fmt == "table" and not results:
        return "no new papers\n"
    return render_results(results, fmt, True, width)


def web_link(url: str | None) -> str | None:
    """The URL if a mail reader may follow it (http or https), else None: then shown as text."""
    if (
        isinstance(url, str)
        and url.lower().startswith(("http://", "https://"))
        and url.isprintable()
    ):
        return url
    return None


def _text(value) -> str:
    return html.escape(str(value), quote=True)


_PAGE = (
    "font-family:Helvetica,Arial,sans-serif;max-width:760px;margin:0 auto;padding:16px;"
    "color:#222;background:#fff"
)
_CARD = "border:1px solid #ddd;border-radius:6px;padding:12px 16px;margin:0 0 14px 0"
_TITLE = "font-size:17px;font-weight:bold;color:#1a0dab;text-decoration:none"
_SMALL = "font-size:13px;color:#555;margin:4px 0"
_ABSTRACT = "font-size:14px;line-height:1.45;margin:8px 0 0 0"
_SCORE = (
    "display:inline-block;background:#eef3ff;color:#1a3d8f;border-radius:4px;padding:1px"
    " 6px;font-size:12px"
)


def _card(result) -> str:
    paper = result.paper
    title = _text(paper.title or paper.handle or paper.id)
    link = web_link(paper.url)
    heading = (
        f'<a href="{_text(link)}" style="{_TITLE}">{title}</a>'
        if link
        else f'<span style="{_TITLE}">{title}</span>'
    )
    authors = list(paper.authors[:AUTHORS_SHOWN]) + (
        ["et al."] if len(paper.authors) > AUTHORS_SHOWN else []
    )
    facts = [_text(", ".join(authors))] if authors else []
    if paper.year:
        facts.append(_text(paper.year))
    if paper.venue:
        facts.append(_text(paper.venue))
    because = ", ".join(f"{_text(handle)} ({cosine:.2f})" for _, handle, cosine in result.because)
    terms = ", ".join(_text(term) for term in result.phrases or result.why)
    why = "; ".join(
        part
        for part in (
            f"because of {because}" if because else "",
            f"shares: {terms}" if terms else "",
        )
        if part
    )
    sentences = [
        f"“{_text(pair.seed_sentence)}” ~ “{_text(pair.paper_sentence)}” ({pair.cosine:.2f})"
        for pair in result.sentences
    ]
    lines = [
        f'<div style="{_CARD}">',
        f"<div>{heading}</div>",
        f'<p style="{_SMALL}">{" · ".join(facts)}</p>' if facts else "",
        f'<p style="{_SMALL}"><span style="{_SCORE}">score {result.score:.3f}</span> '
        f"<span>{_text(paper.id)}</span>"
        + (
            f' · <span style="color:#555">{_text(paper.url)}</span>'
            if paper.url and not link
            else ""
        )
        + "</p>",
        f'<p style="{_SMALL}"><b>Why:</b> {why}</p>' if why else "",
        *(f'<p style="{_SMALL}">{sentence}</p>' for sentence in sentences),
        (
            f'<p style="{_ABSTRACT}">{_text(shorten(paper.abstract, ABSTRACT_CHARACTERS))}</p>'
            if paper.abstract
            else ""
        ),
        "</div>",
    ]
    return "\n".join(line for line in lines if line)


def feed_html(results: Sequence, heading: str) -> str:
    """The feed as one self-contained HTML page that reads well in a mail client."""
    cards = (
        "\n".join(_card(result) for result in results) or f'<p style="{_SMALL}">No new papers.</p>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport"'
        ' content="width=device-width,'
        f' initial-scale=1">\n<title>{_text(heading)}</title>\n</head>\n<body'
        f' style="margin:0;background:#fff">\n<div style="{_PAGE}">\n<h1'
        ' style="font-size:20px;margin:0 0 14px'
        f' 0">{_text(heading)}</h1>\n{cards}\n</div>\n</body>\n</html>\n'
    )
