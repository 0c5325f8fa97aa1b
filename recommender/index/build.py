"""Building an index: read papers, embed them (reusing cached vectors), write FAISS + TF-IDF
atomically. `build_index` runs the stages of index/stages.py in turn, with the settings of one
:class:`~recommender.index.request.BuildRequest`."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..embed import export_cache, loading
from ..embed.choice import EncoderChoice
from ..embed.choice import exported_only as _exported_only
from ..embed.embedding_cache import CacheUnavailable, EmbeddingCache, read_legacy_vectors
from ..embed.models import TierAdvice, tier_advice
from ..embed.windows import embed_texts, text_cache_key
from ..errors import EncodingInterrupted, caller_stacklevel
from .changes import BuildChanges, build_changes, previous_papers
from .layout import (
    KEY_ARRAYS,
    QUERY_ENCODER,
    VECTORS,
    legacy_cache,
    remove_legacy_cache,
    remove_tree,
)
from .request import BuildHooks, BuildRequest, check_build_request, kept_from_index
from .spool import STREAM_PAPERS, InputsFingerprint, PaperSpool, inputs_fingerprint
from .stages import (
    MAP_LAYOUT_PAPERS,
    POSTINGS_A_PAPER,
    RETRAIN_GROWTH,
    Built,
    Kept,
    build_search_index,
    manifest_of,
    merge_duplicates,
    read_inputs,
    write_keys,
    write_lexical,
    write_map_layout,
    write_paper_files,
)
from .stored import StoredIndex, open_stored
from .writer import WRITE_ERRNOS, ArrayFile, IndexWriter, link_checked, write_error, writing

__all__ = [
    "KEY_ARRAYS",
    "MAP_LAYOUT_PAPERS",
    "POSTINGS_A_PAPER",
    "RETRAIN_GROWTH",
    "STREAM_PAPERS",
    "BuildReport",
    "BuildRequest",
    "InputsFingerprint",
    "build_index",
    "inputs_fingerprint",
    "prepare_query_encoder",
]


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
    inputs=(),
    index: str | Path | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str, int | None], None] | None = None,
    notice: Callable[[str], None] | None = None,
    request: BuildRequest | None = None,
    **settings,
) -> BuildReport:
    """Read papers, embed them (reusing cached vectors), and write a new index atomically.

    The build's settings are a :class:`BuildRequest` (`request`), else made of `inputs`, `index`
    and the keyword arguments `settings` (BuildRequest.of: model, precision, chunking, device,
    engine, upgrade, index_type, map_layout, where, keep_withdrawn, wait, built_by, chunk_size,
    export_query_encoder, own_papers, lexical_terms, aliases). A setting left None keeps the one of
    the index being rebuilt (request.kept_from_index), else takes the default: a rebuild never
    encodes every paper again unless asked to. embed.choice decides the encoder.

    `on_phase(name, total)` is told as each phase starts (reading, model export, encoding with the
    number of papers to encode, search index, TF-IDF, checksums); `progress(done, total)` as papers
    are encoded; `notice` of a resumed encoding or a setting kept.

    `upgrade` rebuilds an index made with the fast tier with `model` (default: the default model),
    from the index's own papers unless `inputs` are given; its fast version answers queries until
    the new one is committed, and a stopped upgrade resumes like any build.

    Vectors reach the embedding cache in groups as they are encoded, so a build that is killed or
    interrupted keeps its work: the next one resumes, and tells `notice` so ("resuming: 4,864 of
    8,000 papers already encoded"). On KeyboardInterrupt the index is left unchanged and
    EncodingInterrupted says how many papers' vectors the cache keeps.

    Memory stays nearly flat in the corpus size (docs/memory.md): the papers read are spooled to a
    scratch file of the build folder and handled `chunk_size` at a time, vectors go straight to
    their file, and what is held for every paper is a few short strings (ID, handle, citation key)
    and its search index entry.
    """
    started = time.perf_counter()
    asked = request if request is not None else BuildRequest.of(inputs, index, **settings)
    hooks = BuildHooks(progress, on_phase, notice)
    index_dir = check_build_request(asked)  # before any paper is read
    hooks.phase("reading papers", None)
    with writing(index_dir, wait=asked.wait) as writer, contextlib.ExitStack() as files:
        spool = PaperSpool(
            files.enter_context(writer.scratch_file("papers.jsonl")),
            asked.chunk_size or STREAM_PAPERS,
        )
        chosen, left_out = read_inputs(asked, index_dir, spool)  # under the lock: no `add` missed
        kept = merge_duplicates(chosen, asked.aliases)
        previous = _live_build(index_dir)
        first_build = previous is None
        try:
            made, built, changes = _build_files(
                asked, hooks, writer, files, spool, kept, left_out, previous
            )
        finally:
            if previous is not None:
                previous.close()  # unpinned, so the commit can remove the old version
        files.close()  # the scratch files removed, every array file complete
        commit(writer, manifest_of(made, built, build_time()), built.count, hooks)
    # Only where no model was asked for (naming the default is a choice too), on the index's first
    # build, and for a CPU build: the projected cost is a CPU's.
    encoder = asked.encoder
    asked_for = encoder.model is not None or encoder.upgrade or encoder.device == "cuda"
    model = built.encoder["model"]
    advice = tier_advice(model, built.count) if first_build and not asked_for else None
    return BuildReport(
        index_dir,
        built.count,
        built.encoded,
        built.reused,
        built.search.kind,
        time.perf_counter() - started,
        changes,
        advice,
        spool.kinds.counts(),
    )


def _build_files(
    asked: BuildRequest,
    hooks: BuildHooks,
    writer: IndexWriter,
    files: contextlib.ExitStack,
    spool: PaperSpool,
    kept: Kept,
    left_out: dict,
    previous: StoredIndex | None,
) -> tuple[BuildRequest, Built, BuildChanges | None]:
    """Every file of the index but its manifest: the stages after reading, in turn. Returns the
    request with the index's own settings filled in, what was built, and what changed since
    `previous`. A KeyboardInterrupt once every vector is cached says so (EncodingInterrupted)."""
    from .lexical import TfidfBuilder

    embedded = None
    count = len(kept.ids)
    try:
        previous_texts = previous_papers(previous) if previous is not None else None
        record = previous.manifest if previous is not None else None
        request, encoding = kept_from_index(asked, record, hooks.notice, writer.index_dir, count)
        if previous is not None and not encoding.same_vectors(previous.manifest):
            previous = None  # another model or precision: nothing of it is reused
        query_encoder = _query_encoder(request, encoding, writer, previous, hooks)
        size = request.chunk_size and request.chunk_size * POSTINGS_A_PAPER
        tfidf = files.enter_context(
            TfidfBuilder(writer.scratch_file, size, fixed=request.lexical_terms)
        )
        written = write_paper_files(writer, spool, kept, tfidf, left_out)
        changes = build_changes(previous_texts, kept.ids, written.text_digests)
        export = writer.path(QUERY_ENCODER) if query_encoder is not None else None
        encoder, embedded = encode_papers(
            encoding, spool.texts(), written.heads, writer, files, hooks, export
        )
        write_keys(writer, kept, written)
        fingerprint = written.fingerprint
        del written  # not held while the search index is built
        vectors = embedded.vectors
        search = build_search_index(writer, vectors, request.index_type, previous, hooks)
        hooks.phase("TF-IDF")
        terms = write_lexical(writer, tfidf, files, kept.aliases, request.lexical_terms)
        projection = write_map_layout(writer, vectors, bool(request.map_layout), hooks)
    except KeyboardInterrupt as interrupt:
        if embedded is None or isinstance(interrupt, EncodingInterrupted):
            raise
        # Every vector is in the cache already: the next build only writes the index.
        raise EncodingInterrupted(kept=count, total=count) from None
    built = Built(
        encoding.record(encoder),
        int(vectors.shape[1]),
        count,
        fingerprint,
        search,
        terms,
        query_encoder,
        embedded.encoded,
        embedded.reused,
        projection,
        dict(spool.kinds.counts()),
    )
    return request, built, changes


def _query_encoder(
    request: BuildRequest,
    encoding: EncoderChoice,
    writer: IndexWriter,
    previous: StoredIndex | None,
    hooks: BuildHooks,
) -> str | None:
    """The export kept with the index for its queries ("onnx", "static"), where the request keeps
    one or the encoding has no other encoder; else None."""
    if not (request.export_query_encoder or encoding.exported_only):
        return None
    return prepare_query_encoder(
        encoding.model, writer, previous, hooks.on_phase, encoding.precision
    )


def encode_papers(
    encoding: EncoderChoice,
    texts: Sequence[str],
    heads: np.ndarray | None,
    writer: IndexWriter,
    files: contextlib.ExitStack,
    hooks: BuildHooks,
    export: Path | None = None,
):
    """Stage 4, encode: every paper's vector into the build's vectors file, those of the embedding
    cache reused (`heads`: how many characters of each text its title takes), with the build's
    `export` of the model where there is one. Returns the encoder and embed_texts' result."""
    # The ONNX export encodes ~1.7x faster than torch with the same vectors
    # (scripts/bench_encode.py), so a build uses it for the papers too.
    engines = contextlib.ExitStack()  # a Ray session, stopped when encoding ends, even on failure
    encoder = encoding.encoder(export, engines)

    def vector_file(rows: int, dimension: int) -> ArrayFile:
        return files.enter_context(
            contextlib.closing(writer.array_file(VECTORS, (rows, dimension), np.float32))
        )

    with engines:
        embedded = _embed(encoder, texts, encoding, writer.index_dir, hooks, heads, vector_file)
    return encoder, embedded


def commit(writer: IndexWriter, manifest: dict, count: int, hooks: BuildHooks) -> None:
    """Stage 8, write: the manifest and the checksums of every file, the new version made live
    (index/writer.py); stopped there, every vector is in the cache already."""
    hooks.phase("checksums")
    try:
        writer.commit(manifest)
    except KeyboardInterrupt:
        raise EncodingInterrupted(kept=count, total=count) from None


def _embed(encoder, texts, encoding, index_dir, hooks, heads=None, allocate=None):
    """embed_texts with the shared embedding cache, a progress total, and a notice when resuming."""
    try:
        opened = EmbeddingCache(owner=str(index_dir.resolve()))
    except CacheUnavailable as unavailable:
        warnings.warn(str(unavailable), stacklevel=caller_stacklevel())
        opened = contextlib.nullcontext(None)  # encoded without a cache: nothing to resume from
    identity = encoding.identity
    resuming = False
    with opened as cache:
        if cache is not None:
            _migrate_legacy_cache(
                index_dir, cache, encoder.name, identity, encoding.chunking, texts, heads
            )
            resuming = cache.interrupted_encoding()
            cache.mark_encoding(True)
        counting = _Counting(len(texts), resuming, hooks)
        embedded = embed_texts(
            encoder,
            texts,
            encoding.chunking,
            cache,
            progress=counting.advance,
            on_plan=counting.plan,
            heads=heads,
            model_identity=identity,
            precision=encoding.precision,
            allocate=allocate,
        )
        if cache is not None:
            cache.mark_encoding(False)
            known = getattr(encoder, "max_tokens_if_known", None)
            if known is not None:
                cache.remember_model(identity, {"max_tokens": known})
            elif hasattr(encoder, "remembered_max_tokens"):
                encoder.remembered_max_tokens = cache.model_facts(identity).get("max_tokens")
    return embedded


class _Counting:
    """An encoding's progress: told how many texts are to be encoded, then as they are."""

    def __init__(self, texts: int, resuming: bool, hooks: BuildHooks):
        self.texts, self.resuming, self.hooks = texts, resuming, hooks
        self.done = self.planned = 0

    def plan(self, missing: int) -> None:
        self.planned = missing
        reused = self.texts - missing
        if self.resuming and reused:
            self.hooks.tell(f"resuming: {reused:,} of {self.texts:,} papers already encoded")
        if missing:
            self.hooks.phase("encoding", missing)

    def advance(self, count: int) -> None:
        self.done += count
        if self.hooks.progress is not None:
            self.hooks.progress(self.done, self.planned)


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
            f"{error}; papers and free-text queries will use the full model (slower)",
            stacklevel=caller_stacklevel(),
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
