"""An opened index: look papers up, find papers like them, search by text."""

from __future__ import annotations

import functools
import warnings
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np

from ..arrays import sorted_union
from ..corpus.papers import InputWarning, Paper, normalise_text, text_key
from ..corpus.summary import paper_brief
from ..embed import loading
from ..embed.static_encoder import CONFIG_FILE as STATIC_CONFIG
from ..embed.windows import Chunking, Encoder, pool_windows, split_windows
from ..errors import IndexMismatchError, InputError, OptionError, PaperNotFoundError, shell_command
from ..index.catalogue import index_bytes
from ..index.home import resolve_index_dir
from ..index.keys import Keys
from ..index.layout import (
    COLUMN_MAX,
    FAISS,
    LEXICAL_ARRAYS,
    OFFSETS,
    PAPERS,
    QUERY_ENCODER,
    STOP_WORDS,
    VECTORS,
    VOCABULARY,
)
from ..index.lexical import (
    LexicalIndex,
    SparseVector,
    best_rows,
    combine,
    read_columns,
    read_ranges,
)
from ..index.stored import StoredIndex, corrupt, open_stored
from .profiles import best_topic, profile_scores, seed_clusters
from .ranking import (
    MODES,
    POOL,
    combine_dense,
    dense_weight_for,
    fuse,
    order_by_score,
    seed_weights,
    select,
)


@dataclass(frozen=True)
class Recommendation:
    """One paper in a result list."""

    rank: int
    score: float
    paper: Paper
    why: tuple[str, ...] = ()
    # With several seeds: the one to three seeds whose scores made this paper's (its best), each
    # (ID, handle, embedding cosine with this paper), closest first.
    because: tuple[tuple[str, str, float], ...] = ()

    @property
    def id(self) -> str:
        return self.paper.id

    def to_dict(self) -> dict:
        brief = paper_brief(self.paper)
        return {
            "rank": self.rank,
            "id": brief.pop("id"),
            "score": round(float(self.score), 4),
            **brief,
            "why": list(self.why),
            "because": [
                {"id": seed, "handle": handle, "cosine": round(cosine, 4)}
                for seed, handle, cosine in self.because
            ],
        }


def load_query_encoder(stored: StoredIndex, model: str) -> Encoder:
    """The encoder the index's papers were encoded with, light where it can be: its ONNX export (at
    the index's precision) or static embeddings when there are, else the full model (fp32 only)."""
    if stored.has(f"{QUERY_ENCODER}/model.onnx") or stored.has(f"{QUERY_ENCODER}/{STATIC_CONFIG}"):
        return loading.load_exported_encoder(stored.file(QUERY_ENCODER), model)
    if (
        stored.manifest.get("precision", "fp32") != "fp32"
        or stored.manifest.get("query_encoder") == "static"
    ):
        raise corrupt(
            stored,
            QUERY_ENCODER,
            "is missing (its queries need the encoder its papers were encoded with)",
        )
    return loading.load_encoder(model)


class PaperIndex:
    """An opened index: look papers up, find papers like them, search by text."""

    def __init__(self, stored: StoredIndex):
        self.stored = stored
        self.manifest = stored.manifest
        self._size = int(self.manifest["paper_count"])
        # Memory-mapped and searched by bisection: opening reads no list of every key.
        self.keys = Keys(
            functools.partial(_load_key_array, stored),
            lambda name: stored.has(f"keys/{name}.npy"),
            self._size,
            functools.partial(_damaged_key_array, stored),
        )
        self._offsets = stored.load_array(OFFSETS, mmap=True)
        if self._offsets.shape != (self._size + 1,):
            raise corrupt(stored, OFFSETS, "does not list every paper")
        self._ids: list[str] | None = None
        self._handles: list[str] | None = None
        self._vectors: np.ndarray | None = None
        self._faiss = None
        self._lexical: LexicalIndex | None = None
        self._query_encoder: Encoder | None = None
        # The hybrid ranking's weight of the dense cosine: the fast tier has its own.
        self.dense_weight = dense_weight_for(
            self.manifest.get("model", ""), self.manifest.get("precision", "fp32")
        )
        self._rows_by_key: dict[str, dict[str, int]] = {}  # indexes without digest tables
        self._rows_by_citation_key: dict[str, list[int]] | None = None  # nor citation keys
        self._aliases: dict[str, str] | None = (
            None  # nor the other IDs of papers (read on first use)
        )

    @classmethod
    def open(
        cls, index: str | Path | None = None, model: str | None = None, verify: bool = False
    ) -> PaperIndex:
        """Open an index by name or path; refuse it if it was built with another model."""
        index_dir = resolve_index_dir(index)
        stored = open_stored(index_dir, verify=verify)
        try:
            built_with = stored.manifest.get("model")
            if model is not None and model != built_with:
                target = () if index is None else ("--index", str(index))
                command = shell_command("papers", "build", *target, "--model", model)
                raise IndexMismatchError(
                    f"index {index_dir} was built with model '{built_with}', not '{model}': run"
                    f" `{command}` to rebuild it"
                )
            if model is not None and _replaced_model_folder(
                model, stored.manifest.get("model_identity")
            ):
                target = () if index is None else ("--index", str(index))
                command = shell_command("papers", "build", *target, "--model", model)
                raise IndexMismatchError(
                    f"index {index_dir} was built with the model that was in '{model}', and that"
                    f" folder holds another model now: run `{command}` to rebuild it"
                )
            return cls(stored)
        except BaseException:
            stored.close()
            raise

    def __len__(self) -> int:
        return self._size

    def id_of(self, row: int) -> str:
        """The ID of the paper at a row."""
        return self.keys.id_of(row)

    def row_of_id(self, paper_id: str) -> int | None:
        """The row of the paper with exactly this ID, None if the index holds none."""
        return self.keys.row_of_id(paper_id)

    @property
    def ids(self) -> list[str]:
        """Every paper's ID in row order (reads them all: for listing and export; lookups use
        `resolve`)."""
        if self._ids is None:
            self._ids = self.keys.all_ids()
        return self._ids

    @property
    def handles(self) -> list[str]:
        """Every paper's handle in row order (reads them all)."""
        if self._handles is None:
            self._handles = self.keys.all_handles()
        return self._handles

    def close(self) -> None:
        """Release the index files (the version pin and memory maps); safe to call twice."""
        self._vectors = None
        self._faiss = None
        self._lexical = None
        self._query_encoder = None
        self._rows_by_key = {}
        self._rows_by_citation_key = None
        self.stored.close()

    def __enter__(self) -> PaperIndex:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- stored data, loaded on first use

    @property
    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            vectors = self.stored.load_array(VECTORS, mmap=True)
            if vectors.shape != (len(self), self.manifest["dimension"]):
                raise corrupt(self.stored, VECTORS, f"has shape {vectors.shape}")
            self._vectors = vectors
        return self._vectors

    def _faiss_search(self, queries: np.ndarray, depth: int) -> np.ndarray:
        """The rows FAISS finds nearest each query (-1 past the end); a forged index's rows out of
        range are damage."""
        from ..errors import IndexCorruptError
        from ..index.ann import search_index

        try:
            return search_index(self.faiss_index, queries, depth)[1]
        except IndexCorruptError as error:
            raise corrupt(self.stored, FAISS, f"is damaged or forged ({error})") from None

    @property
    def faiss_index(self):
        if self._faiss is None:
            self._faiss = self.stored.load_faiss(FAISS)
            if self._faiss.ntotal != len(self):
                raise corrupt(
                    self.stored, FAISS, f"holds {self._faiss.ntotal} vectors for {len(self)} papers"
                )
        return self._faiss

    @property
    def lexical(self) -> LexicalIndex:
        if self._lexical is None:
            arrays = {
                name: self.stored.load_array(f"lexical/{name}.npy", mmap=True)
                for name in LEXICAL_ARRAYS
            }
            if self.stored.has(
                COLUMN_MAX
            ):  # not in indexes built before it: they are scored in full
                arrays["column_max"] = self.stored.load_array(COLUMN_MAX)
                if arrays["column_max"].shape != arrays["idf"].shape:
                    raise corrupt(self.stored, COLUMN_MAX, "does not match the vocabulary")
            self._lexical = LexicalIndex(
                arrays,
                # Not a lambda over self: a cycle would keep the index version pinned
                # (stored.open_stored).
                load_vocabulary=functools.partial(self.stored.load_json, VOCABULARY),
                stop_words=self.stored.load_json(STOP_WORDS),
                # A query's postings are read with pread: mapped, they would pull whole
                # page-cache folios into the process (stored.ArrayReader).
                columns=functools.partial(
                    read_columns,
                    self.stored.array_reader("lexical/csc_indices.npy"),
                    self.stored.array_reader("lexical/csc_data.npy"),
                ),
                rows=functools.partial(
                    read_ranges,
                    self.stored.array_reader("lexical/csr_indices.npy"),
                    self.stored.array_reader("lexical/csr_data.npy"),
                ),
            )
            if self._lexical.size != len(self):
                raise corrupt(
                    self.stored, "lexical/csr_indptr.npy", "does not match the paper count"
                )
        return self._lexical

    @property
    def tiebreak(self) -> np.ndarray:
        """Each row's position in ID order (stored at build time): equal scores are listed by ID."""
        return self.keys.rank

    def cosines(self, rows: np.ndarray, query: np.ndarray, read_rows=None) -> np.ndarray:
        """Cosine of each row's vector with a unit query, as float32.

        Summed in float64: a float32 matrix-vector product rounds differently
        depending on which other rows are in the batch, and a paper's score must
        not depend on its fellow candidates (related-work relies on this).
        `read_rows(rows)`, if given, reads the vectors instead of the memory map."""
        vectors, query = (
            np.asarray(self.vectors),
            np.asarray(query, dtype=np.float64),
        )  # memmap indexing is slow
        read_rows = read_rows or vectors.__getitem__
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(len(rows), dtype=np.float32)
        for start in range(0, len(rows), 8192):  # bounded float64 copies, however many rows
            block = rows[start : start + 8192]
            out[start : start + len(block)] = read_rows(block).astype(np.float64) @ query
        if not np.isfinite(out).all():
            self.vectors_at(rows)  # names the damaged row
            raise corrupt(self.stored, VECTORS, "gives scores that are not numbers")
        return out

    def _candidate_cosines(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """`cosines` for a few scattered candidates: their vectors read with pread, not mapped
        (a map would pull a page-cache folio into the process per candidate)."""
        _ = self.vectors  # checks the shape
        with self.stored.array_reader(VECTORS).reading_ranges() as read:
            return self.cosines(rows, query, lambda block: read(block, block + 1))

    def _query_cosines(self, query: _Query, rows: np.ndarray) -> np.ndarray:
        """`cosines` of a query's candidates: read with pread for one query (`_candidate_cosines`),
        from the
        memory map for a batch (`like_each`, which reads many); the same float64 sums either way.
        Each row's
        vector is read once a query (the pool and the ranked candidates overlap)."""
        rows = np.asarray(rows, dtype=np.int64)
        known = query.cosines
        missing = np.array([row for row in rows.tolist() if row not in known], dtype=np.int64)
        if len(missing):
            assert query.dense is not None  # only queries with an embedding have cosines
            if query.batched:
                found = self.cosines(missing, query.dense)
            elif query.vectors is not None:  # a topic of several: vectors read once for all of them
                self._read_vectors(missing, query.vectors)
                found = self.cosines(
                    missing,
                    query.dense,
                    lambda block: np.stack([query.vectors[row] for row in block.tolist()]),
                )
            else:
                found = self._candidate_cosines(missing, query.dense)
            known.update(zip(missing.tolist(), found.tolist()))
        return np.array([known[row] for row in rows.tolist()], dtype=np.float32)

    def _read_vectors(self, rows: np.ndarray, into: dict) -> None:
        """Read the vectors of `rows` not yet `into` (row -> vector) with pread, as
        `_candidate_cosines` does."""
        wanted = [row for row in rows.tolist() if row not in into]
        if wanted:
            _ = self.vectors  # checks the shape
            with self.stored.array_reader(VECTORS).reading() as read:
                into.update((row, read(row, row + 1)[0]) for row in wanted)

    def vectors_at(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of these rows (float32), refused if damage left NaN or infinity in
        them.

        Files over the hashing threshold are not re-hashed on every load (stored.CHEAP_HASH_BYTES),
        so the rows a command uses are checked here: a NaN would otherwise print as a score or
        crash FAISS."""
        vectors = np.asarray(self.vectors[np.asarray(rows, dtype=np.int64)], dtype=np.float32)
        finite = np.isfinite(vectors).all(axis=1)
        if not finite.all():
            row = int(np.asarray(rows)[np.flatnonzero(~finite)[0]])
            raise corrupt(
                self.stored,
                VECTORS,
                f"holds values that are not numbers (NaN or infinity) in row {row}",
            )
        return vectors

    def papers_at(self, rows: Sequence[int]) -> list[Paper]:
        return [
            Paper.from_dict(row) for row in self.stored.read_jsonl_rows(PAPERS, self._offsets, rows)
        ]

    def papers(self) -> Iterator[Paper]:
        """Every paper, in index order."""
        for row in self.stored.iter_jsonl(PAPERS):
            yield Paper.from_dict(row)

    def list_papers(self, where: Sequence[str] = (), limit: int | None = None) -> list[Paper]:
        """The papers, in index order, that meet every `--where` condition (`["year>=2020"]`, as
        `papers build` takes them), the first `limit` of them. Stops reading once `limit` are found.
        """
        from ..corpus.where import parse_where

        if limit is not None and limit < 1:
            raise OptionError(f"limit must be at least 1, got {limit}", "limit")
        condition = parse_where(where)
        found = []
        present: set[str] = set()  # the fields of the conditions some paper has a value for
        for paper in self.papers():
            if condition is None or condition.matches(paper):
                found.append(paper)
                if limit is not None and len(found) >= limit:
                    break
            elif not found:
                present |= condition.fields_present(paper)
        if (
            condition is not None
            and not found
            and len(self)
            and present != condition.fields_present_all()
        ):
            # Nothing matched because no paper has the field at all: say so, not an empty list.
            raise InputError(
                f"no paper matches the condition {condition}:"
                f" {condition.no_match_reason(present, len(self))}"
            )
        return found

    # -- lookups

    def resolve(self, reference: str) -> int:
        """The row of a paper given by ID, handle (any case) or unique ID prefix."""
        reference = reference.strip()
        if not reference:
            raise PaperNotFoundError(
                "empty paper reference: give an ID or handle (see `papers list`)"
            )
        matches = self.keys.matching_rows(reference)
        if len(matches) == 1:
            return matches[0]
        if not matches:
            kept = self._alias_of(reference)
            if kept is not None:
                return kept
            if len(self) <= CLOSEST_SCAN:
                close = _closest(reference, self.ids, self.handles)
            else:  # a scan of every name takes seconds at 1M papers (difflib)
                close = _closest(reference, *self.keys.names_near(reference, CLOSEST_NEAR))
            hint = f": closest matches: {', '.join(close)}" if close else ": see `papers list`"
            if " " in reference:  # words, not a name: the user may want a text search
                import shlex

                hint += (
                    "; to rank papers by this text, run `papers search"
                    f" {shlex.quote(_printable(reference))}`"
                )
            raise PaperNotFoundError(f"no paper '{_printable(reference)}' in the index{hint}")
        shown = ", ".join(
            f"{self.keys.id_of(row)} ({self.keys.handle_of(row)})" for row in matches[:5]
        )
        more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
        raise PaperNotFoundError(
            f"'{_printable(reference)}' matches {len(matches)} papers: {shown}{more}: give more of"
            " the ID"
        )

    def _alias_of(self, reference: str) -> int | None:
        """The row of the paper another ID of it names: "arXiv:2401.00001" for the paper
        2401.00001, or an ID of a record the build kept as the same paper (index/keys.py)."""
        from ..corpus.identifiers import bare_arxiv_id
        from ..index.keys import ALIASES

        bare = bare_arxiv_id(reference)
        if bare != reference:
            row = self.keys.row_of_id(bare)
            if row is not None:
                return row
        if self._aliases is None:
            stored = self.stored.load_json(ALIASES) if self.stored.has(ALIASES) else {}
            self._aliases = {alias.casefold(): kept for alias, kept in stored.items()}
        kept = self._aliases.get(reference.casefold()) or self._aliases.get(bare.casefold())
        return None if kept is None else self.keys.row_of_id(kept)

    def find_papers(self, papers: Sequence[Paper]) -> list[int | None]:
        """For each paper (read from a file, say), its row in the index, or None when the
        index does not hold it: the same ID, else the same arXiv ID or DOI (from its URL or
        ID), else the same text (title and abstract, ignoring case and spacing); the first
        such row. Looked up on disk: reads only the papers whose digest matches."""
        found: list[int | None] = [self.keys.row_of_id(paper.id) for paper in papers]
        for i, paper in enumerate(papers):
            for table, key_of in PAPER_KEYS.items():
                if found[i] is not None:
                    break
                key = key_of(paper)
                if key:
                    found[i] = self._row_with(table, key)
        return found

    def read_papers(self, path: str | Path) -> list[Paper]:
        """The papers of a file in any input format, to give as `papers=` (`--from-file`).

        An entry without an abstract (a reading list of keys and titles) is kept when the
        index holds it (`find_papers`: its ID, arXiv ID or DOI); one that matches nothing
        cannot be embedded, so it is skipped, with one warning for the file."""
        from ..corpus.papers import read_papers

        lacking: list[tuple[Paper, str]] = []
        papers = read_papers([path], without_abstract=lacking)
        found = self.find_papers([paper for paper, _ in lacking]) if lacking else []
        skipped = [where for (_, where), row in zip(lacking, found) if row is None]
        if skipped and not papers and len(skipped) == len(lacking):
            raise InputError(
                f"{path}: none of its {len(lacking)} records has an abstract or names a paper of"
                " the index (by key, DOI or arXiv ID): give their abstracts"
            )
        if skipped:
            records = "record" if len(skipped) == 1 else "records"
            warnings.warn(
                f"{path}: {len(skipped)} {records} without an abstract and not in the index skipped"
                f" (the first: {skipped[0]})",
                InputWarning,
                stacklevel=2,
            )
        # Those with abstracts, then those without that the index holds.
        kept = {id(paper) for (paper, _), row in zip(lacking, found) if row is not None}
        return papers + [paper for paper, _ in lacking if id(paper) in kept]

    def _row_with(self, table: str, key: str) -> int | None:
        candidates = self.keys.rows_with(table, key)
        if (
            candidates is None
        ):  # an index built before the digest tables: one pass, kept for later calls
            if not self._rows_by_key:
                self._rows_by_key = {name: {} for name in PAPER_KEYS}
                for row, stored in enumerate(self.papers()):
                    for name, key_of in PAPER_KEYS.items():
                        self._rows_by_key[name].setdefault(key_of(stored), row)
            return self._rows_by_key[table].get(key)
        for row, stored in zip(
            candidates, self.papers_at(candidates)
        ):  # a 64-bit digest may collide
            if PAPER_KEYS[table](stored) == key:
                return row
        return None

    def citation_key_rows(self, folded: str) -> list[int]:
        """Rows whose casefolded citation key (`corpus.citation.citation_key`) is `folded`, in row
        order."""
        rows = self.keys.rows_with_citation_key(folded)
        if rows is not None:
            return rows
        if self._rows_by_citation_key is None:  # an index built before the table: one pass, kept
            from ..corpus.citation import citation_key

            self._rows_by_citation_key = defaultdict(list)
            for row, stored in enumerate(self.papers()):
                self._rows_by_citation_key[citation_key(stored).casefold()].append(row)
        return self._rows_by_citation_key.get(folded, [])

    def show(self, reference: str) -> Paper:
        """The stored record of one paper."""
        return self.papers_at([self.resolve(reference)])[0]

    def papers_page(
        self, offset: int = 0, limit: int = 50, where: Sequence[str] = ()
    ) -> tuple[list[Paper], int | None]:
        """Papers in index order: `limit` of them after the first `offset` (of those matching
        `where`,
        `year>=2020`, `venue=*ICML*` or `category=cs.LG` as for `papers build --where`), and the
        offset of the next page
        (None after the last). Without `where` it reads only the page's papers."""
        from ..corpus.where import parse_where

        if offset < 0:
            raise InputError(f"offset must be at least 0, got {offset}")
        if limit < 1:
            raise InputError(f"limit must be at least 1, got {limit}")
        condition = parse_where(list(where))
        if condition is None:
            rows = range(min(offset, len(self)), min(offset + limit, len(self)))
            return self.papers_at(rows), offset + limit if offset + limit < len(self) else None
        found: list[Paper] = []
        matched = 0
        for paper in self.papers():
            if not condition.matches(
                _PaperFields({"year": paper.year, "venue": paper.venue}, paper.categories)
            ):
                continue
            matched += 1
            if matched > offset + limit:
                return found, offset + limit
            if matched > offset:
                found.append(paper)
        return found, None

    def explain(
        self, reference: str, seed: str | None = None, text: str | None = None, limit: int = 10
    ) -> Explanation:
        """Why a paper is listed for a seed paper or a search text: the terms they share most and
        the
        two cosines the hybrid score fuses (embeddings, TF-IDF); without either, the paper's own top
        terms.
        """
        if seed is not None and text is not None:
            raise InputError("give a seed paper or a search text to explain against, not both")
        row = self.resolve(reference)
        own = self.lexical.row(row)
        order = np.lexsort((own.indices, -own.values))[:limit]
        top = tuple(self.lexical.vocabulary[int(own.indices[i])] for i in order)
        if seed is None and text is None:
            return Explanation(self.papers_at([row])[0], None, None, None, None, (), top)
        if seed is not None:
            seed_row = self.resolve(seed)
            dense, lexical = self.vectors_at([seed_row])[0], self.lexical.row(seed_row)
            against = self.papers_at([seed_row])[0]
        else:
            assert text is not None  # not both None: returned above
            if not text.strip():
                raise InputError("empty search text: give some words to search for")
            check_text(text, "search text")
            dense, lexical, against = self.encode_query(text), self.lexical.transform(text), None
        dense_cosine = float(self.cosines(np.array([row]), dense)[0])
        lexical_cosine = float(self.lexical.scores_at(lexical, np.array([row]))[0])
        shared = tuple(self.lexical.shared_terms(lexical, row, limit))
        return Explanation(
            self.papers_at([row])[0],
            against,
            text,
            round(dense_cosine, 4),
            round(lexical_cosine, 4),
            shared,
            top,
        )

    def info(self) -> dict:
        """What the index holds and how it was built."""
        manifest = dict(self.manifest)
        manifest.pop("files", None)
        manifest["path"] = str(self.stored.index_dir)
        manifest["bytes"] = index_bytes(self.manifest)
        return manifest

    def verify(self) -> None:
        """Re-hash every stored file against the manifest (raises IndexCorruptError)."""
        self.stored.verify(full=True)

    # -- recommendations

    def like(
        self,
        *references: str,
        k: int = 10,
        not_: Sequence[str] = (),
        exclude: Sequence[str] = (),
        min_score: float | None = None,
        diverse: float | None = None,
        why: bool = False,
        mode: str = "hybrid",
        papers: Sequence[Paper] = (),
        candidates: Sequence[int] | None = None,
    ) -> list[Recommendation]:
        """Papers like the given ones (and unlike those in `not_`), never the seeds themselves;
        `candidates`: rank these rows only (a feed's new papers), each scored as it would be anyway.

        `papers` are more seeds as `Paper` records (`read_papers(["reading-list.bib"])`):
        those the index holds (same ID or same text, see `find_papers`) count as
        their stored selves and are left out of the results; the others are
        embedded now with the index's query encoder, windowed as the papers were."""
        if not references and not papers:
            raise PaperNotFoundError(
                "no paper given: name at least one paper ID or handle, or give papers from a file"
            )
        check_options(k, min_score, diverse, mode)
        papers = list(papers)
        found = self.find_papers(papers) if papers else []
        positives = list(
            dict.fromkeys(
                [self.resolve(r) for r in references] + [row for row in found if row is not None]
            )
        )
        outside = list(
            {normalise_text(p.text): p for p, row in zip(papers, found) if row is None}.values()
        )
        negatives = list(dict.fromkeys(self.resolve(r) for r in not_))
        both = [reference for reference in not_ if self.resolve(reference) in positives]
        if both:
            raise OptionError(
                f"'{both[0]}' is given both as a paper to be like and as one to be unlike: drop one"
                " of them",
                "not_",
            )
        return self.like_rows(
            positives,
            negatives,
            k=k,
            excluded=self._exclusions(exclude),
            min_score=min_score,
            diverse=diverse,
            why=why,
            mode=mode,
            outside=outside,
            candidates=candidates,
        )

    def like_rows(
        self,
        positives: Sequence[int],
        negatives: Sequence[int] = (),
        k: int = 10,
        excluded: Collection[int] = frozenset(),
        min_score: float | None = None,
        diverse: float | None = None,
        why: bool = False,
        mode: str = "hybrid",
        outside: Sequence[Paper] = (),
        candidates: Sequence[int] | None = None,
    ) -> list[Recommendation]:
        """`like` for papers given by row, and papers not in the index (`outside`, embedded now).

        Several seeds: each seed is a query of its own (the `negatives` subtracted from it,
        Rocchio), and
        a candidate's score mixes the mean of its PROFILE_TOP_K best seeds' scores with the seeds'
        centroid's (`profiles.profile_scores`): a profile on several topics finds papers of each,
        and a
        paper close to a couple of seeds beats one vaguely near all (docs/profiles.md). `why`: also
        the
        seeds behind each paper (`Recommendation.because`)."""
        check_options(k, min_score, diverse, mode)
        positives, negatives, outside = list(positives), list(negatives), list(outside)
        seeds = set(positives) | set(negatives)
        queries = self._per_seed_queries(positives, negatives, mode, why, outside)
        centroid = None
        if len(queries) > 1:  # mixed in: the seeds' centroid (`profiles.profile_scores`)
            # the per-seed queries of papers from outside the index, each with its vector
            extra = [query.seed for query in queries[len(positives) :] if query.seed is not None]
            centroid = self._seed_query(positives, negatives, mode, why, outside, extra)
        terms = None
        if (
            why and len(queries) > 1
        ):  # the terms `why` shows: those shared with the seeds as a whole
            terms = self._seed_query(positives, negatives, "lexical", why, outside).lexical
        named = None
        if why and len(queries) > 1:
            handles = self.handles
            named = [(self.ids[row], handles[row]) for row in positives] + [
                (paper.id, paper.handle or paper.id) for paper in outside
            ]
        return self._rank(
            queries,
            k,
            seeds,
            set(excluded) | seeds,
            min_score,
            diverse,
            why,
            mode,
            terms,
            named,
            centroid,
            candidates,
        )

    def like_each(
        self, rows: Sequence[int], k: int = 10, why: bool = False
    ) -> list[list[Recommendation]]:
        """`like_rows([row], k=k, why=why)` for each of `rows`: the same lists, with the dense
        candidates of all of them found by one batched FAISS search (related-work); each list is
        then
        re-ranked over its own candidates only."""
        check_options(k, None, None, "hybrid")
        rows = [int(row) for row in rows]
        if not rows:
            return []
        queries = [self._seed_query([row], [], "hybrid", why) for row in rows]
        # Deep enough for `_rank`'s candidates (a seed excluded) and `_scores`' pool.
        depth = min(len(self), max(POOL, 4 * (k + 1)) + 1 + POOL_MARGIN)
        # hybrid queries of stored papers: each has its embedding and its TF-IDF terms
        dense = np.stack(cast(list[np.ndarray], [query.dense for query in queries]))
        found = self._faiss_search(dense, depth)
        results = []
        step = max(1, LEXICAL_CELLS // len(self))
        for batch in (
            range(start, min(start + step, len(rows))) for start in range(0, len(rows), step)
        ):
            terms = cast(list[SparseVector], [queries[i].lexical for i in batch])
            lexical = self.lexical.scores_many(terms)
            for i, scores in zip(batch, lexical):
                query = queries[i]
                query.dense_found, query.batched, query.lexical_scores = found[i], True, scores
                results.append(
                    self._rank([query], k, {rows[i]}, {rows[i]}, None, None, why, "hybrid")
                )
                # its scores of every paper are not kept past its list (the slot is not read again)
                queries[i] = None  # type: ignore[call-overload]
        return results

    def score_rows(
        self,
        query_rows: int | Sequence[int],
        rows: Sequence[int] | np.ndarray,
        mode: str = "hybrid",
        dense_weight: float | None = None,
        profile: str = "seeds",
    ) -> np.ndarray:
        """Scores of `rows` against the paper at `query_rows` (or the papers, a profile), as `like`
        scores
        them (used by evaluation). `profile="topics"` (seeds clustered, the best cluster's centroid)
        and
        `"centroid"` (one centroid) score several papers as earlier versions of `like` did, for
        comparison.
        """
        check_options(1, None, None, mode)
        if profile not in PROFILES:
            raise OptionError(
                f"unknown profile '{profile}': use one of {', '.join(PROFILES)}", "profile"
            )
        query_rows = [int(row) for row in np.atleast_1d(query_rows).tolist()]
        rows = np.asarray(rows, dtype=np.int64)
        if profile == "centroid":
            queries = [self._seed_query(query_rows, [], mode, False)]
        elif profile == "seeds":
            queries = self._per_seed_queries(query_rows, [], mode, False, [])
            if len(queries) > 1:
                seeds = set(query_rows)
                per_seed = np.stack(
                    [self._scores(query, rows, seeds, mode, dense_weight) for query in queries]
                )
                centroid = self._scores(
                    self._seed_query(query_rows, [], mode, False), rows, seeds, mode, dense_weight
                )
                return profile_scores(per_seed, centroid)
        else:
            queries = self._topic_queries(query_rows, [], mode, False, [])
        return best_topic(
            np.stack(
                [
                    self._scores(query, rows, set(query_rows), mode, dense_weight)
                    for query in queries
                ]
            )
        )

    def seed_scores(
        self,
        positives: Sequence[int],
        rows: Sequence[int] | np.ndarray,
        mode: str = "hybrid",
        dense_weight: float | None = None,
    ) -> np.ndarray:
        """[seeds, rows]: each seed's scores of `rows` as a one-seed `like` gives them, every seed
        left out of
        every seed's pool (the per-seed methods scripts/tune_profiles.py compares)."""
        check_options(1, None, None, mode)
        positives = [int(row) for row in positives]
        rows = np.asarray(rows, dtype=np.int64)
        return np.stack(
            [
                self._scores(
                    self._seed_query([row], [], mode, False),
                    rows,
                    set(positives),
                    mode,
                    dense_weight,
                )
                for row in positives
            ]
        )

    def search(
        self,
        text: str,
        k: int = 10,
        exclude: Sequence[str] = (),
        min_score: float | None = None,
        diverse: float | None = None,
        why: bool = False,
        mode: str = "hybrid",
    ) -> list[Recommendation]:
        """Papers about a free text."""
        if not text or not text.strip():
            raise InputError("empty search text: give some words to search for")
        check_text(text, "search text")
        check_options(k, min_score, diverse, mode)
        dense_query = self.encode_query(text) if mode != "lexical" else None
        lexical_query = self.lexical.transform(text) if (mode != "dense" or why) else None
        if mode == "lexical" and lexical_query is not None and len(lexical_query.indices) == 0:
            raise InputError(self._nothing_to_match(text))
        return self._rank(
            [_Query(dense_query, lexical_query)],
            k,
            set(),
            self._exclusions(exclude),
            min_score,
            diverse,
            why,
            mode,
        )

    def _nothing_to_match(self, text: str) -> str:
        """Why a text has no TF-IDF terms: stop words only (`the of and`), or words no paper has."""
        from ..index.lexical import analyse

        shown = _printable(text.strip())
        if not analyse(text, self.lexical.stop_words):
            return (
                f"no words are left to match in '{shown}' once common words (the, of, and, ...) and"
                " single letters are dropped: give words that say what the papers are about, or"
                " use mode hybrid"
            )
        return (
            f"no paper of the index has any of the words of '{shown}': try other words, or mode"
            " hybrid (which also ranks by meaning)"
        )

    def use_query_encoder(self, encoder: Encoder) -> None:
        """Encode free texts with `encoder`, one of this index's model and precision (the parts of
        an
        index with segments share one, query/segmented.py)."""
        self._query_encoder = encoder

    def encode_query(self, text: str, head: int = 0) -> np.ndarray:
        """A free text as one vector, windowed like the papers were (`head`: characters of a title
        that
        starts the text, repeated at the start of every window as the build does)."""
        if (
            self._query_encoder is None
        ):  # loaded on first use: `like` of stored papers never needs it
            self._query_encoder = load_query_encoder(self.stored, self.manifest["model"])
        chunking = self._chunking()
        encoder = self._query_encoder
        if chunking.strategy == "truncate":
            pieces = [(text, 1)]
        else:
            title_head = head if chunking.strategy == "sentences" else None
            pieces = split_windows(
                text,
                encoder.token_spans(text),
                encoder.max_tokens,
                chunking.overlap,
                head=title_head,
            )
        vectors = encoder.encode([piece for piece, _ in pieces])
        return pool_windows(vectors, [count for _, count in pieces])

    def _chunking(self) -> Chunking:
        return Chunking.from_dict(
            {key: value for key, value in self.manifest["chunking"].items() if key != "max_tokens"}
        )

    def _exclusions(self, exclude: Sequence[str]) -> set[int]:
        # IDs already read may include papers outside this index: those need no excluding.
        wanted = {value.strip() for value in exclude if value.strip()}
        if not wanted:
            return set()
        return self.keys.rows_named(sorted(wanted))

    def _seed_query(
        self,
        positives: list[int],
        negatives: list[int],
        mode: str,
        why: bool,
        outside: Sequence[Paper] = (),
        outside_vectors: list[np.ndarray] | None = None,
    ) -> _Query:
        """The query of `like`: Rocchio over the seeds (stored positives, papers from outside the
        index,
        negatives, in that order). `outside_vectors`: the outside papers' embeddings, if already
        made.
        """
        weights = seed_weights(len(positives) + len(outside), len(negatives))
        dimension = self.manifest["dimension"]
        dense_query = None
        if mode != "lexical" or not outside:
            if outside_vectors is None:
                outside_vectors = self._encode_papers(outside)
            outside_vectors = [vector[None, :] for vector in outside_vectors]
            dense_query = combine_dense(
                np.vstack(
                    [self.vectors_at(positives).reshape(-1, dimension)]
                    + outside_vectors
                    + [self.vectors_at(negatives).reshape(-1, dimension)]
                ),
                weights,
            )
        lexical_query = None
        if mode != "dense" or why:
            lexical_query = combine(
                [self.lexical.row(row) for row in positives]
                + [self.lexical.transform(p.text) for p in outside]
                + [self.lexical.row(row) for row in negatives],
                weights,
            )
        return _Query(dense_query, lexical_query)

    def _encode_papers(self, papers: Sequence[Paper]) -> list[np.ndarray]:
        """Papers from outside the index, windowed as the build windows papers (the title in every
        window)."""
        return [self.encode_query(paper.text, paper.head) for paper in papers]

    def _per_seed_queries(
        self,
        positives: list[int],
        negatives: list[int],
        mode: str,
        why: bool,
        outside: list[Paper],
    ) -> list[_Query]:
        """One Rocchio query a seed (stored positives, then papers from outside the index), each
        with all
        the negatives; one seed: its query alone."""
        if len(positives) + len(outside) == 1:
            return [self._seed_query(positives, negatives, mode, why, outside)]
        outside_vectors = (
            self._encode_papers(outside) if mode != "lexical" else [None] * len(outside)
        )
        queries: list[_Query] = []
        shared: dict = {}  # the seeds rank the same candidates: each vector is read once
        dimension = self.manifest["dimension"]
        for row in positives:
            queries.append(self._seed_query([row], negatives, mode, why))
            queries[-1].seed = self.vectors_at([row]).reshape(dimension)
        for paper, vector in zip(outside, outside_vectors):
            queries.append(
                self._seed_query(
                    [], negatives, mode, why, [paper], None if vector is None else [vector]
                )
            )
            queries[-1].seed = vector
        for query in queries:
            query.vectors = shared
        return queries

    def _topic_queries(
        self,
        positives: list[int],
        negatives: list[int],
        mode: str,
        why: bool,
        outside: list[Paper],
    ) -> list[_Query]:
        """The seeds grouped into topics (`seed_clusters` of their embeddings), one Rocchio query
        each
        (with all the negatives). In lexical mode papers from outside the index are not embedded, so
        seeds with such papers are one topic there."""
        if len(positives) + len(outside) == 1 or (mode == "lexical" and outside):
            return [self._seed_query(positives, negatives, mode, why, outside)]
        outside_vectors = self._encode_papers(outside)
        vectors = np.vstack(
            [self.vectors_at(positives).reshape(-1, self.manifest["dimension"])]
            + [vector[None, :] for vector in outside_vectors]
        )
        queries: list[_Query] = []
        shared: dict = {}  # the topics rank the same candidates: each vector is read once
        for topic in seed_clusters(vectors):
            stored = [positives[i] for i in topic if i < len(positives)]
            extra = [i - len(positives) for i in topic if i >= len(positives)]
            query = self._seed_query(
                stored,
                negatives,
                mode,
                why,
                [outside[i] for i in extra],
                [outside_vectors[i] for i in extra],
            )
            query.vectors = shared
            queries.append(query)
        return queries

    def _pool(
        self, query: _Query, seeds: set[int], size: int, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """The `size` best papers (seeds left out) by embedding cosine and by TF-IDF, each best
        first
        (the TF-IDF side only in hybrid and lexical mode)."""
        n = len(self)
        dense_rows = lexical_rows = np.zeros(0, dtype=np.int64)
        key = (size, frozenset(seeds), mode)
        if key in query.pools:
            return query.pools[key]
        if query.dense is not None and mode != "lexical":
            found = self._dense_found(query, min(n, size + len(seeds) + POOL_MARGIN))
            found = np.array([row for row in found.tolist() if row not in seeds], np.int64)
            # Ordered by the exact cosine (float64, each row on its own): the candidates do not
            # depend on
            # how FAISS rounded, so `like_each`'s batched search finds those `like`'s own search
            # finds.
            exact = self._query_cosines(query, found)
            dense_rows = found[order_by_score(found, exact, self.tiebreak)][:size]
        if mode != "dense":
            wanted = min(n, size + len(seeds))
            rows, scores = self._lexical_found(query, wanted, dense_rows)
            best = best_rows(
                scores, wanted
            )  # equal scores: lower rows, whichever way they were found
            top = rows[best][np.lexsort((self.tiebreak[rows[best]], -scores[best]))]
            lexical_rows = np.array(
                [row for row in top.tolist() if row not in seeds][:size], np.int64
            )
        query.pools[key] = (dense_rows, lexical_rows)
        return dense_rows, lexical_rows

    def _dense_found(self, query: _Query, depth: int) -> np.ndarray:
        """FAISS's `depth` nearest rows to the query (those of `like_each`'s batched search if it
        went deep enough)."""
        found = query.dense_found
        if found is None or len(found) < depth:
            assert query.dense is not None  # dense candidates are only asked for an embedded query
            found = self._faiss_search(query.dense[None, :], depth)[0]
        return found[:depth][found[:depth] >= 0]

    def _lexical_found(self, query: _Query, depth: int, also) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) in ascending rows: the `depth` best rows by TF-IDF and the rows `also`,
        with their
        exact scores (`LexicalIndex.top`, or `like_each`'s scores of every row); kept for the next
        call.
        """
        also = sorted_union(also)
        known = query.lexical_found
        if known is not None and known[2] >= depth and _holds(known[0], also):
            return known[0], known[1]
        if query.lexical_scores is not None:
            rows = sorted_union(best_rows(query.lexical_scores, depth), also)
            found = rows, query.lexical_scores[rows]
        else:
            assert query.lexical is not None  # only a query with TF-IDF terms asks for these
            found = self.lexical.top(query.lexical, depth, also)
        query.lexical_found = (*found, depth)
        return found

    def _scores(
        self,
        query: _Query,
        rows: np.ndarray,
        seeds: set[int],
        mode: str,
        dense_weight: float | None = None,
    ) -> np.ndarray:
        """The score each of `rows` is ranked by (-1..1). In hybrid mode both cosines are normalised
        over
        the query's pool (POOL papers from each side, seeds left out) and fused (`ranking.fuse`), so
        a
        paper's score does not depend on which other papers are ranked with it."""
        if mode == "dense":
            return self._query_cosines(query, rows)
        if mode == "lexical":
            found, scores = self._lexical_found(query, 1, rows)
            return scores[np.searchsorted(found, rows)]
        dense_rows, lexical_rows = self._pool(query, seeds, POOL, mode)
        pool = sorted_union(dense_rows, lexical_rows)
        everything = sorted_union(pool, rows)
        found, lexical = self._lexical_found(query, 1, everything)
        fused = fuse(
            self._query_cosines(query, everything),
            lexical[np.searchsorted(found, everything)],
            mode,
            np.searchsorted(everything, pool),
            self.dense_weight if dense_weight is None else dense_weight,
        )
        return fused[np.searchsorted(everything, rows)]

    def _rank(
        self,
        queries: list[_Query],
        k: int,
        seeds: set[int],
        excluded: set[int],
        min_score: float | None,
        diverse: float | None,
        why: bool,
        mode: str,
        terms: SparseVector | None = None,
        named: list[tuple[str, str]] | None = None,
        centroid: _Query | None = None,
        candidates: Sequence[int] | None = None,
    ) -> list[Recommendation]:
        """The top `k` papers for one query, or for several (a profile's seeds, mixed with their
        centroid
        by `profiles.profile_scores`, over the candidates of them all). `terms`: the
        TF-IDF terms `why` shows (default: the first query's); `named`: (ID, handle) of each query's
        seed,
        to say which seeds each paper is there because of; `centroid`: the seeds' centroid's query,
        mixed in
        (`profiles.profile_scores`) and its candidates ranked too."""
        check_options(k, min_score, diverse, mode)
        fetch = max(POOL, 4 * (k + len(excluded)))
        found: set[int] = set()
        pooled = queries + ([centroid] if centroid is not None else [])
        if candidates is not None:  # scores do not depend on the other candidates (`_scores`)
            found, pooled = {int(row) for row in candidates}, []
        for query in pooled:
            dense_rows, lexical_rows = self._pool(query, seeds, fetch, mode)
            found.update(dense_rows.tolist(), lexical_rows.tolist())
        rows = np.array(sorted(found - excluded), dtype=np.int64)
        if len(rows) == 0:
            return []
        per_seed = None
        if len(queries) == 1:
            scores = self._scores(queries[0], rows, seeds, mode)
        else:
            per_seed = np.stack([self._scores(query, rows, seeds, mode) for query in queries])
            if centroid is not None:
                scores = profile_scores(per_seed, self._scores(centroid, rows, seeds, mode))
            else:
                scores = best_topic(per_seed)
        all_rows = rows
        rows, scores = select(rows, scores, self.tiebreak, self.vectors, k, min_score, diverse)
        papers = self.papers_at(rows.tolist())
        terms = terms if terms is not None or not why else queries[0].lexical
        results = []
        for rank, (row, score, paper) in enumerate(zip(rows, scores, papers), start=1):
            shared: tuple[str, ...] = ()
            if why:
                assert terms is not None  # `why` queries always carry their TF-IDF terms
                shared = tuple(self.lexical.shared_terms(terms, int(row)))
            because: tuple[tuple[str, str, float], ...] = ()
            if named is not None and per_seed is not None:
                because = self._because(
                    queries, per_seed[:, int(np.searchsorted(all_rows, row))], int(row), named
                )
            results.append(Recommendation(rank, float(score), paper, shared, because))
        return results

    def _because(
        self,
        queries: list[_Query],
        seed_scores: np.ndarray,
        row: int,
        named: list[tuple[str, str]],
    ) -> tuple[tuple[str, str, float], ...]:
        """The seeds whose scores made a paper's (its BECAUSE_SEEDS best), closest by cosine
        first."""
        best = np.argsort(-seed_scores, kind="stable")[:BECAUSE_SEEDS]
        found = []
        for i in best.tolist():
            seed = queries[i].seed
            if seed is None:  # lexical mode, a paper from outside the index: never embedded
                cosine = float(seed_scores[i])
            else:
                vector = self.vectors_at([row]).reshape(-1).astype(np.float64)
                seed = np.asarray(seed, dtype=np.float64)
                cosine = float(
                    vector @ seed / max(np.linalg.norm(vector) * np.linalg.norm(seed), 1e-12)
                )
            found.append((*named[i], cosine))
        found.sort(key=lambda item: -item[2])
        # A seed far from the paper (under half the closest one's cosine) is not what it is there
        # because of.
        return tuple(item for i, item in enumerate(found) if i == 0 or item[2] >= 0.5 * found[0][2])


@dataclass(frozen=True)
class Explanation:
    """Why a paper is listed (`PaperIndex.explain`): against a seed paper or a search text, the
    terms
    they share most and the cosines of their embeddings and of their TF-IDF vectors."""

    paper: Paper
    seed: Paper | None
    text: str | None
    dense_cosine: float | None
    lexical_cosine: float | None
    shared_terms: tuple[str, ...]
    top_terms: tuple[str, ...]  # the paper's own highest TF-IDF terms

    def to_dict(self) -> dict:
        return {
            **paper_brief(self.paper),
            "seed": None if self.seed is None else self.seed.id,
            "text": self.text,
            "dense_cosine": self.dense_cosine,
            "lexical_cosine": self.lexical_cosine,
            "shared_terms": list(self.shared_terms),
            "top_terms": list(self.top_terms),
        }


@dataclass(frozen=True)
class _PaperFields:
    """A stored paper as `--where` conditions read a record (an index built before categories were
    kept has none)."""

    fields: dict
    categories: tuple = ()


def _identifier(paper: Paper) -> str:
    from ..corpus.identifiers import (
        work_identifier,
    )  # imported on use: a cold `like` never needs it

    return work_identifier(paper.url, paper.id)


# What else makes a paper read from a file one the index holds, in the order tried after its ID
# (`find_papers`): the same arXiv ID or DOI, else the same title and abstract.
PAPER_KEYS = {
    "identifier": _identifier,
    "text": lambda paper: text_key(paper.title, paper.abstract),
}
# A reference that names no paper: up to this many papers, every name is compared with it for the
# "closest matches" of the error (difflib: about 0.5 s at 50k papers, 10 s at 1M); past it, the
# CLOSEST_NEAR names on each side of it and of its first half in sorted order (a typo that leaves
# the name sorting far from it, early in the name, then finds no suggestion).
CLOSEST_SCAN = 50_000
CLOSEST_NEAR = 50
# The seeds "because of" names at most (`Recommendation.because`): those with the best scores of a
# paper.
BECAUSE_SEEDS = 3
# How `score_rows` scores several papers: as `like` does (grouped into topics), or as one centroid.
PROFILES = ("seeds", "topics", "centroid")
# TF-IDF scores (one a query and paper) `like_each` holds at once: 16 MB whatever the corpus.
LEXICAL_CELLS = 1 << 22
# FAISS neighbours fetched beyond those needed, re-ordered by exact cosine (`PaperIndex._pool`).
POOL_MARGIN = 16


def _printable(text: str) -> str:
    """A reference as it can be shown on one line (a newline in it shows as \\n)."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def check_text(text: str, what: str) -> None:
    """Refuse text holding lone surrogates: bytes that were not UTF-8 (Python decodes command-line
    arguments with surrogateescape), which no tokenizer accepts."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = text[error.start]
        byte = f" (byte 0x{ord(bad) - 0xDC00:02x})" if 0xDC80 <= ord(bad) <= 0xDCFF else ""
        raise InputError(
            f"{what} is not valid UTF-8{byte}: use a UTF-8 terminal or re-type the text"
        ) from None


def _holds(rows: np.ndarray, wanted: np.ndarray) -> bool:
    """Whether the sorted `rows` hold every one of the sorted `wanted`."""
    if len(wanted) == 0:
        return True
    at = np.searchsorted(rows, wanted)
    return bool(at[-1] < len(rows) and np.array_equal(rows[at], wanted))


@dataclass
class _Query:
    """What a ranking compares papers with: an embedding and TF-IDF terms, and what was found for
    them."""

    dense: np.ndarray | None
    lexical: SparseVector | None
    lexical_scores: np.ndarray | None = None  # every row's, when scored in a batch (`like_each`)
    dense_found: np.ndarray | None = (
        None  # FAISS's nearest rows, when searched in a batch (`like_each`)
    )
    lexical_found: tuple | None = None  # (rows, scores, depth) `_lexical_found` found
    pools: dict = field(default_factory=dict)  # (size, seeds, mode) -> the candidates `_pool` found
    cosines: dict = field(default_factory=dict)  # row -> its cosine with `dense`, once read
    batched: bool = (
        False  # one of many queries (`like_each`): candidate vectors read from the memory map
    )
    vectors: dict | None = (
        None  # row -> stored vector, shared by the topics of one profile (`_topic_queries`)
    )
    seed: np.ndarray | None = (
        None  # the embedding of the one seed this query is of (`_per_seed_queries`)
    )


def check_options(k: int, min_score: float | None, diverse: float | None, mode: str) -> None:
    """Refuse ranking options out of range (InputError), before any work is done."""
    if mode not in MODES:
        raise OptionError(f"unknown mode '{mode}': use one of {', '.join(MODES)}", "mode")
    if k < 1:
        raise OptionError(f"k must be at least 1, got {k}", "k")
    if min_score is not None and not -1.0 <= min_score <= 1.0:
        raise OptionError(
            "min_score must be between -1 and 1 (scores are cosine similarities), "
            f"got {min_score:g}",
            "min_score",
        )
    if diverse is not None and not 0.0 <= diverse <= 1.0:
        raise OptionError(
            f"diverse must be between 0 and 1 (1 = relevance only), got {diverse:g}", "diverse"
        )


def _load_key_array(stored: StoredIndex, name: str) -> np.ndarray:
    return stored.load_array(f"keys/{name}.npy", mmap=True)


def _damaged_key_array(stored: StoredIndex, name: str, problem: str) -> Exception:
    return corrupt(stored, f"keys/{name}.npy", problem)


def _closest(
    reference: str, ids: Sequence[str], handles: Sequence[str], limit: int = 3
) -> list[str]:
    """Names close to a reference that matched nothing (the error path only)."""
    import difflib

    folded = {handle.casefold(): handle for handle in handles}
    folded.update({paper_id.casefold(): paper_id for paper_id in ids})
    names = difflib.get_close_matches(reference.casefold(), list(folded), n=limit, cutoff=0.6)
    return [folded[name] for name in names]


def _replaced_model_folder(model: str, built_identity: str | None) -> bool:
    """Whether `model` is a folder whose files are no longer those the index was built with (its
    identity, the hash of its files, differs). A named model is not hashed: lookups stay light."""
    if not built_identity or not Path(model).expanduser().is_dir():
        return False
    from ..embed import export_cache

    return export_cache.model_identity(model) != built_identity
