"""A 2-D map of the collection: every paper a point, near its similar papers, coloured by session.

The projection is t-SNE (openTSNE; index/map_layout.py), UMAP or PCA, seeded; the
colours are the sessions `papers sessions --n N` would plan. Each point carries
its paper's related-work list (the k papers `papers related-work` lists) and,
for the explorable HTML map, the zoom level from which its name fits on screen
(names never overlap each other, points or session labels at the zoom they
appear; more of them appear as one zooms in). Written by render/map.py as one
self-contained HTML file or as a PNG.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..corpus.text import shorten
from ..errors import InputError
from ..index.map_layout import project_2d, stored_layout, stored_projection
from ..query.paper_index import PaperIndex

if TYPE_CHECKING:
    from ..corpus.papers import Paper
    from .related import RelatedList

WIDTH, HEIGHT, MARGIN = 1100, 760, 28
TOP = 64  # title and caption above the map (PNG)
POINT_RADIUS = 5.0  # px, up to a few hundred papers; smaller above, so crowds stay readable


def point_radius(count: int) -> float:
    return round(float(min(POINT_RADIUS, max(1.5, POINT_RADIUS * (300 / max(count, 1)) ** 0.5))), 1)


# Papers are named on the map up to this many; above it, only on hover.
NAMED_POINTS = 150
NAME_WIDTH = 28  # characters of a paper name on the map
FONT = 11.0  # px, paper names
GROUP_FONT = 14.0  # px, session labels
CHAR_WIDTH = 0.6  # average glyph width per px of font size (DejaVu Sans), for label boxes
BOLD_WIDTH = 0.68
# Okabe-Ito then Tableau: distinguishable, colour-blind friendly first.
NEIGHBOURS = 5  # related papers carried per point (as `papers related-work -k 5`)
# Zoom levels of the HTML map (screen px per map unit); a name shown from level i is shown at every
# level above.
ZOOM_LEVELS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0)
SCREEN_RADIUS = (
    4.0  # px: a point of the HTML map at every zoom, so it can be clicked at 2,734 papers
)


@dataclass(frozen=True)
class MapNeighbour:
    """One paper of a point's related-work list."""

    id: str
    label: str  # title, else handle
    score: float
    point: int | None  # its position in CorpusMap.points, None when it is not on the map


@dataclass(frozen=True)
class MapLabel:
    """Where a point's name goes on the zoomable map: from which zoom, and its offset from the
    point."""

    level: (
        int | None
    )  # index into ZOOM_LEVELS; None: it never fits (shown only when searched or pinned)
    dx: float  # screen px from the point to the text's anchor
    dy: float  # screen px from the point to the text's baseline
    anchor: str  # SVG text-anchor: start, middle or end


@dataclass(frozen=True)
class MapPoint:
    x: float
    y: float
    group: int  # session number, from 1
    id: str
    handle: str
    title: str
    summary: str
    name_at: (
        tuple[float, float, str] | None
    )  # where the name is written (x, baseline y, anchor), PNG and level 0
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str = ""
    url: str = ""
    code_links: tuple[str, ...] = ()
    abstract: str = ""
    label: MapLabel | None = None
    neighbours: tuple[MapNeighbour, ...] = ()  # its related-work list, best first

    @property
    def published(self) -> str:
        """Where and when, as the pinned paper's header shows it (`published`)."""
        return published(self.venue, self.year)


def published(venue: str, year: int | None) -> str:
    """Venue and year on one line, the year left out when the venue already names it ("ICLR 2020",
    not "ICLR 2020 2020")."""
    venue = (venue or "").strip()
    if year is None or re.search(rf"(?<!\d){year}(?!\d)", venue):
        return venue
    return f"{venue} {year}".strip()


@dataclass(frozen=True)
class MapGroup:
    number: int
    label: str
    size: int
    x: float
    y: float


@dataclass(frozen=True)
class CorpusMap:
    points: tuple[MapPoint, ...]
    groups: tuple[MapGroup, ...]
    projection: str  # "t-SNE", "UMAP" or "PCA"
    radius: float = POINT_RADIUS
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def caption(self) -> str:
        return (
            f"{len(self.points)} papers; nearby points are similar papers ({self.projection} of"
            f" their sentence embeddings). Colours: {len(self.groups)} groups of similar papers, as"
            f" `papers sessions --n {len(self.groups)}` plans them."
        )


def build_map(
    recommender: PaperIndex,
    rows: Sequence[int] | None = None,
    n: int = 6,
    seed: int = 0,
    max_per_session: int | None = None,
    k: int = NEIGHBOURS,
    on_phase: Callable[[str], None] | None = None,
) -> CorpusMap:
    """Lay the papers out in 2-D, coloured by session, names placed where they do not collide;
    each point carries its k most related papers (`related_work`, over the whole index).
    `on_phase(name)` is told what it is doing ("projecting with UMAP ...", `project_2d`)."""
    from .related import related_work
    from .sessions import group_papers, label_sessions

    rows = live_rows(recommender) if rows is None else list(dict.fromkeys(int(row) for row in rows))
    if not rows:
        raise InputError("no papers to map: the index is empty")
    related = related_work(recommender, rows, k=k)  # checks k before the slow work
    groups, _ = group_papers(recommender, rows, n, max_per_session, seed)
    labels = label_sessions(recommender, rows, groups)
    coordinates, projection = _coordinates(recommender, rows, seed, on_phase)
    if on_phase is not None and projection != "PCA":
        on_phase("placing the names")
    xy = _fit_to_canvas(coordinates)
    papers = recommender.papers_at(rows)
    # On a crowded map a session label may cover points (its halo keeps it legible); on a sparse one
    # it must not.
    group_marks = _place_group_labels(
        _group_marks(xy, groups, labels), xy if len(rows) <= NAMED_POINTS else xy[:0]
    )
    # The names the map writes beside its points (render/map.py): measured as they are written.
    shown = [paper.handle or paper.title for paper in papers]
    names = _place_names(xy, shown, group_marks) if len(rows) <= NAMED_POINTS else {}
    zoomed = zoom_labels(xy, shown, group_marks, names)
    neighbours = _map_neighbours(related, papers)
    points = tuple(
        _map_point(x, y, int(group) + 1, paper, names.get(i), zoomed[i], near)
        for i, ((x, y), group, paper, near) in enumerate(zip(xy, groups, papers, neighbours))
    )
    return CorpusMap(points, tuple(group_marks), projection, point_radius(len(points)))


def _coordinates(
    recommender: PaperIndex,
    rows: list[int],
    seed: int,
    on_phase: Callable[[str], None] | None,
) -> tuple[np.ndarray, str]:
    """The papers' 2-D coordinates and the projection's name. The whole index's layout, stored by
    `papers build --map-layout`, is what projecting would give (the same function of the same
    vectors): read, not computed again."""
    whole = seed == 0 and rows == list(range(len(recommender)))
    stored = whole_index_layout(recommender) if whole else None
    return stored or project_2d(recommender.vectors_at(rows), seed, on_phase)


def _group_marks(
    xy: np.ndarray, groups: np.ndarray, labels: dict[int, tuple[str, ...]]
) -> list[MapGroup]:
    """Each session's mark: its number and label at the median of its points."""
    group_marks = []
    for number in range(int(groups.max()) + 1):
        members = xy[groups == number]
        label = f"{number + 1}. " + (", ".join(labels.get(number, ())) or f"group {number + 1}")
        group_marks.append(
            MapGroup(
                number + 1,
                label,
                len(members),
                float(np.median(members[:, 0])),
                float(np.median(members[:, 1])),
            )
        )
    return group_marks


def _map_neighbours(
    related: Iterable[RelatedList], papers: Sequence[Paper]
) -> list[tuple[MapNeighbour, ...]]:
    """Each paper's related papers as the map carries them: by position when on the map."""
    position = {paper.id: i for i, paper in enumerate(papers)}
    return [
        tuple(
            MapNeighbour(
                item.paper.id,
                item.paper.label,
                round(float(item.score), 4),
                position.get(item.paper.id),
            )
            for item in listed.related
        )
        for listed in related
    ]


def _map_point(
    x: float,
    y: float,
    group: int,
    paper: Paper,
    name: tuple[float, float, str] | None,
    zoomed: MapLabel,
    near: tuple[MapNeighbour, ...],
) -> MapPoint:
    """One paper's point on the map."""
    from ..corpus.summary import summary

    return MapPoint(
        round(float(x), 2),
        round(float(y), 2),
        group,
        paper.id,
        paper.handle,
        paper.title or paper.handle,
        summary(paper),
        name,
        paper.authors,
        paper.year,
        paper.venue,
        paper.url,
        paper.code_links,
        paper.abstract,
        zoomed,
        near,
    )


def live_rows(recommender: PaperIndex) -> list[int]:
    """Every paper the index answers with: the base's and its segments' (`papers add`), the ones
    `papers remove` removed left out."""
    removed = recommender.excluded_rows(())
    return [row for row in range(len(recommender)) if row not in removed]


def stores_whole_index_layout(recommender: PaperIndex) -> bool:
    """Whether the index's version stores the layout of every paper it answers with (not after
    papers were added or removed since its build: then the stored one no longer covers them)."""
    from ..query.segmented import SegmentedIndex

    return not isinstance(recommender, SegmentedIndex) and bool(
        stored_projection(recommender.stored)
    )


def whole_index_layout(recommender: PaperIndex) -> tuple[np.ndarray, str] | None:
    """The layout of every paper that the index's version stores, or None."""
    return stored_layout(recommender.stored) if stores_whole_index_layout(recommender) else None


def _fit_to_canvas(coordinates: np.ndarray) -> np.ndarray:
    """Scale into the drawing area, same scale on both axes, leaving room for names on the right."""
    low, high = coordinates.min(axis=0), coordinates.max(axis=0)
    span = np.where(high - low > 0, high - low, 1.0)
    left, top = MARGIN + 10, TOP + 10
    width, height = WIDTH - left - MARGIN - 120, HEIGHT - top - MARGIN - 10
    scale = min(width / span[0], height / span[1])
    offset = np.array([left + (width - span[0] * scale) / 2, top + (height - span[1] * scale) / 2])
    xy = _spread_coinciding((coordinates - low) * scale + offset)
    return np.round(xy, 2)  # 1/100 px: still apart at the deepest zoom of the HTML map


SPREAD = 1.0  # px at zoom 1: points that coincide are put this far from their common spot
CLOSE = 0.1  # px at zoom 1: points this close coincide


def _spread_coinciding(xy: np.ndarray) -> np.ndarray:
    """Papers with (nearly) the same embedding land on the same spot, where only one of them could
    be clicked at any zoom: put each such set (points within CLOSE of the set's first one) evenly on
    a small circle round their middle, in row order."""
    xy = xy.copy()
    cells: dict[tuple[int, int], list[int]] = {}  # cell of CLOSE size -> first points of sets there
    sets: dict[int, list[int]] = {}
    for i, (x, y) in enumerate(xy.tolist()):
        cx, cy = int(x // CLOSE), int(y // CLOSE)
        first = next(
            (
                j
                for dx in (-1, 0, 1)
                for dy in (-1, 0, 1)
                for j in cells.get((cx + dx, cy + dy), ())
                if abs(xy[j, 0] - x) <= CLOSE and abs(xy[j, 1] - y) <= CLOSE
            ),
            None,
        )
        if first is None:
            cells.setdefault((cx, cy), []).append(i)
            sets[i] = [i]
        else:
            sets[first].append(i)
    for members in sets.values():
        if len(members) > 1:
            centre = xy[members].mean(axis=0)
            angles = 2 * np.pi * np.arange(len(members)) / len(members)
            xy[members] = centre + SPREAD * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return xy


def _box(
    x: float, y: float, text: str, size: float, anchor: str
) -> tuple[float, float, float, float]:
    width = len(text) * size * (BOLD_WIDTH if size == GROUP_FONT else CHAR_WIDTH)
    left = x if anchor == "start" else x - width if anchor == "end" else x - width / 2
    return (left - 1, y - size * 0.8, left + width + 1, y + size * 0.25)


def _overlaps(box, boxes) -> bool:
    return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes)


def _inside(box) -> bool:
    return box[0] >= 2 and box[2] <= WIDTH - 2 and box[1] >= 2 and box[3] <= HEIGHT - 2


def _place_group_labels(groups: list[MapGroup], xy: np.ndarray) -> list[MapGroup]:
    """Each session label near the middle of its points, moved outwards step by step until it covers
    no point, no other label and not the caption; where no such place is near, the nearest that
    covers no other label and not the caption (its halo keeps it legible over points)."""
    dots = _Grid(xy)
    placed: list[tuple] = [(0, 0, WIDTH, TOP - 8)]  # title and caption
    out = []
    steps = [(dx, dy) for radius in range(0, 400, 12) for dx, dy in _ring(radius)]
    for group in sorted(groups, key=lambda g: (-g.size, g.number)):
        half = len(group.label) * GROUP_FONT * BOLD_WIDTH / 2
        best = None
        for clear_of_points in (True, False):
            for dx, dy in steps:
                x = min(max(group.x + dx, MARGIN + half), WIDTH - MARGIN - half)
                y = min(max(group.y + dy, TOP + GROUP_FONT), HEIGHT - MARGIN)
                box = _box(x, y, group.label, GROUP_FONT, "middle")
                if not _overlaps(box, placed) and not (clear_of_points and dots.covers(box)):
                    best = (x, y, box)
                    break
            if best is not None:
                break
        if best is None:
            best = (group.x, group.y, _box(group.x, group.y, group.label, GROUP_FONT, "middle"))
        placed.append(best[2])
        out.append(
            MapGroup(group.number, group.label, group.size, round(best[0], 1), round(best[1], 1))
        )
    return sorted(out, key=lambda g: g.number)


class _Grid:
    """Which 4-px cells of the canvas the points cover: a box check costs the same for 40 or 100,000
    points."""

    CELL = 4

    def __init__(self, xy: np.ndarray):
        self.cells = np.zeros((HEIGHT // self.CELL + 2, WIDTH // self.CELL + 2), dtype=bool)
        for dy in (-POINT_RADIUS, 0, POINT_RADIUS):
            for dx in (-POINT_RADIUS, 0, POINT_RADIUS):
                columns = np.clip(
                    ((xy[:, 0] + dx) // self.CELL).astype(int), 0, self.cells.shape[1] - 1
                )
                rows = np.clip(
                    ((xy[:, 1] + dy) // self.CELL).astype(int), 0, self.cells.shape[0] - 1
                )
                self.cells[rows, columns] = True

    def covers(self, box) -> bool:
        left, top = max(int(box[0] // self.CELL), 0), max(int(box[1] // self.CELL), 0)
        right, bottom = int(box[2] // self.CELL) + 1, int(box[3] // self.CELL) + 1
        return bool(self.cells[top:bottom, left:right].any())


def _ring(radius: int) -> list[tuple[int, int]]:
    """Offsets at about `radius` px: straight up and down first, then round the circle."""
    if radius == 0:
        return [(0, 0)]
    angles = np.deg2rad([270, 90, 0, 180, 315, 225, 45, 135])
    return [(int(round(radius * 1.6 * np.cos(a))), int(round(radius * np.sin(a)))) for a in angles]


def _place_names(
    xy: np.ndarray, names: Sequence[str], groups: Sequence[MapGroup]
) -> dict[int, tuple]:
    """Greedy placement: each name right, left, above or below its point, clear of other names,
    points and session labels; a name with no free place is left to the hover text."""
    dots = [(x - POINT_RADIUS, y - POINT_RADIUS, x + POINT_RADIUS, y + POINT_RADIUS) for x, y in xy]
    taken = [_box(g.x, g.y, g.label, GROUP_FONT, "middle") for g in groups]
    placed: dict[int, tuple] = {}
    gap = POINT_RADIUS + 3
    # Points with the most crowded surroundings first, so they get the best spots.
    crowd = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=2)
    order = np.lexsort((np.arange(len(xy)), -(crowd < 60**2).sum(axis=1)))
    for i in order.tolist():
        x, y = xy[i]
        name = short_name(names[i])
        options = [
            (x + gap, y + FONT * 0.35, "start"),
            (x - gap, y + FONT * 0.35, "end"),
            (x, y - gap - 1, "middle"),
            (x, y + gap + FONT * 0.8, "middle"),
            (x + gap, y - gap, "start"),
            (x - gap, y - gap, "end"),
            (x + gap, y + gap + FONT * 0.6, "start"),
            (x - gap, y + gap + FONT * 0.6, "end"),
        ]
        others = dots[:i] + dots[i + 1 :]
        for nx, ny, anchor in options:
            box = _box(nx, ny, name, FONT, anchor)
            if _inside(box) and not _overlaps(box, taken) and not _overlaps(box, others):
                taken.append(box)
                placed[i] = (round(float(nx), 1), round(float(ny), 1), anchor)
                break
    return placed


def zoom_labels(
    xy: np.ndarray,
    names: Sequence[str],
    groups: Sequence[MapGroup],
    fixed: dict[int, tuple] | None = None,
) -> list[MapLabel]:
    """For each point, the first zoom level at which its name fits, and where.

    Level 0 keeps the names `_place_names` placed (`fixed`, small maps), or else
    places them inside the canvas. At each level, in point order, a name goes right,
    left, above or below its point if its box, at that zoom, is clear of every point, every
    session label and every name already shown at that zoom; points, names and
    session labels keep their size on screen, so a name placed at one zoom usually
    stays clear at higher ones. A name that fits nowhere up to the last level gets
    level None. About 2 s for 2,734 points."""
    fixed = fixed or {}
    count = len(xy)
    widths = [len(short_name(name)) * FONT * CHAR_WIDTH for name in names]
    gap = SCREEN_RADIUS + 3
    options = (  # right, left, above, below
        (gap, FONT * 0.35, "start"),
        (-gap, FONT * 0.35, "end"),
        (0, -gap - 1, "middle"),
        (0, gap + FONT * 0.8, "middle"),
    )
    placed: dict[int, MapLabel] = {
        i: MapLabel(0, round(float(x - xy[i, 0]), 1), round(float(y - xy[i, 1]), 1), anchor)
        for i, (x, y, anchor) in fixed.items()
    }
    for level, scale in enumerate(ZOOM_LEVELS):
        if level == 0 and count <= NAMED_POINTS:
            continue  # `_place_names` named what fits at level 0
        screen = xy * scale
        grid = _BoxGrid()
        for x, y in screen:
            grid.add((x - SCREEN_RADIUS, y - SCREEN_RADIUS, x + SCREEN_RADIUS, y + SCREEN_RADIUS))
        for group in groups:
            grid.add(_box(group.x * scale, group.y * scale, group.label, GROUP_FONT, "middle"))
        for i, label in placed.items():
            grid.add(_label_box(screen[i], label.dx, label.dy, label.anchor, widths[i]))
        for i in range(count):
            if i in placed:
                continue
            for dx, dy, anchor in options:
                box = _label_box(screen[i], dx, dy, anchor, widths[i])
                if (level > 0 or _inside(box)) and not grid.hits(box):
                    grid.add(box)
                    placed[i] = MapLabel(level, dx, round(dy, 2), anchor)
                    break
    return [
        placed.get(i, MapLabel(None, gap, round(FONT * 0.35, 2), "start")) for i in range(count)
    ]


def _label_box(
    at, dx: float, dy: float, anchor: str, width: float
) -> tuple[float, float, float, float]:
    x, y = at[0] + dx, at[1] + dy
    left = x if anchor == "start" else x - width if anchor == "end" else x - width / 2
    return (left - 1, y - FONT * 0.8, left + width + 1, y + FONT * 0.25)


class _BoxGrid:
    """Boxes bucketed by the cells of a coarse grid: an overlap check looks only at the boxes
    nearby."""

    CELL = 64.0

    def __init__(self):
        self.cells: dict[tuple[int, int], list[tuple]] = {}

    def _cells(self, box):
        c = self.CELL
        for cx in range(int(box[0] // c), int(box[2] // c) + 1):
            for cy in range(int(box[1] // c), int(box[3] // c) + 1):
                yield cx, cy

    def add(self, box) -> None:
        for cell in self._cells(box):
            self.cells.setdefault(cell, []).append(box)

    def hits(self, box) -> bool:
        return any(_overlaps(box, self.cells.get(cell, ())) for cell in self._cells(box))


def short_name(name: str) -> str:
    """A paper's name as the map shows it."""
    return shorten(name, NAME_WIDTH)
