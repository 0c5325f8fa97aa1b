"""The catalogue of indexes: those of a home folder with their sizes (`papers indexes`), and an
index removed or renamed as a whole."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .. import files
from ..errors import IndexBusyError, InputError, RecommenderError
from .home import index_folders, index_home, missing_index, resolve_index_dir
from .layout import CURRENT, LOCK, made_by_a_build, remove_tree
from .stored import is_index, open_stored

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
    for index_dir in index_folders(home):
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
            if not made_by_a_build(index_dir, path.name):
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
