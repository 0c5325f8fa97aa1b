"""Reasons for a recommendation: the phrases two texts share (weighed by the index's document
counts, common words left out), the closest pair of their sentences by the model, and where they
reach the library's results, `explain` and the JSON."""

import numpy as np
import pytest
from corpus import write_corpus
from fakes import FakeEncoder

from recommender import build_index
from recommender.index.lexical import english_stop_words
from recommender.query.reasons import (
    COMMON_FLOOR,
    COMMON_SHARE,
    best_pair,
    common_ceiling,
    merge_phrases,
    sentences_of,
    shared_phrases,
)

STOP = english_stop_words()


def counts_of(frequency: dict, papers: int):
    """A `counts` function over fixed document counts."""
    return lambda words: ({word: frequency.get(word, 1) for word in words}, papers)


def test_the_ceiling_is_a_share_of_the_papers_with_a_floor():
    assert common_ceiling(10_000) == COMMON_SHARE * 10_000
    assert common_ceiling(38) == COMMON_FLOOR  # a small index does not call every word common


def test_a_shared_phrase_is_kept_whole_and_its_words_not_again():
    first = "Differentially private training of language models with gradient clipping."
    second = (
        "We study differentially private fine-tuning and gradient clipping for language models."
    )
    found = shared_phrases(first, second, STOP, counts_of({}, 1000))
    phrases = [phrase for phrase, _ in found]
    assert set(phrases) == {"differentially private", "gradient clipping", "language models"}
    assert "private" not in phrases and "clipping" not in phrases


def test_common_words_are_left_out_and_never_end_a_phrase():
    first = "A new method based on sparse attention for long documents."
    second = "We propose a new method based on sparse attention kernels."
    frequency = {"new": 400, "method": 300, "based": 500, "sparse": 20, "attention": 40}
    found = shared_phrases(first, second, STOP, counts_of(frequency, 1000))
    assert [phrase for phrase, _ in found] == ["sparse attention"]


def test_a_common_or_stop_word_may_sit_inside_a_phrase():
    first = "The quality of service in mesh networks."
    second = "We measure quality of service under load."
    found = shared_phrases(first, second, STOP, counts_of({"quality": 10, "service": 10}, 1000))
    assert found[0][0] == "quality of service"


def test_rarer_phrases_come_first():
    first = "graph sparsification and spectral bounds"
    second = "spectral bounds with graph sparsification"
    found = shared_phrases(
        first,
        second,
        STOP,
        counts_of({"graph": 40, "sparsification": 2, "spectral": 30, "bounds": 30}, 1000),
    )
    assert [phrase for phrase, _ in found] == ["graph sparsification", "spectral bounds"]
    assert found[0][1] > found[1][1]


def test_merged_phrases_of_several_seeds():
    merged = merge_phrases(
        [
            [("gradient clipping", 9.0), ("memory", 3.0)],
            [("per sample gradient clipping", 14.0), ("memory", 3.0)],
        ]
    )
    assert merged == ["per sample gradient clipping", "memory"]


def test_sentences_too_short_are_not_offered():
    text = (
        "Code at github. We train private models with clipped gradients. Results follow here now."
    )
    assert sentences_of(text) == ["We train private models with clipped gradients."]
    assert sentences_of("Title only") == ["Title only"]
    assert sentences_of("  ") == []


def test_the_best_pair_is_the_highest_cosine():
    first = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    second = np.array([[0.0, 0.0, 1.0], [0.1, 2.0, 0.0], [1.0, 1.0, 0.0]])
    i, j, cosine = best_pair(first, second)
    assert (i, j) == (1, 1) and cosine == pytest.approx(2.0 / np.sqrt(4.01))


def test_the_pair_chosen_with_the_fake_encoder_shares_the_topic():
    encoder = FakeEncoder()
    seed = sentences_of(
        "We assess video aesthetics with professional annotations. "
        "The network has two branches for sound and image."
    )
    paper = sentences_of(
        "Private training clips every gradient of the model. "
        "A database of video aesthetics annotations by professionals is released."
    )
    i, j, _ = best_pair(encoder.encode(seed), encoder.encode(paper))
    assert "aesthetics" in seed[i] and "aesthetics" in paper[j]


@pytest.fixture
def index(open_index, workdir, fake_model):
    build_index([write_corpus(workdir / "in")])
    fake_model.encoded_texts.clear()
    return open_index()


def test_like_why_gives_phrases_and_the_closest_sentences(index, fake_model):
    (first,) = index.like("dp1", k=1, why=True)
    assert first.id == "dp2"
    assert {"differentially private", "gradient clipping", "language models"} <= set(first.phrases)
    (pair,) = first.sentences
    assert pair.seed == "dp1" and pair.seed_sentence.startswith("Differentially private training")
    assert (
        pair.paper_sentence.startswith("Differentially private fine-tuning")
        and 0 < pair.cosine <= 1
    )
    data = first.to_dict()
    assert data["why"] == list(first.why)  # the terms keep their key
    assert data["phrases"] == list(first.phrases)
    assert data["sentences"] == [
        {
            "seed": "dp1",
            "seed_sentence": pair.seed_sentence,
            "paper_sentence": pair.paper_sentence,
            "cosine": round(pair.cosine, 4),
        }
    ]


def test_like_without_why_encodes_nothing(index, fake_model):
    results = index.like("dp1", k=3)
    assert fake_model.encoded_texts == [] and all(
        not r.phrases and not r.sentences for r in results
    )
    assert results[0].to_dict()["phrases"] == [] and results[0].to_dict()["sentences"] == []


def test_several_seeds_give_reasons_against_the_seeds_each_paper_is_there_because_of(index):
    results = index.like("dp1", "vid1", k=4, why=True)
    for result in results:
        because = {seed for seed, _, _ in result.because}
        assert result.sentences and {pair.seed for pair in result.sentences} <= because


def test_search_and_explain_give_reasons_too(index):
    (found,) = index.search(
        "video aesthetic assessment with professional annotations", k=1, why=True
    )
    assert found.sentences[0].seed is None and "video aesthetic assessment" in found.phrases
    explained = index.explain("dp2", seed="dp1")
    assert "gradient clipping" in explained.phrases and explained.sentences[0].seed == "dp1"
    assert explained.to_dict()["sentences"][0]["seed"] == "dp1"
    plain = index.explain("dp2")
    assert plain.phrases == () and plain.sentences == ()
