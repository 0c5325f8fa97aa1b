"""One version of an index read: which version is live (CURRENT), that version pinned while it is
read, its files checked against its manifest.

A reader holds a shared lock on its version's manifest; a build removes an old
version only when it can lock it exclusively, so no version vanishes under a reader.
Stored data is numpy arrays (loaded with allow_pickle=False), JSON, and FAISS's
own format: nothing on the load path can execute stored code.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ..digests import file_digest
from ..errors import (
    IndexBusyError,
    IndexCorruptError,
    IndexMismatchError,
    IndexMissingError,
    RecommenderError,
)
from .home import missing_index, rebuild_hint
from .layout import COLLECTIONS, COLLECTIONS_LEFT_OUT, CURRENT, FORMAT_VERSION, MANIFEST

# Every load checks the size of every file and re-hashes the smallest ones, up to this
# many bytes in all: a few milliseconds whatever the corpus size (a six-paper index is
# hashed whole; at 1M papers, the metadata and vocabulary). `papers info --verify` hashes them all.
CHEAP_HASH_BYTES = 4 * 1024 * 1024


def is_index(folder: Path) -> bool:
    """Whether `folder` is an index: a CURRENT naming a version folder that holds a manifest."""
    try:
        live, _ = _read_current(folder)
    except RecommenderError:  # a damaged CURRENT is still an index's (to be rebuilt or removed)
        return (folder / CURRENT).is_file() and any(folder.glob(f"v-*/{MANIFEST}"))
    return live is not None and (folder / live / MANIFEST).is_file()


def _live_version(index_dir: Path) -> str | None:
    return _read_current(index_dir)[0]


def live_version(index_dir: Path) -> str | None:
    """The name of the index's live version folder (None before its first build): one small read,
    so a long-running reader (`papers serve`) can tell when a rebuild has swapped CURRENT."""
    return _live_version(index_dir)


# The collections of the live versions read so far, by (index folder, version): a version never
# changes.
_collections_read: dict[tuple[str, str], dict[str, list[str]]] = {}
_left_out_read: dict[tuple[str, str], dict[str, dict[str, int]]] = {}


def collection_memberships(index_dir: Path) -> dict[str, list[str]]:
    """The reference manager's collections the live version records, each path with its papers' IDs
    (index/layout.py COLLECTIONS); empty before the first build or when no paper came from one."""
    version = live_version(index_dir)
    if version is None:
        return {}
    key = (str(index_dir), version)
    if key not in _collections_read:
        with open_stored(index_dir) as stored:
            found = stored.load_json(COLLECTIONS) if stored.has(COLLECTIONS) else {}
            if not isinstance(found, dict) or not all(
                isinstance(ids, list) and all(isinstance(i, str) for i in ids)
                for ids in found.values()
            ):
                raise corrupt(stored, COLLECTIONS, "is not a map of collections to paper IDs")
            _collections_read[(str(index_dir), stored.folder.name)] = found
        return found
    return _collections_read[key]


def collections_left_out(index_dir: Path) -> dict[str, dict[str, int]]:
    """The collections some of whose items the live version's build did not make papers, each with
    how many by reason (index/layout.py COLLECTIONS_LEFT_OUT); empty when every item became one."""
    version = live_version(index_dir)
    if version is None:
        return {}
    key = (str(index_dir), version)
    if key not in _left_out_read:
        with open_stored(index_dir) as stored:
            found = (
                stored.load_json(COLLECTIONS_LEFT_OUT) if stored.has(COLLECTIONS_LEFT_OUT) else {}
            )
            if not isinstance(found, dict) or not all(
                isinstance(reasons, dict)
                and all(isinstance(n, int) and not isinstance(n, bool) for n in reasons.values())
                for reasons in found.values()
            ):
                raise corrupt(stored, COLLECTIONS_LEFT_OUT, "is not a map of collections to counts")
            _left_out_read[(str(index_dir), stored.folder.name)] = found
        return found
    return _left_out_read[key]


def _read_current(index_dir: Path) -> tuple[str | None, str | None]:
    """The live version's folder name and its manifest's sha256 (None for indexes that predate
    it)."""
    path = index_dir / CURRENT
    try:
        parts = path.read_text(encoding="utf-8").split()
    except FileNotFoundError:
        return None, None
    except PermissionError:
        raise RecommenderError(
            f"cannot read index {index_dir}: permission denied: ask its owner, or build your own"
        ) from None
    except (UnicodeDecodeError, OSError):
        parts = ["?"]
    if not parts:
        return None, None
    if len(parts) > 2 or not parts[0].startswith("v-") or "/" in parts[0]:
        raise IndexCorruptError(f"index file {path} is damaged: run `{rebuild_hint(index_dir)}`")
    return parts[0], parts[1] if len(parts) == 2 else None


class StoredIndex:
    """Read access to the live version of an index, checked against its manifest."""

    def __init__(
        self, index_dir: Path, folder: Path, manifest: dict, pin=None, folder_fd: int | None = None
    ):
        self.index_dir = index_dir
        self.folder = folder
        self.manifest = manifest
        self._pin = (
            pin  # the manifest, open with a shared lock: the version is not removed under us
        )
        # The version folder, open: every read goes through it, not through the index's path, so a
        # reader keeps reading the version it opened when the index is renamed (`papers indexes mv`)
        # or removed (`rm` moves a version a reader holds aside, see catalogue.remove_index).
        self._folder_fd = folder_fd
        self._readers: dict[str, ArrayReader] = {}

    def close(self) -> None:
        """Let a build remove this version once it is no longer live (reads may then fail)."""
        self._readers.clear()  # they refer back to this object
        if self._pin is not None:
            self._pin.close()
            self._pin = None
        if self._folder_fd is not None:
            os.close(self._folder_fd)
            self._folder_fd = None

    def file(self, name: str) -> Path:
        """Where to read the stored file `name`: through the open version folder (see `__init__`);
        `path(name)` is the name to show."""
        if self._folder_fd is None or not _FD_PATHS.is_dir():
            return self.folder / name
        return _FD_PATHS / str(self._folder_fd) / name

    def __enter__(self) -> StoredIndex:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def path(self, name: str) -> Path:
        return self.folder / name

    def has(self, name: str) -> bool:
        return name in self.manifest["files"]

    def load_array(self, name: str, mmap: bool = False) -> np.ndarray:
        """A stored array; `mmap=True` maps it read-only, so only the pages used are read."""
        try:
            try:
                # Mapped first even when read whole: a header claiming more than the file holds is
                # then
                # damage (ValueError), not an allocation of that much memory ("out of memory").
                mapped = np.load(self.file(name), mmap_mode="r", allow_pickle=False)
                return mapped if mmap else np.array(mapped)
            except ValueError:
                if not mmap:
                    raise
                # Not mappable (e.g. an object array): the plain load names the problem as it always
                # has.
                np.load(self.file(name), allow_pickle=False)
                raise
        except (ValueError, OSError, EOFError) as error:
            raise IndexCorruptError(
                f"index file {self.path(name)} cannot be read ({error}): run"
                f" `{rebuild_hint(self.index_dir)}`"
            ) from None

    def array_reader(self, name: str) -> ArrayReader:
        """A stored array read by slices into fresh memory (pread), for scattered reads. Its header
        is parsed once a version (a version never changes), not once a lookup."""
        readers = self._readers
        if name not in readers:
            mapped = self.load_array(name, mmap=True)
            readers[name] = ArrayReader(
                self, name, mapped.dtype, mapped.shape, int(getattr(mapped, "offset", 0))
            )
        return readers[name]

    def load_json(self, name: str):
        try:
            return json.loads(self.file(name).read_text(encoding="utf-8"))
        except (ValueError, OSError) as error:
            raise IndexCorruptError(
                f"index file {self.path(name)} cannot be read ({error}): run"
                f" `{rebuild_hint(self.index_dir)}`"
            ) from None

    def read_jsonl_rows(self, name: str, offsets: np.ndarray, rows: Sequence[int]) -> list[dict]:
        """The given rows of a JSON-lines file, read by byte offset."""
        out = []
        with open(self.file(name), "rb") as handle:
            for row in rows:
                handle.seek(int(offsets[row]))
                line = handle.read(int(offsets[row + 1] - offsets[row]))
                try:
                    out.append(json.loads(line))
                except ValueError:
                    raise IndexCorruptError(
                        f"index file {self.path(name)} row {row} cannot be read: run"
                        f" `{rebuild_hint(self.index_dir)}`"
                    ) from None
        return out

    def iter_jsonl(self, name: str) -> Iterator[dict]:
        with open(self.file(name), "rb") as handle:
            for number, line in enumerate(handle):
                try:
                    yield json.loads(line)
                except ValueError:
                    raise IndexCorruptError(
                        f"index file {self.path(name)} row {number} cannot be read: run"
                        f" `{rebuild_hint(self.index_dir)}`"
                    ) from None

    def load_faiss(self, name: str, writable: bool = False):
        """A FAISS index; memory-mapped read-only where FAISS allows it, unless `writable`."""
        import faiss

        try:
            if writable:
                raise RuntimeError("read into memory")
            flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY
            return faiss.read_index(str(self.file(name)), flags)
        except RuntimeError:
            try:
                return faiss.read_index(str(self.file(name)))
            except MemoryError:
                size = self.file(name).stat().st_size
                raise IndexCorruptError(
                    f"index file {self.path(name)} ({size:,} bytes) asks for more memory than there"
                    " is: if `papers info --verify` finds it damaged, run"
                    f" `{rebuild_hint(self.index_dir)}`; else free some memory"
                ) from None
            except RuntimeError as error:
                message = (
                    str(error).strip().splitlines()[-1] if str(error).strip() else "unreadable"
                )
                raise IndexCorruptError(
                    f"index file {self.path(name)} cannot be read by FAISS ({message}): run"
                    f" `{rebuild_hint(self.index_dir)}`"
                ) from None

    def verify(self, full: bool = True) -> None:
        """Check every stored file against the manifest: sizes always; hashes of all files
        when `full`, else of the smallest ones up to CHEAP_HASH_BYTES in all."""
        for name, expected in sorted(self.manifest["files"].items()):
            path = self.path(name)
            try:
                status = self.file(name).lstat()
            except FileNotFoundError:
                raise IndexCorruptError(
                    f"index file {path} is missing: run `{rebuild_hint(self.index_dir)}`"
                ) from None
            if not stat.S_ISREG(
                status.st_mode
            ):  # a build writes plain files only: a link was planted
                raise IndexCorruptError(
                    f"index file {path} is not a plain file (a link?): run"
                    f" `{rebuild_hint(self.index_dir)}`"
                )
            size = status.st_size
            if size != expected["bytes"]:
                raise IndexCorruptError(
                    f"index file {path} is {size} bytes, the manifest says {expected['bytes']}"
                    f" (truncated or altered): run `{rebuild_hint(self.index_dir)}`"
                )
        hashed = (
            set(self.manifest["files"])
            if full
            else _smallest(self.manifest["files"], CHEAP_HASH_BYTES)
        )
        for name, expected in sorted(self.manifest["files"].items()):
            if name in hashed:
                if file_digest(self.file(name)) != expected["sha256"]:
                    raise IndexCorruptError(
                        f"index file {self.path(name)} does not match its checksum (altered or"
                        f" damaged): run `{rebuild_hint(self.index_dir)}`"
                    )


class ArrayReader:
    """Rows of a stored .npy array read with pread, never mapped.

    A memory map is the right tool for reading much of an array. For a few
    scattered slices it is not: the kernel maps whole page-cache folios (often
    256 KB and more) around every page touched, so a lookup's peak RSS would grow
    with the corpus. `reading()` opens the file once for a batch of reads."""

    def __init__(self, stored: StoredIndex, name: str, dtype: np.dtype, shape: tuple, offset: int):
        self.stored, self.name = stored, name
        self.dtype, self.shape, self.offset = np.dtype(dtype), tuple(shape), offset
        self.row_items = int(np.prod(self.shape[1:], dtype=np.int64))

    def __len__(self) -> int:
        return self.shape[0]

    @contextlib.contextmanager
    def reading(self) -> Iterator:
        """A function `read(start, stop)`: rows start..stop-1 as a new array."""
        row_bytes = self.row_items * self.dtype.itemsize
        with open(self.stored.file(self.name), "rb") as handle:
            descriptor = handle.fileno()

            def read(start: int, stop: int) -> np.ndarray:
                start, stop = int(start), int(stop)
                if not 0 <= start <= stop <= self.shape[0]:
                    raise corrupt(self.stored, self.name, f"has no rows {start}..{stop}")
                data = os.pread(
                    descriptor, (stop - start) * row_bytes, self.offset + start * row_bytes
                )
                if len(data) != (stop - start) * row_bytes:
                    raise corrupt(self.stored, self.name, "is shorter than its header says")
                return np.frombuffer(data, dtype=self.dtype).reshape(
                    (stop - start, *self.shape[1:])
                )

            yield read

    @contextlib.contextmanager
    def reading_ranges(self) -> Iterator:
        """A function `read(starts, stops)`: rows starts[i]..stops[i]-1 of every range, concatenated
        into one new array (one pread a range, without the per-call work of `reading`'s reads)."""
        row_bytes = self.row_items * self.dtype.itemsize
        with open(self.stored.file(self.name), "rb") as handle:
            descriptor = handle.fileno()

            def read(starts, stops) -> np.ndarray:
                starts, stops = (
                    np.asarray(starts, dtype=np.int64),
                    np.asarray(stops, dtype=np.int64),
                )
                if len(starts) and not (
                    0 <= starts.min() and (starts <= stops).all() and stops.max() <= self.shape[0]
                ):
                    bad = int(
                        np.flatnonzero((starts < 0) | (starts > stops) | (stops > self.shape[0]))[0]
                    )
                    raise corrupt(
                        self.stored, self.name, f"has no rows {starts[bad]}..{stops[bad]}"
                    )
                sizes = ((stops - starts) * row_bytes).tolist()
                offsets = (self.offset + starts * row_bytes).tolist()
                data = b"".join(
                    [
                        os.pread(descriptor, size, offset)
                        for size, offset in zip(sizes, offsets)
                        if size
                    ]
                )
                if len(data) != sum(sizes):
                    raise corrupt(self.stored, self.name, "is shorter than its header says")
                return np.frombuffer(data, dtype=self.dtype).reshape((-1, *self.shape[1:]))

            yield read


def _smallest(files: dict, budget: int) -> set[str]:
    """The names of the smallest files whose sizes add up to at most `budget` bytes."""
    chosen = set()
    for name, entry in sorted(files.items(), key=lambda item: (item[1]["bytes"], item[0])):
        if entry["bytes"] > budget:
            break
        budget -= entry["bytes"]
        chosen.add(name)
    return chosen


def corrupt(stored: StoredIndex, name: str, problem: str) -> IndexCorruptError:
    """The error for a stored file whose content does not fit the rest of the index."""
    return IndexCorruptError(
        f"index file {stored.path(name)} {problem}: run `{rebuild_hint(stored.index_dir)}`"
    )


def open_stored(index_dir: Path, verify: bool = False) -> StoredIndex:
    """Open the live version of an index and check its manifest.

    Sizes of all files and hashes of the small ones are always checked;
    `verify=True` hashes every file.
    """
    live, manifest_digest, pin = _pin_live_version(index_dir)
    try:
        folder = index_dir / live
        try:
            raw = pin.read()
            manifest = json.loads(raw)
            if not isinstance(manifest, dict) or "files" not in manifest:
                raise ValueError("not a manifest")
        except FileNotFoundError:
            raise IndexCorruptError(
                f"index {index_dir} has no manifest in {live}: run `{rebuild_hint(index_dir)}`"
            ) from None
        except ValueError:
            raise IndexCorruptError(
                f"index file {folder / MANIFEST} is damaged: run `{rebuild_hint(index_dir)}`"
            ) from None
        version = manifest.get("format_version")
        if version != FORMAT_VERSION:
            newer = isinstance(version, int) and version > FORMAT_VERSION
            raise IndexMismatchError(
                f"index {index_dir} has format version {version}, this papers reads version"
                f" {FORMAT_VERSION}"
                + (" (built by a newer papers: upgrade papers, or " if newer else " (")
                + f"run `{rebuild_hint(index_dir)}` to rebuild it)"
            )
        if manifest_digest is not None and hashlib.sha256(raw).hexdigest() != manifest_digest:
            raise IndexCorruptError(
                f"index file {folder / MANIFEST} does not match its checksum in {CURRENT} (altered"
                f" or damaged): run `{rebuild_hint(index_dir)}`"
            )
        problem = _manifest_problem(manifest)
        if problem:
            raise IndexCorruptError(
                f"index file {folder / MANIFEST} {problem} (damaged or forged): run"
                f" `{rebuild_hint(index_dir)}`"
            )
        stored = StoredIndex(index_dir, folder, manifest, pin, _open_folder(folder))
        try:
            stored.verify(full=verify)
        except BaseException:
            stored.close()
            raise
    except BaseException:
        pin.close()  # refused: nothing may stay open
        raise
    return stored


# The folders of a process's open descriptors (Linux): a path through one of them reaches the folder
# opened, wherever it has been moved since.
_FD_PATHS = Path("/proc/self/fd")


def _open_folder(folder: Path) -> int | None:
    try:
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as error:
        raise IndexCorruptError(
            f"index folder {folder} cannot be opened ({error.strerror}): "
            f"run `{rebuild_hint(folder.parent)}`"
        ) from None


def folder_path(descriptor: int) -> Path | None:
    """Where an open folder is now (it may have been renamed since it was opened); None once it is
    removed, or where the system cannot tell."""
    try:
        where = os.readlink(_FD_PATHS / str(descriptor))
    except OSError:
        return None
    if where.endswith(" (deleted)") or not os.path.isdir(where):
        return None
    return Path(where)


def _manifest_problem(manifest: dict) -> str:
    """What is missing or wrong in a manifest of this format (every build writes these), else ''."""
    if not isinstance(manifest.get("model"), str) or not manifest["model"]:
        return "names no model"
    for key in ("dimension", "paper_count"):
        value = manifest.get(key)
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < (1 if key == "dimension" else 0)
        ):
            return f"has no valid {key}"
    if not isinstance(manifest.get("chunking"), dict):
        return "has no chunking"
    files_ = manifest.get("files")
    if not isinstance(files_, dict) or not all(
        isinstance(entry, dict)
        and isinstance(entry.get("bytes"), int)
        and isinstance(entry.get("sha256"), str)
        for entry in files_.values()
    ):
        return "has no valid list of files"
    return ""


def _pin_live_version(index_dir: Path):
    """CURRENT's version, its manifest hash and its manifest open under a shared lock.

    A build removes an old version only if it can lock that version's manifest
    exclusively, so a version stays on disk while any reader has it open. A build
    may swap CURRENT and remove the version between our reading CURRENT and
    locking: then we read CURRENT again.
    """
    if index_dir.exists() and not index_dir.is_dir():
        raise IndexMissingError(
            f"{index_dir} is a file, not an index folder: give an index name or folder"
        )
    for _ in range(5):
        live, digest = _read_current(index_dir)
        if live is None:
            raise missing_index(index_dir)
        manifest = index_dir / live / MANIFEST
        try:
            pin = open(manifest, "rb")
        except FileNotFoundError:
            if _read_current(index_dir)[0] != live:
                continue
            raise IndexCorruptError(
                f"index {index_dir} has no manifest in {live}: run `{rebuild_hint(index_dir)}`"
            ) from None
        fcntl.flock(pin, fcntl.LOCK_SH)
        if manifest.exists():
            return live, digest, pin
        pin.close()
    raise IndexBusyError(
        f"index {index_dir} keeps changing under us (builds in a loop?): try again"
    )


@contextlib.contextmanager
def unpinned(version: Path) -> Iterator[bool | None]:
    """Whether no reader pins `version` (its manifest locked shared: `_pin_live_version`): True
    with its manifest locked exclusively until the block ends, so that no reader pins it while it
    is removed; False while a reader holds it; None when it has no manifest that can be opened
    (never committed: no reader can hold it)."""
    try:
        pin = open(version / MANIFEST, "rb")
    except OSError:
        pin = None
    if pin is None:
        yield None
        return
    with pin:
        try:
            fcntl.flock(pin, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            free = False
        else:
            free = True
        yield free


class IndexFolder:
    """An index folder held open by a long-running reader (`papers serve`), so that it can
    tell where the index went: renamed, it is followed; removed, that is said in one line."""

    def __init__(self, index_dir: Path):
        self.index_dir = Path(index_dir)
        try:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
            self._descriptor: int | None = os.open(self.index_dir, flags)
        except OSError:
            # Not there yet (or not a folder): opening the index says what is wrong.
            self._descriptor = None

    def where(self) -> Path:
        """The index folder's path now: the one given while it has its CURRENT there, else where the
        folder opened has been renamed to; IndexMissingError once it has been removed."""
        if self._descriptor is None or (self.index_dir / CURRENT).is_file():
            return self.index_dir
        moved = folder_path(self._descriptor)
        if moved is not None and (moved / CURRENT).is_file():
            self.index_dir = moved
            return moved
        # Gone, or its CURRENT removed (`papers indexes rm` keeps a folder that holds the user's
        # tags); a build there later brings it back.
        raise IndexMissingError(
            f"index {self.index_dir} was removed: run "
            f"`{rebuild_hint(self.index_dir)}`, or restart with another index"
        )

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None
