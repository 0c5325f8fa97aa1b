#!/usr/bin/env python
"""What each build tier costs and gains, in one run: fp32, int8 (ONNX Runtime) and the static fast tier.

    python scripts/bench_tiers.py [--index-root DIR] [--repeats 50] [--skip-throughput] [--skip-relevance]
    python scripts/bench_tiers.py --build-sizes 100,300,1000,3000 [--rounds 2] [--search-runs 5]

Throughput: every CSFCube dev paper ("title. abstract", title-prefixed sentence windows, nothing
truncated) through the build's own encoding path (`embed_texts`, no cache), once per tier in
this process, as abstracts/s, the ratio to fp32 and the hours 1M papers would take at that rate.
Then threads against processes for the default precision: one encoder with 2 ONNX Runtime
threads against 2 processes of 1 thread each, on the same papers.

Relevance: for each tier, the CSFCube dev index built (or reused) under --index-root with
`papers evaluate`'s own code (its vectors are kept there: a re-run encodes nothing), then
every query ranked over its judged pool for each dense weight and pool size, and the setting
chosen by repeated 2-fold cross-validation over the query papers (scripts/tune_relevance.py's
folds): held-out MAP / NDCG%20 mean and sd, the setting chosen most often, and each tier's
figures at its shipped setting. int8 ships as the default only if its held-out MAP and NDCG%20
stay within 0.3 of fp32's.

--build-sizes: whole `papers build` runs (fresh processes, as a user runs them) at int8-smooth and
int8-static, in turns (the order alternating), on the first N CSFCube dev papers for each N: wall
and CPU time and peak memory, medians over --rounds and the ratio int8-smooth / int8-static (above 1:
int8-static is faster). Every build starts from an empty embedding cache with the user cache warm
(exports, int8-static's calibration and its compiled model made by an unmeasured build and search
first); then the one-time cost, a build of the smallest corpus from an empty user cache (export,
quantisation or calibration, compilation) against the same build warm; then a cold `papers search`
of each index, the two precisions in turns. The machine's load average is printed with each.

Quoted in: docs/tiers.md (the tiers table, int8 against fp32, threads against processes; the
precision chosen by corpus size) and docs/measured-openvino.md (whole builds by corpus size).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

DATA = ROOT.parent / "shared/eval/csfcube-dev"
TIERS = (("fp32", None, "fp32"), ("int8", None, "int8"), ("static", "static", None))  # label, model, precision
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 2 / 3, 0.7, 0.75, 0.8)  # of the dense cosine; 0 is TF-IDF alone
POOLS = (50, 100, 200)
MILLION = 1_000_000


def papers(data: Path):
    from recommender.corpus.papers import read_papers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_papers([data / "corpus.jsonl"])


def encoder_for(label: str, threads: int | None = None):
    """The encoder a build of `label` uses, from the shared export cache (made there if missing)."""
    from recommender.embed import export_cache, loading
    from recommender.embed.sentence_transformer import DEFAULT_MODEL

    if label == "static":
        return loading.load_static_encoder(export_cache.static_export(DEFAULT_MODEL), "static")
    return loading.load_onnx_encoder(export_cache.shared_export(DEFAULT_MODEL, precision=label), DEFAULT_MODEL, threads)


def encode(encoder, texts, heads, precision="fp32"):
    from recommender.embed.windows import embed_texts

    return embed_texts(encoder, texts, heads=heads, precision=precision).vectors


def _worker(label, texts, heads, barrier, results):
    encoder = encoder_for(label, threads=1)
    encode(encoder, texts[:4], heads[:4])  # warm-up, as the threaded run had
    barrier.wait()  # both processes loaded: from here they encode side by side
    started = time.perf_counter()
    encode(encoder, texts, heads)
    results.put(time.perf_counter() - started)


def threads_or_processes(corpus, label: str, count: int = 600) -> None:
    """One process with 2 ONNX Runtime threads against 2 processes of 1 thread, each half the papers
    (timed from when both have loaded the model, so only the encoding counts)."""
    texts = [paper.text for paper in corpus][:count]
    heads = [paper.head for paper in corpus][:count]
    encoder = encoder_for(label, threads=2)
    encode(encoder, texts[:8], heads[:8])
    started = time.perf_counter()
    encode(encoder, texts, heads)
    threaded = time.perf_counter() - started
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    half = len(texts) // 2
    workers = [context.Process(target=_worker, args=(label, part, part_heads, barrier, results))
               for part, part_heads in ((texts[:half], heads[:half]), (texts[half:], heads[half:]))]
    for worker in workers:
        worker.start()
    processes = max(results.get() for _ in workers)
    for worker in workers:
        worker.join()
    print(f"  {label}, {len(texts)} papers: 1 process x 2 threads {len(texts) / threaded:.1f}/s; "
          f"2 processes x 1 thread {len(texts) / processes:.1f}/s (x{threaded / processes:.2f} of threads)",
          flush=True)


def throughput(corpus) -> None:
    texts = [paper.text for paper in corpus]
    heads = [paper.head for paper in corpus]
    print(f"throughput: {len(texts)} CSFCube dev papers, sentence windows, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a busy machine slows all tiers alike only roughly)")
    rates = {}
    for label, _, _ in TIERS:
        encoder = encoder_for(label)
        encode(encoder, texts[:8], heads[:8])
        started = time.perf_counter()
        encode(encoder, texts, heads)
        rates[label] = len(texts) / (time.perf_counter() - started)
    print(f"  {'tier':8} {'abstracts/s':>12} {'x fp32':>7} {'hours for 1M':>13}")
    for label, rate in rates.items():
        print(f"  {label:8} {rate:12.1f} {rate / rates['fp32']:7.2f} {MILLION / rate / 3600:13.1f}")

    for label in ("fp32", "int8"):
        threads_or_processes(corpus, label)


def wall(command: list[str], runs: int = 3) -> float:
    """Median wall time of `command` in fresh processes."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def index_bytes(index: Path) -> tuple[int, int]:
    """Bytes of the live version of `index`, and of its query encoder among them."""
    from recommender.index.layout import QUERY_ENCODER
    from recommender.index.stored import open_stored

    with open_stored(index) as stored:
        files = stored.manifest["files"]
    encoder = sum(entry["bytes"] for name, entry in files.items() if name.startswith(QUERY_ENCODER + "/"))
    return sum(entry["bytes"] for entry in files.values()), encoder


def costs(root: Path) -> None:
    """Index size and cold `papers search` of each tier's CSFCube index, against `import numpy, faiss`."""
    papers_command = [sys.executable, "-m", "recommender"]
    baseline = wall([sys.executable, "-c", "import numpy, faiss"])
    print(f"\ncold `papers search` (median of 3 fresh processes) and index size; `import numpy, faiss` {baseline:.2f} s")
    for label, _, _ in TIERS:
        index = root / label / "eval-sentences"
        seconds = wall(papers_command + ["search", "graph neural networks for molecules", "--index", str(index), "-k", "5"])
        total, encoder = index_bytes(index)
        print(f"  {label:7} search {seconds:5.2f} s (x{seconds / baseline:.1f}); index {total / 1e6:6.1f} MB, "
              f"of which its query encoder {encoder / 1e6:5.1f} MB")


BY_SIZE = ("int8-smooth", "int8-static")  # the precisions --build-sizes compares, in turns
QUERY = "graph neural networks for molecules"


def first_papers(data: Path, count: int, target: Path) -> tuple[Path, int]:
    """A JSONL file of the first `count` CSFCube dev records, and how many papers `papers` reads in it."""
    with open(data / "corpus.jsonl", encoding="utf-8") as lines, open(target, "w", encoding="utf-8") as kept:
        for _, line in zip(range(count), lines):
            kept.write(line)
    from recommender.corpus.papers import read_papers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicates: a build keeps one
        return target, len(read_papers([target]))


def build_sizes(data: Path, sizes: list[int], rounds: int, search_runs: int) -> None:
    """Whole builds at int8-smooth and int8-static by corpus size, warm and cold user cache, and a
    cold `papers search` of each (see the module docstring)."""
    import shutil
    import tempfile

    import process_usage

    from recommender.embed.export_cache import EMBEDDINGS

    work = Path(tempfile.mkdtemp(prefix="bench-tiers-sizes-"))
    papers_command = [sys.executable, "-m", "recommender"]

    def env(cache: Path) -> dict:
        kept = {name: value for name, value in os.environ.items() if name != "PAPERS_PRECISION"}
        return dict(kept, PYTHONPATH=str(ROOT), PAPERS_CACHE=str(cache))

    def build(source: Path, index: Path, precision: str, cache: Path) -> dict:
        for leftover in cache.glob(f"{EMBEDDINGS}*"):
            leftover.unlink()  # every paper encoded
        shutil.rmtree(index, ignore_errors=True)
        usage = process_usage.measure(
            [*papers_command, "build", source, "--index", index, "--precision", precision, "--quiet"], env(cache))
        return dict(usage, load=os.getloadavg()[0])

    def search(index: Path, cache: Path) -> dict:
        usage = process_usage.measure([*papers_command, "search", QUERY, "--index", index, "-k", "5"], env(cache))
        return dict(usage, load=os.getloadavg()[0])

    def turns(step: int) -> tuple[str, ...]:
        return BY_SIZE if step % 2 == 0 else BY_SIZE[::-1]

    def med(runs: list[dict], key: str) -> float:
        return statistics.median(run[key] for run in runs)

    try:
        corpora = [first_papers(data, size, work / f"first-{size}.jsonl") for size in sizes]
        warm = work / "cache"
        print(f"whole builds by corpus size, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the start",
              flush=True)
        # The one-time cost: the smallest corpus from an empty user cache, the precisions in turns.
        smallest, small_count = corpora[0]
        cold: dict[str, list[dict]] = {precision: [] for precision in BY_SIZE}
        for step in range(rounds):
            for precision in turns(step):
                cache = work / f"cold-{precision}-{step}"
                cold[precision].append(build(smallest, work / "cold-index", precision, cache))
                print(f"  cold cache {precision} {small_count}: {json.dumps(cold[precision][-1])}", flush=True)
                shutil.rmtree(cache, ignore_errors=True)
        for precision in BY_SIZE:  # the shared user cache made warm: exports, calibration, compiled model
            build(smallest, work / "warm-up", precision, warm)
            search(work / "warm-up", warm)
        runs: dict[tuple[int, str], list[dict]] = {}
        step = 0
        for round_ in range(rounds):
            for source, count in corpora:
                for precision in turns(step):
                    run = build(source, work / f"index-{count}-{precision}", precision, warm)
                    runs.setdefault((count, precision), []).append(run)
                    print(f"  round {round_ + 1} {precision} {count}: {json.dumps(run)}", flush=True)
                step += 1
        searches: dict[tuple[int, str], list[dict]] = {}
        for _, count in corpora:
            for step in range(search_runs):
                for precision in turns(step):
                    run = search(work / f"index-{count}-{precision}", warm)
                    searches.setdefault((count, precision), []).append(run)

        smooth, static = BY_SIZE
        print(f"\nwhole `papers build`, warm user cache, medians of {rounds} rounds (ratio: {smooth} / {static};"
              " above 1, int8-static is faster)")
        print(f"| papers | {smooth} wall / CPU / peak | {static} wall / CPU / peak | ratio wall | ratio CPU "
              "| paired wall ratios | load |")
        print("|---|---|---|---|---|---|---|")
        for _, count in corpora:
            a, b = runs[(count, smooth)], runs[(count, static)]
            paired = ", ".join(f"{x['wall'] / y['wall']:.2f}" for x, y in zip(a, b))
            loads = [run["load"] for run in a + b]
            print(f"| {count:,} | {med(a, 'wall'):.1f} s / {med(a, 'cpu'):.1f} s / {med(a, 'rss_kb') / 1024:.0f} MB "
                  f"| {med(b, 'wall'):.1f} s / {med(b, 'cpu'):.1f} s / {med(b, 'rss_kb') / 1024:.0f} MB "
                  f"| **{med(a, 'wall') / med(b, 'wall'):.2f}x** | {med(a, 'cpu') / med(b, 'cpu'):.2f}x | {paired} "
                  f"| {min(loads):.1f}-{max(loads):.1f} |")
        print(f"\nthe one-time cost: {small_count} papers from an empty user cache, medians of {rounds}")
        print("| | cold wall / CPU | warm wall / CPU | one-time cost, wall / CPU | load |")
        print("|---|---|---|---|---|")
        for precision in BY_SIZE:
            a, b = cold[precision], runs[(small_count, precision)]
            loads = [run["load"] for run in a]
            print(f"| {precision} | {med(a, 'wall'):.1f} s / {med(a, 'cpu'):.1f} s | {med(b, 'wall'):.1f} s / "
                  f"{med(b, 'cpu'):.1f} s | {med(a, 'wall') - med(b, 'wall'):.1f} s / {med(a, 'cpu') - med(b, 'cpu'):.1f} s "
                  f"| {min(loads):.1f}-{max(loads):.1f} |")
        print(f"\ncold `papers search` of each index, medians of {search_runs} in turns")
        print(f"| papers | {smooth} wall / CPU | {static} wall / CPU | ratio wall ({static} / {smooth}) | load |")
        print("|---|---|---|---|---|")
        for _, count in corpora:
            a, b = searches[(count, smooth)], searches[(count, static)]
            loads = [run["load"] for run in a + b]
            print(f"| {count:,} | {med(a, 'wall'):.2f} s / {med(a, 'cpu'):.2f} s | {med(b, 'wall'):.2f} s / "
                  f"{med(b, 'cpu'):.2f} s | {med(b, 'wall') / med(a, 'wall'):.2f}x | {min(loads):.1f}-{max(loads):.1f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def relevance(data: Path, root: Path, repeats: int) -> None:
    from tune_relevance import Collection, cross_validate

    print(f"\nrelevance: CSFCube dev, hybrid ranking, sentence windows; repeated 2-fold CV ({2 * repeats} folds)")
    held_by_tier = {}
    for label, model, precision in TIERS:
        collection = Collection(data, root / label, model=model, precision=precision)
        try:
            started = time.perf_counter()
            collection.open("sentences")
            built = time.perf_counter() - started
            settings = [(w, p) for w in WEIGHTS for p in POOLS]
            scores = np.stack([collection.run("sentences", "hybrid", w, p) for w, p in settings])
            shipped = collection.run("sentences")
            dense = collection.run("sentences", "dense")
            lexical = collection.run("sentences", "lexical")
            held, chosen = cross_validate(scores, collection.papers(), repeats)
            weight = collection.opened["sentences"].dense_weight
        finally:
            collection.close()
        held_by_tier[label] = held
        counts = np.bincount(chosen, minlength=len(settings))
        top = int(np.argmax(counts))
        print(f"  {label:7} held-out MAP {held[:, 0].mean():5.2f} (sd {held[:, 0].std():.2f}), NDCG%20 "
              f"{held[:, 1].mean():5.2f} (sd {held[:, 1].std():.2f}); chosen most often: dense weight "
              f"{settings[top][0]:.2f} pool {settings[top][1]} ({counts[top]}x); all queries at its shipped "
              f"weight {weight:.2f}: {shipped[:, 0].mean():5.2f} / {shipped[:, 1].mean():5.2f}, dense only "
              f"{dense[:, 0].mean():5.2f} / {dense[:, 1].mean():5.2f}, TF-IDF only {lexical[:, 0].mean():5.2f} / "
              f"{lexical[:, 1].mean():5.2f}  [index ready in {built:.0f} s]", flush=True)
    difference = held_by_tier["int8"].mean(axis=0) - held_by_tier["fp32"].mean(axis=0)
    verdict = "within" if np.all(np.abs(difference) <= 0.3) else "NOT within"
    print(f"  int8 - fp32 held-out: MAP {difference[0]:+.2f}, NDCG%20 {difference[1]:+.2f}: {verdict} 0.3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the CSFCube dev folder")
    parser.add_argument("--index-root", type=Path, default=Path.home() / ".cache/papers-bench-tiers",
                        help="where each tier's CSFCube index (and its vectors) is kept: a re-run reuses them")
    parser.add_argument("--repeats", type=int, default=50, help="2-fold splits (each gives 2 folds)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--jobs-only", action="store_true", help="only threads against processes")
    parser.add_argument("--skip-relevance", action="store_true")
    parser.add_argument("--build-sizes", help="only whole builds at int8-smooth and int8-static: corpus sizes, e.g. 100,300,1000,3000")
    parser.add_argument("--rounds", type=int, default=2, help="--build-sizes: rounds of builds")
    parser.add_argument("--search-runs", type=int, default=5, help="--build-sizes: cold searches of each index")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.build_sizes:
        build_sizes(args.data, [int(size) for size in args.build_sizes.split(",")], args.rounds, args.search_runs)
        return
    if args.jobs_only:
        for label in ("fp32", "int8"):
            threads_or_processes(papers(args.data), label)
        return
    if not args.skip_throughput:
        throughput(papers(args.data))
    if not args.skip_relevance:
        relevance(args.data, args.index_root, args.repeats)
        costs(args.index_root)


if __name__ == "__main__":
    main()
