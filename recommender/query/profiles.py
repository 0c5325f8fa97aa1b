"""Several seeds as one profile: ways to turn each seed's scores into one score a candidate. Arrays
only.

A reading list or tag often spans several topics; the mean of its vectors (Rocchio,
`ranking.combine_dense`)
then points between them. These functions score candidates from each seed's own scores instead
(`PaperIndex.seed_scores`), or from the seeds' vectors; scripts/tune_profiles.py compares them on
profiles built from CSFCube (docs/reading-groups-notes.md) and `like` ships the one it chose:
clusters of the seeds, each scored as a centroid, the best kept (`seed_clusters`, `best_topic`).
"""

from __future__ import annotations

import numpy as np

# Several seeds are grouped into topics by average-linkage clustering of their embeddings, cut at
# this
# cosine distance; each topic is scored as one centroid (Rocchio) and a candidate keeps its best
# topic's
# score (`best_topic`). Chosen by repeated 2-fold cross-validation over CSFCube's dev query papers
# on
# one-topic and mixed-topic profiles (scripts/tune_profiles.py; docs/reading-groups-notes.md): level
# with
# the single centroid on one topic, +6.8 MAP on profiles of two or three topics.
CLUSTER_DISTANCE = 0.4
# `like` with several seeds: a candidate scores PROFILE_SEED_WEIGHT x the mean of its PROFILE_TOP_K
# best seeds' scores (`top_mean`; each seed's score the hybrid score a one-seed `like` gives) plus
# the rest x the seeds' centroid's score (Rocchio), `profile_scores`. Chosen by repeated 2-fold
# cross-validation over CSFCube's profile protocols and the reviewers' own-paper profiles together
# (scripts/tune_profiles.py; docs/profiles.md).
PROFILE_TOP_K = 2
PROFILE_SEED_WEIGHT = 0.75


def profile_scores(
    per_seed: np.ndarray,
    centroid: np.ndarray,
    k: int = PROFILE_TOP_K,
    seed_weight: float = PROFILE_SEED_WEIGHT,
) -> np.ndarray:
    """[seeds, candidates] per-seed scores and the centroid's [candidates] -> `like`'s profile
    score: a convex mix on the scores' own scale, so --min-score keeps its meaning."""
    best = top_mean(per_seed, k).astype(np.float64)
    mixed = seed_weight * best + (1.0 - seed_weight) * np.asarray(centroid, dtype=np.float64)
    return mixed.astype(np.float32)


def best_topic(per_topic: np.ndarray) -> np.ndarray:
    """[topics, candidates] scores -> each candidate's best (one topic: its scores as they are)."""
    per_topic = np.asarray(per_topic)
    if per_topic.ndim != 2 or per_topic.shape[0] == 0:
        raise ValueError(f"need [topics, candidates] scores, got shape {per_topic.shape}")
    return per_topic.max(axis=0).astype(np.float32)


def best_and_mean(per_seed: np.ndarray, max_weight: float) -> np.ndarray:
    """[seeds, candidates] scores -> one score a candidate: `max_weight` x the best seed's score
    plus the rest x the seeds' mean. On the scores' own scale (a convex mix), so --min-score keeps
    its meaning.
    """
    per_seed = np.asarray(per_seed, dtype=np.float64)
    if per_seed.ndim != 2 or per_seed.shape[0] == 0:
        raise ValueError(f"need [seeds, candidates] scores, got shape {per_seed.shape}")
    mixed = max_weight * per_seed.max(axis=0) + (1.0 - max_weight) * per_seed.mean(axis=0)
    return mixed.astype(np.float32)


def seed_clusters(vectors: np.ndarray, distance: float = CLUSTER_DISTANCE) -> list[list[int]]:
    """Groups of seeds (positions of `vectors`) by average-linkage clustering on cosine distance,
    cut at `distance` (scipy's `fcluster(linkage(pdist(v, "cosine"), "average"), distance,
    "distance")`): seeds on one topic end in one group. Each group in ascending order, groups in
    order of their first seed.

    numpy alone (a cold `like` imports no scipy): the closest pair of groups is merged, and its
    distance to every other group updated as the size-weighted mean (Lance-Williams), until the
    closest pair is farther apart than `distance`; average linkage never merges closer than an
    earlier merge, so this is the cut tree. O(n^3) over n seeds: SCIPY_FROM seeds and more go to
    scipy's O(n^2) linkage."""
    vectors = np.asarray(vectors, dtype=np.float64)
    count = len(vectors)
    if count < 2:
        return [list(range(count))]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms > 0, norms, 1.0)
    if count >= SCIPY_FROM:
        from scipy.cluster.hierarchy import fcluster, linkage
        from scipy.spatial.distance import pdist

        labels = fcluster(
            linkage(np.clip(pdist(vectors, "cosine"), 0.0, 2.0), "average"), distance, "distance"
        )
        groups: dict[int, list[int]] = {}
        for position, label in enumerate(labels.tolist()):
            groups.setdefault(label, []).append(position)
        return sorted(groups.values())
    apart = np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0)
    np.fill_diagonal(apart, np.inf)
    members = [[i] for i in range(count)]
    while True:
        i, j = sorted(divmod(int(np.argmin(apart)), count))
        if not apart[i, j] <= distance:
            break
        merged = (len(members[i]) * apart[i] + len(members[j]) * apart[j]) / (
            len(members[i]) + len(members[j])
        )
        apart[i, :] = apart[:, i] = merged
        apart[j, :] = apart[:, j] = np.inf
        apart[i, i] = np.inf
        members[i] = sorted(members[i] + members[j])
        members[j] = []
    return sorted(group for group in members if group)


SCIPY_FROM = 300


def svm_scores(features: np.ndarray, positive: np.ndarray, c: float = 0.01) -> np.ndarray:
    """A linear SVM of the `positive` rows (a boolean mask) against every other row of `features`,
    as arxiv-sanity-lite ranks a tag's papers: each row's signed distance to the margin (higher:
    more like the seeds). Balanced class weights, so a handful of seeds is not swamped by the
    rest."""
    from sklearn.svm import LinearSVC

    positive = np.asarray(positive, dtype=bool)
    if not positive.any() or positive.all():
        raise ValueError("an SVM needs seeds and other papers")
    model = LinearSVC(C=c, class_weight="balanced", tol=1e-6, max_iter=10000)
    model.fit(np.asarray(features, dtype=np.float64), positive.astype(np.int64))
    return model.decision_function(np.asarray(features, dtype=np.float64)).astype(np.float32)


def top_mean(per_seed: np.ndarray, k: int) -> np.ndarray:
    """[seeds, candidates] scores -> each candidate's mean of its `k` best seeds' scores (all of
    them when there are fewer seeds): between the best match (k=1) and the plain mean."""
    per_seed = np.asarray(per_seed, dtype=np.float64)
    if per_seed.ndim != 2 or per_seed.shape[0] == 0:
        raise ValueError(f"need [seeds, candidates] scores, got shape {per_seed.shape}")
    if k < 1:
        raise ValueError(f"need k >= 1, got {k}")
    k = min(k, per_seed.shape[0])
    best = -np.partition(-per_seed, k - 1, axis=0)[:k] if k < per_seed.shape[0] else per_seed
    return best.mean(axis=0).astype(np.float32)


def soft_max(per_seed: np.ndarray, temperature: float) -> np.ndarray:
    """[seeds, candidates] scores -> t x log(mean(exp(score / t))) over the seeds: the mean as t
    grows, the best match as t shrinks, on the scores' own scale."""
    per_seed = np.asarray(per_seed, dtype=np.float64)
    if per_seed.ndim != 2 or per_seed.shape[0] == 0:
        raise ValueError(f"need [seeds, candidates] scores, got shape {per_seed.shape}")
    if not temperature > 0:
        raise ValueError(f"need a temperature > 0, got {temperature}")
    top = per_seed.max(axis=0)
    pooled = top + temperature * np.log(np.exp((per_seed - top) / temperature).mean(axis=0))
    return pooled.astype(np.float32)


def pooled_seeds(seeds: int, k: int = PROFILE_TOP_K) -> int:
    """How many best seeds a candidate's score pools: `k`, but at most half the seeds (at least
    one), so a profile of a few papers on different topics is never averaged across them (two seeds:
    the best).
    """
    return max(1, min(k, seeds // 2))
