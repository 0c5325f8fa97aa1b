"""A tag's page in a real headless browser (chromium through Playwright, a real server on 127.0.0.1):
"because of" with each recommendation, linking to "inspect" with the shared terms; "Not interested" and
"Seen" buttons. Skipped with the reason when chromium is missing, except on CI (CI=true)."""

import pytest

pytest.importorskip("fastapi", reason="papers serve needs the serve extra: pip install -e '.[serve]'")

from serving import build_fake_index, start_server  # noqa: E402
from corpus import two_topic_papers  # noqa: E402


def test_a_tag_page_says_because_of_and_takes_not_interested_and_seen(browser, tmp_path):  # noqa: F811
    index_dir = build_fake_index(tmp_path / "index", two_topic_papers())
    server = start_server(index_dir)
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda message: problems.append(f"console: {message.text}") if message.type == "error" else None)
    try:
        for paper in ("privacy-0", "privacy-1", "video-0"):
            assert server.json(f"/api/tags/mine/{paper}", method="PUT")[0] == 200
        page.goto(server.url + "tags/mine")
        cards = page.locator("ol.papers > li")
        expected = server.json("/api/tags/mine/recommendations?k=10&why=true")[1]
        assert page.locator("ol.papers article.paper .title a").all_inner_texts() == [row["title"] for row in expected]
        because = cards.first.locator("p.because")
        assert because.inner_text().startswith("Because of ")
        assert because.locator("a").all_inner_texts() == [seed["handle"] for seed in expected[0]["because"]]

        # Not interested: gone from the list, named on the page, a negative seed of the tag's profile
        first = expected[0]["id"]
        cards.first.locator("form.mark button.not").click()
        page.wait_for_url("**/tags/mine")
        assert first not in [row["id"] for row in server.json("/api/tags/mine/recommendations?k=10")[1]]
        assert expected[0]["title"] in page.locator("section.marked.not").inner_text()
        assert server.json("/api/marks/not/mine")[1]["papers"] == [first]
        # Seen: left out of the page from now on
        shown = server.json("/api/tags/mine/recommendations?k=10")[1][0]
        assert page.locator("ol.papers article.paper .title a").first.inner_text() == shown["title"]
        page.locator("ol.papers > li").first.locator("form.mark button.seen").click()
        page.wait_for_url("**/tags/mine")
        assert shown["title"] not in page.locator("ol.papers article.paper .title a").all_inner_texts()
        assert page.locator("section.marked.seen h2").inner_text() == "1 marked seen"

        # "Because of" links to inspect: the paper against that seed, with their shared terms
        link = page.locator("ol.papers > li").first.locator("p.because a").first
        seed_handle = link.inner_text()
        link.click()
        page.wait_for_url("**/inspect?*")
        assert page.locator("dl.why dt").all_inner_texts()[:3] == ["Embedding cosine", "TF-IDF cosine", "Shared terms"]
        assert seed_handle in page.content()
    finally:
        context.close()
        server.stop()
    assert problems == []
