"""Related-work lists for many papers at once, in batches.

Each list holds the k papers with the highest hybrid score (the one `like`
ranks by: DENSE_WEIGHT x embedding cosine + the rest x TF-IDF cosine) over the
whole index, computed with `like`'s own arithmetic -- so it is the list
`Recommender.like(paper, k=k)` returns whenever `like`'s candidate pool holds
those papers, which on an exact (flat) index it does in practice (the tests
and scripts/bench_related.py check it). On an approximate (IVF) index the dense
neighbours come from that index, as for `like`, so both can miss a neighbour
the index did not probe.

How: one exact FAISS search per chunk of papers gives each paper's nearest
papers by embedding; the hybrid score is computed exactly for the few that can
matter, and a bound proves that no other paper can enter the top k:

* a paper outside the dense candidates has an embedding cosine of at most the
  last candidate's, so it needs a TF-IDF cosine above some tau to compete;
* TF-IDF cosines are bounded term by term (query weight x the largest weight of
  that term in any paper): the query's most common terms, whose bounds sum to
  less than tau/2, are not scanned, and only papers sharing one of its rarer
  terms are looked at -- on real abstracts ~10% of the postings `like` scans.

A paper whose bound does not hold is scored against every paper instead. Lists
are produced chunk by chunk (a generator), so a large corpus never holds all of
them in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from ..arrays import csr_ranges
from ..corpus.papers import Paper
from ..corpus.summary import paper_brief
from ..errors import InputError
from ..index.lexical import SparseVector, combine
from ..query.ranking import DENSE_WEIGHT, combine_dense, fuse, order_by_score
from ..query.recommender import Recommendation, Recommender, check_options

CHUNK = 1024
"""Papers per batched search; bounds the memory held for candidates and lists."""

CANDIDATES = 400
"""Dense candidates fetched per paper: a lower last cosine makes the bound above
easier to meet, at little search cost."""

# Float slack in the bound: FAISS's float32 scores and the sums below differ from
# the exact arithmetic by far less than this.
SLACK = 1e-5


@dataclass(frozen=True)
class RelatedList:
    """One chosen paper and the papers most related to it."""

    paper: Paper
    related: tuple[Recommendation, ...]

    def to_dict(self) -> dict:
        return {**paper_brief(self.paper), "related": [item.to_dict() for item in self.related]}


def select_rows(recommender: Recommender, references: Sequence[str] = (), all_papers: bool = False) -> list[int]:
    """Rows of the chosen papers in the order given (duplicates once), or every row in index order."""
    if all_papers:
        if references:
            raise InputError("give paper IDs or --all, not both")
        return list(range(len(recommender)))
    if not references:
        raise InputError("no paper chosen: give paper IDs or handles, --from FILE, or --all")
    return list(dict.fromkeys(recommender.resolve(reference) for reference in references))


def related_work(
    recommender: Recommender,
    rows: Sequence[int | Paper],
    k: int = 5,
    why: bool = False,
    chunk: int = CHUNK,
    progress: Callable[[int], None] | None = None,
    stats: dict | None = None,
) -> Iterator[RelatedList]:
    """For each row, its k most related papers (the list `like` gives), computed in batches, yielded in order.

    A `Paper` among `rows` (read from a file, say) stands for the stored paper
    when the index holds it (`Recommender.find_papers`); otherwise its list is
    `like(papers=[paper])`'s, the paper embedded now. `progress(count)` is called
    after each chunk; `stats`, if given, counts the papers ranked through the
    bound ("bounded") and against every paper ("full")."""
    check_options(k, None, None, "hybrid")  # now, not when the first list is asked for
    if not any(isinstance(item, Paper) for item in rows):
        return _related_lists(recommender, [int(row) for row in rows], k, why, chunk, progress, stats)
    items = _stored_where_possible(recommender, rows)
    stored = [item for item in items if not isinstance(item, Paper)]
    return _mixed_lists(recommender, items, _related_lists(recommender, stored, k, why, chunk, progress, stats),
                        k, why, progress)


def _stored_where_possible(recommender: Recommender, rows: Sequence[int | Paper]) -> list[int | Paper]:
    """Rows as ints, papers the index holds as their rows, each paper once (first place kept)."""
    papers = [item for item in rows if isinstance(item, Paper)]
    found = iter(recommender.find_papers(papers) if papers else [])
    items: list[int | Paper] = []
    for item in rows:
        if isinstance(item, Paper):
            row = next(found)
            items.append(item if row is None else row)
        else:
            items.append(int(item))
    seen: set = set()
    unique = []
    for item in items:
        key = item.id if isinstance(item, Paper) else item
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def _mixed_lists(recommender, items, stored_lists, k, why, progress) -> Iterator[RelatedList]:
    for item in items:
        if isinstance(item, Paper):
            yield RelatedList(item, tuple(recommender.like(papers=[item], k=k, why=why)))
            if progress is not None:
                progress(1)
        else:
            yield next(stored_lists)


def _related_lists(recommender, rows, k, why, chunk, progress, stats) -> Iterator[RelatedList]:
    ranker = BatchRanker(recommender, k, why)
    counts = stats if stats is not None else {}
    counts.setdefault("bounded", 0)
    counts.setdefault("full", 0)
    for start in range(0, len(rows), chunk):
        block = [int(row) for row in rows[start: start + chunk]]
        vectors = recommender.vectors_at(block)
        # The query vector exactly as `like` builds it for one paper.
        queries = np.stack([combine_dense(vectors[i: i + 1], [1.0]) for i in range(len(block))])
        if ranker.exhaustive:
            found = [(None, None)] * len(block)
        else:
            found = list(zip(*_nearest(recommender, queries, ranker.dense_fetch)))
        ranked = []
        for row, query, (dense_scores, dense_ids) in zip(block, queries, found):
            result = ranker.rank(row, query, dense_scores, dense_ids)
            counts["bounded" if result is not None and not ranker.exhaustive else "full"] += 1
            ranked.append(result if result is not None else ranker.rank_all(row, query))
        wanted = sorted(set(block).union(*(top_rows.tolist() for top_rows, _ in ranked)))
        papers = dict(zip(wanted, recommender.papers_at(wanted)))
        for row, (top_rows, top_scores) in zip(block, ranked):
            yield RelatedList(papers[row], ranker.recommendations(row, top_rows, top_scores, papers))
        if progress is not None:
            progress(len(block))


def _nearest(recommender: Recommender, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k inner products from the stored index, as `like` gets them: exact on a flat index;
    on an approximate one (above ann.EXACT_LIMIT papers) as approximate as `like`, because a
    brute-force search of every paper against every paper grows with n squared (hours at 1M)."""
    from ..index.ann import search_index

    return search_index(recommender.faiss_index, queries, k)


class BatchRanker:
    """The per-paper part of `related_work`: exact scores on candidates, and the bound that vouches
    for them (`rank` returns None for a paper it cannot vouch for, which is then scored in full)."""

    def __init__(self, recommender: Recommender, k: int, why: bool):
        self.recommender = recommender
        self.k = k
        self.why = why
        n = len(recommender)
        self.dense_fetch = min(n, max(CANDIDATES, 16 * (k + 1)))
        self.exhaustive = self.dense_fetch >= n  # a small index: score every paper
        self.lexical = recommender.lexical
        self.tiebreak = recommender.tiebreak
        lexical = self.lexical
        self.df = np.diff(lexical.csc_indptr)
        self.column_max = lexical.maxima()

    def rank(self, row: int, query: np.ndarray, dense_scores, dense_ids):
        """(rows, scores) of `row`'s top k, or None when the bound cannot vouch for them."""
        if self.exhaustive:
            return self.rank_all(row, query)
        lexical_query = self.lexical.row(row)
        valid = dense_ids >= 0
        dense_ids, dense_scores = dense_ids[valid], dense_scores[valid]
        if len(dense_ids) < self.dense_fetch:
            return None
        keep = dense_ids != row
        candidates, approximate = dense_ids[keep], dense_scores[keep].astype(np.float64) + SLACK
        # A first top k from the nearest few gives a score the final k-th paper must reach.
        first = 2 * self.k
        scores = fuse(self.recommender.cosines(candidates[:first], query),
                      self.lexical.scores_at(lexical_query, candidates[:first]), "hybrid")
        if len(scores) < self.k:
            return None
        kth = float(np.sort(scores)[-self.k]) - SLACK
        # No paper outside the candidates has a higher cosine than the last one found.
        last = float(approximate[-1])
        tau = (kth - DENSE_WEIGHT * last) / (1.0 - DENSE_WEIGHT)  # TF-IDF cosine an outsider needs
        if tau <= 0:
            return None
        bound = self._lexical_bound(lexical_query, min(tau, 1.0))
        # Candidates, then outsiders, whose bound on the hybrid score reaches the k-th score:
        # only those are scored exactly.
        rest = candidates[first:]
        rest = rest[fuse(approximate[first:], bound[rest], "hybrid") >= kth - SLACK]
        outside = bound >= tau - SLACK
        outside[dense_ids] = False
        outside[row] = False
        more = np.concatenate([rest, np.flatnonzero(outside)])
        rows = np.concatenate([candidates[:first], more])
        more_scores = fuse(self.recommender.cosines(more, query), self.lexical.scores_at(lexical_query, more), "hybrid")
        scores = np.concatenate([scores, more_scores])
        order = order_by_score(rows, scores, self.tiebreak)[: self.k]
        return rows[order], scores[order]

    def rank_all(self, row: int, query: np.ndarray):
        """(rows, scores) of `row`'s top k, every other paper scored as `like` scores its candidates."""
        rows = np.flatnonzero(np.arange(len(self.recommender)) != row)
        lexical = self.lexical.scores(self.lexical.row(row))[rows]
        scores = fuse(self.recommender.cosines(rows, query), lexical, "hybrid")
        order = order_by_score(rows, scores, self.tiebreak)[: self.k]
        return rows[order], scores[order]

    def _lexical_bound(self, lexical_query: SparseVector, tau: float) -> np.ndarray:
        """An upper bound on every paper's TF-IDF cosine with the query (float64, one per paper).

        The query's most common terms, whose bounds sum to less than tau / 2, are
        not scanned: they add at most that sum to any paper."""
        lexical = self.lexical
        terms, weights = lexical_query.indices, lexical_query.values.astype(np.float64)
        by_frequency = np.argsort(-self.df[terms], kind="stable")
        bounds = np.cumsum(weights[by_frequency] * self.column_max[terms[by_frequency]])
        skipped = int(np.searchsorted(bounds, 0.5 * tau, side="left"))
        rest = float(bounds[skipped - 1]) if skipped else 0.0
        kept = by_frequency[skipped:]
        starts = lexical.csc_indptr[terms[kept]]
        lengths = lexical.csc_indptr[terms[kept] + 1] - starts
        positions = csr_ranges(starts, lengths)
        partial = np.bincount(
            lexical.csc_indices[positions],
            weights=lexical.csc_data[positions] * np.repeat(weights[kept], lengths),
            minlength=lexical.size,
        )
        partial += rest + SLACK
        return partial

    def recommendations(self, row: int, rows, scores, papers: dict[int, Paper]) -> tuple[Recommendation, ...]:
        lexical_query = combine([self.lexical.row(row)], [1.0]) if self.why else None
        items = []
        for rank, (other, score) in enumerate(zip(rows.tolist(), scores), start=1):
            terms = tuple(self.lexical.shared_terms(lexical_query, other)) if self.why else ()
            items.append(Recommendation(rank, float(score), papers[other], terms))
        return tuple(items)
