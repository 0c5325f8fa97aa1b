#!/usr/bin/env python
"""Every speed target of the project against its figure, in one run: one table, each figure a ratio
to a baseline measured in the same run.

    python scripts/speed_targets.py [--quick] [--skip PART ...] [--out DIR]
        [--million-papers 1000000] [--encode-papers 20000] [--million-out DIR]
        [--cold-runs 15] [--segment-papers 40000 ...] [--agreement-papers 0]
        [--quality-papers 700] [--precision-papers 1000]

The parts (PART names for --skip), each run by the script that measures it (nothing is measured
twice over, nothing copied: the figures are theirs):
- million: scripts/project_million.py, a million abstracts projected from the default model's
  encoding rate at --encode-papers and every other phase measured at --million-papers with
  stand-in vectors, against 5 hours; and the projected peak memory. --million-out reuses the
  reports of an earlier run of project_million.py in that folder (the row says when they were
  measured); with fewer --million-papers than a million the other phases are scaled linearly to
  a million (the row says so).
- cold: scripts/bench_cold_start.py --only like: a cold `papers like` on the seed index (built
  here, the default model) against `python -c "import numpy, faiss"`, in turns; target 1.5x.
- segments: bench_segments.py's measurement (stand-in vectors) at each --segment-papers: `like`
  and `search` over 10 segments against the compacted index, the ratio of CPU seconds (median of
  its repeats), target 1.2x; and the top 10 equal to the compacted index's, target 99%.
- agreement: bench_segments_real.py's agreement with the real default model: CSFCube dev (its
  first --agreement-papers papers; 0: all) built at once, against its first 90% built and the rest
  added in 3 adds; the top 10 of every `like` and of 300 title searches; target 99% equal.
- quality: the quality tier's build (`papers build --model all-mpnet-base-v2`, its default
  precision) of the first --quality-papers CSFCube dev papers in a fresh process, its peak memory
  (the largest process of the build) against 1.5 GB, beside the default model's build of the same
  papers (the baseline). The model's export (once a machine, in a process of its own) is made
  first by a build of 5 papers, whose peak is reported on its own row when it happened in this
  run (OUT keeps the export: a later run with the same OUT skips it).
- precision: the default model's whole build (`papers build`, fresh process, no vector cached;
  the exports made beforehand, as once a machine) of the first --precision-papers CSFCube dev
  papers at its default precision on this CPU against fp32 (`--precision full`), in turns, twice
  each: the ratio of CPU seconds (a shared machine's wall clock counts others' turns; the wall
  ratio is given too). Target: above 1 (the default is the fastest precision measured to rank as
  fp32 does: docs/tiers.md).

`--quick`: small sizes, a run of a few minutes (every figure then says "QUICK" and its size):
the million from 20,000 papers (encoding 300), 5 cold runs, segments at 5,000, agreement on 400
papers, quality and precision on 60 papers. Ratios at small sizes are not the targets' sizes: the
table's first line and every quick row say so.

The load average (1 minute) is taken as each part ends: on a shared machine read the ratios.

Quoted in: docs/performance.md ("Every target in one run").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import process_usage  # scripts/, beside this file

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
CSFCUBE = ROOT.parent / "shared/eval/csfcube-dev/corpus.jsonl"
QUALITY = "all-mpnet-base-v2"
PARTS = ("cold", "segments", "agreement", "quality", "precision", "million")
GB = 1024**3


def environment(cache: Path | None = None) -> dict:
    """This checkout on PYTHONPATH, bytecode kept (as an installed package has it); the user cache
    `cache` (the ONNX exports and the embedding cache) when given."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is not None:
        env["PAPERS_CACHE"] = str(cache)
    return env


def run(command: list, env: dict | None = None) -> str:
    """`command`'s standard output; a failure stops the run, saying which command and why."""
    command = [str(part) for part in command]
    done = subprocess.run(command, capture_output=True, text=True, env=env or environment())
    if done.returncode:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


def load() -> float:
    return os.getloadavg()[0]


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def csfcube(out: Path, papers: int) -> Path:
    """The first `papers` CSFCube dev papers (0: all) as a corpus file under `out`."""
    lines = [line for line in CSFCUBE.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = lines[:papers] if papers else lines
    path = out / f"csfcube-{len(lines)}.jsonl"
    if not path.exists():
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def fresh_vectors(cache: Path) -> None:
    """The embedding cache of `cache` emptied (its exports kept): the next build encodes."""
    for path in cache.glob("embeddings.sqlite*"):
        path.unlink()


def build(corpus: Path, index: Path, cache: Path, *options: str) -> dict:
    """`papers build` of `corpus` in a fresh process, no vector cached: wall, CPU seconds and peak
    RSS (the largest process of the build, KiB)."""
    fresh_vectors(cache)
    shutil.rmtree(index, ignore_errors=True)
    command = [sys.executable, "-m", "recommender", "build", corpus, "--index", index, "--quiet"]
    used = process_usage.measure([*command, *options], environment(cache))
    shutil.rmtree(index, ignore_errors=True)
    return used


# ---------------------------------------------------------------- the parts


def million(args) -> dict:
    import project_million

    out = args.million_out or args.out / f"million-{args.million_papers}-{args.encode_papers}"
    command = [sys.executable, SCRIPTS / "project_million.py", "--out", out]
    command += ["--papers", args.million_papers, "--encode-papers", args.encode_papers]
    if args.million_out is None:
        say(f"million: project_million.py --out {out} (the long part)")
        run(command)
    real, fake_small, fake_large = project_million.read_reports(out)
    figures = project_million.projection(1_000_000, real, fake_small, fake_large)
    measured = datetime.fromtimestamp((out / "fake-large.json").stat().st_mtime, timezone.utc)
    return {
        **figures,
        "model": real["model"],
        "precision": real["precision"],
        "encoded": real["encoded"],
        "stand_in_papers": fake_large["papers"],
        "reused": args.million_out is not None,
        "measured": measured.strftime("%Y-%m-%d %H:%M UTC"),
        "load": max(figures["loads"]),
    }


def cold(args) -> dict:
    index, cache = args.out / "seed-index", args.out / "cache"
    if not any(index.glob("v-*/manifest.json")):
        say("cold: building the seed index")
        run(
            [
                sys.executable,
                "-m",
                "recommender",
                "build",
                ROOT / "seeds",
                "--index",
                index,
                "--quiet",
            ],
            environment(cache),
        )
    say(f"cold: bench_cold_start.py --only like, {args.cold_runs} runs")
    output = run(
        [
            sys.executable,
            SCRIPTS / "bench_cold_start.py",
            "--only",
            "like",
            "--index",
            index,
            "--runs",
            args.cold_runs,
        ],
        environment(cache),
    )
    row = next(line for line in output.splitlines() if line.startswith("| papers like"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    return {
        "like_s": float(cells[2]),
        "baseline_s": float(cells[4]),
        "ratio": float(cells[5].rstrip("x")),
        "runs": args.cold_runs,
        "load": load(),
    }


def segments(args) -> list[dict]:
    rows = []
    for papers in args.segment_papers:
        say(f"segments: bench_segments.py's measurement at {papers:,} papers")
        rows.append(
            {
                **child(
                    "segments",
                    {
                        "papers": papers,
                        "queries": args.segment_queries,
                        "repeats": args.segment_repeats,
                    },
                ),
                "load": load(),
            }
        )
    return rows


def agreement(args) -> dict:
    corpus = csfcube(args.out, args.agreement_papers)
    say(f"agreement: bench_segments_real.py's agreement on {corpus.name} (real model)")
    found = child(
        "agreement",
        {
            "corpus": str(corpus),
            "searches": args.agreement_searches,
            "cache": str(args.out / "cache"),
        },
    )
    return {**found, "load": load()}


def quality(args) -> dict:
    cache = args.out / "cache"
    corpus = csfcube(args.out, args.quality_papers)
    tiny = csfcube(args.out, 5)
    say(f"quality: a first build of 5 papers with {QUALITY} in an empty user cache (the export)")
    first_cache = args.out / "first-cache"
    shutil.rmtree(first_cache, ignore_errors=True)
    first = build(tiny, args.out / "quality-first", first_cache, "--model", QUALITY)
    shutil.rmtree(first_cache, ignore_errors=True)
    build(tiny, args.out / "quality-first", cache, "--model", QUALITY)  # exports, once: not timed
    say(f"quality: {corpus.name} with {QUALITY}, then with the default model")
    tier = build(corpus, args.out / "quality-index", cache, "--model", QUALITY)
    build(tiny, args.out / "default-first", cache)  # the default's export, once
    default = build(corpus, args.out / "default-index", cache)
    return {
        "papers": corpus_size(corpus),
        "tier": tier,
        "default": default,
        "first": first,
        "load": load(),
    }


def precision(args) -> dict:
    cache = args.out / "cache"
    corpus = csfcube(args.out, args.precision_papers)
    tiny = csfcube(args.out, 5)
    build(tiny, args.out / "precision-first", cache)  # the exports, as once a machine: not timed
    build(tiny, args.out / "precision-first", cache, "--precision", "full")
    say(f"precision: {corpus.name} at the default precision and at fp32, in turns, twice each")
    runs: dict[str, list[dict]] = {"default": [], "fp32": []}
    for turn in range(2):
        for name in ("default", "fp32") if turn % 2 == 0 else ("fp32", "default"):
            options = ("--precision", "full") if name == "fp32" else ()
            runs[name].append(build(corpus, args.out / f"precision-{name}", cache, *options))
    cpu = {name: statistics.median(run["cpu"] for run in done) for name, done in runs.items()}
    wall = {name: statistics.median(run["wall"] for run in done) for name, done in runs.items()}
    sys.path.insert(0, str(ROOT))
    from recommender.embed.models import model_facts
    from recommender.embed.sentence_transformer import DEFAULT_MODEL

    return {
        "papers": corpus_size(corpus),
        "cpu": cpu,
        "wall": wall,
        "default_precision": model_facts(DEFAULT_MODEL).cpu_precision(),
        "load": load(),
    }


def corpus_size(corpus: Path) -> int:
    return sum(1 for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip())


# ---------------------------------------------------------------- children (a fresh process each)


def child(kind: str, options: dict) -> dict:
    """`kind` measured in a fresh process of this script (the stand-in encoder patched in there
    only), its figures back as JSON."""
    output = run([sys.executable, __file__, "--child", kind, json.dumps(options)])
    return json.loads(output.splitlines()[-1])


def child_main(kind: str, options: dict) -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(SCRIPTS))
    if kind == "segments":
        import bench_segments

        bench_segments.use_stand_in()
        arguments = SimpleNamespace(
            added=1_000, segments=10, queries=options["queries"], repeats=options["repeats"]
        )
        figures = bench_segments.measure(options["papers"], arguments)
        same = [a == b for a, b in zip(figures["found"], figures["expected"])]
        print(
            json.dumps(
                {
                    "papers": options["papers"],
                    "added": arguments.added,
                    "segments": arguments.segments,
                    "cpu_ratio": statistics.median(figures["ratios"]),
                    "cpu_ratios": figures["ratios"],
                    "wall_ratio": statistics.median(figures["wall_ratios"]),
                    "same": sum(same),
                    "lookups": len(same),
                }
            )
        )
    elif kind == "agreement":
        import tempfile

        import bench_segments_real

        cache = Path(options["cache"])
        cache.mkdir(parents=True, exist_ok=True)
        fresh_vectors(cache)
        os.environ["PAPERS_CACHE"] = str(cache)
        corpus = bench_segments_real.read_corpus(Path(options["corpus"]))
        work = Path(tempfile.mkdtemp(prefix="speed-targets-agreement-"))
        try:
            searches = min(options["searches"], len(corpus))
            found = bench_segments_real.measure_agreement(work / "a", corpus, 0.1, searches)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(
            json.dumps(
                {
                    "papers": found["papers"],
                    "added": found["added"],
                    "likes": found["likes"],
                    "searches": found["searches"],
                }
            )
        )
    else:
        raise SystemExit(f"no child named {kind}")


# ---------------------------------------------------------------- the table


def verdict(met: bool) -> str:
    return "yes" if met else "**no**"


def table(args, figures: dict, skipped: list[str]) -> list[str]:
    quick = "QUICK, " if args.quick else ""
    lines = [
        "| figure | measured | baseline (same run) | ratio | target | met | load |",
        "|---|---|---|---|---|---|---|",
    ]
    if "million" in figures:
        m = figures["million"]
        scaled = (
            f"{quick}other phases at {m['stand_in_papers']:,} scaled to 1M; "
            if m["stand_in_papers"] != 1_000_000
            else ""
        )
        when = f"; reports of {m['measured']}" if m["reused"] else ""
        lines.append(
            f"| a million abstracts, {m['model']} at {m['precision']} (projected; {scaled}"
            f"encoding rate at {m['encoded']:,}{when}) | {m['hours']:.2f} h (encoding "
            f"{m['encode_hours']:.2f} h at {m['idle_rate']:.1f} a second of 2 free cores, the "
            f"rest {60 * m['other_hours']:.0f} min) | 5 h | {m['hours'] / 5:.2f}x | < 1x "
            f"| {verdict(m['hours'] < 5)} | {m['load']:.1f} |"
        )
        lines.append(
            f"| the million's peak memory (the stand-in build at {m['stand_in_papers']:,} papers "
            f"+ the model's share) "
            f"| {m['peak_mb'] / 1024:.2f} GB | | | for information | | |"
        )
    if "cold" in figures:
        c = figures["cold"]
        lines.append(
            f"| cold `papers like`, seed index ({quick}median of {c['runs']} in turns) "
            f"| {c['like_s']:.3f} s | `import numpy, faiss` {c['baseline_s']:.3f} s "
            f"| {c['ratio']:.2f}x | <= 1.5x | {verdict(c['ratio'] <= 1.5)} | {c['load']:.1f} |"
        )
    for s in figures.get("segments", []):
        size = f"{quick}{s['papers']:,} + {s['added']:,} papers"
        lines.append(
            f"| lookups over {s['segments']} segments, {size} (CPU s, median of "
            f"{len(s['cpu_ratios'])}; wall {s['wall_ratio']:.2f}x) | | the compacted index "
            f"| {s['cpu_ratio']:.2f}x | <= 1.2x | {verdict(s['cpu_ratio'] <= 1.2)} "
            f"| {s['load']:.1f} |"
        )
        share = s["same"] / s["lookups"]
        lines.append(
            f"| top 10 over those segments equal, {size} (stand-in vectors) "
            f"| {s['same']}/{s['lookups']} lookups | the compacted index | {100 * share:.1f}% "
            f"| >= 99% | {verdict(share >= 0.99)} | {s['load']:.1f} |"
        )
    if "agreement" in figures:
        a = figures["agreement"]
        same = a["likes"][0] + a["searches"][0]
        total = a["likes"][1] + a["searches"][1]
        lines.append(
            f"| top 10 after adds, real model, {quick}{a['papers']:,} CSFCube papers "
            f"({a['added']:,} added in 3 adds; like {a['likes'][0]}/{a['likes'][1]}, search "
            f"{a['searches'][0]}/{a['searches'][1]}) | {same}/{total} lookups | a full build "
            f"| {100 * same / total:.1f}% | >= 99% | {verdict(same >= 0.99 * total)} "
            f"| {a['load']:.1f} |"
        )
    if "quality" in figures:
        q = figures["quality"]
        peak, base = q["tier"]["rss_kb"] * 1024, q["default"]["rss_kb"] * 1024
        lines.append(
            f"| quality tier build peak, {quick}{q['papers']:,} CSFCube papers "
            f"({q['tier']['wall']:.0f} s wall, {q['tier']['cpu']:.0f} CPU s) | {peak / GB:.2f} GB "
            f"| the default model's build {base / GB:.2f} GB | {peak / base:.2f}x "
            f"| < 1.5 GB | {verdict(peak < 1.5 * GB)} | {q['load']:.1f} |"
        )
        first = q["first"]["rss_kb"] * 1024
        lines.append(
            f"| quality tier build peak, first build on a machine (5 papers, an empty user cache: "
            f"the model exported and quantised; {q['first']['wall']:.0f} s wall) "
            f"| {first / GB:.2f} GB | | | < 1.5 GB | {verdict(first < 1.5 * GB)} | |"
        )
    if "precision" in figures:
        p = figures["precision"]
        ratio = p["cpu"]["fp32"] / p["cpu"]["default"]
        wall = p["wall"]["fp32"] / p["wall"]["default"]
        lines.append(
            f"| whole build at the default precision ({p['default_precision']}), {quick}"
            f"{p['papers']:,} CSFCube papers (CPU s, median of 2; wall {wall:.2f}x) "
            f"| {p['cpu']['default']:.1f} CPU s | fp32: {p['cpu']['fp32']:.1f} CPU s "
            f"| {ratio:.2f}x as fast | > 1x | {verdict(ratio > 1)} | {p['load']:.1f} |"
        )
    if skipped:
        lines.append(f"\nnot measured in this run: {', '.join(skipped)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a few minutes")
    parser.add_argument(
        "--skip",
        nargs="+",
        choices=PARTS,
        default=[],
        metavar="PART",
        help=f"parts not to measure ({', '.join(PARTS)})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="work folder, kept between runs "
        "(default: /tmp/speed_targets, or /tmp/speed_targets-quick)",
    )
    parser.add_argument("--million-papers", type=int)
    parser.add_argument("--encode-papers", type=int)
    parser.add_argument(
        "--million-out",
        type=Path,
        help="the reports of an earlier project_million.py run: not measured again",
    )
    parser.add_argument("--cold-runs", type=int)
    parser.add_argument("--segment-papers", type=int, nargs="+")
    parser.add_argument("--segment-queries", type=int, default=200)
    parser.add_argument("--segment-repeats", type=int)
    parser.add_argument("--agreement-papers", type=int, help="0: every CSFCube dev paper")
    parser.add_argument("--agreement-searches", type=int)
    parser.add_argument("--quality-papers", type=int)
    parser.add_argument("--precision-papers", type=int)
    args = parser.parse_args()
    sizes = dict(
        million_papers=(20_000, 1_000_000),
        encode_papers=(300, 20_000),
        cold_runs=(5, 15),
        segment_papers=([5_000], [40_000]),
        segment_repeats=(3, 5),
        agreement_papers=(400, 0),
        agreement_searches=(50, 300),
        quality_papers=(60, 700),
        precision_papers=(60, 1_000),
    )
    for name, (small, full) in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, small if args.quick else full)
    args.out = args.out or Path("/tmp/speed_targets" + ("-quick" if args.quick else ""))
    args.out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    header = (
        f"{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, load average "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} at the start"
    )
    if args.quick:
        header = "QUICK RUN (small sizes, not the targets' sizes): " + header
    measured: dict = {}
    skipped = list(args.skip)
    for part in PARTS:
        if part not in args.skip:
            try:
                measured[part] = globals()[part](args)
            except SystemExit as failure:  # the others are still measured and printed
                say(f"{part} failed: {failure}")
                skipped.append(f"{part} (failed: {str(failure).splitlines()[0]})")
    minutes = (datetime.now(timezone.utc) - started).total_seconds() / 60
    print(f"{header}; {minutes:.0f} min in all")
    print("\n".join(table(args, measured, skipped)))
    if len(skipped) > len(args.skip):
        raise SystemExit(1)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child_main(sys.argv[2], json.loads(sys.argv[3]))
    else:
        main()
