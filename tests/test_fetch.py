"""`papers fetch arxiv` against an OAI-PMH server on 127.0.0.1 that this test starts, its pages made
from the protocol's and arXiv's published formats: paging by resumption token, a 503 with
Retry-After, a dropped connection, a malformed and a deleted record. Real processes throughout."""

import json
import os
import stat
import subprocess
import sys
import threading

import pytest
from fetching import OaiServer, answer, dripping, short_body

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


@pytest.fixture
def oai():
    servers = []

    def start(steps, then="fail"):
        servers.append(OaiServer(steps, then))
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


# Misbehaving servers, bounded waits, and outputs that are not plain files (issue: fetch family).


def fetch_cs(workdir, server, *extra, out="new.jsonl"):
    return papers(
        workdir, "fetch", "arxiv", "--category", "cs.LG", "--since", "2025-06-01", "--out", out,
        "--base-url", server.url, "--delay", "0", *extra,
    )


def fetch_venue(workdir, server, *extra, out="venue.jsonl"):
    return papers(
        workdir, "fetch", "openreview", "NeurIPS.cc/2025/Conference", "--out", out,
        "--base-url", server.url.removesuffix("/oai"), "--delay", "0", *extra,
    )


def one_error_line(result, *words):
    """A failed run: exit 1, its last stderr line one `Error:` naming `words`, no traceback."""
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert last.startswith("Error: ") and all(word in last for word in words), last


def fifo_reader(path):
    """Read a FIFO in a thread, as a consumer would; (thread, chunks)."""
    chunks = []

    def read():
        with open(path, "rb") as stream:
            chunks.append(stream.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, chunks


def release_fifo(path):
    """Unblock a reader still waiting for a writer (bounded: opening a FIFO with a reader waiting
    does not block)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def test_out_onto_a_fifo_or_a_device_is_written_into_never_replaced(workdir, oai):
    fifo = workdir / "records.fifo"
    os.mkfifo(fifo)
    thread, chunks = fifo_reader(fifo)
    done = fetch_cs(workdir, oai([PAGE_ONE, PAGE_TWO]), out="records.fifo")
    release_fifo(fifo)
    thread.join(10)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO
    assert [json.loads(line)["id"] for line in b"".join(chunks).decode().splitlines()] == [
        "2506.00001", "2506.00003"]
    os.symlink("/dev/null", workdir / "sink")
    done = fetch_venue(workdir, oai([json.dumps({"notes": [note("n1", "T", "A.", "v", "V 2025")],
                                                 "count": 1})]), out="sink")
    assert done.returncode == 0, done.stderr
    assert os.readlink(workdir / "sink") == "/dev/null"  # the link kept, /dev/null written into
    done = fetch_cs(workdir, oai([PAGE_ONE, PAGE_TWO]), out="/dev/null")
    assert done.returncode == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode), done.stderr
    os.symlink("/proc/self/fd/1", workdir / "out-link")  # the process's own standard output
    done = fetch_cs(workdir, oai([PAGE_ONE, PAGE_TWO]), out="out-link")
    assert done.returncode == 0 and os.readlink(workdir / "out-link") == "/proc/self/fd/1"
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == ["2506.00001", "2506.00003"]
    os.unlink(workdir / "out-link")
    assert sorted(path.name for path in workdir.iterdir()) == ["home", "records.fifo", "sink"]


def test_a_retry_after_longer_than_the_longest_wait_stops_at_once(workdir, oai):
    server = oai([PAGE_ONE, answer("busy", 503, [("Retry-After", "999999999")])])
    stopped = fetch_cs(workdir, server)
    one_error_line(stopped, "asks to wait 999999999 s", "600 s", "--longest-wait", "resumes")
    assert not (workdir / "new.jsonl").exists()
    server.steps = [PAGE_TWO]  # the pages fetched are kept: the rerun asks for the next one
    resumed = fetch_cs(workdir, server)
    assert resumed.returncode == 0, resumed.stderr
    assert server.requests[-1][0] == {"verb": "ListRecords", "resumptionToken": "token-1"}
    assert [json.loads(line)["id"] for line in (workdir / "new.jsonl").read_text().splitlines()] \
        == ["2506.00001", "2506.00003"]


def test_a_repeated_resumption_token_or_a_redirect_that_drops_it_stops(workdir, oai):
    one_error_line(fetch_cs(workdir, oai([], then=PAGE_ONE)), "a page it had given before")
    first_page = "/oai?verb=ListRecords&metadataPrefix=arXiv&set=cs%3Acs%3ALG&from=2025-06-01"
    redirect = answer("", 302, [("Location", first_page)])
    other = workdir / "other.jsonl"
    one_error_line(fetch_cs(workdir, oai([PAGE_ONE, redirect], then=PAGE_ONE), out=str(other)),
                   "redirected the request", "drops part of its query")


def test_an_openreview_count_beyond_the_most_records_is_refused(workdir, oai):
    page = json.dumps({"notes": [note("n1", "T", "A.", "v", "V 2025")], "count": 10**12})
    server = oai([], then=page)
    one_error_line(fetch_venue(workdir, server), "1000000000000 notes", "--max-records")
    assert len(server.requests) == 1
    # a server that ignores the offset: the same page again
    server = oai([], then=page.replace(str(10**12), "5"))
    one_error_line(fetch_venue(workdir, server), "a page of NeurIPS.cc/2025/Conference it had")


@pytest.mark.parametrize("options, words", [
    (["--response-timeout", "1"], ["took longer than 1 s to send one answer", "--response-timeout"]),
    (["--deadline", "2"], ["longer than its deadline of 2 s", "--deadline"]),
], ids=["response", "whole fetch"])
def test_a_server_dripping_a_byte_at_a_time_meets_a_deadline(workdir, oai, options, words):
    # The bound's own line is the proof it was met (a drip of 100,000 bytes takes 5.5 hours; the
    # process's timeout in fetch_cs stops a fetch that never meets it).
    one_error_line(fetch_cs(workdir, oai([], then=dripping(every=0.2, most=600)), *options), *words)


def test_a_body_shorter_than_its_content_length_is_one_line(workdir, oai):
    one_error_line(fetch_cs(workdir, oai([], then=short_body(b"<OAI-PMH x"))), "cannot reach",
                   "ended after 10 bytes")


def test_a_damaged_fetch_state_is_as_none(workdir, oai):
    none = OAI_HEAD.replace("<ListRecords>", "") + '<error code="noRecordsMatch">x</error></OAI-PMH>'
    assert fetch_cs(workdir, oai([none]), out="-").returncode == 0
    (state,) = workdir.rglob("fetch-state.json")
    server = oai([none] * 3)
    for damage in ("[1, 2]", "7", '{"arxiv cs.LG": 3}'):
        state.write_text(damage)
        result = papers(
            workdir, "fetch", "arxiv", "--category", "cs.LG", "--since", "last", "--out", "-",
            "--base-url", server.url, "--delay", "0",
        )  # fmt: skip
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert "cs.LG was never fetched here: fetching the last 2 days" in result.stderr


def test_openreview_odd_dates_ids_and_links_at_fetch(workdir, oai):
    notes = [note(f"n{i}", "Title", "Abstract.", "v", "Venue") for i in range(4)]
    for stamp, item in zip(["1e300", "NaN", "Infinity"], notes):
        item["pdate"] = f"@{stamp}@"
    notes[3]["id"] = notes[3]["forum"] = "x&id=evil#frag"
    odd = note("bad\u001b[31m\u202e", "Odd", "Odd id.", "v", "Venue")
    body = json.dumps({"notes": [*notes, odd], "count": 5})
    for stamp in ("1e300", "NaN", "Infinity"):
        body = body.replace(f'"@{stamp}@"', stamp)
    done = fetch_venue(workdir, oai([body]))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "warning: skipped a note whose ID 'openreview:bad\\x1b[31m\\u202e' contains" in done.stderr
    assert "1 skipped for their ID" in done.stderr
    lines = [json.loads(line) for line in (workdir / "venue.jsonl").read_text().splitlines()]
    assert [line["year"] for line in lines] == [2025] * 4  # the cdate's year where pdate is odd
    assert lines[3]["url"] == "https://openreview.net/forum?id=x%26id%3Devil%23frag"


def test_an_arxiv_record_with_a_direction_override_in_its_id_is_skipped(workdir, oai):
    page = PAGE_ONE.replace("2506.00002", "2506.0000\u202e2").replace(
        record("2506.0000\u202e2", "No Abstract Here", ""),
        record("2506.0000\u202e2", "Odd", "An odd ID."))
    done = fetch_cs(workdir, oai([page, PAGE_TWO]), "--quiet")  # a warning is shown even so
    assert done.returncode == 0, done.stderr
    assert "warning: skipped a record whose ID '2506.0000\\u202e2' contains an invisible" in done.stderr
    ids = [json.loads(line)["id"] for line in (workdir / "new.jsonl").read_text().splitlines()]
    assert ids == ["2506.00001", "2506.00003"]


def test_a_fetch_stopped_at_the_most_records_resumes_after_that_page(workdir, oai):
    # The page that passed the bound is kept with its count: a rerun with a larger bound goes on
    # after it (arXiv and OpenReview page through one loop), counting each record once.
    venue = "NeurIPS.cc/2025/Conference"
    accepted = json.dumps({"notes": [note("n1", "T1", "A one.", venue, "V")]})
    withdrawn = json.dumps(
        {"notes": [note("n2", "T2", "A two.", f"{venue}/Withdrawn_Submission", "V")]}
    )
    server = oai([accepted, withdrawn], then=withdrawn)
    one_error_line(
        fetch_venue(workdir, server, "--withdrawn", "--max-records", "1"),
        "most records of 1",
        "--max-records",
    )
    resumed = fetch_venue(workdir, server, "--withdrawn")
    assert resumed.returncode == 0, resumed.stderr
    assert f"fetched 1 accepted papers of {venue}, 1 withdrawn in 2 pages" in resumed.stderr
    lines = (workdir / "venue.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["openreview:n1", "openreview:n2"]
    server = oai([PAGE_ONE], then=PAGE_TWO)
    one_error_line(fetch_cs(workdir, server, "--max-records", "1"), "most records of 1")
    resumed = fetch_cs(workdir, server)
    assert resumed.returncode == 0, resumed.stderr
    assert "fetched 2 cs.LG records in 2 pages into new.jsonl, 1 malformed" in resumed.stderr
    ids = [json.loads(line)["id"] for line in (workdir / "new.jsonl").read_text().splitlines()]
    assert ids == ["2506.00001", "2506.00003"]
