"""The stages of a build (index/build.py: build_index runs them in turn): read the papers, merge
the duplicates, write the papers' files, build the search index, the lexical index and the map
layout, and describe the whole in the manifest. Encoding (build.encode_papers) sits between the
papers' files and the search index."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import __version__
from ..corpus.papers import Paper, PaperSet, scan_papers
from .keys import ALIASES, key_tables
from .layout import (
    ADDED_TERMS,
    COLLECTIONS,
    COLLECTIONS_LEFT_OUT,
    COLUMN_MAX,
    FAISS,
    KEY_ARRAYS,
    MAP_LAYOUT,
    PAPERS,
    STOP_WORDS,
    VECTORS,
    VOCABULARY,
)
from .lexical import settings as lexical_settings
from .map_layout import MANIFEST_KEY as LAYOUT_KEY
from .request import BuildHooks, BuildRequest
from .spool import PaperSpool, Written, write_papers
from .stored import ArrayReader, StoredIndex, open_stored
from .writer import ArrayFile, IndexWriter

# A stored map layout holds every vector in memory for t-SNE: past this many papers it is not made.
MAP_LAYOUT_PAPERS = 100_000
# With a `chunk_size`, the TF-IDF postings handled at once are this many a paper (an abstract has
# ~60 distinct terms), else lexical.CHUNK_POSTINGS.
POSTINGS_A_PAPER = 64


def read_inputs(request: BuildRequest, index_dir: Path, spool: PaperSpool) -> tuple[PaperSet, dict]:
    """Stage 1, read: the request's papers spooled (those that pass the checks of an index's
    inputs, index/checks.py): its `own_papers`, else the index's own for an upgrade without
    inputs, else its inputs. Returns the papers kept, and the items of reference managers'
    collections not made papers ({collection: {reason: count}}, the tags say so)."""
    left_out: dict[str, dict[str, int]] = {}
    reading: Generator[Paper, None, None]
    if request.own_papers is not None:
        reading = request.own_papers()
    elif request.encoder.upgrade and not request.inputs:
        reading = stored_papers(index_dir)
    else:
        reading = scan_papers(
            request.inputs,
            list(request.where),
            keep_withdrawn=request.keep_withdrawn,
            left_out=left_out,
        )
    with contextlib.closing(reading):  # a failed spool write leaves no input file open
        return spool.read(reading, index_dir), left_out


def stored_papers(index_dir: Path) -> Generator[Paper, None, None]:
    """The papers of the index's live version, as it stores them, one at a time (the inputs of an
    upgrade)."""
    with (
        open_stored(index_dir, verify=False) as stored,
        open(stored.file(PAPERS), encoding="utf-8") as rows,
    ):
        for line in rows:
            yield Paper.from_dict(json.loads(line))


@dataclass(frozen=True)
class Kept:
    """The papers an index keeps, in order: their IDs, their handles, and the other IDs of the
    papers read twice ({other ID: kept ID})."""

    ids: list[str]
    handles: list[str]
    aliases: dict[str, str]


def merge_duplicates(chosen: PaperSet, aliases: Mapping[str, str] | None = None) -> Kept:
    """Stage 2, merge duplicates: the same paper read twice (the same text, arXiv ID or DOI) is kept
    once, its other ID an alias (with the `aliases` given, a compaction's); each paper kept gets
    its handle."""
    handles = chosen.handles()  # drops the aliases that a paper kept has as its own ID
    merged = {**aliases, **chosen.aliases} if aliases else dict(chosen.aliases)
    return Kept(chosen.ids, handles, merged)


def write_paper_files(
    writer: IndexWriter, spool: PaperSpool, kept: Kept, tfidf, left_out: dict
) -> Written:
    """Stage 3, the papers' files: papers.jsonl and its offsets (each text given to the TF-IDF
    builder as it goes), the reference managers' collections (reading/tags.py) and their items
    left out."""
    written = write_papers(writer, spool, kept.handles, tfidf)
    if written.collections:
        writer.save_json(COLLECTIONS, written.collections)
    if left_out:
        writer.save_json(COLLECTIONS_LEFT_OUT, left_out)
    return written


def write_keys(writer: IndexWriter, kept: Kept, written: Written) -> None:
    """The key tables by which a paper is found by ID, handle, citation key or text (index/keys)."""
    for name, table in key_tables(
        kept.ids,
        kept.handles,
        written.citation_keys,
        written.text_digests,
        written.identifier_digests,
    ):
        if name in KEY_ARRAYS:
            writer.save_array(f"keys/{name}.npy", table)
        del table


@dataclass(frozen=True)
class SearchIndex:
    """What the manifest records of the search index built."""

    kind: str
    params: dict
    reason: str
    description: str
    trained_on: int

    def record(self) -> dict:
        return {
            "kind": self.kind,
            "params": self.params,
            "reason": self.reason,
            "description": self.description,
            "trained_on": self.trained_on,
        }


def build_search_index(
    writer: IndexWriter,
    vectors: ArrayFile,
    index_type: str,
    previous: StoredIndex | None,
    hooks: BuildHooks,
) -> SearchIndex:
    """Stage 5, the search index: FAISS of `index_type` ("auto": by the corpus size, index.ann),
    the previous build's extended where papers were only appended."""
    from .ann import choose_index, index_description

    choice = choose_index(len(vectors), vectors.shape[1], index_type)
    hooks.phase(f"building the {choice.kind} search index")
    faiss_index, trained_on = faiss_index_for(vectors, choice, previous)
    writer.save_faiss(FAISS, faiss_index)
    described = index_description(faiss_index)
    return SearchIndex(choice.kind, choice.params, choice.reason, described, trained_on)


def write_lexical(
    writer: IndexWriter,
    tfidf,
    files: contextlib.ExitStack,
    aliases: dict[str, str],
    base_terms=None,
) -> int:
    """Stage 6, the lexical index: the TF-IDF matrices of the texts the builder was given, its
    vocabulary and stop words, and the aliases of the papers read twice; for a segment weighed in
    its base's terms (`base_terms`, lexical.FixedTerms), the terms the base lacks. Returns the
    number of terms."""

    def array_file(name: str, length: int, dtype) -> ArrayFile:
        return files.enter_context(
            contextlib.closing(writer.array_file(f"lexical/{name}.npy", (length,), dtype))
        )

    arrays, vocabulary, stop_words = tfidf.finish(array_file)
    for name in ("idf", "csr_indptr", "csc_indptr"):
        writer.save_array(f"lexical/{name}.npy", arrays[name])
    writer.save_array(COLUMN_MAX, arrays["column_max"])
    writer.save_json(VOCABULARY, vocabulary)
    if base_terms is not None:  # a segment: the terms its base lacks
        writer.save_json(ADDED_TERMS, vocabulary[len(base_terms.vocabulary) :])
    if aliases:  # the other IDs of papers read twice (index/keys.py)
        writer.save_json(ALIASES, aliases)
    writer.save_json(STOP_WORDS, stop_words)
    return len(vocabulary)


def write_map_layout(
    writer: IndexWriter, vectors: ArrayFile, wanted: bool, hooks: BuildHooks
) -> str | None:
    """Stage 7, the map layout, where `wanted` (t-SNE of every vector, index/map_layout.py): returns
    the projection's name, None where none is stored."""
    from .map_layout import project_2d

    count = len(vectors)
    if not wanted or not count:
        return None
    if count > MAP_LAYOUT_PAPERS:
        hooks.tell(
            f"no map layout stored: {count:,} papers are more than it is made for"
            f" (at most {MAP_LAYOUT_PAPERS:,})"
        )
        return None
    hooks.phase("map layout")
    coordinates, projection = project_2d(
        vectors.read(0, count), on_phase=lambda name: hooks.phase(name)
    )
    writer.save_array(MAP_LAYOUT, coordinates)
    return projection


@dataclass(frozen=True)
class Built:
    """What the stages made, as the manifest describes it."""

    encoder: dict  # embed.choice.EncoderChoice.record
    dimension: int
    count: int
    fingerprint: str
    search: SearchIndex
    terms: int
    query_encoder: str | None
    encoded: int
    reused: int
    projection: str | None
    text_from: dict[str, int]  # how many papers' texts are of each kind (Paper.text_from)


def manifest_of(request: BuildRequest, built: Built, built_at: str) -> dict:
    """Stage 8, write: the manifest that describes the index (writer.commit adds its files)."""
    manifest = {
        "model": built.encoder["model"],
        "model_identity": built.encoder["model_identity"],
        "built_by": request.built_by,
        "precision": built.encoder["precision"],
        "dimension": built.dimension,
        "chunking": built.encoder["chunking"],
        "paper_count": built.count,
        "inputs_fingerprint": built.fingerprint,
        "package_version": __version__,
        "built_at": built_at,
        "index": built.search.record(),
        "lexical": {"terms": built.terms, **lexical_settings()},
        "query_encoder": built.query_encoder,
        "encoded": built.encoded,
        "reused": built.reused,
        # How many papers' texts are of each kind: a reader scans the papers records for the
        # title-only ones only when there are some.
        "text_from": built.text_from,
    }
    if built.projection is not None:
        manifest[LAYOUT_KEY] = built.projection
    return manifest


# An IVF index keeps the lists it was trained on while papers are appended,
# until the corpus has grown past this factor of the training size.
RETRAIN_GROWTH = 2.0


def faiss_index_for(vectors: ArrayFile, choice, previous: StoredIndex | None):
    """Extend the previous build's trained index when papers were only appended, else build anew.

    Returns the index and how many papers its clustering was trained on."""
    from .ann import ADD_BATCH, add_to_index, build_faiss_index

    if previous is not None and choice.kind != "flat":
        built = previous.manifest.get("index", {})
        old_count = previous.manifest["paper_count"]
        trained_on = built.get("trained_on") or old_count
        if (
            built.get("kind") == choice.kind
            and previous.manifest["dimension"] == vectors.shape[1]
            and old_count <= len(vectors) <= RETRAIN_GROWTH * trained_on
            and _same_rows(previous.array_reader(VECTORS), vectors, old_count, ADD_BATCH)
        ):
            index = previous.load_faiss(FAISS, writable=True)
            add_to_index(index, _RowsFrom(vectors, old_count))
            return index, trained_on
    return build_faiss_index(vectors, choice), len(vectors)


def _same_rows(stored: ArrayReader, vectors: ArrayFile, count: int, batch: int) -> bool:
    """Whether the stored vectors are the first `count` rows of `vectors`, compared a batch at a
    time."""
    if stored.shape != (count, vectors.shape[1]) or stored.dtype != vectors.dtype:
        return False
    with stored.reading() as read:
        return all(
            np.array_equal(
                read(start, min(start + batch, count)),
                vectors.read(start, min(start + batch, count)),
            )
            for start in range(0, count, batch)
        )


class _RowsFrom:
    """The rows of `vectors` from `first` on, as ann.Rows."""

    def __init__(self, vectors: ArrayFile, first: int):
        self.vectors, self.first = vectors, first
        self.shape = (vectors.shape[0] - first, *vectors.shape[1:])

    def read(self, start: int, stop: int) -> np.ndarray:
        return self.vectors.read(self.first + start, self.first + min(stop, self.shape[0]))

    def take(self, rows) -> np.ndarray:
        return self.vectors.take(np.asarray(rows, dtype=np.int64) + self.first)
