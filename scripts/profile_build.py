#!/usr/bin/env python
"""Where a build's time and memory go, phase by phase (the phases `build_index` reports).

    python scripts/profile_build.py INPUT [--cold-cache]

Builds INPUT into a fresh index in a temporary folder, in this process, and prints for each
phase its wall time, CPU time (all threads) and the process's peak RSS when it ended. Imports
are a phase of their own. The shared ONNX export is taken from the user cache as in a normal
build, unless --cold-cache gives the build an empty cache (the first build with a model).

Quoted in: docs/measured-overview.md (the table of a build's phases).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone without installing


def snapshot() -> tuple[float, float, float]:
    """Wall clock, CPU time of this process (all threads), peak RSS in MB."""
    return time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Phases:
    """Times the span from each reported phase to the next."""

    def __init__(self, first: str):
        self.rows: list[tuple[str, float, float, float]] = []
        self.name, (self.wall, self.cpu, _) = first, snapshot()

    def mark(self, name: str, total=None) -> None:
        wall, cpu, rss = snapshot()
        self.rows.append((self.name, wall - self.wall, cpu - self.cpu, rss))
        self.name, self.wall, self.cpu = name, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("--cold-cache", action="store_true")
    args = parser.parse_args()
    started_wall, started_cpu, _ = snapshot()
    with tempfile.TemporaryDirectory() as folder:
        if args.cold_cache:
            os.environ["PAPERS_CACHE"] = str(Path(folder) / "cache")
        phases = Phases("importing the package")  # ends as build_index reports its first phase
        from recommender import build_index

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = build_index([args.input], Path(folder) / "index", on_phase=phases.mark)
        phases.mark("end")
    print(f"{report.papers:,} papers, {report.encoded:,} encoded; load {os.getloadavg()[0]:.1f}")
    print("| phase | wall s | CPU s | peak RSS after, MB |")
    print("|---|---|---|---|")
    for name, wall, cpu, rss in phases.rows:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {rss:.0f} |")
    print(f"| total | {time.perf_counter() - started_wall:.2f} | {time.process_time() - started_cpu:.2f} | |")


if __name__ == "__main__":
    main()
