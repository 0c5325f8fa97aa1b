"""The user's tags of papers (their library), kept in SQLite beside an index, and the papers a tag
recommends: papers like the tag's papers, the tagged ones left out (arxiv-sanity-lite's tags)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from .. import files
from ..errors import InputError, PaperNotFoundError, RecommenderError
from ..index.layout import tags_path
from ..index.stored import collection_memberships, collections_left_out
from ..query.paper_index import PaperIndex, Recommendation

#: How long a tag's change waits for another process changing the tags (SQLite's busy timeout).
BUSY_SECONDS = 10

MAX_TAG = 200  # characters: a collection path several folders deep fits
TAG_RULE = (
    f"a tag is 1 to {MAX_TAG} printable characters ('/' between a collection's folders), "
    "without a space or '/' at either end or an empty folder ('//')"
)
UNIX_EPOCH_JULIAN_DAY = 2440587.5  # SQLite's julianday('now') of 1970-01-01T00:00Z
#: The reader of a feed whose place `papers feed` reads and moves unless told another.
DIGEST = "digest"
PAPERS_A_TAG = 10_000  # a tag is a reading list, not a corpus: bounds what a profile averages


def check_tag(tag: str) -> str:
    """The tag if it is a valid name (InputError otherwise)."""
    if not isinstance(tag, str) or not _valid_tag(tag):
        shown = tag if isinstance(tag, str) and tag.isprintable() else repr(tag)
        raise InputError(f"tag '{shown[:80]}' cannot be used: {TAG_RULE}")
    return tag


def _valid_tag(tag: str) -> bool:
    # Printable (no control character or line break: the name goes into one-line messages, HTML
    # and URLs, escaped there), bounded, and a path of non-empty folder names.
    return (
        0 < len(tag) <= MAX_TAG and tag.isprintable() and tag == tag.strip(" /") and "//" not in tag
    )


class TagStore:
    """Tags of paper IDs in `<index>/tags.sqlite` (WAL mode: readers never wait for a writer, and
    several server processes share it). IDs are kept as given, so tags outlive a rebuild of the
    index.

    The collections of the index's live version (a Zotero library's folders, recorded by the build)
    are tags too, read-only: a collection's papers are those of the latest build, and the user's own
    tags and marks, kept here, are never changed by a rebuild. A tag may have both: the user's
    papers are added to the collection's."""

    def __init__(self, index_dir: Path):
        self.index_dir = Path(index_dir)
        self.path = tags_path(self.index_dir)

    def collections(self) -> dict[str, list[str]]:
        """The index's collections with their paper IDs (those with a valid tag name), those none
        of whose items became papers included, with none."""
        found = {
            name: ids
            for name, ids in collection_memberships(self.index_dir).items()
            if _valid_tag(name)
        }
        for name in collections_left_out(self.index_dir):
            if _valid_tag(name):
                found.setdefault(name, [])
        return found

    def left_out(self, tag: str) -> dict[str, int]:
        """How many of a collection's items did not become papers, by reason ({} for a tag that is
        not a collection, or one all of whose items did)."""
        return dict(collections_left_out(self.index_dir).get(tag, {}))

    @contextlib.contextmanager
    def _connection(self, write: bool = False) -> Iterator:
        import sqlite3

        if not write and not self.path.exists():
            yield None
            return
        linked = files.linked_sqlite_file(self.path)
        if linked is not None:  # SQLite would write through it
            raise RecommenderError(
                f"tags file {linked} is a symbolic link, which is never followed: remove it"
            )
        try:
            connection = sqlite3.connect(self.path, timeout=BUSY_SECONDS)
        except sqlite3.Error as error:
            raise RecommenderError(
                f"tags {self.path}: {error}: check the disk and permissions"
            ) from None
        try:
            if write:
                files.switch_to_wal(connection, BUSY_SECONDS)
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS tags (tag TEXT NOT NULL, paper TEXT NOT NULL, "
                    "added REAL NOT NULL DEFAULT (julianday('now')), PRIMARY KEY (tag, paper))"
                )
            with connection:
                yield connection
        except sqlite3.Error as error:
            raise RecommenderError(
                f"tags {self.path}: {error}: check the disk and permissions"
            ) from None
        finally:
            connection.close()

    def tags(self) -> dict[str, list[str]]:
        """Every tag with its paper IDs in the order they were tagged, tags by name."""
        found: dict[str, list[str]] = {}
        with self._connection() as connection:
            if connection is not None and self._has_table(connection):
                for tag, paper in connection.execute(
                    "SELECT tag, paper FROM tags ORDER BY tag, added, paper"
                ):
                    found.setdefault(tag, []).append(paper)
        for name, ids in self.collections().items():
            found[name] = list(dict.fromkeys([*ids, *found.get(name, ())]))
        return dict(sorted(found.items()))

    def papers(self, tag: str) -> list[str]:
        """The IDs a tag holds, in the order they were tagged (empty for an unknown tag)."""
        check_tag(tag)
        collected = self.collections().get(tag, [])
        with self._connection() as connection:
            if connection is None or not self._has_table(connection):
                return list(collected)
            return list(
                dict.fromkeys(
                    [
                        *collected,
                        *(
                            paper
                            for (paper,) in connection.execute(
                                "SELECT paper FROM tags WHERE tag = ? ORDER BY added, paper", (tag,)
                            )
                        ),
                    ]
                )
            )

    def add(self, tag: str, paper_id: str) -> list[str]:
        """Tag a paper (by its ID; tagging it again changes nothing); returns the tag's papers."""
        check_tag(tag)
        with self._connection(write=True) as connection:
            count = connection.execute(
                "SELECT count(*) FROM tags WHERE tag = ?", (tag,)
            ).fetchone()[0]
            if count >= PAPERS_A_TAG:
                raise InputError(
                    f"tag '{tag}' already holds {count} papers, the most a tag may hold"
                )
            connection.execute(
                "INSERT OR IGNORE INTO tags (tag, paper) VALUES (?, ?)", (tag, paper_id)
            )
        return self.papers(tag)

    def remove(self, tag: str, paper_id: str) -> list[str]:
        """Untag a paper (a paper the tag does not hold changes nothing); returns the tag's
        papers."""
        check_tag(tag)
        if paper_id in self.collections().get(tag, ()):
            raise InputError(
                f"paper {paper_id} is in the collection '{tag}' of the library this index "
                "was built from: take it out of the collection there and rebuild"
            )
        with self._connection(write=True) as connection:
            connection.execute("DELETE FROM tags WHERE tag = ? AND paper = ?", (tag, paper_id))
        return self.papers(tag)

    def mark(self, tag: str, paper_id: str, kind: str) -> list[str]:
        """Mark a paper for a tag: "not" (not interested: a negative seed of the tag's profile) or
        "seen" (shown and acknowledged: left out of the tag's recommendations); returns the tag's
        papers so marked.
        """
        check_tag(tag)
        _check_kind(kind)
        with self._connection(write=True) as connection:
            _create_marks(connection)
            connection.execute(
                "INSERT OR IGNORE INTO marks (tag, paper, kind) VALUES (?, ?, ?)",
                (tag, paper_id, kind),
            )
        return self.marked(tag, kind)

    def unmark(self, tag: str, paper_id: str, kind: str) -> list[str]:
        """Take a mark back (a paper not so marked changes nothing); returns the tag's papers so
        marked."""
        check_tag(tag)
        _check_kind(kind)
        with self._connection(write=True) as connection:
            _create_marks(connection)
            connection.execute(
                "DELETE FROM marks WHERE tag = ? AND paper = ? AND kind = ?", (tag, paper_id, kind)
            )
        return self.marked(tag, kind)

    def marked(self, tag: str, kind: str) -> list[str]:
        """The IDs marked `kind` ("not" or "seen") for a tag, in the order they were marked."""
        check_tag(tag)
        _check_kind(kind)
        with self._connection() as connection:
            if (
                connection is None
                or connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'marks'").fetchone()
                is None
            ):
                return []
            return [
                paper
                for (paper,) in connection.execute(
                    "SELECT paper FROM marks WHERE tag = ? AND kind = ? ORDER BY added, paper",
                    (tag, kind),
                )
            ]

    # -- the feed's bookkeeping (reading/feed.py): when each paper arrived, where each reader of
    # each tag's feed has read to

    def record_arrivals(self, parts: Sequence[tuple[str, float, Sequence[str]]]) -> int:
        """Record the papers of index parts (name, when the part was made, its IDs) not recorded
        before; a paper keeps its first arrival (a rebuild or compaction does not make it new).
        Returns the arrival generation now current: it grows by one each time new parts are
        recorded."""
        with self._feed_records(write=True) as connection:
            connection.execute("BEGIN IMMEDIATE")  # two feeds at once: one records, then the other
            known = {name for (name,) in connection.execute("SELECT part FROM arrival_parts")}
            generation = _whole(
                connection.execute(
                    "SELECT coalesce(max(noticed), 0) FROM arrival_parts"
                ).fetchone()[0]
            )
            fresh = [part for part in parts if part[0] not in known]
            if fresh:
                generation += 1
                for name, added, ids in fresh:
                    connection.executemany(
                        "INSERT OR IGNORE INTO arrivals (paper, added, noticed) VALUES (?, ?, ?)",
                        ((paper, added, generation) for paper in ids),
                    )
                    connection.execute(
                        "INSERT OR IGNORE INTO arrival_parts (part, noticed) VALUES (?, ?)",
                        (name, generation),
                    )
            return generation

    def arrived(self, after_generation: int | None = None, since: float | None = None) -> list[str]:
        """IDs recorded after an arrival generation, or made at or after `since` (seconds since
        the epoch)."""
        with self._feed_records() as connection:
            if connection is None or not _has(connection, "arrivals"):
                return []
            if since is not None:
                rows = connection.execute("SELECT paper FROM arrivals WHERE added >= ?", (since,))
            else:
                rows = connection.execute(
                    "SELECT paper FROM arrivals WHERE noticed > ?", (after_generation or 0,)
                )
            return [str(paper) for (paper,) in rows]

    def first_tagged(self, tag: str) -> float | None:
        """When the tag's first paper was tagged (seconds since the epoch), None if it holds
        none."""
        check_tag(tag)
        with self._connection() as connection:
            if connection is None or not self._has_table(connection):
                return None
            (day,) = connection.execute(
                "SELECT min(added) FROM tags WHERE tag = ?", (tag,)
            ).fetchone()
            return None if day is None else (float(day) - UNIX_EPOCH_JULIAN_DAY) * 86400.0

    def feed_read(self, tag: str, reader: str = DIGEST) -> tuple[int, float] | None:
        """(arrival generation, when: seconds since the epoch) of a reader's last read of a tag's
        feed, None if never. Each reader has its own place: the digest `papers feed` writes, the
        web app's feed page, a reader named with `papers feed --reader`."""
        check_tag(tag)
        with self._feed_records() as connection:
            if connection is None:
                return None
            found = None
            if _has(connection, "feed_places"):
                found = connection.execute(
                    "SELECT noticed, read FROM feed_places WHERE reader = ? AND tag = ?",
                    (reader, tag),
                ).fetchone()
            if found is None and reader == DIGEST and _has(connection, "feed_reads"):
                # Kept from before readers had places: the CLI's digest read these
                found = connection.execute(
                    "SELECT noticed, read FROM feed_reads WHERE tag = ?", (tag,)
                ).fetchone()
            return None if found is None else (_whole(found[0]), _number(found[1]))

    def mark_feed_read(
        self, tags: Sequence[str], generation: int, when: float, reader: str = DIGEST
    ) -> None:
        """Record that a reader read these tags' feeds up to an arrival generation."""
        rows = [(reader, check_tag(tag), generation, when) for tag in tags]
        with self._feed_records(write=True) as connection:
            connection.executemany(
                "INSERT OR REPLACE INTO feed_places (reader, tag, noticed, read)"
                " VALUES (?, ?, ?, ?)",
                rows,
            )

    @contextlib.contextmanager
    def _feed_records(self, write: bool = False) -> Iterator:
        """A connection to the feed's tables (created when writing); a damaged one (a table of
        another shape, values of another type) is one error that says how to start them again."""
        import sqlite3

        with self._connection(write=write) as connection:
            try:
                if write:
                    _create_feed_tables(connection)
                yield connection
            except (sqlite3.OperationalError, sqlite3.IntegrityError) as error:
                if isinstance(error, sqlite3.OperationalError) and not any(
                    word in str(error) for word in ("column", "already exists", "no such table")
                ):
                    raise  # locked, I/O: the connection's own message
                raise self._damaged_feed(error) from None
            except (ValueError, TypeError, OverflowError) as error:
                raise self._damaged_feed(error) from None

    def _damaged_feed(self, error: Exception) -> RecommenderError:
        return RecommenderError(
            f"tags {self.path}: the feed's records are damaged ({str(error)[:120]}): drop its"
            f" tables ({', '.join(FEED_TABLES)}) with sqlite3; the tags are kept, and every paper"
            " is new once more"
        )

    @staticmethod
    def _has_table(connection) -> bool:
        return (
            connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'tags'").fetchone()
            is not None
        )


# A paper's marks for a tag: not interested (a negative seed of the tag's profile), seen (left out).
MARKS = {"not": "not interested", "seen": "seen"}


def _check_kind(kind: str) -> None:
    if kind not in MARKS:
        raise InputError(f"unknown mark '{kind}': use one of {', '.join(MARKS)}")


def _create_marks(connection) -> None:
    connection.execute(
        "CREATE TABLE IF NOT EXISTS marks (tag TEXT NOT NULL, paper TEXT NOT NULL, kind TEXT NOT"
        " NULL, added REAL NOT NULL DEFAULT (julianday('now')), PRIMARY KEY (tag, paper, kind))"
    )


#: The feed's own tables in the tags database.
FEED_TABLES = ("arrivals", "arrival_parts", "feed_places", "feed_reads")


def _has(connection, table: str) -> bool:
    return (
        connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        is not None
    )


def _whole(value) -> int:
    """A generation read back: a whole number (a damaged table's text or real is refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"generation {str(value)[:20]!r} is not a whole number")
    return value


def _number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"time {str(value)[:20]!r} is not a number")
    return float(value)


def _create_feed_tables(connection) -> None:
    # noticed: the arrival generation that recorded a paper or part (a counter, so no clock is
    # trusted); added: when its part was made, for `since` a date.
    connection.execute(
        "CREATE TABLE IF NOT EXISTS arrivals (paper TEXT PRIMARY KEY, "
        "added REAL NOT NULL, noticed INTEGER NOT NULL)"
    )
    connection.execute(
        "CREATE TABLE IF NOT EXISTS arrival_parts (part TEXT PRIMARY KEY, noticed INTEGER NOT NULL)"
    )
    # Where each reader (the digest, the web app, one named with --reader) has read each tag's
    # feed to; feed_reads, the digest's places before readers had their own, is only read.
    connection.execute(
        "CREATE TABLE IF NOT EXISTS feed_places (reader TEXT NOT NULL, tag TEXT NOT NULL, "
        "noticed INTEGER NOT NULL, read REAL NOT NULL, PRIMARY KEY (reader, tag))"
    )


def items_note(papers: int, left_out: dict[str, int]) -> str:
    """What a collection's tag says of its items ("3 of 7 items; 4 have no title"), "" when every
    item became a paper."""
    if not left_out:
        return ""
    total = papers + sum(left_out.values())
    reasons = "; ".join(f"{count} {reason}" for reason, count in left_out.items())
    return f"{papers} of {total} items; {reasons}"


def tag_paper(recommender: PaperIndex, tags: TagStore, tag: str, reference: str) -> list[str]:
    """Tag the paper a reference names (ID, handle or unique prefix), stored by its ID."""
    check_tag(tag)
    return tags.add(tag, recommender.id_of(recommender.resolve(reference)))


def untag_paper(recommender: PaperIndex, tags: TagStore, tag: str, reference: str) -> list[str]:
    """Untag a paper; a reference that names no paper of this index may still be a tagged ID (of a
    paper a rebuild dropped), so it is removed as given."""
    check_tag(tag)
    try:
        paper_id = recommender.id_of(recommender.resolve(reference))
    except PaperNotFoundError:
        paper_id = reference
    return tags.remove(tag, paper_id)


def mark_paper(
    recommender: PaperIndex, tags: TagStore, tag: str, reference: str, kind: str
) -> list[str]:
    """Mark the paper a reference names "not" (not interested) or "seen" for a tag, stored by its
    ID."""
    check_tag(tag)
    return tags.mark(tag, recommender.id_of(recommender.resolve(reference)), kind)


def unmark_paper(
    recommender: PaperIndex, tags: TagStore, tag: str, reference: str, kind: str
) -> list[str]:
    """Take a mark back; a reference that names no paper of this index is removed as given (as
    `untag_paper`)."""
    check_tag(tag)
    try:
        paper_id = recommender.id_of(recommender.resolve(reference))
    except PaperNotFoundError:
        paper_id = reference
    return tags.unmark(tag, paper_id, kind)


def recommend_for_tags(
    recommender: PaperIndex,
    tags: TagStore,
    names: Sequence[str],
    exclude_seen: Sequence[str] = (),
    not_: Sequence[str] = (),
    candidates: Sequence[int] | None = None,
    **ranking,
) -> list[Recommendation]:
    """Papers like the papers of these tags (all of them as one profile), the tagged papers left
    out, unlike the papers marked not interested for them (and those in `not_`), without the papers
    marked seen for the tags in `exclude_seen`; `candidates`: rank only these rows. Tagged IDs this
    index no longer holds (a rebuild dropped them) are passed over. Ranked as `PaperIndex.like`
    ranks: `ranking` its RankingRequest, or its keywords (k, mode, why, ...)."""
    names = list(dict.fromkeys(check_tag(name) for name in names))
    if not names:
        raise InputError("no tag given: name at least one tag")
    tagged = [paper for name in names for paper in tags.papers(name)]
    if not tagged:
        left_out = tags.left_out(names[0]) if len(names) == 1 else {}
        if left_out:  # a collection none of whose items became a paper
            raise PaperNotFoundError(
                f"collection '{names[0]}' holds no papers ({items_note(0, left_out)}): give its"
                " items titles in the library and build again, or tag some papers"
            )
        raise PaperNotFoundError(
            f"tag '{names[0]}' holds no papers: tag some first"
            if len(names) == 1
            else f"tags {', '.join(names)} hold no papers: tag some first"
        )
    held = [paper for paper in dict.fromkeys(tagged) if recommender.row_of_id(paper) is not None]
    if not held:
        raise PaperNotFoundError(
            f"none of the papers tagged {', '.join(names)} is in this index (rebuilt without them?)"
        )
    held_set = set(held)
    negatives = [paper for name in names for paper in tags.marked(name, "not")]
    negatives = [
        paper
        for paper in dict.fromkeys(negatives)
        if paper not in held_set and recommender.row_of_id(paper) is not None
    ]
    seen = [
        paper
        for name in dict.fromkeys(check_tag(name) for name in exclude_seen)
        for paper in tags.marked(name, "seen")
    ]
    return recommender.like(
        *held,
        not_=[*negatives, *not_],
        exclude=seen,
        candidates=candidates,
        **ranking,
    )
