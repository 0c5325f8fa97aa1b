"""From texts to one L2-normalised vector each: windows for long texts, pooling, cache.

A text longer than the model's window is cut into overlapping windows of at
most `max_tokens` tokens (cut at token boundaries, using the tokenizer's
character offsets, so no text is lost or altered); each window is encoded and
the window vectors are averaged, weighted by their token counts, then
re-normalised. Nothing is truncated.
"""

from __future__ import annotations

import bisect
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from ..arrays import unit_rows
from ..corpus.text import SENTENCE_END
from ..errors import EncodingInterrupted


class Encoder(Protocol):
    """What the embedding stage needs of a model."""

    name: str
    dimension: int
    max_tokens: int  # content tokens per window, without special tokens

    def token_spans(self, text: str) -> list[tuple[int, int]]: ...

    def encode(self, texts: list[str]) -> np.ndarray: ...

    # Optional: `group_size`, how many texts to window and encode per call of `encode`
    # (default ENCODE_GROUP); an engine with a fixed cost per call asks for more.


@dataclass(frozen=True)
class Chunking:
    """How long texts are cut and combined; recorded in the manifest."""

    strategy: str = (
        "sentences"  # "sentences" (title + whole sentences per window), "windows" or "truncate"
    )
    overlap: int = 32  # tokens shared by consecutive windows

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Chunking:
        return cls(**data)


class VectorCache(Protocol):
    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]: ...

    def put_many(
        self, items: dict[str, np.ndarray]
    ) -> None: ...  # all kept, or none (one transaction)


def split_windows(
    text: str, spans: list[tuple[int, int]], max_tokens: int, overlap: int, head: int | None = None
) -> list[tuple[str, int]]:
    """Cut `text` into windows of at most `max_tokens` tokens; returns (window text, token count).

    With `head` (the "sentences" chunking) every window starts with `text[:head]`
    (the title) and ends at a sentence boundary where one fits; consecutive windows
    share the last whole sentences that fit in `overlap` tokens. The count is of
    the tokens after the head. Without it, fixed token windows, as the "windows" chunking.
    """
    if head is not None:
        return _sentence_windows(text, spans, max_tokens, overlap, head)
    if len(spans) <= max_tokens:
        return [(text, max(len(spans), 1))]
    step = max(1, max_tokens - overlap)
    windows = []
    start = 0
    while True:
        end = min(start + max_tokens, len(spans))
        windows.append((text[spans[start][0] : spans[end - 1][1]], end - start))
        if end == len(spans):
            return windows
        start += step


# A title longer than this share of a window is not repeated in every window.
MAX_HEAD_SHARE = 0.5


def _sentence_starts(text: str, spans: list[tuple[int, int]], first: int) -> list[int]:
    """Token positions (from `first` on) where a sentence of `text` starts, and the end."""
    chars = [match.end() for match in SENTENCE_END.finditer(text)]
    starts, position = [first], first
    for char in chars:
        while position < len(spans) and spans[position][0] < char:
            position += 1
        if position > starts[-1] and position < len(spans):
            starts.append(position)
    return starts + [len(spans)] if starts[-1] != len(spans) else starts


def _sentence_windows(
    text: str, spans: list[tuple[int, int]], max_tokens: int, overlap: int, head: int
) -> list[tuple[str, int]]:
    head_tokens = sum(1 for start, _ in spans if start < head)
    if len(spans) <= max_tokens or head_tokens == len(spans):
        return [(text, max(len(spans) - head_tokens, 1))]
    if head_tokens > MAX_HEAD_SHARE * max_tokens:
        head, head_tokens = 0, 0
    prefix = text[:head]
    if prefix and not prefix[-1].isspace():
        prefix += " "
    budget = max_tokens - head_tokens
    bounds = _sentence_starts(text, spans, head_tokens)
    windows = []
    start = head_tokens
    while True:
        last = bounds[
            bisect.bisect_right(bounds, start + budget) - 1
        ]  # the last sentence start that fits
        end = last if last > start else min(start + budget, len(spans))
        windows.append((prefix + text[spans[start][0] : spans[end - 1][1]], end - start))
        if end == len(spans):
            return windows
        # The next window starts at the first sentence of this one that ends it within `overlap`
        # tokens.
        shared = bounds[bisect.bisect_left(bounds, max(start + 1, end - overlap))]
        start = shared if shared < end else end


def pool_windows(vectors: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Weighted mean of window vectors, L2-normalised."""
    pooled = np.average(vectors, axis=0, weights=np.asarray(weights, dtype=np.float64))
    return unit_rows(pooled[None, :])[0]


def precision_key(model_identity: str, precision: str) -> str:
    """The model's part of a cache key at `precision`: fp32 keys are those made before precisions
    existed, so caches built then stay valid. An int8 vector is keyed as encoded one text a run
    (onnx_encoder): those encoded in batches before depended on their batch and are not reused."""
    if precision == "fp32":
        return model_identity
    return f"{model_identity}\x00precision={precision}\x00one text a run"


def cache_key(model: str, chunking: Chunking, text: str) -> str:
    """Content hash of everything that determines a text's vector. `model` is the model's identity,
    one value (export_cache.model_identity: the hash of its files), never just a path."""
    material = f"{model}\x00{chunking.strategy}:{chunking.overlap}\x00{text}"
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def text_cache_key(model: str, chunking: Chunking, text: str, head: int | None) -> str:
    """The cache key of one text; with a head (the "sentences" chunking), the head is part of it
    (the same text windows differently)."""
    if head is None or chunking.strategy != "sentences":
        return cache_key(model, chunking, text)
    return cache_key(model, chunking, f"{head}\x00{text}")


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: np.ndarray  # or what `allocate` made
    encoded: int  # texts that had to be run through the model
    reused: int  # texts whose vectors came from the cache


# Texts per encoder call (unless the encoder has a `group_size`): the progress bar
# moves and memory stays flat. Smaller calls would allow more frequent commits but
# cost the ONNX encoder ~10% (it sorts a call's windows by length to pad little;
# scripts/bench_checkpoint.py).
ENCODE_BATCH = 256
# Encoded vectors are committed to the cache every ENCODE_GROUP texts or every
# COMMIT_SECONDS, whichever comes first, at the end of an encoder call (so with
# the default call size, after every call): a build killed at any moment keeps
# everything up to its last commit.
ENCODE_GROUP = 256
COMMIT_SECONDS = 5.0
# Texts whose cached vectors are looked up at once.
LOOKUP_CHUNK = 2048


def embed_texts(
    encoder: Encoder,
    texts: Sequence[str],
    chunking: Chunking = Chunking(),
    cache: VectorCache | None = None,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    heads: Sequence[int] | None = None,
    model_identity: str | None = None,
    precision: str = "fp32",
    allocate: Callable[[int, int], VectorSink] | None = None,
) -> EmbeddingResult:
    """One normalised vector per text, reusing cached vectors where the text is unchanged.

    `model_identity` is the model's part of every cache key (default the encoder's name): the build
    passes the model's identity, the hash of its files. `precision` (of the encoder's weights,
    "fp32" or "int8") joins it: vectors of one precision are never taken for the other's. A cached
    vector of another dimension than the others (or than the model's, when the model is loaded
    anyway) is encoded again.

    `allocate(count, dimension)`, if given, makes what the vectors are written into (a file, say,
    so that not even they are held: `writer.ArrayFile`), and the result's `vectors` is that.

    With `heads` (how many characters of each text its title takes; 0, no title, by default),
    "sentences" chunking puts the title at the start of every window.

    `on_plan` is told how many texts need encoding; `progress` how many more are done.
    New vectors reach the cache as they are made (see ENCODE_GROUP), and only the
    returned array grows with the number of texts: keys, window texts and window
    vectors are held for one lookup chunk or one encoder call at a time.
    On KeyboardInterrupt the vectors encoded so far are committed and
    EncodingInterrupted says how many of the texts the cache now holds.
    The encoder is not touched at all when every vector is cached.
    """
    if chunking.strategy != "sentences":
        heads = None  # the head matters to "sentences" chunking only
    elif heads is None:
        heads = [0] * len(texts)
    count = len(texts)
    model_identity = precision_key(
        encoder.name if model_identity is None else model_identity, precision
    )
    output, missing, odd = _cached(texts, chunking, cache, heads, model_identity, None, allocate)
    if (
        output.vectors is not None
        and (odd or missing.any())
        and encoder.dimension != output.vectors.shape[1]
    ):
        # The model (loaded anyway) says the cached vectors found first were the odd ones: look
        # again for its own.
        output.discard()
        output, missing, _ = _cached(
            texts, chunking, cache, heads, model_identity, encoder.dimension, allocate
        )
    rows = np.flatnonzero(missing)
    del missing
    reused = count - len(rows)
    if on_plan is not None:
        on_plan(len(rows))
    if len(rows):
        _encode_missing(
            encoder, texts, rows, chunking, cache, output, progress, reused, heads, model_identity
        )
    if output.vectors is None:
        output.vectors = output.allocate(count, encoder.dimension)
    return EmbeddingResult(output.vectors, encoded=len(rows), reused=reused)


def _cached(texts, chunking, cache, heads, model_identity, dimension, allocate=None):
    """The output filled with the cached vectors (of `dimension`, else of the first one found's),
    which rows are still missing, and whether a vector of another dimension was passed over (damaged
    or forged).
    """
    count = len(texts)
    output = _Output(count, allocate)
    missing = np.ones(count, dtype=bool)
    odd = False
    for start in range(0, count if cache is not None else 0, LOOKUP_CHUNK):
        keys = [
            _text_key(model_identity, chunking, texts, heads, i)
            for i in range(start, min(start + LOOKUP_CHUNK, count))
        ]
        found = cache.get_many(keys)
        rows, vectors = [], []
        for offset, key in enumerate(keys):
            vector = found.get(key)
            if vector is None:
                continue
            wanted = dimension or (
                output.vectors.shape[1]
                if output.vectors is not None
                else vectors[0].shape[-1]
                if vectors
                else vector.shape[-1]
            )
            if vector.shape[-1] == wanted:
                rows.append(start + offset)
                vectors.append(vector)
            else:
                odd = True  # encoded again
        if rows:  # one write a chunk (the output may be a file)
            missing[rows] = False
            output.put(np.asarray(rows), np.stack(vectors))
        del keys, found, rows, vectors
    return output, missing, odd


def _text_key(
    model_identity: str,
    chunking: Chunking,
    texts: Sequence[str],
    heads: Sequence[int] | None,
    i: int,
) -> str:
    return text_cache_key(
        model_identity, chunking, texts[i], heads[i] if heads is not None else None
    )


class VectorSink(Protocol):
    """Where vectors go: rows of a (count, dimension) float32 array, set by `sink[rows] =
    vectors`."""

    shape: tuple[int, ...]

    def __setitem__(self, rows, vectors: np.ndarray) -> None: ...


def _in_memory(count: int, dimension: int) -> np.ndarray:
    return np.zeros((count, dimension), dtype=np.float32)


class _Output:
    """The returned array, made once the dimension is known (from the cache or the model)."""

    def __init__(self, count: int, allocate: Callable[[int, int], VectorSink] | None = None):
        self.count = count
        self.allocate = allocate or _in_memory
        self.vectors: VectorSink | None = None

    def discard(self) -> None:
        """Let go of the vectors made so far (a file of them is removed, to be made again)."""
        discard = getattr(self.vectors, "discard", None)
        if discard is not None:
            discard()
        self.vectors = None

    def put(self, rows, vectors: np.ndarray) -> None:
        dimension = vectors.shape[-1]
        if self.vectors is None:
            self.vectors = self.allocate(self.count, dimension)
        elif self.vectors.shape[1] != dimension:
            raise ValueError("vectors of different dimensions from one model")
        self.vectors[rows] = vectors


def _encode_missing(
    encoder: Encoder,
    texts: Sequence[str],
    rows: np.ndarray,
    chunking: Chunking,
    cache: VectorCache | None,
    output: _Output,
    progress: Callable[[int], None] | None,
    reused: int,
    heads: Sequence[int] | None = None,
    model_identity: str = "",
) -> None:
    """Encode texts[rows] an encoder call at a time, committing to the cache in groups."""
    pending: dict[str, np.ndarray] = {}
    pending_texts = 0
    committed = 0
    last_commit = time.monotonic()

    def commit() -> None:
        nonlocal pending, pending_texts, committed, last_commit
        if pending and cache is not None:
            cache.put_many(pending)
        committed += pending_texts
        pending, pending_texts, last_commit = {}, 0, time.monotonic()

    # An engine with a fixed cost per call (Ray) may ask for more texts a call.
    per_call = getattr(encoder, "group_size", None) or ENCODE_BATCH
    try:
        for start in range(0, len(rows), per_call):
            batch = rows[start : start + per_call]
            fresh = _encode_with_windows(
                encoder,
                [texts[i] for i in batch],
                chunking,
                [heads[i] for i in batch] if heads is not None else None,
            )
            output.put(batch, fresh)
            if cache is not None:
                for i, vector in zip(batch, fresh):
                    pending[_text_key(model_identity, chunking, texts, heads, i)] = vector
                pending_texts += len(batch)
                if (
                    pending_texts >= ENCODE_GROUP
                    or time.monotonic() - last_commit >= COMMIT_SECONDS
                ):
                    commit()
            if progress is not None:
                progress(len(batch))
        commit()
    except KeyboardInterrupt as interrupt:
        if cache is None or isinstance(interrupt, EncodingInterrupted):
            raise
        try:
            commit()  # what is already encoded is kept (a second Ctrl-C skips this)
        except KeyboardInterrupt:
            pass
        raise EncodingInterrupted(kept=reused + committed, total=len(texts)) from None


def _encode_with_windows(
    encoder: Encoder, texts: list[str], chunking: Chunking, heads: Sequence[int] | None = None
) -> np.ndarray:
    """One encoder call for the windows of `texts`; one pooled vector per text (with `heads` and
    "sentences" chunking, each window starts with the text's title)."""
    windows: list[str] = []
    owners: list[int] = []
    weights: list[int] = []
    for i, text in enumerate(texts):
        if chunking.strategy == "truncate":
            pieces = [(text, 1)]  # the encoder truncates at its own window
        else:
            head = heads[i] if heads is not None and chunking.strategy == "sentences" else None
            pieces = split_windows(
                text, encoder.token_spans(text), encoder.max_tokens, chunking.overlap, head
            )
        for piece, count in pieces:
            windows.append(piece)
            owners.append(i)
            weights.append(count)
    window_vectors = np.asarray(encoder.encode(windows), dtype=np.float32)
    owners_array = np.asarray(owners)
    weights_array = np.asarray(weights, dtype=np.float64)
    out = np.zeros((len(texts), window_vectors.shape[1]), dtype=np.float32)
    for i in range(len(texts)):
        rows = owners_array == i
        out[i] = pool_windows(window_vectors[rows], weights_array[rows])
    return out
