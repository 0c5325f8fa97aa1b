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


def test_scores_many_are_scores_bit_for_bit(fitted):
    from recommender.index.lexical import SparseVector, combine

    _, _, lexical = fitted
    queries = [lexical.row(row) for row in range(lexical.size)]
    queries += [lexical.transform("differentially private video"), SparseVector.empty(),
                combine([lexical.row(0), lexical.row(3)], [0.5, -0.25])]  # a negative seed's weight
    batch = lexical.scores_many(queries)
    assert batch.shape == (len(queries), lexical.size) and batch.dtype == np.float32
    for query, row in zip(queries, batch):
        assert np.array_equal(row, lexical.scores(query))  # exact: related-work's lists are like's
    assert lexical.scores_many([]).shape == (0, lexical.size)


def test_stop_words_are_scikit_learns():
    from recommender.index.lexical import english_stop_words

    assert english_stop_words() == ENGLISH_STOP_WORDS


@pytest.mark.parametrize("texts", [
    list(seed_texts()),
    TRICKY,
    ["the and of", "", "a I"],  # no term survives
    ["single"],
    ["repeated repeated repeated words", "words", "other words entirely"],
], ids=["seeds", "tricky", "no terms", "one text", "repeats"])
@pytest.mark.parametrize("chunk", [None, 1, 7, 50], ids=["one chunk", "chunks of 1", "chunks of 7", "chunks of 50"])
def test_the_stored_arrays_are_scikit_learns_matrix(texts, chunk, monkeypatch):
    from recommender.index import lexical

    if chunk is not None:  # rows longer than a chunk, chunks of many rows: the same arrays
        monkeypatch.setattr(lexical, "CHUNK_POSTINGS", chunk)
    arrays, vocabulary, stop_words = build_tfidf(texts)
    assert stop_words == sorted(ENGLISH_STOP_WORDS)
    try:
        fitted = vectorizer()
        matrix = fitted.fit_transform(texts).tocsr()
    except ValueError:  # scikit-learn refuses a corpus with no term: empty arrays here
        assert (vocabulary, arrays["csr_data"].size, arrays["csr_indptr"].tolist()) == ([], 0, [0] * (len(texts) + 1))
        return
    matrix.sort_indices()
    assert vocabulary == fitted.get_feature_names_out().tolist()
    np.testing.assert_allclose(arrays["idf"], fitted.idf_, rtol=1e-6)
    assert arrays["csr_indptr"].tolist() == matrix.indptr.tolist()
    assert arrays["csr_indices"].tolist() == matrix.indices.tolist()
    np.testing.assert_allclose(arrays["csr_data"], matrix.data, atol=1e-6)
    columns = matrix.tocsc()
    columns.sort_indices()
    assert arrays["csc_indptr"].tolist() == columns.indptr.tolist()
    assert arrays["csc_indices"].tolist() == columns.indices.tolist()
    np.testing.assert_allclose(arrays["csc_data"], columns.data, atol=1e-6)
    assert arrays["column_max"].tolist() == [
        float(arrays["csc_data"][start:end].max(initial=0)) for start, end in zip(columns.indptr, columns.indptr[1:])]
    assert {name: array.dtype.name for name, array in arrays.items()} == {
        "idf": "float32", "csr_data": "float32", "csr_indices": "int32", "csr_indptr": "int64",
        "csc_data": "float32", "csc_indices": "int32", "csc_indptr": "int64", "column_max": "float32"}


def test_fitting_imports_neither_scikit_learn_nor_scipy():
    import subprocess
    import sys

    from conftest import REPO

    script = ("import sys\nfrom recommender.index.lexical import build_tfidf\n"
              "build_tfidf(['a first text about graphs', 'a second one about trees'])\n"
              "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"
