"""The index a server process reads: reopened when a rebuild swaps CURRENT, without a failed
request."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RecommenderError
from ..index import segments
from ..index.layout import tags_path
from ..index.stored import IndexFolder
from ..query.paper_index import PaperIndex
from ..query.segmented import open_index
from ..reading.tags import TagStore


@dataclass(eq=False)
class OpenedVersion:
    """One version of the index, open, with what was computed from it (the map, the sessions)."""

    recommender: PaperIndex
    version: str
    users: int = 0
    retired: bool = False
    computed: dict = field(default_factory=dict)
    lock: threading.Lock = field(
        default_factory=threading.Lock
    )  # one computation of each thing at a time

    def cached(self, key, compute):
        """`compute()` once for this version (later calls wait for the first and share its
        result)."""
        with self.lock:
            if key not in self.computed:
                self.computed[key] = compute()
            return self.computed[key]


class LiveIndex:
    """The live version of an index for the requests of one process.

    Each request leases the version CURRENT names (one small file read). When a build has
    swapped CURRENT, the next request opens the new version and later ones use it; the old one
    is closed when its last request ends, which releases its pin so the build (or the next one)
    can remove it. A request thus sees the old index or the new one, whole."""

    def __init__(self, index_dir: Path):
        self.index_dir = Path(index_dir)
        # The index folder, held open: renamed (`papers indexes mv`), it is followed.
        self._folder = IndexFolder(self.index_dir)
        self._lock = threading.Lock()
        self._current: OpenedVersion | None = None
        # One request at a time uses the library in this process: a PaperIndex is not made for
        # threads
        # (its lazy loads, and numpy's header parsing, which on CPython 3.11 can fail with
        # "SystemError:
        # AST constructor recursion depth mismatch" when two threads run it). Requests run in
        # parallel
        # across --workers processes, which share the index's pages.
        self._library = threading.Lock()

    @contextlib.contextmanager
    def lease(self) -> Iterator[OpenedVersion]:
        with self._library:
            opened = self._acquire()
            try:
                yield opened
            finally:
                self._release(opened)

    def where(self) -> Path:
        """The index folder now: renamed (`papers indexes mv`), followed; removed,
        IndexMissingError."""
        self.index_dir = self._folder.where()
        return self.index_dir

    def _acquire(self) -> OpenedVersion:
        self.where()  # renamed: followed; removed: IndexMissingError
        live = segments.reader_version(self.index_dir)  # a rebuild, an add or a remove
        with self._lock:
            current = self._current
            if current is None or current.version != live:
                try:
                    current = self._open()
                except RecommenderError:
                    if self._current is None:
                        raise
                    current = (
                        self._current
                    )  # the new version cannot be read: keep serving the one we have
            current.users += 1
            return current

    def _open(self) -> OpenedVersion:
        version = segments.reader_version(
            self.index_dir
        )  # read first: a change meanwhile reopens again
        recommender = open_index(self.index_dir)
        try:
            # Loaded now, under the lock: the first request after a rebuild does not pay for them
            # alone.
            recommender.faiss_index, recommender.lexical  # noqa: B018
        except BaseException:
            recommender.close()
            raise
        opened = OpenedVersion(recommender, version or recommender.stored.folder.name)
        previous, self._current = self._current, opened
        if previous is not None:
            previous.retired = True
            if previous.users == 0:
                previous.recommender.close()
        return opened

    def _release(self, opened: OpenedVersion) -> None:
        with self._lock:
            opened.users -= 1
            if opened.retired and opened.users == 0:
                opened.recommender.close()

    def close(self) -> None:
        self._folder.close()
        with self._lock:
            if self._current is not None:
                self._current.retired = True
                if self._current.users == 0:
                    self._current.recommender.close()
                self._current = None


class FollowedTags(TagStore):
    """The tags of the live index: `tags.sqlite` in the index folder where it is now, so that a tag
    written after `papers indexes mv` lands in the renamed index, and one written after it was
    removed is refused (IndexMissingError) rather than kept where no index reads it."""

    def __init__(self, live: LiveIndex):
        self.live = live

    @property
    def index_dir(self) -> Path:  # type: ignore[override]
        return self.live.where()

    @property
    def path(self) -> Path:  # type: ignore[override]
        return tags_path(self.index_dir)
