"""Cold-start wall time of `papers like` and `papers search` against import baselines.

Every command is a fresh process, run alternately with its baseline so that a
busy shared machine slows both alike; the figures are medians and ratios.

    python scripts/bench_cold_start.py [--index default] [--runs 15]
    python scripts/bench_cold_start.py --index NAME --compiled-models [--runs 9]

Needs a built index (`papers build`); targets: like <= 2x `import numpy, faiss`,
search <= 0.3x `import sentence_transformers`.

--compiled-models, for an index OpenVINO encodes queries for (bf16, int8-static), times a cold
`papers search` three ways, in turns: with the compiled model kept in the user cache (the usual
case from the second query on), compiling it and keeping it (the first query of a new cache), and
compiling it with nothing kept (a user cache that cannot be written).

Quoted in: docs/performance.md and docs/measured-overview.md (the cold `like` and `search` rows) and README.md's headline figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time


def wall(command: list[str], environment: dict | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=environment)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="default")
    parser.add_argument("--paper", default="FlashDP")
    parser.add_argument("--query", default="differentially private training of large language models")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--compiled-models", action="store_true",
                        help="time a cold search with OpenVINO's compiled model kept and not")
    args = parser.parse_args()
    if args.compiled_models:
        compiled_models(args)
        return

    python = sys.executable
    papers = [python, "-m", "recommender"]
    pairs = {
        "like": ([python, "-c", "import numpy, faiss"], papers + ["like", args.paper, "--index", args.index]),
        "search": ([python, "-c", "import sentence_transformers"], papers + ["search", args.query, "--index", args.index]),
    }
    targets = {"like": 2.0, "search": 0.3}
    for baseline, command in pairs.values():  # warm the page cache once
        wall(baseline), wall(command)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, runs={args.runs}")
    print("| command | median s | baseline | baseline median s | ratio | target |")
    print("|---|---|---|---|---|---|")
    for name, (baseline, command) in pairs.items():
        base_times, command_times = [], []
        for _ in range(args.runs):
            base_times.append(wall(baseline))
            command_times.append(wall(command))
        base, cold = statistics.median(base_times), statistics.median(command_times)
        print(
            f"| papers {name} (cold) | {cold:.3f} | `{baseline[-1]}` | {base:.3f} | {cold / base:.2f}x | <= {targets[name]}x |"
        )


def compiled_models(args) -> None:
    import shutil
    import tempfile

    command = [sys.executable, "-m", "recommender", "search", args.query, "--index", args.index]
    with tempfile.TemporaryDirectory() as scratch:
        kept_cache = os.path.join(scratch, "kept")
        ways = {
            "compiled model kept": lambda: {"PAPERS_CACHE": kept_cache},
            "compiled and kept (a new cache)": lambda: {
                "PAPERS_CACHE": tempfile.mkdtemp(dir=scratch, prefix="new-")},
            "compiled, nothing kept": lambda: {"PAPERS_CACHE": "/proc/self/no-cache-here"},
        }
        wall(command, {**os.environ, **ways["compiled model kept"]()})  # keeps one; warms the page cache
        times: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(args.runs):
            for way, environment in ways.items():
                extra = environment()
                times[way].append(wall(command, {**os.environ, **extra}))
                if "new-" in extra["PAPERS_CACHE"]:
                    shutil.rmtree(extra["PAPERS_CACHE"])
    print(f"index {args.index}, {args.runs} cold `papers search` runs each, in turns")
    print("| way | median s | min s |")
    print("|---|---|---|")
    for way, seconds in times.items():
        print(f"| {way} | {statistics.median(seconds):.3f} | {min(seconds):.3f} |")


if __name__ == "__main__":
    main()
