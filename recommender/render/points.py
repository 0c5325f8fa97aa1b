"""A corpus map's points as CSV or JSON (`papers map --out points.csv`): each paper's place on
the map and its session, for plotting in other tools."""

from __future__ import annotations

import io
import json

from ..reading.layout import CorpusMap
from .tables import LIST_SEPARATOR, write_csv

POINT_SUFFIXES = (".csv", ".json")
COLUMNS = (
    "id",
    "handle",
    "title",
    "authors",
    "year",
    "venue",
    "url",
    "x",
    "y",
    "session",
    "session_label",
)


def point_records(corpus_map: CorpusMap) -> list[dict]:
    """One record a paper. x and y are the map's coordinates with y growing upwards, as a plot's
    axes do (the HTML and PNG maps draw y downwards), on the same scale on both axes."""
    labels = {group.number: group.label for group in corpus_map.groups}
    return [
        {
            "id": point.id,
            "handle": point.handle,
            "title": point.title,
            "authors": list(point.authors),
            "year": point.year,
            "venue": point.venue,
            "url": point.url,
            "x": point.x,
            "y": round(corpus_map.height - point.y, 2),
            "session": point.group,
            "session_label": labels.get(point.group, ""),
        }
        for point in corpus_map.points
    ]


def render_points(corpus_map: CorpusMap, fmt: str) -> str:
    records = point_records(corpus_map)
    if fmt == "json":
        return (
            json.dumps(
                {"projection": corpus_map.projection, "points": records},
                ensure_ascii=False,
                indent=2,
            )
            + "\n"
        )
    buffer = io.StringIO()
    write_csv(
        buffer,
        COLUMNS,
        ([LIST_SEPARATOR.join(r[c]) if c == "authors" else r[c] for c in COLUMNS] for r in records),
    )
    return buffer.getvalue()
