"""`papers add` as segments: what an add costs, what segments cost lookups, and whether they rank
as a rebuild does.

    python scripts/bench_segments.py [--papers 40000 100000] [--added 1000] [--segments 10]
                                     [--queries 200] [--repeats 5]

On the stand-in encoder of scripts/bench_incremental.py (a hash of the text, no model: encoding
costs nothing, so every second measured is the index's own work), in one run, for each size of
`--papers` in turn:
- the add: `--added` papers added to a `--papers` index as one segment, their vectors already in
  the embedding cache, so the time is the add's cost beyond encoding (target: at most 5 s), against
  a rebuild of the whole index from the same cache;
- lookups: `--queries` `like` (a random seed) and `search` (four random words) on the index with
  the added papers in `--segments` segments, against the same on the compacted index (target: at
  most 1.2x): both open, each query run on one and then the other, the order alternating, so a
  load that comes and goes on a shared machine weighs on both alike; the ratio of this process's
  CPU seconds (and of wall seconds), `--repeats` times, median and spread;
- agreement: the top 10 of each of those queries with segments against the compacted index
  (target: equal for at least 99% of queries); the rest are reported with their overlap.

Quoted in: docs/measured-builds.md ("Adding papers: segments").
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_incremental import VOCABULARY, HashEncoder, synthetic, write  # noqa: E402

from recommender import build_index  # noqa: E402
from recommender.embed import loading  # noqa: E402
from recommender.index.segments import add_papers, compact  # noqa: E402
from recommender.query.segmented import open_index  # noqa: E402


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def run_queries(
    index_dir: Path, likes: list[str], searches: list[str], mode: str = "hybrid"
) -> tuple[float, list[list[str]]]:
    """Seconds for every query on an opened index (opening and first loads excluded), and the top
    10s."""
    with open_index(index_dir) as index:
        (
            index.like(likes[0], k=10, mode=mode),
            index.search(searches[0], k=10, mode=mode),
        )  # first loads, not timed
        tops: list[list[str]] = []
        started = time.perf_counter()
        for seed in likes:
            tops.append([item.id for item in index.like(seed, k=10, mode=mode)])
        for text in searches:
            tops.append([item.id for item in index.search(text, k=10, mode=mode)])
        return time.perf_counter() - started, tops


def paired_ratio(first: Path, second: Path, likes: list[str], searches: list[str]) -> dict:
    """The second index's lookup cost over the first's, both open, each query run on one and
    then the other (the order alternating): a load that comes and goes on a shared machine
    weighs on both alike. CPU seconds of this process (FAISS's threads included), and wall."""
    cpu, wall = [0.0, 0.0], [0.0, 0.0]
    with open_index(first) as one, open_index(second) as two:
        indexes = (one, two)
        for index in indexes:  # first loads, not timed
            index.like(likes[0], k=10), index.search(searches[0], k=10)
        queries = [("like", seed) for seed in likes] + [("search", text) for text in searches]
        for number, (kind, query) in enumerate(queries):
            for side in (0, 1) if number % 2 == 0 else (1, 0):
                index = indexes[side]
                started, started_cpu = time.perf_counter(), time.process_time()
                if kind == "like":
                    index.like(query, k=10)
                else:
                    index.search(query, k=10)
                cpu[side] += time.process_time() - started_cpu
                wall[side] += time.perf_counter() - started
    return {"cpu": cpu[1] / cpu[0], "wall": wall[1] / wall[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, nargs="+", default=[40_000, 100_000])
    parser.add_argument("--added", type=int, default=1_000)
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    use_stand_in()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    for papers in args.papers:
        started_load = os.getloadavg()[0]
        report(papers, args, measure(papers, args), started_load)


def use_stand_in() -> None:
    """Every build and add of this process encodes with the stand-in (a hash of the text), whatever
    encoder (ONNX, a precision) it would choose."""
    loading.load_encoder = lambda model, device="auto": HashEncoder()
    loading.encoder_spec = lambda model, *args, **kwargs: lambda: HashEncoder()


def measure(papers: int, args) -> dict:
    """Every figure of one size (see the module's docstring)."""
    work = Path(tempfile.mkdtemp(prefix="bench-segments-"))
    os.environ["PAPERS_CACHE"] = str(work / "cache")  # this run's own embedding cache
    options = dict(model="all-MiniLM-L6-v2", export_query_encoder=False)
    rng = np.random.default_rng(33)
    try:
        base = write(work / "base.jsonl", synthetic(0, papers))
        added = synthetic(papers, args.added)
        extra = write(work / "extra.jsonl", added)
        build_index(
            [base, extra], index=work / "warm", **options
        )  # every vector into the cache, not timed

        one = work / "one-segment"
        build_index([base], index=one, **options)
        add_seconds = timed(lambda: add_papers([extra], index=one, compact_share=None))
        rebuild_seconds = timed(lambda: compact(one))

        segmented = work / "segmented"
        build_index([base], index=segmented, **options)
        share = -(-args.added // args.segments)
        for number, start in enumerate(range(0, args.added, share)):
            part = write(work / f"part-{number}.jsonl", added[start : start + share])
            add_papers([part], index=segmented, compact_share=None)
        compacted = work / "compacted"
        build_index([base, extra], index=compacted, **options)

        ids = [f"p{i:07d}" for i in range(papers + args.added)]
        half = args.queries // 2
        likes = [ids[i] for i in rng.choice(len(ids), half, replace=False)]
        words = np.array(VOCABULARY)
        searches = [" ".join(rng.choice(words, 4)) for _ in range(args.queries - half)]
        expected = run_queries(compacted, likes, searches)[1]
        found = run_queries(segmented, likes, searches)[1]
        runs = [paired_ratio(compacted, segmented, likes, searches) for _ in range(args.repeats)]
        by_mode = {}
        for mode in ("dense", "lexical"):
            tops = (
                run_queries(compacted, likes, searches, mode)[1],
                run_queries(segmented, likes, searches, mode)[1],
            )
            by_mode[mode] = sum(a == b for a, b in zip(*tops)) / len(tops[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "add": add_seconds,
        "rebuild": rebuild_seconds,
        "ratios": [run["cpu"] for run in runs],
        "wall_ratios": [run["wall"] for run in runs],
        "found": found,
        "expected": expected,
        "half": half,
        "by_mode": by_mode,
    }


def report(papers: int, args, figures: dict, load: float) -> None:
    found, expected, half = figures["found"], figures["expected"], figures["half"]
    ratios, wall_ratios = figures["ratios"], figures["wall_ratios"]
    same = [a == b for a, b in zip(found, expected)]
    overlaps = [
        len(set(a) & set(b)) / max(1, len(b))
        for a, b, equal in zip(found, expected, same)
        if not equal
    ]
    like_same, search_same = sum(same[:half]), sum(same[half:])
    print(f"\n{papers:,} papers + {args.added:,} (load average {load:.1f} as it started)")
    print(f"| {papers:,} papers + {args.added:,} | seconds | target |")
    print("|---|---|---|")
    print(f"| add as one segment (beyond encoding) | {figures['add']:.2f} | at most 5 |")
    print(f"| rebuild of the whole index (beyond encoding) | {figures['rebuild']:.1f} | |")
    print(
        f"lookups with {args.segments} segments: "
        f"{statistics.median(ratios):.2f}x the compacted index in CPU time "
        f"(runs {', '.join(f'{r:.2f}' for r in ratios)}; target: at most 1.2x); "
        f"wall {statistics.median(wall_ratios):.2f}x "
        f"(runs {', '.join(f'{r:.2f}' for r in wall_ratios)})"
    )
    print(
        f"top 10 equal to the compacted index: like {like_same}/{half}, "
        f"search {search_same}/{len(same) - half} "
        f"({100 * sum(same) / len(same):.1f}%; target: at least 99%)"
    )
    print(
        "equal in the other modes: "
        + ", ".join(f"{mode} {100 * share:.1f}%" for mode, share in figures["by_mode"].items())
    )
    if overlaps:
        print(
            f"the others: {len(overlaps)} lists, "
            f"mean overlap {100 * statistics.mean(overlaps):.0f}% of their top 10"
        )


if __name__ == "__main__":
    main()
