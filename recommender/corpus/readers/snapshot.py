"""A committed state of an SQLite database another program is writing (Zotero's), read without
ever opening its file with SQLite.

The database is copied together with its rollback journal or write-ahead log (plain reads: no
lock is taken, so the program is never refused or made to wait) into a private folder (mode
0700, removed afterwards, also on error). The copy is kept only when every file's identity,
size and modification time are the same after the copy as before; else it is made again, a few
times. SQLite then opens the private copy read-write and recovers it as it would after a crash:
a hot journal is rolled back (a transaction under way, or cut by a crash, is undone), the
committed frames of the log are applied, its uncommitted ones ignored. What is read is always a
state the program committed.

    with committed_copy(path, "Zotero") as database:
        database.execute("SELECT ...")

Measured on a 3,000-item Zotero library (22 MB), 10 s of reads while another process takes an
exclusive lock with no busy timeout (as Zotero does), retitles every item and commits, again
and again, 50 ms apart: opened in place (before), 36 reads, 7 of them failed, 1 read a mix of
two transactions, and the writer was refused 2,974 times in 3,024 tries; copied (now), 29
reads, none failed or mixed, the writer never refused (63 transactions). With 5 ms between
transactions (the journal present 90% of the time) no still moment is found: the read gives up
with one line after about 30 s, the writer is still never refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ...errors import InputError
from ...files import open_exclusive

# Copying again, backing off (at most a second between tries), for at most this long before
# giving up: long enough to find a still moment on a loaded machine while Zotero syncs.
COPY_SECONDS = 30.0
COPY_ATTEMPTS = 60
#: The files SQLite keeps beside a database: its rollback journal and write-ahead log. The WAL's
#: index (`-shm`) is not copied: SQLite rebuilds it from the log.
BESIDE = ("-journal", "-wal")


@contextlib.contextmanager
def committed_copy(path: Path, writer: str) -> Iterator:
    """A connection to a private, recovered copy of the database at `path` (see the module), which
    the program `writer` writes; InputError when it cannot be copied or read as a database."""
    import sqlite3

    folder = Path(tempfile.mkdtemp(prefix="papers-snapshot-"))  # mode 0700
    database = None
    try:
        copy = _copy_still(path, folder, writer)
        database = sqlite3.connect(copy, isolation_level=None)
        database.execute("PRAGMA mmap_size=1073741824")  # the private copy read as memory
        try:  # the first read recovers the copy (hot journal, WAL)
            database.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as error:
            raise InputError(
                f"{path}: cannot be read as a database ({error}): give the path of {writer}'s"
                " database"
            ) from None
        yield database
    finally:
        if database is not None:
            database.close()
        shutil.rmtree(folder, ignore_errors=True)


def _copy_still(path: Path, folder: Path, writer: str) -> Path:
    """The database and the files beside it copied into `folder`, as they were at one moment."""
    real = Path(os.path.realpath(path))  # SQLite keeps the journal beside the file a link names
    deadline = time.monotonic() + COPY_SECONDS
    for attempt in range(COPY_ATTEMPTS):
        before = _states(real)
        if before[0] is None:
            raise InputError(f"{path}: no such database: give the path of the {writer} database")
        try:
            copied = _copy_each(real, folder, before)
        except FileNotFoundError:
            copied = None  # a journal removed while it was copied: a commit, copy again
        except OSError as error:
            full = error.errno in (errno.ENOSPC, errno.EDQUOT)
            raise InputError(
                f"{path}: cannot be copied to read it ({error.strerror or error}): "
                + (
                    f"make room in {folder.parent} or set TMPDIR to a folder with room"
                    if full
                    else "check that the file and its folder can be read"
                )
            ) from None
        if copied is not None and _states(real) == before:
            return copied
        if time.monotonic() > deadline:
            break
        time.sleep(min(0.02 * 2**attempt, 1.0))
    raise InputError(
        f"{path}: {writer} kept writing to the database while it was read: try again in a moment,"
        f" or close {writer} first"
    )


def _copy_each(path: Path, folder: Path, states: tuple) -> Path:
    target = folder / path.name
    for suffix, state in zip(("", *BESIDE), states):
        copy = target.with_name(target.name + suffix)
        copy.unlink(missing_ok=True)
        if state is not None:
            with open(path.with_name(path.name + suffix), "rb") as source:
                with open_exclusive(copy, "wb") as out:
                    _copy_file(source, out)
    return target


def _copy_file(source, out) -> None:
    """All of `source` into `out`: in the kernel where it can (sendfile), else through a buffer."""
    if hasattr(os, "sendfile"):
        try:
            while os.sendfile(out.fileno(), source.fileno(), None, 1 << 24):
                pass
            return
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
                raise
            source.seek(0)
            out.seek(0)
            out.truncate()
    shutil.copyfileobj(source, out, 1 << 20)


def _states(path: Path) -> tuple:
    """What changes when the database is written: each file's identity, size and time."""
    out: list[tuple[int, int, int, int] | None] = []
    for suffix in ("", *BESIDE):
        try:
            found = os.stat(path.with_name(path.name + suffix))
        except FileNotFoundError:
            out.append(None)
            continue
        if not stat.S_ISREG(found.st_mode):  # a FIFO or device would block or never end
            raise InputError(f"{path}{suffix}: not a regular file: give the path of the database")
        out.append((found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns))
    return tuple(out)
