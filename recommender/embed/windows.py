"""From texts to one L2-normalised vector each: windows for long texts, pooling, cache.

A text longer than the model's window is cut into overlapping windows of at
most `max_tokens` tokens (cut at token boundaries, using the tokenizer's
character offsets, so no text is lost or altered); each window is encoded and
the window vectors are averaged, weighted by their token counts, then
re-normalised. Nothing is truncated.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from ..arrays import unit_rows


class Encoder(Protocol):
    """What the embedding stage needs of a model."""

    name: str
    dimension: int
    max_tokens: int  # content tokens per window, without special tokens

    def token_spans(self, text: str) -> list[tuple[int, int]]: ...

    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Chunking:
    """How long texts are cut and combined; recorded in the manifest."""

    strategy: str = "windows"  # "windows" or "truncate"
    overlap: int = 32  # tokens shared by consecutive windows

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Chunking":
        return cls(**data)


class VectorCache(Protocol):
    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]: ...

    def put_many(self, items: dict[str, np.ndarray]) -> None: ...


def split_windows(text: str, spans: list[tuple[int, int]], max_tokens: int, overlap: int) -> list[tuple[str, int]]:
    """Cut `text` into windows of at most `max_tokens` tokens; returns (window text, token count)."""
    if len(spans) <= max_tokens:
        return [(text, max(len(spans), 1))]
    step = max(1, max_tokens - overlap)
    windows = []
    start = 0
    while True:
        end = min(start + max_tokens, len(spans))
        windows.append((text[spans[start][0]: spans[end - 1][1]], end - start))
        if end == len(spans):
            return windows
        start += step


def pool_windows(vectors: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Weighted mean of window vectors, L2-normalised."""
    pooled = np.average(vectors, axis=0, weights=np.asarray(weights, dtype=np.float64))
    return unit_rows(pooled[None, :])[0]




def cache_key(model: str, chunking: Chunking, text: str) -> str:
    """Content hash of everything that determines a text's vector."""
    material = f"{model}\x00{chunking.strategy}:{chunking.overlap}\x00{text}"
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: np.ndarray
    encoded: int  # texts that had to be run through the model
    reused: int  # texts whose vectors came from the cache


def embed_texts(
    encoder: Encoder,
    texts: Sequence[str],
    chunking: Chunking = Chunking(),
    cache: VectorCache | None = None,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> EmbeddingResult:
    """One normalised vector per text, reusing cached vectors where the text is unchanged.

    `on_plan` is told how many texts need encoding; `progress` how many more are done.
    The encoder is not touched at all when every vector is cached.
    """
    keys = [cache_key(encoder.name, chunking, text) for text in texts]
    cached = cache.get_many(keys) if cache is not None else {}
    missing = [i for i, key in enumerate(keys) if key not in cached]
    if on_plan is not None:
        on_plan(len(missing))
    if missing:
        fresh = _encode_with_windows(encoder, [texts[i] for i in missing], chunking, progress)
        dimension = fresh.shape[1]
        if cache is not None:
            cache.put_many({keys[i]: fresh[j] for j, i in enumerate(missing)})
    elif cached:
        dimension = len(next(iter(cached.values())))
    else:
        dimension = encoder.dimension
    if any(len(vector) != dimension for vector in cached.values()):
        raise ValueError("cached vectors of different dimensions under one model key")
    vectors = np.zeros((len(texts), dimension), dtype=np.float32)
    for j, i in enumerate(missing):
        vectors[i] = fresh[j]
    for i, key in enumerate(keys):
        if key in cached:
            vectors[i] = cached[key]
    return EmbeddingResult(vectors, encoded=len(missing), reused=len(texts) - len(missing))


# Windows are encoded in groups so the progress bar moves and memory stays flat.
ENCODE_GROUP = 256


def _encode_with_windows(
    encoder: Encoder, texts: list[str], chunking: Chunking, progress: Callable[[int], None] | None
) -> np.ndarray:
    out = np.zeros((len(texts), encoder.dimension), dtype=np.float32)
    for start in range(0, len(texts), ENCODE_GROUP):
        group = texts[start: start + ENCODE_GROUP]
        windows: list[str] = []
        owners: list[int] = []
        weights: list[int] = []
        for i, text in enumerate(group):
            if chunking.strategy == "truncate":
                pieces = [(text, 1)]  # the encoder truncates at its own window
            else:
                pieces = split_windows(text, encoder.token_spans(text), encoder.max_tokens, chunking.overlap)
            for piece, count in pieces:
                windows.append(piece)
                owners.append(i)
                weights.append(count)
        window_vectors = np.asarray(encoder.encode(windows), dtype=np.float32)
        owners_array = np.asarray(owners)
        weights_array = np.asarray(weights, dtype=np.float64)
        for i in range(len(group)):
            rows = owners_array == i
            out[start + i] = pool_windows(window_vectors[rows], weights_array[rows])
        if progress is not None:
            progress(len(group))
    return out
