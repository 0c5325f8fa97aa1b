"""The `papers` command: each subcommand parses, calls one library function, prints."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import threading
import warnings
from pathlib import Path

import click

from . import DISTRIBUTION, __version__
from .errors import OptionError, RecommenderError
from .render.tables import FORMATS, plural

DEFAULT_INPUT = "seeds"
# Encoding fewer papers than this takes a few seconds: no progress bar...
PROGRESS_MIN = 100
# ...unless a phase runs this long (a first model export, UMAP's first compile): then every phase is
# logged.
SLOW_PHASE_SECONDS = 3.0
# Seconds instead of SLOW_PHASE_SECONDS, or "off": for logs that are compared (the docs' examples).
SLOW_PHASE_VARIABLE = "PAPERS_SLOW_PHASE_SECONDS"


def _show_warning(message, category, filename, lineno, file=None, line=None):
    click.echo(f"warning: {message}", err=True)


@contextlib.contextmanager
def _summarised_warnings(verbose: bool):
    """Warnings on stderr, one line each; duplicate papers summarised once unless `verbose`."""
    from .corpus.papers import DuplicatePaperWarning

    duplicates = []

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DuplicatePaperWarning) and not verbose:
            duplicates.append(str(message))
        else:
            _show_warning(message, category, filename, lineno)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "always", UserWarning
            )  # every run shows its warnings, not just the first
            warnings.showwarning = show
            yield
    finally:
        if len(duplicates) == 1:
            _show_warning(duplicates[0], DuplicatePaperWarning, "", 0)
        elif duplicates:
            click.echo(
                f"warning: {len(duplicates)} duplicate papers kept once (--verbose lists them)",
                err=True,
            )


def library_errors(command):
    """Library exceptions become one-line messages with a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        if sys.stdout is None and kwargs.get("out") is None:
            # Started with standard output closed (`papers list >&-`): its results could go nowhere.
            raise click.ClickException(
                "standard output is closed: nothing can be printed (redirect it to a file)"
            )
        try:
            with _summarised_warnings(kwargs.get("verbose", False)), _terminate_unwinds():
                return command(*args, **kwargs)
        except (
            OptionError
        ) as error:  # an option's value out of range: bad usage, as click's own errors
            raise _UsageLine(_naming_the_option(error)) from None
        except RecommenderError as error:
            raise click.ClickException(str(error)) from None
        except BrokenPipeError:
            # The reader went away (`papers list | head`): stop quietly, as Unix tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except OSError as error:
            where = f"{error.filename}: " if error.filename else ""
            raise click.ClickException(f"{where}{error.strerror or error}") from None
        except MemoryError:
            raise click.ClickException(
                "out of memory: free some memory or raise the limit (ulimit -v)"
            ) from None
        except KeyboardInterrupt:
            # Ctrl-C outside a build (those say what they keep): one line, as a build's, not click's
            # "Aborted!".
            out = kwargs.get("out")
            kept = f"{out} was not written (an earlier file of that name is kept); " if out else ""
            click.echo(f"interrupted: {kept}run the same command again", err=True)
            sys.exit(130)
        except (
            ImportError
        ) as error:  # a library that cannot be mapped under a memory limit, or a broken install
            raise click.ClickException(
                f"cannot load a library ({error}): check memory limits (ulimit -v) or reinstall"
            ) from None

    return wrapper


quiet_option = click.option(
    "--quiet", "-q", is_flag=True, help="No progress on stderr (errors and warnings only)."
)
verbose_option = click.option(
    "--verbose", "-v", is_flag=True, help="List every duplicate paper, not just their count."
)


def _reporter(quiet: bool, unit: str = "papers"):
    """Progress on stderr: live on a terminal; elsewhere only for long work (PROGRESS_MIN items)."""
    from .render.progress import ProgressReporter

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
            stacklevel=2,
        )
        return SLOW_PHASE_SECONDS


@contextlib.contextmanager
def _terminate_unwinds():
    """SIGTERM (`kill`, a closed terminal) unwinds like Ctrl-C while a command runs, so a partial
    output file or a build's private folder is removed on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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


wide_option = click.option(
    "--wide", is_flag=True, help="Tables: never cut titles and snippets to the terminal's width."
)


def _table_width(wide: bool) -> int | None:
    """How wide a table may be: the terminal's width, 0 for --wide (no cuts), or None when
    standard output is not a terminal (the fixed default widths)."""
    if wide:
        return 0
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size().columns


def ranking_options(command):
    """Options shared by `like` and `search`."""
    options = [
        click.option(
            "-k", "k", type=int, default=10, show_default=True, help="How many papers to return."
        ),
        click.option(
            "--mode",
            type=click.Choice(["hybrid", "dense", "lexical"]),
            default="hybrid",
            show_default=True,
            help="Rank by embeddings, TF-IDF, or both fused.",
        ),
        click.option(
            "--min-score", type=float, default=None, help="Drop papers scoring below this (-1..1)."
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
        command = option(command)
    return command


def _read_id_file(path: str | None, option: str, required: bool = False) -> list[str]:
    """Paper IDs or handles from a file, one a line (# starts a comment)."""
    if path is None:
        return []
    from .corpus.id_files import read_id_file

    return read_id_file(path, option, required)


def _read_exclusions(path: str | None) -> list[str]:
    return _read_id_file(path, "--exclude")


def _open(index, model=None, verify=False):
    from .query.segmented import open_index

    return open_index(index, model=model, verify=verify)


@contextlib.contextmanager
def _one_line_usage():
    """Click's usage errors (a bad option value, an unknown option) as one `Error:` line, like every
    other error."""
    try:
        yield
    except click.UsageError as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # bare `papers`: click shows the help
            raise
        command = error.ctx.command_path if error.ctx is not None else "papers"
        message = error.format_message().rstrip(".")
        raise _UsageLine(f"{message} (see `{command} --help`)") from None


def _naming_the_option(error: OptionError) -> str:
    """The library's message, with the command's name for the parameter at fault (as click's)."""
    context = click.get_current_context(silent=True)
    params = context.command.params if context is not None else []
    option = next((param for param in params if param.name == error.parameter), None)
    if option is None:
        return str(error)
    name = option.opts[0] if isinstance(option, click.Option) else option.human_readable_name
    return f"Invalid value for '{name}': {error}"


class _UsageLine(click.ClickException):
    exit_code = 2


class _Group(click.Group):
    def main(self, *args, **kwargs):
        """Output that cannot be written (`papers --help > /dev/full`, a closed pipe) is one line,
        not a traceback."""
        try:
            return super().main(*args, **kwargs)
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(141)
        # library errors are caught in each command: this is writing out help or a version
        except OSError as error:
            _silence_stdout()
            click.echo(
                f"Error: cannot write to standard output: {error.strerror or error}", err=True
            )
            sys.exit(1)

    def make_context(self, *args, **kwargs):
        with _one_line_usage():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with _one_line_usage():
            return super().invoke(ctx)


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so what is still buffered cannot fail again at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__,
    package_name=DISTRIBUTION,
    message="papers %(version)s (the %(package)s distribution)",
)
def main():
    """Find related research papers: `papers build`, then `papers like ID` or `papers search
    TEXT`."""


@main.command()
@click.argument("inputs", nargs=-1, type=click.Path())
@index_option
@click.option(
    "--model",
    default=None,
    help=(
        "sentence-transformers model name or folder (default: all-MiniLM-L6-v2, packaged); "
        "'static': the fast tier, static embeddings distilled from it (~20x faster to build, "
        "ranking about as well as TF-IDF alone: docs/tiers.md); 'all-mpnet-base-v2': the quality "
        "tier (its parts installed first; ~2x the build time at int8, its default; level "
        "with the default in hybrid ranking, +0.7 MAP dense: docs/models.md). `papers models` "
        "lists them. A rebuild keeps the index's own unless given."
    ),
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "int8"]),
    default=None,
    help=(
        "Weights the model encodes with: fp32 (the default for a new index; int8 for"
        " all-mpnet-base-v2 on a CPU, where it ranks as well), or int8, ~2x faster on a CPU at"
        " about 1 MAP point less with the default model (docs/tiers.md). A rebuild keeps the"
        " index's own unless given."
    ),
)
@click.option(
    "--upgrade",
    is_flag=True,
    help=(
        "Rebuild an index made with --model static with the full model, from its own papers "
        "(or INPUTS); it answers queries from its fast version until the new one is ready."
    ),
)
@click.option(
    "--chunking",
    type=click.Choice(["sentences", "windows", "truncate"]),
    default=None,
    help=(
        "Long abstracts: mean of windows that each start with the title and end at a sentence end "
        "(the default for a new index), of plain token windows, or cut at the model's limit. "
        "A rebuild keeps the index's own unless given."
    ),
)
@click.option(
    "--index-type",
    type=click.Choice(["auto", "flat", "hnsw", "ivf"]),
    default="auto",
    show_default=True,
    help="FAISS index: exact for small corpora, approximate above a threshold.",
)
@click.option(
    "--wait", is_flag=True, help="If another build holds the index, wait for it instead of failing."
)
@click.option(
    "--compact",
    is_flag=True,
    help=(
        "Rebuild the index from its own live papers: those of `papers add` merged in, those of "
        "`papers remove` left out (their vectors come from the cache)."
    ),
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="FIELD=VALUE",
    help=(
        "Keep only matching papers: category=cs.LG,cs.CL, year>=2020, venue=*ICML* (repeatable; all"
        " must hold)."
    ),
)
@click.option(
    "--keep-withdrawn",
    is_flag=True,
    help="Index withdrawn and desk-rejected OpenReview submissions too (left out by default).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help=(
        "Encode here, or on a Ray cluster ($RAY_ADDRESS, else a local one); needs"
        f" {DISTRIBUTION}[ray]."
    ),
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Encode on the CPU or a CUDA GPU; auto: a GPU where torch (or the Ray cluster) has one.",
)
@quiet_option
@verbose_option
@library_errors
def build(
    inputs,
    index,
    model,
    precision,
    upgrade,
    chunking,
    index_type,
    wait,
    compact,
    where,
    keep_withdrawn,
    engine,
    device,
    quiet,
    verbose,
):
    """Build an index from files or folders of papers (default: seeds/ in a checkout).

    Reads .bib (BibTeX), .json/.jsonl (our records, the arXiv metadata snapshot,
    OpenAlex works, Semantic Scholar papers, CSL-JSON from Zotero, OpenReview notes),
    .csv, .txt, and a Zotero library in place (`zotero:` or PATH/zotero.sqlite).

    A build that is stopped (Ctrl-C, a kill, a crash) keeps the papers it encoded:
    run the same command again to resume.

    Examples:

    \b
        papers build
        papers build my-papers.bib --index mine
        papers build zotero: --index library
        papers build arxiv-metadata-oai-snapshot.json --where category=cs.LG --index arxiv-lg
        papers build corpus/ --chunking truncate
        papers build arxiv-metadata-oai-snapshot.json --model static --index arxiv
        papers build --upgrade --index arxiv
        papers build --compact --index arxiv
        RAY_ADDRESS=10.0.0.5:6379 papers build corpus/ --engine ray
    """
    from .embed.windows import Chunking
    from .errors import InputError
    from .index.build import build_index

    if compact:
        if inputs or upgrade or where or model or precision or chunking:
            raise InputError(
                "--compact rebuilds the index from its own papers with its own settings: "
                "give no INPUTS, --upgrade, --where, --model, --precision or --chunking with it"
            )
        from .index.segments import compact as compact_index

        with _stopped_builds(), _reporter(quiet) as reporter:
            report = compact_index(
                index,
                wait=wait,
                progress=reporter.update,
                notice=_notice(reporter),
                on_phase=reporter.phase,
            )
        click.echo(
            f"compacted {report.papers} papers into {report.index_dir}: encoded {report.encoded},"
            f" reused {report.reused} from the cache ({report.index_kind} search)"
        )
        return
    if not inputs and not upgrade:
        if not Path(DEFAULT_INPUT).is_dir():
            raise InputError(
                "no input given: name a file or folder of papers, e.g. `papers build my-papers.bib`"
            )
        inputs = (DEFAULT_INPUT,)

    with _stopped_builds(), _reporter(quiet) as reporter:
        report = build_index(
            list(inputs),
            index=index,
            model=model,
            chunking=Chunking(strategy=chunking) if chunking else None,
            index_type=index_type,
            progress=reporter.update,
            wait=wait,
            on_phase=reporter.phase,
            where=where,
            keep_withdrawn=keep_withdrawn,
            notice=_notice(reporter),
            engine=engine,
            device=device,
            precision=precision,
            upgrade=upgrade,
        )
    from .render.indexes import render_build_changes, render_build_summary

    if not quiet:
        click.echo(render_build_changes(report), err=True, nl=False)
    click.echo(render_build_summary(report), nl=False)


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


def _read_paper_file(recommender, path: str | None) -> list:
    """The papers of a --from-file FILE (any format `papers build` reads)."""
    if path is None:
        return []
    return recommender.read_papers(path)


def _report_found(recommender, papers, path) -> None:
    """One line on stderr: how many papers of the file the index holds, how many were embedded."""
    if not papers:
        return
    found = sum(row is not None for row in recommender.find_papers(papers))
    click.echo(
        f"{path}: {found} of {len(papers)} papers found in the index, {len(papers) - found}"
        " embedded now",
        err=True,
    )


def _notice(reporter):
    """A line for the user on stderr, between progress lines, even when the work is too short for
    progress."""

    def notice(message):
        if reporter.shown:
            reporter.note(message)
        elif not reporter.quiet:
            click.echo(message, err=True)

    return notice


@contextlib.contextmanager
def _stopped_builds(command: str = "build"):
    """Ctrl-C during a build (of `papers build`, or of `papers evaluate`'s index): one line saying
    what is kept and how to resume, exit code 130."""
    from .errors import EncodingInterrupted

    try:
        yield
    except EncodingInterrupted as interrupt:
        click.echo(
            f"interrupted: {interrupt.kept:,} of {interrupt.total:,} papers are encoded and kept in"
            f" the cache; run the same {command} again to resume",
            err=True,
        )
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo(
            f"interrupted: run the same {command} again (papers already encoded are kept in the"
            " cache)",
            err=True,
        )
        sys.exit(130)


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@index_option
@click.option(
    "--no-compact",
    is_flag=True,
    help="Never compact in this add, however large the segments have grown.",
)
@click.option(
    "--sync",
    is_flag=True,
    help="The index's papers from these files are exactly theirs: papers an earlier build or add "
    "read from them that they no longer hold are removed.",
)
@quiet_option
@library_errors
def add(inputs, index, no_compact, sync, quiet):
    """Add papers to an index without rebuilding it: only the new ones are encoded.

    Papers whose ID the index holds are skipped, so adding a file twice adds nothing twice.
    They are written as a segment beside the index; once the segments hold more than a tenth
    of its papers, the add starts `papers build --compact` in the background and returns.
    `-` reads the papers (JSON lines) from standard input.

    Examples:

    \b
        papers add today.jsonl --index arxiv
        papers add new.bib
        papers add library.bib --sync
    """
    from .errors import OptionError
    from .index.segments import COMPACT_SHARE, add_papers

    if sync and "-" in inputs:
        raise OptionError("--sync compares the papers of named files: standard input has no name")
    with contextlib.ExitStack() as stack, _stopped_builds("add"), _reporter(quiet) as reporter:
        paths = [_stdin_file(stack) if path == "-" else path for path in inputs]
        report = add_papers(
            paths,
            index=index,
            progress=reporter.update,
            notice=_notice(reporter),
            compact_share=None if no_compact else COMPACT_SHARE,
            background=True,
            sync=sync,
        )
    compacted = " and compacted the index" if report.compacted else ""
    if report.compacting is not None:
        compacted = f"; compacting the index in the background (process {report.compacting})"
    elif report.compaction_running:
        compacted = "; a compaction of the index is running already"
    if sync:
        source = "them" if len(inputs) > 1 else "it"
        compacted = f"; removed {report.removed} gone from {source}{compacted}"
    click.echo(
        f"added {report.added} papers to {report.index_dir} (encoded {report.encoded}; "
        f"{report.skipped} already in the index){compacted}"
    )


def _stdin_file(stack) -> str:
    """Standard input copied to a private temporary .jsonl file, for the readers that take paths."""
    import shutil
    import tempfile

    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="papers-add-"))
    path = os.path.join(folder, "stdin.jsonl")
    with open(path, "wb") as handle:
        shutil.copyfileobj(sys.stdin.buffer, handle)
    return path


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


@main.group()
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
        "('last'); default: every record of the category."
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
    from .corpus.fetch import arxiv
    from .index.home import index_home

    state_path = index_home().path / "fetch-state.json"
    key = f"arxiv {category}"
    if since == "last":
        try:
            since = json.loads(state_path.read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError):
            since = None
        if since is None:
            raise OptionError(
                f"--since last: {category} was never fetched here: give --since YYYY-MM-DD the"
                " first time"
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
    from .files import replacing

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
    from .corpus.fetch import openreview

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


@main.command()
@click.argument("ids", nargs=-1, required=True)
@index_option
@library_errors
def remove(ids, index):
    """Remove papers from an index by ID (they are left out of every result until `papers build
    --compact` drops them for good).

    Examples:

    \b
        papers remove 2401.01234 --index arxiv
    """
    from .index.segments import remove_papers

    removed = remove_papers(ids, index=index)
    click.echo(f"removed {removed} papers from {index or 'the index'}")


@main.command()
@click.argument("papers", nargs=-1)
@click.option(
    "--not",
    "not_",
    multiple=True,
    metavar="ID",
    help="A paper the results should be unlike (repeatable).",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="TAG",
    help="Seeds: the papers of this tag (repeatable), unlike those marked not interested for it.",
)
@click.option(
    "--exclude-seen",
    multiple=True,
    metavar="TAG",
    help="Leave out the papers marked seen for this tag (repeatable).",
)
@from_file_option
@ranking_options
@index_option
@model_option
@format_option
@library_errors
def like(
    papers,
    not_,
    tags,
    exclude_seen,
    paper_file,
    k,
    mode,
    min_score,
    exclude_file,
    diverse,
    why,
    wide,
    index,
    model,
    fmt,
):
    """Papers like the given ones (ID, handle or unique ID prefix), never the papers themselves.

    Examples:

    \b
        papers like FlashDP
        papers like FlashDP VADB -k 5 --why
        papers like FlashDP --not TFLA --format json
        papers like --from-file reading-list.bib -k 20
        papers like --tag to-read --exclude-seen to-read --why
    """
    from .render.tables import render_results

    if tags and (
        papers or paper_file or min_score is not None or diverse is not None or exclude_file
    ):
        raise click.UsageError(
            "--tag takes its seeds from the tag: give no papers, --from-file, --min-score, "
            "--diverse or --exclude with it"
        )
    if exclude_seen and not tags:
        raise click.UsageError(
            "--exclude-seen leaves seen papers out of a tag's recommendations: give --tag too"
        )
    if tags:
        from .reading.tags import TagStore, recommend_for_tags

        with _open(index, model) as recommender:
            results = recommend_for_tags(
                recommender,
                TagStore(recommender.stored.index_dir),
                tags,
                k=k,
                mode=mode,
                why=why,
                exclude_seen=exclude_seen,
                not_=not_,
            )
        click.echo(render_results(results, fmt, why, _table_width(wide)), nl=False)
        return
    with _open(index, model) as recommender:
        outside = _read_paper_file(recommender, paper_file)
        results = recommender.like(
            *papers,
            k=k,
            not_=not_,
            exclude=_read_exclusions(exclude_file),
            min_score=min_score,
            diverse=diverse,
            why=why,
            mode=mode,
            papers=outside,
        )
        _report_found(recommender, outside, paper_file)
    click.echo(render_results(results, fmt, why, _table_width(wide)), nl=False)


@main.command()
@click.option(
    "--tag",
    "tags",
    multiple=True,
    required=True,
    metavar="TAG",
    help="The tag whose profile ranks the feed (repeatable: the tags as one profile).",
)
@click.option(
    "--since",
    default="last",
    show_default=True,
    metavar="DATE|last",
    help=(
        "Papers added since the tag's feed was last written (last), "
        "or since this date (2026-12-01)."
    ),
)
@click.option(
    "-k", "k", type=int, default=20, show_default=True, help="How many new papers, best first."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "html"]),
    default="table",
    show_default=True,
    help="html: a self-contained digest to read or send by e-mail.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help=(
        "Write to this file instead of standard output (- is standard output; "
        "a FIFO or device is written into, never replaced)."
    ),
)
@index_option
@click.option("--wide", is_flag=True, help="Do not fit the table to the terminal's width.")
@quiet_option
@library_errors
def feed(tags, since, k, fmt, out, index, wide, quiet):
    """The papers added since the tag's feed was last read, ranked as `like --tag` ranks them,
    without the tag's papers and those marked seen or not interested for it, each with the seeds
    it is there because of. A feed counts as read once it is written; a second feed the same day
    lists only what was added since.

    Examples:

    \b
        papers feed --tag mine
        papers feed --tag mine --format html --out today.html
        papers feed --tag mine --since 2026-11-01 -k 50
    """
    from .errors import InputError
    from .reading.feed import feed as make_feed
    from .reading.feed import mark_read, parse_since
    from .reading.tags import TagStore
    from .render.feed import render_feed

    try:
        parse_since(since)
    except InputError as error:
        raise click.BadParameter(str(error), param_hint="--since") from None
    with _open(index) as recommender:
        store = TagStore(recommender.stored.index_dir)
        made = make_feed(recommender, store, tags, since=since, k=k)
        heading = f"New papers for {', '.join(made.tags)}"
        heading += f" since {made.after}" if made.after else ""
        text = render_feed(made.results, fmt, heading, _table_width(wide))
        with _output_file(out) as partial:
            (sys.stdout if partial is None else partial).write(text)
        mark_read(store, made)
    if not quiet:
        shown = plural(made.new, "new paper")
        if len(made.results) < made.new:
            shown += f", the best {len(made.results)} shown (-k for more)"
        click.echo(f"{shown}{' in ' + out if out not in (None, '-') else ''}", err=True)


@main.group(invoke_without_command=True)
@index_option
@format_option
@click.pass_context
@library_errors
def tags(context, index, fmt):
    """Your tags of papers, kept beside the index (the ones `papers serve` shows): list them.

    Examples:

    \b
        papers tags
        papers tags add to-read FlashDP VADB
        papers tags not to-read TFLA
        papers like --tag to-read --exclude-seen to-read
    """
    if context.invoked_subcommand is not None:
        return
    import json

    from .reading.tags import TagStore
    from .render.tables import render

    with _open(index) as recommender:
        store = TagStore(recommender.stored.index_dir)
        rows = [
            {
                "tag": name,
                "papers": ids,
                "not": store.marked(name, "not"),
                "seen": store.marked(name, "seen"),
            }
            for name, ids in store.tags().items()
        ]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
    elif not rows:
        click.echo("no tags yet: add some with `papers tags add TAG PAPER...`")
    else:
        shown = [
            {
                "tag": row["tag"],
                "papers": len(row["papers"]),
                "not interested": len(row["not"]),
                "seen": len(row["seen"]),
                "first papers": ", ".join(row["papers"][:3]),
            }
            for row in rows
        ]
        click.echo(
            render(
                shown,
                [],
                fmt,
                {"tag": 0, "papers": 0, "not interested": 0, "seen": 0, "first papers": 60},
            ),
            nl=False,
        )


def _tag_command(name: str, summary: str, action):
    @tags.command(name=name, help=summary)
    @click.argument("tag")
    @click.argument("papers", nargs=-1, required=True)
    @index_option
    @library_errors
    def command(tag, papers, index):
        from .reading.tags import TagStore

        with _open(index) as recommender:
            store = TagStore(recommender.stored.index_dir)
            for reference in papers:
                held = action(recommender, store, tag, reference)
        click.echo(
            f"{tag}: {len(held)} papers "
            f"{'' if name in ('add', 'remove') else 'marked ' + name}".rstrip(),
            err=True,
        )

    return command


for _name, _summary in (
    ("add", "Tag papers (ID, handle or unique prefix)."),
    ("remove", "Untag papers."),
    ("not", "Mark papers not interested for a tag: its recommendations are unlike them."),
    ("seen", "Mark papers seen for a tag: `like --tag T --exclude-seen T` leaves them out."),
):
    _tag_command(
        _name, _summary, (lambda name: lambda r, s, t, p: _tag_action(name)(r, s, t, p))(_name)
    )


@tags.command(name="unmark")
@click.argument("tag")
@click.argument("papers", nargs=-1, required=True)
@click.option(
    "--mark",
    "kind",
    type=click.Choice(["not", "seen"]),
    required=True,
    help="Which mark to take back.",
)
@index_option
@library_errors
def unmark(tag, papers, kind, index):
    """Take back papers' not-interested or seen mark for a tag."""
    from .reading.tags import TagStore, unmark_paper

    with _open(index) as recommender:
        store = TagStore(recommender.stored.index_dir)
        for reference in papers:
            held = unmark_paper(recommender, store, tag, reference, kind)
    click.echo(f"{tag}: {len(held)} papers marked {kind}", err=True)


def _tag_action(name: str):
    from .reading import tags as tagging

    if name == "add":
        return tagging.tag_paper
    if name == "remove":
        return tagging.untag_paper
    return lambda recommender, store, tag, reference: tagging.mark_paper(
        recommender, store, tag, reference, name
    )


@main.command()
@click.argument("text")
@ranking_options
@index_option
@model_option
@format_option
@library_errors
def search(text, k, mode, min_score, exclude_file, diverse, why, wide, index, model, fmt):
    """Papers about a free text.

    Examples:

    \b
        papers search "differentially private training of language models"
        papers search "video quality" --mode lexical -k 3
    """
    from .render.tables import render_results

    with _open(index, model) as recommender:
        results = recommender.search(
            text,
            k=k,
            exclude=_read_exclusions(exclude_file),
            min_score=min_score,
            diverse=diverse,
            why=why,
            mode=mode,
        )
    click.echo(render_results(results, fmt, why, _table_width(wide)), nl=False)


@main.command()
@click.argument("paper")
@index_option
@format_option
@library_errors
def show(paper, index, fmt):
    """One paper in full, with its metadata and code links.

    Examples:

    \b
        papers show FlashDP
        papers show f68119 --format json
    """
    from .render.tables import render_paper

    with _open(index) as recommender:
        found = recommender.show(paper)
    click.echo(render_paper(found, fmt), nl=False)


@main.command(name="list")
@index_option
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="FIELD=VALUE",
    help=(
        "Only papers that match, as `papers build --where` takes it: category=cs.LG, year>=2020, "
        "venue=*ICML* (repeatable; all must hold)."
    ),
)
@click.option(
    "--limit",
    type=int,
    default=None,
    metavar="N",
    help="At most N papers (the first in index order).",
)
@format_option
@wide_option
@library_errors
def list_(index, where, limit, fmt, wide):
    """Every paper in the index (or those --where picks).

    Examples:

    \b
        papers list
        papers list --limit 20
        papers list --where year>=2020 --where category=cs.LG
        papers list --format csv > papers.csv
    """
    from .render.tables import render_papers

    with _open(index) as recommender:
        papers = recommender.list_papers(where=where, limit=limit)
    click.echo(render_papers(papers, fmt, _table_width(wide)), nl=False)


@main.command()
@index_option
@click.option("--verify", is_flag=True, help="Re-hash every stored file against the manifest.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@library_errors
def info(index, verify, fmt):
    """What the index holds and how it was built.

    Examples:

    \b
        papers info
        papers info --verify --format json
    """
    from .render.tables import render_info

    with _open(index, verify=verify) as recommender:
        details = recommender.info()
        files = len(recommender.manifest["files"])
    click.echo(render_info(details, fmt), nl=False)
    if verify:
        # With --format json, standard output stays pure JSON: the confirmation goes to stderr.
        click.echo(f"verified: {files} files match their checksums", err=fmt == "json")


@main.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Output format.",
)
@library_errors
def models(fmt):
    """The models `--model` knows by name: installed or not, and what each costs.

    Any sentence-transformers model folder works as --model too; these are the
    ones whose costs and relevance were measured.

    Examples:

    \b
        papers models
        papers models --format json
    """
    from .embed.models import list_models
    from .render.models import render_models

    click.echo(render_models(list_models(), fmt), nl=False)


@main.group(cls=_Group, invoke_without_command=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.pass_context
@library_errors
def indexes(ctx, fmt):
    """The indexes in the index home (name, papers, model, size); `rm` and `mv` remove and
    rename one.

    The home is $PAPERS_HOME if set, else ./indexes/ when it exists (a checkout),
    else the user data folder.

    Examples:

    \b
        papers indexes
        papers indexes --format json
        papers indexes rm old-arxiv
        papers indexes mv default iclr2020
        PAPERS_HOME=/data/papers papers indexes
    """
    if ctx.invoked_subcommand is not None:
        return
    from .index.catalogue import list_indexes
    from .index.home import index_home
    from .render.indexes import render_indexes

    home = index_home()
    click.echo(render_indexes(list_indexes(home.path), home.describe(), fmt), nl=False)


@main.group(cls=_Group)
def cache():
    """The embedding cache shared by every index (in the user cache folder, or $PAPERS_CACHE).

    Vectors are kept by the model's files, the chunking and the text, so a second index
    over the same papers encodes only the new ones.

    Examples:

    \b
        papers cache info
        papers cache info --format json
        papers cache clear
    """


@cache.command(name="info")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@library_errors
def cache_info(fmt):
    """Where the embedding cache is, its size and how many vectors it holds."""
    from .embed.embedding_cache import embedding_cache_info
    from .render.indexes import render_cache

    click.echo(render_cache(embedding_cache_info(), fmt), nl=False)


@cache.command(name="clear")
@library_errors
def cache_clear():
    """Empty the embedding cache (the next builds encode their papers again; indexes are
    untouched)."""
    from .embed.embedding_cache import clear_embedding_cache
    from .render.indexes import render_cache_cleared

    click.echo(render_cache_cleared(clear_embedding_cache()), nl=False)


@indexes.command(name="rm")
@click.argument("name", metavar="NAME|PATH")
@click.option(
    "--with-tags",
    is_flag=True,
    help=(
        "Remove the index's tags (made by `papers serve`) too; without it they are kept "
        "(asked on a terminal)."
    ),
)
@library_errors
def indexes_rm(name, with_tags):
    """Remove an index: what its builds made, nothing else (a folder that is not an index is
    refused).
    Its tags are kept unless --with-tags; a link to an index is removed itself, never followed.

    Examples:

    \b
        papers indexes rm old-arxiv
        papers indexes rm old-arxiv --with-tags
    """
    from .index.catalogue import remove_index

    def confirm_tags(path: Path) -> bool:
        return click.confirm(
            f"index {name} has tags ({path}): remove them too?", default=False, err=True
        )

    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    removal = remove_index(
        name, with_tags=with_tags, confirm_tags=confirm_tags if interactive else None
    )
    index_dir, kept = removal.folder, removal.kept
    if removal.link_target is not None:
        click.echo(
            f"removed the link {index_dir}; the index it points to ({removal.link_target}) is kept "
            "(give its path to remove it)",
            err=True,
        )
        return
    notes = []
    if kept:
        notes.append(
            "kept what papers did not make there: "
            + ", ".join(kept[:5])
            + (f" and {len(kept) - 5} more" if len(kept) > 5 else "")
        )
    if removal.tags_kept:
        notes.append(f"kept its tags ({index_dir / 'tags.sqlite'}): add --with-tags to remove them")
    click.echo(
        f"removed index {name} ({index_dir})" + "".join(f"; {note}" for note in notes), err=True
    )


@indexes.command(name="mv")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@library_errors
def indexes_mv(old, new):
    """Rename an index (a reader that has it open keeps reading it).

    Examples:

    \b
        papers indexes mv default iclr2020
    """
    from .index.catalogue import rename_index

    old_dir, new_dir = rename_index(old, new)
    click.echo(f"renamed index {old_dir} to {new_dir}", err=True)


@main.command()
@click.option(
    "--corpus",
    default=None,
    metavar="FILE",
    help="Papers (.jsonl or .csv), every query and judged paper among them.",
)
@click.option(
    "--queries", default=None, metavar="FILE", help="queries.tsv: query_id, paper_id, facet."
)
@click.option(
    "--qrels", default=None, metavar="FILE", help="TREC qrels: query_id 0 paper_id grade."
)
@click.option(
    "--profiles",
    "profiles_dir",
    default=None,
    metavar="DIR",
    help=(
        "Researchers' own papers as profiles (papers.jsonl, profiles.jsonl, ratings.tsv): "
        "their loss, with its spread."
    ),
)
@click.option(
    "--index",
    "index",
    default=None,
    metavar="NAME|PATH",
    help="Index to build or reuse (default: eval-<corpus file stem>).",
)
@click.option(
    "--model",
    default=None,
    help="sentence-transformers model name or folder (default: all-MiniLM-L6-v2), or 'static'.",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "int8"]),
    default=None,
    help="Weights the model encodes with (default: as `papers build`, fp32).",
)
@click.option(
    "--chunking",
    type=click.Choice(["sentences", "windows", "truncate"]),
    default="sentences",
    show_default=True,
    help=(
        "Long abstracts: mean of windows that each start with the title and end at a sentence end, "
        "of plain token windows, or cut at the model's limit."
    ),
)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "dense", "lexical"]),
    default="hybrid",
    show_default=True,
    help="Rank by embeddings, TF-IDF, or both fused.",
)
@click.option(
    "--dense-weight",
    type=float,
    default=None,
    metavar="W",
    help=(
        "Weight of the dense cosine in hybrid scores, 0..1 (default: the one `like` uses for the"
        " index)."
    ),
)
@click.option(
    "--pool",
    type=click.Choice(["judged", "all"]),
    default="judged",
    show_default=True,
    help="Rank each query's judged papers only (CSFCube protocol), or the whole corpus.",
)
@click.option(
    "--relevant-at",
    type=int,
    default=2,
    show_default=True,
    help="Lowest grade that counts as relevant.",
)
@click.option(
    "--min-score", type=float, default=None, help="Drop papers scoring below this (-1..1)."
)
@click.option(
    "--diverse",
    type=float,
    default=None,
    metavar="LAMBDA",
    help="Maximal marginal relevance, 0..1.",
)
@click.option("--per-query", is_flag=True, help="Also show every query's figures.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
)
@quiet_option
@verbose_option
@library_errors
def evaluate(
    corpus,
    queries,
    qrels,
    profiles_dir,
    index,
    model,
    precision,
    chunking,
    mode,
    dense_weight,
    pool,
    relevant_at,
    min_score,
    diverse,
    per_query,
    fmt,
    quiet,
    verbose,
):
    """Score rankings on a test collection: MAP, NDCG@10, NDCG%20, Recall@20, MRR (x100).

    Examples:

    \b
        papers evaluate --corpus corpus.jsonl --queries queries.tsv --qrels qrels.txt --per-query
        papers evaluate --profiles reviewers-dev/
    """
    from .embed.windows import Chunking
    from .evaluation.evaluate import evaluate as run
    from .render.evaluation import render_evaluation, render_reviewers

    given = [
        name
        for name, value in (("--corpus", corpus), ("--queries", queries), ("--qrels", qrels))
        if value
    ]
    if not profiles_dir and len(given) < 3 or 0 < len(given) < 3:
        raise click.UsageError(
            "give --corpus, --queries and --qrels (a query-by-example collection), "
            "--profiles DIR (researchers' profiles), or both"
        )
    if profiles_dir:
        from .evaluation.reviewers import evaluate_reviewers

        with _stopped_builds("evaluate"), _reporter(quiet) as reporter:
            reviewed = evaluate_reviewers(
                profiles_dir,
                index=index if not given else None,
                model=model,
                mode=mode,
                dense_weight=dense_weight,
                precision=precision,
                progress=reporter.update,
                on_phase=reporter.phase,
            )
        if reviewed.build is not None:
            report = reviewed.build
            click.echo(
                f"indexed {report.papers} papers in {report.index_dir}: encoded {report.encoded}, "
                f"reused {report.reused} from the cache",
                err=True,
            )
        if not given:
            click.echo(render_reviewers(reviewed, fmt), nl=False)
            return
    with _stopped_builds("evaluate"), _reporter(quiet) as reporter:
        evaluation = run(
            corpus,
            queries,
            qrels,
            index=index,
            model=model,
            chunking=Chunking(strategy=chunking),
            mode=mode,
            pool=pool,
            relevant_at=relevant_at,
            dense_weight=dense_weight,
            min_score=min_score,
            diverse=diverse,
            progress=reporter.update,
            on_phase=reporter.phase,
            precision=precision,
        )
    if evaluation.build is not None:
        report = evaluation.build
        click.echo(
            f"indexed {report.papers} papers in {report.index_dir}: encoded {report.encoded}, "
            f"reused {report.reused} from the cache",
            err=True,
        )
    shown = render_evaluation(evaluation, fmt, per_query)
    if (
        profiles_dir and fmt == "json"
    ):  # one JSON document: the collection's figures and the profiles' loss
        import json

        shown = (
            json.dumps(
                {**json.loads(shown), **json.loads(render_reviewers(reviewed, fmt))},
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )
    elif profiles_dir:
        shown += "\n" + render_reviewers(reviewed, fmt)
    click.echo(shown, nl=False)


# ---------------------------------------------------------------- reading-group tools


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


def _chosen_rows(
    recommender, papers, all_papers, from_file, everything_by_default=False
) -> list[int]:
    from .reading.related import select_rows

    references = list(papers) + _read_references(from_file)
    if everything_by_default and not references:
        all_papers = True
    # The library's "all papers" and "a file of them", as this command's options.
    if not references and not all_papers:
        raise OptionError("no paper chosen: give paper IDs or handles, --from FILE, or --all")
    return select_rows(recommender, references, all_papers)


@contextlib.contextmanager
def _output_file(path: str | None, mode: str = "w"):
    """None (standard output, also for `-`), or a file object for `path` (files.output): a file's
    content replaces it once complete, created exclusively beside it, never through a link, so a
    failed run leaves no file; a FIFO, device or socket is written into."""
    if path is None or path == "-":
        yield None
        return
    from .files import output, remove_stale_partials, stream_target
    from .index.layout import check_not_in_index

    target = Path(path)
    check_not_in_index(target)
    if not stream_target(target):
        remove_stale_partials(target.parent)
    with output(target, mode, newline="" if "b" not in mode else None) as stream:
        yield stream


@main.command(name="related-work")
@selection_options
@from_file_option
@click.option("-k", "k", type=int, default=5, show_default=True, help="Related papers per paper.")
@click.option(
    "--format",
    "fmt",
    default="markdown",
    show_default=True,
    type=click.Choice(["markdown", "json", "jsonl", "csv", "bibtex", "miniconf"]),
    help=(
        "Markdown is a printable handout; bibtex lists every paper mentioned; miniconf is "
        "a Mini-Conf site's similar papers (paper_recs.json)."
    ),
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help=(
        "Write to this file instead of standard output (- is standard output; a FIFO or device is"
        " written into, never replaced)."
    ),
)
@click.option("--why", is_flag=True, help="Show the terms each pair of papers shares.")
@index_option
@model_option
@quiet_option
@library_errors
def related_work(papers, all_papers, from_file, paper_file, k, fmt, out, why, index, model, quiet):
    """For each chosen paper, the papers most related to it: the lists `like` gives, computed in
    one batch.

    `--from FILE` is a file of IDs or handles of papers in the index; `--from-file FILE`
    is a file of papers in any input format (.bib, .json, ...), whose papers need
    not be in the index (those that are not are embedded now).

    Examples:

    \b
        papers related-work FlashDP VADB
        papers related-work --all -k 3 --out handout.md
        papers related-work --from friday.txt --format bibtex > friday.bib
        papers related-work --from-file reading-list.bib --out handout.md
        papers related-work --all --format miniconf --out sitedata/paper_recs.json
    """
    from .reading.related import related_work as related_lists
    from .render.related import BibtexKeys, write_related

    with _open(index, model) as recommender:
        outside = _read_paper_file(recommender, paper_file)
        if outside and not (papers or all_papers or from_file):
            rows = []
        else:
            rows = _chosen_rows(recommender, papers, all_papers, from_file)
        if outside:
            _report_found(recommender, outside, paper_file)
            rows = list(rows) + outside  # papers from the file follow those chosen by ID
        keys = BibtexKeys(recommender, outside) if fmt == "bibtex" else None
        with _reporter(quiet) as reporter, _output_file(out) as partial:
            reporter.phase("related work", len(rows))
            lists = related_lists(recommender, rows, k=k, why=why, progress=reporter.advance)
            write_related(lists, sys.stdout if partial is None else partial, fmt, why, keys)
    if out not in (None, "-"):
        click.echo(f"wrote related work for {len(rows)} papers to {out}", err=True)


@main.command()
@selection_options
@click.option("--n", "n", type=int, default=6, show_default=True, help="How many sessions.")
@click.option(
    "--max-per-session",
    type=int,
    default=None,
    metavar="N",
    help="Most papers in one session (default: 1.25 x the average, rounded up).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the k-means that forms the sessions.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json", "csv"]),
    default="markdown",
    show_default=True,
    help="csv: one row per paper (and per background paper) with its session.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help=(
        "Write to this file instead of standard output (- is standard output; a FIFO or device is"
        " written into, never replaced)."
    ),
)
@index_option
@quiet_option
@library_errors
def sessions(papers, all_papers, from_file, n, max_per_session, seed, fmt, out, index, quiet):
    """Split the chosen papers (default: all) into reading-group sessions of similar papers.

    Examples:

    \b
        papers sessions --n 4
        papers sessions --from term.txt --n 3 --out plan.md
        papers sessions --format csv --out plan.csv
    """
    from .reading.sessions import plan_sessions
    from .render.sessions import render_plan

    with _open(index) as recommender:
        rows = _chosen_rows(recommender, papers, all_papers, from_file, everything_by_default=True)
        with _reporter(quiet) as reporter:
            reporter.phase("planning sessions", len(rows))
            plan = plan_sessions(recommender, rows, n=n, max_per_session=max_per_session, seed=seed)
        text = render_plan(plan, fmt)
    with _output_file(out) as partial:
        if partial is None:
            click.echo(text, nl=False)
        else:
            partial.write(text)
    if out not in (None, "-"):
        click.echo(f"wrote {plural(n, 'session')} to {out}", err=True)


@main.command(name="map")
@selection_options
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help=(
        "map.html (one offline file: search, click a paper for its nearest papers, zoom, sessions"
        " on and off), map.png, or points.csv / points.json (each paper's x, y and session, to plot"
        " in other tools)."
    ),
)
@click.option(
    "--n",
    "n",
    type=int,
    default=6,
    show_default=True,
    help="How many groups to colour (as `sessions --n`).",
)
@click.option("--max-per-session", type=int, default=None, metavar="N", help="As for `sessions`.")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the k-means and of the projection.",
)
@click.option(
    "-k",
    "k",
    type=int,
    default=5,
    show_default=True,
    help="Nearest papers shown for a clicked paper (its `related-work -k` list).",
)
@click.option(
    "--open", "open_", is_flag=True, help="Open the written map in the browser (or image viewer)."
)
@index_option
@quiet_option
@library_errors
def map_(papers, all_papers, from_file, out, n, max_per_session, seed, k, open_, index, quiet):
    """Draw the chosen papers (default: all) as a 2-D map, coloured by session.

    Examples:

    \b
        papers map --out map.html --open
        papers map --n 8 --out map.png
        papers map --out points.csv
    """
    from .reading.layout import build_map
    from .render.map import check_map_path, write_map

    check_map_path(out)
    with _open(index) as recommender:
        rows = _chosen_rows(recommender, papers, all_papers, from_file, everything_by_default=True)
        with _reporter(quiet) as reporter:
            reporter.phase("laying out the map", len(rows))
            corpus_map = build_map(
                recommender,
                rows,
                n=n,
                seed=seed,
                max_per_session=max_per_session,
                k=k,
                on_phase=lambda name: reporter.phase(name, always=True),
            )
    with _output_file(out, "wb") as stream:
        write_map(corpus_map, out, stream)
    click.echo(
        f"wrote a map of {len(corpus_map.points)} papers ({corpus_map.projection}) to {out}",
        err=True,
    )
    if open_:
        click.launch(str(Path(out).resolve()))


@main.command()
@index_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any other than loopback makes writes (tags) need a token.",
)
@click.option(
    "--port", type=int, default=8000, show_default=True, help="Port to listen on (0: a free one)."
)
@click.option(
    "--workers",
    type=int,
    default=1,
    show_default=True,
    help=(
        "Worker processes (uvicorn's supervisor restarts one that dies); they share the index's"
        " pages."
    ),
)
@click.option(
    "--token",
    default=None,
    help=(
        "Token that writes need (default: $PAPERS_TOKEN; off loopback one is generated). Prefer"
        " $PAPERS_TOKEN or --token-file: every user of the host can read a command line."
    ),
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Read the token from the first line of this file.",
)
@library_errors
def serve(index, host, port, workers, token, token_file):
    """The index as a local web app and an HTTP API (needs papers-like[serve]).

    Pages at /, the API under /api (described at /openapi.json and /docs).
    Runs until Ctrl-C; a rebuild of the index is picked up without a restart.

    Examples:

    \b
        papers serve
        papers serve --index arxiv-lg --port 8080 --workers 2
        papers serve --host 0.0.0.0 --token-file ~/.papers-token
    """
    try:
        from .serve.server import serve as run
    except ImportError as error:
        from .errors import InputError, install_command

        raise InputError(
            f"papers serve needs the serve extra ({error.name} is missing): "
            f"{install_command('serve')}"
        ) from None
    if token is not None:
        click.echo(
            "note: a token given with --token is visible to every user of this host (ps, /proc): "
            "prefer $PAPERS_TOKEN or --token-file",
            err=True,
        )
    run(
        index,
        host=host,
        port=port,
        workers=workers,
        token=token,
        token_file=token_file,
        announce=lambda line: click.echo(line),
    )
