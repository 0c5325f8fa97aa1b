"""map: every paper drawn, self-contained HTML, PNG, determinism."""

import re
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from corpus import write_corpus
from recommender.cli import main
from recommender.reading.layout import pca_2d, project_2d
from test_sessions import topic_papers


@pytest.fixture
def no_umap(monkeypatch):
    """PCA instead of UMAP: the same code path after projection, and no numba start-up in fast tests."""
    monkeypatch.setitem(sys.modules, "umap", None)


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
    ids = re.findall(r'<circle [^>]*data-id="([^"]+)"', page)
    assert sorted(ids) == sorted(paper["id"] for paper in topic_papers())
    assert len(re.findall(r'<text class="group"', page)) == 3
    assert len(re.findall(r'<text class="name"', page)) >= 12  # most papers are named on the map
    # Offline: no external scripts, styles, fonts or images.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert "@import" not in page and "url(" not in page
    assert page.count("<script>") == 1


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
    write_corpus(workdir / "in", papers)
    runner = CliRunner()
    assert runner.invoke(main, ["build", "in"]).exit_code == 0
    assert runner.invoke(main, ["map", "--out", "map.html"]).exit_code == 0
    page = (workdir / "map.html").read_text(encoding="utf-8")
    assert page.count("<script>") == 1 and page.count("</script>") == 1
    assert "<b>bold</b>" not in page


@pytest.mark.parametrize("args,message", [
    (("--out", "map.svg"), "Error: map.svg: cannot tell the map format from the name: end it in .html or .png"),
    (("--out", "map.html", "--n", "40"), "Error: cannot split 24 papers into 40 sessions: use --n 24 or fewer"),
])
def test_errors(run, args, message):
    result = run("map", *args)
    assert result.exit_code == 1
    assert result.output.strip() == message


def test_pca_is_deterministic():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((30, 8)).astype(np.float32)
    first = pca_2d(vectors)
    assert first.shape == (30, 2)
    np.testing.assert_array_equal(first, pca_2d(vectors.copy()))


def test_few_papers_use_pca():
    coordinates, method = project_2d(np.eye(4, dtype=np.float32))
    assert (coordinates.shape, method) == ((4, 2), "PCA")


def test_recommender_map_method(workdir, fake_model, no_umap):
    from recommender import Recommender, build_index
    from recommender.reading.layout import build_map
    from recommender.reading.related import select_rows
    from recommender.render.map import write_map

    build_index([write_corpus(workdir / "in", topic_papers())])
    with Recommender.open() as index:
        corpus_map = build_map(index, select_rows(index, ["privacy-0", "privacy-1", "video-0", "video-1"]), n=2)
    assert (len(corpus_map.points), len(corpus_map.groups), corpus_map.projection) == (4, 2, "PCA")
    assert write_map(corpus_map, workdir / "m.html").read_text().count("<circle ") == 4


def test_png_without_matplotlib_is_a_clear_error(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = run("map", "--out", "map.png")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: a PNG map needs matplotlib: `pip install matplotlib`, or write map.html instead")
