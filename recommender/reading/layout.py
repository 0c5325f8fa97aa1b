"""A 2-D map of the collection: every paper a point, near its similar papers, coloured by session.

The projection is UMAP (umap-learn, if installed) or else PCA, both seeded; the
colours are the sessions `papers sessions --n N` would plan. Written as one
self-contained HTML file (inline SVG and a few lines of JavaScript for hover
details; nothing fetched from the network) or as a PNG (matplotlib, Agg).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..corpus.text import shorten
from ..errors import InputError
from ..query.recommender import Recommender

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


@dataclass(frozen=True)
class MapPoint:
    x: float
    y: float
    group: int  # session number, from 1
    id: str
    handle: str
    title: str
    summary: str
    name_at: tuple[float, float, str] | None  # where the name is written (x, baseline y, anchor)


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
    projection: str  # "UMAP" or "PCA"
    radius: float = POINT_RADIUS
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def caption(self) -> str:
        return (
            f"{len(self.points)} papers; nearby points are similar papers ({self.projection} of their sentence "
            f"embeddings). Colours: {len(self.groups)} groups of similar papers, as `papers sessions "
            f"--n {len(self.groups)}` plans them."
        )


def project_2d(vectors: np.ndarray, seed: int = 0) -> tuple[np.ndarray, str]:
    """(n, 2) coordinates and the method: UMAP on cosine distance if umap-learn is installed, else PCA."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if len(vectors) >= 10:
        try:
            import umap
        except ImportError:
            umap = None
        if umap is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "n_jobs overridden by random_state", spectral init on tiny data
                reducer = umap.UMAP(
                    n_neighbors=min(15, len(vectors) - 1), min_dist=0.25, metric="cosine", random_state=seed,
                )
                return np.asarray(reducer.fit_transform(vectors), dtype=np.float64), "UMAP"
    return pca_2d(vectors), "PCA"


def pca_2d(vectors: np.ndarray) -> np.ndarray:
    """The first two principal components (signs fixed so reruns agree)."""
    centred = np.asarray(vectors, dtype=np.float64) - np.mean(vectors, axis=0)
    if len(centred) < 2:
        return np.zeros((len(centred), 2))
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    axes = axes[:2]
    signs = np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])
    coordinates = centred @ (axes * signs[:, None]).T
    if coordinates.shape[1] < 2:
        coordinates = np.hstack([coordinates, np.zeros((len(coordinates), 2 - coordinates.shape[1]))])
    return coordinates


def build_map(
    recommender: Recommender,
    rows: Sequence[int] | None = None,
    n: int = 6,
    seed: int = 0,
    max_per_session: int | None = None,
) -> CorpusMap:
    """Lay the papers out in 2-D, coloured by session, names placed where they do not collide."""
    from ..corpus.summary import summary
    from .sessions import cluster_terms, group_papers

    rows = list(range(len(recommender))) if rows is None else list(dict.fromkeys(int(row) for row in rows))
    if not rows:
        raise InputError("no papers to map: the index is empty")
    groups, _ = group_papers(recommender, rows, n, max_per_session, seed)
    labels = cluster_terms(recommender.lexical, rows, groups)
    coordinates, projection = project_2d(np.asarray(recommender.vectors[rows]), seed)
    xy = _fit_to_canvas(coordinates)
    papers = recommender.papers_at(rows)
    group_marks = []
    for number in range(int(groups.max()) + 1):
        members = xy[groups == number]
        label = f"{number + 1}. " + (", ".join(labels.get(number, ())) or f"group {number + 1}")
        group_marks.append(MapGroup(number + 1, label, len(members), float(np.median(members[:, 0])),
                                    float(np.median(members[:, 1]))))
    # On a crowded map a session label may cover points (its halo keeps it legible); on a sparse one it must not.
    group_marks = _place_group_labels(group_marks, xy if len(rows) <= NAMED_POINTS else xy[:0])
    names = _place_names(xy, [paper.label for paper in papers], group_marks) if len(rows) <= NAMED_POINTS else {}
    points = tuple(
        MapPoint(round(float(x), 1), round(float(y), 1), int(group) + 1, paper.id, paper.handle,
                 paper.title or paper.handle, summary(paper), names.get(i))
        for i, ((x, y), group, paper) in enumerate(zip(xy, groups, papers))
    )
    return CorpusMap(points, tuple(group_marks), projection, point_radius(len(points)))


def _fit_to_canvas(coordinates: np.ndarray) -> np.ndarray:
    """Scale into the drawing area, same scale on both axes, leaving room for names on the right."""
    low, high = coordinates.min(axis=0), coordinates.max(axis=0)
    span = np.where(high - low > 0, high - low, 1.0)
    left, top = MARGIN + 10, TOP + 10
    width, height = WIDTH - left - MARGIN - 120, HEIGHT - top - MARGIN - 10
    scale = min(width / span[0], height / span[1])
    offset = np.array([left + (width - span[0] * scale) / 2, top + (height - span[1] * scale) / 2])
    xy = (coordinates - low) * scale + offset
    return np.round(xy, 1)


def _box(x: float, y: float, text: str, size: float, anchor: str) -> tuple[float, float, float, float]:
    width = len(text) * size * (BOLD_WIDTH if size == GROUP_FONT else CHAR_WIDTH)
    left = x if anchor == "start" else x - width if anchor == "end" else x - width / 2
    return (left - 1, y - size * 0.8, left + width + 1, y + size * 0.25)


def _overlaps(box, boxes) -> bool:
    return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes)


def _inside(box) -> bool:
    return box[0] >= 2 and box[2] <= WIDTH - 2 and box[1] >= 2 and box[3] <= HEIGHT - 2


def _place_group_labels(groups: list[MapGroup], xy: np.ndarray) -> list[MapGroup]:
    """Each session label near the middle of its points, moved outwards step by step until it
    covers no point, no other label and not the caption."""
    dots = _Grid(xy)
    placed: list[tuple] = [(0, 0, WIDTH, TOP - 8)]  # title and caption
    out = []
    steps = [(dx, dy) for radius in range(0, 400, 12) for dx, dy in _ring(radius)]
    for group in sorted(groups, key=lambda g: (-g.size, g.number)):
        half = len(group.label) * GROUP_FONT * BOLD_WIDTH / 2
        best = None
        for dx, dy in steps:
            x = min(max(group.x + dx, MARGIN + half), WIDTH - MARGIN - half)
            y = min(max(group.y + dy, TOP + GROUP_FONT), HEIGHT - MARGIN)
            box = _box(x, y, group.label, GROUP_FONT, "middle")
            if not _overlaps(box, placed) and not dots.covers(box):
                best = (x, y, box)
                break
        if best is None:
            best = (group.x, group.y, _box(group.x, group.y, group.label, GROUP_FONT, "middle"))
        placed.append(best[2])
        out.append(MapGroup(group.number, group.label, group.size, round(best[0], 1), round(best[1], 1)))
    return sorted(out, key=lambda g: g.number)


class _Grid:
    """Which 4-px cells of the canvas the points cover: a box check costs the same for 40 or 100,000 points."""

    CELL = 4

    def __init__(self, xy: np.ndarray):
        self.cells = np.zeros((HEIGHT // self.CELL + 2, WIDTH // self.CELL + 2), dtype=bool)
        for dy in (-POINT_RADIUS, 0, POINT_RADIUS):
            for dx in (-POINT_RADIUS, 0, POINT_RADIUS):
                columns = np.clip(((xy[:, 0] + dx) // self.CELL).astype(int), 0, self.cells.shape[1] - 1)
                rows = np.clip(((xy[:, 1] + dy) // self.CELL).astype(int), 0, self.cells.shape[0] - 1)
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


def _place_names(xy: np.ndarray, names: Sequence[str], groups: Sequence[MapGroup]) -> dict[int, tuple]:
    """Greedy placement: each name right, left, above or below its point, clear of other names,
    points and session labels; a name with no free place is left to the hover text."""
    dots = [(x - POINT_RADIUS, y - POINT_RADIUS, x + POINT_RADIUS, y + POINT_RADIUS) for x, y in xy]
    taken = [_box(g.x, g.y, g.label, GROUP_FONT, "middle") for g in groups]
    placed: dict[int, tuple] = {}
    gap = POINT_RADIUS + 3
    # Points with the most crowded surroundings first, so they get the best spots.
    crowd = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=2)
    order = np.lexsort((np.arange(len(xy)), -(crowd < 60 ** 2).sum(axis=1)))
    for i in order.tolist():
        x, y = xy[i]
        name = short_name(names[i])
        options = [
            (x + gap, y + FONT * 0.35, "start"), (x - gap, y + FONT * 0.35, "end"),
            (x, y - gap - 1, "middle"), (x, y + gap + FONT * 0.8, "middle"),
            (x + gap, y - gap, "start"), (x - gap, y - gap, "end"),
            (x + gap, y + gap + FONT * 0.6, "start"), (x - gap, y + gap + FONT * 0.6, "end"),
        ]
        others = dots[:i] + dots[i + 1:]
        for nx, ny, anchor in options:
            box = _box(nx, ny, name, FONT, anchor)
            if _inside(box) and not _overlaps(box, taken) and not _overlaps(box, others):
                taken.append(box)
                placed[i] = (round(float(nx), 1), round(float(ny), 1), anchor)
                break
    return placed


def short_name(name: str) -> str:
    """A paper's name as the map shows it."""
    return shorten(name, NAME_WIDTH)


