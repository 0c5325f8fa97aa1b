"""Building an index: read papers, embed them (reusing cached vectors), write FAISS + TF-IDF
atomically."""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .. import __version__
from ..corpus.citation import citation_key
from ..corpus.fulltext import TextKinds
from ..corpus.identifiers import work_identifier
from ..corpus.papers import Paper, scan_papers, text_key
from ..embed import export_cache, loading
from ..embed.choice import EncoderRequest, check_request, check_upgradable, choose_encoder
from ..embed.choice import exported_only as _exported_only
from ..embed.embedding_cache import CacheUnavailable, EmbeddingCache, read_legacy_vectors
from ..embed.models import TierAdvice, tier_advice
from ..embed.windows import Chunking, embed_texts, text_cache_key
from ..errors import EncodingInterrupted
from .changes import BuildChanges, build_changes, previous_papers
from .checks import run_checks
from .home import resolve_index_dir
from .keys import ALIASES, digest_records, key_tables
from .layout import (
    ADDED_TERMS,
    COLLECTIONS,
    COLLECTIONS_LEFT_OUT,
    COLUMN_MAX,
    FAISS,
    KEY_ARRAYS,
    MAP_LAYOUT,
    OFFSETS,
    PAPERS,
    QUERY_ENCODER,
    STOP_WORDS,
    VECTORS,
    VOCABULARY,
    check_index_folder,
    legacy_cache,
    remove_legacy_cache,
    remove_tree,
)
from .lexical import settings as lexical_settings
from .map_layout import MANIFEST_KEY as LAYOUT_KEY
from .map_layout import project_2d
from .stored import ArrayReader, StoredIndex, open_stored
from .writer import WRITE_ERRNOS, ArrayFile, IndexWriter, link_checked, write_error, writing


@dataclass(frozen=True)
class BuildReport:
    index_dir: Path
    papers: int
    encoded: int
    reused: int
    index_kind: str
    seconds: float
    # What changed since the version this build replaced (IDs; None for a first build, or when that
    # version is too old to say): papers new, papers whose text changed, papers no longer read.
    changes: BuildChanges | None = None
    # A tier that may serve this corpus better (embed.models.tier_advice): given on the first build
    # of an index with the default model where no model was asked for, else None.
    advice: TierAdvice | None = None
    # How many papers' texts are of each kind (Paper.text_from; fulltext.TextKinds)
    text_from: tuple[tuple[str, int], ...] = ()


def build_time() -> str:
    """When the index was built, as its manifest records it: now, or $SOURCE_DATE_EPOCH (UTC) where
    that is set, as reproducible builds do (the documentation's examples show a fixed time)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(int(epoch)))
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def build_index(
    inputs: Iterable[str | Path],
    index: str | Path | None = None,
    model: str | None = None,
    chunking: Chunking | None = None,
    index_type: str = "auto",
    progress: Callable[[int, int], None] | None = None,
    wait: bool = False,
    export_query_encoder: bool = True,
    on_phase: Callable[[str, int | None], None] | None = None,
    where: Sequence[str] = (),
    keep_withdrawn: bool = False,
    notice: Callable[[str], None] | None = None,
    engine: str = "local",
    device: str = "auto",
    built_by: str = "build",
    precision: str | None = None,
    upgrade: bool = False,
    chunk_size: int | None = None,
    own_papers: Callable[[], Generator[Paper, None, None]] | None = None,
    lexical_terms=None,
    map_layout: bool | None = None,
    aliases: dict[str, str] | None = None,
) -> BuildReport:
    """Read papers, embed them (reusing cached vectors), and write a new index atomically.

    `chunking` None keeps the chunking of the index being rebuilt (so an upgrade's new default
    does not re-encode every paper of an existing index), else takes the default `Chunking()`.

    `on_phase(name, total)` is told as each phase starts (reading, model export, encoding with the
    number of papers to encode, search index, TF-IDF, checksums); `progress(done, total)` as papers
    are encoded. `where` keeps only the papers matching every condition (`["category=cs.LG"]`, see
    corpus.where); withdrawn and desk-rejected OpenReview submissions are left out unless
    `keep_withdrawn`. `engine` "local" encodes in this process; "ray" on a Ray cluster (RAY_ADDRESS,
    else a local one started for the build), with the same vectors. `device` "auto" encodes on a
    CUDA GPU where torch (or the Ray cluster) has one, else on the CPU. `built_by` names the command
    the index is built for, in its manifest ("evaluate" rebuilds only its own). `model` None keeps
    the model of the index being rebuilt, else takes the default; `precision` "fp32", "int8",
    "int8-mixed" or "int8-smooth" (int8 ONNX weights: about twice as fast on a CPU, always on the
    CPU; int8-mixed keeps the weights that cost the ranking in fp32, int8-smooth moves activation
    outliers into the weights before quantising them); None keeps the precision of the index being
    rebuilt, else takes the model's default (embed.models: fp32, int8 for the quality tier). The
    model "static" is the fast tier (static embeddings distilled from the default model).
    embed.choice decides the encoder from these and the index's manifest.

    `upgrade` rebuilds an index made with the fast tier with `model` (default: the default model),
    from the index's own papers unless `inputs` are given; its fast version answers queries until
    the new one is committed, and a stopped upgrade resumes like any build.

    `own_papers` gives the papers to build from instead of `inputs`, called once the index is locked
    (a compaction: the live papers of the base and its segments, index/segments.py). `lexical_terms`
    (lexical.FixedTerms): weigh the TF-IDF rows in another index's vocabulary and IDF (a segment's).

    `map_layout` stores the whole index's map layout (index/map_layout.py: UMAP of every vector,
    which can cost more than the rest of the build) for `papers map --all` and the server's /map to
    read; None keeps the setting of the index being rebuilt (off for a new one).

    `aliases` ({other ID: kept ID}) are kept with those of the papers read twice (a compaction:
    the aliases of the base and its segments).

    Vectors reach the embedding cache in groups as they are encoded, so a build
    that is killed or interrupted keeps its work: the next one resumes, and tells
    `notice` so ("resuming: 4,864 of 8,000 papers already encoded"). On
    KeyboardInterrupt the index is left unchanged and EncodingInterrupted says how
    many papers' vectors the cache keeps.

    Memory stays nearly flat in the corpus size (docs/memory.md): the papers read are spooled to a
    scratch file of the build folder and handled `chunk_size` at a time (STREAM_PAPERS by default;
    the TF-IDF postings 64 times as many, else lexical.CHUNK_POSTINGS), vectors go straight to their
    file, and what is held for every paper is a few short strings (ID, handle, citation key) and its
    search index entry. The index files are the same, byte for byte, whatever `chunk_size`.
    """
    from ..errors import InputError, OptionError
    from .ann import choose_index, index_description
    from .lexical import TfidfBuilder

    started = time.perf_counter()
    request = EncoderRequest(model, precision, device, engine, upgrade, chunking)
    check_request(request)  # before any paper is read
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise InputError(f"chunk size must be a positive whole number, got {chunk_size!r}")
    if engine == "ray":
        from ..embed.ray_engine import require_ray

        require_ray()
    phase: Callable[[str, int | None], None] = on_phase or (lambda name, total: None)
    index_dir = resolve_index_dir(index)
    # Before the model is hashed: a folder of the user's is refused at once.
    check_index_folder(index_dir)
    if upgrade:
        if where and not inputs:
            raise OptionError(
                "an upgrade that keeps only some papers needs inputs: the index's "
                "own papers are upgraded as they are",
                "where",
            )
        with open_stored(index_dir, verify=False) as stored:
            check_upgradable(stored.manifest, index_dir)
    phase("reading papers", None)
    embedded = None
    count = 0
    left_out: dict[str, dict[str, int]] = {}  # collections' items not made papers: the tags say so
    with writing(index_dir, wait=wait) as writer, contextlib.ExitStack() as files:
        spool = _PaperSpool(
            files.enter_context(writer.scratch_file("papers.jsonl")), chunk_size or STREAM_PAPERS
        )
        # An upgrade without inputs re-encodes the index's own papers, read from its live version.
        reading = (
            _stored_papers(index_dir)
            if upgrade and not inputs
            else scan_papers(inputs, list(where), keep_withdrawn=keep_withdrawn, left_out=left_out)
        )
        # Read under the lock: no `add` publishes a segment this build would miss.
        if own_papers is not None:
            reading = own_papers()
        with contextlib.closing(reading):  # a failed spool write leaves no input file open
            ids, handles = spool.read(reading, index_dir)
        count = len(ids)
        previous = _live_build(index_dir)
        first_build = previous is None
        if map_layout is None:  # kept across rebuilds, compactions included
            map_layout = previous is not None and bool(previous.manifest.get(LAYOUT_KEY))
        previous_texts = previous_papers(previous) if previous is not None else None
        try:
            record = previous.manifest if previous is not None else None
            encoding = choose_encoder(request, record, notice, index_dir)
            model, precision, chunking = encoding.model, encoding.precision, encoding.chunking
            if previous is not None and not encoding.same_vectors(previous.manifest):
                previous.close()  # another model or precision: nothing of it is reused
                previous = None
            query_encoder = (
                prepare_query_encoder(model, writer, previous, phase, precision)
                if export_query_encoder or encoding.exported_only
                else None
            )
            tfidf = files.enter_context(
                TfidfBuilder(
                    writer.scratch_file,
                    chunk_size and chunk_size * POSTINGS_A_PAPER,
                    fixed=lexical_terms,
                )
            )
            written = _write_papers(writer, spool, handles, tfidf)
            if written.collections:  # a reference manager's folders: tags (reading/tags.py)
                writer.save_json(COLLECTIONS, written.collections)
            if left_out:
                writer.save_json(COLLECTIONS_LEFT_OUT, left_out)
            changes = build_changes(previous_texts, ids, written.text_digests)
            # The ONNX export encodes ~1.7x faster than torch with the same vectors
            # (scripts/bench_encode.py), so a build uses it for the papers too.
            engines = (
                contextlib.ExitStack()
            )  # a Ray session, stopped when encoding ends, even on failure
            export = writer.path(QUERY_ENCODER) if query_encoder is not None else None
            encoder = encoding.encoder(export, engines)

            def vector_file(rows: int, dimension: int) -> ArrayFile:
                return files.enter_context(
                    contextlib.closing(writer.array_file(VECTORS, (rows, dimension), np.float32))
                )

            with engines:
                embedded = _embed(
                    encoder,
                    spool.texts(),
                    chunking,
                    index_dir,
                    progress,
                    phase,
                    notice,
                    written.heads,
                    encoding.identity,
                    precision,
                    vector_file,
                )
            vectors = embedded.vectors
            fingerprint = written.fingerprint
            for name, table in key_tables(
                ids,
                handles,
                written.citation_keys,
                written.text_digests,
                written.identifier_digests,
            ):
                if name in KEY_ARRAYS:
                    writer.save_array(f"keys/{name}.npy", table)
                del table
            # Not held while the search index is built: then only its own memory grows with the
            # corpus.
            del ids, handles, written
            choice = choose_index(count, vectors.shape[1], index_type)
            phase(f"building the {choice.kind} search index", None)
            faiss_index, trained_on = _faiss_index_for(vectors, choice, previous)
            writer.save_faiss(FAISS, faiss_index)
            described = index_description(faiss_index)
            del faiss_index
            phase("TF-IDF", None)
            arrays, vocabulary, stop_words = tfidf.finish(
                lambda name, length, dtype: files.enter_context(
                    contextlib.closing(writer.array_file(f"lexical/{name}.npy", (length,), dtype))
                )
            )
            for name in ("idf", "csr_indptr", "csc_indptr"):
                writer.save_array(f"lexical/{name}.npy", arrays[name])
            writer.save_array(COLUMN_MAX, arrays["column_max"])
            writer.save_json(VOCABULARY, vocabulary)
            if lexical_terms is not None:  # a segment: the terms its base lacks
                writer.save_json(ADDED_TERMS, vocabulary[len(lexical_terms.vocabulary) :])
            kept_aliases = {**aliases, **spool.aliases} if aliases else spool.aliases
            if kept_aliases:  # the other IDs of papers read twice (index/keys.py)
                writer.save_json(ALIASES, kept_aliases)
            writer.save_json(STOP_WORDS, stop_words)
            del arrays
            projection: str | None = None
            if map_layout and count > MAP_LAYOUT_PAPERS:
                if notice is not None:
                    notice(
                        f"no map layout stored: {count:,} papers are more than it is made for"
                        f" (at most {MAP_LAYOUT_PAPERS:,})"
                    )
            elif map_layout and count:
                phase("map layout", None)
                coordinates, projection = project_2d(
                    vectors.read(0, count), on_phase=lambda name: phase(name, None)
                )
                writer.save_array(MAP_LAYOUT, coordinates)
                del coordinates
            record = encoding.record(encoder)
            manifest = {
                "model": record["model"],
                "model_identity": record["model_identity"],
                "built_by": built_by,
                "precision": record["precision"],
                "dimension": int(vectors.shape[1]),
                "chunking": record["chunking"],
                "paper_count": count,
                "inputs_fingerprint": fingerprint,
                "package_version": __version__,
                "built_at": build_time(),
                "index": {
                    "kind": choice.kind,
                    "params": choice.params,
                    "reason": choice.reason,
                    "description": described,
                    "trained_on": trained_on,
                },
                "lexical": {"terms": len(vocabulary), **lexical_settings()},
                "query_encoder": query_encoder,
                "encoded": embedded.encoded,
                "reused": embedded.reused,
            }
            if projection is not None:
                manifest[LAYOUT_KEY] = projection
        except KeyboardInterrupt as interrupt:
            if embedded is None or isinstance(interrupt, EncodingInterrupted):
                raise
            # Every vector is in the cache already: the next build only writes the index.
            raise EncodingInterrupted(kept=count, total=count) from None
        finally:
            if previous is not None:
                previous.close()  # unpinned, so the commit can remove the old version
        files.close()  # the scratch files removed, every array file complete
        phase("checksums", None)
        try:
            writer.commit(manifest)
        except KeyboardInterrupt:
            raise EncodingInterrupted(kept=count, total=count) from None
    # Only where no model was asked for (naming the default is a choice too), on the index's first
    # build, and for a CPU build: the projected cost is a CPU's.
    chosen = request.model is not None or upgrade or device == "cuda"
    advice = tier_advice(model, count) if first_build and not chosen else None
    return BuildReport(
        index_dir,
        count,
        embedded.encoded,
        embedded.reused,
        choice.kind,
        time.perf_counter() - started,
        changes,
        advice,
        spool.kinds.counts(),
    )


# A stored map layout holds every vector in memory for UMAP: past this many papers it is not made.
MAP_LAYOUT_PAPERS = 100_000
# Papers read back from the build's spool at a time (texts for the encoder, rows of papers.jsonl).
STREAM_PAPERS = 4096
# With a `chunk_size`, the TF-IDF postings handled at once are this many a paper (an abstract has
# ~60 distinct terms), else lexical.CHUNK_POSTINGS.
POSTINGS_A_PAPER = 64


class _PaperSpool:
    """The papers read, one JSON line each in a scratch file of the build, read back in order or by
    rows: a build never holds them all. Holds 8 bytes a paper (where its line starts)."""

    def __init__(self, stream, chunk: int):
        self.stream, self.chunk = stream, chunk
        self.offsets = array.array("q", [0])
        self.aliases: dict[str, str] = {}
        self._block: tuple[int, list[str]] = (-1, [])
        self.kinds = TextKinds()  # how many papers kept have texts of each kind

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def read(self, papers: Iterable[Paper], index_dir: Path) -> tuple[list[str], list[str]]:
        """Spool the papers as read (`scan_papers`: read_papers' choice of papers, warnings and
        errors) that pass the checks of an index's inputs (checks.CHECKS); returns the IDs and
        handles of the papers kept, in order."""
        accept, chosen = run_checks(index_dir, self.source_of)
        for paper in papers:
            if accept(paper):
                self.kinds.add(paper.text_from)
                line = (json.dumps(paper.to_dict(stored=True), ensure_ascii=False) + "\n").encode(
                    "utf-8"
                )
                self.stream.write(line)
                self.offsets.append(self.offsets[-1] + len(line))
        self.stream.flush()
        handles = chosen.handles()
        self.aliases = chosen.aliases
        return chosen.ids, handles

    def source_of(self, row: int) -> str:
        self.stream.flush()
        return self.papers(row, row + 1)[0].source

    def papers(self, start: int, stop: int) -> list[Paper]:
        """Papers start..stop-1 (without their handles)."""
        stop = min(stop, len(self))
        if start >= stop:
            return []
        data = os.pread(
            self.stream.fileno(), self.offsets[stop] - self.offsets[start], self.offsets[start]
        )
        return [Paper.from_dict(json.loads(line)) for line in data.decode("utf-8").splitlines()]

    def each(self) -> Iterator[Paper]:
        for start in range(0, len(self), self.chunk):
            yield from self.papers(start, start + self.chunk)

    def texts(self) -> Sequence[str]:
        return _SpooledTexts(self)

    def text_block(self, block: int) -> list[str]:
        """The texts of the block-th `chunk` papers (the last block asked for is kept)."""
        if self._block[0] != block:
            self._block = (
                block,
                [paper.text for paper in self.papers(block * self.chunk, (block + 1) * self.chunk)],
            )
        return self._block[1]


class _SpooledTexts(Sequence[str]):
    """Every paper's text, read back from the spool when asked for (a block of them at a time)."""

    def __init__(self, spool: _PaperSpool):
        self._spool = spool

    def __len__(self) -> int:
        return len(self._spool)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return [self[i] for i in range(*item.indices(len(self)))]
        if not -len(self) <= item < len(self):
            raise IndexError(item)
        item %= len(self)
        return self._spool.text_block(item // self._spool.chunk)[item % self._spool.chunk]


@dataclass
class _Written:
    """What a build keeps of each paper once papers.jsonl is written."""

    heads: np.ndarray  # how many characters of the text the title takes
    citation_keys: list[str]
    text_digests: np.ndarray  # keys.digest_records of the text keys
    identifier_digests: np.ndarray  # ... of the arXiv IDs or DOIs
    fingerprint: str
    collections: dict[str, list[str]]  # each collection path with its papers' IDs


def _write_papers(
    writer: IndexWriter, spool: _PaperSpool, handles: Sequence[str], tfidf
) -> _Written:
    """papers.jsonl and its offsets, from the spool a chunk at a time; each text goes to the TF-IDF
    builder, and what the key tables need of each paper is kept."""
    heads = array.array("i")
    citation_keys: list[str] = []
    text_keys, identifiers = [], []
    text_digests, identifier_digests = [], []
    fingerprint = InputsFingerprint()
    collections: dict[str, list[str]] = {}

    def rows() -> Iterator[dict]:
        for row, paper in enumerate(spool.each()):
            paper = replace(paper, handle=handles[row])
            fingerprint.add(paper)
            heads.append(paper.head)
            citation_keys.append(citation_key(paper))
            text_keys.append(text_key(paper.title, paper.abstract))
            identifiers.append(work_identifier(paper.url, paper.id))
            if len(text_keys) >= spool.chunk:
                text_digests.append(digest_records(text_keys))
                identifier_digests.append(digest_records(identifiers))
                text_keys.clear()
                identifiers.clear()
            tfidf.add(paper.text)
            for collection in paper.collections:
                collections.setdefault(collection, []).append(paper.id)
            yield paper.to_dict(stored=True)

    offsets = writer.save_jsonl(PAPERS, rows())
    writer.save_array(OFFSETS, offsets)
    del offsets
    text_digests.append(digest_records(text_keys))
    identifier_digests.append(digest_records(identifiers))
    return _Written(
        np.frombuffer(heads, dtype=np.int32).copy(),
        citation_keys,
        np.concatenate(text_digests),
        np.concatenate(identifier_digests),
        fingerprint.hexdigest(),
        collections,
    )


def _embed(
    encoder,
    texts,
    chunking,
    index_dir,
    progress,
    phase,
    notice,
    heads=None,
    model_identity=None,
    precision="fp32",
    allocate=None,
):
    """embed_texts with the shared embedding cache, a progress total, and a notice when resuming."""
    model_identity = encoder.name if model_identity is None else model_identity
    try:
        opened = EmbeddingCache(owner=str(index_dir.resolve()))
    except CacheUnavailable as unavailable:
        warnings.warn(str(unavailable), stacklevel=2)
        opened = contextlib.nullcontext(None)  # encoded without a cache: nothing to resume from
    with opened as cache:
        if cache is not None:
            _migrate_legacy_cache(
                index_dir, cache, encoder.name, model_identity, chunking, texts, heads
            )
        resuming = cache is not None and cache.interrupted_encoding()
        if cache is not None:
            cache.mark_encoding(True)
        done = 0
        planned = 0

        def plan(missing: int) -> None:
            nonlocal planned
            planned = missing
            reused = len(texts) - missing
            if resuming and reused and notice is not None:
                notice(f"resuming: {reused:,} of {len(texts):,} papers already encoded")
            if missing:
                phase("encoding", missing)

        def advance(count: int) -> None:
            nonlocal done
            done += count
            if progress is not None:
                progress(done, planned)

        embedded = embed_texts(
            encoder,
            texts,
            chunking,
            cache,
            progress=advance,
            on_plan=plan,
            heads=heads,
            model_identity=model_identity,
            precision=precision,
            allocate=allocate,
        )
        if cache is not None:
            cache.mark_encoding(False)
            known = getattr(encoder, "max_tokens_if_known", None)
            if known is not None:
                cache.remember_model(model_identity, {"max_tokens": known})
            elif hasattr(encoder, "remembered_max_tokens"):
                encoder.remembered_max_tokens = cache.model_facts(model_identity).get("max_tokens")
    return embedded


def _migrate_legacy_cache(index_dir, cache, model, model_identity, chunking, texts, heads) -> None:
    """An index built before the shared cache kept its own (cache.sqlite in the index folder): the
    vectors of this build's texts found there are copied into the shared cache, and the old file
    is removed (it is the index's own). Its rows were keyed by the model's name, so they are read
    only for a model given by name (a model folder may have been replaced since: encoded again)."""
    legacy = legacy_cache(index_dir)
    if legacy is None:
        return
    if not _named_model(model):
        remove_legacy_cache(index_dir)
        return
    heads = heads if chunking.strategy == "sentences" else None
    for start in range(0, len(texts), LEGACY_CHUNK):
        pairs = {}
        for i in range(start, min(start + LEGACY_CHUNK, len(texts))):
            head = int(heads[i]) if heads is not None else None
            new = text_cache_key(model_identity, chunking, texts[i], head)
            pairs[text_cache_key(model, chunking, texts[i], head)] = new
        missing = set(pairs.values()) - set(cache.get_many(list(pairs.values())))
        wanted = [old for old, new in pairs.items() if new in missing]
        found = read_legacy_vectors(legacy, wanted)
        if found:
            cache.put_many({pairs[old]: vector for old, vector in found.items()})
    remove_legacy_cache(index_dir)


LEGACY_CHUNK = 2048


def _named_model(model: str) -> bool:
    """A model given by name (the packaged one, a hub name), not by a folder of the user's."""
    return not Path(model).expanduser().is_dir()


def inputs_fingerprint(papers: Iterable[Paper]) -> str:
    """A short hash of every paper's ID and text, in order: tells whether an index was built from
    these papers."""
    fingerprint = InputsFingerprint()
    for paper in papers:
        fingerprint.add(paper)
    return fingerprint.hexdigest()


class InputsFingerprint:
    """`inputs_fingerprint`, a paper at a time."""

    def __init__(self):
        self._digest = hashlib.sha256()

    def add(self, paper: Paper) -> None:
        self._digest.update(hashlib.sha256(paper.text.encode("utf-8")).digest())
        self._digest.update(paper.id.encode("utf-8") + b"\0")

    def hexdigest(self) -> str:
        return self._digest.hexdigest()[:16]


# An IVF index keeps the lists it was trained on while papers are appended,
# until the corpus has grown past this factor of the training size.
RETRAIN_GROWTH = 2.0


def _faiss_index_for(vectors: ArrayFile, choice, previous: StoredIndex | None):
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


def _live_build(index_dir: Path) -> StoredIndex | None:
    """The live build of this index, if there is a usable one."""
    from ..errors import RecommenderError

    try:
        return open_stored(index_dir, verify=False)
    except RecommenderError:
        return None  # no usable previous build: everything is made anew


def prepare_query_encoder(
    model: str,
    writer: IndexWriter,
    previous: StoredIndex | None,
    on_phase: Callable[[str, int | None], None] | None = None,
    precision: str = "fp32",
) -> str | None:
    """The index's export of `model` at `precision` ("onnx"), or its static embeddings ("static"):
    the previous build's, else the shared one from the user cache (made there once per model), else
    one made for this index alone. `on_phase` is told when an export starts.

    An fp32 export that fails leaves the index to the full model (None, with a warning); an int8
    export or a distillation that fails fails the build, since no other encoder gives those vectors.
    """
    from ..errors import ModelError

    target = writer.path(QUERY_ENCODER)
    if _reuse_previous_export(model, previous, target):
        assert previous is not None  # only a previous build's export is reused
        return previous.manifest["query_encoder"]

    def phase(name: str) -> Callable[[], None]:
        return lambda: on_phase(name, None) if on_phase is not None else None

    exporting = phase("exporting the model to ONNX (once per model)")
    quantising = phase(f"quantising the ONNX export to {precision} (once per model)")
    distilling = phase("distilling static embeddings from the default model (once, a few minutes)")
    kind = None
    try:
        shared = export_cache.query_export(model, precision, exporting, quantising, distilling)
        kind = shared.kind
        if (
            shared.entry is None
            or shared.files is None
            or not link_checked(shared.entry, target, shared.files)
        ):
            # No shared export, or one damaged since it was checked: this index gets its own.
            staging = writer.path(".fp32-export")
            try:
                export_cache.export_into(
                    model, precision, target, staging, exporting, quantising, distilling
                )
            finally:
                remove_tree(staging)
    except (ModelError, OSError) as error:
        remove_tree(target)
        cause = error if isinstance(error, OSError) else error.__cause__
        if isinstance(cause, OSError) and (
            isinstance(error, OSError) or cause.errno in WRITE_ERRNOS
        ):
            # Disk full or read-only: a build that fails beats an index whose queries are silently
            # ~60x slower.
            raise write_error(writer.index_dir, target, cause.strerror or str(cause)) from None
        if _exported_only(model, precision):
            raise
        loading.load_encoder(
            model
        )  # a model that cannot be loaded at all is the error to report, not a warning
        warnings.warn(
            f"{error}; papers and free-text queries will use the full model (slower)", stacklevel=3
        )
        return None
    return kind


def _reuse_previous_export(model: str, previous: StoredIndex | None, target: Path) -> bool:
    """Link the previous build's ONNX export into this one, if it was made from the same model files
    and every file of it still matches the previous manifest (damage is never carried over)."""
    if previous is None or not previous.manifest.get("query_encoder"):
        return False
    if previous.manifest.get("model_identity") != export_cache.model_identity(model):
        # built before identities were recorded, or the model folder holds another model now
        return False
    prefix = f"{QUERY_ENCODER}/"
    expected = {
        name[len(prefix) :]: record
        for name, record in previous.manifest.get("files", {}).items()
        if name.startswith(prefix)
    }
    return bool(expected) and link_checked(previous.path(QUERY_ENCODER), target, expected)


def _stored_papers(index_dir: Path) -> Generator[Paper, None, None]:
    """The papers of the index's live version, as it stores them, one at a time (the inputs of an
    upgrade)."""
    with (
        open_stored(index_dir, verify=False) as stored,
        open(stored.file(PAPERS), encoding="utf-8") as rows,
    ):
        for line in rows:
            yield Paper.from_dict(json.loads(line))
