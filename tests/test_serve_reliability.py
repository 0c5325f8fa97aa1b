"""`papers serve` against clients that would take it down: slow request heads by the thousand, malformed
and oversized requests, a request longer than the shutdown bound, a killed supervisor, long work beside
lookups, and the smaller breaks (damaged tags, other loopback addresses, IDs a path cannot carry). All
through a real server on a real port of 127.0.0.1, raw sockets and real signals."""

import json
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from corpus import PAPERS, synthetic_papers
from serving import build_fake_index, start_server, wait_until

pytest.importorskip("fastapi", reason="papers serve needs the serve extra: pip install -e '.[serve]'")

LONG_ID = "long-" + "x" * 1500
ODD = [
    {"id": ".", "title": "A Paper Called Dot", "abstract": "Dots and points in language models and privacy."},
    {"id": "..", "title": "A Paper Called Dot Dot", "abstract": "Two dots for video ranking and aesthetics."},
    {"id": LONG_ID, "title": "A Paper With A Long ID", "abstract": "Long identifiers in recurrent networks."},
]
HOOKS = {"PAPERS_TEST_HOOKS": "1"}
SECURITY = ("content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy")


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_fake_index(tmp_path_factory.mktemp("serve-reliability") / "index", PAPERS + ODD)


@pytest.fixture(scope="module")
def server(index_dir):
    running = start_server(index_dir, env=HOOKS)
    yield running
    assert running.stop() == 0


def address(server) -> tuple[str, int]:
    host, port = urllib.parse.urlsplit(server.url).netloc.rsplit(":", 1)
    return host, int(port)


def raw(server, data: bytes, seconds: float = 30) -> bytes:
    """What the server answers to these bytes on one connection, until it closes it."""
    with socket.create_connection(address(server), timeout=seconds) as connection:
        connection.sendall(data)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def parse(response: bytes) -> tuple[int, dict, bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def assert_guarded(headers) -> None:
    headers = {name.lower(): value for name, value in dict(headers).items()}
    missing = [name for name in SECURITY if name not in headers]
    assert not missing, (missing, headers)


# ---------------------------------------------------------------- point 8: slow clients


def test_a_flood_of_slow_request_heads_keeps_no_one_out(index_dir):
    """1,100 connections that each send part of a request head and wait (a slowloris), against a server
    limited to 1,024 open files (a common default): a normal client is still answered, the slowest
    connections are closed with a 408 in JSON, and the log says so in a line or two, never a traceback
    per accept."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    server = start_server(index_dir, open_files=1024)
    slow = []
    try:
        for _ in range(1100):
            connection = socket.create_connection(address(server), timeout=30)
            connection.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(connection)
        status, headers, body = server.get("/api/like?id=dp1")
        assert status == 200 and json.loads(body)
        first = b""
        while chunk := slow[0].recv(65536):
            first += chunk
        status, headers, body = parse(first)
        assert status == 408 and "head" in json.loads(body)["error"]
        assert_guarded(headers)
        for connection in slow:
            connection.close()
        assert server.get("/api/info")[0] == 200
    finally:
        for connection in slow:
            connection.close()
        server.stop()
    assert not any("Traceback" in line for line in server.errors), server.errors[:5]
    assert len(server.errors) <= 3, server.errors  # a line a minute at most, whatever the count


# ---------------------------------------------------------------- point 10: every response guarded


def test_malformed_and_oversized_requests_get_json_with_the_headers(server):
    status, headers, body = parse(raw(server, b"NOT HTTP AT ALL\r\n\r\n"))
    assert status == 400 and "malformed" in json.loads(body)["error"]
    assert_guarded(headers)
    huge = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    status, headers, body = parse(raw(server, huge))
    assert status == 431 and "larger" in json.loads(body)["error"]
    assert_guarded(headers)


def test_an_unexpected_error_is_a_json_500_with_the_headers(server):
    status, headers, body = server.get("/api/search?q=explode")
    assert status == 500 and json.loads(body)["error"].startswith("internal error (RuntimeError)")
    assert_guarded(headers)
    status, headers, body = server.get("/?q=explode")
    assert status == 500 and b"internal error" in body
    assert_guarded(headers)


def test_head_is_get_without_the_body(server):
    for path in ("/", "/api/info", "/tags", "/paper/dp1"):
        status, headers, body = server.get(path, method="HEAD")
        assert (status, body) == (200, b""), path
        assert_guarded(headers)


# ---------------------------------------------------------------- point 9: long work beside lookups


def test_a_cold_map_and_sessions_do_not_hold_up_lookups(index_dir):
    """The map takes 40 s to draw here (a hook in tests/serve_launcher.py): the page says it is being
    prepared, lookups are answered meanwhile, and the map comes once drawn."""
    server = start_server(index_dir, env={**HOOKS, "PAPERS_TEST_SLOW_MAP": "40"})
    try:
        status, headers, body = server.get("/map")
        assert status == 202 and b"being prepared" in body and headers["Refresh"]
        assert_guarded(headers)
        answers = []

        def lookups():
            for _ in range(10):
                answers.append(server.get("/api/like?id=dp1")[0])

        thread = threading.Thread(target=lookups)
        thread.start()
        thread.join(20)  # the old server held every request of the worker for the whole map
        assert not thread.is_alive() and answers == [200] * 10
        assert server.get("/sessions?n=2")[0] in (200, 202)
        assert server.json("/api/sessions?n=2")[0] == 200
        status, headers, body = wait_until(lambda: (lambda got: got if got[0] == 200 else None)(server.get("/map")),
                                           seconds=90, step=1)
        assert b"/map.js" in body
    finally:
        assert server.stop() == 0


def test_a_large_sessions_page_renders_off_the_event_loop(index_dir, tmp_path):
    """Rendering the plan into the /sessions page takes 15 s here (a hook in tests/serve_launcher.py,
    as a plan of thousands of papers takes seconds): lookups are answered while it renders, and the
    page comes once rendered."""
    server = start_server(index_dir, env={**HOOKS, "PAPERS_TEST_SLOW_PLAN_PAGE": f"15:{tmp_path}"})
    try:
        first = []
        thread = threading.Thread(target=lambda: first.append(server.get("/sessions?n=2")))
        thread.start()
        wait_until(lambda: (tmp_path / "started").exists(), seconds=60)
        assert server.get("/api/like?id=dp1")[0] == 200
        assert server.get("/paper/dp1")[0] == 200
        # answered while the plan was still rendering: the old server rendered it on the event loop
        assert not (tmp_path / "finished").exists()
        thread.join(60)
        status, headers, body = first[0]
        assert status == 202 and b"being prepared" in body
        assert_guarded(headers)
        status, headers, body = wait_until(
            lambda: (lambda got: got if got[0] == 200 else None)(server.get("/sessions?n=2")),
            seconds=90, step=1)
        assert b"Reading-group plan:" in body and b"Session 2" in body
        assert_guarded(headers)
    finally:
        assert server.stop() == 0


def test_long_work_runs_at_a_lower_priority_than_lookups(server):
    """The background process that makes plans and maps yields the processor to the server's requests."""
    assert server.json("/api/sessions?n=3")[0] == 200
    children = [int(child) for task in os.listdir(f"/proc/{server.process.pid}/task")
                for child in Path(f"/proc/{server.process.pid}/task/{task}/children").read_text().split()]
    background = [child for child in children
                  if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]
    assert background, "no background process"
    for child in background:  # field 19 of /proc/PID/stat is the nice value
        assert int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[16]) >= 10


def test_the_map_of_an_index_built_with_its_layout_comes_on_the_first_request(tmp_path):
    """Projecting takes a minute here (a hook in tests/serve_launcher.py, as UMAP does at thousands of
    papers), but the build stored the layout: the first /map is the map itself, no waiting page."""
    index = build_fake_index(tmp_path / "index", PAPERS, map_layout=True)
    server = start_server(index, env={**HOOKS, "PAPERS_TEST_SLOW_PROJECTION": "60"})
    try:
        status, headers, body = server.get("/map")
        assert status == 200 and b"/map.js" in body and b"being prepared" not in body
        assert_guarded(headers)
    finally:
        assert server.stop() == 0


# ---------------------------------------------------------------- point 12: signals and supervision


def test_a_stop_cuts_a_request_past_the_bound_and_says_so(index_dir):
    """A request that would run 300 s: a stop answers it 503 in JSON after the 10 s bound, names it in the
    log and exits, rather than waiting for it (or writing a bare "Internal Server Error")."""
    server = start_server(index_dir, env=HOOKS)
    got = []
    thread = threading.Thread(target=lambda: got.append(server.get("/api/search?q=sleep:300")))
    thread.start()
    time.sleep(1)  # the request is running by now
    server.process.send_signal(signal.SIGTERM)
    try:
        code = server.process.wait(60)
    except subprocess.TimeoutExpired:
        server.stop(signal.SIGKILL)
        raise AssertionError("the server still waited for the request a minute after SIGTERM")
    thread.join(30)
    server.stop()
    status, headers, body = got[0]
    assert status == 503 and "stopped before this request finished" in json.loads(body)["error"]
    assert_guarded(headers)
    assert code == 0
    assert any("cut" in line and "GET /api/search" in line for line in server.errors), server.errors


def children_of(pid: int) -> list[int]:
    """The worker processes of a supervisor (its children, less multiprocessing's resource tracker)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
            try:
                if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except FileNotFoundError:
                continue
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_workers_stop_when_their_supervisor_is_killed(index_dir):
    server = start_server(index_dir, "--workers", "2")
    workers: list[int] = []
    try:
        workers = wait_until(lambda: (lambda found: found if len(found) >= 2 else None)(
            children_of(server.process.pid)))
        for _ in range(10):  # both workers serving
            assert server.get("/api/like?id=dp1")[0] == 200
        server.process.kill()
        server.process.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in workers), seconds=30)
        with pytest.raises(OSError):
            socket.create_connection(address(server), timeout=5).close()
    finally:
        for pid in workers:  # should they outlive it (the failure this test is for), they hold its pipes
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        server.stop(signal.SIGKILL)


# ---------------------------------------------------------------- point 11: the write token


def test_the_token_cookie_is_this_servers_and_sign_in_redirects_only_here(index_dir, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    token_file.chmod(0o600)
    server = start_server(index_dir, "--token-file", str(token_file))
    try:
        assert b"s3cret-token" not in Path(f"/proc/{server.process.pid}/cmdline").read_bytes()
        assert server.get("/api/tags/reading/dp1", method="PUT")[0] == 401
        status, _ = server.json("/api/tags/reading/dp1", method="PUT",
                                headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200
        port = address(server)[1]
        for target in ("//evil.example/?token=s3cret-token", "/\\evil.example?token=s3cret-token"):
            status, headers, _ = parse(raw(server, f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                                   "Connection: close\r\n\r\n".encode()))
            assert status == 303 and headers["location"].startswith("/") and "evil" not in headers["location"]
            assert headers["set-cookie"].startswith(f"papers_token_{port}=")
    finally:
        assert server.stop() == 0


# ---------------------------------------------------------------- point 13: smaller breaks


def test_pages_degrade_when_tags_sqlite_is_damaged(tmp_path):
    index_dir = build_fake_index(tmp_path / "index", PAPERS)
    server = start_server(index_dir)
    try:
        assert server.get("/api/tags/reading/dp1", method="PUT")[0] == 200
        (index_dir / "tags.sqlite").write_bytes(b"this is not a database" * 100)
        for path in ("/", "/paper/dp1", "/?pid=dp1"):
            assert server.get(path)[0] == 200, path
        status, body = server.json("/api/tags")
        assert status >= 500 and "tags" in body["error"]
    finally:
        assert server.stop() == 0


def test_another_loopback_address_serves_its_own_address(index_dir):
    server = start_server(index_dir, "--host", "127.0.0.2")
    try:
        assert "127.0.0.2" in server.url
        assert server.get("/api/info")[0] == 200 and server.get("/")[0] == 200
    finally:
        assert server.stop() == 0


def test_papers_named_dot_and_long_ids_open_from_their_links(server):
    """Links resolved as a browser does (dot segments removed, RFC 3986) still reach the paper."""
    import re

    _, _, body = server.get("/?page=1&k=100")
    _, _, listing = server.get("/?q=dots+privacy+video&k=100")
    links = set(re.findall(r'href="(/paper[^"]*)"', (body + listing).decode()))
    for paper_id, title in ((".", "A Paper Called Dot"), ("..", "A Paper Called Dot Dot")):
        found = [link for link in links if urllib.parse.unquote(link.split("id=")[-1]) == paper_id]
        assert found, (paper_id, sorted(links)[:10])
        resolved = urllib.parse.urlsplit(urllib.parse.urljoin(server.url + "paper/x", found[0].replace("&amp;", "&")))
        status, _, page = server.get(resolved.path + (f"?{resolved.query}" if resolved.query else ""))
        assert status == 200 and f">{title}<" in page.decode(), page[:300]
    quoted = urllib.parse.quote(LONG_ID, safe="")
    assert server.get(f"/api/papers/{quoted}")[0] == 200
    assert server.get(f"/paper/{quoted}")[0] == 200


def test_recommended_for_all_of_many_tags(server):
    for number in range(200):
        assert server.get(f"/api/tags/topic-{number:03d}/dp1", method="PUT")[0] == 200
    try:
        _, _, page = server.get("/tags")
        import re

        link = re.search(r'href="([^"]*)">Recommended for all tags', page.decode()).group(1)
        status, _, body = server.get(link.replace("&amp;", "&"))
        assert status == 200 and b"Recommended for all tags" in body
    finally:
        for number in range(200):
            server.get(f"/api/tags/topic-{number:03d}/dp1", method="DELETE")


def test_api_errors_name_the_apis_parameters(server):
    status, body = server.json("/api/papers?where=nonsense")
    assert status == 400 and "--" not in body["error"] and "where" in body["error"]
    status, body = server.json("/api/like?id=dp1&min_score=2")
    assert status == 422 and "--" not in body["error"]
    status, body = server.json("/api/papers/%20")
    assert "papers list" not in body["error"] and "--" not in body["error"]


def test_a_tag_write_waiting_on_a_locked_tags_file_holds_up_no_lookup(server, index_dir):
    assert server.get("/api/tags/locked/dp1", method="PUT")[0] == 200
    holder = sqlite3.connect(index_dir / "tags.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program writing the tags: our write waits for it
    try:
        write = threading.Thread(target=lambda: server.get("/api/tags/locked/dp2", method="PUT"))
        write.start()
        time.sleep(0.5)  # the write is waiting by now
        answers = []
        lookups = threading.Thread(target=lambda: answers.extend(server.get("/api/like?id=dp1")[0] for _ in range(5)))
        lookups.start()
        lookups.join(8)  # the write waits 10 s for the lock; the old server held every lookup that long
        assert not lookups.is_alive() and answers == [200] * 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    write.join(30)
    server.get("/api/tags/locked/dp1", method="DELETE")
    server.get("/api/tags/locked/dp2", method="DELETE")


# ---------------------------------------------------------------- the background process


def background_processes(pid: int) -> list[int]:
    """The server's background process (multiprocessing's spawned children, less its resource tracker)."""
    return [child for child in children_of(pid)
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


def test_a_background_process_killed_while_idle_is_replaced_for_the_next_request(index_dir):
    """The background process dies while idle (SIGKILL, as the kernel's out-of-memory killer sends):
    the next /map and /api/sessions are answered by a new one, not 500 until a restart."""
    server = start_server(index_dir, env=HOOKS)
    try:
        assert server.json("/api/sessions?n=2")[0] == 200
        for attempt in range(2):  # killed twice: each time a new process takes over
            (background,) = background_processes(server.process.pid)
            os.kill(background, signal.SIGKILL)
            wait_until(lambda pid=background: not alive(pid))
            time.sleep(0.5)  # the pool's own thread has seen it gone by now
            status, body = server.json(f"/api/sessions?n={3 + attempt}")
            assert status == 200 and body["sessions"], body
            status, _, page = wait_until(
                lambda: (lambda got: got if got[0] != 202 else None)(server.get("/map")), seconds=90, step=1)
            assert status == 200 and b"/map.js" in page, page[:300]
            server.get("/api/papers?limit=1")
            (replacement,) = background_processes(server.process.pid)
            assert replacement != background
    finally:
        assert server.stop() == 0
    assert not any("Traceback" in line for line in server.errors), server.errors[-20:]


def test_a_stop_with_long_work_in_flight_is_bounded_and_says_what_it_cut(tmp_path):
    """4,000 papers, a cold /map and seven cold session plans queued for the one background process,
    SIGTERM once every page said its work is being prepared: the server stops within the shutdown
    bound whatever the background process is doing, and one line on stderr names the work it cut,
    that work and no other (the server used to run on, a minute and more, after every client had its
    answer)."""
    index = build_fake_index(tmp_path / "index", synthetic_papers(0, 4000))
    server = start_server(index)
    work = {"/map": "the map"}
    work.update({f"/sessions?n={n}": f"the plan in {n} sessions" for n in range(2, 9)})
    answers: dict = {}
    threads = [
        threading.Thread(target=lambda path=path: answers.update({path: server.get(path)}), daemon=True)
        for path in work
    ]
    for thread in threads:
        thread.start()
    # Each page answers once its work is done, or after a short wait that it is being prepared: the
    # server's own report of the work still in flight when the stop comes.
    wait_until(lambda: len(answers) == len(work), seconds=120)
    preparing = {work[path] for path, (status, _, body) in answers.items()
                 if status == 202 and b"is being prepared" in body}
    assert all(status in (200, 202) for status, _, _ in answers.values()), answers
    # The work runs one piece after another: at most one piece can end between the last report and
    # the signal, so two or more reported means work certainly in flight at the stop.
    assert len(preparing) >= 2, f"the work was done before the stop (too little here): {answers}"
    assert background_processes(server.process.pid)
    server.process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    try:
        code = server.process.wait(30)  # the bound is 10 s; this is a loaded machine's margin
    except subprocess.TimeoutExpired:
        server.stop(signal.SIGKILL)
        raise AssertionError("the server still ran 30 s after SIGTERM") from None
    took = time.monotonic() - started
    for thread in threads:
        thread.join(10)
    server.stop()
    assert code == 0
    notes = [line for line in server.errors if line.startswith("stopped:")]
    assert len(notes) == 1, server.errors
    head = "stopped: background work cut (made again on request): "
    assert notes[0].startswith(head), notes  # no request was running: every page had its answer
    cut = notes[0][len(head):].split(", ")
    assert len(cut) == len(set(cut)), notes
    assert set(cut) <= preparing, (notes, preparing)  # work done is not said to be cut
    assert len(cut) >= len(preparing) - 1, (notes, preparing)
    assert not any("Traceback" in line or "leaked" in line for line in server.errors), server.errors
    print(f"stopped {took:.1f} s after SIGTERM: {notes[0]}")


def serve_exit(index_dir, *args: str, seconds: float = 30) -> tuple[int, str]:
    """(exit code, stderr) of `papers serve ARGS` that must not start: a real process, its address space
    bounded (a server reading a device for ever fails here, not the machine)."""
    from serving import LAUNCHER

    def bounded():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    process = subprocess.Popen([sys.executable, str(LAUNCHER), "serve", "--index", str(index_dir), "--port", "0",
                                *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=bounded)
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError(f"papers serve {' '.join(args)} still ran {seconds} s later") from None
    return process.returncode, out + err


@pytest.mark.parametrize("kind", ["device", "fifo", "large"])
def test_a_token_file_is_a_small_regular_file(index_dir, tmp_path, kind):
    """--token-file /dev/zero used to be read for ever (500 MB a second), a FIFO with no writer waited on
    for ever: each is refused in one line, exit 2, before anything starts."""
    if kind == "device":
        path = "/dev/zero"
    elif kind == "fifo":
        path = str(tmp_path / "token.fifo")
        os.mkfifo(path)
    elif kind == "large":
        path = str(tmp_path / "token")
        Path(path).write_text("a" * 100_000)
    code, output = serve_exit(index_dir, "--token-file", path)
    lines = output.strip().splitlines()
    assert code == 2 and len(lines) == 1, output[-2000:]
    assert path in lines[0] and "small regular file" in lines[0], lines


def test_a_tag_written_after_the_served_index_is_renamed_lands_in_the_renamed_index(tmp_path):
    """`papers indexes mv` of the index being served: the server follows it, its tags too (they used to be
    written where the index had been)."""
    from serving import LAUNCHER

    old, new = tmp_path / "old", tmp_path / "new"
    build_fake_index(old, PAPERS)
    server = start_server(old)
    try:
        assert server.get("/api/tags/before/dp1", method="PUT")[0] == 200
        moved = subprocess.run([sys.executable, str(LAUNCHER), "indexes", "mv", str(old), str(new)],
                               capture_output=True, text=True, timeout=120)
        assert moved.returncode == 0, moved.stderr
        status, body = server.json("/api/tags/after/dp2", method="PUT")
        assert status == 200 and body["papers"] == ["dp2"], body
        status, body = server.json("/api/marks/not?tag=after&paper=rnn1", method="PUT")
        assert status == 200, body
        status, body = server.json("/api/tags")
        assert {"tag": "after", "papers": ["dp2"]} in body and {"tag": "before", "papers": ["dp1"]} in body
    finally:
        assert server.stop() == 0
    assert not old.exists(), sorted(old.rglob("*"))
    with sqlite3.connect(new / "tags.sqlite") as connection:
        assert sorted(connection.execute("SELECT tag, paper FROM tags")) == [("after", "dp2"), ("before", "dp1")]
        assert list(connection.execute("SELECT tag, paper, kind FROM marks")) == [("after", "rnn1", "not")]
