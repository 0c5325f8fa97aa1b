"""`papers fetch`: new papers from arXiv and OpenReview into a file `build` and `add` read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .common import quiet_option
from .errors import library_errors

#: What a first `--since last` fetches: the records changed in the last this many days (UTC).
FIRST_WINDOW_DAYS = 2


def first_window_start(now: float | None = None) -> str:
    """The day (YYYY-MM-DD, UTC) a first `--since last` starts from: FIRST_WINDOW_DAYS ago."""
    import time

    seconds = time.time() if now is None else now
    return time.strftime("%Y-%m-%d", time.gmtime(seconds - FIRST_WINDOW_DAYS * 86400))


def _fetched_to(out: str, fetch):
    """Run `fetch(path)` into `out`; `-` fetches into a private temporary file (a fetch is written
    whole, resumably) and then copies it to standard output. Returns the fetch's report."""
    if out != "-":
        return fetch(out)
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="papers-fetch-") as folder:
        report = fetch(Path(folder) / "records.jsonl")
        with open(report.out, "rb") as records:
            shutil.copyfileobj(records, sys.stdout.buffer)
        sys.stdout.flush()
    return report


@click.group()
def fetch():
    """Fetch new papers from a public service into a file `papers build` and `papers add` read.

    Examples:

    \b
        papers fetch arxiv --category cs.LG --since last --out today.jsonl
        papers fetch openreview NeurIPS.cc/2025/Conference --out neurips.jsonl
    """


@fetch.command(name="arxiv")
@click.option(
    "--category", required=True, metavar="CATEGORY", help="The arXiv category, e.g. cs.LG."
)
@click.option(
    "--since",
    default=None,
    metavar="DATE|last",
    help=(
        "Records changed since this day (YYYY-MM-DD), or since the last fetch of this category "
        f"('last'; the first time: the last {FIRST_WINDOW_DAYS} days); default: every record of"
        " the category."
    ),
)
@click.option(
    "--out",
    default="-",
    type=click.Path(),
    show_default=True,
    help=(
        "The file to write (arXiv metadata lines); '-': standard output. A stopped fetch to a file "
        "resumes where it stopped."
    ),
)
@click.option(
    "--base-url", default=None, metavar="URL", help="The OAI-PMH endpoint (default: arXiv's)."
)
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Seconds between requests (default 3, as arXiv asks).",
)
@quiet_option
@library_errors
def fetch_arxiv_command(category, since, out, base_url, delay, quiet):
    """The records of an arXiv category since a day, through arXiv's OAI-PMH interface.

    Examples:

    \b
        papers fetch arxiv --category cs.LG --since 2025-06-01 --out new.jsonl
        papers fetch arxiv --category cs.LG --since last | papers add - --index arxiv
    """
    from ..corpus.fetch import arxiv
    from ..index.home import index_home

    state_path = index_home().path / "fetch-state.json"
    key = f"arxiv {category}"
    if since == "last":
        try:
            since = json.loads(state_path.read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError):
            since = None
        if not isinstance(since, str):  # never fetched here: the last few days
            since = first_window_start()
            if not quiet:
                click.echo(
                    f"--since last: {category} was never fetched here: fetching the last "
                    f"{FIRST_WINDOW_DAYS} days (since {since})",
                    err=True,
                )
    notice = None if quiet else (lambda message: click.echo(message, err=True))
    options = dict(
        since=since,
        base_url=base_url or arxiv.BASE_URL,
        notice=notice,
        delay=arxiv.DELAY_SECONDS if delay is None else delay,
    )
    report = _fetched_to(out, lambda path: arxiv.fetch_arxiv(category, path, **options))
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    state[key] = report.until
    state_path.parent.mkdir(parents=True, exist_ok=True)
    from ..files import replacing

    with replacing(state_path) as handle:
        handle.write(json.dumps(state, indent=1, sort_keys=True))
    malformed = f", {report.malformed} malformed records skipped" if report.malformed else ""
    click.echo(
        f"fetched {report.written} {category} records in {report.pages} pages"
        f"{'' if out == '-' else ' into ' + out}{malformed}",
        err=True,
    )


@fetch.command(name="openreview")
@click.argument("venue")
@click.option(
    "--withdrawn", is_flag=True, help="Also the withdrawn submissions (their venue says so)."
)
@click.option(
    "--out",
    default="-",
    type=click.Path(),
    show_default=True,
    help="The file to write (JSON lines); '-': standard output.",
)
@click.option(
    "--base-url", default=None, metavar="URL", help="The API (default: OpenReview's API v2)."
)
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Seconds between requests (default 1).",
)
@quiet_option
@library_errors
def fetch_openreview_command(venue, withdrawn, out, base_url, delay, quiet):
    """The accepted papers of an OpenReview venue (e.g. NeurIPS.cc/2025/Conference), by its
    public API.

    Examples:

    \b
        papers fetch openreview NeurIPS.cc/2025/Conference --out neurips.jsonl
        papers fetch openreview ICLR.cc/2026/Conference | papers add - --index iclr
    """
    from ..corpus.fetch import openreview

    notice = None if quiet else (lambda message: click.echo(message, err=True))
    options = dict(
        withdrawn=withdrawn,
        base_url=base_url or openreview.BASE_URL,
        notice=notice,
        delay=openreview.DELAY_SECONDS if delay is None else delay,
    )
    report = _fetched_to(out, lambda path: openreview.fetch_openreview(venue, path, **options))
    extra = f", {report.withdrawn} withdrawn" if withdrawn else ""
    malformed = f", {report.malformed} malformed notes skipped" if report.malformed else ""
    click.echo(
        f"fetched {report.accepted} accepted papers of {venue}{extra} in {report.pages} pages"
        f"{'' if out == '-' else ' into ' + out}{malformed}",
        err=True,
    )
