#!/usr/bin/env python
"""The real CLI on synthetic corpora of 10k, 100k and 1M papers, as ratios to `import numpy, faiss`.

    python scripts/bench_scale_cli.py [--sizes 10000 100000 1000000] [--out /tmp/bench_scale_cli]
                                      [--runs 7] [--results results.jsonl]

Corpus: papers whose abstracts are 4-9 real sentences drawn from the CSFCube dev
corpus (/work/shared/eval/csfcube-dev/corpus.jsonl, or --sentences) and whose titles
are CSFCube titles (so handles tie in groups, as real titles do), IDs `syn0000001`...
Built through `build_index` with the test suite's fake encoder (tests/fakes.py,
384 dimensions, no ONNX export) in a fresh process; its peak RSS and the time
outside the encoder (reading, naming, TF-IDF, FAISS, writing) per paper are reported.

Then the real CLI in fresh processes (page cache warm, as for any second command),
each run alternating with the baseline `python -c "import numpy, faiss"` so that a busy
machine slows both alike: cold `like` (hybrid), `like --mode lexical` (no FAISS: the
lookup without the probed IVF lists), `show`. `search` needs the ONNX query
encoder, which the fake model has not: reported as not measured. Peak RSS of each
command is its process's ru_maxrss (getrusage RUSAGE_CHILDREN in a wrapper).
Each size appends one JSON line to --results; the table is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSFCUBE = Path("/work/shared/eval/csfcube-dev/corpus.jsonl")
DIMENSION = 384
TARGETS = {"like": 2.0, "show": 1.5, "like_rss_mb": 300}

# Runs a command and prints its wall time and peak RSS (KiB on Linux) as JSON.
WRAPPER = (
    "import json, resource, subprocess, sys, time\n"
    "started = time.perf_counter()\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - started\n"
    "if code.returncode: sys.exit(code.stderr.decode()[-2000:])\n"
    "print(json.dumps({'wall': wall, 'rss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
)


def environment() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def measure(command: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", WRAPPER, *command], capture_output=True, text=True, env=environment())
    if out.returncode:
        raise SystemExit(f"failed: {' '.join(command)}\n{out.stderr}")
    return json.loads(out.stdout)


# ---------------------------------------------------------------- corpus


def sentences_and_titles(path: Path) -> tuple[list[str], list[str]]:
    sentences, titles = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            titles.append(record.get("title") or "")
            sentences += [s.strip() for s in re.split(r"(?<=[.!?])\s+", record.get("abstract") or "") if len(s.strip()) > 20]
    return sentences, [t for t in titles if t]


def write_corpus(path: Path, count: int, source: Path) -> None:
    sentences, titles = sentences_and_titles(source)
    generator = random.Random(count)
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        for number in range(count):
            abstract = " ".join(generator.choices(sentences, k=generator.randint(4, 9)))
            record = {"id": f"syn{number:07d}", "title": generator.choice(titles), "abstract": abstract}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(temporary, path)


# ---------------------------------------------------------------- build (in a fresh process)


def build_child(corpus: str, index: str, report: str) -> None:
    """Build with the fake encoder; write timings and peak RSS to `report`."""
    import resource

    sys.path.insert(0, str(ROOT / "tests"))
    from fakes import FakeEncoder

    from recommender.embed import loading
    from recommender.index import build

    encoder = FakeEncoder(name="fake-384", dimension=DIMENSION, max_tokens=256)
    # Wall seconds and CPU seconds (of this process, all threads): CPU time per paper is what
    # a busy shared machine does not distort.
    timers = {"encode_s": 0.0, "read_s": 0.0, "encode_cpu_s": 0.0, "read_cpu_s": 0.0}

    def timed(name, function):
        def wrapper(*args, **kwargs):
            started, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                timers[name] += time.perf_counter() - started
                timers[name.replace("_s", "_cpu_s")] += time.process_time() - cpu
        return wrapper

    encoder.encode = timed("encode_s", encoder.encode)
    encoder.token_spans = timed("encode_s", encoder.token_spans)
    encoder.encoded_texts = _Discard()  # the fake keeps every text otherwise
    loading.load_encoder = lambda model: encoder
    build.prepare_query_encoder = lambda model, writer, previous: None
    build.read_papers = timed("read_s", build.read_papers)
    started, cpu = time.perf_counter(), time.process_time()
    result = build.build_index([corpus], index=index, model="fake-384")
    total, total_cpu = time.perf_counter() - started, time.process_time() - cpu
    Path(report).write_text(json.dumps({
        "papers": result.papers, "build_s": total, "build_cpu_s": total_cpu, **timers,
        "build_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "index_kind": result.index_kind,
    }))


class _Discard(list):
    def extend(self, items) -> None:
        pass


# ---------------------------------------------------------------- one size


def run_size(size: int, out: Path, runs: int, source: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    corpus, index, report = out / f"corpus-{size}.jsonl", out / f"index-{size}", out / f"build-{size}.json"
    if not corpus.exists():
        print(f"[{size}] writing corpus", flush=True)
        write_corpus(corpus, size, source)
    if not report.exists():
        print(f"[{size}] building", flush=True)
        measure([sys.executable, __file__, "--build-child", str(corpus), str(index), str(report)])
    built = json.loads(report.read_text())
    manifest = json.loads(next(index.glob("v-*/manifest.json")).read_text())
    python = sys.executable
    cli = [python, "-m", "recommender"]
    baseline = [python, "-c", "import numpy, faiss"]
    generator = random.Random(1)
    seeds = [f"syn{generator.randrange(size):07d}" for _ in range(runs + 1)]
    for command in (baseline, cli + ["like", seeds[-1], "--index", str(index)], cli + ["show", seeds[-1], "--index", str(index)]):
        measure(command)  # warm the page cache once
    times: dict[str, list] = {"baseline": [], "like": [], "like_lexical": [], "show": []}
    rss: dict[str, list] = {name: [] for name in times}
    print(f"[{size}] timing {runs} runs", flush=True)
    for run in range(runs):
        for name, command in (
            ("baseline", baseline),
            ("like", cli + ["like", seeds[run], "--index", str(index)]),
            # Without FAISS: what the lookup costs beyond the probed IVF lists.
            ("like_lexical", cli + ["like", seeds[run], "--mode", "lexical", "--index", str(index)]),
            ("show", cli + ["show", seeds[run], "--index", str(index)]),
        ):
            result = measure(command)
            times[name].append(result["wall"])
            rss[name].append(result["rss_kb"] / 1024)
    base = statistics.median(times["baseline"])
    row = {
        "papers": size,
        "baseline_s": base,
        "like_s": statistics.median(times["like"]),
        "like_ratio": statistics.median(times["like"]) / base,
        "like_rss_mb": max(rss["like"]),
        "like_lexical_s": statistics.median(times["like_lexical"]),
        "like_lexical_ratio": statistics.median(times["like_lexical"]) / base,
        "like_lexical_rss_mb": max(rss["like_lexical"]),
        "show_s": statistics.median(times["show"]),
        "show_ratio": statistics.median(times["show"]) / base,
        "show_rss_mb": max(rss["show"]),
        "baseline_rss_mb": max(rss["baseline"]),
        "search": "not measured (the fake encoder has no ONNX query encoder)",
        "build_s": built["build_s"],
        "build_encode_s": built["encode_s"],
        "build_read_s": built["read_s"],
        "build_us_per_paper_without_encoding": 1e6 * (built["build_s"] - built["encode_s"]) / size,
        "build_cpu_s": built["build_cpu_s"],
        "build_encode_cpu_s": built["encode_cpu_s"],
        "build_read_cpu_s": built["read_cpu_s"],
        "build_cpu_us_per_paper_without_encoding": 1e6 * (built["build_cpu_s"] - built["encode_cpu_s"]) / size,
        "build_read_cpu_us_per_paper": 1e6 * built["read_cpu_s"] / size,
        "build_rss_mb": built["build_rss_mb"],
        "index_kind": built["index_kind"],
        "faiss": manifest["index"]["description"],
        "index_mb": sum(p.stat().st_size for p in index.rglob("*") if p.is_file() and p.name != "cache.sqlite") / 2**20,
        "runs": runs,
    }
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| papers | baseline | cold `like` (ratio, peak RSS) | `like --mode lexical` (ratio, peak RSS) | `show` (ratio) "
        "| build CPU µs/paper, encoding excl. | of which reading + naming | build wall s | build peak RSS |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['papers']:,} | {r['baseline_s']:.2f} s "
            f"| {r['like_s']:.2f} s ({r['like_ratio']:.2f}x, {r['like_rss_mb']:.0f} MB) "
            f"| {r['like_lexical_s']:.2f} s ({r['like_lexical_ratio']:.2f}x, {r['like_lexical_rss_mb']:.0f} MB) "
            f"| {r['show_s']:.2f} s ({r['show_ratio']:.2f}x) "
            f"| {r['build_cpu_us_per_paper_without_encoding']:.0f} | {r['build_read_cpu_us_per_paper']:.0f} "
            f"| {r['build_s']:.0f} | {r['build_rss_mb'] / 1024:.1f} GB |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--build-child":
        build_child(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_scale_cli"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sentences", type=Path, default=CSFCUBE)
    parser.add_argument("--results", type=Path, default=None, help="JSON lines file (default OUT/results.jsonl)")
    args = parser.parse_args()
    results = args.results or args.out / "results.jsonl"
    rows = []
    for size in args.sizes:
        row = run_size(size, args.out, args.runs, args.sentences)
        rows.append(row)
        args.out.mkdir(parents=True, exist_ok=True)
        with open(results, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    print(f"baseline: `python -c \"import numpy, faiss\"` in the same run; targets: like <= {TARGETS['like']}x, "
          f"show <= {TARGETS['show']}x, like peak RSS <= {TARGETS['like_rss_mb']} MB; search: not measured (fake encoder)")
    print(table(rows))


if __name__ == "__main__":
    main()
