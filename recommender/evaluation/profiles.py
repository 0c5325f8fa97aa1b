"""Several-seed protocols built from a query-by-example collection (CSFCube's layout, see
metrics.py).

* One topic: for each query with at least MIN_RELEVANT relevant candidates, the seeds are the query
  paper and half of its relevant candidates (drawn with a fixed seed), the targets the other
  relevant
  ones, and the pool its judged candidates less the seeds.
* Mixed topics: the seeds of two or three one-topic profiles of different query papers in one
  profile; its pool and judgements are those of all of them (a paper judged for several keeps its
  highest grade), the seeds of any left out.

A profile is ranked by `PaperIndex.score_rows` over its seeds, as `like` with several seeds ranks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from ..query.ranking import RankingRequest, select
from . import metrics

MIN_RELEVANT = 3
# Mixed profiles drawn for each number of topics (all of them when fewer exist).
MIXED_COUNT = 100
MIXED_TOPICS = (2, 3)


@dataclass(frozen=True)
class Profile:
    """Seeds and what they are judged against."""

    name: str  # the queries it is made of, joined by "+"
    papers: tuple[str, ...]  # the query papers (cross-validation keeps a query paper on one side)
    seeds: tuple[str, ...]
    judged: dict[str, int]  # the pool: candidate -> grade, seeds left out

    @property
    def topics(self) -> int:
        return len(self.papers)


def one_topic(
    queries: Sequence[tuple[str, str, str]],
    qrels: dict[str, dict[str, int]],
    relevant_at: int = 2,
    seed: int = 0,
    present: Collection[str] | None = None,
) -> list[Profile]:
    """A profile for each query with at least MIN_RELEVANT relevant candidates (the query paper not
    counted). Seeds are drawn from the relevant papers in `present` (the index's, when given): a
    judged paper the index lacks stays a target, counted as never retrieved (as `papers evaluate`
    counts it for a query).
    """
    rng = np.random.default_rng(seed)
    profiles = []
    for query_id, paper_id, _ in queries:
        judged = qrels[query_id]
        relevant = sorted(
            doc for doc, grade in judged.items() if grade >= relevant_at and doc != paper_id
        )
        if len(relevant) < MIN_RELEVANT:
            continue
        drawable = [doc for doc in relevant if present is None or doc in present]
        chosen = rng.permutation(len(drawable))[: len(relevant) // 2]
        seeds = (paper_id, *sorted(drawable[i] for i in chosen))
        pool = {doc: grade for doc, grade in judged.items() if doc not in seeds}
        profiles.append(Profile(query_id, (paper_id,), seeds, pool))
    return profiles


def mixed(
    single: Sequence[Profile], topics: int, count: int = MIXED_COUNT, seed: int = 0
) -> list[Profile]:
    """Up to `count` profiles, each the union of `topics` one-topic profiles of different query
    papers (drawn with a fixed seed from all such combinations, in a stable order)."""
    combinations = [
        group
        for group in itertools.combinations(range(len(single)), topics)
        if len({single[i].papers[0] for i in group}) == topics
    ]
    rng = np.random.default_rng(seed + topics)
    if len(combinations) > count:
        combinations = [
            combinations[i] for i in sorted(rng.choice(len(combinations), count, replace=False))
        ]
    return [merge([single[i] for i in group]) for group in combinations]


def merge(parts: Sequence[Profile]) -> Profile:
    """One profile holding the seeds, pools and judgements of `parts`."""
    seeds = tuple(dict.fromkeys(seed for part in parts for seed in part.seeds))
    judged: dict[str, int] = {}
    for part in parts:
        for doc, grade in part.judged.items():
            if doc not in seeds:
                judged[doc] = max(grade, judged.get(doc, grade))
    return Profile(
        "+".join(part.name for part in parts),
        tuple(p for part in parts for p in part.papers),
        seeds,
        judged,
    )


def protocols(
    queries: Sequence[tuple[str, str, str]],
    qrels: dict[str, dict[str, int]],
    relevant_at: int = 2,
    count: int = MIXED_COUNT,
    seed: int = 0,
    present: Collection[str] | None = None,
) -> dict[str, list[Profile]]:
    """{"one topic": [...], "mixed": [...]} (mixed: two- and three-topic profiles together)."""
    single = one_topic(queries, qrels, relevant_at, seed, present)
    return {
        "one topic": single,
        "mixed": [
            profile for topics in MIXED_TOPICS for profile in mixed(single, topics, count, seed)
        ],
    }


def score_profile(
    recommender,
    profile: Profile,
    rows_by_id: dict[str, int],
    relevant_at: int = 2,
    *,
    pool: str = "judged",
    dense_weight: float | None = None,
    scorer: Callable | None = None,
    **ranking,
) -> metrics.QueryScores:
    """Rank the profile's pool (or, with pool="all", every paper but the seeds) from its seeds, and
    score it. `scorer(seed_rows, rows) -> scores` replaces `like`'s scoring
    (scripts/tune_profiles.py compares them). `ranking`: the mode, min_score and diverse of a
    query.ranking.RankingRequest, by keyword.
    """
    options = RankingRequest(**ranking)
    mode, min_score, diverse = options.mode, options.min_score, options.diverse
    seed_rows = [
        rows_by_id[doc] for doc in profile.seeds
    ]  # drawn from the index's papers (`one_topic`)
    if pool == "judged":
        pool_rows = sorted(rows_by_id[doc] for doc in profile.judged if doc in rows_by_id)
    else:
        seeds = set(seed_rows)
        pool_rows = [row for row in range(len(recommender)) if row not in seeds]
    rows = np.asarray(pool_rows, dtype=np.int64)
    ids = recommender.ids
    if len(rows):
        scores = (
            scorer(seed_rows, rows)
            if scorer is not None
            else recommender.score_rows(seed_rows, rows, mode, dense_weight)
        )
        rows, _ = select(
            rows,
            np.asarray(scores, dtype=np.float32),
            recommender.tiebreak,
            recommender.vectors,
            len(rows),
            min_score,
            diverse,
        )
    return metrics.score_query(
        [ids[row] for row in rows.tolist()], profile.judged, relevant_at, query_id=profile.name
    )
