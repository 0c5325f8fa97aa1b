"""`papers related-work`, `sessions` and `map`: batch work for a reading group."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..render.tables import plural
from .common import (
    chosen_rows,
    from_file_option,
    index_option,
    model_option,
    opened_index,
    out_option,
    output_file,
    progress_reporter,
    quiet_option,
    read_paper_file,
    report_found,
    selection_options,
)
from .errors import library_errors


@click.command(name="related-work")
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
@out_option
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
    from ..reading.related import related_work as related_lists
    from ..render.related import BibtexKeys, write_related

    with opened_index(index, model) as recommender:
        outside = read_paper_file(recommender, paper_file)
        if outside and not (papers or all_papers or from_file):
            rows = []
        else:
            rows = chosen_rows(recommender, papers, all_papers, from_file)
        if outside:
            report_found(recommender, outside, paper_file)
            rows = list(rows) + outside  # papers from the file follow those chosen by ID
        keys = BibtexKeys(recommender, outside) if fmt == "bibtex" else None
        with progress_reporter(quiet) as reporter, output_file(out) as partial:
            reporter.phase("related work", len(rows))
            lists = related_lists(recommender, rows, k=k, why=why, progress=reporter.advance)
            write_related(lists, sys.stdout if partial is None else partial, fmt, why, keys)
    if out not in (None, "-"):
        click.echo(f"wrote related work for {len(rows)} papers to {out}", err=True)


@click.command()
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
@out_option
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
    from ..reading.sessions import plan_sessions
    from ..render.sessions import render_plan

    with opened_index(index) as recommender:
        rows = chosen_rows(recommender, papers, all_papers, from_file, everything_by_default=True)
        with progress_reporter(quiet) as reporter:
            reporter.phase("planning sessions", len(rows))
            plan = plan_sessions(recommender, rows, n=n, max_per_session=max_per_session, seed=seed)
        text = render_plan(plan, fmt)
    with output_file(out) as partial:
        if partial is None:
            click.echo(text, nl=False)
        else:
            partial.write(text)
    if out not in (None, "-"):
        click.echo(f"wrote {plural(n, 'session')} to {out}", err=True)


@click.command(name="map")
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
    from ..reading.layout import build_map
    from ..render.map import check_map_path, write_map

    check_map_path(out)
    with opened_index(index) as recommender:
        rows = chosen_rows(recommender, papers, all_papers, from_file, everything_by_default=True)
        with progress_reporter(quiet) as reporter:
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
    with output_file(out, "wb") as stream:
        write_map(corpus_map, out, stream)
    click.echo(
        f"wrote a map of {len(corpus_map.points)} papers ({corpus_map.projection}) to {out}",
        err=True,
    )
    if open_:
        click.launch(str(Path(out).resolve()))
