"""map: every paper drawn, self-contained HTML, PNG, determinism, neighbours, names by zoom."""

import json
import re
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from corpus import topic_papers, write_corpus
from recommender.cli import main
from recommender.index.map_layout import pca_2d, project_2d
from recommender.reading.layout import ZOOM_LEVELS, MapGroup, short_name, zoom_labels


@pytest.fixture
def no_umap(monkeypatch):
    """PCA instead of t-SNE or UMAP: the same code path after projection, fast and deterministic."""
    monkeypatch.setitem(sys.modules, "umap", None)
    monkeypatch.setitem(sys.modules, "openTSNE", None)


@pytest.fixture
def run(workdir, papers_cli, no_umap):
    write_corpus(workdir / "in", topic_papers())
    assert papers_cli("build", "in").exit_code == 0
    return papers_cli


def test_html_map_shows_every_paper_and_needs_nothing_else(run, workdir):
    result = run("map", "--out", "map.html", "--n", "3")
    assert result.exit_code == 0
    assert result.output == "wrote a map of 24 papers (PCA) to map.html\n"
    page = (workdir / "map.html").read_text(encoding="utf-8")
    ids = re.findall(r'<circle [^>]*data-id="([^"]+)"><title>[^<]+</title></circle>', page)  # a title on each
    assert sorted(ids) == sorted(paper["id"] for paper in topic_papers())
    assert len(re.findall(r'<text class="group g\d"', page)) == 3
    assert len(re.findall(r'<text class="name lv0 ', page)) >= 12  # most papers are named at the first zoom
    assert len(re.findall(r'<text class="name lv', page)) == 24  # and every one further in
    # Offline: no external scripts, styles, fonts or images.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert "@import" not in page and "url(" not in page
    assert page.count("<script>") == 1 and page.count('<script type="application/json" id="map-data">') == 1


def test_html_map_is_byte_identical_run_to_run(run, workdir):
    run("map", "--out", "a.html", "--seed", "3")
    run("map", "--out", "b.html", "--seed", "3")
    assert (workdir / "a.html").read_bytes() == (workdir / "b.html").read_bytes()


def test_png_map(run, workdir):
    assert run("map", "--out", "map.png", "--n", "3").exit_code == 0
    assert (workdir / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paper_text_cannot_break_out_of_the_page(workdir, fake_model, no_umap):
    papers = topic_papers()
    papers[0]["title"] = "</script><script>alert(1)</script> & <b>bold</b>"
    papers[1]["abstract"] += " <!-- <script> </SCRIPT > ]]>"
    write_corpus(workdir / "in", papers)
    runner = CliRunner()
    assert runner.invoke(main, ["build", "in"]).exit_code == 0
    assert runner.invoke(main, ["map", "--out", "map.html"]).exit_code == 0
    page = (workdir / "map.html").read_text(encoding="utf-8")
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<b>bold</b>" not in page
    # The papers' text is back, as it was, in the page's data.
    data = json.loads(page.split('<script type="application/json" id="map-data">')[1].split("</script>")[0])
    assert papers[0]["title"] in [paper["title"] for paper in data["papers"]]
    assert any(paper["abstract"].endswith(" <!-- <script> </SCRIPT > ]]>") for paper in data["papers"])


@pytest.mark.parametrize("args,message", [
    (("--out", "map.svg"), "Error: map.svg: cannot tell the map format from the name: end it in .html, .png, .csv or .json"),
    (("--out", "map.html", "--n", "40"), "Error: Invalid value for '--n': cannot split 24 papers into 40 sessions: n must be 24 or fewer"),
])
def test_errors(run, args, message):
    result = run("map", *args)
    assert result.exit_code == (2 if "--n" in args else 1)  # --n out of range: bad usage
    assert result.output.strip() == message


def test_pca_is_the_principal_plane_with_fixed_signs():
    from sklearn.decomposition import PCA

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((30, 8)).astype(np.float32) * np.linspace(3, 0.5, 8, dtype=np.float32)
    coordinates = pca_2d(vectors)
    assert coordinates.shape == (30, 2)
    reference = PCA(n_components=2).fit_transform(vectors.astype(np.float64))
    signs = np.sign(np.sum(coordinates * reference, axis=0))
    np.testing.assert_allclose(coordinates, reference * signs, atol=1e-6)
    # The signs are a property of the data, not of the SVD's arbitrary choice: shuffling the papers or
    # reversing them never mirrors the map.
    order = rng.permutation(30)
    np.testing.assert_allclose(pca_2d(vectors[order]), coordinates[order], atol=1e-6)
    np.testing.assert_allclose(pca_2d(vectors[::-1].copy()), coordinates[::-1], atol=1e-6)


def test_few_papers_use_pca():
    coordinates, method = project_2d(np.eye(4, dtype=np.float32))
    assert (coordinates.shape, method) == ((4, 2), "PCA")


def test_recommender_map_method(workdir, fake_model, no_umap):
    from recommender import PaperIndex, build_index
    from recommender.reading.layout import build_map
    from recommender.reading.related import select_rows
    from recommender.render.map import write_map

    build_index([write_corpus(workdir / "in", topic_papers())])
    with PaperIndex.open() as index:
        corpus_map = build_map(index, select_rows(index, ["privacy-0", "privacy-1", "video-0", "video-1"]), n=2)
    assert (len(corpus_map.points), len(corpus_map.groups), corpus_map.projection) == (4, 2, "PCA")
    assert write_map(corpus_map, workdir / "m.html").read_text().count("<circle ") == 4


def test_png_without_matplotlib_is_a_clear_error(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = run("map", "--out", "map.png")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: a PNG map needs matplotlib: `pip install matplotlib`, or write map.html instead")


def page_data(path):
    page = path.read_text(encoding="utf-8")
    return json.loads(page.split('<script type="application/json" id="map-data">')[1].split("</script>")[0])


def test_each_point_carries_its_related_work_list(run, workdir, open_index):
    from recommender.reading.layout import build_map
    from recommender.reading.related import related_work, select_rows

    assert run("map", "--out", "map.html", "-k", "3").exit_code == 0
    data = page_data(workdir / "map.html")
    index = open_index()
    expected = list(related_work(index, range(len(index)), k=3))
    ids = [paper["id"] for paper in data["papers"]]
    assert ids == [listed.paper.id for listed in expected]
    for paper, listed in zip(data["papers"], expected):
        assert [(ids[near[0]], near[1]) for near in paper["near"]] == [
            (item.paper.id, round(item.score, 4)) for item in listed.related]
    # A map of some papers: neighbours off the map are named, not pointed at.
    rows = select_rows(index, ["privacy-0", "video-0"])
    corpus_map = build_map(index, rows, n=2, k=2)
    for point, listed in zip(corpus_map.points, related_work(index, rows, k=2)):
        assert [(near.id, near.label, near.point) for near in point.neighbours] == [
            (item.paper.id, item.paper.label, None) for item in listed.related]


def test_open_shows_the_written_map(run, workdir, monkeypatch):
    import click

    opened = []
    monkeypatch.setattr(click, "launch", lambda url, **kwargs: opened.append(url))
    assert run("map", "--out", "map.html", "--open").exit_code == 0
    assert opened == [str(workdir / "map.html")]
    assert run("map", "--out", "other.html").exit_code == 0
    assert len(opened) == 1


def test_names_never_overlap_at_the_zoom_they_appear():
    rng = np.random.default_rng(1)
    xy = rng.uniform(40, 900, size=(400, 2))
    names = [f"paper number {i} " + "x" * (i % 20) for i in range(400)]
    groups = [MapGroup(1, "1. some, session, words", 200, 300.0, 300.0)]
    labels = zoom_labels(xy, names, groups)
    shown_before = 0
    for level, scale in enumerate(ZOOM_LEVELS):
        shown = [i for i, label in enumerate(labels) if label.level is not None and label.level <= level]
        assert len(shown) >= shown_before  # more names as one zooms in
        shown_before = len(shown)
        placed = [i for i, label in enumerate(labels) if label.level == level]
        boxes = {i: name_box(xy[i] * scale, labels[i], names[i]) for i in shown}
        for i in placed:
            others = [box for j, box in boxes.items() if j != i]
            assert not any(overlap(boxes[i], box) for box in others)
            dots = [(x - 4, y - 4, x + 4, y + 4) for x, y in np.delete(xy, i, axis=0) * scale]
            assert not any(overlap(boxes[i], box) for box in dots)
    assert 0 < [label.level for label in labels].count(0) < shown_before


def name_box(at, label, name):
    width = len(short_name(name)) * 11 * 0.6
    x, y = at[0] + label.dx, at[1] + label.dy
    left = {"start": x, "end": x - width, "middle": x - width / 2}[label.anchor]
    return (left, y - 11 * 0.8, left + width, y + 11 * 0.25)


def overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_papers_at_the_same_spot_are_spread_apart(workdir, fake_model, no_umap, open_index):
    from recommender import build_index
    from recommender.reading.layout import build_map

    papers = topic_papers()
    for number, paper in enumerate(papers[:4]):  # the fake encoder reads no word of 3 letters or fewer
        paper["title"], paper["abstract"] = "Same words", f"The very same abstract words for these papers {number}."
    build_index([write_corpus(workdir / "in", papers)])
    corpus_map = build_map(open_index(), n=3)
    spots = {(point.x, point.y) for point in corpus_map.points}
    assert len(spots) == len(papers)
    same = [point for point in corpus_map.points if point.title == "Same words"]
    centre = np.mean([[p.x, p.y] for p in same], axis=0)
    assert [round(float(np.hypot(p.x - centre[0], p.y - centre[1])), 1) for p in same] == [1.0] * 4
@pytest.mark.parametrize("args", [["--n", "3"], ["--n", "4", "--seed", "2"], ["--n", "2", "--max-per-session", "14"]])
def test_colours_are_the_sessions_that_sessions_plans(run, workdir, args):
    assert run("map", "--out", "map.html", *args).exit_code == 0
    page = (workdir / "map.html").read_text(encoding="utf-8")
    data = page_data(workdir / "map.html")
    plan = json.loads(run("sessions", "--format", "json", *args).stdout)
    assert {paper["id"]: paper["group"] for paper in data["papers"]} == {
        paper["id"]: session["session"] for session in plan["sessions"] for paper in session["papers"]}
    assert [(group["number"], group["size"]) for group in data["groups"]] == [
        (session["session"], session["size"]) for session in plan["sessions"]]
    for group, session in zip(data["groups"], plan["sessions"]):
        assert group["label"].endswith(", ".join(session["label"]))
    # Each session has its own colour, the same on its points and its legend swatch.
    fill = dict((paper_id, colour) for colour, paper_id in re.findall(r'<circle [^>]*fill="([^"]+)"[^>]*data-id="([^"]+)"', page))
    swatch = {int(number): colour for number, colour in re.findall(
        r'data-g="(\d+)"[^>]*><span class="swatch" style="background:([^"]+)"', page)}
    assert sorted(swatch) == [session["session"] for session in plan["sessions"]]
    assert len(set(swatch.values())) == len(swatch)
    for session in plan["sessions"]:
        assert {fill[paper["id"]] for paper in session["papers"]} == {swatch[session["session"]]}


def test_tsne_map_of_a_small_index(workdir, papers_cli):
    """The projection users get (openTSNE is a dependency): no PCA swap here."""
    write_corpus(workdir / "in", topic_papers())
    assert papers_cli("build", "in").exit_code == 0
    result = papers_cli("map", "--out", "map.html", "--n", "3", "--seed", "1")
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (0, "wrote a map of 24 papers (t-SNE) to map.html")
    page = (workdir / "map.html").read_text(encoding="utf-8")
    assert "(t-SNE of their sentence embeddings)" in page
    papers = page_data(workdir / "map.html")["papers"]
    points = [(paper["x"], paper["y"]) for paper in papers]
    assert len(points) == 24 and len(set(points)) > 20  # laid out, not collapsed onto a few spots
    # Papers on one topic lie nearer each other than papers on different topics.
    ids = [paper["id"] for paper in papers]
    xy = np.array(points)
    topic = np.array([paper_id.split("-")[0] for paper_id in ids])
    distance = np.linalg.norm(xy[:, None] - xy[None], axis=2)
    same = topic[:, None] == topic[None]
    np.fill_diagonal(same, False)
    assert distance[same].mean() < 0.5 * distance[topic[:, None] != topic[None]].mean()
    # Seeded: the same page again.
    assert papers_cli("map", "--out", "again.html", "--n", "3", "--seed", "1").exit_code == 0
    assert (workdir / "again.html").read_bytes() == page.encode("utf-8")


def test_a_small_map_says_when_umap_starts(workdir, papers_cli, monkeypatch):
    """Under 100 papers a log shows no progress, but UMAP's first run compiles for 20-45 s: say so first."""
    import types

    said = []

    class SlowUMAP:  # stands in for umap.UMAP: records what was on stderr when it started
        def __init__(self, **options):
            pass

        def fit_transform(self, vectors):
            said.append(True)
            return np.asarray(vectors)[:, :2]

    monkeypatch.setitem(sys.modules, "umap", types.SimpleNamespace(UMAP=SlowUMAP))
    monkeypatch.setitem(sys.modules, "openTSNE", None)  # an install with umap-learn only
    write_corpus(workdir / "in", topic_papers())
    assert papers_cli("build", "in").exit_code == 0
    result = papers_cli("map", "--out", "map.html")
    assert result.exit_code == 0 and said
    lines = result.stderr.splitlines()
    assert "projecting with UMAP (its first run compiles it: 20-45 s)..." in lines
    assert lines[-1] == "wrote a map of 24 papers (UMAP) to map.html"
    assert papers_cli("map", "--out", "quiet.html", "--quiet").stderr == "wrote a map of 24 papers (UMAP) to quiet.html\n"


@pytest.mark.parametrize("seed", range(10))
def test_session_labels_never_overlap_each_other_on_a_crowded_sparse_map(seed):
    from recommender.reading.layout import GROUP_FONT, MapGroup, _box, _place_group_labels

    rng = np.random.default_rng(seed)
    xy = np.column_stack([rng.uniform(40, 1000, 150), rng.uniform(80, 700, 150)])  # points everywhere
    groups = [MapGroup(i + 1, f"{i + 1}. relation extraction, hate speech, machine translation", 10,
                       *rng.uniform(100, 900, 2)) for i in range(8)]
    boxes = [_box(g.x, g.y, g.label, GROUP_FONT, "middle") for g in _place_group_labels(groups, xy)]
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if overlap(a, b)]


def test_the_maps_script_and_style_are_files_of_the_package(run, workdir):
    import tomllib
    from fnmatch import fnmatch
    from importlib import resources
    from pathlib import Path

    from recommender.reading.layout import FONT, GROUP_FONT
    from recommender.render import map as map_module

    assert run("map", "--out", "map.html", "--n", "3").exit_code == 0
    page = (workdir / "map.html").read_text(encoding="utf-8")
    assets = resources.files("recommender.render") / "map_assets"
    script = (assets / "map.js").read_text(encoding="utf-8").removesuffix("\n")
    style = (assets / "map.css").read_text(encoding="utf-8").removesuffix("\n")
    assert script in page
    assert style.replace("@FONT@", f"{FONT:g}").replace("@GROUP_FONT@", f"{GROUP_FONT:g}") in page
    # Shipped in the wheel, and not kept a second time in Python strings.
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = pyproject["tool"]["setuptools"]["package-data"]["recommender.render"]
    assert all(any(fnmatch(f"map_assets/{name}", pattern) for pattern in shipped) for name in ("map.js", "map.css"))
    source = Path(map_module.__file__).read_text(encoding="utf-8")
    assert "addEventListener" not in source and "font-family" not in source


def test_a_stored_layout_is_the_projection_the_map_would_compute(workdir, papers_cli, no_umap, monkeypatch):
    """`papers build --map-layout` stores what projecting the index's vectors gives; the whole index's
    map reads it (the same page as projecting) and projects nothing; a rebuild keeps the setting; papers
    added since are projected with the rest (the stored layout no longer covers them)."""
    from recommender import PaperIndex
    from recommender.index.map_layout import stored_layout
    from recommender.reading import layout

    stored = str(workdir / "stored")
    write_corpus(workdir / "in", topic_papers())
    assert papers_cli("build", "in", "--index", stored, "--map-layout").exit_code == 0
    assert papers_cli("build", "in", "--index", "plain").exit_code == 0
    with PaperIndex.open(stored) as index:
        coordinates, projection = stored_layout(index.stored)
        expected, method = project_2d(index.vectors_at(range(len(index))))
    assert projection == method == "PCA" and np.array_equal(coordinates, expected)
    assert papers_cli("map", "--index", "plain", "--out", "plain.html").exit_code == 0

    def projected(*args, **options):
        raise AssertionError("projected again")

    with monkeypatch.context() as patch:
        patch.setattr(layout, "project_2d", projected)
        assert papers_cli("map", "--index", stored, "--out", "stored.html").exit_code == 0
    assert (workdir / "stored.html").read_bytes() == (workdir / "plain.html").read_bytes()

    write_corpus(workdir / "more", topic_papers()[:20])
    assert papers_cli("build", "more", "--index", stored).exit_code == 0  # no --map-layout: kept
    with PaperIndex.open(stored) as index:
        assert stored_layout(index.stored)[0].shape == (20, 2)
    write_corpus(workdir / "added", topic_papers()[20:])
    assert papers_cli("add", "added", "--index", stored, "--no-compact").exit_code == 0
    result = papers_cli("map", "--index", stored, "--out", "added.html")
    assert result.exit_code == 0 and "wrote a map of 24 papers (PCA)" in result.stderr
    assert papers_cli("build", "--compact", "--index", stored).exit_code == 0  # the layout follows
    with PaperIndex.open(stored) as index:
        coordinates, _ = stored_layout(index.stored)
        assert np.array_equal(coordinates, project_2d(index.vectors_at(range(len(index))))[0])
        assert coordinates.shape == (24, 2)
