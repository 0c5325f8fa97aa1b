"""The catalogue of indexes: those of a home folder with their sizes (`papers indexes`), and an
index removed or renamed as a whole."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import files
from ..errors import InputError, OptionError, RecommenderError
from .home import index_folders, index_home, missing_index, resolve_index_dir
from .layout import (
    CURRENT,
    is_index_folder,
    is_own_version,
    made_by_a_build,
    remove_tree,
    tags_path,
)
from .stored import is_index, open_stored, unpinned
from .writer import build_lock


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
            "name": self.name,
            "path": str(self.path),
            "papers": self.papers,
            "model": self.model,
            "bytes": self.bytes,
            "built_at": self.built_at,
            "problem": self.problem,
        }


def list_indexes(home: Path | None = None) -> list[IndexSummary]:
    """Every index in the home folder (or `home`), by name; a damaged one says what is wrong."""
    home = index_home().path if home is None else Path(home)
    if not home.is_dir():
        return []
    remove_released_versions(home)
    summaries = []
    for index_dir in index_folders(home):
        full_path = Path(os.path.abspath(index_dir))
        try:
            with open_stored(index_dir) as stored:
                manifest = stored.manifest
            summaries.append(
                IndexSummary(
                    index_dir.name,
                    full_path,
                    manifest.get("paper_count"),
                    manifest.get("model", ""),
                    index_bytes(manifest),
                    manifest.get("built_at", ""),
                )
            )
        except RecommenderError as error:  # no manifest to go by: what the folder takes on disk
            summaries.append(
                IndexSummary(
                    index_dir.name, full_path, None, "", _folder_bytes(index_dir), "", str(error)
                )
            )
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
        raise InputError(
            f"{index_dir} is not an index (no {CURRENT} naming a build with a manifest): "
            f"nothing {what}; give the name of an index (see `papers indexes`)"
        )


# A version a reader still had open when its index was removed waits beside the index folders,
# under this prefix, until the reader lets go (see remove_released_versions).
REMOVED_PREFIX = ".removed-"


def _remove_version(version: Path, aside: Path) -> None:
    """Remove a version folder; while a reader holds it (its manifest locked shared:
    open_stored), move it aside instead, where the reader keeps reading it (it reads through
    the open folder)."""
    with unpinned(version) as free:  # None: never committed, no reader can hold it
        if free is False:
            os.rename(version, aside.with_name(f"{aside.name}-{os.urandom(3).hex()}"))
        else:
            remove_tree(version)


def remove_released_versions(home: Path) -> None:
    """Remove the versions set aside by `remove_index` that no reader holds any more."""
    try:
        candidates = [path for path in home.iterdir() if path.name.startswith(REMOVED_PREFIX)]
    except OSError:
        return
    for path in candidates:
        if path.is_symlink() or not path.is_dir() or not is_own_version(path):
            continue  # what does not look like a version of ours is not ours to remove
        with unpinned(path) as free:
            if free:  # not while still read, nor without a manifest
                remove_tree(path)


@dataclass(frozen=True)
class IndexRemoval:
    """What `remove_index` did: the folder (or link) removed, what it kept there and why."""

    folder: Path
    kept: list[str]  # entries papers did not make, kept (so the folder stays)
    tags_kept: bool = False  # the user's tags, kept unless asked to remove them (the folder stays)
    link_target: Path | None = None  # a link to an index was given: the link alone was removed

    def to_dict(self) -> dict:
        return {
            "folder": str(self.folder),
            "kept": list(self.kept),
            "tags_kept": self.tags_kept,
            "link_target": None if self.link_target is None else str(self.link_target),
        }


def _tag_files(index_dir: Path) -> list[Path]:
    """The user's tags file of an index and SQLite's companions of it, those that are there."""
    tags = tags_path(index_dir)
    found = (Path(f"{tags}{suffix}") for suffix in ("", "-wal", "-shm", "-journal"))
    return [path for path in found if files.is_plain_file(path)]


def remove_index(
    index: str | os.PathLike,
    with_tags: bool = False,
    confirm_tags: Callable[[Path], bool] | None = None,
) -> IndexRemoval:
    """Remove an index (by name or path): what its builds made, nothing else.

    The user's tags (tags.sqlite) are kept unless `with_tags`, or `confirm_tags(path)` says yes;
    anything papers did not make is kept too (the folder then stays). A link to an index is
    removed itself, never followed: the index it points to is untouched."""
    if Path(index).name in ("", ".", ".."):
        # As `rm -r .`: the folder the user stands in (or above it) is not removed from inside.
        raise OptionError(
            f"refusing to remove '{index}': give the index's name, or its path from outside it"
        )
    index_dir = resolve_index_dir(index)
    remove_released_versions(index_dir.parent)
    if index_dir.is_symlink():
        target = Path(os.path.realpath(index_dir))
        _refuse_non_index(target, "removed")
        index_dir.unlink()  # the link, not what it points to
        return IndexRemoval(index_dir, [], link_target=target)
    tags = _tag_files(index_dir) if index_dir.is_dir() else []
    if not (with_tags and tags and not is_index(index_dir) and is_index_folder(index_dir)):
        # (else: the tags an earlier removal kept, now asked for)
        _refuse_non_index(index_dir, "removed")
    remove_tags = bool(tags) and (with_tags or (confirm_tags is not None and confirm_tags(tags[0])))
    with build_lock(index_dir):
        # CURRENT first: from here on the index is missing to every new reader.
        (index_dir / CURRENT).unlink(missing_ok=True)
        kept = []
        for path in sorted(index_dir.iterdir()):
            if path in tags and not remove_tags:
                continue  # the user's data, not the build's
            if not made_by_a_build(index_dir, path.name):
                kept.append(path.name)
            elif path.is_dir():
                aside = index_dir.parent / f"{REMOVED_PREFIX}{index_dir.name}-{path.name}"
                _remove_version(path, aside)
            else:
                path.unlink(
                    missing_ok=True
                )  # the lock too: held open, it stays ours until we let go
    if not kept and not (tags and not remove_tags):
        index_dir.rmdir()
    return IndexRemoval(index_dir, kept, tags_kept=bool(tags) and not remove_tags)


def rename_index(old: str | os.PathLike, new: str | os.PathLike) -> tuple[Path, Path]:
    """Rename an index (names or paths, on one filesystem): one rename, so readers see it whole."""
    old_dir, new_dir = resolve_index_dir(old), resolve_index_dir(new)
    _refuse_non_index(old_dir, "renamed")
    if new_dir.exists() or new_dir.is_symlink():
        raise InputError(f"{new_dir} already exists: choose another name, or remove it first")
    new_dir.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(old_dir):
        try:
            os.rename(old_dir, new_dir)
        except OSError as error:
            if error.errno == errno.EXDEV:
                raise InputError(
                    f"cannot move {old_dir} to {new_dir}: another filesystem; build it there"
                    " instead"
                ) from None
            raise RecommenderError(
                f"cannot rename {old_dir} to {new_dir}: {error.strerror}"
            ) from None
    return old_dir, new_dir
