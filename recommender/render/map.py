"""A corpus map written as one self-contained HTML file or as a PNG."""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from ..errors import InputError
from ..files import output
from ..reading.layout import (
    FONT,
    GROUP_FONT,
    MARGIN,
    NAMED_POINTS,
    SCREEN_RADIUS,
    TOP,
    ZOOM_LEVELS,
    CorpusMap,
    MapLabel,
    short_name,
)
from .points import POINT_SUFFIXES, render_points

MAP_SUFFIXES = (".html", ".htm", ".png", ".csv", ".json")
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#D55E00",
    "#8C6D1F",
    "#56B4E9",
    "#000000",
    "#9467BD",
    "#17BECF",
    "#BCBD22",
    "#7F7F7F",
    "#E377C2",
    "#2CA02C",
    "#D62728",
    "#1F77B4",
)
PNG_DPI = 100  # the PNG's figure is laid out in pixels at this resolution
PT = 0.75  # points per pixel at 100 dpi


def check_map_path(path: str | Path) -> Path:
    """The path, if its suffix names a map format (.html, .png, or the points as .csv or .json)."""
    path = Path(path)
    if path.suffix.lower() not in MAP_SUFFIXES:
        raise InputError(
            f"{path}: cannot tell the map format from the name: end it in .html, .png, .csv or"
            " .json"
        )
    return path


def write_map(corpus_map: CorpusMap, path: str | Path, stream: BinaryIO | None = None) -> Path:
    """Write the map as .html (self-contained) or .png, or its points as .csv or .json, chosen by
    the file's suffix, into `stream` (a binary file object) if given, else to `path` (replaced
    whole, or written into a FIFO or device: files.output)."""
    path = check_map_path(path)
    if stream is None:
        with output(path, "wb") as fresh:
            return write_map(corpus_map, path, cast(BinaryIO, fresh))
    suffix = path.suffix.lower()
    if suffix in POINT_SUFFIXES:
        stream.write(render_points(corpus_map, suffix.lstrip(".")).encode("utf-8"))
    elif suffix == ".png":
        render_png(corpus_map, stream)
    else:
        stream.write(render_html(corpus_map).encode("utf-8"))
    return path


def _colour(group: int) -> str:
    return PALETTE[(group - 1) % len(PALETTE)]


@functools.cache
def _asset(name: str) -> str:
    """The map page's script or style: a file of the package (render/map_assets/), so that it is
    edited, linted and served as what it is."""
    from importlib import resources

    text = (resources.files(__package__) / "map_assets" / name).read_text(encoding="utf-8")
    return text.removesuffix("\n")  # the file ends its last line; the page goes on after it


def map_script() -> str:
    """The map page's script, for a server that sends it as a file of its own
    (`render_html(script_url=...)`)."""
    return _asset("map.js")


@dataclass(frozen=True)
class MapParts:
    """The map page's pieces, for a page that puts them inside its own (`papers serve`): its title,
    its style sheet and its body (SVG, side panel, data; no script)."""

    title: str
    style: str
    body: str


def render_html(corpus_map: CorpusMap, script_url: str | None = None) -> str:
    """One offline HTML file: the map as inline SVG (a <title> on every point, so it reads without
    JavaScript), the papers as JSON, and a script for search, pinning, zoom, pan and session
    toggles. `script_url`: load the script from there instead of inlining it (a page served under a
    Content-Security-Policy that forbids inline scripts)."""
    e = html.escape
    parts = map_parts(corpus_map)
    script = (
        f"<script>\n{_asset('map.js')}\n</script>"
        if script_url is None
        else f'<script src="{e(script_url)}"></script>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en" class="no-js"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{e(parts.title)}</title>\n<style>\n{parts.style}\n</style></head><body>\n"
        f"{parts.body}\n{script}</body></html>\n"
    )


def map_parts(corpus_map: CorpusMap, paper_link: Callable[[str], str] | None = None) -> MapParts:
    """The map's title, style and body. `paper_link(id)`: the address of a paper's own page, which
    the pinned paper's panel links to (a server's paper page)."""
    count = len(corpus_map.points)
    parts = [
        *_map_head(corpus_map),
        '<div id="app">',
        '<div id="map">',
        *_map_svg(corpus_map),
        *_map_tools(),
        *_side_panel(corpus_map),
        '<script type="application/json" id="map-data">',
        _json_for_script(_page_data(corpus_map, paper_link)),
        "</script>",
    ]
    return MapParts(f"Map of {count} papers", _map_style(corpus_map), "\n".join(parts))


def _map_style(corpus_map: CorpusMap) -> str:
    """The page's style sheet: the package's, the fonts' sizes filled in, and the rules that show
    each zoom level's names and hide each session turned off."""
    style = [
        _asset("map.css").replace("@FONT@", f"{FONT:g}").replace("@GROUP_FONT@", f"{GROUP_FONT:g}"),
        # Level-0 names show without JavaScript; the script shows the others as one zooms in.
        ",".join(f"#names.z{level} text.lv{level}" for level in range(len(ZOOM_LEVELS)))
        + "{display:inline}",
        "".join(
            f"svg.hide-g{group.number} .g{group.number}," for group in corpus_map.groups
        ).rstrip(",")
        + "{display:none!important}",
    ]
    return "\n".join(style)


def _map_head(corpus_map: CorpusMap) -> list[str]:
    """The heading and caption above the map."""
    e = html.escape
    return [
        '<div id="map-head">',
        f"<h1>Map of {len(corpus_map.points)} papers</h1>",
        (
            f'<p class="caption">{e(corpus_map.caption)} <span class="js-only">Search, click a'
            " point for its nearest papers, scroll or use the buttons to zoom, drag to"
            " pan.</span></p>"
        ),
        "</div>",
    ]


def _map_svg(corpus_map: CorpusMap) -> list[str]:
    """The map as SVG: its points, their names and the sessions' names, each a layer."""
    count = len(corpus_map.points)
    top = (
        TOP - 8
    )  # the page has its own heading: the SVG starts below the band the PNG keeps for it
    view = f"0 {top} {corpus_map.width} {corpus_map.height - top}"
    return [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{view}" aria-label="Map of {count}'
            ' papers">'
        ),
        '<g id="links"></g>',
        '<g id="points">',
        *_svg_points(corpus_map),
        "</g>",
        '<g id="names" class="z0">',
        *_svg_names(corpus_map),
        "</g>",
        '<g id="groups">',
        *_svg_groups(corpus_map),
        "</g></svg>",
    ]


def _svg_points(corpus_map: CorpusMap) -> list[str]:
    """A circle for each paper, its details as a <title> (read without JavaScript)."""
    e = html.escape
    circles = []
    for i, point in enumerate(corpus_map.points):
        details = [point.title]
        if point.handle and point.handle != point.title:
            details.append(point.handle)
        if point.authors:
            details.append(", ".join(point.authors))
        details.append(f"{point.id} \u00b7 session {point.group}")
        details.append(point.summary)
        circles.append(
            f'<circle class="g{point.group}" cx="{point.x:g}" cy="{point.y:g}"'
            f' r="{SCREEN_RADIUS:g}" fill="{_colour(point.group)}" data-i="{i}"'
            f' data-id="{e(point.id)}"><title>{e(chr(10).join(details))}</title></circle>'
        )
    return circles


def _svg_names(corpus_map: CorpusMap) -> list[str]:
    """Each paper's short name beside its point, classed by the zoom level it shows from."""
    e = html.escape
    names = []
    for i, point in enumerate(corpus_map.points):
        label = point.label or MapLabel(None, SCREEN_RADIUS + 3, FONT * 0.35, "start")
        level = "never" if label.level is None else str(label.level)
        names.append(
            f'<text class="name lv{level} g{point.group}" data-i="{i}" x="{point.x:g}"'
            f' y="{point.y:g}" dx="{label.dx / FONT:.3g}em" dy="{label.dy / FONT:.3g}em"'
            f' text-anchor="{label.anchor}">{e(short_name(point.handle or point.title))}</text>'
        )
    return names


def _svg_groups(corpus_map: CorpusMap) -> list[str]:
    """Each session's name at its place on the map, in its colour."""
    e = html.escape
    return [
        f'<text class="group g{group.number}" x="{group.x:g}" y="{group.y:g}"'
        f' text-anchor="middle" fill="{_colour(group.number)}">{e(group.label)}</text>'
        for group in corpus_map.groups
    ]


def _map_tools() -> list[str]:
    """The zoom buttons and the tooltip, closing the map's element."""
    return [
        '<div id="tools" class="js-only"><button type="button" id="zoom-in" title="Zoom in (+)"'
        ' aria-label="Zoom in">+</button><button type="button" id="zoom-out" title="Zoom out (-)"'
        ' aria-label="Zoom out">\u2212</button><button type="button" id="zoom-fit" title="Show the'
        ' whole map (0)" aria-label="Show the whole map">\u2922</button></div>',
        '<div id="tip" role="tooltip"></div></div>',
    ]


def _side_panel(corpus_map: CorpusMap) -> list[str]:
    """The side panel: search, the pinned paper and the sessions' legend, closing the page's
    element."""
    e = html.escape
    panel = [
        '<aside id="side">',
        '<div class="js-only"><input id="search" type="search" autocomplete="off"'
        ' spellcheck="false" placeholder="Search titles, authors, handles, IDs" aria-label="Search'
        ' papers"><p id="count" aria-live="polite"></p><ol id="results"></ol></div>',
        '<section id="pinned" hidden></section>',
        '<h2>Sessions</h2><ul id="legend">',
    ]
    for group in corpus_map.groups:
        panel.append(
            f'<li><button type="button" data-g="{group.number}" aria-pressed="true" title="Show or'
            ' hide this session">'
            '<span class="swatch"'
            f' style="background:{_colour(group.number)}"></span>{e(group.label)} '
            f"({group.size} paper{'s' * (group.size != 1)})</button></li>"
        )
    panel.append("</ul></aside></div>")
    return panel


def _page_data(corpus_map: CorpusMap, paper_link: Callable[[str], str] | None = None) -> dict:
    papers = [
        {
            "id": point.id,
            "page": paper_link(point.id) if paper_link is not None else "",
            "handle": point.handle,
            "title": point.title,
            "authors": list(point.authors),
            "published": point.published,
            "url": point.url,
            "code": list(point.code_links),
            "summary": point.summary,
            "abstract": point.abstract,
            "group": point.group,
            "x": point.x,
            "y": point.y,
            # A neighbour on the map by its position; one off it (a map of some papers) by ID and
            # label.
            "near": [
                (
                    [near.point, near.score]
                    if near.point is not None
                    else [-1, near.score, near.id, near.label]
                )
                for near in point.neighbours
            ],
        }
        for point in corpus_map.points
    ]
    groups = [
        {"number": group.number, "label": group.label, "size": group.size}
        for group in corpus_map.groups
    ]
    return {
        "papers": papers,
        "groups": groups,
        "levels": list(ZOOM_LEVELS),
        "radius": SCREEN_RADIUS,
        "font": FONT,
        "groupFont": GROUP_FONT,
    }


def _json_for_script(data) -> str:
    """JSON to put inside a <script> element: no "<" at all, so neither "</script>" nor "<!--"
    in a paper's text can end or change the element; JSON.parse reads "\\u003c" back as "<"."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def render_png(corpus_map: CorpusMap, path: str | Path | BinaryIO) -> None:
    """The same map as a PNG (matplotlib's Agg backend: no display needed)."""
    try:
        import matplotlib
    except ImportError:
        raise InputError(
            "a PNG map needs matplotlib: `pip install matplotlib`, or write map.html instead"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = _png_canvas(corpus_map, plt)
    _png_points(axes, corpus_map)
    _png_names(axes, corpus_map)
    _png_groups(axes, corpus_map)
    _png_title(axes, corpus_map)
    _png_legend(figure, corpus_map)
    figure.savefig(path, format="png", dpi=150, facecolor="white", metadata={"Software": None})
    plt.close(figure)


def _png_canvas(corpus_map: CorpusMap, plt):
    """The figure, tall enough for the map and the legend below it, and the map's axes (pixels,
    y downwards, no frame)."""
    legend_rows = (len(corpus_map.groups) + 1) // 2
    legend_height = 30 + 22 * legend_rows
    figure = plt.figure(
        figsize=(corpus_map.width / PNG_DPI, (corpus_map.height + legend_height) / PNG_DPI),
        dpi=PNG_DPI,
    )
    map_fraction = corpus_map.height / (corpus_map.height + legend_height)
    axes = figure.add_axes((0, 1 - map_fraction, 1, map_fraction))
    axes.set_xlim(0, corpus_map.width)
    axes.set_ylim(corpus_map.height, 0)
    axes.axis("off")
    return figure, axes


def _png_points(axes, corpus_map: CorpusMap) -> None:
    """A dot for each paper in its session's colour."""
    points = corpus_map.points
    axes.scatter(
        [p.x for p in points],
        [p.y for p in points],
        s=(corpus_map.radius * 2 * 0.75) ** 2,
        c=[_colour(p.group) for p in points],
        edgecolors="white",
        linewidths=0.6 if len(points) <= NAMED_POINTS else 0.2,
        zorder=2,
    )


def _png_names(axes, corpus_map: CorpusMap) -> None:
    """The short names of the papers the layout placed a name for."""
    for point in corpus_map.points:
        if point.name_at:
            x, y, anchor = point.name_at
            axes.text(
                x,
                y,
                short_name(point.handle or point.title),
                fontsize=FONT * PT,
                color="#333",
                ha={"start": "left", "end": "right", "middle": "center"}[anchor],
                va="baseline",
                zorder=3,
            )


def _png_groups(axes, corpus_map: CorpusMap) -> None:
    """Each session's name at its place, in its colour over a light halo."""
    import matplotlib.patheffects as effects

    halo = [effects.withStroke(linewidth=4, foreground="#fcfcfc")]
    for group in corpus_map.groups:
        axes.text(
            group.x,
            group.y,
            group.label,
            fontsize=GROUP_FONT * PT,
            fontweight="bold",
            color=_colour(group.number),
            ha="center",
            va="baseline",
            path_effects=halo,
            zorder=4,
        )


def _png_title(axes, corpus_map: CorpusMap) -> None:
    """The heading and the caption in the band above the map."""
    axes.text(
        MARGIN,
        MARGIN + 4,
        f"Map of {len(corpus_map.points)} papers",
        fontsize=16 * PT,
        fontweight="bold",
        va="baseline",
    )
    axes.text(
        MARGIN, MARGIN + 22, corpus_map.caption, fontsize=11 * PT, color="#555", va="baseline"
    )


def _png_legend(figure, corpus_map: CorpusMap) -> None:
    """The sessions' legend, two columns under the map."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=8,
            markerfacecolor=_colour(g.number),
            markeredgecolor="white",
            label=f"{g.label} ({g.size})",
        )
        for g in corpus_map.groups
    ]
    figure.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.02, 0.0),
        ncol=2,
        frameon=False,
        fontsize=12 * PT,
        handletextpad=0.3,
        columnspacing=2.0,
    )
