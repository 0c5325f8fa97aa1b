"""The files of one index folder, and which of them builds made (so only those are removed).

    indexes/<name>/
        CURRENT          name of the live version folder and its manifest's sha256 (replaced
        atomically)
        .lock            held by a build (fcntl lock), never by readers
        v-<build-id>/    one complete build: manifest.json and the files it lists
        tags.sqlite      the user's tags of papers (`papers serve`), kept across rebuilds (WAL mode)
        cache.sqlite     only in indexes built before the shared cache: read as a fallback (see
        EmbeddingCache)

The embedding cache is shared by every index of the user: `<cache home>/embeddings.sqlite`
(export_cache.cache_home(), beside the ONNX exports; embed/embedding_cache.py).

A build removes only what the index's own records say it made: a `.tmp-*` folder holding the
`.papers-build` mark it was made with, a `.tmp-*` or `v-*` folder whose files are those its manifest
lists; a non-empty folder that is no index is refused before anything is written. Every file is
created exclusively and never through a link (recommender/files.py). Where an index folder is
(index/home.py), one version written (index/writer.py) and read (index/stored.py), and the catalogue
of indexes (index/catalogue.py) are beside this module.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from .. import files
from ..errors import InputError, RecommenderError

FORMAT_VERSION = 2  # 2: IDs and handles as sorted arrays (keys/*.npy) instead of keys.json
MANIFEST = "manifest.json"
CURRENT = "CURRENT"
LOCK = ".lock"
CACHE = "cache.sqlite"  # the per-index embedding cache of indexes built before the shared one
SEGMENTS = "SEGMENTS"  # the segment list of `papers add` (index/segments.py), replaced atomically
SEGMENT_FOLDER = "segments"  # the segments themselves, each a small index of its own
# the user's tags (papers serve): kept by builds; `papers indexes rm` removes them with the index
TAGS = "tags.sqlite"
# In every build folder from its creation on: what says papers made it (so only such folders are
# removed).
BUILD_MARK = ".papers-build"
# The files of one build (inside v-<build-id>/).
VECTORS = "vectors.npy"
MAP_LAYOUT = "map_layout.npy"  # every paper's point on the map (index/map_layout.py), if asked for
FAISS = "faiss.index"
PAPERS = "papers.jsonl"
OFFSETS = "papers.offsets.npy"
# IDs and handles as sorted string arrays with their rows (index/keys.py), keys/<name>.npy.
KEY_ARRAYS = (
    "ids_bytes",
    "ids_offsets",
    "ids_rows",
    "id_rank",
    "folded_ids_bytes",
    "folded_ids_offsets",
    "folded_ids_rows",
    "folded_handles_bytes",
    "folded_handles_offsets",
    "folded_handles_rows",
    "handles_bytes",
    "handles_offsets",
    # Indexes built before these lack them: their papers are then scanned (index/keys.py).
    "citation_keys_bytes",
    "citation_keys_offsets",
    "citation_keys_rows",
    "text_digests",
    "text_digest_rows",
    "identifier_digests",
    "identifier_digest_rows",
)
LEXICAL_ARRAYS = (
    "idf",
    "csr_data",
    "csr_indices",
    "csr_indptr",
    "csc_data",
    "csc_indices",
    "csc_indptr",
)
# Each vocabulary column's largest weight, the bound of exact top-k lexical scoring
# (lexical.LexicalIndex.top). Indexes built before it lack it: they are scored in full.
COLUMN_MAX = "lexical/column_max.npy"
VOCABULARY = "lexical/vocabulary.json"
STOP_WORDS = "lexical/stop_words.json"
# A segment's terms its base's vocabulary lacks (`papers add`), in their column order after the
# base's columns: the union of base and segments gives them a rebuild's IDF (query/segmented.py).
# Absent from a base, and from segments written before such terms were stored.
ADDED_TERMS = "lexical/added_terms.json"
# A reference manager's collections (Zotero's folders) and their papers' IDs, {path: [ID, ...]}:
# absent when no paper came from one. The tag store shows each collection as a tag.
COLLECTIONS = "collections.json"
# The collections some of whose items did not become papers, {path: {reason: count}}
# ({"Thesis": {"have no title": 4}}): absent when every item did.
COLLECTIONS_LEFT_OUT = "collections-left-out.json"
QUERY_ENCODER = "query-encoder"


def check_not_in_index(path: str | os.PathLike) -> None:
    """Refuse an output file among an index's own files (`--out indexes/default/CURRENT`)."""
    target = Path(os.path.abspath(path))
    for folder in target.parents:
        if (folder / CURRENT).is_file() or ((folder / LOCK).is_file() and is_index_folder(folder)):
            inside = target.relative_to(folder).parts
            if (
                len(inside) > 1
                or inside[0] in (CURRENT, LOCK)
                or inside[0].startswith((CACHE, TAGS, f".{CURRENT}"))
            ):
                raise InputError(
                    f"{path} is inside the index folder {os.path.relpath(folder)}: write it"
                    " somewhere else"
                )
            return


def is_index_folder(folder: Path) -> bool:
    """Whether `folder` holds an index (a CURRENT pointer), or only what a build of one leaves."""
    if files.is_plain_file(folder / CURRENT):
        return True
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return bool(names) and all(made_by_a_build(folder, name) for name in names)


def check_index_folder(index_dir: Path) -> None:
    """Refuse a folder that holds other things than an index (a folder of the user's, `--index
    ./mydocs`) before anything in it is touched; a missing or empty folder is fine."""
    try:
        names = sorted(os.listdir(index_dir))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as error:
        raise RecommenderError(
            f"cannot read {index_dir}: {error.strerror}: choose another index"
        ) from None
    if not names or is_index_folder(index_dir):
        return
    foreign = [
        name + ("/" if (index_dir / name).is_dir() else "")
        for name in names
        if not made_by_a_build(index_dir, name)
    ]
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    raise InputError(
        f"index {index_dir} is a folder of other files ({shown}), not an index: nothing in it was"
        " changed; give a new or empty folder, or an index name"
    )


def made_by_a_build(index_dir: Path, name: str) -> bool:
    """Whether the entry `name` of an index folder is one that builds make (and may remove)."""
    path = index_dir / name
    if name in (LOCK, CACHE, TAGS) or any(
        name == f"{base}{suffix}"
        for base in (CACHE, TAGS)
        for suffix in ("-wal", "-shm", "-journal")
    ):
        return files.is_plain_file(path)
    if name == SEGMENTS:
        return files.is_plain_file(path)
    if name == SEGMENT_FOLDER:  # index/segments.py: only index folders of its own inside
        return not path.is_symlink() and path.is_dir()
    if name.startswith(files.PARTIAL_PREFIX) or name.startswith(f".{CURRENT}.tmp-"):
        return files.is_plain_file(path)
    if name.startswith((".tmp-", "v-")):
        return is_own_version(path)
    return False


def is_marked_build(path: Path) -> bool:
    """A real folder (not a link) holding the mark a build puts in every folder it makes."""
    return not path.is_symlink() and path.is_dir() and files.is_plain_file(path / BUILD_MARK)


def is_own_version(path: Path) -> bool:
    """A folder of a build: the mark of one under way, or a manifest that lists every file in it."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        listed = set(json.loads((path / MANIFEST).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return is_marked_build(path)
    for found in path.rglob("*"):
        if found.is_dir() and not found.is_symlink():
            continue
        relative = found.relative_to(path).as_posix()
        if relative not in listed and relative not in (MANIFEST, BUILD_MARK):
            return False
    return True


def tags_path(index_dir: Path) -> Path:
    """The SQLite file of the user's tags: beside the versions, never inside one, so a rebuild keeps
    it."""
    return index_dir / TAGS


def remove_tree(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)


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
    """Remove an index's own per-index cache once its vectors are in the shared one (the build holds
    the lock)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(f"{index_dir / CACHE}{suffix}")
        if files.is_plain_file(path):
            path.unlink(missing_ok=True)
