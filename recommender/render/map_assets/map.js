(function () {
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
// The names shown in bold (the pinned paper, its nearest papers, the matches of a search) are placed
// again as drawn, in that order: each at its own place if it touches no name placed before it nor a
// shown point, else at the first free place round its point, else hidden (the side panel names it).
// The other names that would touch one of them are hidden.
names.forEach(t => { t.dataset.home = [t.getAttribute("dx"), t.getAttribute("dy"), t.getAttribute("text-anchor")].join(" "); });
const GAP = (DATA.radius + 3) / DATA.font, PLACES = [  // [dx, dy, anchor] in em, round the point
  [GAP, 0.35, "start"], [-GAP, 0.35, "end"], [0, -GAP - 0.1, "middle"], [0, GAP + 0.8, "middle"],
  [GAP, -GAP, "start"], [-GAP, -GAP, "end"], [GAP, GAP + 0.6, "start"], [-GAP, GAP + 0.6, "end"],
  [0, -GAP - 1.3, "middle"], [0, GAP + 2, "middle"]];
let shownOrder = [];
function placeAt(t, place) {
  t.setAttribute("dx", typeof place[0] === "number" ? place[0].toFixed(3) + "em" : place[0]);
  t.setAttribute("dy", typeof place[1] === "number" ? place[1].toFixed(3) + "em" : place[1]);
  t.setAttribute("text-anchor", place[2]);
}
function placeShown() {
  const taken = shownOrder.map(i => circles[i].getBoundingClientRect()).filter(drawn);
  const placed = [];
  shownOrder.forEach(i => {
    const t = names[i];
    const home = t.dataset.home.split(" ");
    for (const place of [home].concat(PLACES)) {
      placeAt(t, place);
      const r = t.getBoundingClientRect();
      if (!drawn(r)) return;  // a session turned off
      if (!taken.some(k => overlap(k, r))) { taken.push(r); placed.push(r); return; }
    }
    placeAt(t, home);
    t.classList.add("covered");
  });
  return placed;
}
function declutter() {
  names.forEach(t => t.classList.remove("covered"));
  const shown = placeShown();
  if (shown.length) {
    names.forEach(t => {
      if (t.classList.contains("show")) return;
      const r = t.getBoundingClientRect();
      if (drawn(r) && shown.some(k => overlap(k, r))) t.classList.add("covered");
    });
  }
  const kept = [];
  const labels = Array.from(groupsLayer.querySelectorAll("text"));
  labels.forEach(t => t.classList.remove("covered"));
  const frame = svg.getBoundingClientRect();
  labels.map((t, k) => [t, DATA.groups[k].size, k]).sort((a, b) => b[1] - a[1] || a[2] - b[2]).forEach(([t]) => {
    t.removeAttribute("dx");
    let r = t.getBoundingClientRect();
    if (!drawn(r)) return;  // a session turned off
    // Cut by the map's edge (a narrow window: the labels keep their size, the map does not): moved
    // inside it; one wider than the map is hidden, but for the biggest session's.
    const inside = r.left < frame.left ? frame.left - r.left : r.right > frame.right ? frame.right - r.right : 0;
    if (inside && r.width <= frame.width) {
      t.setAttribute("dx", (inside / scale()).toFixed(3));
      r = t.getBoundingClientRect();
    }
    const cut = kept.length > 0 && (r.left < frame.left - 1 || r.right > frame.right + 1);
    if (cut || kept.some(k => overlap(k, r)) || shown.some(k => overlap(k, r))) t.classList.add("covered");
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
  names.forEach(t => { t.classList.remove("show"); placeAt(t, t.dataset.home.split(" ")); });
  shownOrder = [];
  if (pinned >= 0) {
    shownOrder.push(pinned);
    P[pinned].near.forEach(n => { if (n[0] >= 0) shownOrder.push(n[0]); });
  }
  if (hits.length && hits.length <= 40) shownOrder = shownOrder.concat(hits);
  shownOrder = Array.from(new Set(shownOrder));
  shownOrder.forEach(i => names[i].classList.add("show"));
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
  if (p.page || p.url || p.code.length) {
    const row = add(panel, "p", undefined, "links");
    if (p.page && p.page.startsWith("/")) {  // its page in the app that serves this map
      const a = add(row, "a", "Open its page", "app-page");
      a.href = p.page;
    }
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
})();
