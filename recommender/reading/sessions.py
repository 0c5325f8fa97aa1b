"""A reading-group plan: the chosen papers split into sessions of similar papers.

Spherical k-means (FAISS, seeded) on the paper vectors gives the groups; a
capacity keeps sizes reasonable; TF-IDF terms over-represented in a group
label it; sessions are chained so that neighbouring sessions are related.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..arrays import csr_ranges, unit_rows
from ..corpus.papers import Paper
from ..errors import InputError, OptionError
from ..index.lexical import LexicalIndex
from ..query.recommender import Recommender

KMEANS_ITERATIONS = 25
KMEANS_RESTARTS = 5
CAPACITY_ITERATIONS = 20
LABEL_TERMS = 3
BACKGROUND = 3
# Words that say nothing about a topic; a label term made only of these is skipped.
FILLER = frozenset("""
    model models method methods approach approaches based using use used new novel propose proposed paper
    work study framework frameworks task tasks results result performance problem problems data learning
    existing different various key show shows achieve achieves improve improves improved effective efficient
    demonstrate extensive experiments state art large significantly introduce present address challenge
    challenges limitation limitations recent recently highly furthermore specifically additionally
    multi non pre free aware like high low base fully type types original step steps training trained train
""".split())


# Not words of a topic: LaTeX commands left in abstracts ("\\textbf{...}") and pieces of code links.
NOT_WORDS = frozenset("""
    textbf textit texttt textsc emph mathbf mathcal mathrm mathbb url href cite citep citet
    http https www com org io github gitlab huggingface available code open source
""".split())


@dataclass(frozen=True)
class SessionPaper:
    paper: Paper
    similarity: float  # cosine to the session's centre
    session: int | None = None  # for background reading: the session it is in, if any


@dataclass(frozen=True)
class Session:
    number: int
    label: tuple[str, ...]
    papers: tuple[SessionPaper, ...]
    background: tuple[SessionPaper, ...]

    @property
    def title(self) -> str:
        return ", ".join(self.label) or f"session {self.number}"


@dataclass(frozen=True)
class SessionPlan:
    sessions: tuple[Session, ...]
    method: str
    rows: tuple[int, ...]  # index rows of the chosen papers
    assignment: tuple[int, ...]  # session number of each chosen paper, in `rows` order

    def to_dict(self) -> dict:
        from ..corpus.summary import paper_brief

        def entry(item: SessionPaper, background: bool = False) -> dict:
            data = {**paper_brief(item.paper), "similarity": round(item.similarity, 4)}
            if background:
                data["session"] = item.session
            return data

        return {
            "papers": len(self.rows),
            "method": self.method,
            "sessions": [
                {
                    "session": session.number,
                    "label": list(session.label),
                    "size": len(session.papers),
                    "papers": [entry(item) for item in session.papers],
                    "background": [entry(item, True) for item in session.background],
                }
                for session in self.sessions
            ],
        }


# ---------------------------------------------------------------- the maths, over arrays


def spherical_kmeans(vectors: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """n unit centroids of unit vectors (FAISS k-means, seeded, single-threaded so reruns agree)."""
    import faiss

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if n >= len(vectors):
        return vectors[:n].copy()
    kmeans = faiss.Kmeans(
        vectors.shape[1], n, niter=KMEANS_ITERATIONS, nredo=KMEANS_RESTARTS, seed=seed, spherical=True,
        verbose=False, min_points_per_centroid=1, max_points_per_centroid=1 << 30,
    )
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        kmeans.train(vectors)
    finally:
        faiss.omp_set_num_threads(threads)
    return unit_rows(kmeans.centroids.copy())


def assign_with_capacity(similarity: np.ndarray, capacity: int) -> np.ndarray:
    """Each row to a column, most similar pairs first, no column taking more than `capacity` rows:
    a row whose nearest column is full goes to its next-nearest with room."""
    rows, columns = similarity.shape
    if capacity * columns < rows:
        raise InputError(f"{columns} sessions of at most {capacity} papers cannot hold {rows} papers")
    order = np.lexsort((np.tile(np.arange(columns), rows), np.repeat(np.arange(rows), columns), -similarity.ravel()))
    assignment = np.full(rows, -1, dtype=np.int64)
    room = np.full(columns, capacity, dtype=np.int64)
    left = rows
    for pair in order:
        row, column = divmod(int(pair), columns)
        if assignment[row] < 0 and room[column] > 0:
            assignment[row] = column
            room[column] -= 1
            left -= 1
            if left == 0:
                break
    return assignment


def chain_order(centroids: np.ndarray, sizes: np.ndarray) -> list[int]:
    """Clusters in an order where each is followed by the nearest one not yet visited,
    starting from the most central (closest to the size-weighted mean direction)."""
    mean = unit_rows((sizes[:, None] * centroids).sum(axis=0, keepdims=True))[0]
    similarity = centroids @ centroids.T
    current = int(np.argmax(centroids @ mean))
    order = [current]
    left = set(range(len(centroids))) - {current}
    while left:
        current = max(sorted(left), key=lambda other: similarity[current, other])
        order.append(current)
        left.remove(current)
    return order


def cluster_terms(lexical: LexicalIndex, rows: Sequence[int], groups: Sequence[int], count: int = LABEL_TERMS,
                  ) -> dict[int, tuple[str, ...]]:
    """For each group, the terms whose mean TF-IDF weight in the group most exceeds their mean
    over all the rows, shared by at least two of its papers, with no word repeated across terms."""
    rows = np.asarray(rows, dtype=np.int64)
    groups = np.asarray(groups)
    size = len(lexical.idf)
    overall = _mean_rows(lexical, rows, size)
    vocabulary = None
    labels: dict[int, tuple[str, ...]] = {}
    for group in sorted(set(groups.tolist())):
        members = rows[groups == group]
        coverage = _document_frequency(lexical, members, size) / len(members)
        # Over-representation, weighted towards terms most of the session's papers use.
        lift = (_mean_rows(lexical, members, size) - overall) * np.sqrt(coverage)
        if len(members) >= 3:
            lift[coverage * len(members) < 2] = 0.0
        top = np.flatnonzero(lift > 0)
        top = top[np.lexsort((top, -lift[top]))][: 20 * count]
        if vocabulary is None:
            vocabulary = lexical.vocabulary
        labels[group] = _distinct_terms([vocabulary[column] for column in top], count)
    return labels


def _positions(lexical: LexicalIndex, rows: np.ndarray) -> np.ndarray:
    """Where the given rows' entries sit in the CSR arrays."""
    starts = lexical.csr_indptr[rows]
    lengths = lexical.csr_indptr[rows + 1] - starts
    return csr_ranges(starts, lengths)


def _mean_rows(lexical: LexicalIndex, rows: np.ndarray, size: int) -> np.ndarray:
    positions = _positions(lexical, rows)
    total = np.bincount(lexical.csr_indices[positions], weights=lexical.csr_data[positions], minlength=size)
    return total / max(len(rows), 1)


def _document_frequency(lexical: LexicalIndex, rows: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(lexical.csr_indices[_positions(lexical, rows)], minlength=size)


def _stem(word: str) -> str:
    # Enough to see "model" and "models", "network" and "networks" as one word.
    for suffix in ("ies", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _distinct_terms(terms: Sequence[str], count: int) -> tuple[str, ...]:
    chosen: list[str] = []
    used: set[str] = set()
    for term in terms:
        words = term.split()
        if any(word in NOT_WORDS for word in words) or all(word in FILLER or len(word) < 3 for word in words):
            continue
        stems = {_stem(word) for word in words if word not in FILLER}
        if stems & used:
            continue
        chosen.append(term)
        used |= stems
        if len(chosen) == count:
            break
    return tuple(chosen)


# ---------------------------------------------------------------- the plan


CAPACITY = 1.25
"""Default cap on a session, as a multiple of the average size: at 1.5 the seed papers
split 15/15/6/2 into four sessions, at 1.25 into 12/8/12/6."""


# FAISS's k-means takes a C int as its seed (and UMAP a non-negative one).
MAX_SEED = 2**31 - 1


def default_capacity(papers: int, sessions: int) -> int:
    """At most CAPACITY times the average session size, rounded up."""
    return math.ceil(CAPACITY * papers / sessions)


def group_papers(recommender: Recommender, rows: Sequence[int], n: int, max_per_session: int | None = None,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(session of each row, unit centre of each session): k-means, capacity, then centres of the members.
    Sessions are numbered 0.. in chain order; a session left empty is dropped."""
    rows = list(rows)
    if not 0 <= seed <= MAX_SEED:
        raise OptionError(f"--seed must be between 0 and {MAX_SEED} (FAISS takes a 32-bit seed), got {seed}")
    if n < 1:
        raise OptionError(f"--n must be at least 1, got {n}")
    if len(rows) < n:
        raise OptionError(f"cannot split {len(rows)} papers into {n} sessions: use --n {len(rows)} or fewer")
    capacity = default_capacity(len(rows), n) if max_per_session is None else max_per_session
    if capacity < 1:
        raise OptionError(f"--max-per-session must be at least 1, got {capacity}")
    if capacity * n < len(rows):
        raise OptionError(
            f"{n} sessions of at most {capacity} papers cannot hold {len(rows)} papers: raise --max-per-session or --n"
        )
    vectors = recommender.vectors_at(rows)
    centres = spherical_kmeans(vectors, n, seed)
    assignment = assign_with_capacity(vectors @ centres.T, capacity)
    # A few Lloyd steps under the capacity: centres move to the papers they actually hold,
    # so a session filled with overflow becomes a coherent group of its own.
    for _ in range(CAPACITY_ITERATIONS):
        used = sorted(set(assignment.tolist()))
        centres = unit_rows(np.stack([vectors[assignment == group].sum(axis=0) for group in used]))
        again = assign_with_capacity(vectors @ centres.T, capacity)
        relabelled = np.array(used)[again]
        if np.array_equal(relabelled, assignment):
            break
        assignment = relabelled
    used = sorted(set(assignment.tolist()))
    centres = unit_rows(np.stack([vectors[assignment == group].sum(axis=0) for group in used]))
    sizes = np.array([(assignment == group).sum() for group in used], dtype=np.float32)
    order = chain_order(centres, sizes)
    renumber = {used[old]: new for new, old in enumerate(order)}
    return np.array([renumber[group] for group in assignment.tolist()]), centres[order]


def plan_sessions(
    recommender: Recommender,
    rows: Sequence[int],
    n: int = 6,
    max_per_session: int | None = None,
    seed: int = 0,
    background: int = BACKGROUND,
) -> SessionPlan:
    """Split the papers at `rows` into `n` sessions of similar papers, labelled, ordered, with background reading."""
    from ..index.ann import search_index

    rows = list(dict.fromkeys(int(row) for row in rows))
    groups, centres = group_papers(recommender, rows, n, max_per_session, seed)
    labels = cluster_terms(recommender.lexical, rows, groups)
    vectors = recommender.vectors_at(rows)
    fit = np.einsum("ij,ij->i", vectors, centres[groups])
    session_of = dict(zip(rows, (groups + 1).tolist()))
    tiebreak = recommender.tiebreak
    fetch = min(len(recommender), max(len(rows) // len(centres) * 2, 16) + background)
    _, neighbours = search_index(recommender.faiss_index, centres, fetch)
    members_by_session, background_rows = [], []
    for number in range(len(centres)):
        positions = np.flatnonzero(groups == number)
        positions = positions[np.lexsort((tiebreak[np.asarray(rows)[positions]], -np.round(fit[positions], 6)))]
        members_by_session.append(positions)
        members = {rows[p] for p in positions}
        outside = [int(row) for row in neighbours[number] if row >= 0 and int(row) not in members]
        if len(outside) < background:  # a big session: look at every paper
            similarity = np.asarray(recommender.vectors, dtype=np.float32) @ centres[number]
            everyone = np.lexsort((tiebreak, -np.round(similarity, 6)))
            outside = [int(row) for row in everyone if int(row) not in members]
        background_rows.append(outside[:background])
    wanted = sorted(set(rows) | {row for chosen in background_rows for row in chosen})
    papers = dict(zip(wanted, recommender.papers_at(wanted)))
    sessions = []
    for number, (positions, extra) in enumerate(zip(members_by_session, background_rows)):
        centre = centres[number]
        extra_similarity = recommender.cosines(np.asarray(extra, dtype=np.int64), centre) if extra else []
        sessions.append(Session(
            number + 1,
            labels.get(number, ()),
            tuple(SessionPaper(papers[rows[p]], float(fit[p]), number + 1) for p in positions),
            tuple(SessionPaper(papers[row], float(s), session_of.get(row)) for row, s in zip(extra, extra_similarity)),
        ))
    capacity = default_capacity(len(rows), n) if max_per_session is None else max_per_session
    return SessionPlan(tuple(sessions), _method(len(rows), len(sessions), capacity, seed, background),
                       tuple(rows), tuple((groups + 1).tolist()))


def _method(papers: int, sessions: int, capacity: int, seed: int, background: int) -> str:
    return (
        f"How the sessions were formed: the {papers} papers were grouped by spherical k-means (FAISS, seed {seed}) "
        f"on their sentence embeddings into {sessions} sessions of similar papers, with at most {capacity} papers "
        "a session (a paper beyond that joins its next-closest session with room). Each session is named by the "
        "terms most over-represented in its papers' TF-IDF vectors compared with all the papers. Sessions follow "
        "one another so that each is the one most like its predecessor, starting from the most central; within a "
        "session, papers go from the most typical (closest to the session's centre) to the least. "
        f"Background reading: the {background} papers outside the session closest to its centre."
    )


