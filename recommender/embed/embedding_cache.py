"""The user-wide embedding cache: vectors keyed by content hash in one SQLite file shared by every
index of the user (`<cache home>/embeddings.sqlite`, beside the ONNX exports of export_cache.py),
and the read-only fallback to the per-index caches of indexes built before it."""

from __future__ import annotations

import contextlib
import json
import time
import warnings
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from .. import files
from ..errors import RecommenderError, caller_stacklevel

#: How long a build waits for another process writing the cache (SQLite's busy timeout).
BUSY_SECONDS = 60


class CacheUnavailable(RecommenderError):
    """The user cache folder cannot be made (read-only home, under a file): builds go on without the
    cache."""


class EmbeddingCache:
    """Vectors keyed by content hash (model identity, chunking, text: embed.windows.cache_key), in
    one SQLite file shared by every index of the user (export_cache.embedding_cache_path()), safe
    under concurrent builds.

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
        from . import export_cache

        folder = export_cache.cache_home() if folder is None else Path(folder)
        self.path = folder / export_cache.EMBEDDINGS
        self.owner = owner
        self.damage = ""  # why the file was found damaged and started afresh, if it was
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CacheUnavailable(
                f"the cache folder {folder} cannot be made ({error.strerror}): papers are "
                "encoded without the embedding cache; set $PAPERS_CACHE to a writable folder"
            ) from None
        self._refuse_links()
        with self._guard():
            self._connect()

    def _refuse_links(self) -> None:
        path = files.linked_sqlite_file(self.path)
        if path is not None:
            raise RecommenderError(
                f"embedding cache file {path} is a symbolic link, which is never followed: "
                "remove it (or run `papers cache clear`)"
            )

    def _connect(self) -> None:
        import sqlite3  # here: only builds use the cache, and lookups need not pay for the import

        self.connection = sqlite3.connect(self.path, timeout=BUSY_SECONDS)
        files.switch_to_wal(self.connection, BUSY_SECONDS)
        # In WAL mode NORMAL loses no committed transaction when the process dies
        # (only, at worst, the last ones on power loss) and never corrupts the file.
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, dimension INTEGER, vector"
            " BLOB, checksum INTEGER)"
        )
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS state (name TEXT PRIMARY KEY, value TEXT)"
        )
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
                raise RecommenderError(
                    f"embedding cache {self.path}: {error}: check the disk and permissions"
                ) from None
            with contextlib.suppress(Exception):
                self.connection.close()
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self.damage = str(error)
            warnings.warn(
                f"embedding cache {self.path} was damaged ({error}) and is started afresh: every"
                " paper is encoded again",
                stacklevel=caller_stacklevel(),
            )
            self._connect()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        with self._guard():
            return self._get_many(keys)
        return {}  # the cache was damaged and is now empty

    def _get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, dimension, blob, checksum in self.connection.execute(
                f"SELECT key, dimension, vector, checksum FROM vectors WHERE key IN ({marks})",
                chunk,
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
        """Whether the last build of the owner index stopped (killed, Ctrl-C) before its encoding
        ended."""
        with self._guard():
            return (
                self.connection.execute(
                    "SELECT 1 FROM state WHERE name = ?", (self._state_name,)
                ).fetchone()
                is not None
            )
        return False

    def mark_encoding(self, running: bool) -> None:
        """Record that the owner index's build is encoding (True) or is done with it (False)."""
        with self._guard(), self.connection:
            if running:
                self.connection.execute(
                    "INSERT OR REPLACE INTO state VALUES (?, ?)",
                    (self._state_name, time.strftime("%Y-%m-%dT%H:%M:%S%z")),
                )
            else:
                self.connection.execute("DELETE FROM state WHERE name = ?", (self._state_name,))

    def remember_model(self, model_identity: str, facts: dict) -> None:
        """Keep what the model told of itself (its window, `max_tokens`), so that a build taking
        every vector from the cache, without loading the model, records the same manifest as one
        that encoded them.
        """
        with self._guard(), self.connection:
            self.connection.execute(
                "INSERT OR REPLACE INTO state VALUES (?, ?)",
                (f"model {model_identity}", json.dumps(facts, sort_keys=True)),
            )

    def model_facts(self, model_identity: str) -> dict:
        with self._guard():
            row = self.connection.execute(
                "SELECT value FROM state WHERE name = ?", (f"model {model_identity}",)
            ).fetchone()
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
        """What `papers cache info` shows: the file, its size in bytes (with its -wal), and its
        vectors."""
        entries = 0  # a damaged file is started afresh: no vectors
        with self._guard():
            entries = self.connection.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        size = sum(
            Path(f"{self.path}{suffix}").stat().st_size
            for suffix in ("", "-wal")
            if Path(f"{self.path}{suffix}").is_file()
        )
        return {"path": str(self.path), "bytes": size, "entries": int(entries)}

    def clear(self) -> int:
        """Remove every vector (the file stays, so concurrent builds keep a valid cache); returns
        how many."""
        removed = 0  # a damaged file is started afresh: nothing left to remove
        with self._guard(), self.connection:
            removed = self.connection.execute("DELETE FROM vectors").rowcount
        self.connection.execute("VACUUM")
        self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(removed)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _remove_leftovers(home: Path) -> None:
    """What killed model exports and unpackings left in the cache folder, removed and
    reported (a warning)."""
    from .user_cache import leftovers_notice, remove_stale_leftovers

    notice = leftovers_notice(remove_stale_leftovers(home), home)
    if notice:
        warnings.warn(notice, stacklevel=caller_stacklevel())


def embedding_cache_info(folder: Path | None = None) -> dict:
    """The shared embedding cache as `papers cache info` shows it: path, bytes (with its -wal file)
    and entries (vectors); a cache never made is reported empty and is not created. `kept` lists
    what else the cache folder (`folder`) keeps, by kind: its entries and bytes."""
    from . import export_cache
    from .user_cache import folder_contents

    home = export_cache.cache_home() if folder is None else Path(folder)
    path = home / export_cache.EMBEDDINGS
    _remove_leftovers(home)
    if not path.exists() and not path.is_symlink():
        summary = {"path": str(path), "bytes": 0, "entries": 0}
    else:
        with EmbeddingCache(home) as cache:
            summary = cache.summary()
    return {
        **summary,
        "folder": str(home),
        "kept": folder_contents(home, export_cache.KEPT_FOLDERS),
    }


def clear_embedding_cache(folder: Path | None = None) -> dict:
    """Empty the shared embedding cache (`papers cache clear`): every index's next build encodes its
    papers again; the indexes themselves and the ONNX exports are untouched. Returns the entries
    removed and the bytes the file took before and takes now."""
    from . import export_cache

    path = (export_cache.cache_home() if folder is None else Path(folder)) / export_cache.EMBEDDINGS
    _remove_leftovers(path.parent)
    if not path.exists() and not path.is_symlink():
        return {
            "path": str(path),
            "bytes": 0,
            "entries": 0,
            "removed": 0,
            "bytes_before": 0,
            "damaged": "",
        }
    bytes_before = sum(
        Path(f"{path}{suffix}").stat().st_size
        for suffix in ("", "-wal")
        if files.is_plain_file(Path(f"{path}{suffix}"))
    )
    # A damaged file is what clearing is for: it is started afresh and said so in the result,
    # not warned about on the way.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with EmbeddingCache(path.parent) as cache:
            removed = cache.clear()
            after = cache.summary()
            damaged = cache.damage
    return {**after, "removed": removed, "bytes_before": bytes_before, "damaged": damaged}


def read_legacy_vectors(path: Path, keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Vectors of a per-index cache (see `legacy_cache`) by their keys, read-only; rows that fail
    their checksum are left out, and an unreadable file gives none (those papers are encoded
    again)."""
    import sqlite3
    from urllib.parse import quote

    found: dict[str, np.ndarray] = {}
    try:
        connection = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=60
        )
    except sqlite3.Error:
        return found
    try:
        with contextlib.closing(connection):
            columns = {row[1] for row in connection.execute("PRAGMA table_info(vectors)")}
            checksum = "checksum" if "checksum" in columns else "NULL"
            unique = list(dict.fromkeys(keys))
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                rows = connection.execute(
                    f"SELECT key, dimension, vector, {checksum} FROM vectors WHERE key IN"
                    f" ({','.join('?' * len(chunk))})",
                    chunk,
                )
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
