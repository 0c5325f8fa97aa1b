"""The lexical side: TF-IDF over title and abstract, in the spirit of arxiv-sanity-lite.

The matrix is built with scikit-learn's `TfidfVectorizer` (single words,
sublinear tf, English stop words, l2-normalised rows). Querying needs neither
scikit-learn nor scipy (both slow to import on a cold start): the matrix is
kept as plain CSR and CSC arrays and scored with numpy, and a free-text query is
analysed by `analyse`, which reproduces the vectorizer's analyser (checked
against scikit-learn in the tests).
"""

from __future__ import annotations

import contextlib
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator, Sequence

import numpy as np

TOKEN_PATTERN = r"(?u)\b[^\W\d_][^\W_]+\b"  # words of 2+ characters that do not start with a digit
# Single words: on the CSFCube dev set, fused with the dense cosine, they rank better than 1-2 grams over a
# broader range of weights, with a vocabulary 12 times smaller (scripts/tune_relevance.py, README "Ranking").
NGRAM_RANGE = (1, 1)


def settings() -> dict:
    """The TF-IDF settings an index records (a rebuild is needed when they change)."""
    return {"ngram_range": list(NGRAM_RANGE), "sublinear_tf": True}


@dataclass(frozen=True)
class SparseVector:
    """Term columns (sorted, unique) and their weights."""

    indices: np.ndarray
    values: np.ndarray

    @classmethod
    def empty(cls) -> "SparseVector":
        return cls(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))


def build_tfidf(texts: Sequence[str], min_df: int | float = 1, max_df: float = 1.0):
    """Fit TF-IDF on the texts; returns (arrays to store, vocabulary in column order, stop words)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

    vectorizer = TfidfVectorizer(
        strip_accents="unicode",
        lowercase=True,
        stop_words="english",
        token_pattern=TOKEN_PATTERN,
        ngram_range=NGRAM_RANGE,
        sublinear_tf=True,
        min_df=min_df if len(texts) > 1 else 1,
        max_df=max_df if len(texts) > 1 else 1.0,
        dtype=np.float32,
    )
    try:
        matrix = vectorizer.fit_transform(texts).tocsr()
    except ValueError:  # no term survives (e.g. every text is stop words or digits)
        vectorizer = None
        matrix = None
    if matrix is None:
        arrays = {
            "idf": np.zeros(0, dtype=np.float32),
            "csr_data": np.zeros(0, dtype=np.float32),
            "csr_indices": np.zeros(0, dtype=np.int32),
            "csr_indptr": np.zeros(len(texts) + 1, dtype=np.int64),
            "csc_data": np.zeros(0, dtype=np.float32),
            "csc_indices": np.zeros(0, dtype=np.int32),
            "csc_indptr": np.zeros(1, dtype=np.int64),
        }
        return arrays, [], sorted(ENGLISH_STOP_WORDS)
    matrix.sort_indices()
    columns = matrix.tocsc()
    columns.sort_indices()
    vocabulary = [""] * len(vectorizer.vocabulary_)
    for term, column in vectorizer.vocabulary_.items():
        vocabulary[column] = term
    arrays = {
        "idf": vectorizer.idf_.astype(np.float32),
        "csr_data": matrix.data.astype(np.float32),
        "csr_indices": matrix.indices.astype(np.int32),
        "csr_indptr": matrix.indptr.astype(np.int64),
        "csc_data": columns.data.astype(np.float32),
        "csc_indices": columns.indices.astype(np.int32),
        "csc_indptr": columns.indptr.astype(np.int64),
    }
    return arrays, vocabulary, sorted(ENGLISH_STOP_WORDS)


_TOKEN = re.compile(TOKEN_PATTERN)


def analyse(text: str, stop_words: frozenset[str]) -> list[str]:
    """The vectorizer's analyser: strip accents, lowercase, tokenise, drop stop words, n-grams of NGRAM_RANGE."""
    text = text.lower()
    normalised = unicodedata.normalize("NFKD", text)
    if normalised != text:
        text = "".join(c for c in normalised if not unicodedata.combining(c))
    tokens = [t for t in _TOKEN.findall(text) if t not in stop_words]
    low, high = NGRAM_RANGE
    grams = []
    for n in range(low, high + 1):
        grams.extend(" ".join(tokens[i: i + n]) for i in range(len(tokens) - n + 1))
    return grams


# read(start, end) -> (csc_indices[start:end], csc_data[start:end])
ColumnReader = Callable[[int, int], tuple[np.ndarray, np.ndarray]]


@contextlib.contextmanager
def read_columns(indices, data) -> Iterator[ColumnReader]:
    """A column reader over two slice readers (store.ArrayReader) of csc_indices and csc_data."""
    with indices.reading() as read_indices, data.reading() as read_data:
        yield lambda start, end: (read_indices(start, end), read_data(start, end))


class LexicalIndex:
    """TF-IDF rows of the corpus, scored with numpy alone."""

    def __init__(
        self,
        arrays: dict[str, np.ndarray],
        load_vocabulary,
        stop_words: Sequence[str] = (),
        columns: Callable[[], ContextManager[ColumnReader]] | None = None,
    ):
        """`columns`, if given, opens a reader of column slices that `scores` uses instead of
        slicing the CSC arrays (e.g. reading them with pread rather than through a memory map)."""
        # Memory-mapped arrays stay mapped (only the pages a query touches are read);
        # plain ndarray views of them index faster than np.memmap objects.
        arrays = {name: np.asarray(array) for name, array in arrays.items()}
        self._column_reader = columns  # not a bound method of self: no reference cycle
        self.idf = arrays["idf"]
        self.csr_data, self.csr_indices, self.csr_indptr = arrays["csr_data"], arrays["csr_indices"], arrays["csr_indptr"]
        self.csc_data, self.csc_indices, self.csc_indptr = arrays["csc_data"], arrays["csc_indices"], arrays["csc_indptr"]
        self._load_vocabulary = load_vocabulary
        self._vocabulary: list[str] | None = None
        self._columns: dict[str, int] | None = None
        self.stop_words = frozenset(stop_words)

    @property
    def size(self) -> int:
        return len(self.csr_indptr) - 1

    @property
    def vocabulary(self) -> list[str]:
        if self._vocabulary is None:
            self._vocabulary = list(self._load_vocabulary())
        return self._vocabulary

    def row(self, row: int) -> SparseVector:
        start, end = self.csr_indptr[row], self.csr_indptr[row + 1]
        return SparseVector(self.csr_indices[start:end], self.csr_data[start:end])

    def transform(self, text: str) -> SparseVector:
        """A free text as an l2-normalised TF-IDF vector over this corpus's vocabulary."""
        if self._columns is None:
            self._columns = {term: column for column, term in enumerate(self.vocabulary)}
        counts: dict[int, int] = {}
        for gram in analyse(text, self.stop_words):
            column = self._columns.get(gram)
            if column is not None:
                counts[column] = counts.get(column, 0) + 1
        if not counts:
            return SparseVector.empty()
        indices = np.array(sorted(counts), dtype=np.int32)
        tf = np.array([1.0 + math.log(counts[i]) for i in indices], dtype=np.float64)
        values = tf * self.idf[indices]
        values /= np.linalg.norm(values)
        return SparseVector(indices, values.astype(np.float32))

    def scores(self, query: SparseVector) -> np.ndarray:
        """Dot product of the query with every row (cosine, as rows are normalised)."""
        out = np.zeros(self.size, dtype=np.float32)
        # Term by term over slices of the (memory-mapped) columns: only the query's own
        # postings are read. A column lists each row once, so `out[rows] += ...` adds
        # exactly what one np.add.at over all the postings would, in the same order.
        starts = self.csc_indptr[query.indices].tolist()
        ends = self.csc_indptr[query.indices + 1].tolist()
        with (self._column_reader or self._slice_columns)() as column:
            for start, end, weight in zip(starts, ends, query.values):
                if end > start:
                    rows, data = column(start, end)
                    out[rows] += data * weight
        return out

    @contextlib.contextmanager
    def _slice_columns(self) -> Iterator[ColumnReader]:
        yield lambda start, end: (self.csc_indices[start:end], self.csc_data[start:end])

    def shared_terms(self, query: SparseVector, row: int, limit: int = 3) -> list[str]:
        """The terms that contribute most to the query's score for this row."""
        document = self.row(row)
        common, in_query, in_document = np.intersect1d(query.indices, document.indices, return_indices=True)
        positive = query.values[in_query] > 0
        if not positive.any():
            return []
        common, contribution = common[positive], (query.values[in_query] * document.values[in_document])[positive]
        order = np.lexsort((common, -contribution))[:limit]
        vocabulary = self.vocabulary
        return [vocabulary[common[i]] for i in order]


def combine(vectors: Sequence[SparseVector], weights: Sequence[float]) -> SparseVector:
    """Weighted sum of sparse vectors (used for several seed papers and negatives)."""
    if not vectors:
        return SparseVector.empty()
    indices = np.concatenate([v.indices for v in vectors])
    values = np.concatenate([v.values * w for v, w in zip(vectors, weights)])
    if len(indices) == 0:
        return SparseVector.empty()
    unique, inverse = np.unique(indices, return_inverse=True)
    summed = np.bincount(inverse, weights=values).astype(np.float32)
    return SparseVector(unique.astype(np.int32), summed)
