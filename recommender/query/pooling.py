"""The ranking over an opened index: a query's candidates pooled from FAISS and TF-IDF, their
scores fused over the pool, the top `k` selected and each result's "because of" seeds. The
maths on plain arrays (fusion, MMR, seed weights) is `query/ranking.py`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..arrays import sorted_union
from ..corpus.papers import Paper
from ..corpus.summary import paper_brief
from ..index.lexical import SparseVector, best_rows
from .opened import OpenedIndex
from .profiles import best_topic, profile_scores
from .ranking import POOL, RankingRequest, fuse, order_by_score, select
from .reasons import SentencePair

# The seeds "because of" names at most (`Recommendation.because`): those with the best scores of a
# paper.
BECAUSE_SEEDS = 3
# FAISS neighbours fetched beyond those needed, re-ordered by exact cosine (`pool_candidates`).
POOL_MARGIN = 16


@dataclass(frozen=True)
class Recommendation:
    """One paper in a result list."""

    rank: int
    score: float
    paper: Paper
    why: tuple[str, ...] = ()
    # With several seeds: the one to three seeds whose scores made this paper's (its best), each
    # (ID, handle, embedding cosine with this paper), closest first.
    because: tuple[tuple[str, str, float], ...] = ()
    # With `why`: the phrases this paper shares with its seeds (or the search text), heaviest
    # first, and the closest pair of sentences with each seed (query/reasons.py).
    phrases: tuple[str, ...] = ()
    sentences: tuple[SentencePair, ...] = ()

    @property
    def id(self) -> str:
        return self.paper.id

    def to_dict(self) -> dict:
        brief = paper_brief(self.paper)
        return {
            "rank": self.rank,
            "id": brief.pop("id"),
            "score": round(float(self.score), 4),
            **brief,
            "why": list(self.why),
            "because": [
                {"id": seed, "handle": handle, "cosine": round(cosine, 4)}
                for seed, handle, cosine in self.because
            ],
            "phrases": list(self.phrases),
            "sentences": [pair.to_dict() for pair in self.sentences],
        }


@dataclass
class Query:
    """What a ranking compares papers with: an embedding and TF-IDF terms, and what was found for
    them."""

    dense: np.ndarray | None
    lexical: SparseVector | None
    lexical_scores: np.ndarray | None = None  # every row's, when scored in a batch (`like_each`)
    dense_found: np.ndarray | None = (
        None  # FAISS's nearest rows, when searched in a batch (`like_each`)
    )
    lexical_found: tuple | None = None  # (rows, scores, depth) `lexical_candidates` found
    pools: dict = field(
        default_factory=dict
    )  # (size, seeds, mode) -> the candidates `pool_candidates` found
    cosines: dict = field(default_factory=dict)  # row -> its cosine with `dense`, once read
    batched: bool = (
        False  # one of many queries (`like_each`): candidate vectors read from the memory map
    )
    vectors: dict | None = (
        None  # row -> stored vector, shared by the topics of one profile (`_topic_queries`)
    )
    seed: np.ndarray | None = (
        None  # the embedding of the one seed this query is of (`_per_seed_queries`)
    )


def _holds(rows: np.ndarray, wanted: np.ndarray) -> bool:
    """Whether the sorted `rows` hold every one of the sorted `wanted`."""
    if len(wanted) == 0:
        return True
    at = np.searchsorted(rows, wanted)
    return bool(at[-1] < len(rows) and np.array_equal(rows[at], wanted))


def query_cosines(index: OpenedIndex, query: Query, rows: np.ndarray) -> np.ndarray:
    """`cosines` of a query's candidates: read with pread for one query (`candidate_cosines`), from
    the memory map for a batch (`like_each`, which reads many); the same float64 sums either way.
    Each row's vector is read once a query (the pool and the ranked candidates overlap)."""
    rows = np.asarray(rows, dtype=np.int64)
    known = query.cosines
    missing = np.array([row for row in rows.tolist() if row not in known], dtype=np.int64)
    if len(missing):
        assert query.dense is not None  # only queries with an embedding have cosines
        if query.batched:
            found = index.cosines(missing, query.dense)
        elif query.vectors is not None:  # a topic of several: vectors read once for all of them
            index.read_vectors(missing, query.vectors)
            found = index.cosines(
                missing,
                query.dense,
                lambda block: np.stack([query.vectors[row] for row in block.tolist()]),
            )
        else:
            found = index.candidate_cosines(missing, query.dense)
        known.update(zip(missing.tolist(), found.tolist()))
    return np.array([known[row] for row in rows.tolist()], dtype=np.float32)


def pool_candidates(
    index: OpenedIndex, query: Query, seeds: set[int], size: int, mode: str
) -> tuple[np.ndarray, np.ndarray]:
    """The `size` best papers (seeds left out) by embedding cosine and by TF-IDF, each best first
    (the TF-IDF side only in hybrid and lexical mode)."""
    n = len(index)
    dense_rows = lexical_rows = np.zeros(0, dtype=np.int64)
    key = (size, frozenset(seeds), mode)
    if key in query.pools:
        return query.pools[key]
    if query.dense is not None and mode != "lexical":
        found = dense_candidates(index, query, min(n, size + len(seeds) + POOL_MARGIN))
        found = np.array([row for row in found.tolist() if row not in seeds], np.int64)
        # Ordered by the exact cosine (float64, each row on its own): the candidates do not
        # depend on
        # how FAISS rounded, so `like_each`'s batched search finds those `like`'s own search
        # finds.
        exact = query_cosines(index, query, found)
        dense_rows = found[order_by_score(found, exact, index.tiebreak)][:size]
    if mode != "dense":
        wanted = min(n, size + len(seeds))
        rows, scores = lexical_candidates(index, query, wanted, dense_rows)
        best = best_rows(scores, wanted)  # equal scores: lower rows, whichever way they were found
        top = rows[best][np.lexsort((index.tiebreak[rows[best]], -scores[best]))]
        lexical_rows = np.array([row for row in top.tolist() if row not in seeds][:size], np.int64)
    query.pools[key] = (dense_rows, lexical_rows)
    return dense_rows, lexical_rows


def dense_candidates(index: OpenedIndex, query: Query, depth: int) -> np.ndarray:
    """FAISS's `depth` nearest rows to the query (those of `like_each`'s batched search if it
    went deep enough)."""
    found = query.dense_found
    if found is None or len(found) < depth:
        assert query.dense is not None  # dense candidates are only asked for an embedded query
        found = index.faiss_search(query.dense[None, :], depth)[0]
    return found[:depth][found[:depth] >= 0]


def lexical_candidates(
    index: OpenedIndex, query: Query, depth: int, also
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores) in ascending rows: the `depth` best rows by TF-IDF and the rows `also`, with
    their exact scores (`LexicalIndex.top`, or `like_each`'s scores of every row); kept for the next
    call.
    """
    also = sorted_union(also)
    known = query.lexical_found
    if known is not None and known[2] >= depth and _holds(known[0], also):
        return known[0], known[1]
    if query.lexical_scores is not None:
        rows = sorted_union(best_rows(query.lexical_scores, depth), also)
        found = rows, query.lexical_scores[rows]
    else:
        assert query.lexical is not None  # only a query with TF-IDF terms asks for these
        found = index.lexical.top(query.lexical, depth, also)
    query.lexical_found = (*found, depth)
    return found


def query_scores(
    index: OpenedIndex,
    query: Query,
    rows: np.ndarray,
    seeds: set[int],
    mode: str,
    dense_weight: float | None = None,
) -> np.ndarray:
    """The score each of `rows` is ranked by (-1..1). In hybrid mode both cosines are normalised
    over the query's pool (POOL papers from each side, seeds left out) and fused (`ranking.fuse`),
    so a paper's score does not depend on which other papers are ranked with it; papers with a title
    only are moved as `ranking.title_only_shift` says (`OpenedIndex.title_only`)."""
    if mode == "dense":
        return query_cosines(index, query, rows)
    if mode == "lexical":
        found, scores = lexical_candidates(index, query, 1, rows)
        return scores[np.searchsorted(found, rows)]
    dense_rows, lexical_rows = pool_candidates(index, query, seeds, POOL, mode)
    pool = sorted_union(dense_rows, lexical_rows)
    everything = sorted_union(pool, rows)
    found, lexical = lexical_candidates(index, query, 1, everything)
    title_only = index.title_only
    fused = fuse(
        query_cosines(index, query, everything),
        lexical[np.searchsorted(found, everything)],
        mode,
        np.searchsorted(everything, pool),
        index.dense_weight if dense_weight is None else dense_weight,
        None if title_only is None else title_only[everything],
    )
    return fused[np.searchsorted(everything, rows)]


@dataclass(frozen=True)
class SeedProfile:
    """What several seeds add to their ranking: `terms`, the TF-IDF terms `why` shows (default: the
    first query's); `named`, (ID, handle) of each query's seed, to say which seeds each paper is
    there because of; `centroid`, the seeds' centroid's query, mixed in
    (`profiles.profile_scores`) and its candidates ranked too."""

    terms: SparseVector | None = None
    named: list[tuple[str, str]] | None = None
    centroid: Query | None = None


def rank_candidates(
    index: OpenedIndex,
    queries: list[Query],
    ranking: RankingRequest,
    seeds: set[int],
    excluded: set[int],
    profile: SeedProfile = SeedProfile(),
    candidates: Sequence[int] | None = None,
) -> list[Recommendation]:
    """The top `ranking.k` papers for one query, or for several (a profile's seeds, mixed with
    their centroid by `profiles.profile_scores`, over the candidates of them all), never the
    `excluded` rows; `candidates`: rank these rows only."""
    ranking.check()
    k, mode, why, centroid = ranking.k, ranking.mode, ranking.why, profile.centroid
    fetch = max(POOL, 4 * (k + len(excluded)))
    found: set[int] = set()
    pooled = queries + ([centroid] if centroid is not None else [])
    if candidates is not None:  # scores do not depend on the other candidates (`query_scores`)
        found, pooled = {int(row) for row in candidates}, []
    for query in pooled:
        dense_rows, lexical_rows = pool_candidates(index, query, seeds, fetch, mode)
        found.update(dense_rows.tolist(), lexical_rows.tolist())
    rows = np.array(sorted(found - excluded), dtype=np.int64)
    if len(rows) == 0:
        return []
    per_seed = None
    if len(queries) == 1:
        scores = query_scores(index, queries[0], rows, seeds, mode)
    else:
        per_seed = np.stack([query_scores(index, query, rows, seeds, mode) for query in queries])
        if centroid is not None:
            scores = profile_scores(per_seed, query_scores(index, centroid, rows, seeds, mode))
        else:
            scores = best_topic(per_seed)
    all_rows = rows
    rows, scores = select(
        rows, scores, index.tiebreak, index.vectors, k, ranking.min_score, ranking.diverse
    )
    papers = index.papers_at(rows.tolist())
    terms = profile.terms if profile.terms is not None or not why else queries[0].lexical
    results = []
    for rank, (row, score, paper) in enumerate(zip(rows, scores, papers), start=1):
        shared: tuple[str, ...] = ()
        if why:
            assert terms is not None  # `why` queries always carry their TF-IDF terms
            shared = tuple(index.lexical.shared_terms(terms, int(row)))
        because: tuple[tuple[str, str, float], ...] = ()
        if profile.named is not None and per_seed is not None:
            because = seeds_behind(
                index,
                queries,
                per_seed[:, int(np.searchsorted(all_rows, row))],
                int(row),
                profile.named,
            )
        results.append(Recommendation(rank, float(score), paper, shared, because))
    return results


def seeds_behind(
    index: OpenedIndex,
    queries: list[Query],
    seed_scores: np.ndarray,
    row: int,
    named: list[tuple[str, str]],
) -> tuple[tuple[str, str, float], ...]:
    """The seeds whose scores made a paper's (its BECAUSE_SEEDS best), closest by cosine
    first."""
    best = np.argsort(-seed_scores, kind="stable")[:BECAUSE_SEEDS]
    found = []
    for i in best.tolist():
        seed = queries[i].seed
        if seed is None:  # lexical mode, a paper from outside the index: never embedded
            cosine = float(seed_scores[i])
        else:
            vector = index.vectors_at([row]).reshape(-1).astype(np.float64)
            seed = np.asarray(seed, dtype=np.float64)
            cosine = float(
                vector @ seed / max(np.linalg.norm(vector) * np.linalg.norm(seed), 1e-12)
            )
        found.append((*named[i], cosine))
    found.sort(key=lambda item: -item[2])
    # A seed far from the paper (under half the closest one's cosine) is not what it is there
    # because of.
    return tuple(item for i, item in enumerate(found) if i == 0 or item[2] >= 0.5 * found[0][2])
