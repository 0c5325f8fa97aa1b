"""What the `papers` commands share: their common options, reading the papers and IDs they are
given, opening the index, progress on stderr and writing an output file whole."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from pathlib import Path

import click

from ..errors import OptionError, caller_stacklevel
from ..render.tables import FORMATS

# Encoding fewer papers than this takes a few seconds: no progress bar...
PROGRESS_MIN = 100
# ...unless a phase runs this long (a first model export, UMAP's first compile): then every phase is
# logged.
SLOW_PHASE_SECONDS = 3.0
# Seconds instead of SLOW_PHASE_SECONDS, or "off": for logs that are compared (the docs' examples).
SLOW_PHASE_VARIABLE = "PAPERS_SLOW_PHASE_SECONDS"


quiet_option = click.option(
    "--quiet", "-q", is_flag=True, help="No progress on stderr (errors and warnings only)."
)
verbose_option = click.option(
    "--verbose", "-v", is_flag=True, help="List every duplicate paper, not just their count."
)


class PrecisionChoice(click.Choice):
    """`--precision`: the choices embed.models offers (auto, full, fast); the name of a recipe some
    model is built at by default (an index records it) still reads, unlisted."""

    def __init__(self) -> None:
        from ..embed.models import PRECISION_CHOICES, read_precisions

        super().__init__(PRECISION_CHOICES)
        self.read = read_precisions()

    def convert(self, value, param, ctx):
        return value if value in self.read else super().convert(value, param, ctx)


def precision_option(help: str):
    """`--precision` (and $PAPERS_PRECISION) for a command that builds an index."""
    return click.option(
        "--precision", type=PrecisionChoice(), default=None, envvar="PAPERS_PRECISION", help=help
    )


def progress_reporter(quiet: bool, unit: str = "papers"):
    """Progress on stderr: live on a terminal; elsewhere only for long work (PROGRESS_MIN items)."""
    from ..render.progress import ProgressReporter

    return ProgressReporter(
        quiet=quiet, unit=unit, min_total=PROGRESS_MIN, min_seconds=_slow_phase_seconds()
    )


def _slow_phase_seconds() -> float | None:
    value = os.environ.get(SLOW_PHASE_VARIABLE, "").strip()
    if value.lower() == "off":
        return None
    try:
        return max(0.0, float(value)) if value else SLOW_PHASE_SECONDS
    except ValueError:
        warnings.warn(
            f"${SLOW_PHASE_VARIABLE}={value!r} is neither seconds nor 'off': using"
            f" {SLOW_PHASE_SECONDS:g} s",
            stacklevel=caller_stacklevel(),
        )
        return SLOW_PHASE_SECONDS


index_option = click.option(
    "--index",
    "index",
    default=None,
    metavar="NAME|PATH",
    help=(
        "Index name or a path (default: $PAPERS_INDEX or 'default'); names live in $PAPERS_HOME, "
        "else ./indexes/ in a checkout, else the user data folder (see `papers indexes`)."
    ),
)
format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Output format.",
)
model_option = click.option(
    "--model", default=None, help="Refuse the index unless it was built with this model."
)


out_option = click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help=(
        "Write to this file instead of standard output (- is standard output; a FIFO or device is"
        " written into, never replaced)."
    ),
)
wide_option = click.option(
    "--wide", is_flag=True, help="Tables: never cut titles and snippets to the terminal's width."
)


def table_width(wide: bool) -> int | None:
    """How wide a table may be, as `ls` and `git` decide: 0 (no cuts) for --wide, $COLUMNS when it
    is set to a width, else the terminal's width, else 0: a pipe or a file gets whole lines."""
    if wide:
        return 0
    import os

    given = os.environ.get("COLUMNS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    if not sys.stdout.isatty():
        return 0
    import shutil

    return shutil.get_terminal_size().columns


# query.ranking.MODES in the order `--mode` shows them (written out: the CLI starts without numpy;
# tests/test_architecture.py checks they are the same).
MODE_CHOICES = ("hybrid", "dense", "lexical")


def ranking_options(command):
    """Options shared by `like` and `search`: -k, --mode, --min-score, --diverse and --why reach
    the command as one `ranking` (query.ranking.RankingRequest, checked where it is used)."""

    @functools.wraps(command)
    def ranked(k, mode, min_score, diverse, why, **options):
        from ..query.ranking import RankingRequest

        ranking = RankingRequest(k=k, mode=mode, min_score=min_score, diverse=diverse, why=why)
        return command(ranking=ranking, **options)

    options = [
        click.option(
            "-k", "k", type=int, default=10, show_default=True, help="How many papers to return."
        ),
        click.option(
            "--mode",
            type=click.Choice(MODE_CHOICES),
            default="hybrid",
            show_default=True,
            help="Rank by embeddings, TF-IDF, or both fused.",
        ),
        click.option(
            "--min-score",
            type=float,
            default=None,
            help=(
                "Drop papers scoring below this (-1..1). A score is the paper's similarity to the"
                " query or seeds in the ranking's mode (a cosine for dense; higher is closer),"
                " comparable within one answer; a table shows 3 decimals, more where different"
                " scores would otherwise read alike, so equal scores shown are a real tie."
            ),
        ),
        click.option(
            "--exclude",
            "exclude_file",
            type=click.Path(dir_okay=False),
            default=None,
            help="File of paper IDs to leave out (e.g. already read), one a line.",
        ),
        click.option(
            "--diverse",
            type=float,
            default=None,
            metavar="LAMBDA",
            help="Maximal marginal relevance, 0..1 (1 = relevance only, lower = more varied).",
        ),
        click.option(
            "--why", is_flag=True, help="Show the terms that tie each paper to the query."
        ),
        wide_option,
    ]
    for option in reversed(options):
        ranked = option(ranked)
    return ranked


def _read_id_file(path: str | None, option: str, required: bool = False) -> list[str]:
    """Paper IDs or handles from a file, one a line (# starts a comment)."""
    if path is None:
        return []
    from ..corpus.id_files import read_id_file

    return read_id_file(path, option, required)


def read_exclusions(path: str | None) -> list[str]:
    """The paper IDs of an --exclude file (none without one)."""
    return _read_id_file(path, "--exclude")


def opened_index(index, model=None, verify=False):
    """The index to query, with its segments (a context manager that closes it)."""
    from ..query.segmented import open_index

    return open_index(index, model=model, verify=verify)


from_file_option = click.option(
    "--from-file",
    "paper_file",
    type=click.Path(),
    default=None,
    metavar="FILE",
    help=(
        "Papers as a file in any input format (.bib, .json, .jsonl, .csv, .txt): those in the index"
        " are recognised by ID or text, the others embedded now."
    ),
)


def read_paper_file(recommender, path: str | None) -> list:
    """The papers of a --from-file FILE (any format `papers build` reads)."""
    if path is None:
        return []
    return recommender.read_papers(path)


def report_found(recommender, papers, path) -> None:
    """One line on stderr: how many papers of the file the index holds, how many were embedded."""
    if not papers:
        return
    found = sum(row is not None for row in recommender.find_papers(papers))
    click.echo(
        f"{path}: {found} of {len(papers)} papers found in the index, {len(papers) - found}"
        " embedded now",
        err=True,
    )


def notice_to(reporter):
    """A line for the user on stderr, between progress lines, even when the work is too short for
    progress."""

    def notice(message):
        if reporter.shown:
            reporter.note(message)
        elif not reporter.quiet:
            click.echo(message, err=True)

    return notice


def selection_options(command):
    """Which papers: IDs or handles, --from FILE, or --all."""
    options = [
        click.argument("papers", nargs=-1),
        click.option("--all", "all_papers", is_flag=True, help="Every paper in the index."),
        click.option(
            "--from",
            "from_file",
            type=click.Path(dir_okay=False),
            default=None,
            metavar="FILE",
            help="File of paper IDs or handles in the index, one a line (# starts a comment).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _read_references(path: str | None) -> list[str]:
    return _read_id_file(path, "--from", required=True)


def chosen_rows(
    recommender, papers, all_papers, from_file, everything_by_default=False
) -> list[int]:
    from ..reading.related import select_rows

    references = list(papers) + _read_references(from_file)
    if everything_by_default and not references:
        all_papers = True
    # The library's "all papers" and "a file of them", as this command's options.
    if not references and not all_papers:
        raise OptionError("no paper chosen: give paper IDs or handles, --from FILE, or --all")
    return select_rows(recommender, references, all_papers)


@contextlib.contextmanager
def output_file(path: str | None, mode: str = "w"):
    """None (standard output, also for `-`), or a file object for `path` (files.output): a file's
    content replaces it once complete, created exclusively beside it, never through a link, so a
    failed run leaves no file; a FIFO, device or socket is written into."""
    if path is None or path == "-":
        yield None
        return
    from ..files import output, remove_stale_partials, stream_target
    from ..index.layout import check_not_in_index

    target = Path(path)
    check_not_in_index(target)
    if not stream_target(target):
        remove_stale_partials(target.parent)
    with output(target, mode, newline="" if "b" not in mode else None) as stream:
        yield stream
