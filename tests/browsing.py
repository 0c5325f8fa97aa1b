"""What the browser tests of `papers serve` share (tests/test_serve_browser.py,
tests/test_serve_pages_browser.py): a page whose problems are collected, and a reader's corpus."""

from __future__ import annotations

import contextlib

from corpus import topic_papers


def reader_papers(categories: bool = False) -> list[dict]:
    """topic_papers with authors, years, venues and links (and arXiv categories: `categories`)."""
    papers = topic_papers(per_topic=6)
    for number, paper in enumerate(papers):
        paper["authors"] = ["Ada Lovelace", "Grace Hopper"] if number % 2 else ["Alan Turing"]
        paper["year"], paper["venue"] = 2020 + number % 5, ["ICML", "NeurIPS", "ACL"][number % 3]
        paper["url"] = f"https://example.org/{paper['id']}"
        if categories:
            private = paper["id"].startswith("privacy")
            paper["categories"] = ["cs.CR", "cs.LG"] if private else ["cs.CV"]
    return papers


@contextlib.contextmanager
def watched_page(browser, width: int = 1200, height: int = 800):
    """(page, problems): a page in a window of this size whose script errors, console errors (a CSP
    violation is one) and dialogs are all collected in `problems`."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}") if message.type == "error" else None
        ),
    )
    page.on(
        "dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss())
    )
    try:
        yield page, problems
    finally:
        context.close()
