"""A reading-group plan: the chosen papers split into sessions of similar papers.

Spherical k-means (FAISS, seeded) on the paper vectors gives the groups; a
capacity keeps sizes reasonable; class-based TF-IDF over the groups labels
each by what sets it apart from the others; sessions are chained so that neighbouring sessions are
related.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..arrays import unit_rows
from ..corpus.papers import Paper
from ..errors import InputError, OptionError
from ..index.lexical import analyse
from ..query.paper_index import PaperIndex

KMEANS_ITERATIONS = 25
KMEANS_RESTARTS = 5
CAPACITY_ITERATIONS = 20
LABEL_TERMS = 3
BACKGROUND = 3
# Words that say nothing about a topic; a label term made only of these is skipped.
FILLER = frozenset(
    """
    model models method methods approach approaches based using use used new novel propose
    proposed paper work study framework frameworks task tasks results result performance problem
    problems data learning existing different various key show shows achieve achieves improve
    improves improved effective efficient demonstrate extensive experiments state art large
    significantly introduce present address challenge challenges limitation limitations recent
    recently highly furthermore specifically additionally multi non pre free aware like high low
    base fully type types original step steps training trained train end
""".split()
)


# Not words of a topic: LaTeX commands left in abstracts ("\\textbf{...}") and pieces of code links.
NOT_WORDS = frozenset(
    """
    textbf textit texttt textsc emph mathbf mathcal mathrm mathbb url href cite citep citet
    http https www com org io github gitlab huggingface available code open source
""".split()
)


@dataclass(frozen=True)
class SessionPaper:
    paper: Paper
    similarity: float  # cosine to the session's centre
    session: int | None = None  # for background reading: the session it is in, if any
    # A paper whose nearest session was full: that session's number (it joined the next nearest
    # session with room).
    overflowed_from: int | None = None


@dataclass(frozen=True)
class Session:
    number: int
    label: tuple[str, ...]
    papers: tuple[SessionPaper, ...]
    background: tuple[SessionPaper, ...]

    @property
    def title(self) -> str:
        return ", ".join(self.label) or f"session {self.number}"

    @property
    def overflow(self) -> tuple[SessionPaper, ...]:
        """The papers here because their nearest session was full."""
        return tuple(item for item in self.papers if item.overflowed_from is not None)


@dataclass(frozen=True)
class SessionPlan:
    sessions: tuple[Session, ...]
    method: str
    rows: tuple[int, ...]  # index rows of the chosen papers
    assignment: tuple[int, ...]  # session number of each chosen paper, in `rows` order
    capacity: int = 0  # the most papers a session holds

    def session(self, number: int) -> Session:
        return self.sessions[number - 1]

    def to_dict(self) -> dict:
        from ..corpus.summary import paper_brief

        def entry(item: SessionPaper, background: bool = False) -> dict:
            data = {**paper_brief(item.paper), "similarity": round(item.similarity, 4)}
            if background:
                data["session"] = item.session
            elif item.overflowed_from is not None:
                data["nearest_session"] = item.overflowed_from  # full: the paper joined this one
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
                    "overflow": [
                        {
                            "id": item.paper.id,
                            "title": item.paper.label,
                            "nearest_session": item.overflowed_from,
                        }
                        for item in session.overflow
                    ],
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
        vectors.shape[1],
        n,
        niter=KMEANS_ITERATIONS,
        nredo=KMEANS_RESTARTS,
        seed=seed,
        spherical=True,
        verbose=False,
        min_points_per_centroid=1,
        max_points_per_centroid=1 << 30,
    )
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        kmeans.train(vectors)
    finally:
        faiss.omp_set_num_threads(threads)
    assert kmeans.centroids is not None  # set by train
    return unit_rows(kmeans.centroids.copy())


def assign_with_capacity(similarity: np.ndarray, capacity: int) -> np.ndarray:
    """Each row to a column, most similar pairs first, no column taking more than `capacity` rows:
    a row whose nearest column is full goes to its next-nearest with room."""
    rows, columns = similarity.shape
    if capacity * columns < rows:
        raise InputError(
            f"{columns} sessions of at most {capacity} papers cannot hold {rows} papers"
        )
    order = np.lexsort(
        (
            np.tile(np.arange(columns), rows),
            np.repeat(np.arange(rows), columns),
            -similarity.ravel(),
        )
    )
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


def session_labels(
    texts: Sequence[str],
    groups: Sequence[int] | np.ndarray,
    stop_words: frozenset[str],
    count: int = LABEL_TERMS,
) -> dict[int, tuple[str, ...]]:
    """For each group, up to `count` terms that set it apart from the other groups: class-based
    TF-IDF (BERTopic's c-TF-IDF with its BM25 idf and frequent words reduced: the square root of a
    term's share of the group's words, times log(1 + (A - f + 0.5) / (f + 0.5)), A the mean words a
    group and f the term's uses over all groups) over single words and two-word phrases, tokenised
    as the TF-IDF index does. Terms used by fewer than two of a group's papers (groups of three or
    more), terms every group uses (weight 0 or less), filler and markup are skipped; a phrase
    replaces its word when most of the word's uses in the group are in it. No word (`word_key`) is
    in two labels: the terms are taken best weight first over all the groups, so a word goes to the
    group it characterises most."""
    groups = np.asarray(groups, dtype=np.int64)
    if len(texts) != len(groups):
        raise ValueError(f"{len(texts)} texts for {len(groups)} group numbers")
    numbers = sorted(set(groups.tolist()))
    columns, pairs = _term_uses(texts, stop_words)
    if not pairs:
        return {number: () for number in numbers}
    ranked, found = _weighted_terms(columns, pairs, np.searchsorted(numbers, groups), len(numbers))
    chosen = _choose_labels(ranked, found, len(numbers), count)
    return {number: tuple(chosen[g]) for g, number in enumerate(numbers)}


def _term_uses(
    texts: Sequence[str], stop_words: frozenset[str]
) -> tuple[dict[str, int], list[tuple[int, int, int]]]:
    """The terms (single words and two-word phrases) by column, and (paper, term column, uses in
    the paper) for each term a paper uses."""
    columns: dict[str, int] = {}
    pairs: list[tuple[int, int, int]] = []
    for paper, text in enumerate(texts):
        words = analyse(text, stop_words)
        term_uses = Counter(words)
        term_uses.update(f"{a} {b}" for a, b in zip(words, words[1:]) if a != b)
        pairs.extend(
            (paper, columns.setdefault(term, len(columns)), n) for term, n in term_uses.items()
        )
    return columns, pairs


def _weighted_terms(
    columns: dict[str, int],
    pairs: list[tuple[int, int, int]],
    paper_group: np.ndarray,
    group_count: int,
) -> tuple[list[tuple[int, str, float]], dict[tuple[int, str], tuple[float, float]]]:
    """The (group, term, weight) cells a label may take, best weight first (then group, then term
    column), and each such cell's (uses, weight) by (group, term). `paper_group`: each paper's
    group, numbered 0 .. `group_count` - 1."""
    vocabulary = np.array(list(columns), dtype=object)
    pair_paper, pair_column, pair_uses = (
        np.array(values, dtype=np.int64) for values in zip(*pairs)
    )
    key = paper_group[pair_paper] * len(columns) + pair_column  # (group, term) pairs, as one number
    cells, where = np.unique(key, return_inverse=True)
    frequency = np.bincount(where, weights=pair_uses)  # uses of each term in each group
    papers_using = np.bincount(
        where
    )  # papers of the group that use it (a paper counts each term once)
    cell_group, cell_term = np.divmod(cells, len(columns))
    group_words = np.bincount(cell_group, weights=frequency, minlength=group_count)
    overall = np.bincount(cell_term, weights=frequency, minlength=len(columns))
    # BERTopic's ClassTfidfTransformer(bm25_weighting=True, reduce_frequent_words=True): with a
    # handful of
    # sessions its plain idf, log(1 + A / f), barely lowers a word every session uses ("network").
    idf = np.log1p((group_words.mean() - overall + 0.5) / (overall + 0.5))
    weight = np.sqrt(frequency / group_words[cell_group]) * idf[cell_term]
    sizes = np.bincount(paper_group, minlength=group_count)
    wanted = np.flatnonzero((papers_using >= 2) | (sizes[cell_group] < 3))
    found = {
        (int(g), vocabulary[t]): (f, w)
        for g, t, f, w in zip(
            cell_group[wanted], cell_term[wanted], frequency[wanted], weight[wanted]
        )
    }  # uses, weight
    order = wanted[np.lexsort((cell_term[wanted], cell_group[wanted], -weight[wanted]))]
    ranked = [
        (int(cell_group[cell]), vocabulary[cell_term[cell]], weight[cell])
        for cell in order.tolist()
    ]
    return ranked, found


def _choose_labels(
    ranked: list[tuple[int, str, float]],
    found: dict[tuple[int, str], tuple[float, float]],
    group_count: int,
    count: int,
) -> dict[int, list[str]]:
    """Up to `count` label terms for each group, taken in `ranked` order: no word in two labels, a
    phrase for its word when most of the word's uses are in it."""
    phrases: dict[tuple[int, str], list[str]] = {}  # (group, word) -> the phrases holding it
    for g, term in found:
        if (
            " " in term and _readable(term) and term.split()[0] not in FILLER
        ):  # "models llms" reads badly
            for word in term.split():
                phrases.setdefault((g, word), []).append(term)
    chosen: dict[int, list[str]] = {g: [] for g in range(group_count)}
    used: set[str] = set()
    for g, term, weight in ranked:
        if (
            len(chosen[g]) == count
            or weight <= 0
            or " " in term
            or not _readable(term)
            or term in FILLER
        ):
            continue
        uses = lambda t, g=g: found.get((g, t), (0.0, -np.inf))  # noqa: E731 (this group's)
        joined = _joined(term, chosen[g], uses)
        if (
            joined is not None
        ):  # "machine" beside "translation" already chosen: "machine translation"
            chosen[g][chosen[g].index(joined[1])] = joined[0]
            used.add(word_key(term))
            continue
        term = _phrase_for(term, phrases.get((g, term), ()), uses, used) or term
        keys = {word_key(word) for word in term.split() if word not in FILLER}
        if keys & used:
            continue
        chosen[g].append(term)
        used |= keys
    return chosen


PHRASE_SHARE = 0.5
"""A two-word phrase labels a group instead of its word when at least this share of the word's
uses in the group are in the phrase ("machine" -> "machine translation")."""


def _phrase_for(word: str, phrases: Sequence[str], uses_and_weight, used: set[str]) -> str | None:
    """The phrase to write instead of `word`: one holding at least PHRASE_SHARE of the word's uses
    in the group, no word of it in another label; of those, the one whose other word sets the group
    apart most ("video clips" before "neural video")."""
    uses = uses_and_weight(word)[0]
    best = None
    for phrase in sorted(phrases):
        others = [other for other in phrase.split() if other != word]
        if uses_and_weight(phrase)[0] < PHRASE_SHARE * uses or any(
            word_key(o) in used for o in others if o not in FILLER
        ):
            continue
        rank = (min(uses_and_weight(other)[1] for other in others), uses_and_weight(phrase)[1])
        if best is None or rank > best[0]:
            best = (rank, phrase)
    return best[1] if best else None


def _joined(word: str, label: Sequence[str], uses_and_weight) -> tuple[str, str] | None:
    """(phrase, word of `label`) when `word` and a single word already in the label make a phrase
    holding at least PHRASE_SHARE of `word`'s uses in the group."""
    for other in label:
        if " " in other or word in FILLER:
            continue
        for phrase in (f"{word} {other}", f"{other} {word}"):
            if (
                phrase.split()[0] not in FILLER
                and uses_and_weight(phrase)[0] >= PHRASE_SHARE * uses_and_weight(word)[0] > 0
            ):
                return phrase, other
    return None


def word_key(word: str) -> str:
    """What makes two label words one word: the same first six letters once a plural and an ending
    ("ing", "er", "ed", "al") are cut ("emotion", "emotions", "emotional"; "parsing", "parser";
    "morphology", "morphological")."""
    word = _stem(word)
    for ending in ("ing", "ers", "er", "ed", "al"):
        if word.endswith(ending) and len(word) - len(ending) >= 4:
            word = word[: -len(ending)]
            break
    return word[:6]


def _stem(word: str) -> str:
    # Enough to see "model" and "models", "image" and "images", "class" and "classes" as one word.
    if len(word) > 5 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith(("ses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _readable(term: str) -> bool:
    """Whether a term can stand in a label: no markup or link pieces, not filler alone, no
    two-letter word."""
    words = term.split()
    return not any(word in NOT_WORDS or len(word) < 3 for word in words) and not all(
        word in FILLER for word in words
    )


# ---------------------------------------------------------------- the plan


def label_sessions(
    recommender: PaperIndex, rows: Sequence[int], groups: Sequence[int] | np.ndarray
) -> dict[int, tuple[str, ...]]:
    """`session_labels` of the papers at `rows` (the plan's and the map's labels: one function, one
    wording)."""
    texts = [paper.text for paper in recommender.papers_at(list(rows))]
    return session_labels(texts, groups, recommender.lexical.stop_words)


CAPACITY = 1.25
"""Default cap on a session, as a multiple of the average size: at 1.5 the seed papers
split 15/15/6/2 into four sessions, at 1.25 into 12/8/12/6."""


# FAISS's k-means takes a C int as its seed (and UMAP a non-negative one).
MAX_SEED = 2**31 - 1


def default_capacity(papers: int, sessions: int) -> int:
    """At most CAPACITY times the average session size, rounded up."""
    return math.ceil(CAPACITY * papers / sessions)


def group_papers(
    recommender: PaperIndex,
    rows: Sequence[int],
    n: int,
    max_per_session: int | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """(session of each row, unit centre of each session): k-means, capacity, then centres of the
    members. Sessions are numbered 0.. in chain order; a session left empty is dropped."""
    rows = list(rows)
    if not 0 <= seed <= MAX_SEED:
        raise OptionError(
            f"seed must be between 0 and {MAX_SEED} (FAISS takes a 32-bit seed), got {seed}", "seed"
        )
    if n < 1:
        raise OptionError(f"n (the number of sessions) must be at least 1, got {n}", "n")
    if len(rows) < n:
        raise OptionError(
            f"cannot split {len(rows)} papers into {n} sessions: n must be {len(rows)} or fewer",
            "n",
        )
    capacity = default_capacity(len(rows), n) if max_per_session is None else max_per_session
    if capacity < 1:
        raise OptionError(f"max_per_session must be at least 1, got {capacity}", "max_per_session")
    if capacity * n < len(rows):
        raise OptionError(
            f"{n} sessions of at most {capacity} papers cannot hold {len(rows)} papers: raise "
            "max_per_session or n"
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
    # The sessions are these centres: assigned once more under them, every paper is in its nearest
    # session, or (that one full) in the nearest with room when its turn came. A session left
    # empty is nobody's nearest and is dropped.
    assignment = assign_with_capacity(vectors @ centres.T, capacity)
    used = sorted(set(assignment.tolist()))
    centres = centres[used]
    assignment = np.searchsorted(used, assignment)
    used = list(range(len(used)))
    sizes = np.array([(assignment == group).sum() for group in used], dtype=np.float32)
    order = chain_order(centres, sizes)
    renumber = {used[old]: new for new, old in enumerate(order)}
    return np.array([renumber[group] for group in assignment.tolist()]), centres[order]


def plan_sessions(
    recommender: PaperIndex,
    rows: Sequence[int],
    n: int = 6,
    max_per_session: int | None = None,
    seed: int = 0,
    background: int = BACKGROUND,
) -> SessionPlan:
    """Split the papers at `rows` into `n` sessions of similar papers, labelled, ordered, with
    background reading."""
    rows = list(dict.fromkeys(int(row) for row in rows))
    groups, centres = group_papers(recommender, rows, n, max_per_session, seed)
    labels = label_sessions(recommender, rows, groups)
    fit, nearest, overflowed = _session_fit(recommender.vectors_at(rows), groups, centres)
    members_by_session, background_rows = _session_rows(
        recommender, rows, groups, fit, centres, background
    )
    wanted = sorted(set(rows) | {row for chosen in background_rows for row in chosen})
    papers = dict(zip(wanted, recommender.papers_at(wanted)))
    session_of = dict(zip(rows, (groups + 1).tolist()))
    sessions = []
    for number, (positions, extra) in enumerate(zip(members_by_session, background_rows)):
        extra_similarity: np.ndarray | list[float] = (
            recommender.cosines(np.asarray(extra, dtype=np.int64), centres[number]) if extra else []
        )
        sessions.append(
            Session(
                number + 1,
                labels.get(number, ()),
                tuple(
                    SessionPaper(
                        papers[rows[p]],
                        float(fit[p]),
                        number + 1,
                        int(nearest[p]) + 1 if overflowed[p] else None,
                    )
                    for p in positions
                ),
                tuple(
                    SessionPaper(papers[row], float(s), session_of.get(row))
                    for row, s in zip(extra, extra_similarity)
                ),
            )
        )
    capacity = default_capacity(len(rows), n) if max_per_session is None else max_per_session
    return SessionPlan(
        tuple(sessions),
        _method(len(rows), len(sessions), capacity, seed, background),
        tuple(rows),
        tuple((groups + 1).tolist()),
        capacity,
    )


def _session_fit(
    vectors: np.ndarray, groups: np.ndarray, centres: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each paper (unit `vectors`, session numbers 0.. in `groups`, unit `centres`): its cosine
    to its session's centre, its nearest session, and whether it is not in that one (beyond
    rounding: that session was full)."""
    similarity = vectors @ centres.T
    fit = similarity[np.arange(len(vectors)), groups]
    nearest = np.argmax(similarity, axis=1)
    overflowed = (nearest != groups) & (similarity[np.arange(len(vectors)), nearest] > fit + 1e-6)
    return fit, nearest, overflowed


def _session_rows(
    recommender: PaperIndex,
    rows: list[int],
    groups: np.ndarray,
    fit: np.ndarray,
    centres: np.ndarray,
    background: int,
) -> tuple[list[np.ndarray], list[list[int]]]:
    """For each session, the positions in `rows` of its papers, most typical first, and the rows
    of its `background` papers: those outside it closest to its centre."""
    from ..index.ann import search_index

    tiebreak = recommender.tiebreak
    fetch = min(len(recommender), max(len(rows) // len(centres) * 2, 16) + background)
    _, neighbours = search_index(recommender.faiss_index, centres, fetch)
    members_by_session, background_rows = [], []
    for number in range(len(centres)):
        positions = np.flatnonzero(groups == number)
        positions = positions[
            np.lexsort((tiebreak[np.asarray(rows)[positions]], -np.round(fit[positions], 6)))
        ]
        members_by_session.append(positions)
        members = {rows[p] for p in positions}
        outside = [int(row) for row in neighbours[number] if row >= 0 and int(row) not in members]
        if len(outside) < background:  # a big session: look at every paper
            similarity = np.asarray(recommender.vectors, dtype=np.float32) @ centres[number]
            everyone = np.lexsort((tiebreak, -np.round(similarity, 6)))
            outside = [int(row) for row in everyone if int(row) not in members]
        background_rows.append(outside[:background])
    return members_by_session, background_rows


def _method(papers: int, sessions: int, capacity: int, seed: int, background: int) -> str:
    return (
        f"How the sessions were formed: the {papers} papers were grouped by spherical k-means"
        f" (FAISS, seed {seed}) on their sentence embeddings into {sessions} sessions of similar"
        f" papers, with at most {capacity} papers a session (a paper beyond that joins its"
        " next-closest session with room). Each session is named by the words and two-word phrases"
        " that most set its papers apart from the other sessions' (class-based TF-IDF), no word"
        " naming two sessions. Sessions follow one another so that each is the one most like its"
        " predecessor, starting from the most central; within a session, papers go from the most"
        " typical (closest to the session's centre) to the least. Background reading: the"
        f" {background} papers outside the session closest to its centre."
    )
