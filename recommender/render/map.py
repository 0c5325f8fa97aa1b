"""A corpus map written as one self-contained HTML file or as a PNG."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..errors import InputError
from ..reading.layout import FONT, GROUP_FONT, MARGIN, NAMED_POINTS, TOP, CorpusMap, short_name

MAP_SUFFIXES = (".html", ".htm", ".png")
PALETTE = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#8C6D1F", "#56B4E9", "#000000",
    "#9467BD", "#17BECF", "#BCBD22", "#7F7F7F", "#E377C2", "#2CA02C", "#D62728", "#1F77B4",
)


def check_map_path(path: str | Path) -> Path:
    """The path, if its suffix names a map format (.html or .png)."""
    path = Path(path)
    if path.suffix.lower() not in MAP_SUFFIXES:
        raise InputError(f"{path}: cannot tell the map format from the name: end it in .html or .png")
    return path


def write_map(corpus_map: CorpusMap, path: str | Path) -> Path:
    """Write the map as .html (self-contained) or .png, chosen by the file's suffix."""
    path = check_map_path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        render_png(corpus_map, path)
    else:
        path.write_text(render_html(corpus_map), encoding="utf-8")
    return path


def _colour(group: int) -> str:
    return PALETTE[(group - 1) % len(PALETTE)]


def render_html(corpus_map: CorpusMap) -> str:
    """One HTML file: the map as inline SVG, names, a legend, and hover details."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Map of {len(corpus_map.points)} papers</title>",
        "<style>",
        "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:24px;color:#222;background:#fff}",
        "h1{font-size:20px;margin:0 0 4px}p.caption{margin:0 0 12px;color:#555;font-size:14px;max-width:1100px}",
        "#map{position:relative;width:100%;max-width:" + str(corpus_map.width) + "px}",
        "svg{width:100%;height:auto;border:1px solid #ddd;border-radius:6px;background:#fcfcfc}",
        "circle{stroke:#fff;stroke-width:" + ("1" if len(corpus_map.points) <= NAMED_POINTS else ".3") + "}circle:hover{stroke:#000;stroke-width:2}",
        "text{font-family:inherit}text.name{font-size:" + f"{FONT:g}" + "px;fill:#333}",
        "text.group{font-size:" + f"{GROUP_FONT:g}" + "px;font-weight:700;paint-order:stroke;stroke:#fcfcfc;stroke-width:4px;stroke-linejoin:round}",
        "#tip{position:absolute;display:none;pointer-events:none;max-width:360px;background:#fff;border:1px solid #bbb;"
        "border-radius:4px;padding:6px 8px;font-size:13px;box-shadow:0 2px 6px rgba(0,0,0,.15)}",
        "#tip b{display:block;margin-bottom:2px}#tip small{color:#666}",
        "ol.legend{columns:2;font-size:14px;padding-left:0;list-style:none;max-width:1100px}",
        "ol.legend li{margin:2px 0}ol.legend span{display:inline-block;width:12px;height:12px;border-radius:50%;margin-right:6px;vertical-align:-1px}",
        "</style></head><body>",
        f"<h1>Map of {len(corpus_map.points)} papers</h1>",
        f'<p class="caption">{e(corpus_map.caption)} Hover over a point for the paper.</p>',
        '<div id="map">',
        # The page has its own heading: the SVG starts below the band the PNG keeps for it.
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 {TOP - 8} {corpus_map.width} {corpus_map.height - TOP + 8}" role="img" '
        f'aria-label="Map of {len(corpus_map.points)} papers">',
        '<g class="points">',
    ]
    for i, point in enumerate(corpus_map.points):
        parts.append(
            f'<circle cx="{point.x:g}" cy="{point.y:g}" r="{corpus_map.radius:g}" fill="{_colour(point.group)}" '
            f'data-i="{i}" data-id="{e(point.id)}"></circle>'
        )
    parts.append("</g>")
    parts.append('<g class="names">')
    for point in corpus_map.points:
        if point.name_at:
            x, y, anchor = point.name_at
            parts.append(f'<text class="name" x="{x:g}" y="{y:g}" text-anchor="{anchor}">{e(short_name(point.handle or point.title))}</text>')
    parts.append("</g>")
    parts.append('<g class="groups">')
    for group in corpus_map.groups:
        parts.append(
            f'<text class="group" x="{group.x:g}" y="{group.y:g}" text-anchor="middle" fill="{_colour(group.number)}">'
            f"{e(group.label)}</text>"
        )
    parts.append("</g></svg>")
    parts.append('<div id="tip"></div></div>')
    parts.append('<ol class="legend">')
    for group in corpus_map.groups:
        parts.append(
            f'<li><span style="background:{_colour(group.number)}"></span>{e(group.label)} '
            f"({group.size} paper{'s' * (group.size != 1)})</li>"
        )
    parts.append("</ol>")
    data = [[point.handle, point.title, point.summary, point.group] for point in corpus_map.points]
    # No "<" at all inside the script element ("</script>", "<!--"), whatever the papers contain.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    parts.append("<script>")
    parts.append(f"const PAPERS={payload};")
    parts.append(
        "(function(){const map=document.getElementById('map'),tip=document.getElementById('tip');"
        "function esc(s){return String(s).replace(/[&<>\"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','\"':'&quot;'}[c]));}"
        "map.addEventListener('mousemove',function(ev){const c=ev.target.closest('circle');"
        "if(!c){tip.style.display='none';return;}const p=PAPERS[+c.dataset.i],r=map.getBoundingClientRect();"
        "tip.innerHTML='<b>'+esc(p[0])+'</b>'+(p[1]!==p[0]?esc(p[1])+'<br>':'')+esc(p[2])+'<br><small>session '+p[3]+' \\u00b7 '+esc(c.dataset.id)+'</small>';"
        "tip.style.display='block';let x=ev.clientX-r.left+14,y=ev.clientY-r.top+14;"
        "if(x+370>r.width)x=Math.max(0,x-390);tip.style.left=x+'px';tip.style.top=y+'px';});"
        "map.addEventListener('mouseleave',function(){tip.style.display='none';});})();"
    )
    parts.append("</script></body></html>")
    return "\n".join(parts) + "\n"


def render_png(corpus_map: CorpusMap, path: str | Path) -> None:
    """The same map as a PNG (matplotlib's Agg backend: no display needed)."""
    try:
        import matplotlib
    except ImportError:
        raise InputError("a PNG map needs matplotlib: `pip install matplotlib`, or write map.html instead") from None
    matplotlib.use("Agg")
    import matplotlib.patheffects as effects
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    dpi = 100
    legend_rows = (len(corpus_map.groups) + 1) // 2
    legend_height = 30 + 22 * legend_rows
    figure = plt.figure(figsize=(corpus_map.width / dpi, (corpus_map.height + legend_height) / dpi), dpi=dpi)
    map_fraction = corpus_map.height / (corpus_map.height + legend_height)
    axes = figure.add_axes((0, 1 - map_fraction, 1, map_fraction))
    axes.set_xlim(0, corpus_map.width)
    axes.set_ylim(corpus_map.height, 0)
    axes.axis("off")
    points = corpus_map.points
    axes.scatter([p.x for p in points], [p.y for p in points], s=(corpus_map.radius * 2 * 0.75) ** 2,
                 c=[_colour(p.group) for p in points], edgecolors="white", linewidths=0.6 if len(points) <= NAMED_POINTS else 0.2,
                 zorder=2)
    pt = 0.75  # points per pixel at 100 dpi
    for point in points:
        if point.name_at:
            x, y, anchor = point.name_at
            axes.text(x, y, short_name(point.handle or point.title), fontsize=FONT * pt, color="#333",
                      ha={"start": "left", "end": "right", "middle": "center"}[anchor], va="baseline", zorder=3)
    halo = [effects.withStroke(linewidth=4, foreground="#fcfcfc")]
    for group in corpus_map.groups:
        axes.text(group.x, group.y, group.label, fontsize=GROUP_FONT * pt, fontweight="bold", color=_colour(group.number),
                  ha="center", va="baseline", path_effects=halo, zorder=4)
    axes.text(MARGIN, MARGIN + 4, f"Map of {len(points)} papers", fontsize=16 * pt, fontweight="bold", va="baseline")
    axes.text(MARGIN, MARGIN + 22, corpus_map.caption, fontsize=11 * pt, color="#555", va="baseline")
    handles = [
        Line2D([], [], marker="o", linestyle="", markersize=8, markerfacecolor=_colour(g.number), markeredgecolor="white",
               label=f"{g.label} ({g.size})")
        for g in corpus_map.groups
    ]
    figure.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.02, 0.0), ncol=2, frameon=False,
                  fontsize=12 * pt, handletextpad=0.3, columnspacing=2.0)
    figure.savefig(path, dpi=150, facecolor="white", metadata={"Software": None})
    plt.close(figure)
