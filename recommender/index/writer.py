"""One version of an index written: a private build folder under the index's lock, its files
created exclusively, checksummed into the manifest and made live in one swap; leftovers of killed
builds and old versions no reader holds are removed.

A build writes a fresh `.tmp-*` folder, checksums every file into the
manifest, renames the folder to `v-*` and then swaps CURRENT with
`os.replace`, so readers see the old index or the new one, never a mixture.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import gc
import io
import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from .. import files
from ..digests import file_digest
from ..errors import IndexBusyError, IndexCorruptError, InputError, RecommenderError
from .home import display_name
from .layout import (
    BUILD_MARK,
    CURRENT,
    FORMAT_VERSION,
    LOCK,
    MANIFEST,
    check_index_folder,
    is_marked_build,
    is_own_version,
    remove_tree,
)
from .stored import live_version, unpinned


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
            raise write_error(
                self.index_dir, error.filename or path, error.strerror or str(error)
            ) from None

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

    def array_file(self, name: str, shape: tuple[int, ...], dtype) -> ArrayFile:
        """A .npy file of this shape, written a piece at a time (`write`, `append`) and never held
        in memory: the same bytes as `save_array` of the whole array."""
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
            if (
                error.errno in WRITE_ERRNOS
            ):  # the spool's buffered writes meet a full disk: name the file
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
                # PyCallbackIOWriter is in faiss's SWIG module, not in its typing
                callback = faiss.PyCallbackIOWriter(write)  # type: ignore[attr-defined]
                faiss.write_index(index, callback)
                if not failure:
                    handle.flush()
            except (RuntimeError, OSError) as error:
                problem = (
                    failure[0].strerror
                    if failure
                    else (
                        error.strerror
                        if isinstance(error, OSError)
                        else _faiss_write_problem(str(error))
                    )
                )
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
        for path in sorted(
            p for p in self.folder.rglob("*") if not p.is_dir() and p.name != BUILD_MARK
        ):
            relative = path.relative_to(self.folder).as_posix()
            if not files.is_plain_file(path):  # only links could be: nothing of the build makes one
                raise IndexCorruptError(
                    f"{path} is a link, not a file this build wrote: nothing was changed"
                )
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
        np.lib.format.write_array_header_1_0(
            header,
            {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape},
        )
        self.offset = len(header.getvalue())
        self.written = 0  # rows, for append
        with writer.writing_file(path):
            self.handle = files.open_exclusive(path, "w+b")  # never through a link
            try:
                self.handle.write(header.getvalue())
                self.handle.flush()
                self.handle.truncate(
                    self.offset + shape[0] * self.row_bytes
                )  # sparse until written
            except BaseException:
                self.handle.close()  # a full disk: nothing left open
                raise

    def __len__(self) -> int:
        return self.shape[0]

    def write(self, start: int, values: np.ndarray) -> None:
        """Rows start, start + 1, ... are `values`."""
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if start < 0 or start + len(values) > self.shape[0] or values.shape[1:] != self.shape[1:]:
            raise ValueError(
                f"rows {start}..{start + len(values)} of shape {values.shape} do not fit"
                f" {self.shape}"
            )
        with self.writer.writing_file(self.path):
            os.pwrite(
                self.handle.fileno(), values.data.cast("B"), self.offset + start * self.row_bytes
            )

    def __setitem__(self, rows, values) -> None:
        """Like an array's: `rows` an integer or ascending integers, each run of consecutive rows
        one write."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        values = np.asarray(values, dtype=self.dtype).reshape((len(rows), *self.shape[1:]))
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        for first, last in zip(
            np.concatenate([[0], breaks]), np.concatenate([breaks, [len(rows)]])
        ):
            self.write(int(rows[first]), values[first:last])

    def append(self, values: np.ndarray) -> None:
        """The next rows, after those appended before."""
        self.write(self.written, values)
        self.written += len(values)

    def read(self, start: int, stop: int) -> np.ndarray:
        start, stop = max(0, int(start)), min(int(stop), self.shape[0])
        data = os.pread(
            self.handle.fileno(),
            max(0, stop - start) * self.row_bytes,
            self.offset + start * self.row_bytes,
        )
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
        f"cannot write {path}: {problem}: free some disk space or choose another index "
        f"(the index {display_name(index_dir)} is unchanged)"
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
def build_lock(index_dir: Path, wait: bool = False) -> Iterator[None]:
    """The build lock of an existing index, the one a build holds (`writing`): no build runs while
    papers are added or removed (`papers add`, `papers remove`) or the index is removed or renamed.
    Without `wait`, IndexBusyError while another process holds it."""
    try:
        lock = files.open_lock_file(index_dir / LOCK)  # never through a link, as a build's
    except OSError as error:
        raise RecommenderError(
            f"cannot change index {index_dir}: {error.strerror or error}"
        ) from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise IndexBusyError(
                f"index {index_dir} is being built by another process: wait for it to finish"
            ) from None
        yield


@contextlib.contextmanager
def writing(index_dir: Path, wait: bool = False) -> Iterator[IndexWriter]:
    """Lock the index, hand out a private build folder, clean up whatever happens.

    A build reads its papers inside (into the build folder): one that fails on its inputs leaves
    no trace, so an index folder made for it alone is removed again."""
    if index_dir.exists() and not index_dir.is_dir():
        raise InputError(f"index {index_dir} is a file, not an index folder: choose another index")
    check_index_folder(index_dir)
    created = not index_dir.exists()
    while True:
        try:
            index_dir.mkdir(parents=True, exist_ok=True)
            lock = files.open_lock_file(index_dir / LOCK)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise RecommenderError(
                    f"cannot use index {index_dir}: {index_dir / LOCK} is a symbolic link, which is"
                    " never followed: remove it, or choose another index"
                ) from None
            if error.errno is None:  # not a plain file of ours
                raise RecommenderError(
                    f"cannot use index {index_dir}: {error}: remove it, or choose another index"
                ) from None
            raise RecommenderError(
                f"cannot write index {index_dir}: {error.strerror}: choose a writable index"
            ) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            lock.close()
            raise IndexBusyError(
                f"index {index_dir} is being built by another process: wait for it to finish, or"
                " build with wait, which waits its turn"
            ) from None
        if os.fstat(lock.fileno()).st_nlink:
            break
        # the build we waited for failed on its inputs and removed the folder it made: again
        lock.close()
    with lock:
        _remove_leftovers(index_dir)
        folder = (
            index_dir / f".tmp-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"
        )
        try:
            folder.mkdir()  # exclusive: fails on anything already there, a link included
            os.close(files.create_exclusive(folder / BUILD_MARK))
        except OSError as error:
            remove_tree(folder)
            raise write_error(
                index_dir, error.filename or folder, error.strerror or str(error)
            ) from None
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


def _remove_leftovers(index_dir: Path) -> None:
    """What killed builds left behind (only called while holding the lock): build folders with their
    mark, and temporary pointer files; nothing else."""
    for path in index_dir.glob(".tmp-*"):
        if is_marked_build(path) or is_own_version(path):
            remove_tree(path)
    for path in index_dir.glob(f".{CURRENT}.tmp-*"):  # pointers of builds before files.replacing
        if files.is_plain_file(path):
            path.unlink(missing_ok=True)
    files.remove_stale_partials(index_dir)


def remove_old_versions(index_dir: Path) -> None:
    """Remove the versions of the index no reader holds, but the live one (the lock is held)."""
    _remove_old_versions(index_dir)


def _remove_old_versions(index_dir: Path) -> None:
    live = live_version(index_dir)
    if live is None:
        return
    old = [
        path
        for path in index_dir.glob("v-*")
        # what the index's records do not say it made is not ours to remove
        if path.name != live and is_own_version(path)
    ]
    if old:
        # Readers this process dropped but that sit in reference cycles still hold a pin. Only
        # then: a full collection walks every object of the process (a third of a second in an
        # add beside a large index), and a first build or a segment has no old version.
        gc.collect()
    for path in old:
        # None: marked, but never committed (no reader can hold it); False: still open in a reader
        # (see open_stored), a later build removes it
        with unpinned(path) as free:
            if free is not False:
                remove_tree(path)


def link_checked(source: Path, target: Path, expected: dict[str, dict]) -> bool:
    """Reuse files made elsewhere (a previous build, the shared model export) in a build: each file
    named in `expected` (relative path -> {"bytes", "sha256"}, the source's own record) is
    hard-linked where the filesystem allows, else copied, and then checked against its record.

    False, with nothing left at `target`, when any file is missing, is not a plain file (a link
    planted there is never followed) or does not match its record: damage is never carried into a
    new version. An OSError of the target (a full disk) is raised as itself, for a one-line message.
    """
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
        if not (
            files.is_plain_file(destination)
            and destination.stat().st_size == record.get("bytes")
            and file_digest(destination) == record.get("sha256")
        ):
            remove_tree(target)
            return False
    return True
