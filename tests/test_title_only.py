"""Papers with a title only in the ranking: the correction of their standing in the hybrid fusion
(`ranking.title_only_shift`, maths on plain arrays), and the index's mask of them read from its
papers records (`OpenedIndex.title_only`), which the pooling passes to the fusion."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.query import ranking
from recommender.query.ranking import fuse, title_only_shift


def test_the_shift_is_the_gap_between_the_kinds_means_over_the_pool():
    scores = np.array([1.0, 1.2, 0.8, 1.1, 0.9, 0.3, 0.5, 0.4, 0.35, 0.45, 5.0, -5.0])
    short = np.array([False] * 5 + [True] * 5 + [True, False])
    pool = np.arange(10)  # the last two are candidates outside the pool: they do not move the gap
    shift = title_only_shift(scores, short, pool, 1.0)
    assert np.allclose(shift[short], 1.0 - 0.4) and np.all(shift[~short] == 0.0)
    assert np.allclose(title_only_shift(scores, short, pool, 0.5)[short], 0.3)
    assert np.all(title_only_shift(scores, short, pool, 0.0) == 0.0)


@pytest.mark.parametrize(
    "short",
    [
        np.array([False] * 10),  # no title-only paper
        np.array([True] * 4 + [False] * 6),  # too few of them in the pool to measure a gap
        np.array([False] * 4 + [True] * 6),  # too few papers with a text
    ],
)
def test_no_shift_without_enough_of_each_kind(short):
    scores = np.linspace(0, 1, 10)
    assert ranking.TITLE_ONLY_MIN_GROUP == 5
    assert np.all(title_only_shift(scores, short, np.arange(10), 1.0) == 0.0)


def test_a_full_correction_undoes_a_kind_wide_drop_in_both_cosines():
    rng = np.random.default_rng(3)
    dense, lexical = rng.uniform(0.2, 0.8, 60), rng.uniform(0.0, 0.5, 60)
    short = np.zeros(60, dtype=bool)
    short[::2] = True
    # Both kinds with the same means over the pool, then the title-only papers' cosines dropped.
    for values in (dense, lexical):
        values[short] += values[~short].mean() - values[short].mean()
    pool = np.arange(60)
    dropped_dense, dropped_lexical = dense - 0.2 * short, lexical - 0.1 * short
    order = lambda scores: np.argsort(-scores, kind="stable").tolist()  # noqa: E731
    standing = lambda scores: np.mean(np.argsort(np.argsort(-scores))[short])  # noqa: E731
    # One cosine alone: the order before the drop, exactly.
    truth = fuse(dense, lexical, "hybrid", pool, 1.0)
    buried = fuse(dropped_dense, dropped_lexical, "hybrid", pool, 1.0)
    assert order(buried) != order(truth)
    assert order(fuse(dropped_dense, dropped_lexical, "hybrid", pool, 1.0, short, 1.0)) == order(
        truth
    )
    # Both: each cosine's spread changed by the drop, so the mix is not quite the same, but the
    # title-only papers stand where they stood.
    truth = fuse(dense, lexical, "hybrid", pool, 0.7)
    buried = fuse(dropped_dense, dropped_lexical, "hybrid", pool, 0.7)
    corrected = fuse(dropped_dense, dropped_lexical, "hybrid", pool, 0.7, short, 1.0)
    assert abs(standing(corrected) - standing(truth)) < 0.1 * abs(
        standing(buried) - standing(truth)
    )
    # Half the strength: half way, title-only papers ranked between the two.
    halfway = fuse(dropped_dense, dropped_lexical, "hybrid", pool, 0.7, short, 0.5)
    assert standing(corrected) < standing(halfway) < standing(buried)
    # No mask, or the strength 0: the fusion as it was.
    assert np.array_equal(
        fuse(dropped_dense, dropped_lexical, "hybrid", pool, 0.7, short, 0.0), buried
    )
    assert np.array_equal(fuse(dense, lexical, "dense", pool, 0.7, short, 1.0), dense)


ABSTRACTS = {
    "walks": (
        "Mixing of Random Walks",
        "We bound the mixing time of random walks on expander graphs.",
    ),
    "cover": (
        "Cover Times of Random Walks",
        "Cover times of random walks on graphs are bounded by spectra.",
    ),
    "sparse": (
        "Sparse Attention",
        "Attention is made sparse by routing each token to a few others.",
    ),
    "private": (
        "Private Training",
        "Private training with gradient clipping protects each example.",
    ),
    "graphs": (
        "Spectral Graph Theory",
        "Eigenvalues of graph Laplacians bound cuts and expansion.",
    ),
    "nets": (
        "Deep Networks",
        "Deep networks learn representations of images and text by gradient descent.",
    ),
}
TITLES = {"spectra": "Random Walks and Spectra of Graphs", "tokens": "Routing Tokens in Attention"}


def write_bib(path, title_only: bool) -> None:
    entries = [
        f"@article{{{key}, title = {{{title}}}, abstract = {{{abstract}}}}}"
        for key, (title, abstract) in ABSTRACTS.items()
    ]
    if title_only:  # a reference manager's entries whose file is gone: read by their title alone
        entries += [
            f"@article{{{key}, title = {{{title}}}, file = {{:papers/{key}.pdf:PDF}}}}"
            for key, title in TITLES.items()
        ]
    else:
        entries += [
            f"@article{{{key}, title = {{{title}}}, abstract = {{{title} in full.}}}}"
            for key, title in TITLES.items()
        ]
    path.write_text("\n".join(entries) + "\n")


@pytest.mark.parametrize("title_only", [True, False])
def test_the_ranking_reads_the_title_only_papers_from_the_index(
    workdir, fake_model, open_index, monkeypatch, title_only
):
    from recommender.index.build import build_index

    write_bib(workdir / "library.bib", title_only)
    build_index([workdir / "library.bib"], index="lib")
    index = open_index("lib")
    rows = {paper_id: row for row, paper_id in enumerate(index.ids)}
    if title_only:
        expected = np.zeros(len(index), dtype=bool)
        expected[[rows[key] for key in TITLES]] = True
        assert np.array_equal(index.title_only, expected)
        assert [paper.text_from for paper in index.papers_at([rows["spectra"], rows["walks"]])] == [
            "title only",
            "abstract",
        ]
    else:  # records without `text_from`, as every record of an index built before it was kept
        assert index.title_only is None
    # The pooling hands the mask to the fusion: a shift moves the title-only papers against the
    # others (whose scores are only put on the new scale: one line maps them).
    monkeypatch.setattr(ranking, "TITLE_ONLY_MIN_GROUP", 1)
    candidates = np.array(sorted(row for key, row in rows.items() if key != "walks"))
    monkeypatch.setattr(ranking, "TITLE_ONLY_STRENGTH", 0.0)
    plain = index.score_rows(rows["walks"], candidates, "hybrid").astype(np.float64)
    monkeypatch.setattr(ranking, "TITLE_ONLY_STRENGTH", 1.0)
    shifted = index.score_rows(rows["walks"], candidates, "hybrid").astype(np.float64)
    short = np.isin(candidates, [rows[key] for key in TITLES])
    if not title_only:
        assert np.array_equal(plain, shifted)
        return
    slope, offset = np.polyfit(plain[~short], shifted[~short], 1)
    assert np.allclose(slope * plain[~short] + offset, shifted[~short], atol=1e-5)
    assert not np.allclose(slope * plain[short] + offset, shifted[short], atol=1e-3)
