"""Ranking maths over arrays: query vectors, score fusion, exclusion, MMR. No model, no files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..embed.models import model_facts
from ..errors import OptionError

MODES = ("dense", "lexical", "hybrid")
# The hybrid score: the window cosine and the TF-IDF cosine, each z-normalised over the query's
# candidate
# pool (POOL papers from each of the dense and lexical sides), mixed with DENSE_WEIGHT (the rest to
# TF-IDF),
# then put back on the window cosine's scale (`fuse`), so scores stay in -1..1 and --min-score keeps
# a
# meaning. DENSE_WEIGHT and POOL chosen by repeated 2-fold cross-validation over the CSFCube dev
# query
# papers (scripts/tune_relevance.py; docs/ranking.md).
DENSE_WEIGHT = 0.7
POOL = 200
# Papers whose text is their title alone (Paper.text_from "title only") score differently from
# papers with an abstract: in hybrid mode each of their two cosines is moved by this fraction of the
# gap between the two kinds' means over the query's pool (`title_only_shift`), measured with at
# least TITLE_ONLY_MIN_GROUP papers of each kind. Chosen by cross-validation on CSFCube dev with
# part of the corpus made title-only (scripts/title_only_cost.py; docs/ranking.md).
TITLE_ONLY_STRENGTH = 1.0
TITLE_ONLY_MIN_GROUP = 5


def dense_weight_for(model: str, precision: str = "fp32") -> float:
    """The dense cosine's weight in the hybrid score of an index built with `model` at
    `precision`: each model's own where its facts have one (chosen by the same cross-validation
    at the shared POOL, embed.models), else DENSE_WEIGHT."""
    weight = model_facts(model).dense_weight(precision)
    return DENSE_WEIGHT if weight is None else weight


# Weight of the negative seeds against the positive ones (Rocchio's gamma/beta).
NEGATIVE_WEIGHT = 0.5


def seed_weights(positives: int, negatives: int) -> list[float]:
    """Rocchio weights: mean of the positives minus a fraction of the mean of the negatives."""
    return (
        [1.0 / positives] * positives + [-NEGATIVE_WEIGHT / negatives] * negatives
        if negatives
        else [1.0 / positives] * positives
    )


def combine_dense(vectors: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Weighted sum of seed vectors, renormalised: one query vector for several papers."""
    query = np.asarray(weights, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32)
    norm = np.linalg.norm(query)
    return (query / norm if norm > 0 else query).astype(np.float32)


def fuse(
    dense: np.ndarray,
    lexical: np.ndarray,
    mode: str,
    pool: np.ndarray,
    dense_weight: float = DENSE_WEIGHT,
    title_only: np.ndarray | None = None,
    strength: float | None = None,
) -> np.ndarray:
    """The score a mode ranks by: a cosine, or in hybrid mode the z-fusion of the two, in -1..1.

    Hybrid: each cosine is z-normalised by its mean and spread over `pool` (positions of the
    query's candidate pool), and the mix (weights `dense_weight` and the rest) is put on the
    window cosine's scale over the pool: a paper whose mix stands s standard deviations above
    the pool's mean scores the pool's mean window cosine + s of their standard deviations
    (clipped to -1..1). So the order is the z-fusion's, and a paper's score depends on its own
    cosines and the pool only, never on the other papers ranked with it.

    `title_only` (a mask over the scores): papers whose text is their title alone, each cosine's
    standing corrected by `title_only_shift` with `strength` (None: TITLE_ONLY_STRENGTH)."""
    if mode == "dense":
        return dense
    if mode == "lexical":
        return lexical
    dense = np.asarray(dense, dtype=np.float64)
    dense_z, lexical_z = _standardised(dense, pool), _standardised(lexical, pool)
    if title_only is not None:
        strength = TITLE_ONLY_STRENGTH if strength is None else strength
        dense_z = dense_z + title_only_shift(dense_z, title_only, pool, strength)
        lexical_z = lexical_z + title_only_shift(lexical_z, title_only, pool, strength)
    mixed = dense_weight * dense_z + (1.0 - dense_weight) * lexical_z
    standing = _standardised(mixed, pool)
    sample = dense[pool] if len(pool) else dense
    return np.clip(float(sample.mean()) + standing * float(sample.std()), -1.0, 1.0).astype(
        np.float32
    )


def title_only_shift(
    scores: np.ndarray, title_only: np.ndarray, pool: np.ndarray, strength: float
) -> np.ndarray:
    """What to add to each of `scores` so that papers with a title only stand where papers with a
    text would: `strength` times the gap between the mean score of the pool's papers with a text
    and that of its title-only papers, added to the title-only ones (0 elsewhere). Nothing is moved
    when either kind has fewer than TITLE_ONLY_MIN_GROUP papers in the pool (no gap to measure).
    `pool`: positions of the query's candidate pool in `scores` and `title_only`."""
    scores = np.asarray(scores, dtype=np.float64)
    title_only = np.asarray(title_only, dtype=bool)
    shift = np.zeros(len(scores), dtype=np.float64)
    if strength == 0.0 or not title_only.any():
        return shift
    pool = np.asarray(pool, dtype=np.int64) if len(pool) else np.arange(len(scores))
    short = title_only[pool]
    if short.sum() < TITLE_ONLY_MIN_GROUP or (~short).sum() < TITLE_ONLY_MIN_GROUP:
        return shift
    gap = float(scores[pool][~short].mean()) - float(scores[pool][short].mean())
    shift[title_only] = strength * gap
    return shift


def _standardised(scores: np.ndarray, pool: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    sample = scores[pool] if len(pool) else scores
    spread = float(sample.std())
    return (scores - float(sample.mean())) / (spread if spread > 1e-9 else 1.0)


def order_by_score(rows: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Positions of `rows` sorted by descending score, ties by `tiebreak[row]` (ID order)."""
    # Scores are rounded so that float noise between equal texts does not decide order.
    return np.lexsort((tiebreak[rows], -np.round(scores.astype(np.float64), 6)))


def mmr(
    rows: np.ndarray, relevance: np.ndarray, vectors: np.ndarray, k: int, lambda_: float
) -> list[int]:
    """Maximal marginal relevance: positions of `rows` picked one by one, trading relevance
    (weight `lambda_`) against similarity to what is already picked (Carbonell & Goldstein, 1998).
    `rows` must be sorted by relevance (best first) so ties go to the better-ranked paper."""
    if len(rows) == 0 or k <= 0:
        return []
    candidate_vectors = np.asarray(vectors[rows], dtype=np.float32)
    chosen: list[int] = []
    max_similarity = np.full(len(rows), -np.inf, dtype=np.float64)
    available = np.ones(len(rows), dtype=bool)
    for _ in range(min(k, len(rows))):
        redundancy = np.where(np.isfinite(max_similarity), max_similarity, 0.0)
        value = lambda_ * relevance - (1.0 - lambda_) * redundancy
        value[~available] = -np.inf
        pick = int(np.argmax(value))
        chosen.append(pick)
        available[pick] = False
        similarity = candidate_vectors @ candidate_vectors[pick]
        max_similarity = np.maximum(max_similarity, similarity)
    return chosen


def select(
    rows: np.ndarray,
    scores: np.ndarray,
    tiebreak: np.ndarray,
    vectors: np.ndarray,
    k: int,
    min_score: float | None = None,
    diverse: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The top `k` candidates: sorted by score (ties by ID), those under `min_score`
    dropped, and picked by MMR with weight `diverse` when given."""
    order = order_by_score(rows, scores, tiebreak)
    rows, scores = rows[order], scores[order]
    if min_score is not None:
        keep = scores >= min_score
        rows, scores = rows[keep], scores[keep]
    if diverse is not None:
        picks = mmr(rows, scores, vectors, k, diverse)
        rows, scores = rows[picks], scores[picks]
    return rows[:k], scores[:k]


def check_options(k: int, min_score: float | None, diverse: float | None, mode: str) -> None:
    """Refuse ranking options out of range (InputError), before any work is done."""
    if mode not in MODES:
        raise OptionError(f"unknown mode '{mode}': use one of {', '.join(MODES)}", "mode")
    if k < 1:
        raise OptionError(f"k must be at least 1, got {k}", "k")
    if min_score is not None and not -1.0 <= min_score <= 1.0:
        raise OptionError(
            "min_score must be between -1 and 1 (scores are cosine similarities), "
            f"got {min_score:g}",
            "min_score",
        )
    if diverse is not None and not 0.0 <= diverse <= 1.0:
        raise OptionError(
            f"diverse must be between 0 and 1 (1 = relevance only), got {diverse:g}", "diverse"
        )


@dataclass(frozen=True)
class RankingRequest:
    """How a list of papers is ranked, one value from where a lookup is asked for (`papers like`
    and `search`, the HTTP API, `PaperIndex.like`'s keywords) to `pooling.rank_candidates`.

    `k` papers, best first; `mode` "hybrid" (the dense and TF-IDF cosines fused), "dense" or
    "lexical"; `min_score` drops papers scoring below it (-1..1); `diverse` (0..1, 1 = relevance
    only) re-ranks by maximal marginal relevance; `why` gives each paper the terms (and, for
    several seeds, the seeds) that tie it to the query."""

    k: int = 10
    mode: str = "hybrid"
    min_score: float | None = None
    diverse: float | None = None
    why: bool = False

    @classmethod
    def of(cls, ranking: RankingRequest | None = None, **options) -> RankingRequest:
        """`ranking`, else the request of these keywords (k, mode, min_score, diverse, why),
        checked (OptionError, before any work is done); an unknown keyword is a TypeError."""
        if ranking is not None and options:
            raise TypeError(f"give a ranking or its options, not both: {', '.join(options)}")
        made = ranking if ranking is not None else cls(**options)
        made.check()
        return made

    def check(self) -> None:
        check_options(self.k, self.min_score, self.diverse, self.mode)
