"""Issue 10: title-prefixed sentence windows and the z-normalised fusion of window cosine and TF-IDF."""

from __future__ import annotations

import re

import numpy as np
import pytest

from recommender.corpus.papers import Paper
from recommender.embed.windows import Chunking, embed_texts, split_windows
from recommender.query.ranking import fuse

_WORD = re.compile(r"\w+|[^\w\s]")


def spans(text):
    return [match.span() for match in _WORD.finditer(text)]


TEXT = "My title. First sentence is here. Second one is a bit longer than that. Third. Fourth sentence ends the text."
HEAD = len("My title. ")


@pytest.mark.parametrize("max_tokens, overlap, expected", [
    # Title (3 tokens) + whole sentences, as many as fit in the rest of the window.
    (12, 4, [("My title. First sentence is here.", 5), ("My title. Second one is a bit longer than that.", 9),
             ("My title. Third. Fourth sentence ends the text.", 8)]),
    (20, 4, [("My title. First sentence is here. Second one is a bit longer than that. Third.", 16),
             ("My title. Third. Fourth sentence ends the text.", 8)]),  # "Third." (2 tokens) is shared
    # A sentence longer than the room left is cut at a token boundary.
    (8, 0, [("My title. First sentence is here.", 5), ("My title. Second one is a bit", 5),
            ("My title. longer than that.", 4), ("My title. Third.", 2), ("My title. Fourth sentence ends the text", 5),
            ("My title. .", 1)]),
    (100, 4, [(TEXT, 22)]),  # short enough: the text as it is (counted without the title)
])
def test_sentence_windows_start_with_the_title_and_end_at_sentence_ends(max_tokens, overlap, expected):
    assert split_windows(TEXT, spans(TEXT), max_tokens, overlap, head=HEAD) == expected


def test_a_title_taking_most_of_the_window_is_not_repeated():
    text = "One two three four five six. A b. C d."
    assert split_windows(text, spans(text), 8, 0, head=len("One two three four five six. ")) == [
        ("One two three four five six.", 7), ("A b. C d.", 6)]


def test_plain_windows_are_unchanged_without_a_head():
    assert split_windows(TEXT, spans(TEXT), 12, 4) == [
        ("My title. First sentence is here. Second one is a", 12),
        ("Second one is a bit longer than that. Third. Fourth", 12),
        (". Third. Fourth sentence ends the text.", 9)]


def test_the_head_is_the_title_with_its_separator():
    paper = Paper(id="x", handle="x", title="A title: with colon", abstract="First one. Second (x) here.")
    assert paper.text[:paper.head] == "A title: with colon. " and paper.text[paper.head:] == paper.abstract
    assert Paper(id="y", handle="y", title="Asked?", abstract="Yes.").head == len("Asked? ")
    assert Paper(id="z", handle="z", title="", abstract="Only one sentence").head == 0


def test_the_head_changes_the_windows_and_the_cache_key(fake_model, tmp_path):
    from recommender.embed.embedding_cache import EmbeddingCache

    fake_model.max_tokens = 12
    with EmbeddingCache(tmp_path) as cache:
        titled = embed_texts(fake_model, [TEXT], Chunking("sentences"), cache, heads=[HEAD])
        untitled = embed_texts(fake_model, [TEXT], Chunking("sentences"), cache)
        again = embed_texts(fake_model, [TEXT], Chunking("sentences"), cache, heads=[HEAD])
    assert (titled.encoded, untitled.encoded, again.encoded) == (1, 1, 0)
    assert not np.array_equal(titled.vectors, untitled.vectors)
    assert np.array_equal(titled.vectors, again.vectors)


def test_hybrid_scores_order_as_z_fusion_on_the_window_cosine_scale():
    rng = np.random.default_rng(0)
    dense, lexical = rng.uniform(0.2, 0.8, 50), rng.uniform(0, 0.5, 50)
    pool = np.arange(40)  # the last ten rows are candidates outside the pool
    z = lambda x: (x - x[pool].mean()) / x[pool].std()  # noqa: E731
    mixed = (2 / 3) * z(dense) + (1 / 3) * z(lexical)
    scores = fuse(dense, lexical, "hybrid", pool, 2 / 3)
    assert np.array_equal(np.argsort(-scores, kind="stable"), np.argsort(-mixed.astype(np.float32), kind="stable"))
    # Over the pool the scores have the window cosines' mean and spread.
    assert np.isclose(scores[pool].mean(), dense[pool].mean(), atol=1e-5)
    assert np.isclose(scores[pool].std(), dense[pool].std(), atol=1e-5)
    # TF-IDF agreeing with the window cosine: the score is the window cosine.
    assert np.allclose(fuse(dense, dense * 2, "hybrid", pool, 0.5), dense, atol=1e-5)
    # Rows outside the pool do not move the scale.
    lexical_outlier = lexical.copy()
    lexical_outlier[45] = 50.0
    assert np.allclose(fuse(dense, lexical_outlier, "hybrid", pool)[:40], fuse(dense, lexical, "hybrid", pool)[:40])
    extreme = fuse(np.array([0.0, 0.1, 0.99]), np.array([0.0, 0.0, 50.0]), "hybrid", np.arange(3), 0.1)
    assert extreme.min() >= -1 and extreme.max() <= 1


@pytest.mark.parametrize("mode", ["dense", "lexical"])
def test_one_sided_modes_rank_by_their_own_cosine(mode):
    dense, lexical = np.array([0.1, 0.5]), np.array([0.7, 0.2])
    assert np.array_equal(fuse(dense, lexical, mode, np.arange(2)), dense if mode == "dense" else lexical)
