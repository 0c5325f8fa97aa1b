"""`papers fetch`: new papers from arXiv and OpenReview into a file `build` and `add` read."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import click

from .common import output_file, quiet_option
from .errors import library_errors

#: The bounds of a fetch as options: (option, its `http.Bounds` field, its least value, help).
_BOUND_OPTIONS = (
    (
        "--longest-wait",
        "longest_wait",
        0,
        "The longest pause a server may ask for (Retry-After) before the fetch stops instead.",
    ),
    (
        "--response-timeout",
        "response_seconds",
        0.1,
        "The longest one answer may take, first byte to last.",
    ),
    ("--deadline", "total_seconds", 1, "The longest the whole fetch may take."),
    ("--max-pages", "max_pages", 1, "The most pages one fetch asks for."),
    ("--max-records", "max_records", 1, "The most records one fetch takes."),
)
_BOUND_FLAGS = {name: flag for flag, name, _, _ in _BOUND_OPTIONS}  # a bound's field -> its option
#: What a first `--since last` fetches: the records changed in the last this many days (UTC).
FIRST_WINDOW_DAYS = 2


def first_window_start(now: float | None = None) -> str:
    """The day (YYYY-MM-DD, UTC) a first `--since last` starts from: FIRST_WINDOW_DAYS ago."""
    import time

    seconds = time.time() if now is None else now
    return time.strftime("%Y-%m-%d", time.gmtime(seconds - FIRST_WINDOW_DAYS * 86400))


def bound_options(command):
    """The bounds of a fetch (`http.Bounds`), as options: a float bound in seconds, an integer
    bound a count."""
    from ..corpus.fetch.http import Bounds

    default = Bounds()
    for flag, name, least, text in reversed(_BOUND_OPTIONS):
        value = getattr(default, name)
        seconds = isinstance(value, float)
        kind = click.FloatRange(min=least) if seconds else click.IntRange(min=least)
        command = click.option(
            flag,
            name,
            type=kind,
            default=value,
            show_default=True,
            metavar="SECONDS" if seconds else "N",
            help=text,
        )(command)
    return command


@contextlib.contextmanager
def _bounds_named():
    """A bound reached, with the option that sets it."""
    from ..errors import LimitError, RecommenderError

    try:
        yield
    except LimitError as error:
        flag = _BOUND_FLAGS.get(error.parameter, error.parameter)
        raise RecommenderError(f"{error} (a larger {flag} goes further)") from None


def _service(base_url: str, delay: float, quiet: bool, bounds: dict):
    """How the service is asked: at `base_url`, `delay` seconds between requests, within the
    bounds the options gave, each page and retry said unless `quiet`."""
    from ..corpus.fetch.http import Bounds, Service

    notice = None if quiet else (lambda message: click.echo(message, err=True))
    return Service(base_url, delay, bounds=Bounds(**bounds), notice=notice)


def _pages_root() -> Path:
    from ..index.home import index_home

    return index_home().path / "fetch-pages"


def _target(out: str) -> str:
    """What the records are for, as a fetch's resume remembers it."""
    return "-" if out == "-" else os.path.abspath(out)


def _deliver(records, out: str) -> None:
    """The fetched records into `out` (`-`: standard output) through the one output mechanism of
    every command (`output_file`: a file replaced whole, a FIFO or device written into); the
    pages are forgotten only once delivered."""
    with output_file(out, "wb") as stream:
        records.deliver(stream if stream is not None else sys.stdout.buffer)
    records.forget()


def _fetch_state(path: Path) -> dict:
    """What `--since last` remembers: {"arxiv CATEGORY": "YYYY-MM-DD"}; {} when missing or
    damaged (not a JSON object)."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


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
@bound_options
@quiet_option
@library_errors
def fetch_arxiv_command(category, since, out, base_url, delay, quiet, **bounds):
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
        since = _fetch_state(state_path).get(key)
        if not isinstance(since, str):  # never fetched here: the last few days
            since = first_window_start()
            if not quiet:
                click.echo(
                    f"--since last: {category} was never fetched here: fetching the last "
                    f"{FIRST_WINDOW_DAYS} days (since {since})",
                    err=True,
                )
    service = _service(
        base_url or arxiv.BASE_URL, arxiv.DELAY_SECONDS if delay is None else delay, quiet, bounds
    )
    with _bounds_named():
        report = arxiv.fetch_arxiv(category, _pages_root(), _target(out), since, service)
    _deliver(report.records, out)
    state = _fetch_state(state_path)
    state[key] = report.until
    state_path.parent.mkdir(parents=True, exist_ok=True)
    from ..files import replacing

    with replacing(state_path) as handle:
        handle.write(json.dumps(state, indent=1, sort_keys=True))
    malformed = f", {report.malformed} malformed records skipped" if report.malformed else ""
    click.echo(
        f"fetched {report.written} {category} records in {report.pages} pages"
        f"{'' if out == '-' else ' into ' + out}{malformed}{_odd(report.odd)}",
        err=True,
    )


def _odd(count: int) -> str:
    return f", {count} skipped for their ID" if count else ""


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
@bound_options
@quiet_option
@library_errors
def fetch_openreview_command(venue, withdrawn, out, base_url, delay, quiet, **bounds):
    """The accepted papers of an OpenReview venue (e.g. NeurIPS.cc/2025/Conference), by its
    public API.

    Examples:

    \b
        papers fetch openreview NeurIPS.cc/2025/Conference --out neurips.jsonl
        papers fetch openreview ICLR.cc/2026/Conference | papers add - --index iclr
    """
    from ..corpus.fetch import openreview

    service = _service(
        base_url or openreview.BASE_URL,
        openreview.DELAY_SECONDS if delay is None else delay,
        quiet,
        bounds,
    )
    with _bounds_named():
        report = openreview.fetch_openreview(venue, _pages_root(), _target(out), withdrawn, service)
    _deliver(report.records, out)
    extra = f", {report.withdrawn} withdrawn" if withdrawn else ""
    malformed = f", {report.malformed} malformed notes skipped" if report.malformed else ""
    click.echo(
        f"fetched {report.accepted} accepted papers of {venue}{extra} in {report.pages} pages"
        f"{'' if out == '-' else ' into ' + out}{malformed}{_odd(report.odd)}",
        err=True,
    )
