"""Ranking maths over arrays: query vectors, score fusion, exclusion, MMR. No model, no files."""

from __future__ import annotations

from typing import Sequence

import numpy as np

MODES = ("dense", "lexical", "hybrid")
# Weight of the dense cosine in the hybrid score (the rest is the TF-IDF cosine): a convex mix, so hybrid
# scores stay in [-1, 1] and --min-score keeps its meaning. Chosen on the CSFCube dev half as the middle of
# the plateau 0.45-0.65, where MAP and NDCG%20 vary by under one point (scripts/tune_relevance.py; README
# "Ranking and how it was measured"); weighted score fusion beat reciprocal rank fusion there.
DENSE_WEIGHT = 0.55
# Weight of the negative seeds against the positive ones (Rocchio's gamma/beta).
NEGATIVE_WEIGHT = 0.5


def seed_weights(positives: int, negatives: int) -> list[float]:
    """Rocchio weights: mean of the positives minus a fraction of the mean of the negatives."""
    return [1.0 / positives] * positives + [-NEGATIVE_WEIGHT / negatives] * negatives if negatives else [1.0 / positives] * positives


def combine_dense(vectors: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Weighted sum of seed vectors, renormalised: one query vector for several papers."""
    query = np.asarray(weights, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32)
    norm = np.linalg.norm(query)
    return (query / norm if norm > 0 else query).astype(np.float32)


def fuse(dense: np.ndarray, lexical: np.ndarray, mode: str, dense_weight: float = DENSE_WEIGHT) -> np.ndarray:
    """The score a mode ranks by: a cosine, or a convex mix of the two cosines."""
    if mode == "dense":
        return dense
    if mode == "lexical":
        return lexical
    return dense_weight * dense + (1.0 - dense_weight) * lexical


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
    rows: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray, vectors: np.ndarray, k: int,
    min_score: float | None = None, diverse: float | None = None,
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
