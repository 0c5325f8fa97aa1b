"""The lexical side: TF-IDF over title and abstract, in the spirit of arxiv-sanity-lite.

The matrix is scikit-learn's `TfidfVectorizer` (single words, sublinear tf,
English stop words, l2-normalised rows), computed with numpy: neither a build nor
a query imports scikit-learn or scipy (both slow to import). It is kept as plain
CSR and CSC arrays and scored with numpy, and text is analysed by `analyse`,
which reproduces the vectorizer's analyser (both checked against scikit-learn in
the tests).
"""

from __future__ import annotations

import array
import contextlib
import functools
import io
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np
import numpy.typing as npt

from ..arrays import csr_ranges, sorted_union

TOKEN_PATTERN = r"(?u)\b[^\W\d_][^\W_]+\b"  # words of 2+ characters that do not start with a digit
# Single words: on the CSFCube dev set, fused with the dense cosine, they rank better than 1-2 grams
# over a
# broader range of weights, with a vocabulary 12 times smaller (scripts/tune_relevance.py,
# docs/ranking.md).
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
    def empty(cls) -> SparseVector:
        return cls(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))


# Exact top-k scoring (LexicalIndex.top). The figures are costs measured at 1M papers.
PRUNE_MIN_POSTINGS = 1 << 21
"""A query with fewer postings in its columns is scored in full (under ~7 ms): pruning would not
pay."""
ROW_COST = 1200
"""The cost of scoring one row exactly (its postings read with two preads), in column postings
scanned."""
FIRST_ESTIMATE = 0.1
"""Share of the query's postings scanned before the first estimate of the k-th best score."""
COUNT_STRIDE = 16
"""The candidates left are counted among every COUNT_STRIDE-th row (an estimate, for deciding when
to stop)."""
GIVE_UP = 0.5
"""Share of the query's postings scanned after which a query whose bound is still above the
threshold is scored in full."""

# Postings handled at once: temporaries stay ~50 MB however large the corpus.
CHUNK_POSTINGS = 1 << 21

# scratch(name) -> a context manager of a binary file open for writing and reading
# (writer.IndexWriter.scratch_file)
Scratch = Callable[[str], AbstractContextManager[BinaryIO]]


class ArrayOutput(Protocol):
    """Where one stored array goes, an `append(values)` at a time (writer.ArrayFile)."""

    def append(self, values: np.ndarray) -> None: ...


# output(name, length, dtype) -> where that stored array goes, an `append(values)` at a time
# (writer.ArrayFile)
Output = Callable[[str, int, npt.DTypeLike], ArrayOutput]


def build_tfidf(texts: Iterable[str], chunk_postings: int | None = None):
    """Fit TF-IDF on the texts; returns (arrays to store, vocabulary in column order, stop words).

    The numbers are those of scikit-learn's `TfidfVectorizer` with the settings above (smooth idf,
    sublinear tf, l2 rows, terms in sorted order; the tests compare them), computed here with numpy
    so that a build does not import scikit-learn and scipy (~1 s and ~150 MB). In memory; a build
    uses `TfidfBuilder`, which keeps the postings on disk."""
    with TfidfBuilder(lambda name: contextlib.nullcontext(io.BytesIO()), chunk_postings) as builder:
        for text in texts:
            builder.add(text)
        sinks: dict[str, _ArraySink] = {}

        def output(name: str, length: int, dtype) -> _ArraySink:
            sinks[name] = _ArraySink(length, dtype)
            return sinks[name]

        arrays, vocabulary, stop_words = builder.finish(output)
    arrays.update((name, sink.array) for name, sink in sinks.items())
    return arrays, vocabulary, stop_words


@dataclass(frozen=True)
class FixedTerms:
    """The vocabulary and IDF of another index (a segment's base, index/segments.py): the rows are
    weighed in its column space, so one query vector scores both. The terms it lacks get columns
    after its own (sorted among themselves; a segment lists them in ADDED_TERMS, layout.py), weighed
    with `unseen_idf` (the IDF of a term in one of its texts): a reader of both gives them the IDF
    of a rebuild from their counts (query/segmented.py).
    """

    vocabulary: list[str]
    idf: np.ndarray
    unseen_idf: float


class TfidfBuilder:
    """`build_tfidf` a text at a time, its postings on disk: memory is the vocabulary, 8 bytes a
    text (the row pointers) and chunks of CHUNK_POSTINGS postings, however many texts there are.

    `add` analyses each text and spools its (term, count) postings to a scratch file; `finish`
    weighs them a chunk of rows at a time into the CSR arrays, sorts each chunk by column into a
    run on disk, and merges the runs a block of columns at a time into the CSC arrays. The stored
    arrays are the same, byte for byte, whatever the chunk size (tests/test_lexical.py)."""

    def __init__(
        self, scratch: Scratch, chunk_postings: int | None = None, fixed: FixedTerms | None = None
    ):
        self.stop_words = english_stop_words()
        self.fixed = fixed
        self.chunk = max(1, int(chunk_postings or CHUNK_POSTINGS))
        self._scratch = scratch
        self._files = contextlib.ExitStack()
        self._terms = _Spool(self._files.enter_context(scratch("tfidf-terms")), np.int32)
        self._counts = _Spool(self._files.enter_context(scratch("tfidf-counts")), np.int32)
        self._columns: dict[str, int] = {}  # term -> column in order of first use, sorted by finish
        self._documents = np.zeros(0, dtype=np.int64)  # texts with each term, by first use
        self._indptr = array.array("q", [0])
        if fixed is not None:
            self._columns = {term: column for column, term in enumerate(fixed.vocabulary)}
            self._documents = np.zeros(len(fixed.vocabulary), dtype=np.int64)
        # Compact arrays rather than lists: 4 bytes a posting, not a Python int each.
        self._pending_terms, self._pending_counts = array.array("i"), array.array("i")

    def __enter__(self) -> TfidfBuilder:
        return self

    def __exit__(self, *exc_info) -> None:
        self._files.close()

    def add(self, text: str) -> None:
        columns = self._columns
        terms = Counter(analyse(text, self.stop_words))
        self._pending_terms.extend(columns.setdefault(term, len(columns)) for term in terms)
        self._pending_counts.extend(terms.values())
        self._indptr.append(self._indptr[-1] + len(terms))
        if len(self._pending_terms) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        terms = np.array(self._pending_terms, dtype=np.int32)
        if len(self._documents) < len(self._columns):
            self._documents = np.concatenate(
                [
                    self._documents,
                    np.zeros(len(self._columns) - len(self._documents), dtype=np.int64),
                ]
            )
        self._documents += np.bincount(
            terms, minlength=len(self._documents)
        )  # a text lists a term once
        self._terms.append(terms)
        self._counts.append(np.array(self._pending_counts, dtype=np.int32))
        self._pending_terms, self._pending_counts = array.array("i"), array.array("i")

    def finish(self, output: Output):
        """Write csr_indices, csr_data, csc_indices and csc_data through `output`; returns (the
        other arrays to store, the vocabulary in column order, the stop words)."""
        self._flush()
        vocabulary, rank, documents = self._sorted_columns()
        indptr = np.array(self._indptr, dtype=np.int64)
        self._indptr = array.array("q")
        total = int(indptr[-1])
        idf = self._idf(documents, len(indptr) - 1)
        csc_indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(documents, out=csc_indptr[1:])
        blocks = np.array(
            [0] + [last for _, last in _row_chunks(csc_indptr, self.chunk)], dtype=np.int64
        )
        csr = (output("csr_indices", total, np.int32), output("csr_data", total, np.float32))
        with (
            self._scratch("tfidf-run-terms") as terms_file,
            self._scratch("tfidf-run-rows") as rows_file,
            self._scratch("tfidf-run-data") as data_file,
        ):
            runs = (
                _Spool(terms_file, np.int32),
                _Spool(rows_file, np.int32),
                _Spool(data_file, np.float32),
            )
            bounds = self._write_rows(csr, runs, indptr, rank, idf, blocks)
            csc = (output("csc_indices", total, np.int32), output("csc_data", total, np.float32))
            column_max = _merge_runs(csc, runs, bounds, blocks, csc_indptr)
        arrays = {
            "idf": idf,
            "csr_indptr": indptr,
            "csc_indptr": csc_indptr,
            "column_max": column_max,
        }
        return arrays, vocabulary, sorted(self.stop_words)

    def _sorted_columns(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The vocabulary in column order (sorted; with fixed terms, theirs then the terms they
        lack), each first-use column's sorted column, and the texts with each term by column."""
        if self.fixed is None:
            vocabulary = sorted(self._columns)
        else:  # the fixed columns, then the terms they lack (columns in order of first use)
            known = len(self.fixed.vocabulary)
            added = sorted(term for term, column in self._columns.items() if column >= known)
            vocabulary = [*self.fixed.vocabulary, *added]
        rank = np.zeros(len(vocabulary), dtype=np.int32)  # first-use column -> sorted column
        rank[[self._columns[term] for term in vocabulary]] = np.arange(
            len(vocabulary), dtype=np.int32
        )
        self._columns = {}
        documents = np.zeros(len(vocabulary), dtype=np.int64)
        documents[rank] = self._documents
        return vocabulary, rank, documents

    def _idf(self, documents: np.ndarray, texts: int) -> np.ndarray:
        """Each column's inverse document frequency (smoothed, as scikit-learn's); with fixed
        terms, theirs, and the unseen terms' for the terms they lack."""
        idf = (np.log((1 + texts) / (1 + documents)) + 1).astype(np.float32)
        if self.fixed is not None:
            known = len(self.fixed.vocabulary)
            idf = np.concatenate(
                [
                    np.asarray(self.fixed.idf, dtype=np.float32),
                    np.full(len(documents) - known, self.fixed.unseen_idf, dtype=np.float32),
                ]
            )
        return idf

    def _write_rows(self, csr, runs, indptr, rank, idf, blocks) -> list[np.ndarray]:
        """The rows weighed a chunk at a time into the CSR arrays `csr`, each chunk sorted by column
        into a run of `runs` (terms, rows, weights); returns, for each run, where each block of
        columns of `blocks` starts in it."""
        bounds: list[np.ndarray] = []
        for first, last in _row_chunks(indptr, self.chunk):
            low, high = indptr[first], indptr[last]
            local_rows = np.repeat(
                np.arange(last - first, dtype=np.int32), np.diff(indptr[first : last + 1])
            )
            terms = rank[self._terms.read(low, high)]
            weights = (np.log(self._counts.read(low, high)) + 1) * idf[terms]
            norms = np.sqrt(
                np.bincount(local_rows, weights=weights * weights, minlength=last - first)
            )
            weights /= np.where(norms == 0, 1, norms)[local_rows]
            order = np.lexsort(
                (terms, local_rows)
            )  # columns sorted within each row, as scipy leaves them
            terms, weights = terms[order], weights[order].astype(np.float32)
            csr[0].append(terms)
            csr[1].append(weights)
            by_column = np.argsort(terms, kind="stable")  # stable: rows stay in order in a column
            column_terms = terms[by_column]
            runs[0].append(column_terms)
            runs[1].append((local_rows + np.int32(first))[by_column])
            runs[2].append(weights[by_column])
            bounds.append(low + np.searchsorted(column_terms, blocks, side="left"))
        return bounds


def _merge_runs(csc, runs, bounds, blocks, csc_indptr) -> np.ndarray:
    """The runs merged a block of columns at a time into the CSC arrays `csc`; returns each
    column's largest weight."""
    column_max = np.zeros(len(csc_indptr) - 1, dtype=np.float32)
    starts_at = np.array(bounds, dtype=np.int64).reshape(-1, len(blocks))
    for block in range(len(blocks) - 1):
        first, last = int(blocks[block]), int(blocks[block + 1])
        # the runs with postings here
        present = np.flatnonzero(starts_at[:, block + 1] > starts_at[:, block])
        if not len(present):  # no text has a term of these columns (texts with no terms)
            continue
        starts = starts_at[present, block].tolist()
        stops = starts_at[present, block + 1].tolist()
        terms = np.concatenate([runs[0].read(a, b) for a, b in zip(starts, stops)])
        order = np.argsort(terms, kind="stable")  # the runs are in row order: rows ascend
        rows = np.concatenate([runs[1].read(a, b) for a, b in zip(starts, stops)])[order]
        data = np.concatenate([runs[2].read(a, b) for a, b in zip(starts, stops)])[order]
        csc[0].append(rows)
        csc[1].append(data)
        column_max[first:last] = column_maxima(
            data, csc_indptr[first : last + 1] - csc_indptr[first]
        )
    return column_max


class _Spool:
    """An array of one dtype growing in a scratch file, read back by slices."""

    def __init__(self, stream: BinaryIO, dtype):
        self.stream, self.dtype = stream, np.dtype(dtype)

    def append(self, values: np.ndarray) -> None:
        self.stream.seek(0, io.SEEK_END)
        self.stream.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())

    def read(self, start: int, stop: int) -> np.ndarray:
        self.stream.seek(int(start) * self.dtype.itemsize)
        return np.frombuffer(
            self.stream.read((int(stop) - int(start)) * self.dtype.itemsize), dtype=self.dtype
        )


class _ArraySink:
    """An output array in memory, filled by appends."""

    def __init__(self, length: int, dtype):
        self.array, self.filled = np.empty(length, dtype=dtype), 0

    def append(self, values: np.ndarray) -> None:
        self.array[self.filled : self.filled + len(values)] = values
        self.filled += len(values)


def column_maxima(csc_data: np.ndarray, csc_indptr: np.ndarray) -> np.ndarray:
    """Each column's largest weight (0 for an empty column), float32: a term's contribution to any
    row's score is at most its query weight times this (weights are never negative)."""
    counts = np.diff(csc_indptr)
    out = np.zeros(len(counts), dtype=np.float32)
    filled = counts > 0
    if filled.any():
        out[filled] = np.maximum.reduceat(np.asarray(csc_data), csc_indptr[:-1][filled])
    return out


def _row_chunks(indptr: np.ndarray, size: int) -> Iterator[tuple[int, int]]:
    """(first, last) row (or column) ranges of about `size` postings each (a longer row is a chunk
    of its own)."""
    rows, first = len(indptr) - 1, 0
    while first < rows:
        last = int(np.searchsorted(indptr, indptr[first] + size, side="right")) - 1
        last = min(max(last, first + 1), rows)
        yield first, last
        first = last


@functools.lru_cache(maxsize=1)
def english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop word list, read from its module file without importing
    scikit-learn (whose package import pulls in scipy)."""
    import importlib.util

    package = importlib.util.find_spec("sklearn")
    if package is None or not package.submodule_search_locations:
        raise ImportError("scikit-learn is not installed: run `pip install scikit-learn`")
    path = Path(package.submodule_search_locations[0]) / "feature_extraction" / "_stop_words.py"
    spec = importlib.util.spec_from_file_location("_papers_sklearn_stop_words", path)
    assert spec is not None and spec.loader is not None  # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.ENGLISH_STOP_WORDS)


_TOKEN = re.compile(TOKEN_PATTERN)


def words(text: str) -> list[str]:
    """The vectorizer's tokens, stop words kept: accents stripped, lowercased, words of 2+
    characters."""
    text = text.lower()
    normalised = unicodedata.normalize("NFKD", text)
    if normalised != text:
        text = "".join(c for c in normalised if not unicodedata.combining(c))
    return _TOKEN.findall(text)


def analyse(text: str, stop_words: frozenset[str]) -> list[str]:
    """The vectorizer's analyser: strip accents, lowercase, tokenise, drop stop words, n-grams of
    NGRAM_RANGE."""
    tokens = [t for t in words(text) if t not in stop_words]
    low, high = NGRAM_RANGE
    grams: list[str] = []
    for n in range(low, high + 1):
        grams.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return grams


# read(start, end) -> (csc_indices[start:end], csc_data[start:end])
ColumnReader = Callable[[int, int], tuple[np.ndarray, np.ndarray]]


@contextlib.contextmanager
def read_columns(indices, data) -> Iterator[ColumnReader]:
    """A column reader over two slice readers (stored.ArrayReader) of csc_indices and csc_data."""
    with indices.reading() as read_indices, data.reading() as read_data:
        yield lambda start, end: (read_indices(start, end), read_data(start, end))


# read(starts, stops) -> (csr_indices[starts[0]:stops[0]] + ..., csr_data[...] + ...), concatenated
RangeReader = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@contextlib.contextmanager
def read_ranges(indices, data) -> Iterator[RangeReader]:
    """A reader of many slices at once over two slice readers (stored.ArrayReader) of csr_indices
    and csr_data."""
    with indices.reading_ranges() as read_indices, data.reading_ranges() as read_data:
        yield lambda starts, stops: (read_indices(starts, stops), read_data(starts, stops))


class LexicalIndex:
    """TF-IDF rows of the corpus, scored with numpy alone."""

    def __init__(
        self,
        arrays: dict[str, np.ndarray],
        load_vocabulary,
        stop_words: Sequence[str] = (),
        columns: Callable[[], AbstractContextManager[ColumnReader]] | None = None,
        rows: Callable[[], AbstractContextManager[RangeReader]] | None = None,
        column_ranges: Callable[[], AbstractContextManager[RangeReader]] | None = None,
    ):
        """`columns`, if given, opens a reader of column slices that `top` uses instead of
        slicing the CSC arrays (e.g. reading them with pread rather than through a memory map);
        `rows`, a reader of many CSR slices at once (`read_ranges`), that `top` uses likewise;
        `column_ranges`, a reader of many CSC slices at once, that `scores` uses likewise.
        `arrays` may hold "column_max" (`column_maxima`): without it, `top` scores every posting."""
        # Memory-mapped arrays stay mapped (only the pages a query touches are read);
        # plain ndarray views of them index faster than np.memmap objects.
        arrays = {name: np.asarray(array) for name, array in arrays.items()}
        self._column_reader = columns  # not a bound method of self: no reference cycle
        self._row_reader = rows
        self._column_ranges_reader = column_ranges
        self.column_max = arrays.get("column_max")
        self.idf = arrays["idf"]
        self.csr_data, self.csr_indices, self.csr_indptr = (
            arrays["csr_data"],
            arrays["csr_indices"],
            arrays["csr_indptr"],
        )
        self.csc_data, self.csc_indices, self.csc_indptr = (
            arrays["csc_data"],
            arrays["csc_indices"],
            arrays["csc_indptr"],
        )
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
        # Only the query's own postings are read, all its columns in one call (a call per term
        # was a tenth of a lookup), and added by one np.add.at in term order: the same float32
        # sums as adding column after column (a column lists each row once).
        starts = np.asarray(self.csc_indptr[query.indices], dtype=np.int64)
        lengths = np.asarray(self.csc_indptr[query.indices + 1], dtype=np.int64) - starts
        if not lengths.any():
            return out
        if self._column_ranges_reader is None:
            positions = csr_ranges(starts, lengths)
            rows, data = self.csc_indices[positions], self.csc_data[positions]
        else:
            with self._column_ranges_reader() as read:
                rows, data = read(starts, starts + lengths)
        weights = np.repeat(query.values, lengths)  # each term's weight on each of its postings
        np.add.at(out, rows, data * weights)
        return out

    def scores_many(self, queries: Sequence[SparseVector]) -> np.ndarray:
        """`scores(query)` for each query, as rows of one array, bit for bit the same: each query's
        postings sliced from the memory-mapped columns (a batch reads most of them anyway) and added
        by one np.add.at in the order `scores` adds them (term by term, float32)."""
        out = np.zeros((len(queries), self.size), dtype=np.float32)
        for query, row in zip(queries, out):
            starts = self.csc_indptr[query.indices].tolist()
            ends = self.csc_indptr[query.indices + 1].tolist()
            pieces = [
                (start, end, weight)
                for start, end, weight in zip(starts, ends, query.values)
                if end > start
            ]
            if pieces:
                rows = np.concatenate([self.csc_indices[start:end] for start, end, _ in pieces])
                products = np.concatenate(
                    [self.csc_data[start:end] * weight for start, end, weight in pieces]
                )
                np.add.at(row, rows, products)
        return out

    @contextlib.contextmanager
    def _slice_columns(self) -> Iterator[ColumnReader]:
        yield lambda start, end: (self.csc_indices[start:end], self.csc_data[start:end])

    def scores_at(
        self, query: SparseVector, rows: np.ndarray, read: RangeReader | None = None
    ) -> np.ndarray:
        """`scores(query)[rows]`, bit for bit, reading only those rows' postings (slicing the CSR
        arrays, or with `read`, a reader of CSR slices): the same float32 products, summed in the
        same (ascending term) order."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.float32)
        if len(query.indices) == 0 or len(rows) == 0:
            return out
        starts = np.asarray(self.csr_indptr[rows], dtype=np.int64)
        lengths = np.asarray(self.csr_indptr[rows + 1], dtype=np.int64) - starts
        if read is None:
            positions = csr_ranges(starts, lengths)
            terms, data = self.csr_indices[positions], self.csr_data[positions]
        else:
            terms, data = read(starts, starts + lengths)
        scratch = np.zeros(len(self.csc_indptr) - 1, dtype=np.float32)
        scratch[query.indices] = query.values
        weights = scratch[terms]
        shared = np.flatnonzero(weights)  # adding the zero products would change nothing
        products = weights[shared] * data[shared]
        owners = np.repeat(np.arange(len(rows)), lengths)[shared]
        np.add.at(out, owners, products)  # in order, one by one: the same float32 sums
        return out

    def maxima(self) -> np.ndarray:
        """Each column's largest weight: the stored one, else computed (reading every column)."""
        if self.column_max is None:
            self.column_max = column_maxima(self.csc_data, self.csc_indptr)
        return self.column_max

    def top(
        self, query: SparseVector, k: int, also=(), stats: dict | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores): the k rows with the highest scores (equal scores: lower rows first) and
        the rows `also`, in ascending order, with their scores -- exactly `scores(query)[rows]` and
        the rows `best_rows(scores(query), k)` chooses, without scoring every row when it can.

        MaxScore (Turtle & Flood, 1995) on the stored column maxima: a term adds at most its weight
        times its column's largest weight to any row. The columns with the most bound per posting
        are scanned into partial scores; the k-th best exact score of the best partial rows is a
        threshold; once the bound of the columns left falls below it, only the rows whose partial
        score plus that bound reach it can be in the top k, and those are scored exactly, row by
        row. Queries that cannot be pruned (small, few rows sharing a term, an index without the
        maxima) are scored in full. `stats`, if given, gets "postings" (postings read, of columns
        and rows) and "pruned" (whether the bound was used)."""
        also = sorted_union(also)
        counts = stats if stats is not None else {}
        found = self._pruned_top(query, int(k), also, counts)
        counts["pruned"] = found is not None
        if found is not None:
            return found
        scores = self.scores(query)
        counts["postings"] = int(
            (self.csc_indptr[query.indices + 1] - self.csc_indptr[query.indices]).sum()
        )
        rows = sorted_union(best_rows(scores, k), also)
        return rows, scores[rows]

    def _pruned_top(self, query: SparseVector, k: int, also: np.ndarray, counts: dict):
        """`top` through the bound, or None when the query is to be scored in full."""
        if self.column_max is None or not 0 < k < self.size or len(query.indices) == 0:
            return None
        plan = _ScanPlan.of(self.csc_indptr, self.column_max, query)
        if plan is None:
            return None
        with (
            (self._column_reader or self._slice_columns)() as column,
            (self._row_reader or contextlib.nullcontext)() as read,
        ):
            exact = _ExactScores(self, query, read)
            scan = plan.scan(column, exact, k, also)
            if scan is None:
                return None
            scanned, candidates = scan
            exact.add(sorted_union(candidates, also))
        counts["postings"] = scanned + exact.read_rows
        return exact.top(k, also)

    def document_counts(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many papers use each of these terms (0 for a term the index does not know), and how
        many papers there are."""
        if self._columns is None:
            self._columns = {term: column for column, term in enumerate(self.vocabulary)}
        return column_counts(self._columns, np.diff(self.csc_indptr), terms), self.size

    def shared_terms(self, query: SparseVector, row: int, limit: int = 3) -> list[str]:
        """The terms that contribute most to the query's score for this row."""
        document = self.row(row)
        common, in_query, in_document = np.intersect1d(
            query.indices, document.indices, return_indices=True
        )
        positive = query.values[in_query] > 0
        if not positive.any():
            return []
        common, contribution = (
            common[positive],
            (query.values[in_query] * document.values[in_document])[positive],
        )
        order = np.lexsort((common, -contribution))[:limit]
        vocabulary = self.vocabulary
        return [vocabulary[common[i]] for i in order]


def column_counts(
    columns: dict[str, int], counts: np.ndarray, terms: Sequence[str]
) -> dict[str, int]:
    """Each term's count by its column (0 for a term without a column)."""
    return {term: 0 if columns.get(term) is None else int(counts[columns[term]]) for term in terms}


@dataclass(frozen=True)
class _ScanPlan:
    """A query's columns in the order the pruned scan reads them (most bound per posting first),
    and after scanning order[:i] the bound of the other columns (`remaining`) and their postings
    (`left`); `slack` covers the float32 rounding of the partial sums and of the exact scores."""

    weights: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    total: int
    order: np.ndarray
    remaining: np.ndarray
    left: np.ndarray
    slack: float

    @classmethod
    def of(cls, csc_indptr, column_max, query: SparseVector) -> _ScanPlan | None:
        """The plan of `query`, or None when its columns are too few postings for pruning to pay."""
        terms, weights = query.indices, query.values
        starts = np.asarray(csc_indptr[terms], dtype=np.int64)
        lengths = np.asarray(csc_indptr[terms + 1], dtype=np.int64) - starts
        total = int(lengths.sum())
        if total < PRUNE_MIN_POSTINGS:
            return None
        maxima = np.asarray(column_max[terms], dtype=np.float64)
        # Terms of negative weight never raise a score: their bound is 0 and they are never scanned.
        bounds = np.maximum(weights.astype(np.float64), 0.0) * maxima
        # Float32 rounding of the partial sums and of the exact scores, with room to spare.
        slack = (
            4.0
            * (len(terms) + 1)
            * float(np.finfo(np.float32).eps)
            * (float(np.abs(weights) @ maxima) + 1.0)
        )
        useful = np.flatnonzero((bounds > 0) & (lengths > 0))
        order = useful[np.lexsort((terms[useful], -bounds[useful] / lengths[useful]))]
        remaining = np.append(np.cumsum(bounds[order][::-1])[::-1], 0.0)
        left = np.append(np.cumsum(lengths[order][::-1])[::-1], 0)
        return cls(weights, starts, lengths, total, order, remaining, left, slack)

    def scan(self, column, exact: _ExactScores, k: int, also: np.ndarray):
        """Scan the columns in order into partial scores, the best rows so far scored exactly for
        a threshold, until reading the rows that can still reach it costs less than going on:
        returns (postings scanned, those rows), or None when the bound does not pay."""
        order, remaining, lengths, total = self.order, self.remaining, self.lengths, self.total
        slack = self.slack
        partial = np.zeros(len(exact.scored), dtype=np.float32)
        theta, scanned, estimated_at, before = None, 0, 0, len(exact.scored)
        for i, term in enumerate(order.tolist(), start=1):
            rows, data = column(self.starts[term], self.starts[term] + lengths[term])
            np.add.at(partial, rows, data * self.weights[term])
            scanned += int(lengths[term])
            if scanned < FIRST_ESTIMATE * total:
                continue
            if theta is None or (scanned >= 2 * estimated_at and remaining[i] + slack < theta):
                # The best rows so far, scored exactly: the k-th best score is a threshold that
                # the k-th best of all rows reaches.
                exact.add(sorted_union(_leading(partial, k), also))
                theta = exact.kth_best(k)
                estimated_at = scanned
                if theta <= slack:  # no bound is ever below it
                    return None
            if remaining[i] + slack < theta:
                floor = theta - remaining[i] - slack  # a row below it cannot reach theta
                candidates = (
                    int(np.count_nonzero(partial[::COUNT_STRIDE] >= floor)) * COUNT_STRIDE
                )  # about
                cost = candidates * ROW_COST  # of reading the candidates' rows
                if i == len(order):
                    return None if cost > total else (scanned, np.flatnonzero(partial >= floor))
                # Stop when reading the rows costs less than the next column, or when the column
                # just scanned removed fewer candidates than it cost.
                if cost <= self.left[i] and (
                    cost <= lengths[order[i]] or (before - candidates) * ROW_COST < lengths[term]
                ):
                    return scanned, np.flatnonzero(partial >= floor)
                before = candidates
            elif scanned > GIVE_UP * total:  # the bound is not below the threshold yet: no gain
                return None
        return None


class _ExactScores:
    """The rows of a pruned scan scored exactly (each once), and the postings their rows held."""

    def __init__(self, index: LexicalIndex, query: SparseVector, read):
        self.index, self.query, self.read = index, query, read
        self.rows, self.scores = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        self.scored = np.zeros(index.size, dtype=bool)
        self.read_rows = 0

    def add(self, rows: np.ndarray) -> None:
        rows = rows[~self.scored[rows]]
        self.scored[rows] = True
        indptr = self.index.csr_indptr
        self.read_rows += int((indptr[rows + 1] - indptr[rows]).sum())
        self.rows = np.concatenate([self.rows, rows])
        scores = self.index.scores_at(self.query, rows, self.read)
        self.scores = np.concatenate([self.scores, scores])

    def kth_best(self, k: int) -> float:
        return float(np.partition(self.scores, len(self.scores) - k)[len(self.scores) - k])

    def top(self, k: int, also: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The k best rows scored and the rows `also`, in row order, with their scores."""
        by_row = np.argsort(self.rows)  # in row order, so that equal scores go to lower rows
        rows, scores = self.rows[by_row], self.scores[by_row]
        wanted = sorted_union(rows[best_rows(scores, k)], also)
        return wanted, scores[np.searchsorted(rows, wanted)]


def _leading(scores: np.ndarray, k: int, stride: int = 64) -> np.ndarray:
    """k positions of high scores, not necessarily the k highest: those of the k highest among the
    positions above a cut taken from every stride-th score (that is, without partitioning them all).
    """
    sample = scores[::stride]
    rank = min(len(sample), -(-4 * k // stride))  # the cut leaves about 4k positions above it
    cut = np.partition(sample, len(sample) - rank)[len(sample) - rank]
    above = np.flatnonzero(scores >= cut)
    if len(above) < k:
        above = np.arange(len(scores))
    return above[np.argpartition(scores[above], len(above) - k)[len(above) - k :]]


def best_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest scores in ascending order; of equal scores, the lower
    positions."""
    if k >= len(scores):
        return np.arange(len(scores))
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    above = np.flatnonzero(scores > kth)
    return np.sort(np.concatenate([above, np.flatnonzero(scores == kth)[: k - len(above)]]))


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
