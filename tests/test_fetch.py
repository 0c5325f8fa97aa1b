"""`papers fetch arxiv` against an OAI-PMH server on 127.0.0.1 that this test starts, its pages made
from the protocol's and arXiv's published formats: paging by resumption token, a 503 with
Retry-After, a dropped connection, a malformed and a deleted record. Real processes throughout."""

import json
import os
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

OAI_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
    "<responseDate>2025-06-02T00:00:00Z</responseDate>"
    '<request verb="ListRecords">x</request><ListRecords>'
)


def record(arxiv_id: str, title: str, abstract: str, status: str = "") -> str:
    header = (
        f'<header{f" status={chr(34)}{status}{chr(34)}" if status else ""}>'
        f"<identifier>oai:arXiv.org:{arxiv_id}</identifier>"
        "<datestamp>2025-06-01</datestamp><setSpec>cs</setSpec></header>"
    )
    if status == "deleted":
        return f"<record>{header}</record>"
    return (
        f'<record>{header}<metadata><arXiv xmlns="http://arxiv.org/OAI/arXiv/"><id>{arxiv_id}</id>'
        "<created>2025-05-30</created><authors><author><keyname>Lovelace</keyname>"
        "<forenames>Ada</forenames>"
        f"</author></authors><title>{title}</title><categories>cs.LG stat.ML</categories>"
        f"<abstract>{abstract}</abstract></arXiv></metadata></record>"
    )


PAGE_ONE = (
    OAI_HEAD
    + record(
        "2506.00001",
        "Private Training at Scale",
        "Differentially private training of\n  language models.",
    )
    + record("2506.00002", "No Abstract Here", "")
    + '<resumptionToken cursor="0" completeListSize="4">token-1</resumptionToken>'
    + "</ListRecords></OAI-PMH>"
)
PAGE_TWO = (
    OAI_HEAD
    + record("2506.00003", "Video &amp; Aesthetics", "Video aesthetic assessment models.")
    + record("2506.00004", "", "", status="deleted")
    + '<resumptionToken cursor="2" completeListSize="4"></resumptionToken></ListRecords></OAI-PMH>'
)


class OaiServer:
    """Answers from a script: each request takes the next step ("503", "drop", "fail", or a
    page)."""

    def __init__(self, steps):
        self.steps, self.requests = list(steps), []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                server.requests.append((query, self.headers.get("User-Agent", "")))
                step = server.steps.pop(0) if server.steps else "fail"
                if step == "drop":
                    self.connection.close()
                    return
                if step in ("503", "fail"):
                    self.send_response(503 if step == "503" else 400)
                    if step == "503":
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                body = step.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_port}/oai"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def oai():
    servers = []

    def start(steps):
        servers.append(OaiServer(steps))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def papers(workdir, *args):
    env = dict(os.environ, PAPERS_HOME=str(workdir / "home"))
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_fetch_pages_through_busy_answers_and_a_dropped_connection(workdir, oai):
    server = oai(["503", PAGE_ONE, "drop", PAGE_TWO])
    done = papers(
        workdir,
        "fetch",
        "arxiv",
        "--category",
        "cs.LG",
        "--since",
        "2025-06-01",
        "--out",
        "new.jsonl",
        "--base-url",
        server.url,
        "--delay",
        "0",
    )
    assert done.returncode == 0, done.stderr
    assert (
        "fetched 2 cs.LG records in 2 pages into new.jsonl, 1 malformed records skipped"
        in done.stderr
    )
    lines = [json.loads(line) for line in (workdir / "new.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == ["2506.00001", "2506.00003"]
    assert lines[0]["abstract"] == "Differentially private training of language models."
    assert lines[1]["title"] == "Video & Aesthetics"
    first, *_, last = [query for query, _ in server.requests]
    assert first == {
        "verb": "ListRecords",
        "metadataPrefix": "arXiv",
        "set": "cs:cs:LG",
        "from": "2025-06-01",
    }
    assert last == {"verb": "ListRecords", "resumptionToken": "token-1"}
    assert all(agent.startswith("papers-like/") for _, agent in server.requests)
    assert (
        not (workdir / "new.jsonl.resume").exists() and not (workdir / "new.jsonl.partial").exists()
    )
    # What `papers build` reads: arXiv records, with the snapshot's IDs.
    built = papers(workdir, "list", "--format", "json", "--index", "nothing")
    assert built.returncode != 0 and "Traceback" not in built.stderr


def test_a_stopped_fetch_resumes_from_its_page_and_since_last_follows(workdir, oai):
    server = oai([PAGE_ONE, "fail"])
    stopped = papers(
        workdir,
        "fetch",
        "arxiv",
        "--category",
        "cs.LG",
        "--since",
        "2025-06-01",
        "--out",
        "new.jsonl",
        "--base-url",
        server.url,
        "--delay",
        "0",
    )
    assert (
        stopped.returncode != 0
        and "answered 400" in stopped.stderr
        and "Traceback" not in stopped.stderr
    )
    assert not (workdir / "new.jsonl").exists()  # never half a file
    server.steps = [PAGE_TWO]
    resumed = papers(
        workdir,
        "fetch",
        "arxiv",
        "--category",
        "cs.LG",
        "--since",
        "2025-06-01",
        "--out",
        "new.jsonl",
        "--base-url",
        server.url,
        "--delay",
        "0",
    )
    assert resumed.returncode == 0, resumed.stderr
    assert server.requests[-1][0] == {"verb": "ListRecords", "resumptionToken": "token-1"}
    assert [
        json.loads(line)["id"] for line in (workdir / "new.jsonl").read_text().splitlines()
    ] == ["2506.00001", "2506.00003"]
    server.steps = [
        OAI_HEAD.replace("<ListRecords>", "")
        + '<error code="noRecordsMatch">none</error></OAI-PMH>'
    ]
    again = papers(
        workdir,
        "fetch",
        "arxiv",
        "--category",
        "cs.LG",
        "--since",
        "last",
        "--base-url",
        server.url,
        "--delay",
        "0",
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "" and "fetched 0 cs.LG records" in again.stderr
    assert "from" in server.requests[-1][0]  # the day of the last fetch


def test_since_last_without_a_fetch_before_fetches_the_last_two_days_and_says_so(workdir, oai):
    import time

    server = oai(
        [OAI_HEAD.replace("<ListRecords>", "") + '<error code="noRecordsMatch"/></OAI-PMH>']
    )
    result = papers(
        workdir, "fetch", "arxiv", "--category", "cs.LG", "--since", "last",
        "--base-url", server.url, "--delay", "0",
    )  # fmt: skip
    start = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 2 * 86400))
    assert result.returncode == 0, result.stderr
    assert f"never fetched here: fetching the last 2 days (since {start})" in result.stderr
    assert server.requests[-1][0]["from"] == start


def note(forum: str, title: str, abstract: str, venueid: str, venue: str) -> dict:
    """A note as OpenReview's API v2 gives it (content fields as {"value": ...})."""
    return {
        "id": forum,
        "forum": forum,
        "cdate": 1746000000000,
        "pdate": 1758000000000,
        "content": {
            "title": {"value": title},
            "abstract": {"value": abstract},
            "authors": {"value": ["Ada Lovelace", "Alan Turing"]},
            "venue": {"value": venue},
            "venueid": {"value": venueid},
        },
    }


def test_fetch_openreview_tells_accepted_from_withdrawn(workdir, oai):
    venue = "NeurIPS.cc/2025/Conference"
    accepted = [
        note(
            "abc1",
            "Private Training",
            "Differentially private training.",
            venue,
            "NeurIPS 2025 poster",
        ),
        note("abc2", "Video Models", "Video aesthetic assessment.", venue, "NeurIPS 2025 oral"),
    ]
    broken = {"id": "abc3", "content": {"title": {"value": "No abstract"}}}
    withdrawn = [
        note(
            "abc9",
            "Withdrawn Work",
            "A withdrawn submission.",
            f"{venue}/Withdrawn_Submission",
            "NeurIPS 2025 Conference Withdrawn Submission",
        )
    ]
    server = oai(
        [
            "503",
            json.dumps({"notes": accepted[:1] + [broken], "count": 3}),
            "drop",
            json.dumps({"notes": accepted[1:], "count": 3}),
            json.dumps({"notes": withdrawn, "count": 1}),
        ]
    )
    done = papers(
        workdir,
        "fetch",
        "openreview",
        venue,
        "--withdrawn",
        "--out",
        "venue.jsonl",
        "--base-url",
        server.url.removesuffix("/oai"),
        "--delay",
        "0",
    )
    assert done.returncode == 0, done.stderr
    assert "fetched 2 accepted papers of NeurIPS.cc/2025/Conference, 1 withdrawn" in done.stderr
    assert "1 malformed notes skipped" in done.stderr
    lines = [json.loads(line) for line in (workdir / "venue.jsonl").read_text().splitlines()]
    assert [(line["id"], line["venue"]) for line in lines] == [
        ("openreview:abc1", "NeurIPS 2025 poster"),
        ("openreview:abc2", "NeurIPS 2025 oral"),
        ("openreview:abc9", "NeurIPS 2025 Conference Withdrawn Submission (withdrawn)"),
    ]
    assert lines[0]["url"] == "https://openreview.net/forum?id=abc1" and lines[0]["year"] == 2025
    queries = [query for query, _ in server.requests]
    assert queries[1] == {"content.venueid": venue, "offset": "0", "limit": "1000"}
    assert queries[-1]["content.venueid"] == f"{venue}/Withdrawn_Submission"
