"""`papers evaluate`: rankings scored on a test collection or on researchers' profiles."""

from __future__ import annotations

from dataclasses import replace

import click

from .common import (
    MODE_CHOICES,
    precision_option,
    progress_reporter,
    quiet_option,
    verbose_option,
)
from .errors import library_errors, stopped_builds


@click.command()
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
@precision_option("As `papers build`'s ($PAPERS_PRECISION where not given).")
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
    type=click.Choice(MODE_CHOICES),
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
    from ..embed.windows import Chunking
    from ..evaluation.evaluate import evaluate as run
    from ..evaluation.reviewers import evaluate_reviewers
    from ..index.request import BuildRequest
    from ..query.ranking import RankingRequest
    from ..render.evaluation import render_evaluations

    given = _collection_given(corpus, queries, qrels, profiles_dir)
    build = BuildRequest.of(
        index=index, model=model, precision=precision, chunking=Chunking(strategy=chunking)
    )
    ranking = RankingRequest(mode=mode, min_score=min_score, diverse=diverse)
    reviewed = evaluation = None
    if profiles_dir:  # beside a collection, --index names the collection's index
        reviewed = _reported(
            quiet,
            evaluate_reviewers,
            profiles_dir,
            build=build if not given else replace(build, index=None),
            ranking=ranking,
            dense_weight=dense_weight,
        )
    if given:
        evaluation = _reported(
            quiet,
            run,
            corpus,
            queries,
            qrels,
            build=build,
            ranking=ranking,
            pool=pool,
            relevant_at=relevant_at,
            dense_weight=dense_weight,
        )
    click.echo(render_evaluations(evaluation, reviewed, fmt, per_query), nl=False)


def _collection_given(corpus, queries, qrels, profiles_dir) -> bool:
    """Whether a query-by-example collection is given (all three of its files); a usage error where
    only some of them are, or nothing to evaluate is."""
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
    return bool(given)


def _reported(quiet: bool, evaluation, *args, **kwargs):
    """`evaluation(*args, **kwargs)` with its build's progress on stderr (Ctrl-C one line), then the
    line saying what the build made."""
    with stopped_builds("evaluate"), progress_reporter(quiet) as reporter:
        result = evaluation(*args, progress=reporter.update, on_phase=reporter.phase, **kwargs)
    _echo_build(result.build)
    return result


def _echo_build(report) -> None:
    """The line saying what a build made, on stderr (nothing where the index was reused)."""
    if report is not None:
        click.echo(
            f"indexed {report.papers} papers in {report.index_dir}: encoded {report.encoded}, "
            f"reused {report.reused} from the cache",
            err=True,
        )
