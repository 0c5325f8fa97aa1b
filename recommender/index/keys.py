"""Paper IDs and handles as sorted string arrays, looked up by binary search.

Opening an index parses no list of every key: the strings are stored as UTF-8
bytes plus offsets (memory-mapped), sorted, with the row of each, so finding a
paper touches about log2(n) strings. Byte order of UTF-8 is code point order,
so "sorted" here is Python's `sorted` on the strings.

    ids             every ID in ID order (bytes + offsets), with `id_rows` (the row
                    of each) and `id_rank` (each row's position in ID order: the
                    tie-break order of equal scores)
    folded_ids      the casefolded IDs, sorted, with their rows (prefix lookup)
    handles         every handle in row order
    folded_handles  the casefolded handles, sorted, with their rows
    citation_keys   each paper's citation key (`corpus.citation.citation_key`) casefolded,
                    sorted, with their rows: who shares a BibTeX key
    text_digests    a 64-bit hash of each paper's text key (`corpus.papers.text_key`),
                    sorted, with `text_digest_rows`
    identifier_digests  the same for each paper's arXiv ID or DOI
                    (`corpus.identifiers.work_identifier`), papers without one left out
The digest tables find a paper read from a file without reading the stored
papers (a match is confirmed on the stored paper). Indexes built before these
three tables lack them, and their papers are scanned instead.

    aliases.json    the other IDs of papers read twice (the same text, arXiv ID or DOI
                    under another ID): {alias: kept ID}; absent when there are none
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .stored import StoredIndex

ALIASES = "aliases.json"
DIGESTS = ("text", "identifier")  # the digest tables, each <name>_digests and <name>_digest_rows
# Each table is stored as <name>_bytes and <name>_offsets, the sorted ones with <name>_rows
# too (layout.KEY_ARRAYS lists the files).
Damaged = Callable[[str, str], Exception]  # (array name, problem) -> the error to raise


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _packed(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [_encode(s) for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def _sorted_table(name: str, strings: Sequence[str]) -> dict[str, np.ndarray]:
    order = sorted(range(len(strings)), key=strings.__getitem__)  # stable: equal strings by row
    data, offsets = _packed([strings[row] for row in order])
    return {
        f"{name}_bytes": data,
        f"{name}_offsets": offsets,
        f"{name}_rows": np.asarray(order, dtype=np.int64),
    }


def digest(key: str) -> int:
    """The stored 64-bit hash of a key (a match is confirmed on the stored paper)."""
    return int.from_bytes(hashlib.blake2b(_encode(key), digest_size=8).digest(), "little")


def digest_records(keys: Iterable[str]) -> np.ndarray:
    """Each key's digest and whether there is a key (empty ones are left out of the table)."""
    # One 9-byte numpy record a paper, not two Python ints (about 80 bytes) while it is built.
    return np.fromiter(
        ((digest(key), True) if key else (0, False) for key in keys),
        dtype=[("digest", np.uint64), ("present", np.bool_)],
    )


def digest_arrays(name: str, keys: Iterable[str] | np.ndarray) -> dict[str, np.ndarray]:
    """`<name>_digests`, the sorted digests of the papers' keys (in row order; empty keys left
    out), and `<name>_digest_rows`, the row of each. `keys` may be their `digest_records`."""
    records = keys if isinstance(keys, np.ndarray) else digest_records(keys)
    rows = np.flatnonzero(records["present"])
    digests = records["digest"][rows]
    order = np.argsort(digests, kind="stable")  # equal digests: lower rows first
    return {f"{name}_digests": digests[order], f"{name}_digest_rows": rows[order].astype(np.int64)}


class DigestTable:
    """Rows by the digest of a key, by binary search over the stored sorted digests."""

    def __init__(
        self, name: str, digests: np.ndarray, rows: np.ndarray, size: int, damaged: Damaged
    ):
        if digests.ndim != 1 or rows.shape != digests.shape or len(digests) > size:
            raise damaged(f"{name}_digests", "does not match its rows")
        self.name, self.size, self.damaged = name, size, damaged
        self.digests, self.rows = np.asarray(digests), np.asarray(rows)

    def rows_of(self, key: str) -> list[int]:
        """Rows whose key may be `key` (the same digest), in row order."""
        wanted = np.uint64(digest(key))
        low = int(np.searchsorted(self.digests, wanted, side="left"))
        high = int(np.searchsorted(self.digests, wanted, side="right"))
        rows = sorted(int(row) for row in self.rows[low:high])
        if rows and not 0 <= rows[0] <= rows[-1] < self.size:
            raise self.damaged(f"{self.name}_digest_rows", "names a row that does not exist")
        return rows


def key_arrays(
    ids: Sequence[str],
    handles: Sequence[str],
    text_keys: Iterable[str],
    identifiers: Iterable[str],
    citation_keys: Sequence[str],
) -> dict[str, np.ndarray]:
    """The arrays to store for these IDs, handles, text keys, identifiers and citation keys (in row
    order)."""
    return dict(
        key_tables(
            ids, handles, citation_keys, digest_records(text_keys), digest_records(identifiers)
        )
    )


def key_tables(
    ids: Sequence[str],
    handles: Sequence[str],
    citation_keys: Sequence[str],
    text_digests: np.ndarray,
    identifier_digests: np.ndarray,
) -> Iterator[tuple[str, np.ndarray]]:
    """`key_arrays` as (name, array) pairs, a table at a time: a build stores each before the next
    is made, so only one table's sorted copy of the strings is held at once. The digests are the
    `digest_records` of the papers' text keys and identifiers."""
    tables = [
        lambda: _sorted_table("ids", ids),
        lambda: _sorted_table("folded_ids", [paper_id.casefold() for paper_id in ids]),
        lambda: _sorted_table("folded_handles", [handle.casefold() for handle in handles]),
        lambda: dict(zip(("handles_bytes", "handles_offsets"), _packed(handles))),
        lambda: _sorted_table("citation_keys", [key.casefold() for key in citation_keys]),
        lambda: digest_arrays("text", text_digests),
        lambda: digest_arrays("identifier", identifier_digests),
    ]
    for make in tables:
        table = make()
        if "ids_rows" in table:
            rank = np.empty(len(ids), dtype=np.int64)
            rank[table["ids_rows"]] = np.arange(len(ids), dtype=np.int64)
            table["id_rank"] = rank
        yield from table.items()
        del table


class StringTable:
    """Strings stored as bytes and offsets (memory-mapped); item i is read on demand."""

    def __init__(
        self,
        name: str,
        data: np.ndarray,
        offsets: np.ndarray,
        rows: np.ndarray | None,
        size: int,
        damaged: Damaged,
    ):
        self.name, self.damaged = name, damaged
        if offsets.shape != (size + 1,):
            raise damaged(f"{name}_offsets", "does not list every paper")
        if rows is not None and rows.shape != (size,):
            raise damaged(f"{name}_rows", "does not list every paper")
        if data.ndim != 1 or int(offsets[0]) != 0 or int(offsets[-1]) != len(data):
            raise damaged(f"{name}_offsets", "does not fit its strings")
        # Plain views of the memory maps: only the pages a lookup touches are read.
        self.data, self.offsets = np.asarray(data), np.asarray(offsets)
        self.rows = None if rows is None else np.asarray(rows)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def raw(self, i: int) -> bytes:
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        if not 0 <= start <= end <= len(self.data):
            raise self.damaged(f"{self.name}_offsets", f"has a bad offset at {i}")
        return self.data[start:end].tobytes()

    def __getitem__(self, i: int) -> str:
        try:
            return _decode(self.raw(i))
        except UnicodeDecodeError:
            raise self.damaged(f"{self.name}_bytes", f"has a bad string at {i}") from None

    def all(self) -> list[str]:
        """Every string, in stored order (reads the whole table)."""
        data, offsets = self.data.tobytes(), np.asarray(self.offsets).tolist()
        try:
            return [_decode(data[offsets[i] : offsets[i + 1]]) for i in range(len(self))]
        except UnicodeDecodeError:
            raise self.damaged(f"{self.name}_bytes", "has a bad string") from None

    def rows_equal(self, text: str) -> list[int]:
        """Rows whose string is `text` (sorted tables only)."""
        low = self.position(text)
        high = bisect.bisect_right(range(len(self)), _encode(text), lo=low, key=self.raw)
        return self._rows(low, high)

    def position(self, text: str) -> int:
        """Where `text` would go in a sorted table."""
        return bisect.bisect_left(range(len(self)), _encode(text), key=self.raw)

    def rows_with_prefix(self, prefix: str) -> list[int]:
        """Rows whose string starts with `prefix` (sorted tables only)."""
        key = _encode(prefix)
        low = self.position(prefix)
        high = bisect.bisect_right(
            range(len(self)), key, lo=low, key=lambda i: self.raw(i)[: len(key)]
        )
        return self._rows(low, high)

    def _rows(self, low: int, high: int) -> list[int]:
        assert self.rows is not None, "sorted tables only"  # only sorted tables are looked up
        rows = sorted(int(row) for row in self.rows[low:high])
        if rows and not 0 <= rows[0] <= rows[-1] < len(self):
            raise self.damaged(f"{self.name}_rows", "names a row that does not exist")
        return rows


class Keys:
    """IDs, handles, citation keys and digests of an index, found by binary search over stored
    sorted arrays."""

    def __init__(
        self,
        load: Callable[[str], np.ndarray],
        has: Callable[[str], bool],
        size: int,
        damaged: Damaged,
    ):
        """`load` maps an array's name to the array, `has` says whether the index stores it (the
        tables added since format 2 may be missing)."""

        def table(name: str, sorted_: bool) -> StringTable:
            rows = load(f"{name}_rows") if sorted_ else None
            return StringTable(
                name, load(f"{name}_bytes"), load(f"{name}_offsets"), rows, size, damaged
            )

        self.ids = table("ids", True)
        self.folded_ids = table("folded_ids", True)
        self.folded_handles = table("folded_handles", True)
        self.handles = table("handles", False)
        self.rank = np.asarray(load("id_rank"))
        if self.rank.shape != (size,):
            raise damaged("id_rank", "does not list every paper")
        # The tables only `--from-file` and BibTeX output use are opened on first use: a cold
        # `papers like` maps none of them.
        self._table, self._load, self._has, self._size, self._damaged = (
            table,
            load,
            has,
            size,
            damaged,
        )

    @functools.cached_property
    def citation_keys(self) -> StringTable | None:
        return self._table("citation_keys", True) if self._has("citation_keys_bytes") else None

    @functools.cached_property
    def digests(self) -> dict[str, DigestTable]:
        load, size, damaged = self._load, self._size, self._damaged
        return {
            name: DigestTable(
                name, load(f"{name}_digests"), load(f"{name}_digest_rows"), size, damaged
            )
            for name in DIGESTS
            if self._has(f"{name}_digests")
        }

    def id_of(self, row: int) -> str:
        position = int(self.rank[row])
        if not 0 <= position < len(self.ids):
            raise self.ids.damaged("id_rank", f"has a bad position at row {row}")
        return self.ids[position]

    def handle_of(self, row: int) -> str:
        return self.handles[row]

    def all_ids(self) -> list[str]:
        """Every ID in row order (reads them all: for listing and export, not lookups)."""
        in_id_order = self.ids.all()
        return [in_id_order[position] for position in np.asarray(self.rank).tolist()]

    def all_handles(self) -> list[str]:
        return self.handles.all()

    def matching_rows(self, reference: str) -> list[int]:
        """Rows a reference names: its exact ID, else its handle ignoring case, else
        IDs starting with it ignoring case (in row order)."""
        exact = self.ids.rows_equal(reference)
        if exact:
            return exact
        folded = reference.casefold()
        by_handle = self.folded_handles.rows_equal(folded)
        if len(by_handle) > 1:
            # Handles are unique ignoring lower(), not casefold() ("Straße", "STRASSE"): exact case
            # decides.
            by_handle = [row for row in by_handle if self.handle_of(row) == reference] or by_handle
        if by_handle:
            return by_handle
        return self.folded_ids.rows_with_prefix(folded)

    def names_near(self, reference: str, count: int) -> tuple[list[str], list[str]]:
        """(IDs, handles) of the `count` papers on each side of `reference`, and of its first half,
        in casefolded order: where a name with a typo in its second half sorts, found without
        reading every key."""
        folded = reference.casefold()
        near: list[set[int]] = []
        for table in (self.folded_ids, self.folded_handles):
            rows: set[int] = set()
            assert table.rows is not None  # the casefolded tables are sorted, with their rows
            for probe in {folded, folded[: len(folded) // 2]}:
                position = table.position(probe)
                rows.update(
                    int(row) for row in table.rows[max(0, position - count) : position + count]
                )
            near.append(rows)
        return [self.id_of(row) for row in sorted(near[0])], [
            self.handle_of(row) for row in sorted(near[1])
        ]

    def row_of_id(self, paper_id: str) -> int | None:
        """The row of the paper with exactly this ID, if any."""
        rows = self.ids.rows_equal(paper_id)
        return rows[0] if rows else None

    def rows_with_citation_key(self, folded: str) -> list[int] | None:
        """Rows whose casefolded citation key is `folded`, in row order; None when the index
        predates the table."""
        return None if self.citation_keys is None else self.citation_keys.rows_equal(folded)

    def rows_with(self, table: str, key: str) -> list[int] | None:
        """Rows whose `table` key ("text" or "identifier") may be `key` (the same digest: confirm
        on the paper), in row order; None when the index predates that table."""
        found = self.digests.get(table)
        return None if found is None else found.rows_of(key)

    def rows_named(self, values: Sequence[str]) -> set[int]:
        """Rows whose ID is one of `values` or whose handle is one of them ignoring case."""
        rows: set[int] = set()
        for value in values:
            rows.update(self.ids.rows_equal(value))
            rows.update(self.folded_handles.rows_equal(value.casefold()))
        return rows


def stored_keys(stored: StoredIndex) -> Keys:
    """The key tables (keys/) of one stored index version, memory-mapped and searched by
    bisection: opening reads no list of every key. The one way every reader of an index, an add
    and a remove look papers up."""
    from .stored import corrupt

    return Keys(
        lambda name: stored.load_array(f"keys/{name}.npy", mmap=True),
        lambda name: stored.has(f"keys/{name}.npy"),
        int(stored.manifest["paper_count"]),
        lambda name, problem: corrupt(stored, f"keys/{name}.npy", problem),
    )
