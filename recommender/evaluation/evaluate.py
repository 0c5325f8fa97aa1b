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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..embed.windows import Chunking
from ..errors import InputError, OptionError, RecommenderError, caller_stacklevel
from ..index.home import resolve_index_dir
from ..index.layout import is_index_folder
from ..index.request import BuildHooks, BuildRequest
from ..index.stored import open_stored
from ..query.ranking import RankingRequest, select
from . import metrics, profiles

if TYPE_CHECKING:
    from ..index.build import BuildReport
    from ..query.paper_index import PaperIndex

POOLS = ("judged", "all")
# `evaluate`'s keywords: the index's build (a BuildRequest), the ranking (a RankingRequest) and
# how the rankings are scored (Scoring).
BUILD_SETTINGS = ("index", "model", "precision", "chunking")
RANKING_SETTINGS = ("mode", "min_score", "diverse")
SCORING_SETTINGS = ("pool", "relevant_at", "dense_weight")
EVALUATE_SETTINGS = BUILD_SETTINGS + RANKING_SETTINGS + SCORING_SETTINGS
# `evaluate_reviewers`'s (reviewers.py): the build's, the ranking's mode and the dense weight (its
# loss orders the scores of every rated paper: no pool, no grade threshold, nothing dropped).
REVIEWER_SETTINGS = BUILD_SETTINGS + ("mode", "dense_weight")


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


@dataclass(frozen=True)
class Scoring:
    """How an evaluation ranks and scores beyond its RankingRequest: `pool` ("judged": each
    query's judged papers, "all": the whole corpus), `relevant_at` the lowest grade that counts as
    relevant, `dense_weight` of the dense cosine in hybrid scores (None: the one `like` uses for
    the index)."""

    pool: str = "judged"
    relevant_at: int = 2
    dense_weight: float | None = None


def evaluation_build(
    corpus: str | Path,
    request: BuildRequest | None = None,
    *,
    default_index: str | None = None,
    **settings,
) -> BuildRequest:
    """The build of an evaluation's index over `corpus`: `request`, else the BuildRequest of the
    keywords `settings` (index, model, precision, chunking). Its papers are the corpus's, its index
    by default `default_index` (None: eval-<corpus file stem>) and its chunking by default
    "sentences"; it is built by "evaluate" (which rebuilds only its own)."""
    if request is not None and settings:
        raise TypeError(f"give a build or its settings, not both: {', '.join(settings)}")
    asked = request if request is not None else BuildRequest.of(**settings)
    default = default_index if default_index is not None else eval_index_name(corpus)
    index = asked.index if asked.index is not None else default
    chunking = asked.encoder.chunking if asked.encoder.chunking is not None else Chunking()
    encoder = replace(asked.encoder, chunking=chunking)
    return replace(asked, inputs=(corpus,), index=index, encoder=encoder, built_by="evaluate")


def prepare_index(build: BuildRequest, hooks: BuildHooks | None = None) -> BuildReport | None:
    """Reuse the index of `build` (evaluation_build) when it was built from its corpus with its
    model, precision (None: the default's), chunking and TF-IDF, else (re)build it, telling `hooks`.

    Returns the BuildReport of a build, or None when the index was reused.
    """
    from ..corpus.papers import read_papers
    from ..embed.choice import new_index_precision
    from ..index.build import build_index

    corpus, index = build.inputs[0], build.index
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # read only to compare with the index; a build warns as it reads
        papers = read_papers([corpus])
    encoder = build.encoder
    model, precision = new_index_precision(encoder.model, encoder.precision, len(papers))
    build = replace(build, encoder=replace(build.encoder, model=model, precision=precision))
    manifest = _index_manifest(corpus, index)
    if _index_current(manifest, build, papers):
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
    hooks = hooks if hooks is not None else BuildHooks()
    # The build reads the input again, and warns about it as it does.
    return build_index(progress=hooks.progress, on_phase=hooks.on_phase, request=build)


def _index_manifest(corpus: str | Path, index: str | Path | None) -> dict:
    """The manifest of the index, or {} where there is none to reuse (missing, corrupt or of another
    format version); an unreadable index that evaluate did not name is refused."""
    index_dir = resolve_index_dir(index)
    try:
        with open_stored(index_dir) as stored:
            return stored.manifest
    except RecommenderError:  # missing, corrupt or of another format version: build it
        if is_index_folder(index_dir) and str(index) != eval_index_name(corpus):
            # Damaged or of another version: whose it is cannot be told, so it is not replaced.
            raise InputError(
                f"index {index} cannot be read, and evaluate does not replace an index it did not"
                f" build: leave the index out (eval-{Path(corpus).stem}) or give a new name"
            ) from None
        return {}


def _index_current(manifest: Mapping, build: BuildRequest, papers: list) -> bool:
    """Whether the index of `manifest` is the one `build` (its model and precision decided) makes of
    `papers`: the same model, precision, chunking, papers and TF-IDF settings."""
    from ..index.build import inputs_fingerprint
    from ..index.lexical import settings as lexical_settings

    encoder = build.encoder
    chunking = encoder.chunking if encoder.chunking is not None else Chunking()
    return (
        manifest.get("model") == encoder.model
        and manifest.get("precision", "fp32") == encoder.precision
        and {k: v for k, v in manifest.get("chunking", {}).items() if k != "max_tokens"}
        == chunking.to_dict()
        and manifest.get("inputs_fingerprint") == inputs_fingerprint(papers)
        and {k: v for k, v in manifest.get("lexical", {}).items() if k != "terms"}
        == lexical_settings()
    )


def evaluate(
    corpus: str | Path,
    queries: str | Path,
    qrels: str | Path,
    *,
    build: BuildRequest | None = None,
    ranking: RankingRequest | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str, int | None], None] | None = None,
    **settings,
) -> Evaluation:
    """Build (or reuse) an index over `corpus`, rank every query, and score the rankings.

    The index is built as `build` (a BuildRequest) says, else as the keywords index, model,
    precision (as `build_index`'s, None the default) and chunking (default: sentences) say; its
    index by default eval-<corpus file stem> (evaluation_build). The queries are ranked as
    `ranking` (a RankingRequest) says, else as the keywords mode (default "hybrid"), min_score and
    diverse say. The keywords pool ("judged" or "all"), relevant_at (2) and dense_weight (None: the
    one `like` uses for the index, its tier's) say how the rankings are scored (Scoring).
    `on_phase(name, total)` and `progress(done, total)` are told how a build goes."""
    asked, ranked, scoring = evaluation_requests(corpus, build, ranking, settings)
    evaluation = _evaluate(queries, qrels, asked, ranked, scoring, BuildHooks(progress, on_phase))
    if evaluation.missing:
        warnings.warn(
            f"{evaluation.missing} judgements name papers that are not in the index "
            "(a build keeps duplicate papers once): those count as never retrieved",
            EvaluationWarning,
            stacklevel=caller_stacklevel(),
        )
    return evaluation


def evaluation_requests(
    corpus: str | Path,
    build: BuildRequest | None,
    ranking: RankingRequest | None,
    settings: dict,
    *,
    caller: str = "evaluate",
    accepted: Sequence[str] = EVALUATE_SETTINGS,
    default_index: str | None = None,
) -> tuple[BuildRequest, RankingRequest, Scoring]:
    """The three values of an evaluation's arguments (`evaluate`'s, `evaluate_reviewers`'s): the
    build of its index over `corpus` (evaluation_build, by default named `default_index`), its
    RankingRequest and its Scoring, each given whole or made of the keywords `settings`. Checked
    (OptionError) before any work is done; a keyword not among `caller`'s `accepted` ones is a
    TypeError, as is a request given beside its own keywords."""
    unknown = [name for name in settings if name not in accepted]
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument '{unknown[0]}'")
    given = {name: settings[name] for name in BUILD_SETTINGS if name in settings}
    options = {name: settings[name] for name in RANKING_SETTINGS if name in settings}
    scoring = Scoring(**{name: settings[name] for name in SCORING_SETTINGS if name in settings})
    ranking = RankingRequest.of(ranking, **options)
    check_settings(ranking.mode, scoring.pool, scoring.dense_weight, None, None)
    return evaluation_build(corpus, build, default_index=default_index, **given), ranking, scoring


def _evaluate(
    queries: str | Path,
    qrels: str | Path,
    build: BuildRequest,
    ranking: RankingRequest,
    scoring: Scoring,
    hooks: BuildHooks,
) -> Evaluation:
    """The evaluation's stages: read the collection, prepare the index, rank and score every query
    and every profile, and record the settings the figures are of."""
    from ..query.paper_index import PaperIndex

    listed, judgements = read_collection(queries, qrels)
    report = prepare_index(build, hooks)
    with PaperIndex.open(build.index) as recommender:
        ranker = _Ranker.of(recommender, ranking, scoring)
        results = ranker.queries(listed, judgements, queries, build.inputs[0])
        by_protocol = ranker.profiles(listed, judgements)
        settings = ranker.settings()
    facets = {}
    for facet in dict.fromkeys(result.facet for result in results):
        facets[facet] = metrics.mean_scores([r.scores for r in results if r.facet == facet])
    overall = metrics.mean_scores([r.scores for r in results])
    return Evaluation(settings, results, overall, facets, report, by_protocol)


def read_collection(
    queries: str | Path, qrels: str | Path
) -> tuple[list[tuple[str, str, str]], dict[str, dict[str, int]]]:
    """The collection's queries (query ID, paper ID, facet) and their judgements; a query without
    judgements is refused."""
    judgements = metrics.read_qrels(qrels)
    listed = metrics.read_queries(queries)
    for query_id, _, _ in listed:
        if query_id not in judgements:
            raise InputError(
                f"{qrels}: no judgements for query {query_id} of {queries}: judge it or remove it"
            )
    return listed, judgements


@dataclass(frozen=True)
class _Ranker:
    """An open index ranking a collection's queries and profiles as the evaluation asks, its dense
    weight decided (the index's own where none was given)."""

    recommender: PaperIndex
    rows_by_id: dict[str, int]
    ranking: RankingRequest
    scoring: Scoring

    @classmethod
    def of(cls, recommender: PaperIndex, ranking: RankingRequest, scoring: Scoring) -> _Ranker:
        weight = scoring.dense_weight
        weight = recommender.dense_weight if weight is None else weight
        rows_by_id = {paper_id: row for row, paper_id in enumerate(recommender.ids)}
        return cls(recommender, rows_by_id, ranking, replace(scoring, dense_weight=weight))

    def queries(
        self,
        listed: list[tuple[str, str, str]],
        judgements: dict[str, dict[str, int]],
        queries: str | Path,
        corpus: str | Path,
    ) -> list[QueryResult]:
        """Every query of `listed` ranked and scored; a query paper not in the index is refused."""
        results = []
        for query_id, paper_id, facet in listed:
            if paper_id not in self.rows_by_id:
                raise InputError(
                    f"{queries}: query {query_id} is paper {paper_id}, which is not in {corpus}"
                )
            row = self.rows_by_id[paper_id]
            results.append(self.query(query_id, row, judgements[query_id], facet))
        return results

    def query(
        self, query_id: str, query_row: int, judged: dict[str, int], facet: str
    ) -> QueryResult:
        """One query ranked over its pool and scored against its judgements."""
        recommender, rows_by_id, scoring = self.recommender, self.rows_by_id, self.scoring
        if scoring.pool == "judged":
            rows = [rows_by_id[doc] for doc in judged if doc in rows_by_id]
        else:
            query_judged = recommender.ids[query_row] in judged
            rows = [row for row in range(len(recommender)) if row != query_row or query_judged]
        missing = sum(1 for doc in judged if doc not in rows_by_id)
        ranking = rank_rows(
            recommender,
            query_row,
            rows,
            self.ranking.mode,
            scoring.dense_weight,
            self.ranking.min_score,
            self.ranking.diverse,
        )
        ids = recommender.ids
        scores = metrics.score_query(
            [ids[row] for row in ranking], judged, scoring.relevant_at, query_id=query_id
        )
        return QueryResult(query_id, ids[query_row], facet, scores, len(rows), missing)

    def profiles(
        self, listed: list[tuple[str, str, str]], judgements: dict[str, dict[str, int]]
    ) -> dict[str, tuple[int, dict[str, float]]]:
        """The collection's profiles (profiles.py) ranked as `like` ranks several seeds: protocol ->
        (profiles, mean scores), a protocol without profiles left out."""
        scoring, ranking = self.scoring, self.ranking
        by_protocol = {}
        for protocol, listed_profiles in profiles.protocols(
            listed, judgements, scoring.relevant_at, present=self.rows_by_id
        ).items():
            if listed_profiles:
                scored = [
                    profiles.score_profile(
                        self.recommender,
                        profile,
                        self.rows_by_id,
                        scoring.relevant_at,
                        pool=scoring.pool,
                        mode=ranking.mode,
                        dense_weight=scoring.dense_weight,
                        min_score=ranking.min_score,
                        diverse=ranking.diverse,
                    )
                    for profile in listed_profiles
                ]
                by_protocol[protocol] = (len(scored), metrics.mean_scores(scored))
        return by_protocol

    def settings(self) -> dict:
        """The settings the figures are of (Evaluation.settings)."""
        recommender, ranking, scoring = self.recommender, self.ranking, self.scoring
        manifest = recommender.manifest
        return {
            "index": str(recommender.stored.index_dir),
            "papers": len(recommender),
            "model": manifest["model"],
            "precision": manifest.get("precision", "fp32"),
            "chunking": manifest["chunking"]["strategy"],
            "mode": ranking.mode,
            "dense_weight": scoring.dense_weight if ranking.mode == "hybrid" else None,
            "pool": scoring.pool,
            "relevant_at": scoring.relevant_at,
            "min_score": ranking.min_score,
            "diverse": ranking.diverse,
        }


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
