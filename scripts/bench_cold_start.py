"""Cold-start wall time of `papers like` and `papers search` against import baselines.

Every command is a fresh process, run alternately with its baseline so that a
busy shared machine slows both alike; the figures are medians and ratios.

    python scripts/bench_cold_start.py [--index default] [--runs 15] [--only like]
        [--compare DIR] [--source]
    python scripts/bench_cold_start.py --index NAME --compiled-models [--runs 9]

Needs a built index (`papers build`); targets: like <= 1.5x `import numpy, faiss`,
search <= 0.3x `import sentence_transformers`.

Every process runs from bytecode, as an installed package does: the compiled modules go to a
temporary PYTHONPYCACHEPREFIX, written by the warm-up runs (an environment with
PYTHONDONTWRITEBYTECODE set would otherwise compile every module of the package from source on
every run, which roughly doubles a cold `like`'s own share). --source measures that case instead.
--compare DIR also times a cold `like` with the package of another checkout (DIR holds its
recommender/), in the same turns: a change's before and after in one run.

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
import tempfile
import time
from pathlib import Path

#: The environment every timed process runs in: from bytecode kept in a temporary cache (main()).
COMPILED: dict[str, str] = {}


def wall(command: list[str], environment: dict | None = None) -> float:
    environment = {**(environment or os.environ), **COMPILED}
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)
    seconds = time.perf_counter() - started
    if done.returncode:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["(nothing on stderr)"])[-1]
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {last}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="default")
    parser.add_argument("--paper", default="FlashDP")
    parser.add_argument("--query", default="differentially private training of large language models")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--compiled-models", action="store_true",
                        help="time a cold search with OpenVINO's compiled model kept and not")
    parser.add_argument("--only", choices=["like", "search"], help="time one command only")
    parser.add_argument("--compare", metavar="DIR",
                        help="also time a cold like with the package in DIR, in the same turns")
    parser.add_argument("--source", action="store_true",
                        help="compile every module from source on every run (PYTHONDONTWRITEBYTECODE)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cold-start-") as compiled:
        COMPILED.update({"PYTHONDONTWRITEBYTECODE": "1"} if args.source else {"PYTHONPYCACHEPREFIX": compiled})
        if not args.source:
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        if args.compiled_models:
            compiled_models(args)
        else:
            cold_starts(args)


def cold_starts(args) -> None:
    python = sys.executable
    papers = [python, "-m", "recommender"]
    like = papers + ["like", args.paper, "--index", args.index]
    pairs = {
        "like": ([python, "-c", "import numpy, faiss"], {"this checkout": like}),
        "search": ([python, "-c", "import sentence_transformers"],
                   {"this checkout": papers + ["search", args.query, "--index", args.index]}),
    }
    if args.compare:
        pairs["like"][1][args.compare] = like
    if args.only:
        pairs = {args.only: pairs[args.only]}
    here = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    environments = {"this checkout": here, args.compare: {**os.environ, "PYTHONPATH": args.compare or ""}}
    targets = {"like": 1.5, "search": 0.3}
    for baseline, commands in pairs.values():  # warm the page cache and write the bytecode, twice
        for _ in range(2):
            wall(baseline)
            for code, command in commands.items():
                wall(command, environments[code])
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"runs={args.runs}, {'from source' if args.source else 'from bytecode'}, "
          f"load {os.getloadavg()[0]:.1f}")
    print("| command | code | median s | baseline | baseline median s | ratio | target |")
    print("|---|---|---|---|---|---|---|")
    for name, (baseline, commands) in pairs.items():
        base_times: list[float] = []
        times: dict[str, list[float]] = {code: [] for code in commands}
        for _ in range(args.runs):  # in turns, so that a busy machine slows each alike
            base_times.append(wall(baseline))
            for code, command in commands.items():
                times[code].append(wall(command, environments[code]))
        base = statistics.median(base_times)
        for code, seconds in times.items():
            cold = statistics.median(seconds)
            print(f"| papers {name} (cold) | {code} | {cold:.3f} | `{baseline[-1]}` | {base:.3f} "
                  f"| {cold / base:.2f}x | <= {targets[name]}x |")


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
