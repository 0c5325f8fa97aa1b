"""A feed for each tag: the papers added to the index since the tag's feed was last read (or
since a date), ranked by the tag's profile as `like --tag` ranks them, without the tag's own
papers and those it marked seen or not interested.

When a paper arrived is kept in the tags database beside the index (reading/tags.py): each time
a feed is made, every part of the live index not recorded yet (the base version a build made,
each segment `papers add` made) has its papers recorded, those not recorded before, with when
the part was made (its manifest's time on disk) and an arrival generation, a counter that grows
by one with each new part recorded. A paper keeps its first arrival: a rebuild or a compaction
makes only the papers that were not in the index before new. `since` "last" lists the papers of
later generations than the tag's last read (a tag never read: those whose part was made after
its first paper was tagged); a date lists those whose part was made on or after it. A feed's
read is recorded only once it was written (`mark_read`), and only for a feed since the last read:
each reader (the digest `papers feed` writes, the web app, one named with `--reader`) has its own
place, and a look since a date moves none.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InputError
from ..index.layout import MANIFEST
from ..query.paper_index import PaperIndex, Recommendation
from .tags import DIGEST, TagStore, check_tag, recommend_for_tags

LAST = "last"
#: The web app's place in each feed (`papers serve`): its own, apart from the digest's.
WEB = "web"
# A feed scores each new paper against each seed of the profile (no candidate pool): past this many
# new papers that is the work of ranking the whole index, which `like` does with its pool instead.
MOST_NEW = 200_000


@dataclass(frozen=True)
class Feed:
    """A feed: its ranked papers, how many papers were new, and what to record once it is read."""

    tags: tuple[str, ...]
    since: str  # "last" or the date given
    after: str | None  # when the tags' feeds were last read (ISO, UTC), None if never
    new: int  # papers new since then, the tags' own and those marked for them left out
    results: list[Recommendation]
    generation: int  # the arrival generation the feed covers
    made: float  # when the feed was made (seconds since the epoch)
    reader: str = DIGEST  # whose place in the feed it was read from
    unseeded: bool = False  # its tags hold no paper yet: nothing ranks for them

    @property
    def moves(self) -> bool:
        """Whether reading this feed moves its reader's place: a feed since the last read does,
        a look since a date does not."""
        return self.since == LAST


def parse_since(since: str | None) -> float | None:
    """None for "last" (or nothing given), else a date or date and time (ISO 8601; UTC unless
    it says otherwise) as seconds since the epoch."""
    if since is None or since.strip() == LAST:
        return None
    try:
        when = dt.datetime.fromisoformat(since.strip())
    except ValueError:
        raise InputError(
            f"since '{since[:40]}' is neither '{LAST}' nor a date such as 2026-12-01"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    try:
        when.astimezone(dt.timezone.utc)
    except OverflowError:  # before the year 1 in UTC (0001-01-01T00:00+14:00): as early as can be
        when = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def index_parts(recommender: PaperIndex) -> list[tuple[str, float, Sequence[str]]]:
    """(name, when made, IDs) of each part of an opened index: its base version and its segments."""
    parts = getattr(recommender, "parts", [recommender])
    names = getattr(recommender, "part_names", [None])
    found = []
    for name, part in zip(names, parts):
        folder = part.stored.folder
        # The base's name is its version folder (a rebuild makes a new one); a segment's is unique.
        label = folder.name if name in (None, "base") else f"segment:{name}"
        found.append((label, (Path(folder) / MANIFEST).stat().st_mtime, part.ids))
    return found


def _rows_of(recommender: PaperIndex, ids: Sequence[str]) -> list[int]:
    """The rows of these IDs in the base and every segment (removed ones are left out by `like`)."""
    wanted = sorted(set(ids))
    parts = getattr(recommender, "parts", [recommender])
    starts = getattr(recommender, "starts", [0])
    rows: list[int] = []
    for part, start in zip(parts, list(starts)):
        rows.extend(int(start) + int(row) for row in part.keys.rows_named(wanted))
    return rows


def feed(
    recommender: PaperIndex,
    tags: TagStore,
    names: Sequence[str],
    since: str | None = LAST,
    k: int = 10,
    mode: str = "hybrid",
    reader: str = DIGEST,
) -> Feed:
    """The papers new for these tags (as one profile), best first, each with the seeds it is there
    because of: with `since` "last", new since this reader last read them (each reader of a feed,
    the digest, the web app, has its own place). Records the index's parts' arrivals; records no
    read (`mark_read` does, once written). Tags that hold no paper yet make an empty feed
    (`Feed.unseeded`): nothing ranks for them.
    """
    names = tuple(dict.fromkeys(check_tag(name) for name in names))
    if not names:
        raise InputError("no tag given: name at least one tag")
    made = time.time()
    after_date = parse_since(since)
    generation = tags.record_arrivals(index_parts(recommender))
    if after_date is None:
        # Several tags: what is new for any of them. A tag never read: what arrived since it was
        # made (its first paper tagged); `since` a date reaches further back.
        arrived_set: set[str] = set()
        starts = []
        for name in names:
            read = tags.feed_read(name, reader)
            if read is not None:
                arrived_set.update(tags.arrived(after_generation=read[0]))
                starts.append(read[1])
            else:
                begun = tags.first_tagged(name)
                if begun is not None:
                    arrived_set.update(tags.arrived(since=begun))
                    starts.append(begun)
        arrived = sorted(arrived_set)
        after = _iso(min(starts)) if starts else None
    else:
        arrived = tags.arrived(since=after_date)
        after = _iso(after_date)
    shown_since = LAST if after_date is None else str(since).strip()
    if len(arrived) > MOST_NEW:
        raise InputError(
            f"{len(arrived):,} papers arrived since {after}: more than a feed ranks "
            f"({MOST_NEW:,}); give a later date, or use `like` for the tag"
        )
    left_out = {
        paper
        for name in names
        for paper in [*tags.papers(name), *tags.marked(name, "seen"), *tags.marked(name, "not")]
    }
    # `papers remove`d from a segmented index
    removed: set[int] = getattr(recommender, "removed_rows", set)()
    rows = [
        row
        for row in _rows_of(recommender, [paper for paper in arrived if paper not in left_out])
        if row not in removed
    ]
    if not any(tags.papers(name) for name in names):
        return Feed(names, shown_since, after, 0, [], generation, made, reader, unseeded=True)
    results = recommend_for_tags(
        recommender, tags, names, k=k, mode=mode, why=True, exclude_seen=names, candidates=rows
    )
    results = _with_the_one_seed(recommender, tags, names, results)
    return Feed(names, shown_since, after, len(rows), results, generation, made, reader)


def _with_the_one_seed(
    recommender: PaperIndex, tags: TagStore, names: Sequence[str], results: list[Recommendation]
) -> list[Recommendation]:
    """A profile of one paper is one query, whose results name no seed: each is there because of
    it."""
    held = {
        row
        for name in names
        for row in map(recommender.row_of_id, tags.papers(name))
        if row is not None
    }
    if len(held) != 1 or not results:
        return results
    import numpy as np

    seed = held.pop()
    handle = recommender.papers_at([seed])[0].handle or recommender.id_of(seed)
    rows = [seed]
    for result in results:
        row = recommender.row_of_id(result.paper.id)
        if row is None:  # not in this index: no cosine to give
            return results
        rows.append(row)
    vectors = recommender.vectors_at(rows)
    vectors = np.asarray(vectors, dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cosines = vectors[1:] @ vectors[0]
    return [
        replace(result, because=((recommender.id_of(seed), handle, float(cosine)),))
        for result, cosine in zip(results, cosines.tolist())
    ]


def mark_read(tags: TagStore, made: Feed) -> bool:
    """Record that a feed since the last read was read: its reader's next `last` feed of its tags
    lists only papers newer than it. A look since a date moves nothing. Returns whether the place
    moved."""
    if not made.moves:
        return False
    tags.mark_feed_read(made.tags, made.generation, made.made, made.reader)
    return True


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def mark_read_up_to(
    recommender: PaperIndex, tags: TagStore, names: Sequence[str], generation: int, reader: str
) -> None:
    """Record that a reader read these tags' feeds as they stood at an arrival generation (one
    shown earlier, as the web app's "Mark all read" sends it back): papers that arrived after it
    stay new."""
    names = [check_tag(name) for name in names]
    current = tags.record_arrivals(index_parts(recommender))
    if not 0 <= generation <= current:
        raise InputError(f"feed generation {generation} is not one shown: reload the feed")
    tags.mark_feed_read(names, generation, time.time(), reader)
