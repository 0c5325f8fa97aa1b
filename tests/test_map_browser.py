"""The HTML map in a real headless browser (Debian's chromium driven by Playwright):
search, pinning a paper with its related-work list, sessions on and off, zoom, pan,
and the page without JavaScript. Skipped with the reason when chromium is missing,
except on CI (CI=true), where a missing browser fails."""

import sys

import pytest

from corpus import topic_papers, write_corpus
from fakes import FakeEncoder
from recommender.reading.layout import ZOOM_LEVELS, build_map
from recommender.reading.related import related_work
from recommender.render.map import write_map

ATTACK = "</script><script>window.attacked = 1</script><!--"


def map_papers():
    papers = topic_papers(per_topic=12)
    for paper in papers:  # a word of its own, so that no two papers lie at the same spot
        paper["abstract"] = paper["abstract"].replace("We study", f"We study {paper['id'].replace('-', 'x')}", 1)
    by_id = {paper["id"]: paper for paper in papers}
    by_id["privacy-0"]["authors"] = ["Ada Lovélace", "Grace Hopper"]
    by_id["privacy-1"]["authors"] = ["Ada Lovelace"]
    by_id["privacy-0"]["url"] = "https://example.org/paper/privacy-0"
    by_id["privacy-0"]["venue"], by_id["privacy-0"]["year"] = "ICLR 2020", 2020
    by_id["privacy-1"]["venue"], by_id["privacy-1"]["year"] = "NeurIPS", 2021
    by_id["privacy-0"]["abstract"] += " Code at https://github.com/lab/privacy-zero and https://github.com/lab/extra."
    by_id["privacy-2"]["url"] = "javascript:window.attacked = 2"
    by_id["privacy-3"]["title"] = "<img src=x onerror='window.attacked=3'> & co"
    by_id["privacy-3"]["abstract"] += " " + ATTACK
    return papers


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A map of 36 papers (fake encoder, PCA), the CorpusMap and each paper's related-work list."""
    folder = tmp_path_factory.mktemp("map")
    encoder = FakeEncoder()
    with pytest.MonkeyPatch.context() as patch:
        from recommender import PaperIndex, build_index
        from recommender.embed import loading
        from recommender.index import build
        from recommender.query import paper_index

        patch.setattr(loading, "load_encoder", lambda model: encoder)
        patch.setattr(paper_index, "load_query_encoder", lambda stored, model: encoder)
        patch.setattr(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None)
        patch.setitem(sys.modules, "umap", None)
        patch.setitem(sys.modules, "openTSNE", None)
        build_index([write_corpus(folder / "in", map_papers())], index=folder / "index")
        with PaperIndex.open(folder / "index") as index:
            corpus_map = build_map(index, n=3)
            related = {listed.paper.id: [item.paper.label for item in listed.related]
                       for listed in related_work(index, range(len(index)), k=5)}
    path = write_map(corpus_map, folder / "map.html")
    return path, corpus_map, related


@pytest.fixture
def page(browser, written):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(written[0].as_uri())
    yield page
    assert page.evaluate("window.attacked") is None
    assert problems == []
    assert set(requests) == {written[0].as_uri()}  # nothing fetched but the page itself
    context.close()


def ids_with(page, selector):
    return sorted(page.eval_on_selector_all(selector, "els => els.map(e => e.dataset.id)"))


def visible_ids(page):
    return sorted(page.eval_on_selector_all(
        "#points circle", "els => els.filter(e => getComputedStyle(e).display !== 'none').map(e => e.dataset.id)"))


def shown_names(page):
    return page.eval_on_selector_all("#names text", "els => els.filter(e => getComputedStyle(e).display !== 'none')"
                                     ".map(e => +e.dataset.i)")


@pytest.mark.parametrize("query,expected", [
    ("lovelace", ["privacy-0", "privacy-1"]),  # authors, accents folded
    ("GRACE hop", ["privacy-0"]),  # every word, any case
    ("video-1", ["video-1", "video-10", "video-11"]),  # IDs
    ("spanner", None),  # titles: every paper whose title names it
    ("no such paper", []),
])
def test_search_highlights_matching_papers(page, written, query, expected):
    corpus_map = written[1]
    if expected is None:
        expected = sorted(p.id for p in corpus_map.points if query in p.title.lower())
        assert expected
    page.fill("#search", query)
    assert ids_with(page, "#points circle.hit") == expected
    assert page.inner_text("#count span") == f"{len(expected)} of {len(corpus_map.points)} papers match"
    titles = {p.id: p.title for p in corpus_map.points}
    listed = page.eval_on_selector_all("#results button.paper", "els => els.map(e => e.firstChild.textContent)")
    assert sorted(listed) == sorted(titles[i] for i in expected)
    page.fill("#search", "")
    assert ids_with(page, "#points circle.hit") == []
    assert page.inner_text("#count") == ""


def click_point(page, corpus_map, paper_id):
    """Click the point of a paper where no other point covers it, zooming in on it (as a user would) until
    there is such a place."""
    i = next(i for i, p in enumerate(corpus_map.points) if p.id == paper_id)
    for _ in range(12):
        box = page.locator(f'#points circle[data-i="{i}"]').bounding_box()
        spots = [(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
                 for fx in (0.5, 0.3, 0.7) for fy in (0.5, 0.3, 0.7)]
        for x, y in spots:
            if page.evaluate("([x, y]) => document.elementFromPoint(x, y).dataset.i", [x, y]) == str(i):
                page.mouse.click(x, y)
                return
        page.mouse.move(*spots[0])
        page.mouse.wheel(0, -300)
    raise AssertionError(f"{paper_id} stays covered by other points")


def pinned_neighbours(page):
    return page.eval_on_selector_all(
        "#pinned ol.near li", "els => els.map(e => (e.querySelector('button') || e.firstChild).firstChild.textContent)")


def test_clicking_a_paper_pins_it_with_its_related_work_and_links(page, written):
    _, corpus_map, related = written
    click_point(page, corpus_map, "privacy-0")
    assert page.inner_text("#pinned h2") == "Differential privacy 0"
    assert pinned_neighbours(page) == related["privacy-0"]
    assert len(related["privacy-0"]) == 5
    assert page.inner_text("#pinned .authors") == "Ada Lovélace, Grace Hopper"
    assert page.inner_text("#pinned .published") == "ICLR 2020"  # the venue holds the year: not "ICLR 2020 2020"
    click_point(page, corpus_map, "privacy-1")
    assert page.inner_text("#pinned .published") == "NeurIPS 2021"
    click_point(page, corpus_map, "privacy-0")
    links = page.eval_on_selector_all("#pinned .links a", "els => els.map(e => [e.textContent, e.href])")
    assert links == [["Paper", "https://example.org/paper/privacy-0"],
                     ["Code 1", "https://github.com/lab/privacy-zero"], ["Code 2", "https://github.com/lab/extra"]]
    assert ids_with(page, "#points circle.pin") == ["privacy-0"]
    near = [p.id for p in corpus_map.points if p.title in related["privacy-0"]]
    assert ids_with(page, "#points circle.near") == sorted(near)
    assert page.locator("#links line").count() == 5
    assert page.evaluate("location.hash") == "#privacy-0"
    # "zoom to them" brings the paper and its neighbours into view.
    page.click("#pinned h3 button.fit")
    area = page.locator("#map svg").bounding_box()
    for paper_id in ["privacy-0", *near]:
        box = page.locator(f'#points circle[data-id="{paper_id}"]').bounding_box()
        assert area["x"] <= box["x"] <= area["x"] + area["width"] and area["y"] <= box["y"] <= area["y"] + area["height"]
    # A neighbour in the list pins that paper; Esc unpins.
    page.click("#pinned ol.near li:first-child button")
    first = page.inner_text("#pinned h2")
    assert first == related["privacy-0"][0]
    assert pinned_neighbours(page) == related[next(p.id for p in corpus_map.points if p.title == first)]
    page.keyboard.press("Escape")
    assert page.locator("#pinned").is_hidden()
    assert ids_with(page, "#points circle.pin") == [] and page.locator("#links line").count() == 0


def test_every_paper_pins_exactly_its_related_work_list(page, written):
    _, corpus_map, related = written
    for point in corpus_map.points:
        page.evaluate("id => { location.hash = '#' + id; }", point.id)
        assert page.inner_text("#pinned h2") == point.title
        assert pinned_neighbours(page) == related[point.id]


def test_paper_text_shows_as_text_and_bad_links_are_not_links(page, written):
    corpus_map = written[1]
    click_point(page, corpus_map, "privacy-3")
    assert page.inner_text("#pinned h2") == "<img src=x onerror='window.attacked=3'> & co"
    page.click("#pinned details summary")
    assert page.inner_text("#pinned details p").endswith(ATTACK)
    click_point(page, corpus_map, "privacy-2")
    assert page.locator("#pinned .links a").count() == 0
    assert page.inner_text("#pinned .links") == "Paper: javascript:window.attacked = 2"


def test_legend_entries_toggle_sessions(page, written):
    corpus_map = written[1]
    everyone = sorted(p.id for p in corpus_map.points)
    first = sorted(p.id for p in corpus_map.points if p.group == 1)
    assert visible_ids(page) == everyone
    button = page.locator('#legend button[data-g="1"]')
    button.click()
    assert button.get_attribute("aria-pressed") == "false"
    assert visible_ids(page) == sorted(set(everyone) - set(first))
    assert page.locator("#groups text.g1").is_hidden()
    button.click()
    assert button.get_attribute("aria-pressed") == "true"
    assert visible_ids(page) == everyone


def test_zooming_in_shows_more_names_and_dragging_pans(page, written):
    corpus_map = written[1]
    levels = [p.label.level for p in corpus_map.points]
    assert 0 < levels.count(0) < len(levels)  # the test needs names that only fit further in
    assert sorted(shown_names(page)) == [i for i, level in enumerate(levels) if level == 0]
    before = float(page.get_attribute("#map svg", "data-scale"))
    for _ in range(5):
        page.click("#zoom-in")
    scale = float(page.get_attribute("#map svg", "data-scale"))
    assert scale == pytest.approx(before * 1.5 ** 5, rel=1e-3)
    reached = max(level for level, at in enumerate(ZOOM_LEVELS) if scale >= at * 0.999)
    expected = [i for i, level in enumerate(levels) if level is not None and level <= reached]
    assert len(expected) > levels.count(0)
    assert sorted(shown_names(page)) == expected
    # Points, names and the names' halos keep their size on screen (a halo that grew would hide the points).
    sizes = page.evaluate("""() => {
        const name = getComputedStyle(document.querySelector('#names text'));
        const point = document.querySelector('#points circle').getBoundingClientRect();
        return [parseFloat(name.fontSize), parseFloat(name.strokeWidth), point.width];
    }""")
    assert [sizes[0] * scale, sizes[1] * scale, sizes[2]] == pytest.approx([11, 3, 8], rel=0.02)
    # The mouse wheel zooms too; a drag moves the view; the fit button goes back.
    box = page.locator("#map svg").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 300)
    assert float(page.get_attribute("#map svg", "data-scale")) < scale
    view = page.get_attribute("#map svg", "viewBox")
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 100, box["y"] + box["height"] / 2 + 50, steps=5)
    page.mouse.up()
    assert page.get_attribute("#map svg", "viewBox") != view
    page.click("#zoom-fit")
    assert float(page.get_attribute("#map svg", "data-scale")) == pytest.approx(before, rel=1e-3)
    assert sorted(shown_names(page)) == [i for i, level in enumerate(levels) if level == 0]


def boxes(page, selector):
    """Screen boxes of the elements drawn (shown, not hidden) that match."""
    return page.eval_on_selector_all(selector, """els => els.filter(e => {
        const style = getComputedStyle(e);
        return style.display !== 'none' && style.visibility !== 'hidden';
    }).map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })""")


def touching(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize("width", [1400, 1000, 800])
def test_session_labels_never_touch_each_other_or_the_names_shown(browser, written, width):
    path, corpus_map, _ = written
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(path.as_uri())
    try:
        def check():
            labels, names = boxes(page, "#groups text"), boxes(page, "#names text")
            assert labels  # the biggest session keeps its label
            assert not [(a, b) for i, a in enumerate(labels) for b in labels[i + 1:] if touching(a, b)]
            assert not [(a, b) for a in labels for b in names if touching(a, b)]

        check()
        for point in corpus_map.points:  # every paper pinned in turn: its name and its neighbours' are shown
            page.evaluate("id => { location.hash = '#' + id; }", point.id)
            check()
        page.keyboard.press("Escape")
        page.fill("#search", "privacy")
        check()
    finally:
        context.close()


def test_without_javascript_every_point_has_a_title(browser, written):
    path, corpus_map, _ = written
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(path.as_uri())
    titles = page.eval_on_selector_all(
        "#points circle", "els => els.map(e => [e.dataset.id, e.querySelector('title').textContent.split('\\n')[0]])")
    assert sorted(titles) == sorted([p.id, p.title] for p in corpus_map.points)
    assert page.locator("#search").is_hidden()  # nothing offered that needs the script
    assert len(shown_names(page)) == [p.label.level for p in corpus_map.points].count(0)
    context.close()
