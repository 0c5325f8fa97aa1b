#!/usr/bin/env python
"""`papers serve` under load, on the loopback only: requests/s, latency percentiles and errors.

    python scripts/bench_serve.py [--sizes 10000 100000] [--clients 1 8 32] [--workers 1 2]
                                  [--seconds 10] [--out /tmp/bench_serve]

Corpora: scripts/bench_scale_cli.py's synthetic "topics" papers (real CSFCube sentences), built with the
test suite's FakeEncoder (tests/fakes.py, 256-d), which tests/serve_launcher.py also gives the server for
`search` (a tiny model: right for timing, not for relevance). For each size and worker count, one real
`papers serve --port 0` (uvicorn; N workers under its supervisor); for each endpoint (`like` of a random
paper, `search` of 6 random words, the page `/`) and client count, CLIENTS threads of this process each
keep one HTTP/1.1 connection open and send requests back to back for SECONDS (after a warm-up of 2 s that
is not counted). Reported: requests/s, p50/p95/p99 in ms, errors (any status but 200, or a failed
connection). Bounded: every run stops after SECONDS; every request has a 30 s timeout; 127.0.0.1 only.

Also, per size: the warm in-process `PaperIndex.like` of the same papers (its p50, the baseline, in
this process) against the API's p50 with one client and one worker (the target: within 1.5x the library
call plus 2 ms), measured twice: apart (the load runs), and alternating one call in process with the same
call through the API (`--paired-only` runs just this), which a busy machine slows alike; each worker's PSS (/proc/PID/smaps_rollup, after the runs) and what the second worker
adds; and, at the smallest size, 8 clients on `like` while the index is rebuilt twice (the failed
requests: the target is none).

With `--reliability-only` (run with `--sizes 3000`, the size of the map that once took 48 s): `like` at 8
clients for SECONDS on a warm server (the baseline), then on a fresh server while a ninth client asks
for the cold `/map`, the cold `/api/sessions?n=` plans of n = 2..7 and the HTML `/sessions` pages of
n = 8 and 9, one after another (the target:
p99 under 100 ms, whatever the baseline), then while 1,100 connections trickle request heads, a byte a
second each (a slowloris; loopback only, bounded by SECONDS): how many `like` requests failed (the
target: none) and their p50/p99 against the baseline, and how the slow connections were answered.

With `--map-only` (run with `--sizes 3000`): a build with the FakeEncoder and the real UMAP, with and
without `--map-layout` (alternating, `--rounds` of each, after one uncounted build that fills the
embedding cache; each a fresh process, so UMAP's compile is counted as a build pays it), their ratio;
then the first `/map` of a fresh server (UMAP, as users get it) over each index: seconds until the map
is answered, and how many "being prepared" pages came first.

The `like` runs also report the server process's CPU time a request (from /proc/PID/stat, its own
threads: less noisy than latency on a shared machine), and a single client's run as the baseline of the
8 clients'.

The machine this ran on has 2 cores shared with other work: clients and server compete for them, so the
figures are those of a contended machine, and the 2-worker runs share the same 2 cores with 32 clients.

Quoted in: docs/serve.md ("Measured").
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_scale_cli import CSFCUBE  # noqa: E402  (the same sentences)
ENDPOINTS = ("like", "search", "page")
WARM_SECONDS = 2.0


def build(corpus: Path, index: Path) -> float:
    """Build (or rebuild) an index of the corpus with the FakeEncoder in a fresh process; seconds taken."""
    code = (
        "import sys; sys.path.insert(0, 'tests'); from serving import build_fake_index; import json; "
        f"from pathlib import Path; papers = [json.loads(l) for l in open({str(corpus)!r})]; "
        f"build_fake_index(Path({str(index)!r}), papers)"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used (its own threads, not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(server, load: "Load", seconds: float) -> dict:
    """`load.run(seconds)` and the server process's CPU time a request meanwhile (ms)."""
    before = cpu_seconds(server.process.pid)
    row = load.run(seconds)
    row["cpu_ms"] = (cpu_seconds(server.process.pid) - before) * 1000 / max(1, row["requests"])
    return row


def build_for_map(corpus: Path, index: Path, map_layout: bool) -> float:
    """A fresh build of the corpus with the FakeEncoder, the map's projection the real one (UMAP, unlike
    `build`), with or without its stored layout (`papers build --map-layout`); seconds taken."""
    import shutil

    shutil.rmtree(index, ignore_errors=True)
    code = (
        "import sys, json; sys.path.insert(0, 'tests'); from pathlib import Path; from fakes import FakeEncoder; "
        "from corpus import write_corpus; from recommender import build_index; from recommender.embed import loading; "
        "from recommender.index import build; encoder = FakeEncoder(); "
        "loading.load_encoder = lambda model, device='auto': encoder; "
        "build.prepare_query_encoder = lambda *args, **options: None; "
        f"papers = [json.loads(l) for l in open({str(corpus)!r})]; "
        f"build_index([write_corpus(Path({str(index)!r} + '-input'), papers)], index={str(index)!r}, "
        f"map_layout={map_layout!r})"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return time.perf_counter() - start


def first_map(index: Path) -> dict:
    """A fresh server's first /map (UMAP, as users get it): seconds until it answers the map, and the
    statuses answered meanwhile (202: the page that says it is being prepared)."""
    from serving import start_server

    server = start_server(index, env={"PAPERS_TEST_REAL_MODEL": "1"})
    statuses = []
    try:
        start = time.perf_counter()
        while time.perf_counter() - start < 600:
            status, _, _ = server.get("/map")
            statuses.append(status)
            if status != 202:
                break
            time.sleep(0.5)
        return {"seconds": time.perf_counter() - start, "first": statuses[0], "last": statuses[-1],
                "answers": len(statuses)}
    finally:
        server.stop()


def map_layout_costs(corpus: Path, out: Path, rounds: int) -> dict:
    """What `--map-layout` adds to a build (builds with and without it, alternating, after one build not
    counted that fills the embedding cache) and the first /map of each index."""
    plain, stored = out / "map-plain", out / "map-layout"
    build_for_map(corpus, plain, False)
    times: dict[str, list[float]] = {"plain": [], "layout": []}
    for _ in range(rounds):
        times["plain"].append(build_for_map(corpus, plain, False))
        times["layout"].append(build_for_map(corpus, stored, True))
    ratio = statistics.median(times["layout"]) / statistics.median(times["plain"])
    print(f"build with the map layout {statistics.median(times['layout']):.1f} s "
          f"({', '.join(f'{t:.1f}' for t in times['layout'])}), without "
          f"{statistics.median(times['plain']):.1f} s ({', '.join(f'{t:.1f}' for t in times['plain'])}): "
          f"{ratio:.2f}x", flush=True)
    maps = {"plain": first_map(plain), "layout": first_map(stored)}
    print(f"first /map without a stored layout: {maps['plain']}; with it: {maps['layout']} "
          f"({maps['layout']['seconds'] / maps['plain']['seconds']:.2f}x)", flush=True)
    return {"map_layout": True, "builds": times, "build_ratio": ratio, "first_map": maps}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


class Load:
    """CLIENTS threads, each one keep-alive connection, requests back to back until the deadline."""

    def __init__(self, url: str, paths, clients: int):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        self.paths, self.clients = paths, clients

    def run(self, seconds: float) -> dict:
        latencies: list[list[float]] = [[] for _ in range(self.clients)]
        errors = [0] * self.clients
        kinds: dict[str, int] = {}  # what failed: a status, or the exception of a failed connection
        deadline = time.perf_counter() + seconds

        def client(number: int) -> None:
            generator = random.Random(number)
            connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                while time.perf_counter() < deadline:
                    path = self.paths(generator)
                    start = time.perf_counter()
                    try:
                        connection.request("GET", path)
                        response = connection.getresponse()
                        response.read()
                        ok = response.status == 200
                        kind = f"status {response.status}"
                    except (OSError, http.client.HTTPException) as error:
                        ok, kind = False, type(error).__name__
                        connection.close()
                        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
                    if ok:
                        latencies[number].append(time.perf_counter() - start)
                    else:
                        errors[number] += 1
                        kinds[kind] = kinds.get(kind, 0) + 1
            finally:
                connection.close()

        threads = [threading.Thread(target=client, args=(number,)) for number in range(self.clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(seconds + 60)
        elapsed = time.perf_counter() - started
        merged = [value * 1000 for values in latencies for value in values]
        return {"requests": len(merged), "rps": len(merged) / elapsed, "p50": percentile(merged, 0.5),
                "p95": percentile(merged, 0.95), "p99": percentile(merged, 0.99), "errors": sum(errors),
                **({"failures": kinds} if kinds else {})}


def request_paths(endpoint: str, ids: list[str], words: list[str]):
    if endpoint == "like":
        return lambda generator: "/api/like?" + urlencode({"id": generator.choice(ids), "k": 10})
    if endpoint == "search":
        return lambda generator: "/api/search?" + urlencode({"q": " ".join(generator.sample(words, 6)), "k": 10})
    return lambda generator: "/"


def workers_of(pid: int) -> list[int]:
    """The processes answering requests: uvicorn's workers (without multiprocessing's resource tracker), or
    the server itself when it runs one."""
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                if b"resource_tracker" not in handle.read():
                    children.append(int(child))
    return sorted(children) or [pid]


def pss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def library_like_p50(index: Path, ids: list[str], count: int = 300) -> float:
    """The warm in-process `like` of random papers, p50 in ms (the same call the API makes)."""
    from recommender import PaperIndex

    generator = random.Random(0)
    with PaperIndex.open(index) as recommender:
        for _ in range(20):
            recommender.like(generator.choice(ids), k=10)
        times = []
        for _ in range(count):
            paper = generator.choice(ids)
            start = time.perf_counter()
            recommender.like(paper, k=10)
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def paired_like(url: str, index: Path, ids: list[str], count: int = 300) -> dict:
    """The same `like` calls in process and through the API (one worker, one client), alternating one
    by one, so that a machine busy with other work slows both alike; p50 of each in ms."""
    from recommender import PaperIndex

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    generator = random.Random(2)
    local, remote = [], []
    with PaperIndex.open(index) as recommender:
        for step in range(count + 20):
            paper = generator.choice(ids)
            start = time.perf_counter()
            recommender.like(paper, k=10)
            middle = time.perf_counter()
            connection.request("GET", "/api/like?" + urlencode({"id": paper, "k": 10}))
            response = connection.getresponse()
            response.read()
            end = time.perf_counter()
            if step >= 20 and response.status == 200:  # the first 20 warm both up
                local.append((middle - start) * 1000)
                remote.append((end - middle) * 1000)
    connection.close()
    return {"library_p50": statistics.median(local), "api_p50": statistics.median(remote), "pairs": len(local)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_serve"))
    parser.add_argument("--sentences", type=Path, default=CSFCUBE)
    parser.add_argument("--paired-only", action="store_true",
                        help="only the like in process and through the API, alternating (one worker)")
    parser.add_argument("--build-only", action="store_true", help="write the corpora and build the indexes, then stop")
    parser.add_argument("--map-only", action="store_true",
                        help="only what --map-layout adds to a build, and the first /map with and without it")
    parser.add_argument("--rounds", type=int, default=2, help="builds of each kind with --map-only")
    parser.add_argument("--reliability-only", action="store_true",
                        help="only like beside cold /map and /api/sessions, and beside slow clients")
    args = parser.parse_args()
    from bench_scale_cli import write_corpus
    from serving import start_server

    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["PAPERS_CACHE"] = str(args.out / "cache")
    results = []
    for size in args.sizes:
        corpus, index = args.out / f"corpus-{size}.jsonl", args.out / f"index-{size}"
        if not corpus.exists():
            write_corpus(corpus, size, args.sentences, "topics")
        if not index.exists():
            print(f"building {size:,} papers: {build(corpus, index):.0f} s", flush=True)
        if args.build_only:
            continue
        papers = [json.loads(line) for line in corpus.open(encoding="utf-8")]
        ids = [paper["id"] for paper in random.Random(1).sample(papers, 2000)]
        words = sorted({word for paper in papers[:2000] for word in paper["abstract"].split() if word.isalpha() and len(word) > 4})
        if args.map_only:
            results.append(map_layout_costs(corpus, args.out, args.rounds))
            continue
        if args.reliability_only:
            results.append(reliability(index, ids, args.seconds))
            continue
        baseline = library_like_p50(index, ids)
        print(f"{size:,} papers: in-process like p50 {baseline:.2f} ms", flush=True)
        memory, paired = {}, None
        for workers in args.workers:
            server = start_server(index, "--workers", str(workers))
            try:
                if workers == 1:
                    paired = paired_like(server.url, index, ids)
                    print(f"{size:,} papers, like alternating in process and through the API: {paired}", flush=True)
                if args.paired_only:
                    continue
                for endpoint in ENDPOINTS:
                    paths = request_paths(endpoint, ids, words)
                    Load(server.url, paths, 4).run(WARM_SECONDS)  # every worker's first requests load what they use
                    for clients in args.clients:
                        row = {"papers": size, "workers": workers, "endpoint": endpoint, "clients": clients,
                               **Load(server.url, paths, clients).run(args.seconds)}
                        results.append(row)
                        print(json.dumps({key: round(value, 2) if isinstance(value, float) else value
                                          for key, value in row.items()}), flush=True)
                memory[workers] = [pss_mb(pid) for pid in workers_of(server.process.pid)]
                if workers == 1 and size == min(args.sizes):
                    results.append(rebuild_under_load(server, corpus, index, ids, args.seconds))
            finally:
                server.stop()
                if server.errors:  # what the server logged (warnings and errors only): a worker restarted, say
                    print("server:", *server.errors[-20:], sep="\n  ", flush=True)
        results.append({"papers": size, "library_like_p50": baseline, "pss_mb": memory, "paired": paired})
        print(json.dumps(results[-1]), flush=True)
    if args.build_only:
        return
    if args.reliability_only or args.map_only:
        name = "reliability.json" if args.reliability_only else "map_layout.json"
        (args.out / name).write_text(json.dumps(results, indent=1))
        return
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(table(results))


def reliability(index: Path, ids: list[str], seconds: float) -> dict:
    """`like` at 8 clients: warm (the baseline), beside cold long work, beside a slowloris."""
    from serving import start_server

    like = request_paths("like", ids, [])
    rows: dict = {}

    def shown(row: dict) -> str:
        return (f"p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms, {row['requests']} requests, {row['errors']} failed, "
                f"server CPU {row['cpu_ms']:.2f} ms a request")

    server = start_server(index)
    try:
        Load(server.url, like, 4).run(WARM_SECONDS)
        rows["single"] = measured(server, Load(server.url, like, 1), seconds)
        rows["baseline"] = measured(server, Load(server.url, like, 8), seconds)
    finally:
        server.stop()
    print(f"{len(ids)} ids, like at 1 client, warm: {shown(rows['single'])}", flush=True)
    print(f"{len(ids)} ids, like at 8 clients, warm: {shown(rows['baseline'])} "
          f"(p50 {rows['baseline']['p50'] / rows['single']['p50']:.2f}x the single client's)", flush=True)

    server = start_server(index)
    long_work: dict = {}
    try:
        Load(server.url, like, 4).run(WARM_SECONDS)  # the lookups warm; /map and the plans still cold

        def cold() -> None:
            started = time.perf_counter()
            plans = [f"/api/sessions?n={n}" for n in range(2, 8)]
            for path in ["/map", *plans, "/sessions?n=8", "/sessions?n=9"]:
                status, _, _ = server.get(path)
                long_work[path] = status
            long_work["seconds"] = time.perf_counter() - started

        thread = threading.Thread(target=cold)
        thread.start()
        rows["cold"] = measured(server, Load(server.url, like, 8), seconds)
        thread.join(600)
    finally:
        server.stop()
    rows["cold"]["long_work"] = long_work
    print(f"like at 8 clients beside cold /map, 6 session plans and 2 session pages: {shown(rows['cold'])} "
          f"({rows['cold']['p99'] / rows['baseline']['p99']:.2f}x the warm p99; target p99 < 100 ms); "
          f"long work answered {long_work}", flush=True)

    server = start_server(index)
    answers: dict[str, int] = {}
    try:
        Load(server.url, like, 4).run(WARM_SECONDS)
        stop = threading.Event()
        parts = urlsplit(server.url)

        def slowloris() -> None:
            import resource
            import socket

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
            sockets = []
            for _ in range(1100):
                try:
                    connection = socket.create_connection((parts.hostname, parts.port), timeout=5)
                    connection.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    connection.setblocking(False)
                    sockets.append(connection)
                except OSError as error:
                    answers[type(error).__name__] = answers.get(type(error).__name__, 0) + 1
            while not stop.wait(1.0):
                for connection in list(sockets):
                    try:
                        connection.send(b"X")
                    except OSError:
                        sockets.remove(connection)
                        answers["closed by the server"] = answers.get("closed by the server", 0) + 1
            for connection in sockets:
                connection.close()
            answers["still open at the end"] = len(sockets)

        thread = threading.Thread(target=slowloris)
        thread.start()
        time.sleep(2)  # the flood is under way
        rows["slow"] = measured(server, Load(server.url, like, 8), seconds)
        stop.set()
        thread.join(60)
    finally:
        server.stop()
    rows["slow"]["slow_connections"] = answers
    rows["slow"]["server_log_lines"] = len(server.errors)
    print(f"like at 8 clients beside 1,100 slow request heads: {shown(rows['slow'])} "
          f"({rows['slow']['p99'] / rows['baseline']['p99']:.2f}x the warm p99); slow connections: {answers}; "
          f"server log: {len(server.errors)} lines", flush=True)
    return {"reliability": True, **rows}


def rebuild_under_load(server, corpus: Path, index: Path, ids: list[str], seconds: float) -> dict:
    """8 clients on `like` while the index is rebuilt twice (a changed corpus each time: new versions)."""
    papers = corpus.read_text(encoding="utf-8").splitlines()
    outcome: dict = {}
    load = Load(server.url, request_paths("like", ids, []), 8)
    thread = threading.Thread(target=lambda: outcome.update(load.run(seconds * 4)))
    thread.start()
    rebuilt = []
    for number in range(2):
        changed = corpus.with_name(f"{corpus.stem}-rebuild.jsonl")
        extra = json.dumps({"id": f"extra{number}", "title": f"Extra paper {number}", "abstract": "An added paper."})
        changed.write_text("\n".join(papers + [extra]) + "\n", encoding="utf-8")
        rebuilt.append(build(changed, index))
    thread.join()
    row = {"papers": len(papers), "rebuild": True, "rebuilds": len(rebuilt), "rebuild_seconds": rebuilt, **outcome}
    print(json.dumps(row), flush=True)
    return row


def table(results: list[dict]) -> str:
    lines = ["| papers | workers | endpoint | clients | req/s | p50 ms | p95 ms | p99 ms | errors |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in results:
        if "endpoint" in row:
            lines.append(f"| {row['papers']:,} | {row['workers']} | {row['endpoint']} | {row['clients']} | {row['rps']:.0f} "
                         f"| {row['p50']:.1f} | {row['p95']:.1f} | {row['p99']:.1f} | {row['errors']} |")
    lines.append("")
    for row in results:
        if row.get("rebuild"):
            lines.append(f"rebuild under load ({row['papers']:,} papers, 8 clients on like, {row['rebuilds']} rebuilds of "
                         f"{', '.join(f'{s:.0f}' for s in row['rebuild_seconds'])} s): {row['requests']} requests, "
                         f"{row['errors']} failed, p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms")
        if "library_like_p50" in row:
            api = next((r for r in results if r.get("papers") == row["papers"] and r.get("endpoint") == "like"
                        and r.get("clients") == 1 and r.get("workers") == 1), None)
            if api:
                target = 1.5 * row["library_like_p50"] + 2
                lines.append(f"{row['papers']:,} papers: like in process p50 {row['library_like_p50']:.2f} ms, through the "
                             f"API {api['p50']:.2f} ms ({api['p50'] / row['library_like_p50']:.2f}x; target <= {target:.2f} ms)")
            if row.get("paired"):
                pair = row["paired"]
                target = 1.5 * pair["library_p50"] + 2
                lines.append(f"{row['papers']:,} papers, alternating: like in process p50 {pair['library_p50']:.2f} ms, "
                             f"through the API {pair['api_p50']:.2f} ms ({pair['api_p50'] / pair['library_p50']:.2f}x; "
                             f"target <= {target:.2f} ms)")
            for workers, sizes in sorted(row["pss_mb"].items()):
                lines.append(f"{row['papers']:,} papers, {workers} worker(s): PSS " + ", ".join(f"{s:.0f} MB" for s in sizes))
            one, two = row["pss_mb"].get(1), row["pss_mb"].get(2)
            if one and two:
                lines.append(f"  the second worker adds {sum(two) - sum(one):.0f} MB to {sum(one):.0f} MB "
                             f"({(sum(two) - sum(one)) / sum(one):.2f}x of the first)")
            for endpoint in ("like",):
                for clients in (8, 32):
                    pair = [r for r in results if r.get("papers") == row["papers"] and r.get("endpoint") == endpoint
                            and r.get("clients") == clients]
                    rates = {r["workers"]: r["rps"] for r in pair}
                    if 1 in rates and 2 in rates:
                        lines.append(f"  {endpoint}, {clients} clients: 2 workers give {rates[2] / rates[1]:.2f}x the "
                                     "requests/s of 1")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
