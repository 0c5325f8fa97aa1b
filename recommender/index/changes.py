"""What a rebuild changes: the papers it adds, changes (same ID, another text) and removes,
found by comparing the new papers' IDs and text digests with those of the version it replaces
(its keys/ tables), 16 bytes a paper."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .keys import digest
from .stored import StoredIndex


@dataclass(frozen=True)
class BuildChanges:
    """The papers a rebuild added, changed (same ID, another text) and removed, by ID."""

    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True)
class PreviousPapers:
    """What a rebuild compares with in the version it replaces, 16 bytes a paper and its IDs' bytes:
    each ID's digest (ID order, sorted), its text digest, and the IDs to name the removed ones."""

    id_digests: np.ndarray  # uint64, sorted
    order: np.ndarray  # positions in ID order, by id_digests
    text_digests: np.ndarray  # uint64, in ID order
    id_bytes: np.ndarray
    id_offsets: np.ndarray

    def id_at(self, position: int) -> str:
        start, stop = int(self.id_offsets[position]), int(self.id_offsets[position + 1])
        return self.id_bytes[start:stop].tobytes().decode("utf-8", "surrogatepass")


def previous_papers(previous: StoredIndex) -> PreviousPapers | None:
    """The live version's IDs and text digests (keys/); None when it has no text digest table."""

    def load(name: str) -> np.ndarray:
        return np.array(previous.load_array(f"keys/{name}.npy", mmap=True))

    if not previous.has("keys/text_digests.npy"):
        return None
    data, offsets, rows = load("ids_bytes"), load("ids_offsets"), load("ids_rows")
    by_row = np.zeros(len(rows), dtype=np.uint64)
    by_row[load("text_digest_rows")] = load("text_digests")
    raw = data.tobytes()
    ends = offsets.tolist()
    # The bytes stored are the IDs' own encoding (keys._encode), which keys.digest hashes.
    id_digests = np.fromiter(
        (
            int.from_bytes(
                hashlib.blake2b(raw[ends[i] : ends[i + 1]], digest_size=8).digest(), "little"
            )
            for i in range(len(rows))
        ),
        dtype=np.uint64,
        count=len(rows),
    )
    order = np.argsort(id_digests, kind="stable")
    return PreviousPapers(id_digests[order], order, by_row[rows], data, offsets)


def build_changes(
    previous: PreviousPapers | None, ids: Sequence[str], text_digests: np.ndarray
) -> BuildChanges | None:
    """What a build changes against the live version's IDs and text digests (`previous_papers`)."""
    if previous is None:
        return None
    if not len(previous.order):
        return BuildChanges(tuple(ids), (), ())
    new_ids = np.fromiter((digest(paper_id) for paper_id in ids), dtype=np.uint64, count=len(ids))
    found = np.minimum(np.searchsorted(previous.id_digests, new_ids), len(previous.id_digests) - 1)
    held = previous.id_digests[found] == new_ids
    positions = previous.order[found]
    texts = np.asarray(text_digests["digest"], dtype=np.uint64)
    changed = held & (previous.text_digests[positions] != texts)
    kept = np.zeros(len(previous.order), dtype=bool)
    kept[positions[held]] = True
    return BuildChanges(
        added=tuple(ids[row] for row in np.flatnonzero(~held).tolist()),
        changed=tuple(ids[row] for row in np.flatnonzero(changed).tolist()),
        removed=tuple(previous.id_at(position) for position in np.flatnonzero(~kept).tolist()),
    )
