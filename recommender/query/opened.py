"""The opened index's stored data: its papers, vectors, FAISS and TF-IDF indexes and query
encoder, each loaded on first use, and the hooks an index of several parts overrides
(`query/segmented.py`)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..corpus.papers import Paper
from ..embed.windows import Chunking, Encoder, pool_windows, split_windows
from ..errors import IndexMismatchError, InputError, shell_command
from ..index.home import resolve_index_dir
from ..index.keys import stored_keys
from ..index.layout import (
    COLUMN_MAX,
    FAISS,
    LEXICAL_ARRAYS,
    OFFSETS,
    PAPERS,
    STOP_WORDS,
    VECTORS,
    VOCABULARY,
)
from ..index.lexical import LexicalIndex, read_columns, read_ranges
from ..index.stored import StoredIndex, corrupt, open_stored
from .ranking import dense_weight_for

Opened = TypeVar("Opened", bound="OpenedIndex")


class OpenedIndex:
    """An opened index's stored data, read on first use; `PaperIndex` adds the queries.

    The hooks an index of several parts (`query/segmented.py`) overrides to answer row by row
    are `faiss_search`, `candidate_cosines`, `read_vectors`, `cosines`, `vectors_at`,
    `papers_at` and the ID lookups; `new_query_encoder` makes the encoder of free texts."""

    def __init__(self, stored: StoredIndex):
        self.stored = stored
        self.manifest = stored.manifest
        self._size = int(self.manifest["paper_count"])
        # Memory-mapped and searched by bisection: opening reads no list of every key.
        self.keys = stored_keys(stored)
        self._offsets = stored.load_array(OFFSETS, mmap=True)
        if self._offsets.shape != (self._size + 1,):
            raise corrupt(stored, OFFSETS, "does not list every paper")
        self._ids: list[str] | None = None
        self._handles: list[str] | None = None
        self._vectors: np.ndarray | None = None
        self._faiss = None
        self._lexical: LexicalIndex | None = None
        self._query_encoder: Encoder | None = None
        self._title_only: np.ndarray | None = None
        # The hybrid ranking's weight of the dense cosine: the fast tier has its own.
        self.dense_weight = dense_weight_for(
            self.manifest.get("model", ""), self.manifest.get("precision", "fp32")
        )

    @classmethod
    def open(
        cls: type[Opened],
        index: str | Path | None = None,
        model: str | None = None,
        verify: bool = False,
    ) -> Opened:
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
        self.stored.close()

    def __enter__(self: Opened) -> Opened:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- stored data, loaded on first use

    @property
    def title_only(self) -> np.ndarray | None:
        """A mask of the rows whose paper has its title alone for text (`Paper.text_from` "title
        only"), read once on first use; None when no paper of the index has (the ranking then has
        nothing to correct, `ranking.title_only_shift`)."""
        if self._title_only is None:
            self._title_only = self.title_only_rows()
        return self._title_only if self._title_only.any() else None

    def title_only_rows(self) -> np.ndarray:
        """Every row's "title only", from the papers records (one without `text_from`, as every
        record of an index built before it was kept, has an abstract)."""
        return title_only_rows(self.stored, len(self))

    @property
    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            vectors = self.stored.load_array(VECTORS, mmap=True)
            if vectors.shape != (len(self), self.manifest["dimension"]):
                raise corrupt(self.stored, VECTORS, f"has shape {vectors.shape}")
            self._vectors = vectors
        return self._vectors

    def faiss_search(self, queries: np.ndarray, depth: int) -> np.ndarray:
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
                column_ranges=functools.partial(
                    read_ranges,
                    self.stored.array_reader("lexical/csc_indices.npy"),
                    self.stored.array_reader("lexical/csc_data.npy"),
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

    def candidate_cosines(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """`cosines` for a few scattered candidates: their vectors read with pread, not mapped
        (a map would pull a page-cache folio into the process per candidate)."""
        _ = self.vectors  # checks the shape
        with self.stored.array_reader(VECTORS).reading_ranges() as read:
            return self.cosines(rows, query, lambda block: read(block, block + 1))

    def read_vectors(self, rows: np.ndarray, into: dict) -> None:
        """Read the vectors of `rows` not yet `into` (row -> vector) with pread, as
        `candidate_cosines` does."""
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

    def info(self) -> dict:
        """What the index holds and how it was built."""
        manifest = dict(self.manifest)
        manifest.pop("files", None)
        manifest["path"] = str(self.stored.index_dir)
        from ..index.catalogue import index_bytes

        manifest["bytes"] = index_bytes(self.manifest)
        return manifest

    def verify(self) -> None:
        """Re-hash every stored file against the manifest (raises IndexCorruptError)."""
        self.stored.verify(full=True)

    def use_query_encoder(self, encoder: Encoder) -> None:
        """Encode free texts with `encoder`, one of this index's model and precision (the parts of
        an index with segments share one, query/segmented.py)."""
        self._query_encoder = encoder

    def encode_query(self, text: str, head: int = 0) -> np.ndarray:
        """A free text as one vector, windowed like the papers were (`head`: characters of a title
        that starts the text, repeated at the start of every window as the build does)."""
        if (
            self._query_encoder is None
        ):  # loaded on first use: `like` of stored papers never needs it
            self._query_encoder = self.new_query_encoder()
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

    def encode_sentences(self, sentences: list[str]) -> np.ndarray:
        """Short texts (sentences) as one vector each, by the query encoder (loaded on first use;
        a text past the model's length is cut as the model cuts it)."""
        if self._query_encoder is None:
            self._query_encoder = self.new_query_encoder()
        return self._query_encoder.encode(list(sentences))

    def new_query_encoder(self) -> Encoder:
        """Hook: the encoder of free texts, made on the first one (`PaperIndex` loads the
        index's own, `paper_index.load_query_encoder`)."""
        raise NotImplementedError("an opened index's queries need PaperIndex")

    def _chunking(self) -> Chunking:
        return Chunking.from_dict(
            {key: value for key, value in self.manifest["chunking"].items() if key != "max_tokens"}
        )


def title_only_rows(stored: StoredIndex, count: int) -> np.ndarray:
    """[count] bools: the papers records (PAPERS) whose `text_from` is "title only". Only the lines
    naming the field are parsed (the stored record leaves it out for an abstract)."""
    import json

    from ..corpus.text import TITLE_ONLY

    mask = np.zeros(count, dtype=bool)
    kinds = stored.manifest.get("text_from")
    if not isinstance(kinds, dict) or not kinds.get(TITLE_ONLY):
        return mask  # none (an index built before texts had kinds had abstracts only)
    with open(stored.file(PAPERS), "rb") as handle:
        for row, line in enumerate(handle):
            if row >= count:
                break
            if b'"text_from"' in line:
                try:
                    text_from = json.loads(line).get("text_from")
                except ValueError:
                    raise corrupt(stored, PAPERS, f"row {row} cannot be read") from None
                mask[row] = text_from == TITLE_ONLY
    return mask


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


def _replaced_model_folder(model: str, built_identity: str | None) -> bool:
    """Whether `model` is a folder whose files are no longer those the index was built with (its
    identity, the hash of its files, differs). A named model is not hashed: lookups stay light."""
    if not built_identity or not Path(model).expanduser().is_dir():
        return False
    from ..embed import export_cache

    return export_cache.model_identity(model) != built_identity
