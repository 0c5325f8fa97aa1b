"""Papers added to a live index without rebuilding it: segments, tombstones and compaction.

    indexes/<name>/
        CURRENT, v-<build>/ ...   the base: a complete build (writer.py)
        SEGMENTS                  the segment list, replaced atomically (files.replacing):
                                  {"base": "v-<build>", "segments": [{"name", "papers"}],
                                   "tombstones": {"base" or segment name: [IDs removed]},
                                   "aliases": {ID of a record added as the same paper: kept ID}}
        segments/s-<id>/          one segment: a small index of its own (CURRENT, v-*/), built
                                  by build.build_index from the added papers only

`papers add` encodes only the new papers, builds them as a segment beside the base and then
publishes the new list with one rename: a reader sees the old set or the new one, never half.
A list naming another base than the live one is stale (a build replaced the base): it is read
as empty, unless it keeps the live base's list under "previous" (a compaction about to swap
CURRENT). `papers remove` and `papers add --sync` add tombstones. A compaction is a build of the
live papers of one list (base and segments, tombstones left out) beside the index, in
segments/compacting/, with every guarantee of a build, while adds go on; it then swaps the new
base in under the lock (`_swap_in`). The segments are removed after, each only once no reader
holds it (its manifest locked exclusively, as writer.py removes versions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import files
from ..corpus.papers import Paper, scan_papers
from ..errors import (
    IndexBusyError,
    IndexCorruptError,
    InputError,
    PaperNotFoundError,
    shell_command,
)
from .home import display_name, missing_index, resolve_index_dir
from .layout import (
    CURRENT,
    PAPERS,
    SEGMENT_FOLDER,
    SEGMENTS,
    VOCABULARY,
    remove_tree,
)
from .stored import StoredIndex, is_index, live_version, open_stored, unpinned

# Past this share of the base's papers in segments, the next `add` compacts the index: lookups
# then search one index again. Ten segments cost at most 1.2x a compacted index
# (docs/performance.md).
COMPACT_SHARE = 0.10
BASE = "base"  # the base's name in the tombstones


@dataclass(frozen=True)
class SegmentSet:
    """What a reader searches: the base version, the segments in order, the IDs removed from
    each."""

    base: str | None
    segments: tuple[str, ...] = ()
    counts: tuple[int, ...] = ()
    tombstones: dict[str, frozenset[str]] = field(default_factory=dict)
    # The IDs of records `papers add` kept as the same paper as one of the index: {alias: kept}.
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def added(self) -> int:
        return sum(self.counts)

    def removed(self, part: str) -> frozenset[str]:
        return self.tombstones.get(part, frozenset())

    def alias_of(self, reference: str) -> str | None:
        """The kept ID an alias added by `papers add` names (any case), if it is one."""
        folded = reference.strip().casefold()
        return next(
            (kept for alias, kept in sorted(self.aliases.items()) if alias.casefold() == folded),
            None,
        )

    def to_dict(self) -> dict:
        listed: dict[str, object] = {
            "base": self.base,
            "segments": [
                {"name": name, "papers": count} for name, count in zip(self.segments, self.counts)
            ],
            "tombstones": {
                part: sorted(ids) for part, ids in sorted(self.tombstones.items()) if ids
            },
        }
        if self.aliases:
            listed["aliases"] = {alias: self.aliases[alias] for alias in sorted(self.aliases)}
        return listed

    def changed(self, **changes) -> SegmentSet:
        return dataclasses.replace(self, **changes)


def read_segments(index_dir: Path) -> SegmentSet:
    """The published segment list of the live base (empty if none, or if it is stale)."""
    path = Path(index_dir) / SEGMENTS
    live = live_version(Path(index_dir))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SegmentSet(live)
    except (OSError, ValueError) as error:
        raise IndexCorruptError(
            f"index file {path} cannot be read ({error}): run "
            f"`papers build --compact --index {Path(index_dir).name}`"
        ) from None
    if (
        isinstance(data, dict)
        and data.get("base") != live
        and isinstance(data.get("previous"), dict)
    ):
        # A compaction about to swap CURRENT: until it does, the live base's list is this one.
        data = data["previous"]
    if not isinstance(data, dict) or data.get("base") != live:
        return SegmentSet(live)
    try:
        names = tuple(str(entry["name"]) for entry in data["segments"])
        counts = tuple(int(entry["papers"]) for entry in data["segments"])
        tombstones = {
            str(part): frozenset(str(i) for i in ids) for part, ids in data["tombstones"].items()
        }
        aliases = {str(alias): str(kept) for alias, kept in data.get("aliases", {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise IndexCorruptError(
            f"index file {path} is damaged: run "
            f"`papers build --compact --index {Path(index_dir).name}`"
        ) from None
    if any("/" in name or not name.startswith("s-") for name in names):
        raise IndexCorruptError(
            f"index file {path} names a segment outside {SEGMENT_FOLDER}/: run "
            f"`papers build --compact --index {Path(index_dir).name}`"
        )
    return SegmentSet(live, names, counts, tombstones, aliases)


def reader_version(index_dir: Path) -> str | None:
    """The live version and segment list as one short string (two small reads): a long-running
    reader (`papers serve`) reopens the index when it changes, after an add or a remove as after a
    build.
    """
    live = live_version(Path(index_dir))
    try:
        listed = (Path(index_dir) / SEGMENTS).read_bytes()
    except OSError:
        return live
    import hashlib

    return f"{live} {hashlib.sha256(listed).hexdigest()[:16]}"


def segment_dir(index_dir: Path, name: str) -> Path:
    return Path(index_dir) / SEGMENT_FOLDER / name


def _publish(index_dir: Path, segments: SegmentSet, previous: SegmentSet | None = None) -> None:
    """Replace the segment list in one rename (the lock is held). With `previous`, the list also
    keeps the live base's list, for readers until a compaction swaps CURRENT to `segments.base`."""
    listed = segments.to_dict()
    if previous is not None:
        listed["previous"] = previous.to_dict()
    with files.replacing(Path(index_dir) / SEGMENTS) as handle:
        handle.write(json.dumps(listed, indent=1, sort_keys=True) + "\n")
    descriptor = os.open(index_dir, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def build_lock(index_dir: Path, wait: bool):
    """The index's build lock (writer.build_lock), imported when taken: a lookup, which imports this
    module, never loads the writer."""
    from .writer import build_lock as lock

    return lock(index_dir, wait=wait)


def _holders(index_dir: Path, segments: SegmentSet, ids: Iterable[str]) -> dict[str, list[str]]:
    """For each ID, the parts that hold it live (tombstoned copies left out), by binary search in
    each part's sorted IDs: an add reads no list of every ID of the base."""
    from .keys import stored_keys

    parts = {
        BASE: Path(index_dir),
        **{name: segment_dir(index_dir, name) for name in segments.segments},
    }
    found: dict[str, list[str]] = {paper_id: [] for paper_id in ids}
    for part, folder in parts.items():
        removed = segments.removed(part)
        with open_stored(folder) as stored:
            keys = stored_keys(stored)
            for paper_id, holders in found.items():
                if paper_id not in removed and keys.row_of_id(paper_id) is not None:
                    holders.append(part)
            del keys
    return found


@dataclass(frozen=True)
class AddReport:
    index_dir: Path
    added: int  # papers in the new segment
    skipped: int  # papers the index already held (same ID)
    segment: str | None
    encoded: int
    compacted: bool
    seconds: float
    # A compaction started in the background by this add: its process ID (None: none started).
    compacting: int | None = None
    # Set when the segments passed their share but a compaction was running already.
    compaction_running: bool = False
    removed: int = 0  # papers removed as gone from their source (`sync`)
    replaced: int = 0  # papers whose text changed in their source, replaced (`sync`)
    created: bool = False  # there was no index: this add built it from its inputs


def add_papers(
    inputs: Iterable[str | os.PathLike],
    index: str | os.PathLike | None = None,
    wait: bool = True,
    progress: Callable[[int, int], None] | None = None,
    notice: Callable[[str], None] | None = None,
    compact_share: float | None = COMPACT_SHARE,
    background: bool = False,
    sync: bool = False,
) -> AddReport:
    """Add the papers of `inputs` to an index as a segment: only they are encoded, the base is not
    rewritten. Papers whose ID the index already holds live are skipped, so adding a file twice adds
    nothing twice. Past `compact_share` of the base in segments the index is compacted: here, or
    with `background` by a process of its own that this add does not wait for (`compact`).
    With `sync`, the index's papers from these inputs are made exactly theirs: the papers an
    earlier build or add read from the same files (their recorded source) that the files no
    longer hold are removed (tombstones), as a source rebuilt elsewhere (a Zotero library, an
    exported .bib) would have it."""

    started = time.perf_counter()
    index_dir = resolve_index_dir(index)
    input_names = [str(path) for path in inputs]
    if not is_index(index_dir):
        return _first_build(input_names, index_dir, progress, notice, started)
    papers = _read_added(input_names, sync, notice)
    failure = failed_compaction(index_dir)
    if failure is not None and notice is not None:
        notice(
            f"the last background compaction failed ({failure}): run `"
            + shell_command("papers", "build", "--compact", "--index", display_name(index_dir))
            + "`"
        )
    from .checks import synced_sources  # here: a lookup plans no add

    with build_lock(index_dir, wait=wait):
        current = read_segments(index_dir)
        _remove_unlisted(index_dir, current)
        ours = synced_sources(input_names) if sync else None
        report, current = _add_segment(index_dir, current, papers, ours, progress, notice)
    compacted, compacting, running = False, None, False
    if (
        compact_share is not None
        and current.segments
        and current.added > compact_share * _base_count(index_dir)
    ):
        if background:
            compacting = start_compaction(index_dir)
            running = compacting is None
        else:
            compact(index_dir, notice=notice)
            compacted = True
    return dataclasses.replace(
        report,
        compacted=compacted,
        seconds=time.perf_counter() - started,
        compacting=compacting,
        compaction_running=running,
    )


def _first_build(input_names, index_dir: Path, progress, notice, started: float) -> AddReport:
    """No index yet (a routine's first day): the add builds it, as `papers build` would (and
    refuses a folder of something else as a build does)."""
    from .build import build_index

    made = build_index(input_names, index=index_dir, progress=progress, notice=notice)
    return AddReport(
        made.index_dir,
        made.papers,
        0,
        None,
        made.encoded,
        False,
        time.perf_counter() - started,
        created=True,
    )


def _read_added(
    input_names: list[str], sync: bool, notice: Callable[[str], None] | None
) -> list[Paper]:
    """The papers of an add's inputs. An empty file (a day's fetch with nothing new) adds nothing,
    with a notice; a sync still reads it as a source emptied."""
    empty = [] if sync else [name for name in input_names if _is_empty_file(name)]
    for empty_name in empty:
        if notice is not None:
            notice(f"{empty_name} is empty: nothing to add from it")
    read = [name for name in input_names if name not in empty]
    return list(scan_papers(read)) if read else []


def _add_segment(
    index_dir: Path, current: SegmentSet, papers: list[Paper], ours, progress, notice
) -> tuple[AddReport, SegmentSet]:
    """Under the index's lock: plan the add of `papers` against the live index `current` (with a
    sync, `ours` tells the sources it makes exactly theirs), build the new papers as a segment and
    publish it with the tombstones of the papers replaced or gone. Returns the add's report and the
    index's segments after it."""
    from .checks import IndexPapers, gone_from_sources, plan_add  # here: a lookup plans no add

    parts = [(BASE, Path(index_dir), current.removed(BASE))] + [
        (name, segment_dir(index_dir, name), current.removed(name)) for name in current.segments
    ]
    with contextlib.ExitStack() as stack:
        plan = plan_add(index_dir, papers, IndexPapers(parts, stack), ours)
    gone = gone_from_sources(parts, ours, papers) if ours is not None else {}
    for part, paper_id in plan.replaced:
        gone.setdefault(part, set()).add(paper_id)
    aliases = {**current.aliases, **plan.aliases}
    if not (plan.new or gone or aliases != current.aliases):
        return AddReport(index_dir, 0, plan.skipped, None, 0, False, 0.0), current
    name: str | None = None
    built = None
    if plan.new:
        name, built = _build_segment(index_dir, plan.new, index_dir, progress, notice)
    # The segment's papers: a build keeps the same paper twice in the input once.
    kept = built.papers if built else 0
    updated = _with_segment(current, name, kept, gone, aliases)
    _publish(index_dir, updated)
    report = AddReport(
        index_dir,
        kept,
        plan.skipped,
        name,
        built.encoded if built else 0,
        False,
        0.0,
        removed=sum(len(ids) for ids in gone.values()) - len(plan.replaced),
        replaced=len(plan.replaced),
    )
    return report, updated


def _with_segment(current: SegmentSet, name: str | None, kept: int, gone: dict, aliases: dict):
    """`current` with the segment `name` of `kept` papers (None: no segment), the papers `gone`
    tombstoned and its aliases `aliases`."""
    tombstones = {part: set(ids) for part, ids in current.tombstones.items()}
    for part, ids in gone.items():
        tombstones.setdefault(part, set()).update(ids)
    return SegmentSet(
        current.base,
        current.segments + ((name,) if name else ()),
        current.counts + ((kept,) if name else ()),
        {part: frozenset(ids) for part, ids in tombstones.items() if ids},
        aliases,
    )


def _is_empty_file(name: str) -> bool:
    try:
        return files.is_plain_file(name) and os.path.getsize(name) == 0
    except OSError:
        return False


def _build_segment(
    index_dir: Path, papers: Iterable[Paper], base_dir: Path, progress=None, notice=None
):
    """Build `papers` as a new segment folder of the index, its TF-IDF rows in the vocabulary of
    the base at `base_dir` (the live one, or a compaction's new base); returns its name and the
    build's report. Nothing is published."""
    from .build import build_index

    with open_stored(base_dir) as base:
        manifest = base.manifest
        terms = _base_terms(base)
    name = f"s-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"
    folder = segment_dir(index_dir, name)
    folder.parent.mkdir(exist_ok=True)
    papers = list(papers)
    try:
        built = build_index(
            [],
            own_papers=lambda: (paper for paper in papers),  # each with its own source
            index=folder,
            model=manifest["model"],
            chunking=_chunking(manifest),
            precision=manifest.get("precision"),
            progress=progress,
            notice=notice,
            built_by="add",
            export_query_encoder=bool(manifest.get("query_encoder")),
            lexical_terms=terms,
        )
    except BaseException:
        remove_tree(folder)
        raise
    return name, built


def index_aliases(index_dir: Path, listed: SegmentSet) -> dict[str, str]:
    """Every alias of the index, {other ID: kept ID}: the base's and each segment's (aliases.json)
    and those `papers add` kept in the list."""
    from .keys import ALIASES

    found: dict[str, str] = {}
    for folder in [Path(index_dir)] + [segment_dir(index_dir, name) for name in listed.segments]:
        with open_stored(folder) as stored:
            if stored.has(ALIASES):
                found.update({str(a): str(k) for a, k in stored.load_json(ALIASES).items()})
    return {**found, **listed.aliases}


def _segment_papers(index_dir: Path, name: str) -> list[Paper]:
    with open_stored(segment_dir(index_dir, name)) as stored:
        with open(stored.path(PAPERS), encoding="utf-8") as rows:
            return [Paper.from_dict(json.loads(line)) for line in rows]


def _base_terms(base: StoredIndex):
    """The base's vocabulary and IDF, in which a segment's TF-IDF rows are weighed: one query vector
    then scores base and segments alike, and a segment's papers weigh as after a rebuild, but for
    the base's document frequencies not counting the added papers (bounded by their share,
    COMPACT_SHARE).
    """
    import math

    from .lexical import FixedTerms

    count = int(base.manifest["paper_count"])
    return FixedTerms(
        list(base.load_json(VOCABULARY)),
        base.load_array("lexical/idf.npy"),
        math.log((1 + count) / 2) + 1,
    )


def _chunking(manifest: dict):
    from ..embed.windows import Chunking

    return Chunking.from_dict(
        {key: value for key, value in manifest["chunking"].items() if key != "max_tokens"}
    )


def _base_count(index_dir: Path) -> int:
    with open_stored(index_dir) as stored:
        return int(stored.manifest["paper_count"])


def remove_papers(
    ids: Sequence[str], index: str | os.PathLike | None = None, wait: bool = True
) -> int:
    """Leave tombstones for these IDs (in the base or a segment); returns how many papers were
    removed. An ID the index does not hold live is refused, and then nothing is removed."""
    index_dir = resolve_index_dir(index)
    if not is_index(index_dir):
        raise missing_index(index_dir)
    wanted = list(dict.fromkeys(paper_id.strip() for paper_id in ids if paper_id.strip()))
    if not wanted:
        raise InputError("no paper ID given: name the IDs of the papers to remove")
    with build_lock(index_dir, wait=wait):
        current = read_segments(index_dir)
        held = _holders(index_dir, current, wanted)
        unheld = [paper_id for paper_id in wanted if not held[paper_id]]
        if unheld:  # another ID of a paper (an alias), resolved as lookups resolve it
            named = _aliased(index_dir, current, unheld)
            held.update(_holders(index_dir, current, set(named.values())))
            held.update({paper_id: held[kept] for paper_id, kept in named.items()})
            wanted = [named.get(paper_id, paper_id) for paper_id in wanted]
        tombstones = {part: set(current.removed(part)) for part in (BASE, *current.segments)}
        for paper_id in dict.fromkeys(wanted):
            parts = held[paper_id]
            if not parts:
                raise PaperNotFoundError(
                    f"no paper '{paper_id}' in index {index_dir}: nothing was removed "
                    "(see `papers list` for the IDs it holds)"
                )
            for part in parts:
                tombstones[part].add(paper_id)
        _publish(
            index_dir,
            SegmentSet(
                current.base,
                current.segments,
                current.counts,
                {part: frozenset(ids) for part, ids in tombstones.items() if ids},
                current.aliases,
            ),
        )
    return len(dict.fromkeys(wanted))


def _aliased(index_dir: Path, current: SegmentSet, references: Sequence[str]) -> dict[str, str]:
    """The kept ID each reference names as another ID of a paper: "arXiv:ID" for the arXiv ID, or
    an alias (any case) of the base, a segment or `papers add` (query/lookups.py resolves so)."""
    from ..corpus.identifiers import bare_arxiv_id

    folded = {alias.casefold(): kept for alias, kept in index_aliases(index_dir, current).items()}
    named = {}
    for reference in references:
        bare = bare_arxiv_id(reference)
        kept = bare if bare != reference else None
        if kept is None or not _holders(index_dir, current, [kept])[kept]:
            kept = folded.get(reference.casefold()) or folded.get(bare.casefold())
        if kept is not None:
            named[reference] = kept
    return named


def live_papers(index_dir: Path, listed: SegmentSet | None = None) -> Generator[Paper, None, None]:
    """Every live paper of the index: the base's and each segment's of `listed` (default: the
    published list), tombstones left out (a compaction's input)."""
    current = read_segments(index_dir) if listed is None else listed
    parts = [(BASE, Path(index_dir))] + [
        (name, segment_dir(index_dir, name)) for name in current.segments
    ]
    for part, folder in parts:
        removed = current.removed(part)
        with open_stored(folder) as stored, open(stored.path(PAPERS), encoding="utf-8") as rows:
            if part == BASE and stored.folder.name != current.base:
                # A build replaced the base since the list was read: this compaction is moot.
                raise IndexBusyError(
                    f"index {index_dir} was rebuilt during the compaction: nothing to compact"
                )
            for line in rows:
                paper = Paper.from_dict(json.loads(line))
                if paper.id not in removed:
                    yield paper


# The compaction's own folder inside segments/: locked (flock on the folder) while a compaction
# runs, so two never do; it holds the new base being built (an index of its own, resumable like
# any build) and the log of a compaction running in the background.
COMPACTING = "compacting"
COMPACTION_LOG = "log"


class CompactionRunning(IndexBusyError):
    """Another compaction of this index is running."""


@contextlib.contextmanager
def _compaction_lock(index_dir: Path, wait: bool) -> Generator[Path, None, None]:
    folder = Path(index_dir) / SEGMENT_FOLDER / COMPACTING
    while True:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(descriptor)
            raise CompactionRunning(
                f"index {index_dir} is being compacted by another process: wait for it to finish"
            ) from None
        if os.fstat(descriptor).st_nlink:
            break
        os.close(descriptor)  # the compaction we waited for removed the folder: again
    try:
        yield folder
    finally:
        os.close(descriptor)


def compaction_running(index_dir: Path) -> bool:
    """Whether a compaction of this index runs now (its folder locked)."""
    folder = Path(index_dir) / SEGMENT_FOLDER / COMPACTING
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def compact(
    index: str | os.PathLike | None = None,
    wait: bool = True,
    progress=None,
    notice=None,
    on_phase=None,
):
    """Merge the segments into a new base, as Lucene merges segments: the live papers of the
    published list (their vectors from the cache) are built into a new base beside the index,
    while adds and removes go on; then, under the index's lock for a moment, the new base goes
    live with the segments added and the tombstones left since (readers see the old set or the
    new one). One compaction at a time (`wait`: wait for a running one); a stopped one resumes."""
    from .build import build_index
    from .map_layout import MANIFEST_KEY as LAYOUT_KEY
    from .writer import remove_old_versions

    index_dir = resolve_index_dir(index)
    if not is_index(index_dir):
        raise missing_index(index_dir)
    with _compaction_lock(index_dir, wait) as folder:
        with build_lock(index_dir, wait=True):
            snapshot = read_segments(index_dir)
        with open_stored(index_dir) as base:
            manifest = base.manifest
        staging = folder / "index"
        report = build_index(
            [],
            index=staging,
            model=manifest["model"],
            chunking=_chunking(manifest),
            precision=manifest.get("precision"),
            progress=progress,
            notice=notice,
            on_phase=on_phase,
            own_papers=lambda: live_papers(index_dir, snapshot),
            export_query_encoder=bool(manifest.get("query_encoder")),
            map_layout=bool(manifest.get(LAYOUT_KEY)),  # the new base keeps the index's setting
            aliases=index_aliases(index_dir, snapshot),
        )
        with build_lock(index_dir, wait=True):
            _swap_in(index_dir, staging, snapshot)
            remove_old_versions(index_dir)
            remove_tree(folder)
            _remove_unlisted(index_dir, read_segments(index_dir))
    return dataclasses.replace(report, index_dir=index_dir)


def _swap_in(index_dir: Path, staging: Path, snapshot: SegmentSet) -> None:
    """Make the compacted base live (the index's lock is held): the segments published since the
    snapshot stay segments of it, and the papers removed since get tombstones in it."""
    current = read_segments(index_dir)
    merged = len(snapshot.segments)
    if current.base != snapshot.base or current.segments[:merged] != snapshot.segments:
        raise IndexBusyError(
            f"index {index_dir} was rebuilt during the compaction: nothing was changed"
        )
    removed_since = frozenset().union(
        *(current.removed(part) - snapshot.removed(part) for part in (BASE, *snapshot.segments))
    )
    version = live_version(staging)
    if version is None:
        raise corrupt_staging(staging)
    # A segment weighs its TF-IDF rows in its base's vocabulary: those added during the
    # compaction are built again in the new base's (few papers, their vectors in the cache).
    later, tombstones = [], {BASE: removed_since}
    for name in current.segments[merged:]:
        again, _ = _build_segment(index_dir, _segment_papers(index_dir, name), staging)
        later.append(again)
        tombstones[again] = current.removed(name)
    pointer = (staging / CURRENT).read_text(encoding="utf-8")
    os.rename(staging / version, Path(index_dir) / version)
    following = SegmentSet(
        version,
        tuple(later),
        current.counts[merged:],
        {part: ids for part, ids in tombstones.items() if ids},
        {alias: kept for alias, kept in current.aliases.items() if alias not in snapshot.aliases},
    )
    # Readers keep the old list until CURRENT names the new base, then read the new one.
    _publish(index_dir, following, previous=current)
    _listed_both()
    with files.replacing(Path(index_dir) / CURRENT) as handle:
        handle.write(pointer)
    _publish(index_dir, following)


def _listed_both() -> None:
    """The list names the new base and keeps the old one's, CURRENT not yet swapped (a hook for
    the crash tests)."""


def corrupt_staging(staging: Path) -> Exception:
    return IndexCorruptError(f"the compacted index {staging} has no live version: compact again")


def compaction_command(index_dir: Path) -> list[str]:
    """The command a background compaction runs (a hook for the tests' launcher)."""
    import sys

    return [
        sys.executable,
        "-m",
        "recommender",
        "build",
        "--compact",
        "--quiet",
        "--index",
        str(index_dir),
    ]


def start_compaction(index_dir: Path) -> int | None:
    """Start `papers build --compact` as a process of its own that outlives this one, detached
    from it (`start_detached`); its output goes to segments/compacting/log. None if a compaction
    is running already, else its process ID."""
    from ..detached import start_detached  # only an add that compacts needs it, never a lookup

    if compaction_running(index_dir):
        return None
    folder = Path(index_dir) / SEGMENT_FOLDER / COMPACTING
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / COMPACTION_LOG
    if files.is_plain_file(log_path):
        log_path.unlink()
    # Its absolute path: a relative one without a slash ("stored") would be read as the name of an
    # index in the home.
    return start_detached(compaction_command(Path(os.path.abspath(index_dir))), log_path)


def failed_compaction(index_dir: Path) -> str | None:
    """The last line a background compaction that failed wrote, if one did (its log is removed
    when a compaction succeeds)."""
    log_path = Path(index_dir) / SEGMENT_FOLDER / COMPACTING / COMPACTION_LOG
    if compaction_running(index_dir) or not files.is_plain_file(log_path):
        return None
    lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    # Its failure is the CLI's one line ("Error: ..."), or a traceback's last; warnings are not.
    errors = [line.removeprefix("Error: ") for line in lines if line.startswith("Error: ")]
    if errors:
        return errors[-1]
    return lines[-1] if any(line.startswith("Traceback") for line in lines) else None


def _remove_unlisted(index_dir: Path, current: SegmentSet) -> None:
    """Remove what the live list does not name (the lock is held): the segments of a stale list, and
    those of an `add` killed before it published; a segment a reader still holds stays for later."""
    listed = set(current.segments)
    if (
        not current.segments
        and not current.tombstones
        and not current.aliases
        and (Path(index_dir) / SEGMENTS).is_file()
    ):
        (Path(index_dir) / SEGMENTS).unlink(missing_ok=True)
    folder = Path(index_dir) / SEGMENT_FOLDER
    if not folder.is_dir() or folder.is_symlink():
        return
    for path in sorted(folder.iterdir()):
        if path.name in listed:
            continue
        if (
            path.name.startswith(".s-")
            and path.name.endswith(".jsonl")
            and files.is_plain_file(path)
        ):
            path.unlink(missing_ok=True)  # the input of a killed add
        elif (
            path.name.startswith("s-") and path.is_dir() and not path.is_symlink() and _unheld(path)
        ):
            remove_tree(path)
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty


def _unheld(segment: Path) -> bool:
    """Whether no reader holds the segment's version (its manifest lockable exclusively)."""
    try:
        live = live_version(segment)
    except Exception:  # a damaged or half-made segment: nobody can have opened it
        return True
    if live is None:
        return True
    with unpinned(segment / live) as free:
        return free is not False
