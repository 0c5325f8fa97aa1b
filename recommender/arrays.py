"""Array helpers shared by every layer (numpy only)."""

from __future__ import annotations

import numpy as np


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def csr_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated aranges [start, start + length) for each pair, without a Python loop
    (the positions of some rows' entries in CSR or CSC arrays)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(
        np.asarray(starts, dtype=np.int64) - (np.cumsum(lengths) - lengths), lengths
    )
    return offsets + np.arange(total, dtype=np.int64)


def sorted_union(*parts) -> np.ndarray:
    """The distinct values of integer arrays, sorted, as int64: np.union1d without its first call's
    import of numpy.ma (~10 ms of a cold command, through np.unique)."""
    values = np.sort(np.concatenate([np.asarray(part, dtype=np.int64).ravel() for part in parts]))
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values
