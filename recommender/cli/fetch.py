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

_BOUND_FLAGS: dict[str, str] = {}  # a bound's parameter -> its option
#: What a first `--since last` fetches: the records changed in the last this many days (UTC).
FIRST_WINDOW_DAYS = 2


def first_window_start(now: float | None = None) -> str:
    """The day (YYYY-MM-DD, UTC) a first `--since last` starts from: FIRST_WINDOW_DAYS ago."""
    import time

    seconds = time.time() if now is None else now
    return time.strftime("%Y-%m-%d", time.gmtime(seconds - FIRST_WINDOW_DAYS * 86400))


def bound_options(command):
    """The bounds of a fetch (`http.Bounds`), as options."""
    from ..corpus.fetch.http import Bounds

    default = Bounds()
    options = [
        (
            "--longest-wait",
            "longest_wait",
            click.FloatRange(min=0),
            default.longest_wait,
            "The longest pause a server may ask for (Retry-After) before the fetch stops instead.",
        ),
        (
            "--response-timeout",
            "response_seconds",
            click.FloatRange(min=0.1),
            default.response_seconds,
            "The longest one answer may take, first byte to last.",
        ),
        (
            "--deadline",
            "total_seconds",
            click.FloatRange(min=1),
            default.total_seconds,
            "The longest the whole fetch may take.",
        ),
        (
            "--max-pages",
            "max_pages",
            click.IntRange(min=1),
            default.max_pages,
            "The most pages one fetch asks for.",
        ),
        (
            "--max-records",
            "max_records",
            click.IntRange(min=1),
            default.max_records,
            "The most records one fetch takes.",
        ),
    ]
    for flag, name, kind, value, text in reversed(options):
        _BOUND_FLAGS[name] = flag
        unit = "SECONDS" if isinstance(kind, click.FloatRange) else "N"
        command = click.option(
            flag, name, type=kind, default=value, show_default=True, metavar=unit, help=text
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


def _bounds(options: dict):
    from ..corpus.fetch.http import Bounds

    return Bounds(**{name: options.pop(name) for name in list(Bounds.__dataclass_fields__)})


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
    notice = None if quiet else (lambda message: click.echo(message, err=True))
    with _bounds_named():
        report = arxiv.fetch_arxiv(
            category,
            _pages_root(),
            _target(out),
            since=since,
            base_url=base_url or arxiv.BASE_URL,
            notice=notice,
            delay=arxiv.DELAY_SECONDS if delay is None else delay,
            bounds=_bounds(bounds),
        )
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

    notice = None if quiet else (lambda message: click.echo(message, err=True))
    with _bounds_named():
        report = openreview.fetch_openreview(
            venue,
            _pages_root(),
            _target(out),
            withdrawn=withdrawn,
            base_url=base_url or openreview.BASE_URL,
            notice=notice,
            delay=openreview.DELAY_SECONDS if delay is None else delay,
            bounds=_bounds(bounds),
        )
    _deliver(report.records, out)
    extra = f", {report.withdrawn} withdrawn" if withdrawn else ""
    malformed = f", {report.malformed} malformed notes skipped" if report.malformed else ""
    click.echo(
        f"fetched {report.accepted} accepted papers of {venue}{extra} in {report.pages} pages"
        f"{'' if out == '-' else ' into ' + out}{malformed}{_odd(report.odd)}",
        err=True,
    )
