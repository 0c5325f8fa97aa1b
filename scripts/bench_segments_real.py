"""`papers add` with the real default model: what an add costs beyond encoding its papers, and
whether `like` and `search` after adds rank as after a full build.

    python scripts/bench_segments_real.py [--papers 100000] [--added 1000]
        [--corpus ../shared/eval/csfcube-dev/corpus.jsonl] [--share 0.1] [--searches 300]

Two measurements, in one run, with the real default model (all-MiniLM-L6-v2, encoded as a build
encodes it on this machine's CPU):
- the add: `--added` papers of `--corpus` (real abstracts, read in place) added as one segment to
  a `--papers` index. Encoding 100k papers with the real model takes hours on 2 cores, so the
  base's vectors are the stand-in of bench_segments.py (a hash of the text) put in the embedding
  cache under the real model's identity: the base is built from the cache, as a rebuild finds it.
  The add is timed cold (the added papers encoded by the real model) and again on a copy of the
  base with their vectors cached: the second is the add's cost beyond encoding (target: at most
  5 s), the difference the encoding. The warm add is timed in wall-clock and in the process's
  CPU seconds (on a shared machine the wall clock also counts the other jobs' turns), and run
  once more, on a third copy, under cProfile for the share of each phase (reading the inputs,
  looking their IDs up in the base, the base's vocabulary, the embedding cache, the segment's
  papers and TF-IDF, its FAISS index, checksums and fsyncs, publishing). A full rebuild is the
  compaction of the index (beyond encoding, every vector cached) plus the encoding of every
  paper at the rate just measured.
- agreement: the corpus (every paper encoded by the real model) built at once, against its
  first (1 - `--share`) built and the rest added in 3 adds as segments; the top 10 of `like`
  (every paper as seed) and `search` (`--searches` titles of papers, as free text) in hybrid
  mode compared (target: equal for at least 99% of queries); the others are reported with
  their overlap and why they differ.

Quoted in: docs/measured-builds.md ("Adding papers: segments").
"""

from __future__ import annotations

import argparse
import json
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

from bench_incremental import HashEncoder, synthetic, write  # noqa: E402

from recommender import build_index  # noqa: E402
from recommender.embed import loading  # noqa: E402
from recommender.index.segments import add_papers, compact  # noqa: E402
from recommender.query.segmented import open_index  # noqa: E402

MODEL = "all-MiniLM-L6-v2"


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def timed_both(function) -> tuple[float, float]:
    """Wall-clock and CPU seconds of this process."""
    started, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - started, time.process_time() - cpu


# The phases of an add, as functions of the package: (label, module path suffix, function name).
PHASES = (
    ("reading the inputs", "corpus/papers.py", "scan_papers"),
    ("IDs looked up in the base", "index/segments.py", "_holders"),
    ("the base's vocabulary and IDF", "index/segments.py", "_base_terms"),
    ("vectors from the embedding cache", "index/build.py", "_embed"),
    ("papers and TF-IDF rows written", "index/spool.py", "write_papers"),
    ("TF-IDF arrays", "index/lexical.py", "finish"),
    ("FAISS index", "index/stages.py", "faiss_index_for"),
    ("checksums and fsyncs (commit)", "index/writer.py", "commit"),
    ("old versions looked for (removed)", "index/writer.py", "_remove_old_versions"),
    ("publishing the segment list", "index/segments.py", "_publish"),
)


def phase_shares(function) -> tuple[float, list[tuple[str, float]]]:
    """`function` run under cProfile: its seconds and each phase's cumulative seconds in it."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    function()
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(cumulative for (_, _, name), (_, _, _, cumulative, _) in stats.items()
                if name == "add_papers")
    shares = []
    for label, suffix, name in PHASES:
        seconds = sum(
            cumulative
            for (path, _, function_name), (_, _, _, cumulative, _) in stats.items()
            if function_name == name and path.endswith(suffix)
        )
        shares.append((label, seconds))
    return total, shares


def read_corpus(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as rows:
        return [json.loads(line) for line in rows if line.strip()]


def tops(index_dir: Path, seeds: list[str], searches: list[str]) -> list[list[str]]:
    with open_index(index_dir) as index:
        found = [[item.id for item in index.like(seed, k=10)] for seed in seeds]
        found += [[item.id for item in index.search(text, k=10)] for text in searches]
    return found


def measure_add(work: Path, papers: int, added: list[dict]) -> dict:
    """The add cold and warm on a `papers` base of stand-in vectors (see the docstring)."""
    work.mkdir(parents=True)
    real_load = loading.load_encoder
    loading.load_encoder = lambda model, device="auto": HashEncoder()
    options = dict(model=MODEL, export_query_encoder=False)
    base = write(work / "base.jsonl", synthetic(0, papers))
    build_index([base], index=work / "base", **options)  # the stand-in vectors into the cache
    loading.load_encoder = real_load
    extra = write(work / "added.jsonl", added)
    for name in ("cold", "warm", "profiled"):
        shutil.copytree(work / "base", work / name, symlinks=True)
    cold = timed(lambda: add_papers([extra], index=work / "cold", compact_share=None))
    warm, warm_cpu = timed_both(
        lambda: add_papers([extra], index=work / "warm", compact_share=None)
    )
    profiled, shares = phase_shares(
        lambda: add_papers([extra], index=work / "profiled", compact_share=None)
    )
    rebuild = timed(lambda: compact(work / "warm"))
    encoding = cold - warm
    return {
        "cold": cold,
        "beyond": warm,
        "beyond_cpu": warm_cpu,
        "profiled": profiled,
        "shares": shares,
        "encoding": encoding,
        "rebuild_beyond": rebuild,
        "rebuild_total": rebuild + encoding * (papers + len(added)) / len(added),
    }


def measure_agreement(work: Path, corpus: list[dict], share: float, searches: int) -> dict:
    rng = np.random.default_rng(33)
    work.mkdir(parents=True)
    options = dict(model=MODEL)
    whole = write(work / "corpus.jsonl", corpus)
    encode = timed(lambda: build_index([whole], index=work / "full", **options))
    first = int(len(corpus) * (1 - share))
    build_index([write(work / "first.jsonl", corpus[:first])], index=work / "added", **options)
    rest = corpus[first:]
    for number in range(3):
        part = rest[number * len(rest) // 3 : (number + 1) * len(rest) // 3]
        add_papers(
            [write(work / f"part-{number}.jsonl", part)], index=work / "added", compact_share=None
        )
    seeds = [paper["id"] for paper in corpus]
    texts = [corpus[i]["title"] for i in rng.choice(len(corpus), searches, replace=False)]
    expected = tops(work / "full", seeds, texts)
    found = tops(work / "added", seeds, texts)
    differing = [
        (query, a, b)
        for query, a, b in zip(seeds + texts, found, expected)
        if a != b
    ]
    return {
        "encode_seconds": encode,
        "papers": len(corpus),
        "added": len(rest),
        "likes": (sum(a == b for a, b in zip(found[: len(seeds)], expected)), len(seeds)),
        "searches": (
            sum(a == b for a, b in zip(found[len(seeds) :], expected[len(seeds) :])),
            len(texts),
        ),
        "differing": differing,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--added", type=int, default=1_000)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared/eval/csfcube-dev/corpus.jsonl",
    )
    parser.add_argument("--share", type=float, default=0.1)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--cache", type=Path, help="an embedding cache to keep (default: none)")
    parser.add_argument(
        "--only", choices=("add", "agreement"), help="one of the two measurements (default: both)"
    )
    args = parser.parse_args()
    corpus = read_corpus(args.corpus)
    work = Path(tempfile.mkdtemp(prefix="bench-segments-real-"))
    # This run's own embedding cache (or one kept between runs: then the add's papers must not
    # be in it yet, or its encoding is not measured).
    os.environ["PAPERS_CACHE"] = str(args.cache or work / "cache")
    try:
        # The add first: its papers are not in the cache yet (the agreement encodes them all).
        cost = (
            measure_add(work / "add", args.papers, corpus[: args.added])
            if args.only != "agreement"
            else None
        )
        agreement = (
            measure_agreement(work / "agreement", corpus, args.share, args.searches)
            if args.only != "add"
            else None
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    if cost is not None:
        print(f"| {args.papers:,} papers + {args.added:,}, real model | seconds | target |")
        print("|---|---|---|")
        print(f"| add as one segment, encoding included | {cost['cold']:.1f} | |")
        print(f"| of which encoding the {args.added:,} | {cost['encoding']:.1f} | |")
        print(f"| the rest (add beyond encoding) | {cost['beyond']:.2f} | at most 5 |")
        print(f"| the rest, CPU seconds of this process | {cost['beyond_cpu']:.2f} | |")
        print(f"| rebuild beyond encoding | {cost['rebuild_beyond']:.1f} | |")
        print(f"| full rebuild, encoding every paper at that rate | {cost['rebuild_total']:.0f} | |")
        print(f"the add beyond encoding under cProfile: {cost['profiled']:.2f} s, of which")
        for label, seconds in cost["shares"]:
            print(f"  {label}: {seconds:.2f} s ({100 * seconds / cost['profiled']:.0f}%)")
        rest = cost["profiled"] - sum(seconds for _, seconds in cost["shares"])
        print(f"  the rest: {rest:.2f} s ({100 * rest / cost['profiled']:.0f}%)")
    if agreement is None:
        return
    likes, searches = agreement["likes"], agreement["searches"]
    same = likes[0] + searches[0]
    total = likes[1] + searches[1]
    print(
        f"agreement on {agreement['papers']:,} papers ({agreement['added']:,} added in 3 adds; "
        f"full build encoded in {agreement['encode_seconds']:.0f} s): top 10 equal for "
        f"like {likes[0]}/{likes[1]}, search {searches[0]}/{searches[1]} "
        f"({100 * same / total:.1f}%; target: at least 99%)"
    )
    for query, found, expected in agreement["differing"][:20]:
        overlap = len(set(found) & set(expected))
        print(f"  {query[:60]!r}: overlap {overlap}/10; added {found} vs full {expected}")
    if agreement["differing"]:
        overlaps = [len(set(a) & set(b)) / 10 for _, a, b in agreement["differing"]]
        print(
            f"the others: {len(overlaps)} lists, mean overlap "
            f"{100 * statistics.mean(overlaps):.0f}% of their top 10"
        )


if __name__ == "__main__":
    main()
