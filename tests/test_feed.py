"""`papers feed`: the papers added since a tag's feed was last read, ranked by the tag's profile."""

import json

import pytest
from corpus import HOSTILE_PAPERS, PAPERS, write_corpus

NEW = [
    {
        "id": "dp3",
        "title": "Private Language Model Training at Scale",
        "abstract": (
            "Differentially private training of language models with gradient clipping on many"
            " machines."
        ),
    },
    {
        "id": "vid3",
        "title": "Aesthetic Video Assessment",
        "abstract": (
            "Video aesthetic assessment with annotations of professional videos and quality models."
        ),
    },
    {
        "id": "dp4",
        "title": "Clipping Gradients Privately",
        "abstract": "Private gradient clipping for language models with a noise budget.",
    },
]


def _ids(result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [row["id"] for row in json.loads(result.stdout)]


@pytest.fixture
def tagged(built):
    assert built("tags", "add", "mine", "dp1", "dp2").exit_code == 0
    return built


def _add(cli, workdir, papers, folder="new"):
    write_corpus(workdir / folder, papers)
    result = cli("add", folder, "--no-compact")
    assert result.exit_code == 0, result.output


def test_feed_lists_added_papers_once_ranked_by_the_tags_profile(tagged, workdir):
    # Never read: what was added since the tag was made; the index was built before.
    assert _ids(tagged("feed", "--tag", "mine", "--format", "json")) == []
    assert _ids(tagged("feed", "--tag", "mine", "--format", "json")) == []  # read: nothing new
    _add(tagged, workdir, NEW)
    result = tagged("feed", "--tag", "mine", "--format", "json")
    rows = json.loads(result.stdout)
    assert [row["id"] for row in rows][:2] in (["dp3", "dp4"], ["dp4", "dp3"])
    assert set(row["id"] for row in rows) == {"dp3", "dp4", "vid3"}
    assert "3 new papers" in result.stderr
    # The same order and the same objects as `like --tag`, restricted to the new papers.
    like = json.loads(
        tagged("like", "--tag", "mine", "--why", "-k", "20", "--format", "json").stdout
    )
    strip = lambda row: {key: value for key, value in row.items() if key != "rank"}  # noqa: E731
    assert [strip(row) for row in like if row["id"] in {"dp3", "dp4", "vid3"}] == [
        strip(row) for row in rows
    ]
    assert all(row["because"] and row["because"][0]["handle"] for row in rows)
    assert {seed["id"] for row in rows for seed in row["because"]} <= {"dp1", "dp2"}
    # Read twice the same day: nothing new, unless a date is given; adding the same file adds
    # nothing.
    assert _ids(tagged("feed", "--tag", "mine", "--format", "json")) == []
    _add(tagged, workdir, NEW)
    assert _ids(tagged("feed", "--tag", "mine", "--format", "json")) == []
    since = _ids(tagged("feed", "--tag", "mine", "--since", "2000-01-01", "--format", "json"))
    assert set(since) == {"vid1", "vid2", "rnn1", "rnn2", "dp3", "dp4", "vid3"}


def test_a_tag_of_one_paper_says_each_paper_is_there_because_of_it(built):
    assert built("tags", "add", "one", "vid1").exit_code == 0
    result = built("feed", "--tag", "one", "--since", "2000-01-01", "--format", "json")
    rows = json.loads(result.stdout)
    assert rows and all([seed["id"] for seed in row["because"]] == ["vid1"] for row in rows)
    assert (
        rows[0]["id"] == "vid2"
        and rows[0]["because"][0]["cosine"] > rows[-1]["because"][0]["cosine"]
    )


def test_feed_leaves_out_papers_marked_seen_or_not_interested(tagged, workdir):
    tagged("feed", "--tag", "mine", "--format", "json")
    _add(tagged, workdir, NEW)
    assert tagged("tags", "seen", "mine", "dp3").exit_code == 0
    assert tagged("tags", "not", "mine", "vid3").exit_code == 0
    result = tagged("feed", "--tag", "mine", "-k", "1")
    assert "1 new paper\n" in result.stderr and "dp4" in result.stdout
    assert tagged("tags", "unmark", "mine", "dp3", "--mark", "seen").exit_code == 0
    result = tagged("feed", "--tag", "mine", "--since", "2000-01-01", "-k", "1")
    assert "6 new papers, the best 1 shown (-k for more)" in result.stderr


def test_a_rebuilt_index_feeds_only_the_papers_it_did_not_hold(tagged, workdir):
    tagged("feed", "--tag", "mine")
    write_corpus(workdir / "in", PAPERS + NEW[:1])
    assert tagged("build", "in").exit_code == 0
    assert _ids(tagged("feed", "--tag", "mine", "--format", "json")) == ["dp3"]
    assert tagged("build", "--compact").exit_code in (0, 2)  # nothing to compact, or compacted
    assert _ids(tagged("feed", "--tag", "mine", "--format", "json")) == []


def test_the_read_is_not_recorded_when_the_feed_cannot_be_written(tagged, workdir):
    _add(tagged, workdir, NEW)
    result = tagged("feed", "--tag", "mine", "--out", str(workdir / "missing" / "today.html"))
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert set(_ids(tagged("feed", "--tag", "mine", "--format", "json"))) == {"dp3", "dp4", "vid3"}


def test_feed_refuses_a_bad_date_and_an_empty_tag_in_one_line(built):
    result = built("feed", "--tag", "mine", "--since", "yesterday")
    assert result.exit_code == 2 and "since 'yesterday'" in result.output
    assert len(result.output.strip().splitlines()) == 1
    # A tag that holds no paper yet (a routine's first day): an empty feed that says why.
    result = built("feed", "--tag", "nobody")
    assert result.exit_code == 0 and "nobody holds no papers yet" in result.stderr


def test_the_html_digest_is_self_contained_and_escapes_every_field(papers_cli, workdir):
    write_corpus(workdir / "in", PAPERS + HOSTILE_PAPERS)
    assert papers_cli("build", "in").exit_code == 0
    assert papers_cli("tags", "add", "mine", "dp1", "vid1").exit_code == 0
    result = papers_cli(
        "feed",
        "--tag",
        "mine",
        "--since",
        "2000-01-01",
        "--format",
        "html",
        "--out",
        "today.html",
        "-k",
        "50",
    )
    assert result.exit_code == 0, result.output
    page = (workdir / "today.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    lowered = page.lower()
    for hostile in (
        "<script",
        "<img",
        "<svg",
        "<iframe",
        "<style",
        "<meta http-equiv",
        "<b ",
        "<i>",
    ):
        assert hostile not in lowered
    import html.parser

    class Tags(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.found, self.links = set(), []

        def handle_starttag(self, tag, attrs):
            self.found.add(tag)
            self.links += [value for name, value in attrs if name == "href"]
            assert not [name for name, _ in attrs if name.startswith("on")]

    parsed = Tags()
    parsed.feed(page)
    assert parsed.found <= {
        "html",
        "head",
        "meta",
        "title",
        "body",
        "div",
        "h1",
        "p",
        "a",
        "span",
        "b",
    }
    assert all(link.startswith(("http://", "https://")) for link in parsed.links)
    assert "window.attacked" in page  # shown as text
    assert "&lt;img src=x onerror=" in page
    assert "Video Quality Models" in page and "because of" in page


# ---------------------------------------------------------------- /feed and /api/feed in `papers
# serve`


def test_serve_feed_page_and_api_in_the_cli_order_with_seen_and_not_interested_buttons(
    tmp_path, fake_model
):
    pytest.importorskip(
        "fastapi", reason="papers serve needs the serve extra: pip install -e '.[serve]'"
    )
    import re
    import urllib.parse

    from click.testing import CliRunner
    from serving import build_fake_index, start_server

    from recommender.cli import main

    index_dir = build_fake_index(tmp_path / "index", PAPERS)

    def cli(*args):
        result = CliRunner().invoke(
            main, [*args, "--index", str(index_dir)], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        return result

    cli("tags", "add", "mine", "dp1", "dp2")
    cli("feed", "--tag", "mine")  # read: only what is added next is new
    write_corpus(tmp_path / "new", NEW)
    cli("add", str(tmp_path / "new"), "--no-compact")
    server = start_server(index_dir)
    try:
        status, body = server.json("/api/feed?tag=mine")
        assert status == 200
        assert [row["id"] for row in body][:2] in (["dp3", "dp4"], ["dp4", "dp3"])
        assert {row["id"] for row in body} == {"dp3", "dp4", "vid3"}
        assert server.json("/api/feed?tag=mine")[1] == body  # reading it over HTTP records no read
        # The same JSON as the CLI's, which records the digest's read: the web app keeps its own.
        assert json.loads(cli("feed", "--tag", "mine", "--format", "json").stdout) == body
        assert json.loads(cli("feed", "--tag", "mine", "--format", "json").stdout) == []
        assert server.json("/api/feed?tag=mine") == (200, body)
        since = server.json("/api/feed?tag=mine&since=2000-01-01")[1]
        assert {row["id"] for row in since} == {
            "dp3",
            "dp4",
            "vid3",
            "vid1",
            "vid2",
            "rnn1",
            "rnn2",
        }
        status, error = server.json("/api/feed?tag=mine&since=yesterday")
        assert status == 400 and "since 'yesterday'" in error["error"]
        status, headers, page = server.get("/feed?tag=mine&since=2000-01-01")
        assert status == 200 and headers["Content-Security-Policy"]
        text = page.decode()
        order = re.findall(
            r'name="id" value="([^"]+)"><input type="hidden" name="tag" value="mine">'
            r'<input type="hidden" name="kind" value="seen"',
            text,
        )
        assert order[:3] and order == [
            row["id"] for row in server.json("/api/feed?tag=mine&since=2000-01-01")[1]
        ]
        assert "Not interested" in text and "Because of" in text
        csrf = re.search(r'name="csrf" value="([^"]+)"', text).group(1)
        cookie = headers["Set-Cookie"].split(";")[0]
        form = urllib.parse.urlencode(
            {
                "csrf": csrf,
                "tag": "mine",
                "id": "dp3",
                "kind": "seen",
                "next": "/feed?tag=mine&since=2000-01-01",
            }
        ).encode()
        status, _, _ = server.get(
            "/tags/mark",
            method="POST",
            data=form,
            headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie},
        )
        assert status in (200, 303)
        assert "dp3" not in [
            row["id"] for row in server.json("/api/feed?tag=mine&since=2000-01-01")[1]
        ]
        assert 'value="dp3"' not in server.get("/feed?tag=mine&since=2000-01-01")[2].decode()
    finally:
        server.stop()


def test_a_feed_of_more_new_papers_than_it_ranks_says_so(tagged, monkeypatch):
    from recommender.reading import feed

    monkeypatch.setattr(feed, "MOST_NEW", 3)
    result = tagged("feed", "--tag", "mine", "--since", "2000-01-01")
    assert result.exit_code != 0 and "6 papers arrived since 2000-01-01T00:00:00Z" in result.output
    assert "more than a feed ranks (3)" in result.output and "Traceback" not in result.output


def test_feeds_made_at_once_record_each_part_once(tmp_path):
    import threading

    from recommender.reading.tags import TagStore

    (tmp_path / "index").mkdir()
    parts = [("v-1", 1000.0, [f"p{i}" for i in range(2000)]), ("segment:s-1", 2000.0, ["q1", "q2"])]
    found, errors = [], []

    def record():
        try:
            found.append(TagStore(tmp_path / "index").record_arrivals(parts))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=record) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and found == [1] * 6
    store = TagStore(tmp_path / "index")
    assert sorted(store.arrived(after_generation=0)) == sorted(parts[0][2] + parts[1][2])
    assert sorted(store.arrived(since=1500.0)) == ["q1", "q2"]
    assert store.record_arrivals([*parts, ("segment:s-2", 3000.0, ["q2", "q3"])]) == 2
    assert store.arrived(after_generation=1) == ["q3"]  # q2 keeps its first arrival


# -- each reader its own place, a look moves nothing; dates and counts as people read them; damaged
# bookkeeping and dates out of range in one line (real processes: tests/build_launcher.py)


def _papers(workdir, *args):
    import subprocess
    import sys
    from pathlib import Path

    launcher = Path(__file__).resolve().parent / "build_launcher.py"
    return subprocess.run(
        [sys.executable, str(launcher), *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def routine(workdir):
    """An index of the six papers, mine tagged with dp1, then three papers added: a real process."""
    write_corpus(workdir / "in", PAPERS)
    for args in (("build", "in", "--index", "x"), ("tags", "add", "mine", "dp1", "--index", "x")):
        assert _papers(workdir, *args).returncode == 0
    write_corpus(workdir / "new", NEW)
    added = _papers(workdir, "add", "new", "--index", "x", "--no-compact")
    assert added.returncode == 0, added.stderr
    return lambda *args: _papers(workdir, *args, "--index", "x")


def _listed(result) -> set[str]:
    assert result.returncode == 0, result.stderr
    return {row["id"] for row in json.loads(result.stdout)}


def test_a_look_with_since_and_other_readers_leave_the_digest_its_papers(routine, workdir):
    new = {"dp3", "dp4", "vid3"}
    # A person's look back, twice: it moves nothing.
    for _ in range(2):
        assert new <= _listed(
            routine("feed", "--tag", "mine", "--since", "2000-01-01", "--format", "json")
        )
    # A reader of its own reads and moves only its own place.
    assert _listed(routine("feed", "--tag", "mine", "--reader", "me", "--format", "json")) == new
    assert _listed(routine("feed", "--tag", "mine", "--reader", "me", "--format", "json")) == set()
    # The web app's feed has its own place too: reading it there moves nothing either.
    from serving import start_server

    server = start_server(workdir / "indexes" / "x")
    try:
        for _ in range(2):
            status, rows = server.json("/api/feed?tag=mine")
            assert status == 200 and {row["id"] for row in rows} == new
    finally:
        server.stop()
    # The cron job's digest still has every new paper, once.
    digest = routine("feed", "--tag", "mine", "--format", "html", "--out", "today.html")
    assert digest.returncode == 0, digest.stderr
    page = (workdir / "today.html").read_text(encoding="utf-8")
    assert page.count("border:1px solid") == 3
    assert _listed(routine("feed", "--tag", "mine", "--format", "json")) == set()


def test_the_digest_heading_writes_the_date_as_people_read_it_and_counts_agree(routine, workdir):
    result = routine("feed", "--tag", "mine", "--since", "2026-12-04T07:30:00Z", "--format", "html")
    assert result.returncode == 0, result.stderr
    assert "New papers for mine since 4 December 2026, 07:30 UTC" in result.stdout
    result = routine("feed", "--tag", "mine", "--since", "2026-12-04", "--format", "html")
    assert "since 4 December 2026</h1>" in result.stdout
    marked = routine("tags", "not", "mine", "vid3")
    assert marked.returncode == 0 and "mine: 1 paper marked not interested\n" == marked.stderr


def test_add_counts_the_papers_it_kept_as_the_feed_does(routine, workdir):
    assert routine("feed", "--tag", "mine").returncode == 0  # read: what is added next is new
    gan = {"title": "Adversarial Nets", "abstract": "Generative adversarial networks for images."}
    other = {"id": "flow1", "title": "Normalising Flows", "abstract": "Invertible density models."}
    write_corpus(workdir / "more", [dict(gan, id="gan1"), other, dict(gan, id="gan1-again")])
    added = routine("add", "more", "--no-compact")
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("added 2 papers to x (encoded 2;"), added.stdout
    assert "kept once" in added.stderr
    feed = routine("feed", "--tag", "mine", "--format", "json")
    assert len(_listed(feed)) == 2 and "2 new papers" in feed.stderr


@pytest.mark.parametrize(
    "since", ["0001-01-01T00:00:00+14:00", "0001-01-01", "9999-12-31T23:59:59-14:00"]
)
def test_a_date_at_the_ends_of_the_calendar_is_no_traceback(routine, workdir, since):
    result = routine("feed", "--tag", "mine", "--since", since, "--format", "html")
    assert result.returncode in (0, 2) and "Traceback" not in result.stderr, result.stderr
    from urllib.parse import quote

    from serving import start_server

    server = start_server(workdir / "indexes" / "x")
    try:
        for path in (
            f"/api/feed?tag=mine&since={quote(since)}",
            f"/feed?tag=mine&since={quote(since)}",
        ):
            status, _, _ = server.get(path)
            assert status in (200, 400, 422), (path, status)
    finally:
        server.stop()


@pytest.mark.parametrize(
    "damage",
    [
        "DROP TABLE arrivals; CREATE TABLE arrivals (paper TEXT)",
        "UPDATE arrival_parts SET noticed = 'many'",
        "DROP TABLE feed_places; CREATE TABLE feed_places (reader, tag, noticed, read);"
        " INSERT INTO feed_places VALUES ('digest', 'mine', 'x', 'y')",
    ],
)
def test_damaged_feed_records_are_one_line(routine, workdir, damage):
    assert routine("feed", "--tag", "mine").returncode == 0  # the tables made
    import sqlite3

    database = sqlite3.connect(workdir / "indexes" / "x" / "tags.sqlite")
    database.executescript(damage)
    database.close()
    result = routine("feed", "--tag", "mine")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the feed's records are damaged" in lines[0], result.stderr
