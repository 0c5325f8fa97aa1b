#!/usr/bin/env python
"""Peak memory of the first build's model export on a machine: the export to ONNX, the int8
quantisation and the whole first build, each with an empty user cache, for one or more code versions
in turns.

    python scripts/bench_export_memory.py [--model all-mpnet-base-v2] [--precision int8]
        [--code DIR LABEL ...] [--rounds 1] [--papers 5] [--out /tmp/bench_export_memory]

Each row is a fresh process (PYTHONPATH the code's folder) with its own empty `PAPERS_CACHE`:
- export: `export_cache.apart(onnx_encoder.export_onnx, model folder, ...)`, the child process a
  build runs the export in; its peak is the child's ru_maxrss (RUSAGE_CHILDREN);
- quantise: `apart(quantisation.quantise_export, ...)` of that export at --precision, likewise;
- first build: `papers build` of the first --papers CSFCube dev papers with --model into a fresh
  index and an empty cache (the model unpacked from its parts, exported, quantised, the papers
  encoded): the largest process of the build (scripts/process_usage.py).

`--code DIR LABEL` (repeatable) measures the package in DIR (e.g. the code before a change:
`git archive <commit> recommender | tar -x -C DIR`); by default this checkout, labelled "this
checkout". With --rounds N the versions take turns N times. Each row is appended as JSON to
OUT/results.jsonl; the table printed at the end has every row of the run, and the export's
model.onnx sha256 of each version.

Quoted in: docs/measured-encoding.md ("The quality tier's build: memory and time").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import process_usage  # scripts/, beside this file

ROOT = Path(__file__).resolve().parent.parent
CSFCUBE = ROOT.parent / "shared" / "eval" / "csfcube-dev" / "corpus.jsonl"

# Run in a fresh process with the code under test first on sys.path: one step, its figures as JSON.
CHILD = r"""
import hashlib, json, resource, sys, time
from pathlib import Path
step, model, work, precision = sys.argv[1:5]
from recommender.embed import export_cache, onnx_encoder, quantisation
from recommender.embed.sentence_transformer import resolve_model_path
work = Path(work)
started = time.perf_counter()
if step == "export":
    export_cache.apart(onnx_encoder.export_onnx, resolve_model_path(model), work / "fp32")
    made = work / "fp32" / onnx_encoder.MODEL_FILE
else:
    export_cache.apart(quantisation.quantise_export, work / "fp32", work / precision, precision)
    made = work / precision / onnx_encoder.MODEL_FILE
wall = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
digest = hashlib.sha256(made.read_bytes()).hexdigest()
print(json.dumps({"wall": wall, "peak": peak, "sha256": digest, "bytes": made.stat().st_size}))
"""


def environment(code: Path, cache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code), PAPERS_CACHE=str(cache))
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def step(kind: str, code: Path, label: str, args, work: Path) -> dict:
    cache = work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, args.model, str(work), args.precision],
        capture_output=True,
        text=True,
        env=environment(code, cache),
    )
    if done.returncode:
        raise SystemExit(f"{kind} with {label} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def first_build(code: Path, label: str, args, work: Path) -> dict:
    cache, index = work / "build-cache", work / "build-index"
    corpus = work / "corpus.jsonl"
    lines = [line for line in CSFCUBE.read_text(encoding="utf-8").splitlines() if line.strip()]
    corpus.write_text("\n".join(lines[: args.papers]) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "recommender", "build", corpus, "--index", index, "--quiet"]
    used = process_usage.measure([*command, "--model", args.model], environment(code, cache))
    return {"wall": used["wall"], "peak": used["rss_kb"] * 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-mpnet-base-v2")
    parser.add_argument("--precision", default="int8")
    parser.add_argument("--code", nargs=2, action="append", metavar=("DIR", "LABEL"), default=[])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--papers", type=int, default=5)
    parser.add_argument("--skip-build", action="store_true", help="no first build, the steps only")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_export_memory"))
    args = parser.parse_args()
    versions = [(Path(d).resolve(), label) for d, label in args.code] or [(ROOT, "this checkout")]
    args.out.mkdir(parents=True, exist_ok=True)
    os.chdir(args.out)  # `python -c` and `-m` put the working folder first on sys.path
    rows = []
    for turn in range(args.rounds):
        for code, label in versions if turn % 2 == 0 else versions[::-1]:
            work = args.out / f"{label.replace(' ', '-')}-{turn}"
            shutil.rmtree(work, ignore_errors=True)
            row = {"label": label, "round": turn, "load": os.getloadavg()[0]}
            row["export"] = step("export", code, label, args, work)
            row["quantise"] = step("quantise", code, label, args, work)
            if not args.skip_build:
                row["first_build"] = first_build(code, label, args, work)
            row["time"] = time.strftime("%H:%M:%S")
            shutil.rmtree(work, ignore_errors=True)
            rows.append(row)
            with open(args.out / "results.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            print(json.dumps(row), file=sys.stderr, flush=True)
    gb = 1024**3
    print(f"{args.model}, {args.precision}; peak RSS of each step's process, GB (wall s)\n")
    print(
        "| code | export child | quantise child | first build (any process) | load | fp32 model |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        build = row.get("first_build")
        built = f"{build['peak'] / gb:.2f} ({build['wall']:.0f} s)" if build else "-"
        print(
            f"| {row['label']} | {row['export']['peak'] / gb:.2f} ({row['export']['wall']:.0f} s) "
            f"| {row['quantise']['peak'] / gb:.2f} ({row['quantise']['wall']:.0f} s) | {built} "
            f"| {row['load']:.1f} | {row['export']['sha256'][:12]} |"
        )


if __name__ == "__main__":
    main()
