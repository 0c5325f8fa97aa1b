#!/usr/bin/env python
"""Peak memory and wall time of whole builds at 10k, 100k and 1M papers, one code version per run.

    python scripts/bench_build_memory.py [--sizes 10000 100000 1000000] [--out /tmp/bench_build_memory]
                                         [--code DIR --label before] [--table]

Each size is built in a fresh process through `build_index` with the test suite's fake encoder
(tests/fakes.py, 384 dimensions: it stands in for the model, as only memory and the work outside
the encoder are measured) on bench_scale_cli.py's synthetic corpus clustered by topic (real
CSFCube sentences; IDs syn0000001...), exactly as `bench_scale_cli.py --build-only` builds it
(its `--build-child`: the real ONNX query encoder is linked from OUT/onnx-cache, exported once
beforehand in its own process). Peak RSS is the build process's ru_maxrss.

`--code DIR` builds with the package in DIR (its `recommender/`, e.g. the code before a change:
`git archive <commit> recommender | tar -x -C DIR`) instead of this checkout; `--label` names the
rows. Corpora are written once under OUT and shared by every run; each run appends one JSON line
a size to OUT/results.jsonl, and the table printed at the end has every row of that file, with,
for each size built by two labels, whether their index files are byte for byte the same (the
sha256 of every file in the manifests; the manifest itself holds the build time).

Quoted in: docs/memory.md (the before/after table).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import bench_scale_cli  # scripts/, beside this file

ROOT = Path(__file__).resolve().parent.parent


def build(size: int, out: Path, root: Path, label: str) -> dict:
    corpus = out / f"corpus-topics-{size}.jsonl"
    if not corpus.exists():
        print(f"[{size}] writing the corpus", flush=True)
        bench_scale_cli.write_corpus(corpus, size, bench_scale_cli.CSFCUBE, "topics")
    index, report = out / f"index-{label}-{size}", out / f"build-{label}-{size}.json"
    for stale in (report,):
        stale.unlink(missing_ok=True)
    if index.exists():
        subprocess.run(["rm", "-rf", str(index)], check=True)
    print(f"[{size}] building with {label} ({root})", flush=True)
    started = time.strftime("%H:%M:%S")
    used = bench_scale_cli.measure([sys.executable, bench_scale_cli.__file__, "--build-child", str(corpus), str(index),
                                    str(report)], root)
    built = json.loads(report.read_text())
    manifest = json.loads(next(index.glob("v-*/manifest.json")).read_text())
    files = {name: entry["sha256"] for name, entry in manifest["files"].items()}
    return {
        "label": label, "code": str(root), "papers": size, "started": started, "load": os.getloadavg()[0],
        "wall_s": used["wall"], "cpu_s": used["cpu"], "peak_rss_mb": used["rss_kb"] / 1024,
        "build_s": built["build_s"], "encode_s": built["encode_s"], "index_kind": built["index_kind"],
        "index_mb": sum(p.stat().st_size for p in index.glob("v-*/**/*") if p.is_file()) / 2**20,
        "files": files,
    }


def table(rows: list[dict]) -> str:
    by_size: dict[int, list[dict]] = {}
    for row in rows:
        by_size.setdefault(row["papers"], []).append(row)
    lines = ["| papers | code | index | wall s | CPU s | peak RSS MB | RSS per paper beyond 10k's, bytes | index files |",
             "|---|---|---|---|---|---|---|---|"]
    smallest = {}
    for row in sorted(rows, key=lambda r: r["papers"]):
        smallest.setdefault(row["label"], row)
    for size in sorted(by_size):
        reference = by_size[size][0]
        for row in by_size[size]:
            base = smallest[row["label"]]
            growth = "" if base["papers"] == size else \
                f"{1e6 * (row['peak_rss_mb'] - base['peak_rss_mb']) / (size - base['papers']) * 1.048576:.0f}"
            same = "" if row is reference else (
                f"same as {reference['label']}" if row["files"] == reference["files"] else
                "differ: " + ", ".join(sorted(name for name in set(row["files"]) | set(reference["files"])
                                              if row["files"].get(name) != reference["files"].get(name))))
            lines.append(f"| {size:,} | {row['label']} | {row['index_kind']} | {row['wall_s']:.0f} | {row['cpu_s']:.0f} "
                         f"| {row['peak_rss_mb']:,.0f} | {growth} | {same} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_build_memory"))
    parser.add_argument("--code", type=Path, default=ROOT, help="the folder holding the recommender/ to build with")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--table", action="store_true", help="only print the table of OUT/results.jsonl")
    args = parser.parse_args()
    results = args.out / "results.jsonl"
    if not args.table:
        args.out.mkdir(parents=True, exist_ok=True)
        os.environ["PAPERS_CACHE"] = str(args.out / bench_scale_cli.CACHE)
        export = subprocess.run([sys.executable, "-c", "from recommender.embed.export_cache import shared_export; "
                                 "from recommender.embed.sentence_transformer import DEFAULT_MODEL; shared_export(DEFAULT_MODEL)"],
                                capture_output=True, text=True, env=bench_scale_cli.environment())
        if export.returncode:
            raise SystemExit(f"exporting the model to ONNX failed:\n{export.stderr}")
        for size in args.sizes:
            row = build(size, args.out, args.code.resolve(), args.label)
            with open(results, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            print(json.dumps({key: value for key, value in row.items() if key != "files"}), flush=True)
    print(table([json.loads(line) for line in results.read_text().splitlines() if line.strip()]))


if __name__ == "__main__":
    main()
