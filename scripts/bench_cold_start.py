"""Cold-start wall time of `papers like` and `papers search` against import baselines.

Every command is a fresh process, run alternately with its baseline so that a
busy shared machine slows both alike; the figures are medians and ratios.

    python scripts/bench_cold_start.py [--index default] [--runs 15]

Needs a built index (`papers build`); targets: like <= 2x `import numpy, faiss`,
search <= 0.3x `import sentence_transformers`.

Quoted in: docs/performance.md (the cold `like` and `search` rows) and README.md's headline figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="default")
    parser.add_argument("--paper", default="FlashDP")
    parser.add_argument("--query", default="differentially private training of large language models")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
