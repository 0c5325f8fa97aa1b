"""recommender.index.lexical answers queries without scikit-learn: its analyser and query vectors
must be exactly those of the TfidfVectorizer that built the matrix."""

import functools

import numpy as np
import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

from conftest import SEEDS
from recommender.corpus.papers import read_papers
from recommender.index.lexical import NGRAM_RANGE, TOKEN_PATTERN, LexicalIndex, analyse, build_tfidf

TRICKY = [
    "",
    "   ",
    "Naïve Bayes über café résumé: Ångström-scale Œuvre, ﬁnite ﬂows (ligatures)",
    "x2 3D 2x GPT-4 LLaMA-2-7B ResNet50 a1b2 _private __init__ snake_case CamelCase",
    "The and of to in it is: only stop words? Then THE, AND, Of.",
    "東京 大学の研究 العربية русский текст Ελληνικά 한국어",
    "e-mail, co-operate; state-of-the-art (SOTA) — “quoted” ‘text’ … 50% faster!",
    "ﬀ ℌ ① ² ½ ™ Ⅻ",
    "tabs\tand\nnewlines\r\nand\u00a0non-breaking\u2009spaces",
    "a I x y z ab cd",
]


def vectorizer(**settings):
    return TfidfVectorizer(strip_accents="unicode", lowercase=True, stop_words="english", token_pattern=TOKEN_PATTERN,
                           ngram_range=NGRAM_RANGE, sublinear_tf=True, dtype=np.float32, **settings)


@functools.lru_cache(maxsize=None)
def seed_texts():
    return tuple(paper.text for paper in read_papers([SEEDS]))


@pytest.mark.parametrize("text", TRICKY + list(seed_texts()))
def test_analyse_is_the_vectorizers_analyser(text):
    assert analyse(text, frozenset(ENGLISH_STOP_WORDS)) == vectorizer().build_analyzer()(text)


def stored_index(texts):
    arrays, vocabulary, stop_words = build_tfidf(texts)
    return LexicalIndex(arrays, lambda: vocabulary, stop_words)


@pytest.fixture(scope="module")
def fitted():
    """scikit-learn's vectorizer and matrix, and the stored index, over the seed papers."""
    texts = list(seed_texts())
    vectorizer_ = vectorizer()
    return vectorizer_, vectorizer_.fit_transform(texts), stored_index(texts)


@pytest.mark.parametrize("query", TRICKY + [
    "differentially private training of large language models",
    "video video video aesthetic assessment",  # repeated terms: sublinear tf
    "diffusion models diffusion sampling for images and video",
    "words the corpus never uses: zyzzyva quux",
])
def test_transform_is_the_vectorizers_transform(fitted, query):
    fitted, matrix, lexical = fitted
    assert lexical.vocabulary == fitted.get_feature_names_out().tolist()
    ours = np.zeros(len(lexical.vocabulary), dtype=np.float32)
    vector = lexical.transform(query)
    ours[vector.indices] = vector.values
    theirs = fitted.transform([query]).toarray()[0]
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    # and the scores against every paper are the cosines scikit-learn gives
    np.testing.assert_allclose(lexical.scores(vector), matrix.toarray() @ theirs, atol=1e-5)


def test_stored_rows_are_the_vectorizers_rows(fitted):
    _, matrix, lexical = fitted
    matrix = matrix.toarray()
    for row in range(matrix.shape[0]):
        ours = np.zeros(matrix.shape[1], dtype=np.float32)
        vector = lexical.row(row)
        ours[vector.indices] = vector.values
        np.testing.assert_allclose(ours, matrix[row], atol=1e-6)
