"""`papers evaluate`: rank a test collection's queries with an index, score the rankings.

The collection is query by example (the CSFCube layout, see metrics.py): every
query is a paper of the corpus, judged against a pool of candidate papers.
Each query paper is scored against candidates with `PaperIndex.score_rows`,
the same fusion `papers like` ranks by, so the figures measure what users get.

Several seeds as one profile (profiles.py): the collection's queries also make profiles of a query
paper and half its relevant candidates (one topic) and of two or three such (mixed), each ranked as
`like` ranks several seeds; their figures are reported beside the queries'.

Pools:
* ``judged`` (the CSFCube protocol): rank only the query's judged candidates.
* ``all``: rank the whole corpus; unjudged papers count as grade 0.

The query paper is a candidate only when it is judged for that query: CSFCube
judges two query papers against themselves (grade 3) and its evaluation script
ranks the judged candidates as they are, so the query paper, scoring highest
against itself, comes first for every ranker. Otherwise it is never ranked
(``like`` never returns its seed). A judged paper missing from the index (the
build keeps duplicate papers once) counts as never retrieved.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..embed.windows import Chunking
from ..errors import InputError, OptionError, RecommenderError, caller_stacklevel
from ..index.home import resolve_index_dir
from ..index.layout import is_index_folder
from ..index.stored import open_stored
from ..query.ranking import select
from . import metrics, profiles

if TYPE_CHECKING:
    from ..index.build import BuildReport

POOLS = ("judged", "all")


class EvaluationWarning(UserWarning):
    """Something about the test collection the figures depend on."""


@dataclass(frozen=True)
class QueryResult:
    """One query's scores and how its pool was formed."""

    query_id: str
    paper_id: str
    facet: str
    scores: metrics.QueryScores
    candidates: int  # papers ranked
    missing: int  # judged papers not in the index


@dataclass(frozen=True)
class Evaluation:
    """Scores of one ranking setting on a test collection (fractions in [0, 1])."""

    settings: dict
    queries: list[QueryResult]
    overall: dict[str, float]
    by_facet: dict[str, dict[str, float]] = field(default_factory=dict)
    build: BuildReport | None = None  # when the index had to be (re)built
    # Several seeds as one profile (profiles.py): protocol ("one topic", "mixed") -> (profiles, mean
    # scores);
    # a protocol the collection has no profile for is left out.
    profiles: dict[str, tuple[int, dict[str, float]]] = field(default_factory=dict)

    @property
    def missing(self) -> int:
        return sum(query.missing for query in self.queries)


def eval_index_name(corpus: str | Path) -> str:
    """The index an evaluation builds by default: indexes/eval-<corpus file stem>."""
    return f"eval-{Path(corpus).stem}"


def prepare_index(
    corpus: str | Path,
    index: str | Path | None = None,
    model: str | None = None,
    chunking: Chunking = Chunking(),
    progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str, int | None], None] | None = None,
    precision: str | None = None,
) -> BuildReport | None:
    """Reuse the index when it was built from this corpus with this model, precision (None: the
    default's), chunking and TF-IDF, else (re)build it.

    Returns the BuildReport of a build, or None when the index was reused.
    """
    from ..corpus.papers import read_papers
    from ..embed.choice import new_index_precision
    from ..index.build import build_index, inputs_fingerprint
    from ..index.lexical import settings as lexical_settings

    index = index if index is not None else eval_index_name(corpus)
    model, precision = new_index_precision(model, precision)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # read only to compare with the index; a build warns as it reads
        papers = read_papers([corpus])
    index_dir = resolve_index_dir(index)
    try:
        with open_stored(index_dir) as stored:
            manifest = stored.manifest
    except RecommenderError:  # missing, corrupt or of another format version: build it
        manifest = {}
        if is_index_folder(index_dir) and str(index) != eval_index_name(corpus):
            # Damaged or of another version: whose it is cannot be told, so it is not replaced.
            raise InputError(
                f"index {index} cannot be read, and evaluate does not replace an index it did not"
                f" build: leave the index out (eval-{Path(corpus).stem}) or give a new name"
            ) from None
    current = (
        manifest.get("model") == model
        and manifest.get("precision", "fp32") == precision
        and {k: v for k, v in manifest.get("chunking", {}).items() if k != "max_tokens"}
        == chunking.to_dict()
        and manifest.get("inputs_fingerprint") == inputs_fingerprint(papers)
        and {k: v for k, v in manifest.get("lexical", {}).items() if k != "terms"}
        == lexical_settings()
    )
    if current:
        return None  # nothing built, so nothing to warn about: the build that made it did
    if (
        manifest
        and manifest.get("built_by") != "evaluate"
        and str(index) != eval_index_name(corpus)
    ):
        raise InputError(
            f"index {index} is an index of {manifest.get('paper_count', 'other')} other papers"
            " that evaluate did not build: it is left as it is; leave the index out"
            f" (eval-{Path(corpus).stem}) or give a new name"
        )
    # The build reads the input again, and warns about it as it does.
    return build_index(
        [corpus],
        index=index,
        model=model,
        chunking=chunking,
        progress=progress,
        on_phase=on_phase,
        built_by="evaluate",
        precision=precision,
    )


def evaluate(
    corpus: str | Path,
    queries: str | Path,
    qrels: str | Path,
    *,
    index: str | Path | None = None,
    model: str | None = None,
    chunking: Chunking = Chunking(),
    mode: str = "hybrid",
    pool: str = "judged",
    relevant_at: int = 2,
    dense_weight: float | None = None,
    min_score: float | None = None,
    diverse: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str, int | None], None] | None = None,
    precision: str | None = None,
) -> Evaluation:
    """Build (or reuse) an index over `corpus`, rank every query, and score the rankings.

    `dense_weight` None: the one `like` uses for the index (its tier's); `precision` as
    `build_index`'s, None the default."""
    from ..query.paper_index import PaperIndex

    check_settings(mode, pool, dense_weight, min_score, diverse)
    judgements = metrics.read_qrels(qrels)
    listed = metrics.read_queries(queries)
    for query_id, _, _ in listed:
        if query_id not in judgements:
            raise InputError(
                f"{qrels}: no judgements for query {query_id} of {queries}: judge it or remove it"
            )
    index = index if index is not None else eval_index_name(corpus)
    build = prepare_index(corpus, index, model, chunking, progress, on_phase, precision)
    with PaperIndex.open(index) as recommender:
        dense_weight = recommender.dense_weight if dense_weight is None else dense_weight
        rows_by_id = {paper_id: row for row, paper_id in enumerate(recommender.ids)}
        results = []
        for query_id, paper_id, facet in listed:
            if paper_id not in rows_by_id:
                raise InputError(
                    f"{queries}: query {query_id} is paper {paper_id}, which is not in {corpus}"
                )
            results.append(
                _evaluate_query(
                    recommender,
                    rows_by_id,
                    query_id,
                    rows_by_id[paper_id],
                    judgements[query_id],
                    facet,
                    mode,
                    pool,
                    relevant_at,
                    dense_weight,
                    min_score,
                    diverse,
                )
            )
        by_protocol = {}
        for protocol, listed_profiles in profiles.protocols(
            listed, judgements, relevant_at, present=rows_by_id
        ).items():
            if listed_profiles:
                scored = [
                    profiles.score_profile(
                        recommender,
                        profile,
                        rows_by_id,
                        relevant_at,
                        pool=pool,
                        mode=mode,
                        dense_weight=dense_weight,
                        min_score=min_score,
                        diverse=diverse,
                    )
                    for profile in listed_profiles
                ]
                by_protocol[protocol] = (len(scored), metrics.mean_scores(scored))
        facets = {}
        for facet in dict.fromkeys(result.facet for result in results):
            facets[facet] = metrics.mean_scores([r.scores for r in results if r.facet == facet])
        manifest = recommender.manifest
        settings = {
            "index": str(recommender.stored.index_dir),
            "papers": len(recommender),
            "model": manifest["model"],
            "precision": manifest.get("precision", "fp32"),
            "chunking": manifest["chunking"]["strategy"],
            "mode": mode,
            "dense_weight": dense_weight if mode == "hybrid" else None,
            "pool": pool,
            "relevant_at": relevant_at,
            "min_score": min_score,
            "diverse": diverse,
        }
    evaluation = Evaluation(
        settings,
        results,
        metrics.mean_scores([r.scores for r in results]),
        facets,
        build,
        by_protocol,
    )
    if evaluation.missing:
        warnings.warn(
            f"{evaluation.missing} judgements name papers that are not in the index "
            "(a build keeps duplicate papers once): those count as never retrieved",
            EvaluationWarning,
            stacklevel=caller_stacklevel(),
        )
    return evaluation


def check_settings(
    mode: str, pool: str, dense_weight: float | None, min_score: float | None, diverse: float | None
) -> None:
    """Refuse evaluation settings out of range (OptionError), before any work is done."""
    from ..query.paper_index import check_options

    check_options(1, min_score, diverse, mode)
    if pool not in POOLS:
        raise OptionError(f"unknown pool '{pool}': use one of {', '.join(POOLS)}", "pool")
    if dense_weight is not None and not (
        math.isfinite(dense_weight) and 0.0 <= dense_weight <= 1.0
    ):
        raise OptionError(
            f"dense_weight must be between 0 and 1 (1 = dense only), got {dense_weight:g}",
            "dense_weight",
        )


def _evaluate_query(
    recommender,
    rows_by_id: dict[str, int],
    query_id: str,
    query_row: int,
    judged: dict[str, int],
    facet: str,
    mode: str,
    pool: str,
    relevant_at: int,
    dense_weight: float,
    min_score: float | None,
    diverse: float | None,
) -> QueryResult:
    if pool == "judged":
        rows = [rows_by_id[doc] for doc in judged if doc in rows_by_id]
    else:
        query_judged = recommender.ids[query_row] in judged
        rows = [row for row in range(len(recommender)) if row != query_row or query_judged]
    missing = sum(1 for doc in judged if doc not in rows_by_id)
    ranking = rank_rows(recommender, query_row, rows, mode, dense_weight, min_score, diverse)
    ids = recommender.ids
    scores = metrics.score_query(
        [ids[row] for row in ranking], judged, relevant_at, query_id=query_id
    )
    return QueryResult(query_id, ids[query_row], facet, scores, len(rows), missing)


def rank_rows(
    recommender,
    query_row: int,
    rows: Sequence[int],
    mode: str = "hybrid",
    dense_weight: float | None = None,
    min_score: float | None = None,
    diverse: float | None = None,
) -> list[int]:
    """`rows` in the order `like` would list them for the paper at `query_row` (all of them, no
    k)."""
    candidates = np.asarray(sorted(rows), dtype=np.int64)
    if len(candidates) == 0:
        return []
    scores = recommender.score_rows(query_row, candidates, mode, dense_weight)
    ranked, _ = select(
        candidates,
        scores,
        recommender.tiebreak,
        recommender.vectors,
        len(candidates),
        min_score,
        diverse,
    )
    return ranked.tolist()
