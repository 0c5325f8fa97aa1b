"""A corpus map written as one self-contained HTML file or as a PNG."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError
from ..files import output
from .points import POINT_SUFFIXES, render_points
from ..reading.layout import (
    FONT, GROUP_FONT, MARGIN, NAMED_POINTS, SCREEN_RADIUS, TOP, ZOOM_LEVELS, CorpusMap, MapLabel, short_name,
)

MAP_SUFFIXES = (".html", ".htm", ".png", ".csv", ".json")
PALETTE = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#8C6D1F", "#56B4E9", "#000000",
    "#9467BD", "#17BECF", "#BCBD22", "#7F7F7F", "#E377C2", "#2CA02C", "#D62728", "#1F77B4",
)


def check_map_path(path: str | Path) -> Path:
    """The path, if its suffix names a map format (.html, .png, or the points as .csv or .json)."""
    path = Path(path)
    if path.suffix.lower() not in MAP_SUFFIXES:
        raise InputError(f"{path}: cannot tell the map format from the name: end it in .html, .png, .csv or .json")
    return path


def write_map(corpus_map: CorpusMap, path: str | Path, handle: BinaryIO | None = None) -> Path:
    """Write the map as .html (self-contained) or .png, or its points as .csv or .json, chosen by
    the file's suffix, into `handle` (a binary file object) if given, else to `path` (replaced
    whole, or written into a FIFO or device: files.output)."""
    path = check_map_path(path)
    if handle is None:
        with output(path, "wb") as fresh:
            return write_map(corpus_map, path, fresh)
    suffix = path.suffix.lower()
    if suffix in POINT_SUFFIXES:
        handle.write(render_points(corpus_map, suffix.lstrip(".")).encode("utf-8"))
    elif suffix == ".png":
        render_png(corpus_map, handle)
    else:
        handle.write(render_html(corpus_map).encode("utf-8"))
    return path


def _colour(group: int) -> str:
    return PALETTE[(group - 1) % len(PALETTE)]


def map_script() -> str:
    """The map page's script, for a server that sends it as a file of its own (`render_html(script_url=...)`)."""
    return _SCRIPT


def render_html(corpus_map: CorpusMap, script_url: str | None = None) -> str:
    """One offline HTML file: the map as inline SVG (a <title> on every point, so it reads without
    JavaScript), the papers as JSON, and a script for search, pinning, zoom, pan and session toggles.
    `script_url`: load the script from there instead of inlining it (a page served under a
    Content-Security-Policy that forbids inline scripts: `papers serve`)."""
    e = html.escape
    count = len(corpus_map.points)
    top = TOP - 8  # the page has its own heading: the SVG starts below the band the PNG keeps for it
    view = f"0 {top} {corpus_map.width} {corpus_map.height - top}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en" class="no-js"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Map of {count} papers</title>",
        "<style>",
        _STYLE.replace("@FONT@", f"{FONT:g}").replace("@GROUP_FONT@", f"{GROUP_FONT:g}"),
        # Level-0 names show without JavaScript; the script shows the others as one zooms in.
        ",".join(f"#names.z{level} text.lv{level}" for level in range(len(ZOOM_LEVELS)))
        + "{display:inline}",
        "".join(f"svg.hide-g{group.number} .g{group.number}," for group in corpus_map.groups).rstrip(",")
        + "{display:none!important}",
        "</style></head><body>",
        "<header>",
        f"<h1>Map of {count} papers</h1>",
        f'<p class="caption">{e(corpus_map.caption)} <span class="js-only">Search, click a point for its '
        "nearest papers, scroll or use the buttons to zoom, drag to pan.</span></p>",
        "</header>",
        '<div id="app">',
        '<div id="map">',
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{view}" aria-label="Map of {count} papers">',
        '<g id="links"></g>',
        '<g id="points">',
    ]
    for i, point in enumerate(corpus_map.points):
        details = [point.title]
        if point.handle and point.handle != point.title:
            details.append(point.handle)
        if point.authors:
            details.append(", ".join(point.authors))
        details.append(f"{point.id} \u00b7 session {point.group}")
        details.append(point.summary)
        parts.append(
            f'<circle class="g{point.group}" cx="{point.x:g}" cy="{point.y:g}" r="{SCREEN_RADIUS:g}" '
            f'fill="{_colour(point.group)}" data-i="{i}" data-id="{e(point.id)}">'
            f"<title>{e(chr(10).join(details))}</title></circle>"
        )
    parts.append("</g>")
    parts.append('<g id="names" class="z0">')
    for i, point in enumerate(corpus_map.points):
        label = point.label or MapLabel(None, SCREEN_RADIUS + 3, FONT * 0.35, "start")
        level = "never" if label.level is None else str(label.level)
        parts.append(
            f'<text class="name lv{level} g{point.group}" data-i="{i}" x="{point.x:g}" y="{point.y:g}" '
            f'dx="{label.dx / FONT:.3g}em" dy="{label.dy / FONT:.3g}em" text-anchor="{label.anchor}">'
            f"{e(short_name(point.handle or point.title))}</text>"
        )
    parts.append("</g>")
    parts.append('<g id="groups">')
    for group in corpus_map.groups:
        parts.append(
            f'<text class="group g{group.number}" x="{group.x:g}" y="{group.y:g}" text-anchor="middle" '
            f'fill="{_colour(group.number)}">{e(group.label)}</text>'
        )
    parts.append("</g></svg>")
    parts.append(
        '<div id="tools" class="js-only">'
        '<button type="button" id="zoom-in" title="Zoom in (+)" aria-label="Zoom in">+</button>'
        '<button type="button" id="zoom-out" title="Zoom out (-)" aria-label="Zoom out">\u2212</button>'
        '<button type="button" id="zoom-fit" title="Show the whole map (0)" aria-label="Show the whole map">'
        "\u2922</button></div>"
    )
    parts.append('<div id="tip" role="tooltip"></div></div>')
    parts.append('<aside id="side">')
    parts.append(
        '<div class="js-only"><input id="search" type="search" autocomplete="off" spellcheck="false" '
        'placeholder="Search titles, authors, handles, IDs" aria-label="Search papers">'
        '<p id="count" aria-live="polite"></p><ol id="results"></ol></div>'
    )
    parts.append('<section id="pinned" hidden></section>')
    parts.append('<h2>Sessions</h2><ul id="legend">')
    for group in corpus_map.groups:
        parts.append(
            f'<li><button type="button" data-g="{group.number}" aria-pressed="true" title="Show or hide this session">'
            f'<span class="swatch" style="background:{_colour(group.number)}"></span>{e(group.label)} '
            f"({group.size} paper{'s' * (group.size != 1)})</button></li>"
        )
    parts.append("</ul></aside></div>")
    parts.append('<script type="application/json" id="map-data">')
    parts.append(_json_for_script(_page_data(corpus_map)))
    parts.append("</script>")
    if script_url is None:
        parts.append("<script>")
        parts.append(_SCRIPT)
        parts.append("</script></body></html>")
    else:
        parts.append(f'<script src="{e(script_url)}"></script></body></html>')
    return "\n".join(parts) + "\n"


def _page_data(corpus_map: CorpusMap) -> dict:
    papers = [
        {
            "id": point.id, "handle": point.handle, "title": point.title, "authors": list(point.authors),
            "published": point.published, "url": point.url, "code": list(point.code_links),
            "summary": point.summary, "abstract": point.abstract, "group": point.group, "x": point.x, "y": point.y,
            # A neighbour on the map by its position; one off it (a map of some papers) by ID and label.
            "near": [[near.point, near.score] if near.point is not None else [-1, near.score, near.id, near.label]
                     for near in point.neighbours],
        }
        for point in corpus_map.points
    ]
    groups = [{"number": group.number, "label": group.label, "size": group.size} for group in corpus_map.groups]
    return {"papers": papers, "groups": groups, "levels": list(ZOOM_LEVELS), "radius": SCREEN_RADIUS,
            "font": FONT, "groupFont": GROUP_FONT}


def _json_for_script(data) -> str:
    """JSON to put inside a <script> element: no "<" at all, so neither "</script>" nor "<!--"
    in a paper's text can end or change the element; JSON.parse reads "\\u003c" back as "<"."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


_STYLE = """\
*{box-sizing:border-box}
html,body{height:100%}
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0;color:#222;background:#fff;display:flex;flex-direction:column}
header{padding:12px 20px 8px;border-bottom:1px solid #e4e4e4}
h1{font-size:20px;margin:0 0 4px}p.caption{margin:0;color:#555;font-size:14px}
.no-js .js-only{display:none!important}
#app{flex:1;display:flex;min-height:0}
#map{position:relative;flex:1;min-width:0;background:#fcfcfc}
#map svg{display:block;width:100%;height:100%;cursor:grab;touch-action:none;user-select:none;-webkit-user-select:none}
#map svg.dragging{cursor:grabbing}
#points circle{stroke:#fff;stroke-width:.6;vector-effect:non-scaling-stroke}
#points circle.hover{stroke:#000;stroke-width:2}
svg.searching #points circle:not(.hit):not(.pin):not(.near),svg.pinned #points circle:not(.pin):not(.near):not(.hit){opacity:.18}
#points circle.hit{stroke:#000;stroke-width:1.5}
#points circle.near{stroke:#000;stroke-width:1.5}
#points circle.pin{stroke:#000;stroke-width:3}
#links line{stroke:#333;stroke-width:1.2;stroke-opacity:.55;vector-effect:non-scaling-stroke}
text{font-family:inherit;pointer-events:none}
#names text{display:none;font-size:@FONT@px;fill:#333;paint-order:stroke;stroke:#fcfcfc;stroke-width:3px;stroke-linejoin:round}
#names text.show,#names.z0 text.show{display:inline;font-weight:700;fill:#000}
svg.searching #names text:not(.show),svg.pinned #names text:not(.show){opacity:.35}
#groups text{font-size:@GROUP_FONT@px;font-weight:700;paint-order:stroke;stroke:#fcfcfc;stroke-width:4px;stroke-linejoin:round}
#groups.faint text{opacity:.3}
#tools{position:absolute;top:10px;left:10px;display:flex;flex-direction:column;gap:4px}
#tools button{width:34px;height:34px;font-size:20px;line-height:1;border:1px solid #bbb;border-radius:4px;background:#fff;cursor:pointer}
#tools button:hover{background:#f0f0f0}
#tip{position:absolute;display:none;pointer-events:none;max-width:360px;background:#fff;border:1px solid #bbb;border-radius:4px;padding:6px 8px;font-size:13px;box-shadow:0 2px 6px rgba(0,0,0,.15)}
#tip b{display:block;margin-bottom:2px}#tip small{color:#666;display:block}
#side{width:380px;flex:none;overflow-y:auto;border-left:1px solid #e4e4e4;padding:12px 16px;font-size:14px}
#search{width:100%;font:inherit;padding:7px 9px;border:1px solid #aaa;border-radius:4px}
#count{margin:6px 0;color:#555}#count:empty{display:none}
#count button.fit,#pinned h3 button.fit{font:inherit;margin-left:8px;border:0;background:none;color:#0b57d0;cursor:pointer;padding:0;text-decoration:underline}
#results{list-style:none;padding:0;margin:0 0 12px;max-height:40vh;overflow-y:auto}
#results:empty{display:none}
#side button.paper{display:block;width:100%;text-align:left;font:inherit;background:none;border:0;border-radius:3px;padding:3px 4px;cursor:pointer;color:#0b57d0}
#side button.paper:hover,#side button.paper:focus{background:#eef3fd}
#side button.paper small{color:#666}
#groups text.covered,#names text.covered{visibility:hidden}
#pinned{border:1px solid #ccc;border-radius:6px;padding:10px 12px;margin-bottom:12px;background:#fafafa}
#pinned h2{font-size:16px;margin:0 24px 4px 0}
#pinned .meta{color:#555;margin:2px 0}
#pinned .close{float:right;border:0;background:none;font-size:20px;line-height:1;cursor:pointer;color:#555}
#pinned .links a{margin-right:10px}
#pinned ol{padding-left:22px;margin:4px 0}
#pinned h3{font-size:14px;margin:10px 0 2px}
#pinned details{margin-top:6px;color:#333}
#pinned .score{color:#666;font-variant-numeric:tabular-nums}
#side > h2{font-size:15px;margin:8px 0 4px}
#legend{list-style:none;padding:0;margin:0}
#legend button{font:inherit;text-align:left;background:none;border:0;padding:3px 2px;cursor:pointer;width:100%}
#legend button[aria-pressed=false]{color:#999;text-decoration:line-through}
#legend button[aria-pressed=false] .swatch{opacity:.25}
.swatch{display:inline-block;width:12px;height:12px;border-radius:50%;margin-right:6px;vertical-align:-1px}
@media (max-width:800px){#app{flex-direction:column}#map{flex:none;height:70vh}#side{width:auto;border-left:0}}"""

_SCRIPT = r"""(function () {
"use strict";
const DATA = JSON.parse(document.getElementById("map-data").textContent);
const P = DATA.papers, LEVELS = DATA.levels;
document.documentElement.classList.remove("no-js");
const svg = document.querySelector("#map svg"), map = document.getElementById("map");
const tip = document.getElementById("tip"), links = document.getElementById("links");
const namesLayer = document.getElementById("names"), groupsLayer = document.getElementById("groups");
const circles = [], names = [];
svg.querySelectorAll("#points circle").forEach(c => { circles[+c.dataset.i] = c; });
namesLayer.querySelectorAll("text").forEach(t => { names[+t.dataset.i] = t; });
// The hover box replaces the browser's tooltip; the text stays as each point's accessible name.
circles.forEach(c => {
  const t = c.querySelector("title");
  if (t) { c.setAttribute("aria-label", t.textContent); t.remove(); }
});
const hidden = new Set();
let pinned = -1, hits = [], hovered = -1;

// ---- zoom and pan: the SVG viewBox
const base = svg.viewBox.baseVal;
const HOME = {x: base.x, y: base.y, w: base.width, h: base.height};
let view = Object.assign({}, HOME);
const sizes = document.createElement("style");
document.head.appendChild(sizes);
function scale() {
  const r = svg.getBoundingClientRect();
  return Math.min(r.width / view.w, r.height / view.h) || 1;
}
function homeScale() {
  const r = svg.getBoundingClientRect();
  return Math.min(r.width / HOME.w, r.height / HOME.h) || 1;
}
function apply() {
  svg.setAttribute("viewBox", [view.x, view.y, view.w, view.h].map(v => +v.toFixed(3)).join(" "));
  const s = scale();
  // Names from level i show at LEVELS[i] screen px per map unit; the first ones also a little below that
  // (a narrower window), but not on a map drawn much smaller than it was laid out for (a phone).
  let level = s >= LEVELS[0] * 0.75 ? 0 : -1;
  while (level + 1 < LEVELS.length && s >= LEVELS[level + 1] * 0.999) level++;
  const zoom = [];
  for (let i = 0; i <= level; i++) zoom.push("z" + i);
  namesLayer.setAttribute("class", zoom.join(" "));
  groupsLayer.classList.toggle("faint", s / homeScale() > 3);
  // Points, names, session labels and their halos keep their size on screen.
  sizes.textContent = "#points circle{r:" + (DATA.radius / s) + "px}#points circle.pin{r:" + (1.5 * DATA.radius / s) +
    "px}#names text{font-size:" + (DATA.font / s) + "px;stroke-width:" + (3 / s) + "px}#groups text{font-size:" +
    (DATA.groupFont / s) + "px;stroke-width:" + (4 / s) + "px}";
  svg.dataset.scale = s.toFixed(3);
  declutter();
}
// Session labels keep their size on screen, so on a map drawn smaller than it was laid out for they
// could run into one another, a name shown for a pinned or searched paper may sit where a label is, and
// the layout's estimate of a text's width can be a pixel short. Measured as drawn: a label that would touch
// a bigger session's label or such a name is hidden (the legend still names it); then a name of the zoom
// level that would touch a label left is hidden (it shows again further in).
function overlap(a, b) { return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom; }
function drawn(r) { return r.width > 0 || r.height > 0; }
function declutter() {
  names.forEach(t => t.classList.remove("covered"));
  const shown = names.filter(t => t.classList.contains("show")).map(t => t.getBoundingClientRect());
  const kept = [];
  const labels = Array.from(groupsLayer.querySelectorAll("text"));
  labels.forEach(t => t.classList.remove("covered"));
  labels.map((t, k) => [t, DATA.groups[k].size, k]).sort((a, b) => b[1] - a[1] || a[2] - b[2]).forEach(([t]) => {
    const r = t.getBoundingClientRect();
    if (!drawn(r)) return;  // a session turned off
    if (kept.some(k => overlap(k, r)) || shown.some(k => overlap(k, r))) t.classList.add("covered");
    else kept.push(r);
  });
  if (!kept.length) return;
  names.forEach(t => {
    if (t.classList.contains("show")) return;
    const r = t.getBoundingClientRect();
    if (drawn(r) && kept.some(k => overlap(k, r))) t.classList.add("covered");
  });
}
function toMap(clientX, clientY) {
  const m = svg.getScreenCTM().inverse();
  const p = new DOMPoint(clientX, clientY).matrixTransform(m);
  return {x: p.x, y: p.y};
}
function zoomAt(factor, clientX, clientY) {
  const s = scale(), h = homeScale();
  const target = Math.min(Math.max(s * factor, h * 0.5), Math.max(LEVELS[LEVELS.length - 1] * 1.5, h * 8));
  factor = target / s;
  if (Math.abs(factor - 1) < 1e-9) return;
  const p = toMap(clientX, clientY);
  view = {x: p.x - (p.x - view.x) / factor, y: p.y - (p.y - view.y) / factor, w: view.w / factor, h: view.h / factor};
  apply();
}
function zoomCentre(factor) {
  const r = svg.getBoundingClientRect();
  zoomAt(factor, r.left + r.width / 2, r.top + r.height / 2);
}
function fit() { view = Object.assign({}, HOME); apply(); }
function fitTo(points) {  // the smallest view (up to a sensible zoom) that shows these points
  const xs = points.map(i => P[i].x), ys = points.map(i => P[i].y), pad = 40 / homeScale();
  const w = Math.max(Math.max(...xs) - Math.min(...xs) + 2 * pad, HOME.w / 16);
  const h = Math.max(Math.max(...ys) - Math.min(...ys) + 2 * pad, HOME.h / 16);
  const f = Math.max(w / HOME.w, h / HOME.h);
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2, cy = (Math.max(...ys) + Math.min(...ys)) / 2;
  view = {x: cx - HOME.w * f / 2, y: cy - HOME.h * f / 2, w: HOME.w * f, h: HOME.h * f};
  apply();
}
function centreOn(i) {
  const r = svg.getBoundingClientRect(), m = svg.getScreenCTM(), p = P[i];
  const sx = m.a * p.x + m.e, sy = m.d * p.y + m.f;
  if (sx > r.left + 20 && sx < r.right - 20 && sy > r.top + 20 && sy < r.bottom - 20) return;
  view.x = p.x - view.w / 2; view.y = p.y - view.h / 2;
  apply();
}
svg.addEventListener("wheel", ev => {
  ev.preventDefault();
  const delta = ev.deltaY * (ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? 400 : 1);
  zoomAt(Math.exp(-delta * 0.002), ev.clientX, ev.clientY);
}, {passive: false});
document.getElementById("zoom-in").addEventListener("click", () => zoomCentre(1.5));
document.getElementById("zoom-out").addEventListener("click", () => zoomCentre(1 / 1.5));
document.getElementById("zoom-fit").addEventListener("click", fit);
window.addEventListener("resize", apply);

// ---- the point under (or near) the pointer
function nearest(clientX, clientY, within) {
  const m = svg.getScreenCTM();
  let best = -1, bestD = within * within;
  for (let i = 0; i < P.length; i++) {
    if (hidden.has(P[i].group)) continue;
    const dx = m.a * P[i].x + m.e - clientX, dy = m.d * P[i].y + m.f - clientY, d = dx * dx + dy * dy;
    if (d <= bestD) { best = i; bestD = d; }
  }
  return best;
}
function pointAt(ev) {
  const c = ev.target.closest && ev.target.closest("#points circle");
  if (c && !hidden.has(P[+c.dataset.i].group)) return +c.dataset.i;
  return nearest(ev.clientX, ev.clientY, DATA.radius + 8);
}

let drag = null;
svg.addEventListener("pointerdown", ev => {
  if (ev.button !== 0) return;
  drag = {x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false};
});
svg.addEventListener("pointermove", ev => {
  if (drag) {
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && dx * dx + dy * dy > 16) {
      drag.moved = true;
      svg.setPointerCapture(ev.pointerId);
      svg.classList.add("dragging");
      hover(-1);
    }
    if (drag.moved) {
      const s = scale();
      view.x = drag.vx - dx / s; view.y = drag.vy - dy / s;
      apply();
      return;
    }
  }
  hover(pointAt(ev), ev);
});
svg.addEventListener("pointerup", ev => {
  if (!drag) return;
  const moved = drag.moved;
  drag = null;
  svg.classList.remove("dragging");
  if (!moved) {
    const i = pointAt(ev);
    hover(-1);
    if (i >= 0) pin(i); else unpin();
  }
});
svg.addEventListener("pointerleave", () => { if (!drag) hover(-1); });
svg.addEventListener("pointercancel", () => { drag = null; svg.classList.remove("dragging"); });

function hover(i, ev) {
  if (hovered >= 0) circles[hovered].classList.remove("hover");
  hovered = i;
  if (i < 0) { tip.style.display = "none"; return; }
  circles[i].classList.add("hover");
  const p = P[i];
  tip.replaceChildren();
  add(tip, "b", p.title);
  if (p.handle && p.handle !== p.title) add(tip, "small", p.handle);
  if (p.authors.length) add(tip, "small", p.authors.join(", "));
  add(tip, "span", p.summary);
  add(tip, "small", "session " + p.group + " \u00b7 " + p.id + " \u00b7 click to pin");
  tip.style.display = "block";
  const r = map.getBoundingClientRect();
  let x = ev.clientX - r.left + 14, y = ev.clientY - r.top + 14;
  if (x + tip.offsetWidth > r.width) x = Math.max(0, ev.clientX - r.left - tip.offsetWidth - 14);
  if (y + tip.offsetHeight > r.height) y = Math.max(0, ev.clientY - r.top - tip.offsetHeight - 14);
  tip.style.left = x + "px"; tip.style.top = y + "px";
}

// ---- small DOM helpers: text always goes in as text, never as markup
function add(parent, tag, text, cls) {
  const el = document.createElement(tag);
  if (text !== undefined) el.textContent = text;
  if (cls) el.className = cls;
  parent.appendChild(el);
  return el;
}
function link(parent, href, text) {
  if (!/^https?:\/\//i.test(href)) { add(parent, "span", text + ": " + href); return; }
  const a = add(parent, "a", text);
  a.href = href; a.target = "_blank"; a.rel = "noopener noreferrer";
}
function paperButton(parent, i, extra) {
  const b = add(parent, "button", P[i].title, "paper");
  b.type = "button"; b.dataset.i = i;
  if (extra) add(b, "small", " " + extra);
  b.addEventListener("click", () => pin(i));
  b.addEventListener("mouseenter", () => circles[i].classList.add("hover"));
  b.addEventListener("mouseleave", () => circles[i].classList.remove("hover"));
  return b;
}
function refreshShown() {
  names.forEach(t => t.classList.remove("show"));
  if (hits.length && hits.length <= 40) hits.forEach(i => names[i].classList.add("show"));
  if (pinned >= 0) {
    names[pinned].classList.add("show");
    P[pinned].near.forEach(n => { if (n[0] >= 0) names[n[0]].classList.add("show"); });
  }
  declutter();
}

// ---- pinning a paper: its details, links and nearest papers
const panel = document.getElementById("pinned");
function pin(i) {
  unpin(true);
  pinned = i;
  const p = P[i];
  circles[i].classList.add("pin");
  svg.classList.add("pinned");
  const layer = circles[i].parentNode;
  p.near.forEach(n => {
    if (n[0] < 0) return;
    circles[n[0]].classList.add("near");
    layer.appendChild(circles[n[0]]);  // drawn on top
    const q = P[n[0]], l = document.createElementNS("http://www.w3.org/2000/svg", "line");
    l.setAttribute("x1", p.x); l.setAttribute("y1", p.y); l.setAttribute("x2", q.x); l.setAttribute("y2", q.y);
    links.appendChild(l);
  });
  layer.appendChild(circles[i]);
  panel.replaceChildren();
  const close = add(panel, "button", "\u00d7", "close");
  close.type = "button"; close.title = "Unpin (Esc)"; close.setAttribute("aria-label", "Unpin");
  close.addEventListener("click", () => unpin());
  add(panel, "h2", p.title);
  const meta = [p.handle && p.handle !== p.title ? p.handle : "", p.id, "session " + p.group].filter(Boolean);
  add(panel, "p", meta.join(" \u00b7 "), "meta");
  if (p.authors.length) add(panel, "p", p.authors.join(", "), "meta authors");
  if (p.published) add(panel, "p", p.published, "meta published");
  if (p.url || p.code.length) {
    const row = add(panel, "p", undefined, "links");
    if (p.url) link(row, p.url, "Paper");
    p.code.forEach((c, k) => link(row, c, p.code.length > 1 ? "Code " + (k + 1) : "Code"));
  }
  add(panel, "p", p.summary, "summary");
  if (p.abstract && p.abstract !== p.summary) {
    const d = add(panel, "details");
    add(d, "summary", "Abstract");
    add(d, "p", p.abstract);
  }
  const heading = add(panel, "h3", "Nearest papers");
  const onMap = [i].concat(p.near.filter(n => n[0] >= 0).map(n => n[0]));
  if (onMap.length > 1) {
    const b = add(heading, "button", "zoom to them", "fit");
    b.type = "button";
    b.addEventListener("click", () => fitTo(onMap));
  }
  const list = add(panel, "ol", undefined, "near");
  p.near.forEach(n => {
    const li = add(list, "li");
    if (n[0] >= 0) paperButton(li, n[0], n[1].toFixed(2));
    else { add(li, "span", n[3]); add(li, "small", " " + n[1].toFixed(2) + " (" + n[2] + ", not on this map)", "score"); }
  });
  if (!p.near.length) add(list, "li", "none");
  panel.hidden = false;
  refreshShown();
  centreOn(i);
  history.replaceState(null, "", "#" + encodeURIComponent(p.id));
}
function unpin(keepHash) {
  if (pinned < 0) return;
  circles[pinned].classList.remove("pin");
  svg.querySelectorAll("#points circle.near").forEach(c => c.classList.remove("near"));
  links.replaceChildren();
  svg.classList.remove("pinned");
  panel.hidden = true;
  panel.replaceChildren();
  pinned = -1;
  refreshShown();
  if (!keepHash) history.replaceState(null, "", location.pathname + location.search);
}

// ---- search: every word must occur in the title, handle, ID or authors
const search = document.getElementById("search"), countLine = document.getElementById("count");
const results = document.getElementById("results");
const fold = s => s.normalize("NFD").replace(/[\u0300-\u036f]/g, "").toLowerCase();
const haystack = P.map(p => fold([p.title, p.handle, p.id, p.authors.join("; ")].join(" \u0001 ")));
function runSearch() {
  const words = fold(search.value).split(/\s+/).filter(Boolean);
  hits.forEach(i => circles[i].classList.remove("hit"));
  hits = words.length ? P.map((p, i) => i).filter(i => words.every(w => haystack[i].includes(w))) : [];
  hits.forEach(i => circles[i].classList.add("hit"));
  svg.classList.toggle("searching", words.length > 0);
  results.replaceChildren();
  countLine.replaceChildren();
  if (words.length) {
    add(countLine, "span", hits.length + " of " + P.length + " papers match");
    if (hits.length) {
      const b = add(countLine, "button", "zoom to them", "fit");
      b.type = "button";
      b.addEventListener("click", () => fitTo(hits));
    }
  }
  hits.slice(0, 100).forEach(i => paperButton(add(results, "li"), i, P[i].title.startsWith(P[i].handle) ? "" : P[i].handle));
  if (hits.length > 100) add(results, "li", "\u2026 and " + (hits.length - 100) + " more");
  refreshShown();
}
search.addEventListener("input", runSearch);
search.addEventListener("keydown", ev => {
  if (ev.key === "Enter" && hits.length) pin(hits[0]);
  if (ev.key === "Escape") { search.value = ""; runSearch(); }
});

// ---- sessions on and off
document.querySelectorAll("#legend button").forEach(b => b.addEventListener("click", () => {
  const g = +b.dataset.g, on = hidden.has(g);
  if (on) hidden.delete(g); else hidden.add(g);
  b.setAttribute("aria-pressed", String(on));
  svg.classList.toggle("hide-g" + g, !on);
  if (pinned >= 0 && hidden.has(P[pinned].group)) unpin();
  declutter();
}));

document.addEventListener("keydown", ev => {
  if (ev.target === search) return;
  if (ev.key === "Escape") unpin();
  else if (ev.key === "+" || ev.key === "=") zoomCentre(1.5);
  else if (ev.key === "-") zoomCentre(1 / 1.5);
  else if (ev.key === "0") fit();
  else if (ev.key === "/") { ev.preventDefault(); search.focus(); }
});

// ---- #ID in the address pins that paper (a link to one paper of the map)
function fromAddress() {
  const wanted = decodeURIComponent(location.hash.slice(1));
  const i = wanted ? P.findIndex(p => p.id === wanted) : -1;
  if (i >= 0 && i !== pinned) pin(i);
}
window.addEventListener("hashchange", fromAddress);
apply();
fromAddress();
})();"""


def render_png(corpus_map: CorpusMap, path: str | Path | BinaryIO) -> None:
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
    figure.savefig(path, format="png", dpi=150, facecolor="white", metadata={"Software": None})
    plt.close(figure)
