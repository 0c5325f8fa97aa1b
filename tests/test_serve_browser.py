"""`papers serve` in a real headless browser (Debian's chromium driven by Playwright), against a real
server on 127.0.0.1: a reader's path through the pages (search from the box, "similar", tag two papers,
the tag's recommendations, the map from a paper), and a hostile corpus whose every field tries to run a
script, on every page. Skipped with the reason when chromium is missing, except on CI (CI=true)."""

import re
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="papers serve needs the serve extra: pip install -e '.[serve]'")

from browsing import reader_papers, watched_page  # noqa: E402
from corpus import HOSTILE_PAPERS  # noqa: E402
from serving import build_fake_index, start_server, wait_until  # noqa: E402

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "images" / "serve.png"


@pytest.fixture
def watched(browser):
    with watched_page(browser, height=900) as watched:
        yield watched


def test_a_reader_searches_opens_similar_tags_two_papers_and_gets_recommendations(watched, tmp_path):
    page, problems = watched
    index_dir = build_fake_index(tmp_path / "index", reader_papers(categories=True))
    server = start_server(index_dir)
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    try:
        page.goto(server.url)
        assert page.title().endswith(index_dir.name)
        page.keyboard.press("/")  # focuses the search box, as on arxiv-sanity-lite
        page.keyboard.type("privacy")
        page.keyboard.press("Enter")
        page.wait_for_url("**/?q=privacy")
        titles = page.locator("article.paper .title a").all_inner_texts()
        assert titles and titles[0].startswith("Differential privacy")
        first = page.locator("article.paper").first
        assert first.locator("ul.categories li").all_inner_texts() == ["cs.CR", "cs.LG"]
        first.locator("details summary").click()
        assert first.locator(".abstract").is_visible()

        first.locator("a.similar").click()
        page.wait_for_url("**/?pid=*")
        seed = page.locator(".seed .title a").inner_text()
        similar = page.locator("ol.papers article.paper .title a").all_inner_texts()
        assert seed == titles[0] and seed not in similar and len(similar) == 17  # every other paper

        # Tag the seed and the first similar paper with the card's form, by keyboard
        for card in (page.locator(".seed article.paper"), page.locator("ol.papers article.paper").first):
            card.locator("form.tag input[name=tag]").fill("privacy-reading")
            card.locator("form.tag input[name=tag]").press("Enter")
            page.wait_for_load_state()
            assert page.url.split("/", 3)[-1].startswith("?pid="), page.content()[-1500:]
        assert server.json("/api/tags")[1][0]["tag"] == "privacy-reading"
        tagged_ids = server.json("/api/tags")[1][0]["papers"]
        assert len(tagged_ids) == 2

        page.goto(server.url + "tags")
        page.click("text=privacy-reading")
        page.wait_for_url("**/tags/privacy-reading")
        assert len(page.locator("ul.tagged li").all()) == 2
        recommended = page.locator("ol.papers article.paper .title a").all_inner_texts()
        status, expected = server.json("/api/tags/privacy-reading/recommendations?k=10")
        assert recommended == [item["title"] for item in expected] and recommended
        assert all(item["id"].startswith("privacy-") for item in expected[:3])

        # The map from a paper's page: the paper pinned with its related papers
        prepared(server, "/map")
        page.goto(server.url + "paper/" + urllib.parse.quote(tagged_ids[0], safe=""))
        page.click("a.open-map")
        page.wait_for_url("**/map#*")
        page.wait_for_selector("#pinned h2")
        assert page.inner_text("#pinned h2") == seed
        assert page.locator("#pinned ol.near li").count() == 5

        # "inspect": the shared terms and both cosines
        page.goto(server.url + "?pid=" + urllib.parse.quote(tagged_ids[0]))
        page.locator("ol.papers a.inspect").first.click()
        page.wait_for_url("**/inspect?*")
        assert page.locator("dl.why dt").all_inner_texts()[:3] == ["Embedding cosine", "TF-IDF cosine", "Shared terms"]
    finally:
        server.stop()
    assert problems == []
    assert all(url.startswith(server.url) for url in requests)  # nothing from another origin (no CDN)


def prepared(server, *paths: str) -> None:
    """Wait until the map and plans are made (in the background: until then their pages say "being
    prepared", status 202, and reload themselves)."""
    for path in paths:
        wait_until(lambda: server.get(path)[0] == 200, seconds=120, step=0.5)


def test_the_docs_screenshot_shows_the_seed_papers(watched, tmp_path):
    """README.md's and docs/serve.md's picture of the web app: the papers like one seed paper, its
    abstract open, over the seed papers' real abstracts (seeds/)."""
    from conftest import SEEDS
    from recommender.corpus.papers import read_papers

    page, problems = watched
    seeds = [paper.to_dict() for paper in read_papers([SEEDS])]
    index_dir = build_fake_index(tmp_path / "seeds", seeds)
    server = start_server(index_dir)
    try:
        status, seed = server.json("/api/papers/FlashDP")  # the README's example paper, by its handle
        assert status == 200
        page.goto(server.url + "?pid=" + urllib.parse.quote(seed["id"]))
        page.locator(".seed details summary").click()
        assert page.locator(".seed .abstract").inner_text().strip()
        shown = page.locator("ol.papers article.paper .title a").all_inner_texts()
        assert len(shown) >= 10
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
    finally:
        server.stop()
    assert problems == []
    # The pages that show the picture say what it shows.
    for shown_in in (SCREENSHOT.parents[2] / "README.md", SCREENSHOT.parents[1] / "serve.md"):
        alt = re.search(r"!\[([^\]]*)\]\([^)]*images/serve\.png\)", shown_in.read_text(encoding="utf-8"))
        assert alt and "FlashDP" in alt.group(1) and "seed papers" in alt.group(1), shown_in.name


HOSTILE_TAG = '"><img src=x onerror=window.attacked=23>/<script>window.attacked=24</script>'


def hostile_pages(server) -> list[str]:
    ids = [paper["id"] for paper in HOSTILE_PAPERS]
    for paper_id in ids[:3]:
        status, body = server.json(f"/api/tags/x%0Ay/{urllib.parse.quote(paper_id, safe='')}",
                                   method="PUT")
        assert status == 400  # not a tag name
        assert server.json(f"/api/tags/evil/{urllib.parse.quote(paper_id, safe='')}", method="PUT")[0] == 200
        assert server.json("/api/tags?" + urllib.parse.urlencode({"tag": HOSTILE_TAG, "paper": paper_id}),
                           method="PUT")[0] == 200  # any printable name: escaped wherever it is shown
    pages = ["", "?q=" + urllib.parse.quote("<script>window.attacked=20</script> private"), "?tags=evil",
             "?pid=" + urllib.parse.quote(ids[0]), "tags", "tags/evil", "sessions?n=2", "map", "docs",
             "tags/" + urllib.parse.quote(HOSTILE_TAG, safe=""), "?tags=" + urllib.parse.quote(HOSTILE_TAG),
             "paper/" + urllib.parse.quote("<script>window.attacked=21</script>", safe=""),
             "?q=" + urllib.parse.quote('"><img src=x onerror=window.attacked=22>')]
    for paper_id in ids:
        pages.append("paper/" + urllib.parse.quote(paper_id, safe=""))
        pages.append("inspect?" + urllib.parse.urlencode({"id": paper_id, "pid": ids[3]}))
    return pages


def test_the_hostile_corpus_runs_no_script_on_any_page(watched, tmp_path):
    page, problems = watched
    index_dir = build_fake_index(tmp_path / "index", HOSTILE_PAPERS)
    server = start_server(index_dir)
    try:
        prepared(server, "/map", "/sessions?n=2")
        for path in hostile_pages(server):
            response = page.goto(server.url + path)
            assert response.status == (404 if "attacked%3D21" in path else 200), path
            if response.status == 404:  # chromium logs the page's own status; nothing else may be logged
                page.wait_for_load_state("load")
                problems.remove("console: Failed to load resource: the server responded with a status of 404 (Not Found)")
            page.wait_for_load_state("load")
            for details in page.locator("details").all():  # the abstracts shown too
                details.locator("summary").click()
            page.mouse.move(300, 300)
            assert page.evaluate("window.attacked") is None, path
            assert page.evaluate("document.querySelectorAll('script:not([src]):not([type=\"application/json\"])').length") == 0, path
            links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
            assert not [link for link in links if link.lower().lstrip().startswith(("javascript:", "data:"))], path
            assert problems == [], (path, problems)
        page.goto(server.url + "paper/" + urllib.parse.quote(HOSTILE_PAPERS[0]["id"], safe=""))
        assert page.locator("h1.title").inner_text().startswith("<img src=x onerror='window.attacked=3'> & co")
        assert page.locator(".url").first.inner_text() == "javascript:window.attacked = 5"  # shown, not a link
        assert page.locator("ul.categories li").first.inner_text() == "<script>window.attacked=16</script>"
    finally:
        server.stop()
    assert problems == []


def test_every_action_says_what_it_did_and_can_be_undone(watched, tmp_path):
    """Tagging says it worked (once, after the redirect) and offers an undo; "Because of" and the mark
    buttons are part of their card; papers marked not interested or seen are listed on the tag page and
    taken back there (a collection's papers: tests/test_zotero.py)."""
    page, problems = watched
    papers = reader_papers(categories=True)
    index_dir = build_fake_index(tmp_path / "index", papers)
    server = start_server(index_dir)
    flash = page.locator(".flash[role=status]")
    try:
        # Tag from a card: the page says so, with an undo; a reload does not say it again
        page.goto(server.url + "paper/" + papers[0]["id"])
        page.locator(".seed form.tag input[name=tag]").fill("<b>mine</b>")
        page.locator(".seed form.tag button").click()
        page.wait_for_load_state()
        assert flash.locator(".flash-text").inner_text() == f"Tagged “{papers[0]['title']}” “<b>mine</b>”."
        assert flash.locator("b").count() == 0  # escaped
        flash.locator("button", has_text="Undo").click()
        page.wait_for_load_state()
        assert flash.inner_text().startswith(f"Removed the tag “<b>mine</b>” from “{papers[0]['title']}”.")
        assert server.json("/api/tags")[1] == []
        flash.locator("button", has_text="Undo").click()
        page.wait_for_load_state()
        assert server.json("/api/tags")[1][0] == {"tag": "<b>mine</b>", "papers": [papers[0]["id"]]}
        page.reload()
        assert flash.count() == 0

        # "Because of" and the mark buttons inside their card, above its separator
        for paper in papers[:3]:
            server.get(f"/api/tags/mine/{paper['id']}", method="PUT")
        page.goto(server.url + "tags/mine")
        cards = page.locator("ol.papers > li")
        assert cards.count() >= 3
        for number in range(3):
            card = cards.nth(number).locator("article.paper")
            assert card.locator("p.because").count() == 1 and card.locator("form.mark").count() == 2
            box, below = card.bounding_box(), card.locator(".marks").bounding_box()
            assert below["y"] + below["height"] <= box["y"] + box["height"]
        title = cards.first.locator(".title a").inner_text()

        # Not interested: said, listed, taken back from the list
        cards.first.locator("form.mark button.not").click()
        page.wait_for_url("**/tags/mine")
        assert flash.locator(".flash-text").inner_text().startswith(f"Marked “{title}” not interested for “mine”")
        listed = page.locator("section.marked.not li")
        assert listed.all_inner_texts() and title in listed.first.inner_text()
        listed.first.locator("button", has_text="take back").click()
        page.wait_for_url("**/tags/mine")
        assert flash.locator(".flash-text").inner_text() == f"Took back the not interested mark of “{title}” for “mine”."
        assert server.json("/api/marks/not/mine")[1]["papers"] == []
        assert page.locator("section.marked.not").count() == 0

        # Seen: said, listed, undone from the message
        page.locator("ol.papers > li").first.locator("form.mark button.seen").click()
        page.wait_for_url("**/tags/mine")
        assert len(server.json("/api/marks/seen/mine")[1]["papers"]) == 1
        assert page.locator("section.marked.seen li").count() == 1
        flash.locator("button", has_text="Undo").click()
        page.wait_for_url("**/tags/mine")
        assert server.json("/api/marks/seen/mine")[1]["papers"] == []

    finally:
        server.stop()
    assert problems == []
