"""A small deterministic encoder for fast tests: hashed bag of words, no torch."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

_WORD = re.compile(r"\w+|[^\w\s]")


class FakeEncoder:
    """Texts sharing words get similar vectors; windows of `max_tokens` words."""

    def __init__(self, name: str = "fake-model", dimension: int = 256, max_tokens: int = 40):
        self.name = name
        self.dimension = dimension
        self.max_tokens = max_tokens
        self.encoded_texts: list[str] = []

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [match.span() for match in _WORD.finditer(text)]

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded_texts.extend(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower())[: self.max_tokens]:
                if len(word) <= 3:  # short words carry little topic, as in a real model
                    continue
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                out[row, digest[0] % self.dimension] += 1.0 if digest[1] % 2 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


class FailingEncoder(FakeEncoder):
    """Tokenizes like FakeEncoder, but every encode fails (as a worker out of memory would)."""

    def encode(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("out of memory on the worker\nsecond line of the worker's error")


class CrashingEncoder(FakeEncoder):
    """Every encode kills its process, as a segfault or the OOM killer would."""

    def encode(self, texts: list[str]) -> np.ndarray:
        import os

        os._exit(1)


@dataclass(frozen=True)
class FakeSpec:
    """A picklable spec of a fake encoder for Ray workers, like loading.EncoderSpec.

    `failure`: None, "raise" (FailingEncoder) or "crash" (CrashingEncoder)."""

    model: str
    device: str = "auto"
    threads: int | None = None
    failure: str | None = None

    def __call__(self) -> FakeEncoder:
        kind = {None: FakeEncoder, "raise": FailingEncoder, "crash": CrashingEncoder}[self.failure]
        return kind(name=self.model)
