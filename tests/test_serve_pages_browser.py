"""The web app's pages in a real headless browser (Debian's chromium driven by Playwright) against
a real server on 127.0.0.1: the map as a page of the app (its header and search, links both ways,
every live paper: those `papers add` added since the build, not those `papers remove` removed), and
a screenshot of every page into docs/images/pages/ for a person to look at
(scripts/compare_screenshots.py shows what changed; no test compares pixels). Skipped with the
reason when chromium is missing, except on CI (CI=true)."""

import contextlib
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip(
    "fastapi", reason="papers serve needs the serve extra: pip install -e '.[serve]'"
)

from browsing import reader_papers, watched_page  # noqa: E402
from corpus import write_corpus  # noqa: E402
from serving import build_fake_index, start_server, wait_until  # noqa: E402

HERE = Path(__file__).resolve().parent
PAGES = HERE.parent / "docs" / "images" / "pages"
LAUNCHER = HERE / "build_launcher.py"  # the real CLI in its own process, with the fake encoder


def prepared(server, *paths: str) -> None:
    """Wait until the map and plans are made (until then their pages say "being prepared")."""
    for path in paths:
        wait_until(lambda path=path: server.get(path)[0] == 200, seconds=120, step=0.5)


def papers_cli(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def watched(browser):
    with watched_page(browser, height=800) as watched:
        yield watched


@contextlib.contextmanager
def serving_map(tmp_path, papers):
    """(server, index folder) of these papers (the fake encoder), once its map is drawn; stopped at
    the end."""
    index_dir = build_fake_index(tmp_path / "index", papers)
    server = start_server(index_dir)
    try:
        map_ready(server)
        yield server, index_dir
    finally:
        server.stop()


def map_ready(server) -> None:
    prepared(server, "/map")


def test_the_map_is_a_page_of_the_app_linked_both_ways(watched, tmp_path):
    page, problems = watched
    papers = reader_papers()
    with serving_map(tmp_path, papers) as (server, index_dir):
        seed = papers[3]
        page.goto(server.url + "paper/" + urllib.parse.quote(seed["id"], safe=""))
        page.click("a.open-map")
        page.wait_for_url("**/map#*")
        page.wait_for_selector("#pinned h2")
        # The app's header: its navigation (the map marked as the page shown) and its search box.
        assert page.locator("header nav a.brand").inner_text() == "papers"
        assert page.locator("header nav a[aria-current=page]").inner_text() == "Map"
        assert page.locator("header form.search input#q").is_visible()
        assert page.title().endswith(index_dir.name)
        # The pinned paper links to its page in the app, and the link leads there.
        assert page.inner_text("#pinned h2") == seed["title"]
        own = page.locator("#pinned a.app-page")
        assert own.get_attribute("href") == "/paper/" + urllib.parse.quote(seed["id"], safe="")
        own.click()
        page.wait_for_url("**/paper/*")
        assert page.locator("h1.title").inner_text() == seed["title"]
        # The header's search works from the map.
        page.goto(server.url + "map")
        page.fill("header input#q", "privacy")
        page.press("header input#q", "Enter")
        page.wait_for_url("**/?q=privacy")
    assert problems == []


def test_the_map_shows_every_live_paper_added_and_not_removed(watched, tmp_path):
    page, problems = watched
    papers = reader_papers()
    with serving_map(tmp_path, papers) as (server, index_dir):
        page.goto(server.url + "map")
        assert page.locator("#points circle").count() == len(papers)
        added = {
            "id": "added-1",
            "title": "Federated privacy for added papers",
            "abstract": "We study privacy with federated gradient clipping, added after the build.",
        }
        papers_cli(
            "add",
            str(write_corpus(tmp_path / "new", [added])),
            "--index",
            str(index_dir),
            "--no-compact",
        )
        papers_cli("remove", papers[0]["id"], "--index", str(index_dir))
        map_ready(server)
        page.goto(server.url + "paper/added-1")
        page.click("a.open-map")
        page.wait_for_url("**/map#*")
        page.wait_for_selector("#pinned h2")
        assert page.inner_text("#pinned h2") == added["title"]
        ids = page.eval_on_selector_all("#points circle", "cs => cs.map(c => c.dataset.id)")
        assert "added-1" in ids and papers[0]["id"] not in ids and len(ids) == len(papers)
        assert page.inner_text("#map-head h1") == f"Map of {len(papers)} papers"
    assert problems == []


def test_the_names_shown_round_a_pinned_paper_never_overlap(watched, tmp_path):
    """The pinned paper's name and its nearest papers' names (bold) are placed apart as drawn; a
    name with no free place round its point is hidden, never drawn over another."""
    page, problems = watched
    papers = reader_papers()
    for paper in papers:  # long names, crowded together: the case where they used to overlap
        paper["title"] = "A rather long title about " + paper["title"]
    with serving_map(tmp_path, papers) as (server, _):
        page.goto(server.url + "map")
        for paper in papers:
            page.evaluate("id => { location.hash = encodeURIComponent(id); }", paper["id"])
            page.wait_for_function(
                "title => (document.querySelector('#pinned h2') || {}).textContent === title",
                arg=paper["title"],
            )
            boxes = page.eval_on_selector_all(
                "#names text.show:not(.covered)",
                "ts => ts.map(t => { const r = t.getBoundingClientRect();"
                " return [r.left, r.top, r.right, r.bottom]; })",
            )
            assert len(boxes) >= 2, paper["id"]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1 :]:
                    assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (
                        paper["id"],
                        a,
                        b,
                    )
    assert problems == []


# name -> (path, what to do on the page before the picture); taken at a fixed window size over the
# seed papers, so that a change in a picture is a change of the page.
SCREENS = {
    "home": ("", None),
    "search": ("?q=differential%20privacy", None),
    "paper": ("paper/FlashDP", None),
    "tag": ("tags/reading", None),
    "feed": ("feed?tag=reading&since=2000-01-01", None),
    "map": ("map#{pinned}", "#pinned h2"),
    "sessions": ("sessions?n=4", "ol, table, section"),
}
PHONE = {"home-phone": "", "paper-phone": "paper/FlashDP", "map-phone": "map#{pinned}"}


def test_screenshots_of_every_page(browser, tmp_path):
    """docs/images/pages/*.png: every page of the app as a reader sees it (docs/serve.md shows
    them); scripts/compare_screenshots.py puts them beside the previous ones for a person to look
    at. Each page loads without a script error or a refused resource."""
    from conftest import SEEDS

    from recommender.corpus.papers import read_papers

    seeds = [paper.to_dict() for paper in read_papers([SEEDS])]
    index_dir = build_fake_index(tmp_path / "seeds", seeds)
    server = start_server(index_dir)
    PAGES.mkdir(parents=True, exist_ok=True)
    try:
        status, pinned = server.json("/api/papers/FlashDP")
        assert status == 200
        for handle in ("FlashDP", seeds[1]["id"]):
            status, paper = server.json(f"/api/papers/{urllib.parse.quote(handle, safe='')}")
            path = f"/api/tags/reading/{urllib.parse.quote(paper['id'], safe='')}"
            assert server.json(path, method="PUT")[0] == 200
        prepared(server, "/map", "/sessions?n=4")
        shots = [(name, path, wait, 1200, 800) for name, (path, wait) in SCREENS.items()]
        shots += [(name, path, None, 390, 844) for name, path in PHONE.items()]
        for name, path, wait, width, height in shots:
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            problems = []
            page.on("pageerror", lambda error, seen=problems: seen.append(f"page error: {error}"))
            page.on(
                "console",
                lambda message, seen=problems: (
                    seen.append(message.text) if message.type == "error" else None
                ),
            )
            url = server.url + path.format(pinned=urllib.parse.quote(pinned["id"], safe=""))
            response = page.goto(url)
            assert response.status == 200, (name, response.status)
            page.wait_for_load_state("load")
            if wait or "map" in name:
                page.wait_for_selector(wait or "#pinned h2")
            page.screenshot(path=str(PAGES / f"{name}.png"))
            context.close()
            assert problems == [], (name, problems)
        if "tag" in SCREENS:  # the tag page shows why each paper is recommended
            status, body = server.get("/tags/reading")[0], server.get("/tags/reading")[2]
            assert status == 200 and b"Because of" in body
    finally:
        server.stop()
    assert sorted(p.stem for p in PAGES.glob("*.png")) == sorted([*SCREENS, *PHONE])


def test_the_session_plans_cover_every_live_paper_added_and_not_removed(tmp_path):
    """/api/sessions plans the papers `papers add` added since the build, not those removed."""
    papers = reader_papers()
    index_dir = build_fake_index(tmp_path / "index", papers)
    added = {
        "id": "added-1",
        "title": "Federated privacy for added papers",
        "abstract": "We study privacy with federated gradient clipping, added after the build.",
    }
    papers_cli("add", str(write_corpus(tmp_path / "new", [added])), "--index", str(index_dir),
               "--no-compact")  # fmt: skip
    papers_cli("remove", papers[0]["id"], "--index", str(index_dir))
    server = start_server(index_dir)
    try:
        prepared(server, "/api/sessions?n=2")
        status, plan = server.json("/api/sessions?n=2")
    finally:
        server.stop()
    assert status == 200, plan
    planned = {paper["id"] for session in plan["sessions"] for paper in session["papers"]}
    assert "added-1" in planned and papers[0]["id"] not in planned
    assert len(planned) == len(papers)
