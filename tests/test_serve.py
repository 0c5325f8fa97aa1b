"""`papers serve` through a real server on a real port of 127.0.0.1 (a subprocess, the FakeEncoder): every
endpoint, the JSON the CLI prints for the same query, every error shape, tags, tokens, a rebuild while
serving, signals and workers."""

import json
import os
import signal
import sqlite3
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
from click.testing import CliRunner

from corpus import PAPERS, write_corpus
from recommender.cli import main
from serving import build_fake_index, start_server, wait_until

pytest.importorskip("fastapi", reason="papers serve needs the serve extra: pip install -e '.[serve]'")

STOPPED = 0  # a server stopped by SIGTERM or Ctrl-C has done what it was asked
MORE = [
    {"id": "dp3", "title": "Private Language Models", "year": 2021, "venue": "ICML", "authors": ["Ada Lovelace"],
     "categories": ["cs.LG", "cs.CR"],
     "url": "https://example.org/dp3",
     "abstract": "Training language models with differential privacy and per-sample gradient clipping at scale."},
    {"id": "vid3", "title": "Aesthetic Video Ranking", "year": 2019, "venue": "CVPR", "categories": "cs.CV cs.MM",
     "abstract": "Ranking short videos by aesthetic quality with annotations from professional editors."},
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_fake_index(tmp_path_factory.mktemp("serve") / "index", PAPERS + MORE)


@pytest.fixture(scope="module")
def server(index_dir):
    running = start_server(index_dir)
    yield running
    assert running.stop() == STOPPED
    assert not any("Traceback" in line for line in running.errors), running.errors


def cli_json(fake_model, *args):
    """What `papers ARGS --format json` prints, parsed (the same FakeEncoder as the server's)."""
    result = CliRunner().invoke(main, [*args, "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def query(path, **params):
    return path + "?" + urllib.parse.urlencode(params, doseq=True)


# ---------------------------------------------------------------- the CLI's JSON, over HTTP


@pytest.mark.parametrize("params, args", [
    ({"id": "dp1"}, ["dp1"]),
    ({"id": ["dp1", "vid1"], "not": "rnn1", "k": 3}, ["dp1", "vid1", "--not", "rnn1", "-k", "3"]),
    ({"id": "FlashDP", "mode": "lexical", "why": "true"}, ["FlashDP", "--mode", "lexical", "--why"]),
    ({"id": "dp1", "diverse": 0.5, "min_score": 0.1}, ["dp1", "--diverse", "0.5", "--min-score", "0.1"]),
], ids=["one seed", "seeds and not", "lexical why", "diverse min-score"])
def test_like_is_the_cli_json(server, index_dir, fake_model, params, args):
    status, body = server.json(query("/api/like", **params))
    assert status == 200
    assert body == cli_json(fake_model, "like", *args, "--index", str(index_dir))
    seeds = {"dp1", "vid1", "rnn1"} if "not" in params else {"dp1"}
    assert body and all(item["id"] not in seeds for item in body)


def test_search_is_the_cli_json(server, index_dir, fake_model):
    status, body = server.json(query("/api/search", q="private training of language models", k=4, why="true"))
    assert status == 200
    assert body == cli_json(fake_model, "search", "private training of language models", "-k", "4", "--why",
                            "--index", str(index_dir))
    assert body[0]["id"] in ("dp1", "dp2", "dp3")


def test_show_list_related_sessions_and_info_are_the_cli_json(server, index_dir, fake_model):
    where = ["--index", str(index_dir)]
    assert server.json("/api/papers/dp3") == (200, cli_json(fake_model, "show", "dp3", *where))
    assert server.json("/api/papers/FlashDP")[1]["id"] == "dp1"  # a handle, as the CLI takes
    pages, path = [], "/api/papers?limit=3"
    while path:
        status, headers, body = server.get(path)
        assert status == 200
        pages.append(json.loads(body))
        link = headers.get("Link")
        path = link[link.index("/api/"): link.index(">")] if link else None
    assert [len(page) for page in pages] == [3, 3, 2]
    assert sum(pages, []) == cli_json(fake_model, "list", *where)
    assert server.json(query("/api/related-work", id=["dp1", "vid1"], k=2)) == (
        200, cli_json(fake_model, "related-work", "dp1", "vid1", "-k", "2", *where))
    assert server.json("/api/sessions?n=2") == (200, cli_json(fake_model, "sessions", "--n", "2", *where))
    status, info = server.json("/api/info")
    assert status == 200 and info["paper_count"] == 8 and info == cli_json(fake_model, "info", *where)


def test_papers_where_filters_by_year_and_venue(server):
    status, body = server.json(query("/api/papers", where=["year>=2020"]))
    assert status == 200 and [paper["id"] for paper in body] == ["dp3"]
    status, headers, raw = server.get(query("/api/papers", where="venue=*V*", limit=1))
    assert status == 200 and [paper["id"] for paper in json.loads(raw)] == ["vid3"] and "Link" not in headers
    status, body = server.json(query("/api/papers", where="category=cs.c*"))  # any case, wildcards
    assert status == 200 and [(paper["id"], paper["categories"]) for paper in body] == [
        ("dp3", ["cs.LG", "cs.CR"]), ("vid3", ["cs.CV", "cs.MM"])]
    status, body = server.json(query("/api/papers", where=["category=cs.LG", "year<2021"]))
    assert status == 200 and body == []


def test_inspect_gives_the_shared_terms_and_both_cosines(server):
    status, body = server.json(query("/api/inspect", id="dp2", pid="dp1"))
    assert status == 200 and body["id"] == "dp2" and body["seed"] == "dp1"
    assert 0 < body["dense_cosine"] <= 1 and 0 < body["lexical_cosine"] <= 1
    assert "gradient clipping" in body["shared_terms"] or "clipping" in body["shared_terms"]
    assert "gradient clipping" in body["phrases"] and body["sentences"][0]["seed"] == "dp1"
    status, body = server.json(query("/api/inspect", id="vid1", q="video aesthetics"))
    assert status == 200 and body["text"] == "video aesthetics" and body["shared_terms"]
    status, body = server.json(query("/api/inspect", id="vid1"))
    assert status == 200 and body["dense_cosine"] is None and "video" in body["top_terms"]


# ---------------------------------------------------------------- error shapes: one line, never a traceback


@pytest.mark.parametrize("path, status, message", [
    ("/api/like?id=dp9", 404, "no paper 'dp9' in the index: closest matches: dp3, dp2, dp1"),
    ("/api/like?id=d", 404, "'d' matches 3 papers"),
    ("/api/papers/nope", 404, "no paper 'nope' in the index"),
    ("/api/related-work?id=zzz", 404, "no paper 'zzz' in the index"),
    ("/api/like", 422, "parameter id: Field required"),
    ("/api/like?id=dp1&k=abc", 422, "parameter k: Input should be a valid integer"),
    ("/api/like?id=dp1&k=0", 422, "parameter k: Input should be greater than or equal to 1"),
    ("/api/like?id=dp1&k=101", 422, "parameter k: Input should be less than or equal to 100"),
    ("/api/like?id=dp1&mode=magic", 422, "parameter mode: Input should be 'hybrid', 'dense' or 'lexical'"),
    ("/api/like?id=dp1&min_score=2", 422, "parameter min_score: Input should be less than or equal to 1"),
    ("/api/like?id=dp1&not=dp1", 400, "parameter not: 'dp1' is given both as a paper to be like and as one to be unlike"),
    ("/api/like?" + "&".join(["id=dp1"] * 51), 400, "parameter id: at most 50 papers a request, got 51"),
    ("/api/search?q=", 422, "parameter q: String should have at least 1 character"),
    ("/api/search?q=" + "a" * 1001, 422, "parameter q: String should have at most 1000 characters"),
    ("/api/search?q=%20%20", 400, "empty search text"),
    ("/api/papers?limit=201", 422, "parameter limit: Input should be less than or equal to 200"),
    ("/api/papers?offset=-1", 422, "parameter offset: Input should be greater than or equal to 0"),
    ("/api/papers?where=colour=red", 400, "parameter where: condition 'colour=red': unknown field 'colour'"),
    ("/api/tags/%20bad/recommendations", 400, "tag ' bad' cannot be used"),
    ("/api/tags/empty/recommendations", 404, "tag 'empty' holds no papers: tag some first"),
    ("/api/sessions?n=0", 422, "parameter n: Input should be greater than or equal to 1"),
    ("/api/nothing-here", 404, "no page /api/nothing-here"),
], ids=lambda value: str(value)[:40])
def test_errors_are_one_json_line(server, path, status, message):
    got, headers, body = server.get(path)
    assert got == status
    assert headers["Content-Type"] == "application/json"
    error = json.loads(body)
    assert list(error) == ["error"] and message in error["error"] and "\n" not in error["error"]


def test_wrong_method_and_page_errors(server):
    status, headers, body = server.get("/api/like?id=dp1", method="POST")
    assert status == 405 and json.loads(body) == {"error": "POST is not allowed on /api/like"}
    status, headers, body = server.get("/paper/nope")
    assert status == 404 and headers["Content-Type"].startswith("text/html")
    assert "no paper &#39;nope&#39; in the index" in body.decode() and "Traceback" not in body.decode()


def test_ids_in_paths_never_reach_files(server):
    for path in ("/api/papers/..%2F..%2F..%2Fetc%2Fpasswd", "/api/papers/../../etc/passwd", "/paper/%2e%2e%2fmanifest.json",
                 "/static/..%2F..%2Fapp.py", "/swagger/..%2F__init__.py"):
        status, headers, body = server.get(path)
        assert status == 404, path
        assert b"root:" not in body and b"import" not in body


# ---------------------------------------------------------------- tags


def test_tags_put_get_recommend_delete(server, index_dir):
    assert server.json("/api/tags/reading/dp1", method="PUT") == (200, {"tag": "reading", "papers": ["dp1"]})
    assert server.json("/api/tags/reading/VADB", method="PUT") == (200, {"tag": "reading", "papers": ["dp1", "vid1"]})
    assert server.json("/api/tags/reading/dp1", method="PUT")[1]["papers"] == ["dp1", "vid1"]  # once
    assert server.json("/api/tags")[1] == [{"tag": "reading", "papers": ["dp1", "vid1"]}]
    status, body = server.json("/api/tags/reading/recommendations?k=4")
    assert status == 200 and len(body) == 4
    assert {"dp1", "vid1"}.isdisjoint(item["id"] for item in body)
    status, like = server.json(query("/api/like", id=["dp1", "vid1"], k=4))
    assert body == like  # the tag as a profile: `like` with its papers as seeds
    assert server.json("/api/tags/reading/nope", method="PUT")[0] == 404
    assert server.json("/api/tags/reading/dp1", method="DELETE") == (200, {"tag": "reading", "papers": ["vid1"]})
    assert server.json("/api/tags/reading/vid1", method="DELETE") == (200, {"tag": "reading", "papers": []})
    assert server.json("/api/tags")[1] == []
    # Beside the index, never inside a version folder
    assert (index_dir / "tags.sqlite").is_file()
    assert not list(index_dir.glob("v-*/tags.sqlite"))


def test_cross_site_writes_and_foreign_hosts_are_refused(server):
    status, body = server.json("/api/tags/t/dp1", method="PUT", headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-site write refused" in body["error"]
    assert server.json("/api/tags")[1] == []
    # DNS rebinding: a page of another name that resolves to 127.0.0.1
    status, headers, body = server.get("/api/like?id=dp1", headers={"Host": "evil.example:8000"})
    assert status == 400 and json.loads(body) == {
        "error": "host 'evil.example:8000' is not this server's: open it as http://127.0.0.1 or http://localhost"}
    assert server.get("/", headers={"Host": "evil.example"})[0] == 400
    assert server.get("/api/like?id=dp1", headers={"Host": "localhost"})[0] == 200
    # The form without its CSRF token (a form posted from another site has none)
    status, headers, body = server.get("/tags/add", method="POST", data=b"tag=t&id=dp1",
                                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403 and b"the form has expired or came from another site" in body


def test_every_response_has_a_strict_content_security_policy(server):
    for path in ("/", "/api/like?id=dp1", "/paper/dp1", "/nope", "/map", "/docs"):
        headers = server.get(path)[1]
        policy = headers["Content-Security-Policy"]
        assert "script-src 'self';" in policy and "unsafe-eval" not in policy and "default-src 'none'" in policy
        assert headers["X-Content-Type-Options"] == "nosniff"
    assert "style-src 'self';" in server.get("/")[1]["Content-Security-Policy"]


def test_openapi_and_offline_docs(server):
    status, spec = server.json("/openapi.json")
    assert status == 200
    assert {"/api/like", "/api/search", "/api/papers/{paper_id}", "/api/papers", "/api/related-work", "/api/tags",
            "/api/tags/{tag}/{paper_id}", "/api/tags/{tag}/recommendations"} <= set(spec["paths"])
    status, headers, page = server.get("/docs")
    assert status == 200 and b'src="/swagger/swagger-ui-bundle.js"' in page and b"<script>" not in page
    assert server.get("/swagger/swagger-ui-bundle.js")[0] == 200


# ---------------------------------------------------------------- a token for writes


def test_with_a_token_writes_need_it_and_reads_stay_open(index_dir, tmp_path):
    server = start_server(index_dir, "--token", "s3cret-token")
    try:
        assert server.get("/api/like?id=dp1")[0] == 200
        status, body = server.json("/api/tags/t/dp1", method="PUT")
        assert status == 401 and "Authorization: Bearer" in body["error"]
        status, body = server.json("/api/tags/t/dp1", method="PUT", headers={"Authorization": "Bearer wrong"})
        assert status == 401
        status, body = server.json("/api/tags/t/dp1", method="PUT", headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200 and body["papers"] == ["dp1"]
        assert server.get("/?token=wrong")[0] == 403
        assert server.json("/api/tags/t/dp1", method="DELETE", headers={"Authorization": "Bearer s3cret-token"})[0] == 200
    finally:
        assert server.stop() == STOPPED


def test_the_token_page_signs_the_browser_in(index_dir):
    import http.client

    server = start_server(index_dir, "--token", "abc123")
    try:
        host, port = urllib.parse.urlsplit(server.url).netloc.split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        connection.request("GET", "/?token=abc123&q=video")
        response = connection.getresponse()
        response.read()
        assert response.status == 303 and response.headers["Location"] == "/?q=video"
        cookie = response.headers["Set-Cookie"]
        assert cookie.startswith(f"papers_token_{port}=abc123;") and "HttpOnly" in cookie and "SameSite=strict" in cookie
        connection.close()
    finally:
        assert server.stop() == STOPPED


def test_off_loopback_a_token_is_required():
    from recommender.serve.security import Access, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("::")
    open_ = Access(None, True)
    assert open_.may_write(None, None)
    guarded = Access("t0k", False)
    assert not guarded.may_write(None, None) and guarded.may_write("Bearer t0k", None) and guarded.may_write(None, "t0k")
    assert guarded.host_allowed("anything.example")  # off loopback the token guards writes, not the host


# ---------------------------------------------------------------- a rebuild while serving; signals; workers


def test_a_rebuild_while_serving_fails_no_request_and_is_picked_up(tmp_path):
    index_dir = build_fake_index(tmp_path / "index", PAPERS)
    first = {path.name for path in index_dir.glob("v-*")}
    server = start_server(index_dir)
    failures, done, count = [], threading.Event(), [0]

    def hammer():
        while not done.is_set():
            for path in ("/api/like?id=dp1&k=3", "/api/search?q=video", "/", "/api/papers?limit=50"):
                status, _, body = server.get(path)
                count[0] += 1
                if status != 200:
                    failures.append((path, status, body[:200]))

    clients = [threading.Thread(target=hammer) for _ in range(4)]
    try:
        for client in clients:
            client.start()
        for extra in (MORE[:1], MORE):
            build_fake_index(index_dir, PAPERS + extra)
            wait_until(lambda: len(server.json("/api/papers?limit=50")[1]) == len(PAPERS) + len(extra))
        time.sleep(0.5)
        done.set()
        for client in clients:
            client.join(60)
        assert failures == []
        assert count[0] > 20
        assert server.json(query("/api/like", id="dp3", k=2))[0] == 200  # a paper only the new versions have
        # The server let go of each version it stopped serving: the next build removed them (it keeps the
        # live one and the one the server still reads until its next request).
        serving = {path.name for path in index_dir.glob("v-*")}
        build_fake_index(index_dir, PAPERS + MORE)
        assert server.get("/api/like?id=dp1")[0] == 200
        build_fake_index(index_dir, PAPERS + MORE)
        left = {path.name for path in index_dir.glob("v-*")}
        assert len(left) == 2 and not (left & (first | serving))
    finally:
        done.set()
        assert server.stop() == STOPPED


def test_one_request_at_a_time_uses_the_library_in_a_worker(index_dir):
    """Threads of one worker take turns with the PaperIndex, which is not made for threads (two threads
    in numpy's header parsing fail now and then on CPython 3.11 with a SystemError: a 500 under load)."""
    from recommender.serve.state import LiveIndex

    live = LiveIndex(index_dir)
    inside, release, order = threading.Event(), threading.Event(), []

    def first():
        with live.lease() as opened:
            order.append("first in")
            inside.set()
            release.wait(30)
            opened.recommender.like("dp1", k=2)
            order.append("first out")

    def second():
        inside.wait(30)
        with live.lease() as opened:
            order.append("second in")
            opened.recommender.like("vid1", k=2)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    inside.wait(30)
    time.sleep(0.3)  # the second thread is waiting for its turn by now
    release.set()
    for thread in threads:
        thread.join(30)
    live.close()
    assert order == ["first in", "first out", "second in"]


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_signals_stop_it_cleanly(index_dir, signal_number):
    server = start_server(index_dir)
    assert server.get("/api/like?id=dp1")[0] == 200
    assert server.stop(signal_number) == STOPPED
    assert not any("Traceback" in line for line in server.errors), server.errors


def workers_of(pid: int) -> list[int]:
    """The worker processes uvicorn's supervisor runs (its children, less multiprocessing's resource tracker)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if b"resource_tracker" not in command:
                found.append(int(child))
    return sorted(found)


def test_workers_share_the_port_and_a_dead_worker_is_replaced(index_dir):
    server = start_server(index_dir, "--workers", "2")
    try:
        assert "with 2 workers" in server.lines[0]
        workers = wait_until(lambda: workers_of(server.process.pid) if len(workers_of(server.process.pid)) == 2 else None)
        for _ in range(20):
            assert server.get("/api/like?id=dp1")[0] == 200
        os.kill(workers[0], signal.SIGKILL)
        replaced = wait_until(lambda: (lambda now: now if len(now) == 2 and workers[0] not in now else None)(
            workers_of(server.process.pid)), seconds=60)
        assert workers[1] in replaced
        for _ in range(20):
            assert server.get("/api/like?id=dp1")[0] == 200
    finally:
        assert server.stop() == STOPPED


def test_without_the_serve_extra_it_says_what_to_install(workdir, monkeypatch):
    import sys

    for name in [name for name in sys.modules if name.startswith("recommender.serve")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    result = CliRunner().invoke(main, ["serve"])
    assert result.exit_code == 1
    assert result.output == ("Error: papers serve needs the serve extra (fastapi is missing): "
                             "pip install 'papers-like[serve]'\n")


def test_serve_refuses_what_it_cannot_serve(workdir):
    runner = CliRunner()
    result = runner.invoke(main, ["serve", "--index", "missing"])
    assert result.exit_code == 1 and result.output.startswith("Error: no index at ") and len(result.output.splitlines()) == 1
    write_corpus(workdir / "in")
    result = runner.invoke(main, ["serve", "--index", "missing", "--workers", "0"])
    assert (result.exit_code, result.output) == (
        2, "Error: Invalid value for '--workers': workers must be 1..64, got 0\n")


# ---------------------------------------------------------------- the real model


@pytest.mark.model
def test_search_with_the_real_model_is_the_cli_json(tmp_path):
    from recommender import build_index

    index_dir = tmp_path / "real"
    build_index([write_corpus(tmp_path / "in", PAPERS + MORE)], index=index_dir)
    server = start_server(index_dir, env={"PAPERS_TEST_REAL_MODEL": "1"})
    try:
        status, body = server.json(query("/api/search", q="privacy for language model training", k=3))
        assert status == 200
        result = CliRunner().invoke(main, ["search", "privacy for language model training", "-k", "3", "--format", "json",
                                           "--index", str(index_dir)], catch_exceptions=False)
        assert body == json.loads(result.output)
        assert body[0]["id"] in ("dp1", "dp2", "dp3")
    finally:
        assert server.stop() == STOPPED


def test_the_inspect_page_escapes_the_sentences_it_shows(server):
    text = "<script>alert(1)</script> video aesthetic assessment with professional annotations"
    status, _, raw = server.get(query("/inspect", id="vid1", q=text))
    page = raw.decode()
    assert status == 200 and "Closest sentences" in page and "Shared phrases" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; video" in page
