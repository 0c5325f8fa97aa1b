"""Writing files safely: created exclusively, never through a link, whole or not at all.

Every file the tool writes goes through here (outputs such as `--out`, index files, the lock
file, pointers). A second user who can write the same folder can plant a symlink under any
name we might open; so a file is only ever *created* (O_CREAT | O_EXCL | O_NOFOLLOW, which
fail on anything already there, a link included), and a finished file replaces its target by
rename, which replaces a link planted at the target rather than writing through it.

    with replacing(Path("handout.md")) as stream:   # text; "wb" for bytes
        stream.write(text)

The temporary name does not grow with the target's (`.papers-partial-<pid>-<random>`), so it
fits in the folder whenever the target's name does. A run killed before the rename (SIGKILL)
leaves it behind; `remove_stale_partials` removes such files of dead processes of this user.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

PARTIAL_PREFIX = ".papers-partial-"
_PARTIAL_NAME = re.compile(rf"{re.escape(PARTIAL_PREFIX)}(\d+)-[0-9a-f]{{8}}")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def create_exclusive(path: str | os.PathLike, mode: int = 0o666, readable: bool = False) -> int:
    """A new file at `path`, open for writing (and reading, if `readable`: a descriptor);
    FileExistsError if anything, a link included, is already there. Permissions are `mode` less the
    umask, as for any new file.
    """
    return os.open(path, (_CREATE & ~os.O_WRONLY) | os.O_RDWR if readable else _CREATE, mode)


def open_exclusive(
    path: str | os.PathLike,
    mode: str = "w",
    encoding: str | None = "utf-8",
    newline: str | None = None,
) -> IO:
    """`create_exclusive` as a file object: `mode` "w" (text, `encoding`), "wb" or "w+b" (read back
    too)."""
    descriptor = create_exclusive(path, readable="+" in mode)
    try:
        if "b" in mode:
            return os.fdopen(descriptor, "w+b" if "+" in mode else "wb")
        return os.fdopen(descriptor, "w", encoding=encoding, newline=newline)
    except BaseException:
        os.close(descriptor)
        raise


def partial_path(target: Path) -> Path:
    """A fresh temporary name beside `target` (short, whatever the length of target's name)."""
    return target.with_name(f"{PARTIAL_PREFIX}{os.getpid()}-{os.urandom(4).hex()}")


@contextlib.contextmanager
def replacing(
    target: str | os.PathLike,
    mode: str = "w",
    encoding: str | None = "utf-8",
    newline: str | None = None,
    durable: bool = True,
) -> Iterator[IO]:
    """A file object whose content replaces `target` atomically once the block ends without error.

    Until then `target` is untouched; on any error (or Ctrl-C) the temporary file is removed and
    `target` keeps its old content. An OSError about the temporary file names `target` instead.
    `durable` fsyncs the file before the rename (so a crash leaves the old content or the new)."""
    target = Path(target)
    temporary = partial_path(target)
    try:
        stream = open_exclusive(temporary, mode, encoding, newline)
    except OSError as error:
        raise _naming(error, temporary, target) from None
    try:
        with stream:
            yield stream
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
            written = os.fstat(stream.fileno())
        # Rename what we wrote, not whatever may have been put at the temporary name since.
        now = os.lstat(temporary)
        if (now.st_dev, now.st_ino) != (written.st_dev, written.st_ino):
            raise OSError(
                f"{temporary} was replaced while it was being written: write {target} somewhere"
                " private"
            )
        os.replace(temporary, target)
    except OSError as error:
        _remove_if_ours(temporary)
        raise _naming(error, temporary, target) from None
    except BaseException:
        _remove_if_ours(temporary)
        raise


def stream_target(target: str | os.PathLike) -> str:
    """What kind of thing an output path names that is written into, not replaced: "fifo",
    "character device", "socket", "open file" (a link into /proc/<pid>/fd, as /dev/stdout is), or
    "block device" (refused by `output`); "" for a path a file is written to (`replacing`)."""
    path = os.fspath(target)
    for _ in range(40):  # follow the links by hand: a link into /proc/<pid>/fd names an open file
        if re.match(r"/proc/(self|thread-self|\d+)(/task/\d+)?/fd/\d+$", os.path.normpath(path)):
            return "open file"
        try:
            following = os.readlink(path)
        except OSError:
            break
        path = os.path.join(os.path.dirname(path), following)
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return ""
    kinds = (
        ("fifo", stat.S_ISFIFO),
        ("character device", stat.S_ISCHR),
        ("socket", stat.S_ISSOCK),
        ("block device", stat.S_ISBLK),
    )
    for kind, test in kinds:
        if test(mode):
            return kind
    return ""


@contextlib.contextmanager
def output(
    target: str | os.PathLike,
    mode: str = "w",
    encoding: str | None = "utf-8",
    newline: str | None = None,
) -> Iterator[IO]:
    """A file object for an output the user named (`--out`), as coreutils treat one: a FIFO, a
    character device, a socket or an open file (`/dev/stdout`, `/proc/self/fd/1`) is written into,
    never replaced; a block device is refused; any other path is a file replaced whole once the
    block ends (`replacing`)."""
    kind = stream_target(target)
    if not kind:
        with replacing(target, mode, encoding, newline) as handle:
            yield handle
        return
    if kind == "block device":
        raise OSError(
            errno.EPERM,
            "a block device is never written to: give a file, a FIFO or a character device",
            os.fspath(target),
        )
    if kind == "socket":
        import socket

        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(os.fspath(target))
            descriptor = os.dup(connection.fileno())
        finally:
            connection.close()
    else:
        # No O_CREAT, no O_TRUNC: what is there is written into, as `>` and `tee` do (an open
        # regular file behind /proc/<pid>/fd is appended to, after what its owner wrote).
        flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY
        descriptor = os.open(target, flags | (os.O_APPEND if kind == "open file" else 0))
    try:
        handle = (
            os.fdopen(descriptor, "wb")
            if "b" in mode
            else os.fdopen(descriptor, "w", encoding=encoding, newline=newline)
        )
    except BaseException:
        os.close(descriptor)
        raise
    with handle:
        yield handle


def write_bytes(target: str | os.PathLike, data: bytes, durable: bool = True) -> None:
    """`target` replaced by `data` (see `replacing`)."""
    with replacing(target, "wb", durable=durable) as stream:
        stream.write(data)


def write_text(target: str | os.PathLike, text: str, durable: bool = True) -> None:
    """`target` replaced by `text` in UTF-8 (see `replacing`)."""
    with replacing(target, "w", durable=durable) as stream:
        stream.write(text)


def open_lock_file(path: str | os.PathLike) -> IO:
    """The lock file at `path`, made if missing, for fcntl locks: never opened through a link, and
    refused unless it is a plain file of this user (a second user's file could be locked by them
    forever). Raises OSError (ELOOP for a link) naming the path."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
        os.close(descriptor)
        raise OSError(f"{path} is not a plain file of this user (planted by someone else?)")
    return os.fdopen(descriptor, "r+b")


def linked_sqlite_file(path: str | os.PathLike) -> Path | None:
    """The first of an SQLite database's files (itself, -wal, -shm, -journal) that is a symbolic
    link, else None: SQLite follows links, so a planted one would redirect its writes."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        candidate = Path(f"{os.fspath(path)}{suffix}")
        if candidate.is_symlink():
            return candidate
    return None


SQLITE_BUSY = 5  # SQLite's primary result code for "database is locked" (extended ones add bits)


def switch_to_wal(connection, seconds: float) -> None:
    """Put the SQLite file of `connection` in WAL mode (it stays so). Two processes making the file
    at once both ask, and SQLite answers the one that loses "database is locked" at once, without
    waiting out its busy timeout: it is asked again until `seconds` have passed."""
    import sqlite3
    import time

    deadline = time.monotonic() + seconds
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            code = getattr(error, "sqlite_errorcode", None)  # Python 3.11 on
            busy = (code & 0xFF) == SQLITE_BUSY if code is not None else "locked" in str(error)
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def is_plain_file(path: str | os.PathLike) -> bool:
    """Whether `path` is a regular file itself (not a link to one)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def remove_stale_partials(folder: Path) -> None:
    """Temporary files of `replacing` left in `folder` by runs that were killed: removed once their
    process is gone, and only this user's plain files (never a link, never another user's)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        found = _PARTIAL_NAME.fullmatch(entry.name)
        if found is None or int(found.group(1)) == os.getpid():
            continue
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
            continue
        if _process_exists(int(found.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _remove_if_ours(temporary: Path) -> None:
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(temporary).st_mode):
            os.unlink(temporary)


def _naming(error: OSError, temporary: Path, target: Path) -> OSError:
    """The error with the file the user asked for in place of our temporary one."""
    if (
        error.filename in (temporary, str(temporary))
        or error.filename is None
        and error.errno is not None
    ):
        return OSError(error.errno, error.strerror, str(target))
    return error
