"""An index with segments (`papers add`): the base and its segments ranked as one index.

The rows of the segments follow the base's (segment i's row r is the base's size + the sizes of
the segments before it + r), and the few ways `PaperIndex` reads rows -- the FAISS search, the
vectors of candidates, the TF-IDF top rows and rows, the stored papers, the ID lookups -- are
answered part by part here; everything else (the seed profile, the candidate pools, the fusion
over the pool, `--diverse`) is `PaperIndex`'s own, so a query ranks as after a rebuild.
Segments weigh their TF-IDF rows in the base's vocabulary and IDF (index/segments.py), so one
query vector scores every part; the only difference from a rebuild is the document frequencies
of the added papers' terms (measured by scripts/bench_segments.py, docs/performance.md), until
`papers build --compact`. Removed papers (`papers remove`) are excluded from every result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

import numpy as np

from ..arrays import csr_ranges, sorted_union
from ..corpus.papers import Paper
from ..embed.windows import Encoder
from ..errors import IndexBusyError, IndexMissingError, PaperNotFoundError
from ..index import segments as segment_store
from ..index.ann import search_index
from ..index.home import resolve_index_dir
from ..index.layout import ADDED_TERMS
from ..index.lexical import LexicalIndex, SparseVector, analyse, best_rows, column_counts
from ..index.stored import corrupt
from . import paper_index as single
from .paper_index import PaperIndex


def open_index(
    index: str | Path | None = None, model: str | None = None, verify: bool = False
) -> PaperIndex:
    """The index as a reader sees it: a `PaperIndex` of its base, or, with segments or removed
    papers, a `SegmentedIndex` over the base and every segment of the published list."""
    index_dir = resolve_index_dir(index)
    for _ in range(5):
        listed = segment_store.read_segments(index_dir) if index_dir.is_dir() else None
        base = PaperIndex.open(index, model=model, verify=verify)
        if listed is None or not (listed.segments or listed.tombstones or listed.aliases):
            return base
        if (
            base.stored.folder.name != listed.base
        ):  # a compaction swapped the base meanwhile: read again
            base.close()
            continue
        parts = []
        try:
            for name in listed.segments:
                parts.append(
                    PaperIndex.open(segment_store.segment_dir(index_dir, name), verify=verify)
                )
        except IndexMissingError:  # removed by a compaction since the list was read: read again
            for part in parts:
                part.close()
            base.close()
            continue
        except BaseException:
            for part in parts:
                part.close()
            base.close()
            raise
        return SegmentedIndex(base, listed, parts)
    raise IndexBusyError(f"index {index_dir} keeps changing under us (adds in a loop?): try again")


# Parts this small are searched with numpy (vectors and TF-IDF), not FAISS and the pruned TF-IDF
# top.
SMALL_PART = 4096
# What the stored weights of a row leave of 1 below this is float32 rounding, not a term unstored.
UNSEEN_ROUNDING = 1e-5


def _exact_search(
    vectors: np.ndarray, queries: np.ndarray, depth: int
) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(queries, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T
    rows = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    return np.take_along_axis(scores, rows, axis=1), rows


class SegmentedIndex(PaperIndex):
    """The base and its segments as one index of their rows in turn (see the module's docstring)."""

    def __init__(
        self, base: PaperIndex, listed: segment_store.SegmentSet, segments: Sequence[PaperIndex]
    ):
        super().__init__(base.stored)
        self.listed = listed
        self.parts = [base, *segments]
        self.part_names = [segment_store.BASE, *listed.segments]
        sizes = [len(part) for part in self.parts]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._union_lexical: _UnionLexical | None = None
        self._removed_rows: set[int] | None = None
        self._tiebreak: np.ndarray | None = None
        self._small: tuple[np.ndarray, np.ndarray] | None = None
        # One query encoder for every part, each text encoded once for them all.
        shared = _SharedEncoder(
            lambda: single.load_query_encoder(base.stored, base.manifest["model"])
        )
        for part in [self, *self.parts]:
            # Duck-typed: it loads the encoder on first use, so its facts are properties.
            part.use_query_encoder(cast(Encoder, shared))

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def version(self) -> tuple[str, ...]:
        return (self.stored.folder.name, *self.listed.segments)

    def close(self) -> None:
        for part in self.parts:
            part.close()
        super().close()

    # -- rows, part by part

    def _split(self, rows) -> Iterator[tuple[int, PaperIndex, np.ndarray, np.ndarray]]:
        """(part number, part, positions in `rows`, the part's own rows) for each part `rows`
        touch."""
        rows = np.asarray(rows, dtype=np.int64)
        owner = np.searchsorted(self.starts, rows, side="right") - 1
        for number in np.unique(owner).tolist():
            positions = np.flatnonzero(owner == number)
            yield number, self.parts[number], positions, rows[positions] - self.starts[number]

    def _gather(self, rows, read) -> np.ndarray:
        """`read(part, own rows)` of every part, put back in the order of `rows`."""
        rows = np.asarray(rows, dtype=np.int64)
        out = None
        for _, part, positions, own in self._split(rows):
            values = np.asarray(read(part, own))
            if out is None:
                out = np.empty((len(rows), *values.shape[1:]), dtype=values.dtype)
            out[positions] = values
        return out if out is not None else np.zeros(0, dtype=np.float32)

    @property  # indexed by rows, as the array is
    def vectors(self) -> _UnionVectors:  # type: ignore[override]
        return _UnionVectors(self)

    def vectors_at(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        dimension = self.manifest["dimension"]
        if len(rows) == 0:
            return np.zeros((0, dimension), dtype=np.float32)
        return self._gather(rows, lambda part, own: part.vectors_at(own))

    def candidate_cosines(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """`cosines`: the small parts' rows from their vectors in memory (`_small_parts`), the
        others read part by part."""
        rows = np.asarray(rows, dtype=np.int64)
        small_rows, small_vectors = self._small_parts()
        at = np.searchsorted(small_rows, rows)
        inside = at < len(small_rows)
        inside[inside] = small_rows[at[inside]] == rows[inside]
        out = np.empty(len(rows), dtype=np.float32)
        if not inside.all():
            out[~inside] = self._gather(rows[~inside], lambda part, own: part.cosines(own, query))
        if inside.any():
            found = small_vectors[at[inside]].astype(np.float64) @ np.asarray(query, np.float64)
            if not np.isfinite(found).all():
                self._gather(rows[inside], lambda part, own: part.cosines(own, query))  # names it
            out[inside] = found
        return out

    def cosines(self, rows: np.ndarray, query: np.ndarray, read_rows=None) -> np.ndarray:
        if read_rows is not None:
            return super().cosines(rows, query, read_rows)
        return self._gather(rows, lambda part, own: part.cosines(own, query)).astype(np.float32)

    def read_vectors(self, rows: np.ndarray, into: dict) -> None:
        wanted = [row for row in np.asarray(rows).tolist() if row not in into]
        if wanted:
            into.update(zip(wanted, self.vectors_at(wanted)))

    def faiss_search(self, queries: np.ndarray, depth: int) -> np.ndarray:
        """Each part's nearest `depth`, removed papers left out, merged by inner product: the
        union's nearest `depth`, as a rebuild without the removed papers finds them."""
        removed = np.array(sorted(self.removed_rows()), dtype=np.int64)
        found_scores, found_rows = [], []
        for start, part in zip(self.starts.tolist(), self.parts):
            if len(part) <= SMALL_PART:
                continue
            wanted = min(depth + len(removed), len(part))
            scores, rows = search_index(part.faiss_index, queries, wanted)
            rows = np.where(rows >= 0, rows + start, -1)
            scores = np.where(np.isin(rows, removed), -np.inf, scores)
            found_scores.append(scores)
            found_rows.append(np.where(np.isinf(scores), -1, rows))
        small_rows, small_vectors = self._small_parts()
        if len(small_rows):  # after the large ones (the base first in ties); all at once
            wanted = min(depth + len(removed), len(small_rows))
            scores, at = _exact_search(small_vectors, queries, wanted)
            found_scores.append(scores)
            found_rows.append(np.where(np.isin(small_rows[at], removed), -1, small_rows[at]))
            found_scores[-1] = np.where(found_rows[-1] < 0, -np.inf, scores)
        scores, rows = np.concatenate(found_scores, axis=1), np.concatenate(found_rows, axis=1)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
        return np.take_along_axis(rows, order, axis=1)

    def _small_parts(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows and vectors of every part searched with numpy (SMALL_PART), in one array."""
        if self._small is None:
            small = [
                (start, part)
                for start, part in zip(self.starts.tolist(), self.parts)
                if len(part) <= SMALL_PART
            ]
            dimension = int(self.manifest["dimension"])
            self._small = (
                np.concatenate(
                    [np.arange(start, start + len(part)) for start, part in small]
                    or [np.zeros(0, dtype=np.int64)]
                ).astype(np.int64),
                np.concatenate(
                    [np.asarray(part.vectors, dtype=np.float32) for _, part in small]
                    or [np.zeros((0, dimension), dtype=np.float32)]
                ),
            )
        return self._small

    @property
    def faiss_index(self):
        return self.parts[0].faiss_index

    @property
    def lexical(self) -> LexicalIndex:
        if self._union_lexical is None:
            self._union_lexical = _UnionLexical(self)
        return self._union_lexical  # type: ignore[return-value]

    @property
    def tiebreak(self) -> np.ndarray:
        """Each part's ID order, the parts in turn (equal scores across parts: the base's first)."""
        if self._tiebreak is None:
            self._tiebreak = np.concatenate(
                [
                    np.asarray(part.tiebreak, dtype=np.int64) + start
                    for part, start in zip(self.parts, self.starts.tolist())
                ]
            )
        return self._tiebreak

    def papers_at(self, rows: Sequence[int]) -> list[Paper]:
        found: list[Paper | None] = [None] * len(rows)
        for _, part, positions, own in self._split(rows):
            for position, paper in zip(positions.tolist(), part.papers_at(own.tolist())):
                found[position] = paper
        return found  # type: ignore[return-value]

    def title_only_rows(self) -> np.ndarray:
        return np.concatenate([part.title_only_rows() for part in self.parts])

    def papers(self) -> Iterator[Paper]:
        for name, part in zip(self.part_names, self.parts):
            removed = self.listed.removed(name)
            yield from (paper for paper in part.papers() if paper.id not in removed)

    @property
    def ids(self) -> list[str]:
        return [paper_id for part in self.parts for paper_id in part.ids]

    @property
    def handles(self) -> list[str]:
        return [handle for part in self.parts for handle in part.handles]

    # -- lookups
    def id_of(self, row: int) -> str:
        for _, part, _, own in self._split([row]):
            return part.id_of(int(own[0]))
        raise IndexError(row)

    def row_of_id(self, paper_id: str) -> int | None:
        """The row of the paper with this ID in the base or a segment, as `resolve` finds it; a
        removed paper has none."""
        for name, part, start in zip(self.part_names, self.parts, self.starts.tolist()):
            row = part.row_of_id(paper_id)
            if row is not None and paper_id not in self.listed.removed(name):
                return start + row
        return None

    def removed_rows(self) -> set[int]:
        """The rows `papers remove` removed: never in a result."""
        if self._removed_rows is None:
            rows: set[int] = set()
            for name, part, start in zip(self.part_names, self.parts, self.starts.tolist()):
                rows.update(
                    start + row for row in part.keys.rows_named(sorted(self.listed.removed(name)))
                )
            self._removed_rows = rows
        return self._removed_rows

    def resolve(self, reference: str) -> int:
        """The row of a paper in the base or a segment; a removed paper is not found."""
        removed = False
        for name, part, start in zip(self.part_names, self.parts, self.starts.tolist()):
            if not part.keys.matching_rows(reference.strip()):
                # Not here (asked first: a part's own not-found message looks for names near).
                continue
            row = part.resolve(reference)
            if part.keys.id_of(row) in self.listed.removed(name):
                removed = True  # removed here; perhaps added again in a later segment
                continue
            return start + row
        if removed:
            raise PaperNotFoundError(
                f"paper '{reference}' was removed from the index (`papers remove`)"
            )
        kept = self.listed.alias_of(reference)  # another ID of a paper `papers add` left out
        found = self.row_of_id(kept) if kept is not None else None
        if found is not None:
            return found
        return self.parts[0].resolve(reference)  # the base's message, with the names nearest

    def find_papers(self, papers: Sequence[Paper]) -> list[int | None]:
        found: list[int | None] = [None] * len(papers)
        for part, start in zip(self.parts, self.starts.tolist()):
            missing = [i for i, row in enumerate(found) if row is None]
            if not missing:
                break
            for i, row in zip(missing, part.find_papers([papers[i] for i in missing])):
                if row is not None:
                    found[i] = start + row
        return found

    def excluded_rows(self, exclude: Sequence[str]) -> set[int]:
        wanted = sorted({value.strip() for value in exclude if value.strip()})
        rows = set(self.removed_rows())
        if wanted:
            for part, start in zip(self.parts, self.starts.tolist()):
                rows.update(start + row for row in part.keys.rows_named(wanted))
        return rows

    def list_papers(self, where: Sequence[str] = (), limit: int | None = None) -> list[Paper]:
        """The base's papers in index order, then each segment's, removed papers left out."""
        found: list[Paper] = []
        for name, part in zip(self.part_names, self.parts):
            removed = self.listed.removed(name)
            wanted = None if limit is None else limit - len(found) + len(removed)
            if wanted is not None and wanted < 1:
                break
            found.extend(
                paper for paper in part.list_papers(where, wanted) if paper.id not in removed
            )
        return found if limit is None else found[:limit]

    def papers_page(
        self, offset: int = 0, limit: int = 50, where: Sequence[str] = ()
    ) -> tuple[list[Paper], int | None]:
        """`PaperIndex.papers_page` over the base and the segments, removed papers left out."""
        if where or not self.removed_rows():
            return super().papers_page(offset, limit, where)
        if offset < 0 or limit < 1:  # the base's own message
            return super().papers_page(offset, limit, where)
        live = [row for row in range(len(self)) if row not in self.removed_rows()]
        rows = live[offset : offset + limit]
        return self.papers_at(rows), offset + limit if offset + limit < len(live) else None

    def paper_count(self) -> int:
        """Live papers: the base's and the segments', removed ones left out."""
        return len(self) - sum(len(ids) for ids in self.listed.tombstones.values())

    def info(self) -> dict:
        """The base's facts, with the live paper count and what the segments add and remove."""
        facts = super().info()
        facts["base_paper_count"] = facts["paper_count"]
        facts["paper_count"] = self.paper_count()
        facts["segments"] = len(self.parts) - 1
        facts["added_papers"] = self.listed.added
        facts["removed_papers"] = sum(len(ids) for ids in self.listed.tombstones.values())
        return facts


class _UnionVectors:
    """The vectors of every part by row, for the few array uses of `PaperIndex` (`--diverse`)."""

    def __init__(self, union: SegmentedIndex):
        self.union = union
        self.shape = (len(union), union.manifest["dimension"])

    def __getitem__(self, rows) -> np.ndarray:
        return self.union.vectors_at(np.atleast_1d(np.asarray(rows, dtype=np.int64)))


class _UnionLexical:
    """The TF-IDF of every part by row, as `PaperIndex` reads it, weighed as a rebuild would weigh
    it.

    The parts store their rows in the base's vocabulary and IDF, a segment's terms the base lacks
    in columns of its own after the base's (ADDED_TERMS, weighed with the IDF of a term in one of
    the base's papers). The union's columns are the base's, then every segment's added terms (a
    term once, however many segments use it). The document frequencies of the union (the base's,
    plus the segments', less the removed papers') give the IDF a rebuild would compute; a stored
    weight times the ratio of the two IDFs, the row then normalised again, is the rebuild's weight.
    So a query (in the union's columns) is scored against each part's stored rows with its weights
    times that part's ratios, in the part's columns, and each score divided by its row's norm under
    the ratios: the rebuild's scores. (Segments written before added terms were stored hold no
    column for them: their share of a row's norm is counted, as a rebuild counts it, but they match
    nothing until `papers build --compact`.)"""

    def __init__(self, union: SegmentedIndex):
        self.union = union
        self.base = union.parts[0].lexical
        self.stop_words = self.base.stop_words
        self.size = len(union)
        columns = len(self.base.idf)
        # Each part's own columns -> the union's: the base's columns alike, its added terms after.
        added: dict[str, int] = {}
        self.maps: list[np.ndarray] = []
        for part in union.parts:
            own = len(part.lexical.idf)
            terms: list[str] = []
            if part is not union.parts[0] and part.stored.has(ADDED_TERMS):
                terms = [str(term) for term in part.stored.load_json(ADDED_TERMS)]
            if own != columns + len(terms):  # cannot happen to segments this papers wrote
                raise corrupt(
                    part.stored, "lexical/idf.npy", "is not in the vocabulary of its base"
                )
            extra = [added.setdefault(term, columns + len(added)) for term in terms]
            self.maps.append(
                np.concatenate([np.arange(columns), np.array(extra, dtype=np.int64)]).astype(
                    np.int64
                )
            )
        self.added_terms = list(added)
        width = columns + len(added)
        # The union's column -> each part's own (-1 where the part has none), for the added terms.
        self._own_added: list[np.ndarray] = []
        for mapped in self.maps:
            own_added = np.full(len(added), -1, dtype=np.int64)
            own_added[mapped[columns:] - columns] = np.arange(columns, len(mapped))
            self._own_added.append(own_added)
        frequencies = np.zeros(width, dtype=np.int64)
        for part, mapped in zip(union.parts, self.maps):
            np.add.at(frequencies, mapped, np.diff(np.asarray(part.lexical.csc_indptr)))
        for row in sorted(union.removed_rows()):
            frequencies[self._stored_columns(row)] -= 1
        live = len(union) - len(union.removed_rows())
        self.frequencies, self.live = np.maximum(frequencies, 0), live
        self.columns = columns
        self._columns: dict[str, int] | None = None
        self.idf = np.log((1 + live) / (1 + self.frequencies)) + 1  # the rebuild's, float64
        # Each part's stored weight -> the rebuild's (before the row's norm), by its own column.
        self.ratios = [
            self.idf[mapped] / np.asarray(part.lexical.idf, dtype=np.float64)
            for part, mapped in zip(union.parts, self.maps)
        ]
        based = len(union.parts[0])  # a segment's IDF of a word the base lacks (FixedTerms)
        self.unseen_ratio = (np.log((1 + live) / 2) + 1) / (np.log((1 + based) / 2) + 1)
        self._norms = np.zeros(len(union), dtype=np.float64)
        self._small_block: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None = None

    @property
    def vocabulary(self) -> list[str]:
        return [*self.base.vocabulary, *self.added_terms]

    def _locate(self, row: int) -> tuple[int, PaperIndex, int]:
        union = self.union
        number = int(np.searchsorted(union.starts, row, side="right") - 1)
        return number, union.parts[number], int(row - union.starts[number])

    def _stored_columns(self, row: int) -> np.ndarray:
        number, part, own = self._locate(row)
        return self.maps[number][np.asarray(part.lexical.row(own).indices, dtype=np.int64)]

    def _own_query(self, query: SparseVector, number: int) -> SparseVector:
        """The query in part `number`'s columns, its weights times the part's ratios: its dot
        product with a stored row is the rebuild's score times the row's norm."""
        indices = np.asarray(query.indices, dtype=np.int64)
        values = np.asarray(query.values, dtype=np.float64)
        if len(indices) and indices[-1] >= self.columns:  # added terms: to the part's own columns
            own = indices.copy()
            at = indices >= self.columns
            own[at] = self._own_added[number][indices[at] - self.columns]
            kept = own >= 0
            order = np.argsort(own[kept], kind="stable")
            indices, values = own[kept][order], values[kept][order]
        values = values * self.ratios[number][indices]
        return SparseVector(indices.astype(np.int32), values.astype(np.float32))

    def _norm(self, rows: np.ndarray) -> np.ndarray:
        """Each row's norm with its stored weights times the ratio of the IDFs (1 for an unchanged
        IDF)."""
        rows = np.asarray(rows, dtype=np.int64)
        known = self._norms  # by row, 0 where not computed yet
        missing = np.unique(rows[known[rows] == 0])
        for number, part, positions, own in self.union._split(missing):
            lexical = part.lexical
            starts = np.asarray(lexical.csr_indptr[own], dtype=np.int64)
            lengths = np.asarray(lexical.csr_indptr[own + 1], dtype=np.int64) - starts
            at = csr_ranges(starts, lengths)
            stored = np.asarray(lexical.csr_data[at], dtype=np.float64)
            weights = stored * self.ratios[number][lexical.csr_indices[at]]
            owners = np.repeat(np.arange(len(own)), lengths)
            sums = np.bincount(owners, weights=weights * weights, minlength=len(own))
            # A segment written before added terms were stored normalised its rows with terms it
            # does not store: their share of the norm is what the stored weights leave of 1, and
            # counts as after a rebuild (their IDF was that of a word in one of the base's papers;
            # a rebuild's is that of a word in one of every live paper). Elsewhere what is left is
            # rounding, not counted.
            unseen = 1.0 - np.bincount(owners, weights=stored * stored, minlength=len(own))
            unseen = np.where(unseen > UNSEEN_ROUNDING, unseen, 0.0) * self.unseen_ratio**2
            norms = np.sqrt(sums + np.where(lengths > 0, unseen, 0.0))
            known[missing[positions]] = np.where(norms > 0, norms, 1.0)
        return known[rows]

    def transform(self, text: str) -> SparseVector:
        """A free text as the rebuild's l2-normalised TF-IDF vector, in the union's columns."""
        if self._columns is None:
            self._columns = {term: column for column, term in enumerate(self.vocabulary)}
        counts = Counter(
            self._columns[gram] for gram in analyse(text, self.stop_words) if gram in self._columns
        )
        if not counts:
            return SparseVector.empty()
        indices = np.array(sorted(counts), dtype=np.int64)
        values = (1.0 + np.log([counts[i] for i in indices.tolist()])) * self.idf[indices]
        values /= np.linalg.norm(values)
        return SparseVector(indices.astype(np.int32), values.astype(np.float32))

    def row(self, row: int) -> SparseVector:
        """The rebuild's row, in the union's columns."""
        number, part, own = self._locate(row)
        stored = part.lexical.row(own)
        if len(stored.indices) == 0:
            return stored
        indices = np.asarray(stored.indices, dtype=np.int64)
        values = np.asarray(stored.values, dtype=np.float64) * self.ratios[number][indices]
        values /= self._norm(np.array([row]))[0]
        mapped = self.maps[number][indices]
        order = np.argsort(mapped, kind="stable")
        return SparseVector(mapped[order].astype(np.int32), values[order].astype(np.float32))

    def top(
        self, query: SparseVector, k: int, also=(), stats: dict | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each part's best rows and rows `also`, in ascending rows, with the rebuild's scores: a
        superset of the union's best `k` (each part asked for more, as the norms move scores a
        little)."""
        also = np.asarray(sorted(set(np.asarray(also, dtype=np.int64).tolist())), dtype=np.int64)
        removed = np.array(sorted(self.union.removed_rows()), dtype=np.int64)
        deeper = int(k) + max(10, int(k) // 2) + len(removed)
        all_rows, all_scores = [], []
        for number, (part, start, stop) in enumerate(
            zip(self.union.parts, self.union.starts[:-1].tolist(), self.union.starts[1:].tolist())
        ):
            if len(part) <= SMALL_PART:
                continue
            own_query = self._own_query(query, number)
            own_also = also[(also >= start) & (also < stop)] - start
            rows, scores = part.lexical.top(own_query, min(deeper, len(part)), own_also)
            rows = np.asarray(rows, dtype=np.int64) + start
            kept = ~np.isin(rows, removed) | np.isin(
                rows, also
            )  # as if the removed papers were not there
            rows, scores = rows[kept], np.asarray(scores)[kept]
            all_rows.append(rows)
            all_scores.append(
                (np.asarray(scores, dtype=np.float64) / self._norm(rows)).astype(np.float32)
            )
        small_rows, _ = self.union._small_parts()
        if len(small_rows):
            # Every row of the small parts scored at once, with the rebuild's scores (less than
            # the pruned top's steps cost): their best `k` exactly, removed papers left out.
            exact = self._small_scores(query)
            ranked = np.where(np.isin(small_rows, removed), -np.inf, exact)
            best = best_rows(ranked, min(int(k), len(small_rows)))
            at = sorted_union(
                best[np.isfinite(ranked[best])], np.flatnonzero(np.isin(small_rows, also))
            )
            all_rows.append(small_rows[at])
            all_scores.append(exact[at])
        rows, scores = np.concatenate(all_rows), np.concatenate(all_scores)
        order = np.argsort(rows, kind="stable")
        return rows[order], scores[order]

    def _small_scores(self, query: SparseVector) -> np.ndarray:
        """The rebuild's scores of every row of the small parts (`_small_parts`' rows), from
        their rows weighed as a rebuild would and kept by column in memory (made once)."""
        if self._small_block is None:
            columns, rows, weights = [], [], []
            first = 0
            for number, part in enumerate(self.union.parts):
                if len(part) > SMALL_PART:
                    continue
                lexical = part.lexical
                indptr = np.asarray(lexical.csr_indptr, dtype=np.int64)
                own = np.asarray(lexical.csr_indices[: indptr[-1]], dtype=np.int64)
                owners = np.repeat(np.arange(len(part)), np.diff(indptr))
                start = int(self.union.starts[number])
                norms = self._norm(np.arange(start, start + len(part)))
                weighed = np.asarray(lexical.csr_data[: indptr[-1]], dtype=np.float64)
                weighed = weighed * self.ratios[number][own] / norms[owners]
                columns.append(self.maps[number][own])
                rows.append(owners + first)
                weights.append(weighed.astype(np.float32))
                first += len(part)
            column, row, weight = (np.concatenate(parts) for parts in (columns, rows, weights))
            order = np.argsort(column, kind="stable")  # rows ascend within a column
            indptr = np.zeros(len(self.idf) + 1, dtype=np.int64)
            np.cumsum(np.bincount(column, minlength=len(self.idf)), out=indptr[1:])
            self._small_block = (indptr, row[order], weight[order], first)
        indptr, block_rows, block_weights, size = self._small_block
        out = np.zeros(size, dtype=np.float32)
        terms = np.asarray(query.indices, dtype=np.int64)
        starts, lengths = indptr[terms], indptr[terms + 1] - indptr[terms]
        at = csr_ranges(starts, lengths)
        np.add.at(out, block_rows[at], block_weights[at] * np.repeat(query.values, lengths))
        return out

    def scores(self, query: SparseVector) -> np.ndarray:
        scores = np.concatenate(
            [
                part.lexical.scores(self._own_query(query, number))
                for number, part in enumerate(self.union.parts)
            ]
        )
        touched = np.flatnonzero(scores)
        scores[touched] = (scores[touched] / self._norm(touched)).astype(np.float32)
        return scores

    def scores_many(self, queries: Sequence[SparseVector]) -> np.ndarray:
        return (
            np.stack([self.scores(query) for query in queries])
            if queries
            else np.zeros((0, self.size), np.float32)
        )

    def scores_at(self, query: SparseVector, rows: np.ndarray, read=None) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        scores = np.zeros(len(rows), dtype=np.float32)
        for number, part, positions, own in self.union._split(rows):
            scores[positions] = part.lexical.scores_at(self._own_query(query, number), own)
        return (np.asarray(scores, dtype=np.float64) / self._norm(rows)).astype(np.float32)

    def document_counts(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        if self._columns is None:
            self._columns = {term: column for column, term in enumerate(self.vocabulary)}
        return column_counts(self._columns, self.frequencies, terms), self.live

    def shared_terms(self, query: SparseVector, row: int, limit: int = 3) -> list[str]:
        number, part, own = self._locate(row)
        return part.lexical.shared_terms(self._own_query(query, number), own, limit)


class _SharedEncoder:
    """The index's query encoder, loaded on first use, remembering the last texts it encoded: the
    base and every segment encode a search text (or a seed from another part) once between them."""

    REMEMBERED = 64

    def __init__(self, load):
        self._load, self._encoder = load, None
        self._known: dict[tuple[str, ...], object] = {}

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = self._load()
        return self._encoder

    @property
    def max_tokens(self) -> int:
        return self.encoder.max_tokens

    @property
    def dimension(self) -> int:
        return self.encoder.dimension

    def token_spans(self, text: str):
        return self.encoder.token_spans(text)

    def encode(self, texts: list[str]):
        key = tuple(texts)
        if key not in self._known:
            if len(self._known) >= self.REMEMBERED:
                self._known.pop(next(iter(self._known)))
            self._known[key] = self.encoder.encode(list(texts))
        return self._known[key]
