"""`papers like`, `search`, `show`, `list` and `info`: questions to one index."""

from __future__ import annotations

import click

from .common import (
    format_option,
    from_file_option,
    index_option,
    model_option,
    opened_index,
    ranking_options,
    read_exclusions,
    read_paper_file,
    report_found,
    table_width,
    wide_option,
)
from .errors import library_errors


@click.command()
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
    ranking,
    exclude_file,
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
    from ..render.tables import render_results

    why = ranking.why
    if tags and (
        papers
        or paper_file
        or ranking.min_score is not None
        or ranking.diverse is not None
        or exclude_file
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
        from ..reading.tags import TagStore, recommend_for_tags

        with opened_index(index, model) as recommender:
            results = recommend_for_tags(
                recommender,
                TagStore(recommender.stored.index_dir),
                tags,
                exclude_seen=exclude_seen,
                not_=not_,
                ranking=ranking,  # neither a minimum score nor diversity (refused above)
            )
        click.echo(render_results(results, fmt, why, table_width(wide)), nl=False)
        return
    with opened_index(index, model) as recommender:
        outside = read_paper_file(recommender, paper_file)
        results = recommender.like(
            *papers,
            not_=not_,
            exclude=read_exclusions(exclude_file),
            papers=outside,
            ranking=ranking,
        )
        report_found(recommender, outside, paper_file)
    click.echo(render_results(results, fmt, why, table_width(wide)), nl=False)


@click.command()
@click.argument("text")
@ranking_options
@index_option
@model_option
@format_option
@library_errors
def search(text, ranking, exclude_file, wide, index, model, fmt):
    """Papers about a free text.

    Examples:

    \b
        papers search "differentially private training of language models"
        papers search "video quality" --mode lexical -k 3
    """
    from ..render.tables import render_results

    with opened_index(index, model) as recommender:
        results = recommender.search(text, read_exclusions(exclude_file), ranking=ranking)
    click.echo(render_results(results, fmt, ranking.why, table_width(wide)), nl=False)


@click.command()
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
    from ..render.tables import render_paper

    with opened_index(index) as recommender:
        found = recommender.show(paper)
    click.echo(render_paper(found, fmt), nl=False)


@click.command(name="list")
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
    from ..render.tables import render_papers

    with opened_index(index) as recommender:
        papers = recommender.list_papers(where=where, limit=limit)
    click.echo(render_papers(papers, fmt, table_width(wide)), nl=False)


@click.command()
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
    from ..render.tables import render_info

    with opened_index(index, verify=verify) as recommender:
        details = recommender.info()
        files = len(recommender.manifest["files"])
    click.echo(render_info(details, fmt), nl=False)
    if verify:
        # With --format json, standard output stays pure JSON: the confirmation goes to stderr.
        click.echo(f"verified: {files} files match their checksums", err=fmt == "json")
