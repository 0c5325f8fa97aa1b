"""The on-disk layout of an index: the only module that touches its files.

    indexes/<name>/
        CURRENT          name of the live version folder and its manifest's sha256 (replaced atomically)
        .lock            held by a build (fcntl lock), never by readers
        v-<build-id>/    one complete build: manifest.json and the files it lists
        tags.sqlite      the user's tags of papers (`papers serve`), kept across rebuilds (WAL mode)
        cache.sqlite     only in indexes built before the shared cache: read as a fallback (see EmbeddingCache)

The embedding cache is shared by every index of the user: `<cache home>/embeddings.sqlite`
(export_cache.cache_home(), beside the ONNX exports).

A build writes a fresh `.tmp-*` folder, checksums every file into the
manifest, renames the folder to `v-*` and then swaps CURRENT with
`os.replace`, so readers see the old index or the new one, never a mixture.
A reader holds a shared lock on its version's manifest; a build removes an old
version only when it can lock it exclusively, so no version vanishes under a reader.
A build removes only what the index's own records say it made: a `.tmp-*` folder holding
the `.papers-build` mark it was made with, a `.tmp-*` or `v-*` folder whose files are those
its manifest lists; a non-empty folder that is no index is refused before anything is written. Every file
is created exclusively and never through a link (recommender/files.py).
Stored data is numpy arrays (loaded with allow_pickle=False), JSON, and FAISS's
own format: nothing on the load path can execute stored code.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import gc
import hashlib
import io
import json
import os
import shutil
import stat
import time
import warnings
from dataclasses import dataclass
import zlib
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from .. import files
from ..errors import IndexBusyError, IndexCorruptError, IndexMismatchError, IndexMissingError, InputError, RecommenderError, shell_command
from ..digests import file_digest

FORMAT_VERSION = 2  # 2: IDs and handles as sorted arrays (keys/*.npy) instead of keys.json
DEFAULT_INDEX = "default"
# Where a bare index name lives: $PAPERS_HOME, else ./indexes/ when it exists
# (a checkout of the project), else the user data folder (platformdirs).
HOME_VARIABLE = "PAPERS_HOME"
INDEX_ROOT = Path("indexes")
APP_NAME = "papers"
MANIFEST = "manifest.json"
CURRENT = "CURRENT"
LOCK = ".lock"
CACHE = "cache.sqlite"  # the per-index embedding cache of indexes built before the shared one
SEGMENTS = "SEGMENTS"  # the segment list of `papers add` (index/segments.py), replaced atomically
SEGMENT_FOLDER = "segments"  # the segments themselves, each a small index of its own
TAGS = "tags.sqlite"  # the user's tags (papers serve): kept by builds; `papers indexes rm` removes them with the index
# In every build folder from its creation on: what says papers made it (so only such folders are removed).
BUILD_MARK = ".papers-build"
# The files of one build (inside v-<build-id>/).
VECTORS = "vectors.npy"
FAISS = "faiss.index"
PAPERS = "papers.jsonl"
OFFSETS = "papers.offsets.npy"
# IDs and handles as sorted string arrays with their rows (index/keys.py), keys/<name>.npy.
KEY_ARRAYS = (
    "ids_bytes", "ids_offsets", "ids_rows", "id_rank",
    "folded_ids_bytes", "folded_ids_offsets", "folded_ids_rows",
    "folded_handles_bytes", "folded_handles_offsets", "folded_handles_rows",
    "handles_bytes", "handles_offsets",
    # Indexes built before these lack them: their papers are then scanned (index/keys.py).
    "citation_keys_bytes", "citation_keys_offsets", "citation_keys_rows",
    "text_digests", "text_digest_rows", "identifier_digests", "identifier_digest_rows",
)
LEXICAL_ARRAYS = ("idf", "csr_data", "csr_indices", "csr_indptr", "csc_data", "csc_indices", "csc_indptr")
# Each vocabulary column's largest weight, the bound of exact top-k lexical scoring
# (lexical.LexicalIndex.top). Indexes built before it lack it: they are scored in full.
COLUMN_MAX = "lexical/column_max.npy"
VOCABULARY = "lexical/vocabulary.json"
STOP_WORDS = "lexical/stop_words.json"
QUERY_ENCODER = "query-encoder"
# Every load checks the size of every file and re-hashes the smallest ones, up to this
# many bytes in all: a few milliseconds whatever the corpus size (a six-paper index is
# hashed whole; at 1M papers, the metadata and vocabulary). `papers info --verify` hashes them all.
CHEAP_HASH_BYTES = 4 * 1024 * 1024


def default_index() -> str:
    return (os.environ.get("PAPERS_INDEX") or "").strip() or DEFAULT_INDEX


@dataclass(frozen=True)
class IndexHome:
    """The folder bare index names resolve under, and why that one."""

    path: Path
    reason: str  # "PAPERS_HOME", "checkout" or "user data folder"

    def describe(self) -> str:
        why = {
            "PAPERS_HOME": f"from ${HOME_VARIABLE}",
            "checkout": f"./{INDEX_ROOT}/ of this folder",
            "user data folder": f"the user data folder; set ${HOME_VARIABLE} to choose another",
        }[self.reason]
        return f"{self.path} ({why})"


def index_home() -> IndexHome:
    """$PAPERS_HOME if set, else ./indexes/ when it exists (a checkout), else the user data folder."""
    home = os.environ.get(HOME_VARIABLE)
    if home:
        return IndexHome(Path(home).expanduser(), "PAPERS_HOME")
    if INDEX_ROOT.is_dir():
        return IndexHome(INDEX_ROOT, "checkout")
    import platformdirs

    return IndexHome(Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "indexes", "user data folder")


def resolve_index_dir(index: str | os.PathLike | None = None) -> Path:
    """`<home>/<name>` for a bare name (see `index_home`), else the path as given."""
    index = str(index) if index is not None else default_index()
    if not index.strip():
        # An unset variable in a script (`--index "$NAME"`) would otherwise build into indexes/ itself.
        raise InputError("--index is empty: give an index name or folder")
    if os.sep in index or index.startswith(".") or (os.altsep and os.altsep in index):
        path = Path(index)
        # An index is not the folder of indexes: no need to work out where that is (platformdirs).
        if not (path / CURRENT).is_file() and path.resolve() == index_home().path.resolve():
            raise InputError(f"--index {index} is the folder that holds every index: give an index name")
        return path
    return index_home().path / index


def check_not_in_index(path: str | os.PathLike) -> None:
    """Refuse an output file among an index's own files (`--out indexes/default/CURRENT`)."""
    target = Path(os.path.abspath(path))
    for folder in target.parents:
        if (folder / CURRENT).is_file() or ((folder / LOCK).is_file() and is_index_folder(folder)):
            inside = target.relative_to(folder).parts
            if len(inside) > 1 or inside[0] in (CURRENT, LOCK) or inside[0].startswith((CACHE, TAGS, f".{CURRENT}")):
                raise InputError(f"{path} is inside the index folder {os.path.relpath(folder)}: write it somewhere else")
            return


def rebuild_hint(index_dir: Path, inputs: str | None = None) -> str:
    """The command that rebuilds the index, quoted for the shell (errors.shell_command)."""
    target = () if index_dir == resolve_index_dir(None) else ("--index", _display(index_dir))
    return shell_command("papers", "build", *([inputs] if inputs else []), *target)


def _display(index_dir: Path) -> str:
    if index_dir.parent == index_home().path:
        return index_dir.name
    return str(index_dir)


# ---------------------------------------------------------------- listing


@dataclass(frozen=True)
class IndexSummary:
    """One index under the home folder, as `papers indexes` lists it."""

    name: str
    path: Path
    papers: int | None
    model: str
    bytes: int
    built_at: str
    problem: str = ""

    def to_dict(self) -> dict:
        return {
            "name": self.name, "path": str(self.path), "papers": self.papers, "model": self.model,
            "bytes": self.bytes, "built_at": self.built_at, "problem": self.problem,
        }


def list_indexes(home: Path | None = None) -> list[IndexSummary]:
    """Every index in the home folder (or `home`), by name; a damaged one says what is wrong."""
    home = index_home().path if home is None else Path(home)
    if not home.is_dir():
        return []
    summaries = []
    for index_dir in _index_folders(home):
        full_path = Path(os.path.abspath(index_dir))
        try:
            with open_stored(index_dir) as stored:
                manifest = stored.manifest
            summaries.append(IndexSummary(
                index_dir.name, full_path, manifest.get("paper_count"), manifest.get("model", ""),
                index_bytes(manifest), manifest.get("built_at", ""),
            ))
        except RecommenderError as error:  # no manifest to go by: what the folder takes on disk
            summaries.append(IndexSummary(index_dir.name, full_path, None, "", _folder_bytes(index_dir), "", str(error)))
    return summaries


def index_bytes(manifest: dict) -> int:
    """An index's size as `info` and `indexes` report it: the bytes of the files its manifest
    lists (the live version; not the embedding cache or versions still open by a reader)."""
    return sum(int(entry["bytes"]) for entry in manifest.get("files", {}).values())


def _folder_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):  # a build may remove files as we go
            if path.is_file():
                total += path.stat().st_size
    return total


# ---------------------------------------------------------------- removing and renaming

def is_index(folder: Path) -> bool:
    """Whether `folder` is an index: a CURRENT naming a version folder that holds a manifest."""
    try:
        live, _ = _read_current(folder)
    except RecommenderError:  # a damaged CURRENT is still an index's (to be rebuilt or removed)
        return (folder / CURRENT).is_file() and any(folder.glob(f"v-*/{MANIFEST}"))
    return live is not None and (folder / live / MANIFEST).is_file()


def _refuse_non_index(index_dir: Path, what: str) -> None:
    if not index_dir.exists():
        raise missing_index(index_dir)
    if not index_dir.is_dir() or not is_index(index_dir):
        raise InputError(f"{index_dir} is not an index (no {CURRENT} naming a build with a manifest): "
                         f"nothing {what}; give the name of an index (see `papers indexes`)")


@contextlib.contextmanager
def _locked(index_dir: Path) -> Iterator[None]:
    """The build lock of an index, taken without waiting: no build runs while it is removed or renamed."""
    try:
        lock = files.open_lock_file(index_dir / LOCK)  # never through a link, as a build's
    except OSError as error:
        raise RecommenderError(f"cannot change index {index_dir}: {error.strerror or error}") from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexBusyError(f"index {index_dir} is being built by another process: wait for it to finish") from None
        yield


@contextlib.contextmanager
def build_lock(index_dir: Path, wait: bool = False) -> Iterator[None]:
    """The build lock of an existing index (`papers add`, `papers remove`): no build runs meanwhile."""
    if not wait:
        with _locked(index_dir):
            yield
        return
    try:
        lock = files.open_lock_file(index_dir / LOCK)
    except OSError as error:
        raise RecommenderError(f"cannot change index {index_dir}: {error.strerror or error}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def remove_index(index: str | os.PathLike) -> tuple[Path, list[str]]:
    """Remove an index (by name or path): what its builds made, nothing else. Returns its folder and
    the names of anything else found in it, which is kept (the folder then stays too)."""
    index_dir = resolve_index_dir(index)
    _refuse_non_index(index_dir, "removed")
    with _locked(index_dir):
        # CURRENT first: from here on the index is missing to every new reader.
        (index_dir / CURRENT).unlink(missing_ok=True)
        kept = []
        for path in sorted(index_dir.iterdir()):
            if not _made_by_a_build(index_dir, path.name):
                kept.append(path.name)
            elif path.is_dir():
                remove_tree(path)
            else:
                path.unlink(missing_ok=True)  # the lock too: held open, it stays ours until we let go
    if not kept:
        index_dir.rmdir()
    return index_dir, kept


def rename_index(old: str | os.PathLike, new: str | os.PathLike) -> tuple[Path, Path]:
    """Rename an index (names or paths, on one filesystem): one rename, so readers see it whole."""
    old_dir, new_dir = resolve_index_dir(old), resolve_index_dir(new)
    _refuse_non_index(old_dir, "renamed")
    if new_dir.exists() or new_dir.is_symlink():
        raise InputError(f"{new_dir} already exists: choose another name, or remove it first")
    new_dir.parent.mkdir(parents=True, exist_ok=True)
    with _locked(old_dir):
        try:
            os.rename(old_dir, new_dir)
        except OSError as error:
            if error.errno == errno.EXDEV:
                raise InputError(f"cannot move {old_dir} to {new_dir}: another filesystem; build it there instead") from None
            raise RecommenderError(f"cannot rename {old_dir} to {new_dir}: {error.strerror}") from None
    return old_dir, new_dir


# ---------------------------------------------------------------- writing


class IndexWriter:
    """Collects the files of one build in a private folder; `commit` makes it live."""

    def __init__(self, index_dir: Path, folder: Path):
        self.index_dir = index_dir
        self.folder = folder

    def path(self, name: str) -> Path:
        """A path inside the build folder, for files written by other libraries (FAISS, ONNX)."""
        target = self.folder / name
        with self.writing_file(target.parent):
            target.parent.mkdir(parents=True, exist_ok=True)
        return target

    @contextlib.contextmanager
    def writing_file(self, path: Path) -> Iterator[None]:
        """A failed write (disk full, quota, read-only) becomes one line naming the file."""
        try:
            yield
        except OSError as error:
            raise write_error(self.index_dir, error.filename or path, error.strerror or str(error)) from None

    def create(self, name: str, mode: str = "wb"):
        """A new file of the build, created exclusively (never through a link)."""
        path = self.path(name)
        with self.writing_file(path):
            return files.open_exclusive(path, mode)

    def save_array(self, name: str, array: np.ndarray) -> None:
        path = self.path(name)
        with self.writing_file(path), self.create(name) as handle:
            np.save(handle, np.ascontiguousarray(array), allow_pickle=False)

    def save_json(self, name: str, data) -> None:
        path = self.path(name)
        with self.writing_file(path), self.create(name, "w") as handle:
            handle.write(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True))

    def save_jsonl(self, name: str, rows: Iterable[dict]) -> np.ndarray:
        """Write one JSON object a line; returns the byte offset of each line (and the end)."""
        offsets = array.array("q", [0])  # 8 bytes a line, not a Python int
        path = self.path(name)
        with self.writing_file(path), self.create(name) as handle:
            for row in rows:
                line = (json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
                handle.write(line)
                offsets.append(offsets[-1] + len(line))
        return np.asarray(offsets, dtype=np.int64)

    def array_file(self, name: str, shape: tuple[int, ...], dtype) -> "ArrayFile":
        """A .npy file of this shape, written a piece at a time (`write`, `append`) and never held in
        memory: the same bytes as `save_array` of the whole array."""
        path = self.path(name)
        with self.writing_file(path):
            return ArrayFile(self, path, tuple(int(size) for size in shape), np.dtype(dtype))

    @contextlib.contextmanager
    def scratch_file(self, name: str) -> Iterator:
        """A temporary binary file inside the build folder (same disk as the index, not the
        memory of a /tmp in RAM), open for writing and reading, removed when done."""
        path = self.path(f".scratch/{name}")
        with self.writing_file(path):
            handle = files.open_exclusive(path, "w+b")
        try:
            yield handle
            handle.flush()
        except OSError as error:
            if error.errno in WRITE_ERRNOS:  # the spool's buffered writes meet a full disk: name the file
                raise write_error(self.index_dir, path, error.strerror or str(error)) from None
            raise
        finally:
            with contextlib.suppress(OSError):  # flushed above, or already failing
                handle.close()
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()

    def save_faiss(self, name: str, index) -> None:
        import faiss

        path = self.path(name)
        with self.writing_file(path), self.create(name) as handle:
            failure: list[OSError] = []

            def write(data: bytes) -> int:
                try:
                    handle.write(data)
                except OSError as error:
                    failure.append(error)
                    raise
                return len(data)

            try:
                faiss.write_index(index, faiss.PyCallbackIOWriter(write))
                if not failure:
                    handle.flush()
            except (RuntimeError, OSError) as error:
                problem = failure[0].strerror if failure else (
                    error.strerror if isinstance(error, OSError) else _faiss_write_problem(str(error)))
                raise write_error(self.index_dir, path, problem or "write failed") from None
            if failure:
                raise write_error(self.index_dir, path, failure[0].strerror or "write failed")

    def commit(self, manifest: dict) -> Path:
        with self.writing_file(self.folder):
            version = self._commit(manifest)
        _fsync_dir(self.index_dir)
        return version

    def _commit(self, manifest: dict) -> Path:
        """Checksum, rename, swap CURRENT: until the swap, the live index is untouched."""
        found = {}
        for path in sorted(p for p in self.folder.rglob("*") if not p.is_dir() and p.name != BUILD_MARK):
            relative = path.relative_to(self.folder).as_posix()
            if not files.is_plain_file(path):  # only links could be: nothing of the build makes one
                raise IndexCorruptError(f"{path} is a link, not a file this build wrote: nothing was changed")
            found[relative] = {"bytes": path.stat().st_size, "sha256": file_digest(path)}
        manifest = dict(manifest, format_version=FORMAT_VERSION, files=found)
        self.save_json(MANIFEST, manifest)
        # From here the manifest, listing every file of the folder, is what says the build made it.
        (self.folder / BUILD_MARK).unlink()
        _fsync_tree(self.folder)
        version = self.index_dir / ("v-" + self.folder.name.removeprefix(".tmp-"))
        os.rename(self.folder, version)
        # CURRENT also holds the manifest's hash, so the manifest is checked like every other file.
        digest = file_digest(version / MANIFEST)
        with files.replacing(self.index_dir / CURRENT) as pointer:
            pointer.write(f"{version.name} {digest}\n")
            _pointer_written(pointer)
        return version


def _pointer_written(pointer) -> None:
    """CURRENT's new content is written, not yet in place (a hook for the crash tests)."""


class ArrayFile:
    """A .npy file of a known shape and dtype, filled by rows with pwrite: peak memory is one piece,
    not the array. Rows are read back with pread (`read`, `take`), never through a memory map,
    whose resident pages would count as the process's memory."""

    def __init__(self, writer: IndexWriter, path: Path, shape: tuple[int, ...], dtype: np.dtype):
        self.writer, self.path, self.shape, self.dtype = writer, path, shape, dtype
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        header = io.BytesIO()
        # The header np.save writes (format 1.0: an array of plain numbers always fits it).
        np.lib.format.write_array_header_1_0(header, {
            "descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})
        self.offset = len(header.getvalue())
        self.written = 0  # rows, for append
        with writer.writing_file(path):
            self.handle = files.open_exclusive(path, "w+b")  # never through a link
            try:
                self.handle.write(header.getvalue())
                self.handle.flush()
                self.handle.truncate(self.offset + shape[0] * self.row_bytes)  # sparse until written
            except BaseException:
                self.handle.close()  # a full disk: nothing left open
                raise

    def __len__(self) -> int:
        return self.shape[0]

    def write(self, start: int, values: np.ndarray) -> None:
        """Rows start, start + 1, ... are `values`."""
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if start < 0 or start + len(values) > self.shape[0] or values.shape[1:] != self.shape[1:]:
            raise ValueError(f"rows {start}..{start + len(values)} of shape {values.shape} do not fit {self.shape}")
        with self.writer.writing_file(self.path):
            os.pwrite(self.handle.fileno(), memoryview(values).cast("B"), self.offset + start * self.row_bytes)

    def __setitem__(self, rows, values) -> None:
        """Like an array's: `rows` an integer or ascending integers, each run of consecutive rows one write."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        values = np.asarray(values, dtype=self.dtype).reshape((len(rows), *self.shape[1:]))
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        for first, last in zip(np.concatenate([[0], breaks]), np.concatenate([breaks, [len(rows)]])):
            self.write(int(rows[first]), values[first:last])

    def append(self, values: np.ndarray) -> None:
        """The next rows, after those appended before."""
        self.write(self.written, values)
        self.written += len(values)

    def read(self, start: int, stop: int) -> np.ndarray:
        start, stop = max(0, int(start)), min(int(stop), self.shape[0])
        data = os.pread(self.handle.fileno(), max(0, stop - start) * self.row_bytes, self.offset + start * self.row_bytes)
        return np.frombuffer(data, dtype=self.dtype).reshape((-1, *self.shape[1:])).copy()

    def take(self, rows) -> np.ndarray:
        """The rows at these (ascending) positions."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype)
        for position, row in enumerate(rows.tolist()):
            out[position] = self.read(row, row + 1)[0]
        return out

    def close(self) -> None:
        self.handle.close()

    def discard(self) -> None:
        """Closed and removed (its rows were of the wrong width: the file is made again)."""
        self.handle.close()
        self.path.unlink(missing_ok=True)


# What a failed write means the disk cannot take more (full, over quota, too big, read-only).
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def write_error(index_dir: Path, path, problem: str) -> RecommenderError:
    """A file of a build could not be written; the live index is untouched."""
    return RecommenderError(
        f"cannot write {path}: {problem}: free some disk space or choose another --index "
        f"(the index {_display(index_dir)} is unchanged)"
    )


def _faiss_write_problem(message: str) -> str:
    """The reason in a FAISS write error (its text ends with the C library's strerror)."""
    import errno

    for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO, errno.EFBIG):
        if os.strerror(code) in message:
            return os.strerror(code)
    lines = message.strip().splitlines()
    return lines[-1] if lines else "write failed"


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            _fsync_file(path)
    _fsync_dir(folder)


@contextlib.contextmanager
def writing(index_dir: Path, wait: bool = False) -> Iterator[IndexWriter]:
    """Lock the index, hand out a private build folder, clean up whatever happens.

    A build reads its papers inside (into the build folder): one that fails on its inputs leaves
    no trace, so an index folder made for it alone is removed again."""
    if index_dir.exists() and not index_dir.is_dir():
        raise InputError(f"{index_dir} is a file, not an index folder: choose another --index")
    check_index_folder(index_dir)
    created = not index_dir.exists()
    while True:
        try:
            index_dir.mkdir(parents=True, exist_ok=True)
            lock = files.open_lock_file(index_dir / LOCK)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise RecommenderError(f"cannot use index {index_dir}: {index_dir / LOCK} is a symbolic link, which is never "
                                       "followed: remove it, or choose another --index") from None
            if error.errno is None:  # not a plain file of ours
                raise RecommenderError(f"cannot use index {index_dir}: {error}: remove it, or choose another --index") from None
            raise RecommenderError(f"cannot write index {index_dir}: {error.strerror}: choose a writable --index") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            lock.close()
            raise IndexBusyError(
                f"index {index_dir} is being built by another process: wait for it to finish, or use --wait"
            ) from None
        if os.fstat(lock.fileno()).st_nlink:
            break
        lock.close()  # the build we waited for failed on its inputs and removed the folder it made: again
    with lock:
        _remove_leftovers(index_dir)
        folder = index_dir / f".tmp-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"
        try:
            folder.mkdir()  # exclusive: fails on anything already there, a link included
            os.close(files.create_exclusive(folder / BUILD_MARK))
        except OSError as error:
            remove_tree(folder)
            raise write_error(index_dir, error.filename or folder, error.strerror or str(error)) from None
        try:
            yield IndexWriter(index_dir, folder)
        except BaseException:
            remove_tree(folder)
            if created and os.listdir(index_dir) == [LOCK]:
                (index_dir / LOCK).unlink()
                with contextlib.suppress(OSError):
                    index_dir.rmdir()
            raise
        finally:
            remove_tree(folder)
        _remove_old_versions(index_dir)


def is_index_folder(folder: Path) -> bool:
    """Whether `folder` holds an index (a CURRENT pointer), or only what a build of one leaves."""
    if files.is_plain_file(folder / CURRENT):
        return True
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return bool(names) and all(_made_by_a_build(folder, name) for name in names)


def check_index_folder(index_dir: Path) -> None:
    """Refuse a folder that holds other things than an index (a folder of the user's, `--index ./mydocs`)
    before anything in it is touched; a missing or empty folder is fine."""
    try:
        names = sorted(os.listdir(index_dir))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as error:
        raise RecommenderError(f"cannot read {index_dir}: {error.strerror}: choose another --index") from None
    if not names or is_index_folder(index_dir):
        return
    foreign = [name + ("/" if (index_dir / name).is_dir() else "") for name in names
               if not _made_by_a_build(index_dir, name)]
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    raise InputError(
        f"--index {index_dir} is a folder of other files ({shown}), not an index: nothing in it was changed; "
        "give a new or empty folder, or an index name"
    )


def _made_by_a_build(index_dir: Path, name: str) -> bool:
    """Whether the entry `name` of an index folder is one that builds make (and may remove)."""
    path = index_dir / name
    if name in (LOCK, CACHE, TAGS) or any(name == f"{base}{suffix}" for base in (CACHE, TAGS)
                                          for suffix in ("-wal", "-shm", "-journal")):
        return files.is_plain_file(path)
    if name == SEGMENTS:
        return files.is_plain_file(path)
    if name == SEGMENT_FOLDER:  # index/segments.py: only index folders of its own inside
        return not path.is_symlink() and path.is_dir()
    if name.startswith(files.PARTIAL_PREFIX) or name.startswith(f".{CURRENT}.tmp-"):
        return files.is_plain_file(path)
    if name.startswith((".tmp-", "v-")):
        return _is_own_version(path)
    return False


def _is_marked_build(path: Path) -> bool:
    """A real folder (not a link) holding the mark a build puts in every folder it makes."""
    return not path.is_symlink() and path.is_dir() and files.is_plain_file(path / BUILD_MARK)


def _is_own_version(path: Path) -> bool:
    """A folder of a build: the mark of one under way, or a manifest that lists every file in it."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        listed = set(json.loads((path / MANIFEST).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return _is_marked_build(path)
    for found in path.rglob("*"):
        if found.is_dir() and not found.is_symlink():
            continue
        relative = found.relative_to(path).as_posix()
        if relative not in listed and relative not in (MANIFEST, BUILD_MARK):
            return False
    return True


def _live_version(index_dir: Path) -> str | None:
    return _read_current(index_dir)[0]


def live_version(index_dir: Path) -> str | None:
    """The name of the index's live version folder (None before its first build): one small read,
    so a long-running reader (`papers serve`) can tell when a rebuild has swapped CURRENT."""
    return _live_version(index_dir)


def tags_path(index_dir: Path) -> Path:
    """The SQLite file of the user's tags: beside the versions, never inside one, so a rebuild keeps it."""
    return index_dir / TAGS


def _read_current(index_dir: Path) -> tuple[str | None, str | None]:
    """The live version's folder name and its manifest's sha256 (None for indexes that predate it)."""
    path = index_dir / CURRENT
    try:
        parts = path.read_text(encoding="utf-8").split()
    except FileNotFoundError:
        return None, None
    except PermissionError:
        raise RecommenderError(f"cannot read index {index_dir}: permission denied: ask its owner, or build your own") from None
    except (UnicodeDecodeError, OSError):
        parts = ["?"]
    if not parts:
        return None, None
    if len(parts) > 2 or not parts[0].startswith("v-") or "/" in parts[0]:
        raise IndexCorruptError(f"index file {path} is damaged: run `{rebuild_hint(index_dir)}`")
    return parts[0], parts[1] if len(parts) == 2 else None


def _remove_leftovers(index_dir: Path) -> None:
    """What killed builds left behind (only called while holding the lock): build folders with their
    mark, and temporary pointer files; nothing else."""
    for path in index_dir.glob(".tmp-*"):
        if _is_marked_build(path) or _is_own_version(path):
            remove_tree(path)
    for path in index_dir.glob(f".{CURRENT}.tmp-*"):  # pointers of builds before files.replacing
        if files.is_plain_file(path):
            path.unlink(missing_ok=True)
    files.remove_stale_partials(index_dir)


def _remove_old_versions(index_dir: Path) -> None:
    live = _live_version(index_dir)
    if live is None:
        return
    gc.collect()  # readers this process dropped but that sit in reference cycles still hold a pin
    for path in index_dir.glob("v-*"):
        if path.name == live or not _is_own_version(path):
            continue  # what the index's records do not say it made is not ours to remove
        try:
            pin = open(path / MANIFEST, "rb")
        except OSError:  # marked, but never committed: no reader can hold it
            remove_tree(path)
            continue
        with pin:
            try:
                fcntl.flock(pin, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # still open in a reader (see open_stored): a later build removes it
            remove_tree(path)


def link_checked(source: Path, target: Path, expected: dict[str, dict]) -> bool:
    """Reuse files made elsewhere (a previous build, the shared model export) in a build: each file
    named in `expected` (relative path -> {"bytes", "sha256"}, the source's own record) is hard-linked
    where the filesystem allows, else copied, and then checked against its record.

    False, with nothing left at `target`, when any file is missing, is not a plain file (a link
    planted there is never followed) or does not match its record: damage is never carried into a
    new version. An OSError of the target (a full disk) is raised as itself, for a one-line message."""
    for name, record in sorted(expected.items()):
        origin, destination = source / name, target / name
        if not files.is_plain_file(origin) or ".." in Path(name).parts:
            remove_tree(target)
            return False
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(origin, destination, follow_symlinks=False)
        except FileNotFoundError:
            remove_tree(target)
            return False
        except OSError:
            with open(origin, "rb") as reading, files.open_exclusive(destination, "wb") as writing_:
                shutil.copyfileobj(reading, writing_)
        if not (files.is_plain_file(destination) and destination.stat().st_size == record.get("bytes")
                and file_digest(destination) == record.get("sha256")):
            remove_tree(target)
            return False
    return True


def remove_tree(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)


# ---------------------------------------------------------------- reading


class StoredIndex:
    """Read access to the live version of an index, checked against its manifest."""

    def __init__(self, index_dir: Path, folder: Path, manifest: dict, pin=None):
        self.index_dir = index_dir
        self.folder = folder
        self.manifest = manifest
        self._pin = pin  # the manifest, open with a shared lock: the version is not removed under us

    def close(self) -> None:
        """Let a build remove this version once it is no longer live (reads may then fail)."""
        if self._pin is not None:
            self._pin.close()
            self._pin = None

    def __enter__(self) -> "StoredIndex":
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
                # Mapped first even when read whole: a header claiming more than the file holds is then
                # damage (ValueError), not an allocation of that much memory ("out of memory").
                mapped = np.load(self.path(name), mmap_mode="r", allow_pickle=False)
                return mapped if mmap else np.array(mapped)
            except ValueError:
                if not mmap:
                    raise
                # Not mappable (e.g. an object array): the plain load names the problem as it always has.
                np.load(self.path(name), allow_pickle=False)
                raise
        except (ValueError, OSError, EOFError) as error:
            raise IndexCorruptError(
                f"index file {self.path(name)} cannot be read ({error}): run `{rebuild_hint(self.index_dir)}`"
            ) from None

    def array_reader(self, name: str) -> "ArrayReader":
        """A stored array read by slices into fresh memory (pread), for scattered reads."""
        mapped = self.load_array(name, mmap=True)
        return ArrayReader(self, name, mapped.dtype, mapped.shape, int(getattr(mapped, "offset", 0)))

    def load_json(self, name: str):
        try:
            return json.loads(self.path(name).read_text(encoding="utf-8"))
        except (ValueError, OSError) as error:
            raise IndexCorruptError(
                f"index file {self.path(name)} cannot be read ({error}): run `{rebuild_hint(self.index_dir)}`"
            ) from None

    def read_jsonl_rows(self, name: str, offsets: np.ndarray, rows: Sequence[int]) -> list[dict]:
        """The given rows of a JSON-lines file, read by byte offset."""
        out = []
        with open(self.path(name), "rb") as handle:
            for row in rows:
                handle.seek(int(offsets[row]))
                line = handle.read(int(offsets[row + 1] - offsets[row]))
                try:
                    out.append(json.loads(line))
                except ValueError:
                    raise IndexCorruptError(
                        f"index file {self.path(name)} row {row} cannot be read: run `{rebuild_hint(self.index_dir)}`"
                    ) from None
        return out

    def iter_jsonl(self, name: str) -> Iterator[dict]:
        with open(self.path(name), "rb") as handle:
            for number, line in enumerate(handle):
                try:
                    yield json.loads(line)
                except ValueError:
                    raise IndexCorruptError(
                        f"index file {self.path(name)} row {number} cannot be read: run `{rebuild_hint(self.index_dir)}`"
                    ) from None

    def load_faiss(self, name: str, writable: bool = False):
        """A FAISS index; memory-mapped read-only where FAISS allows it, unless `writable`."""
        import faiss

        try:
            if writable:
                raise RuntimeError("read into memory")
            return faiss.read_index(str(self.path(name)), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError:
            try:
                return faiss.read_index(str(self.path(name)))
            except MemoryError:
                size = self.path(name).stat().st_size
                raise IndexCorruptError(
                    f"index file {self.path(name)} ({size:,} bytes) asks for more memory than there is: if "
                    f"`papers info --verify` finds it damaged, run `{rebuild_hint(self.index_dir)}`; else free some memory"
                ) from None
            except RuntimeError as error:
                message = str(error).strip().splitlines()[-1] if str(error).strip() else "unreadable"
                raise IndexCorruptError(
                    f"index file {self.path(name)} cannot be read by FAISS ({message}): run `{rebuild_hint(self.index_dir)}`"
                ) from None

    def verify(self, full: bool = True) -> None:
        """Check every stored file against the manifest: sizes always; hashes of all files
        when `full`, else of the smallest ones up to CHEAP_HASH_BYTES in all."""
        for name, expected in sorted(self.manifest["files"].items()):
            path = self.path(name)
            try:
                status = path.lstat()
            except FileNotFoundError:
                raise IndexCorruptError(
                    f"index file {path} is missing: run `{rebuild_hint(self.index_dir)}`"
                ) from None
            if not stat.S_ISREG(status.st_mode):  # a build writes plain files only: a link was planted
                raise IndexCorruptError(
                    f"index file {path} is not a plain file (a link?): run `{rebuild_hint(self.index_dir)}`"
                )
            size = status.st_size
            if size != expected["bytes"]:
                raise IndexCorruptError(
                    f"index file {path} is {size} bytes, the manifest says {expected['bytes']} (truncated or altered): run `{rebuild_hint(self.index_dir)}`"
                )
        hashed = set(self.manifest["files"]) if full else _smallest(self.manifest["files"], CHEAP_HASH_BYTES)
        for name, expected in sorted(self.manifest["files"].items()):
            if name in hashed:
                if file_digest(self.path(name)) != expected["sha256"]:
                    raise IndexCorruptError(
                        f"index file {self.path(name)} does not match its checksum (altered or damaged): run `{rebuild_hint(self.index_dir)}`"
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
        with open(self.stored.path(self.name), "rb") as handle:
            descriptor = handle.fileno()

            def read(start: int, stop: int) -> np.ndarray:
                start, stop = int(start), int(stop)
                if not 0 <= start <= stop <= self.shape[0]:
                    raise corrupt(self.stored, self.name, f"has no rows {start}..{stop}")
                data = os.pread(descriptor, (stop - start) * row_bytes, self.offset + start * row_bytes)
                if len(data) != (stop - start) * row_bytes:
                    raise corrupt(self.stored, self.name, "is shorter than its header says")
                return np.frombuffer(data, dtype=self.dtype).reshape((stop - start, *self.shape[1:]))

            yield read

    @contextlib.contextmanager
    def reading_ranges(self) -> Iterator:
        """A function `read(starts, stops)`: rows starts[i]..stops[i]-1 of every range, concatenated
        into one new array (one pread a range, without the per-call work of `reading`'s reads)."""
        row_bytes = self.row_items * self.dtype.itemsize
        with open(self.stored.path(self.name), "rb") as handle:
            descriptor = handle.fileno()

            def read(starts, stops) -> np.ndarray:
                starts, stops = np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64)
                if len(starts) and not (0 <= starts.min() and (starts <= stops).all() and stops.max() <= self.shape[0]):
                    bad = int(np.flatnonzero((starts < 0) | (starts > stops) | (stops > self.shape[0]))[0])
                    raise corrupt(self.stored, self.name, f"has no rows {starts[bad]}..{stops[bad]}")
                sizes = ((stops - starts) * row_bytes).tolist()
                offsets = (self.offset + starts * row_bytes).tolist()
                data = b"".join([os.pread(descriptor, size, offset) for size, offset in zip(sizes, offsets) if size])
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
    return IndexCorruptError(f"index file {stored.path(name)} {problem}: run `{rebuild_hint(stored.index_dir)}`")


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
            raise IndexCorruptError(f"index {index_dir} has no manifest in {live}: run `{rebuild_hint(index_dir)}`") from None
        except ValueError:
            raise IndexCorruptError(f"index file {folder / MANIFEST} is damaged: run `{rebuild_hint(index_dir)}`") from None
        version = manifest.get("format_version")
        if version != FORMAT_VERSION:
            newer = isinstance(version, int) and version > FORMAT_VERSION
            raise IndexMismatchError(
                f"index {index_dir} has format version {version}, this papers reads version {FORMAT_VERSION}"
                + (" (built by a newer papers: upgrade papers, or " if newer else " (")
                + f"run `{rebuild_hint(index_dir)}` to rebuild it)"
            )
        if manifest_digest is not None and hashlib.sha256(raw).hexdigest() != manifest_digest:
            raise IndexCorruptError(
                f"index file {folder / MANIFEST} does not match its checksum in {CURRENT} (altered or damaged): run `{rebuild_hint(index_dir)}`"
            )
        problem = _manifest_problem(manifest)
        if problem:
            raise IndexCorruptError(f"index file {folder / MANIFEST} {problem} (damaged or forged): run `{rebuild_hint(index_dir)}`")
        stored = StoredIndex(index_dir, folder, manifest, pin)
        stored.verify(full=verify)
    except BaseException:
        pin.close()  # refused: nothing may stay open
        raise
    return stored


def _manifest_problem(manifest: dict) -> str:
    """What is missing or wrong in a manifest of this format (every build writes these), else ''."""
    if not isinstance(manifest.get("model"), str) or not manifest["model"]:
        return "names no model"
    for key in ("dimension", "paper_count"):
        value = manifest.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "dimension" else 0):
            return f"has no valid {key}"
    if not isinstance(manifest.get("chunking"), dict):
        return "has no chunking"
    files_ = manifest.get("files")
    if not isinstance(files_, dict) or not all(
            isinstance(entry, dict) and isinstance(entry.get("bytes"), int) and isinstance(entry.get("sha256"), str)
            for entry in files_.values()):
        return "has no valid list of files"
    return ""


def missing_index(index_dir: Path) -> IndexMissingError:
    """The error for a folder without an index: where it looked (and why there), the other
    indexes of the home when the default is missing, and a user data folder that has the name."""
    home = index_home()
    # Outside a checkout there is no seeds/ to build from: the hint names an input.
    hint = rebuild_hint(index_dir, "my-papers.bib" if home.reason == "user data folder" else None)
    named = index_dir.parent == home.path
    where = f" (names resolve under ${HOME_VARIABLE})" if named and home.reason == "PAPERS_HOME" else ""
    message = f"no index at {index_dir}{where}"
    if named and home.reason == "PAPERS_HOME":
        import platformdirs

        user_data = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "indexes"
        if user_data.resolve() != home.path.resolve() and (user_data / index_dir.name / CURRENT).is_file():
            return IndexMissingError(
                f"{message}; the user data folder has an index '{index_dir.name}' ({user_data / index_dir.name}): "
                f"unset ${HOME_VARIABLE} or give --index {shell_command(str(user_data / index_dir.name))}")
    others = [path.name for path in _index_folders(home.path) if path != index_dir] if named else []
    if named and index_dir.name == default_index() and others:
        shown = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
        return IndexMissingError(
            f"{message}; the indexes there: {shown}: pick one with --index NAME or PAPERS_INDEX=NAME, "
            f"or run `{hint}` to make '{index_dir.name}'"
        )
    return IndexMissingError(f"{message}: run `{hint}` first")


def _index_folders(home: Path) -> list[Path]:
    """The index folders of a home (those with a CURRENT), by name."""
    try:
        return sorted(path for path in home.iterdir() if path.is_dir() and (path / CURRENT).exists())
    except OSError:
        return []


def _pin_live_version(index_dir: Path):
    """CURRENT's version, its manifest hash and its manifest open under a shared lock.

    A build removes an old version only if it can lock that version's manifest
    exclusively, so a version stays on disk while any reader has it open. A build
    may swap CURRENT and remove the version between our reading CURRENT and
    locking: then we read CURRENT again.
    """
    if index_dir.exists() and not index_dir.is_dir():
        raise IndexMissingError(f"{index_dir} is a file, not an index folder: give an index name or folder")
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
            raise IndexCorruptError(f"index {index_dir} has no manifest in {live}: run `{rebuild_hint(index_dir)}`") from None
        fcntl.flock(pin, fcntl.LOCK_SH)
        if manifest.exists():
            return live, digest, pin
        pin.close()
    raise IndexBusyError(f"index {index_dir} keeps changing under us (builds in a loop?): try again")


# ---------------------------------------------------------------- embedding cache


class CacheUnavailable(RecommenderError):
    """The user cache folder cannot be made (read-only home, under a file): builds go on without the cache."""


class EmbeddingCache:
    """Vectors keyed by content hash (model identity, chunking, text: embed.windows.cache_key), in one
    SQLite file shared by every index of the user (export_cache.embedding_cache_path()), safe under
    concurrent builds.

    The file is in WAL mode, so a reader never waits for a build committing vectors
    and a build killed at any moment keeps every transaction it committed. Each row
    carries the CRC-32 of its vector's bytes: a row whose bytes no longer match
    (or otherwise unreadable) is treated as absent,
    so its text is encoded again and the row replaced. The file (and its -wal and -shm
    files) is never opened through a link.

    `folder` holds the file (default: the user cache folder); `owner` names the index whose build
    uses it, for its own record of an encoding under way (see `interrupted_encoding`).
    """

    def __init__(self, folder: Path | None = None, owner: str = ""):
        from ..embed import export_cache

        folder = export_cache.cache_home() if folder is None else Path(folder)
        self.path = folder / export_cache.EMBEDDINGS
        self.owner = owner
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CacheUnavailable(f"the cache folder {folder} cannot be made ({error.strerror}): papers are "
                                   "encoded without the embedding cache; set $PAPERS_CACHE to a writable folder") from None
        self._refuse_links()
        with self._guard():
            self._connect()

    def _refuse_links(self) -> None:
        path = files.linked_sqlite_file(self.path)
        if path is not None:
            raise RecommenderError(f"embedding cache file {path} is a symbolic link, which is never followed: "
                                   "remove it (or run `papers cache clear`)")

    def _connect(self) -> None:
        import sqlite3  # here: only builds use the cache, and lookups need not pay for the import

        self.connection = sqlite3.connect(self.path, timeout=60)
        self.connection.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL loses no committed transaction when the process dies
        # (only, at worst, the last ones on power loss) and never corrupts the file.
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, dimension INTEGER, vector BLOB, checksum INTEGER)"
        )
        self.connection.execute("CREATE TABLE IF NOT EXISTS state (name TEXT PRIMARY KEY, value TEXT)")
        columns = {row[1] for row in self.connection.execute("PRAGMA table_info(vectors)")}
        if "checksum" not in columns:
            self._add_checksums()

    def _add_checksums(self) -> None:
        """A cache written before checksums gets one per vector, as found (once, in one
        transaction): re-encoding it all would cost hours on a large corpus."""
        self.connection.create_function("crc32", 1, _crc32, deterministic=True)
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            columns = {row[1] for row in self.connection.execute("PRAGMA table_info(vectors)")}
            if "checksum" not in columns:
                self.connection.execute("ALTER TABLE vectors ADD COLUMN checksum INTEGER")
                self.connection.execute("UPDATE vectors SET checksum = crc32(vector)")
        except BaseException:
            self.connection.rollback()
            raise
        self.connection.commit()

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """A damaged cache file is replaced by an empty one (it only saves time); other
        SQLite failures (disk full, read-only) become one-line errors."""
        import sqlite3

        try:
            yield
        except sqlite3.DatabaseError as error:
            if type(error) is not sqlite3.DatabaseError:  # subclasses: locked, read-only, full, ...
                raise RecommenderError(f"embedding cache {self.path}: {error}: check the disk and permissions") from None
            with contextlib.suppress(Exception):
                self.connection.close()
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            warnings.warn(f"embedding cache {self.path} was damaged ({error}) and is started afresh: every paper is encoded again")
            self._connect()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        with self._guard():
            return self._get_many(keys)
        return {}  # the cache was damaged and is now empty

    def _get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            chunk = unique[start: start + 500]
            marks = ",".join("?" * len(chunk))
            for key, dimension, blob, checksum in self.connection.execute(
                f"SELECT key, dimension, vector, checksum FROM vectors WHERE key IN ({marks})", chunk
            ):
                # A damaged row is treated as absent and encoded again.
                if checksum is None or not isinstance(blob, bytes) or zlib.crc32(blob) != checksum:
                    continue
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape == (dimension,) and np.isfinite(vector).all():
                    found[key] = vector
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        """Store vectors in one transaction: all of them are kept, or none."""
        with self._guard():
            self._put_many(items)
            return
        self._put_many(items)  # into the fresh cache

    def _put_many(self, items: dict[str, np.ndarray]) -> None:
        rows = []
        for key, vector in items.items():
            blob = np.asarray(vector, dtype=np.float32).tobytes()
            rows.append((key, len(vector), blob, zlib.crc32(blob)))
        with self.connection:
            self.connection.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)

    def interrupted_encoding(self) -> bool:
        """Whether the last build of the owner index stopped (killed, Ctrl-C) before its encoding ended."""
        with self._guard():
            return self.connection.execute(
                "SELECT 1 FROM state WHERE name = ?", (self._state_name,)).fetchone() is not None
        return False

    def mark_encoding(self, running: bool) -> None:
        """Record that the owner index's build is encoding (True) or is done with it (False)."""
        with self._guard(), self.connection:
            if running:
                self.connection.execute(
                    "INSERT OR REPLACE INTO state VALUES (?, ?)", (self._state_name, time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                )
            else:
                self.connection.execute("DELETE FROM state WHERE name = ?", (self._state_name,))

    def remember_model(self, model_key: str, facts: dict) -> None:
        """Keep what the model told of itself (its window, `max_tokens`), so that a build taking every vector
        from the cache, without loading the model, records the same manifest as one that encoded them."""
        with self._guard(), self.connection:
            self.connection.execute("INSERT OR REPLACE INTO state VALUES (?, ?)",
                                    (f"model {model_key}", json.dumps(facts, sort_keys=True)))

    def model_facts(self, model_key: str) -> dict:
        with self._guard():
            row = self.connection.execute("SELECT value FROM state WHERE name = ?", (f"model {model_key}",)).fetchone()
            try:
                facts = json.loads(row[0]) if row else {}
            except ValueError:
                facts = {}
            return facts if isinstance(facts, dict) else {}
        return {}

    @property
    def _state_name(self) -> str:
        return f"encoding {self.owner}" if self.owner else "encoding"

    def summary(self) -> dict:
        """What `papers cache info` shows: the file, its size in bytes (with its -wal), and its vectors."""
        with self._guard():
            entries = self.connection.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        size = sum(Path(f"{self.path}{suffix}").stat().st_size for suffix in ("", "-wal")
                   if Path(f"{self.path}{suffix}").is_file())
        return {"path": str(self.path), "bytes": size, "entries": int(entries)}

    def clear(self) -> int:
        """Remove every vector (the file stays, so concurrent builds keep a valid cache); returns how many."""
        with self._guard(), self.connection:
            removed = self.connection.execute("DELETE FROM vectors").rowcount
        self.connection.execute("VACUUM")
        self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(removed)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "EmbeddingCache":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def embedding_cache_info(folder: Path | None = None) -> dict:
    """The shared embedding cache as `papers cache info` shows it: path, bytes (with its -wal file) and
    entries (vectors); a cache never made is reported empty and is not created."""
    from ..embed import export_cache

    path = (export_cache.cache_home() if folder is None else Path(folder)) / export_cache.EMBEDDINGS
    if not path.exists() and not path.is_symlink():
        return {"path": str(path), "bytes": 0, "entries": 0}
    with EmbeddingCache(path.parent) as cache:
        return cache.summary()


def clear_embedding_cache(folder: Path | None = None) -> dict:
    """Empty the shared embedding cache (`papers cache clear`): every index's next build encodes its papers
    again; the indexes themselves and the ONNX exports are untouched. Returns the entries removed and
    the bytes the file took before and takes now."""
    before = embedding_cache_info(folder)
    if not before["entries"] and not before["bytes"]:
        return {**before, "removed": 0, "bytes_before": 0}
    with EmbeddingCache(Path(before["path"]).parent) as cache:
        removed = cache.clear()
        after = cache.summary()
    return {**after, "removed": removed, "bytes_before": before["bytes"]}


def legacy_cache(index_dir: Path) -> Path | None:
    """The per-index embedding cache of an index built before the shared one, if it has one
    (a plain file of this user: a link or another user's file is never read)."""
    path = index_dir / CACHE
    try:
        status = path.lstat()
    except OSError:
        return None
    return path if stat.S_ISREG(status.st_mode) and status.st_uid == os.getuid() else None


def remove_legacy_cache(index_dir: Path) -> None:
    """Remove an index's own per-index cache once its vectors are in the shared one (the build holds the lock)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(f"{index_dir / CACHE}{suffix}")
        if files.is_plain_file(path):
            path.unlink(missing_ok=True)


def read_legacy_vectors(path: Path, keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Vectors of a per-index cache (see `legacy_cache`) by their keys, read-only; rows that fail their
    checksum are left out, and an unreadable file gives none (those papers are encoded again)."""
    import sqlite3
    from urllib.parse import quote

    found: dict[str, np.ndarray] = {}
    try:
        connection = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=60)
    except sqlite3.Error:
        return found
    try:
        with contextlib.closing(connection):
            columns = {row[1] for row in connection.execute("PRAGMA table_info(vectors)")}
            checksum = "checksum" if "checksum" in columns else "NULL"
            unique = list(dict.fromkeys(keys))
            for start in range(0, len(unique), 500):
                chunk = unique[start: start + 500]
                rows = connection.execute(
                    f"SELECT key, dimension, vector, {checksum} FROM vectors WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk)
                for key, dimension, blob, crc in rows:
                    if not isinstance(blob, bytes) or (crc is not None and zlib.crc32(blob) != crc):
                        continue
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (dimension,) and np.isfinite(vector).all():
                        found[key] = vector
    except sqlite3.Error:
        return {}
    return found


def _crc32(blob) -> int | None:
    return zlib.crc32(blob) if isinstance(blob, bytes) else None
