"""Papers like given ones: `like` and its forms by row, for each of many papers (related work),
and the scores of chosen rows (evaluation)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import cast

import numpy as np

from ..corpus.papers import Paper, normalise_text
from ..errors import OptionError, PaperNotFoundError
from ..index.lexical import SparseVector, combine
from .lookups import IndexLookups
from .pooling import (
    POOL_MARGIN,
    Query,
    Recommendation,
    SeedProfile,
    query_scores,
    rank_candidates,
)
from .profiles import best_topic, profile_scores, seed_clusters
from .ranking import POOL, RankingRequest, check_options, combine_dense, seed_weights

# How `score_rows` scores several papers: as `like` does (grouped into topics), or as one centroid.
PROFILES = ("seeds", "topics", "centroid")
# TF-IDF scores (one a query and paper) `like_each` holds at once: 16 MB whatever the corpus.
LEXICAL_CELLS = 1 << 22


class SimilarQueries(IndexLookups):
    """Papers like given ones, over an opened index (a part of `PaperIndex`)."""

    def like(
        self,
        *references: str,
        not_: Sequence[str] = (),
        exclude: Sequence[str] = (),
        papers: Sequence[Paper] = (),
        candidates: Sequence[int] | None = None,
        ranking: RankingRequest | None = None,
        **options,
    ) -> list[Recommendation]:
        """Papers like the given ones (and unlike those in `not_`), never the seeds themselves;
        `candidates`: rank these rows only (a feed's new papers), each scored as it would be anyway.
        Ranked as `ranking` says, else as the keywords `options` say (query.ranking.RankingRequest:
        k=10, mode="hybrid", min_score, diverse, why).

        `papers` are more seeds as `Paper` records (`read_papers(["reading-list.bib"])`):
        those the index holds (same ID or same text, see `find_papers`) count as
        their stored selves and are left out of the results; the others are
        embedded now with the index's query encoder, windowed as the papers were."""
        if not references and not papers:
            raise PaperNotFoundError(
                "no paper given: name at least one paper ID or handle, or give papers from a file"
            )
        ranking = RankingRequest.of(ranking, **options)
        papers = list(papers)
        found = self.find_papers(papers) if papers else []
        positives = list(
            dict.fromkeys(
                [self.resolve(r) for r in references] + [row for row in found if row is not None]
            )
        )
        outside = list(
            {normalise_text(p.text): p for p, row in zip(papers, found) if row is None}.values()
        )
        negatives = list(dict.fromkeys(self.resolve(r) for r in not_))
        both = [reference for reference in not_ if self.resolve(reference) in positives]
        if both:
            raise OptionError(
                f"'{both[0]}' is given both as a paper to be like and as one to be unlike: drop one"
                " of them",
                "not_",
            )
        return self.like_rows(
            positives,
            negatives,
            excluded=self.excluded_rows(exclude),
            outside=outside,
            candidates=candidates,
            ranking=ranking,
        )

    def like_rows(
        self,
        positives: Sequence[int],
        negatives: Sequence[int] = (),
        *,
        excluded: Collection[int] = frozenset(),
        outside: Sequence[Paper] = (),
        candidates: Sequence[int] | None = None,
        ranking: RankingRequest | None = None,
        **options,
    ) -> list[Recommendation]:
        """`like` for papers given by row, and papers not in the index (`outside`, embedded now).

        Several seeds: each seed is a query of its own (the `negatives` subtracted from it,
        Rocchio), and a candidate's score mixes the mean of its PROFILE_TOP_K best seeds' scores
        with the seeds' centroid's (`profiles.profile_scores`): a profile on several topics finds
        papers of each, and a paper close to a couple of seeds beats one vaguely near all
        (docs/profiles.md). `why`: also the seeds behind each paper (`Recommendation.because`).
        Ranked as `ranking` (or the keywords `options`) says, as `like`."""
        ranking = RankingRequest.of(ranking, **options)
        mode, why = ranking.mode, ranking.why
        positives, negatives, outside = list(positives), list(negatives), list(outside)
        seeds = set(positives) | set(negatives)
        queries = self._per_seed_queries(positives, negatives, mode, why, outside)
        centroid = None
        if len(queries) > 1:  # mixed in: the seeds' centroid (`profiles.profile_scores`)
            # the per-seed queries of papers from outside the index, each with its vector
            extra = [query.seed for query in queries[len(positives) :] if query.seed is not None]
            centroid = self._seed_query(positives, negatives, mode, why, outside, extra)
        profile = SeedProfile(centroid=centroid)
        if why and len(queries) > 1:
            # the terms `why` shows: those shared with the seeds as a whole, and who each seed is
            terms = self._seed_query(positives, negatives, "lexical", why, outside).lexical
            handles = self.handles
            named = [(self.ids[row], handles[row]) for row in positives] + [
                (paper.id, paper.handle or paper.id) for paper in outside
            ]
            profile = SeedProfile(terms, named, centroid)
        excluding = set(excluded) | seeds
        results = rank_candidates(self, queries, ranking, seeds, excluding, profile, candidates)
        if not why or not results:
            return results
        return self.with_reasons(
            results, [(paper.id, paper) for paper in [*self.papers_at(positives), *outside]]
        )

    def like_each(
        self, rows: Sequence[int], k: int = 10, why: bool = False
    ) -> list[list[Recommendation]]:
        """`like_rows([row], k=k, why=why)` for each of `rows`: the same lists, with the dense
        candidates of all of them found by one batched FAISS search (related-work); each list is
        then re-ranked over its own candidates only."""
        ranking = RankingRequest.of(k=k, why=why)
        rows = [int(row) for row in rows]
        if not rows:
            return []
        queries = [self._seed_query([row], [], "hybrid", why) for row in rows]
        # Deep enough for `rank_candidates`'s candidates (a seed excluded) and `query_scores`' pool.
        depth = min(len(self), max(POOL, 4 * (k + 1)) + 1 + POOL_MARGIN)
        # hybrid queries of stored papers: each has its embedding and its TF-IDF terms
        dense = np.stack(cast(list[np.ndarray], [query.dense for query in queries]))
        found = self.faiss_search(dense, depth)
        results = []
        step = max(1, LEXICAL_CELLS // len(self))
        for batch in (
            range(start, min(start + step, len(rows))) for start in range(0, len(rows), step)
        ):
            terms = cast(list[SparseVector], [queries[i].lexical for i in batch])
            lexical = self.lexical.scores_many(terms)
            for i, scores in zip(batch, lexical):
                query = queries[i]
                query.dense_found, query.batched, query.lexical_scores = found[i], True, scores
                ranked = rank_candidates(self, [query], ranking, {rows[i]}, {rows[i]})
                if why and ranked:
                    seed = self.papers_at([rows[i]])[0]
                    ranked = self.with_reasons(ranked, [(seed.id, seed)])
                results.append(ranked)
                # its scores of every paper are not kept past its list (the slot is not read again)
                queries[i] = None  # type: ignore[call-overload]
        return results

    def score_rows(
        self,
        query_rows: int | Sequence[int],
        rows: Sequence[int] | np.ndarray,
        mode: str = "hybrid",
        dense_weight: float | None = None,
        profile: str = "seeds",
    ) -> np.ndarray:
        """Scores of `rows` against the paper at `query_rows` (or the papers, a profile), as `like`
        scores them (used by evaluation). `profile="topics"` (seeds clustered, the best cluster's
        centroid) and `"centroid"` (one centroid) score several papers as earlier versions of `like`
        did, for comparison.
        """
        check_options(1, None, None, mode)
        if profile not in PROFILES:
            raise OptionError(
                f"unknown profile '{profile}': use one of {', '.join(PROFILES)}", "profile"
            )
        query_rows = [int(row) for row in np.atleast_1d(query_rows).tolist()]
        rows = np.asarray(rows, dtype=np.int64)
        if profile == "centroid":
            queries = [self._seed_query(query_rows, [], mode, False)]
        elif profile == "seeds":
            queries = self._per_seed_queries(query_rows, [], mode, False, [])
            if len(queries) > 1:
                seeds = set(query_rows)
                per_seed = np.stack(
                    [
                        query_scores(self, query, rows, seeds, mode, dense_weight)
                        for query in queries
                    ]
                )
                centroid = query_scores(
                    self,
                    self._seed_query(query_rows, [], mode, False),
                    rows,
                    seeds,
                    mode,
                    dense_weight,
                )
                return profile_scores(per_seed, centroid)
        else:
            queries = self._topic_queries(query_rows, [], mode, False, [])
        return best_topic(
            np.stack(
                [
                    query_scores(self, query, rows, set(query_rows), mode, dense_weight)
                    for query in queries
                ]
            )
        )

    def seed_scores(
        self,
        positives: Sequence[int],
        rows: Sequence[int] | np.ndarray,
        mode: str = "hybrid",
        dense_weight: float | None = None,
    ) -> np.ndarray:
        """[seeds, rows]: each seed's scores of `rows` as a one-seed `like` gives them, every seed
        left out of
        every seed's pool (the per-seed methods scripts/tune_profiles.py compares)."""
        check_options(1, None, None, mode)
        positives = [int(row) for row in positives]
        rows = np.asarray(rows, dtype=np.int64)
        return np.stack(
            [
                query_scores(
                    self,
                    self._seed_query([row], [], mode, False),
                    rows,
                    set(positives),
                    mode,
                    dense_weight,
                )
                for row in positives
            ]
        )

    def _seed_query(
        self,
        positives: list[int],
        negatives: list[int],
        mode: str,
        why: bool,
        outside: Sequence[Paper] = (),
        outside_vectors: list[np.ndarray] | None = None,
    ) -> Query:
        """The query of `like`: Rocchio over the seeds (stored positives, papers from outside the
        index, negatives, in that order). `outside_vectors`: the outside papers' embeddings, if
        already made.
        """
        weights = seed_weights(len(positives) + len(outside), len(negatives))
        dimension = self.manifest["dimension"]
        dense_query = None
        if mode != "lexical" or not outside:
            if outside_vectors is None:
                outside_vectors = self._encode_papers(outside)
            outside_vectors = [vector[None, :] for vector in outside_vectors]
            dense_query = combine_dense(
                np.vstack(
                    [self.vectors_at(positives).reshape(-1, dimension)]
                    + outside_vectors
                    + [self.vectors_at(negatives).reshape(-1, dimension)]
                ),
                weights,
            )
        lexical_query = None
        if mode != "dense" or why:
            lexical_query = combine(
                [self.lexical.row(row) for row in positives]
                + [self.lexical.transform(p.text) for p in outside]
                + [self.lexical.row(row) for row in negatives],
                weights,
            )
        return Query(dense_query, lexical_query)

    def _encode_papers(self, papers: Sequence[Paper]) -> list[np.ndarray]:
        """Papers from outside the index, windowed as the build windows papers (the title in every
        window)."""
        return [self.encode_query(paper.text, paper.head) for paper in papers]

    def _per_seed_queries(
        self,
        positives: list[int],
        negatives: list[int],
        mode: str,
        why: bool,
        outside: list[Paper],
    ) -> list[Query]:
        """One Rocchio query a seed (stored positives, then papers from outside the index), each
        with all the negatives; one seed: its query alone."""
        if len(positives) + len(outside) == 1:
            return [self._seed_query(positives, negatives, mode, why, outside)]
        outside_vectors = (
            self._encode_papers(outside) if mode != "lexical" else [None] * len(outside)
        )
        queries: list[Query] = []
        shared: dict = {}  # the seeds rank the same candidates: each vector is read once
        dimension = self.manifest["dimension"]
        for row in positives:
            queries.append(self._seed_query([row], negatives, mode, why))
            queries[-1].seed = self.vectors_at([row]).reshape(dimension)
        for paper, vector in zip(outside, outside_vectors):
            queries.append(
                self._seed_query(
                    [], negatives, mode, why, [paper], None if vector is None else [vector]
                )
            )
            queries[-1].seed = vector
        for query in queries:
            query.vectors = shared
        return queries

    def _topic_queries(
        self,
        positives: list[int],
        negatives: list[int],
        mode: str,
        why: bool,
        outside: list[Paper],
    ) -> list[Query]:
        """The seeds grouped into topics (`seed_clusters` of their embeddings), one Rocchio query
        each (with all the negatives). In lexical mode papers from outside the index are not
        embedded, so seeds with such papers are one topic there."""
        if len(positives) + len(outside) == 1 or (mode == "lexical" and outside):
            return [self._seed_query(positives, negatives, mode, why, outside)]
        outside_vectors = self._encode_papers(outside)
        vectors = np.vstack(
            [self.vectors_at(positives).reshape(-1, self.manifest["dimension"])]
            + [vector[None, :] for vector in outside_vectors]
        )
        queries: list[Query] = []
        shared: dict = {}  # the topics rank the same candidates: each vector is read once
        for topic in seed_clusters(vectors):
            stored = [positives[i] for i in topic if i < len(positives)]
            extra = [i - len(positives) for i in topic if i >= len(positives)]
            query = self._seed_query(
                stored,
                negatives,
                mode,
                why,
                [outside[i] for i in extra],
                [outside_vectors[i] for i in extra],
            )
            query.vectors = shared
            queries.append(query)
        return queries
