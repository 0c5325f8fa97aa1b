"""The `papers` command: each subcommand parses, calls one library function, prints."""

from __future__ import annotations

import functools
import sys
import warnings
from pathlib import Path

import click

from .errors import RecommenderError
from .output import FORMATS

DEFAULT_INPUT = "seeds"
# Encoding fewer papers than this takes a few seconds: no progress bar.
PROGRESS_MIN = 100


def _show_warning(message, category, filename, lineno, file=None, line=None):
    click.echo(f"warning: {message}", err=True)


def library_errors(command):
    """Library exceptions become one-line messages with a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        warnings.showwarning = _show_warning
        try:
            return command(*args, **kwargs)
        except RecommenderError as error:
            raise click.ClickException(str(error)) from None
        except OSError as error:
            where = f"{error.filename}: " if error.filename else ""
            raise click.ClickException(f"{where}{error.strerror or error}") from None

    return wrapper


index_option = click.option(
    "--index", "index", default=None, metavar="NAME|PATH",
    help="Index name under indexes/ or a path (default: $PAPERS_INDEX or 'default').",
)
format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Output format."
)
model_option = click.option(
    "--model", default=None, help="Refuse the index unless it was built with this model."
)


def ranking_options(command):
    """Options shared by `like` and `search`."""
    options = [
        click.option("-k", "k", type=int, default=10, show_default=True, help="How many papers to return."),
        click.option("--mode", type=click.Choice(["hybrid", "dense", "lexical"]), default="hybrid", show_default=True,
                     help="Rank by embeddings, TF-IDF, or both fused."),
        click.option("--min-score", type=float, default=None, help="Drop papers scoring below this (-1..1)."),
        click.option("--exclude", "exclude_file", type=click.Path(dir_okay=False), default=None,
                     help="File of paper IDs to leave out (e.g. already read), one a line."),
        click.option("--diverse", type=float, default=None, metavar="LAMBDA",
                     help="Maximal marginal relevance, 0..1 (1 = relevance only, lower = more varied)."),
        click.option("--why", is_flag=True, help="Show the terms that tie each paper to the query."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _read_exclusions(path: str | None) -> list[str]:
    if path is None:
        return []
    from .errors import InputError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (--exclude takes a file of paper IDs, one a line)") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (--exclude takes a file of paper IDs, one a line)") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _open(index, model=None, verify=False):
    from .core import Recommender

    return Recommender.open(index, model=model, verify=verify)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recommender", message="papers %(version)s")
def main():
    """Find related research papers: `papers build`, then `papers like ID` or `papers search TEXT`."""


@main.command()
@click.argument("inputs", nargs=-1, type=click.Path())
@index_option
@click.option("--model", default=None, help="sentence-transformers model name or folder (default: all-MiniLM-L6-v2, packaged).")
@click.option("--chunking", type=click.Choice(["windows", "truncate"]), default="windows", show_default=True,
              help="Long abstracts: mean of overlapping windows, or cut at the model's limit.")
@click.option("--index-type", type=click.Choice(["auto", "flat", "hnsw", "ivf"]), default="auto", show_default=True,
              help="FAISS index: exact for small corpora, approximate above a threshold.")
@click.option("--wait", is_flag=True, help="If another build holds the index, wait for it instead of failing.")
@library_errors
def build(inputs, index, model, chunking, index_type, wait):
    """Build an index from files or folders of papers (.txt, .jsonl, .csv; default: seeds/)."""
    from .core import build_index
    from .embedding import Chunking

    bar = None

    def progress(done, total):
        nonlocal bar
        if bar is None and total >= PROGRESS_MIN:
            bar = click.progressbar(length=total, label="encoding", file=sys.stderr)
            bar.__enter__()
        if bar is not None:
            bar.update(done - bar.pos)

    try:
        report = build_index(
            list(inputs) or [DEFAULT_INPUT], index=index, model=model, chunking=Chunking(strategy=chunking),
            index_type=index_type, progress=progress, wait=wait,
        )
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    click.echo(
        f"indexed {report.papers} papers in {report.index_dir}: "
        f"encoded {report.encoded}, reused {report.reused} from the cache ({report.index_kind} search)"
    )


@main.command()
@click.argument("papers", nargs=-1, required=True)
@click.option("--not", "not_", multiple=True, metavar="ID", help="A paper the results should be unlike (repeatable).")
@ranking_options
@index_option
@model_option
@format_option
@library_errors
def like(papers, not_, k, mode, min_score, exclude_file, diverse, why, index, model, fmt):
    """Papers like the given ones (ID, handle or unique ID prefix), never the papers themselves."""
    from .output import render_results

    results = _open(index, model).like(
        *papers, k=k, not_=not_, exclude=_read_exclusions(exclude_file),
        min_score=min_score, diverse=diverse, why=why, mode=mode,
    )
    click.echo(render_results(results, fmt, why), nl=False)


@main.command()
@click.argument("text")
@ranking_options
@index_option
@model_option
@format_option
@library_errors
def search(text, k, mode, min_score, exclude_file, diverse, why, index, model, fmt):
    """Papers about a free text."""
    from .output import render_results

    results = _open(index, model).search(
        text, k=k, exclude=_read_exclusions(exclude_file), min_score=min_score, diverse=diverse, why=why, mode=mode,
    )
    click.echo(render_results(results, fmt, why), nl=False)


@main.command()
@click.argument("paper")
@index_option
@format_option
@library_errors
def show(paper, index, fmt):
    """One paper in full, with its metadata and code links."""
    from .output import render_paper

    click.echo(render_paper(_open(index).show(paper), fmt), nl=False)


@main.command(name="list")
@index_option
@format_option
@library_errors
def list_(index, fmt):
    """Every paper in the index."""
    from .output import render_papers

    click.echo(render_papers(list(_open(index).papers()), fmt), nl=False)


@main.command()
@index_option
@click.option("--verify", is_flag=True, help="Re-hash every stored file against the manifest.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@library_errors
def info(index, verify, fmt):
    """What the index holds and how it was built."""
    from .output import render_info

    recommender = _open(index, verify=verify)
    click.echo(render_info(recommender.info(), fmt), nl=False)
    if verify:
        click.echo(f"verified: {len(recommender.manifest['files'])} files match their checksums")
