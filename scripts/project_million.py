#!/usr/bin/env python
"""A million abstracts on this machine, projected from measured parts, against 5 hours.

    python scripts/project_million.py [--papers 1000000] [--encode-papers 20000]
                                      [--out /tmp/project_million] [--map-layout]

Three builds, each in a fresh process through `build_index`, each phase timed as `build_index`
reports it (`on_phase`):
- the encoding rate: `--encode-papers` synthetic CSFCube-like papers (bench_scale_cli.py's topics
  corpus: real CSFCube dev sentences, 4-9 a paper, each text distinct) built with the real default
  model at its default precision on this CPU, in a fresh user cache (PAPERS_CACHE: no vector is
  cached; the model is exported and quantised first, in a process of its own, as once per
  machine); the rate is that of the build's encoding phase;
- every other phase at `--papers`: the same corpus at that size built with the test suite's fake
  encoder (tests/fakes.py, 384 dimensions: stand-in vectors, encoding costs next to nothing):
  reading, the search index, TF-IDF, checksums, the map layout with `--map-layout`; the fake
  encoder's own seconds are taken out of its encoding phase, what is left there (the embedding
  cache, the vectors file) is counted with the other phases;
- the model's memory: a fake-encoder build of `--encode-papers`, whose peak RSS, taken from the
  real build's, is what the real encoder adds to a build's peak.

The projection: `--papers` / the measured rate, plus the other phases at `--papers`; the peak: the
stand-in build's at `--papers` plus the model's. Printed as a table against the targets (5 hours,
the peak for information), with the load average at each part (the machine is shared).

Quoted in: docs/performance.md ("A million abstracts"), docs/measured-scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import bench_scale_cli  # scripts/, beside this file

ROOT = Path(__file__).resolve().parent.parent
TARGET_HOURS = 5.0
ENCODING = "encoding"


def child(corpus: str, index: str, report: str, encoder: str, map_layout: str) -> None:
    """One build in this process, each phase's wall and CPU seconds and the peak RSS to `report`."""
    sys.path.insert(0, str(ROOT))
    from recommender.embed import loading
    from recommender.index import build

    timers = {"encoder_s": 0.0, "encoder_cpu_s": 0.0}
    model = None
    if encoder == "fake":
        sys.path.insert(0, str(ROOT / "tests"))
        from fakes import FakeEncoder

        from recommender.embed.sentence_transformer import DEFAULT_MODEL

        fake = FakeEncoder(name="fake-384", dimension=bench_scale_cli.DIMENSION, max_tokens=256)

        def timed(function):
            def wrapper(*args, **kwargs):
                started, cpu = time.perf_counter(), time.process_time()
                try:
                    return function(*args, **kwargs)
                finally:
                    timers["encoder_s"] += time.perf_counter() - started
                    timers["encoder_cpu_s"] += time.process_time() - cpu

            return wrapper

        fake.encode = timed(fake.encode)
        fake.token_spans = timed(fake.token_spans)
        fake.encoded_texts = _Discard()  # the fake keeps every text otherwise
        loading.load_encoder = lambda model, *args, **kwargs: fake
        loading.encoder_spec = lambda model, *args, **kwargs: lambda: fake
        prepare = build.prepare_query_encoder  # the real model's query encoder, as a build links
        build.prepare_query_encoder = lambda model, writer, previous, on_phase=None, *rest: prepare(
            DEFAULT_MODEL, writer, previous, on_phase, *rest
        )
        model = "fake-384"
    phases: list[dict] = []
    current = {"name": "starting", "wall": time.perf_counter(), "cpu": time.process_time()}

    def mark(name: str, total=None) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        phases.append(
            {
                "name": current["name"],
                "wall_s": wall - current["wall"],
                "cpu_s": cpu - current["cpu"],
            }
        )
        current.update(name=name, wall=wall, cpu=cpu)

    result = build.build_index(
        [corpus], index=index, model=model, on_phase=mark, map_layout=map_layout == "yes"
    )
    mark("end")
    manifest = json.loads(next(Path(index).glob("v-*/manifest.json")).read_text())
    Path(report).write_text(
        json.dumps(
            {
                "papers": result.papers,
                "encoded": result.encoded,
                "model": manifest.get("model"),
                "precision": manifest.get("precision"),
                "phases": phases,
                **timers,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "load": os.getloadavg()[0],
            }
        )
    )


class _Discard(list):
    def extend(self, items) -> None:
        pass


def run_build(
    corpus: Path, out: Path, name: str, encoder: str, map_layout: bool, env: dict
) -> dict:
    index, report = out / f"index-{name}", out / f"{name}.json"
    if report.exists():  # measured by an earlier run with this OUT (delete it to measure again)
        print(f"{name}: measured already ({report})", flush=True)
        return json.loads(report.read_text())
    subprocess.run(["rm", "-rf", str(index)], check=True)
    print(f"[{time.strftime('%H:%M:%S')}] {name}: building {corpus.name}", flush=True)
    command = [sys.executable, __file__, "--child", str(corpus), str(index), str(report), encoder]
    command.append("yes" if map_layout else "no")
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the {name} build failed:\n{done.stderr[-3000:]}")
    subprocess.run(["rm", "-rf", str(index)], check=True)
    return json.loads(report.read_text())


def corpus_of(out: Path, size: int) -> Path:
    corpus = out / f"corpus-topics-{size}.jsonl"
    if not corpus.exists():
        print(f"[{time.strftime('%H:%M:%S')}] writing {size:,} papers", flush=True)
        bench_scale_cli.write_corpus(corpus, size, bench_scale_cli.CSFCUBE, "topics")
    return corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument("--encode-papers", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/project_million"))
    parser.add_argument("--map-layout", action="store_true", help="store the map layout too")
    parser.add_argument(
        "--parts",
        nargs="*",
        choices=("encoding", "others"),
        default=["encoding", "others"],
        help="measure only these parts (each can run on its own, at once; the table is printed "
        "once OUT holds all three builds' reports; none: only print it)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.parts:
        measure(args)
    real, fake_small, fake_large = read_reports(args.out)
    print_projection(args, real, fake_small, fake_large)


def read_reports(out: Path) -> tuple[dict, dict, dict]:
    """The three builds' reports in `out`: the real encoder's, the stand-in's at its size and at
    the large size."""
    reports = [out / f"{name}.json" for name in ("real-small", "fake-small", "fake-large")]
    if not all(report.exists() for report in reports):
        raise SystemExit(f"not every part is measured yet in {out}: run the others")
    real, fake_small, fake_large = (json.loads(report.read_text()) for report in reports)
    return real, fake_small, fake_large


def measure(args) -> None:
    env = bench_scale_cli.environment(ROOT)
    # A fresh user cache: no vector of these texts is cached; the model is exported (and
    # quantised) into it first, in its own process, as once per machine.
    env["PAPERS_CACHE"] = str(args.out / f"cache-{os.getpid()}")
    started = time.perf_counter()
    export = subprocess.run(
        [
            sys.executable,
            "-c",
            "from recommender.embed.export_cache import shared_export; "
            "from recommender.embed.sentence_transformer import DEFAULT_MODEL; "
            "shared_export(DEFAULT_MODEL)",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if export.returncode:
        raise SystemExit(f"exporting the model to ONNX failed:\n{export.stderr[-3000:]}")
    print(f"model export beforehand (once a machine): {time.perf_counter() - started:.0f} s")
    if "encoding" in args.parts:
        small = corpus_of(args.out, args.encode_papers)
        run_build(small, args.out, "real-small", "real", False, env)
        run_build(small, args.out, "fake-small", "fake", False, env)
    if "others" in args.parts:
        large = corpus_of(args.out, args.papers)
        run_build(large, args.out, "fake-large", "fake", args.map_layout, env)


def by_name(report: dict) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for phase in report["phases"]:
        name = ENCODING if phase["name"].startswith(ENCODING) else phase["name"]
        entry = found.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0})
        entry["wall_s"] += phase["wall_s"]
        entry["cpu_s"] += phase["cpu_s"]
    return found


def projection(papers: int, real: dict, fake_small: dict, fake_large: dict) -> dict:
    """The projected build of `papers` from the three reports: its hours, their parts, its peak.

    Every phase but the encoding scales linearly from the stand-in build's size to `papers`
    (equal sizes in the usual run: nothing is scaled)."""
    encoding = by_name(real).get(ENCODING)
    if not encoding or not real["encoded"]:
        raise SystemExit("the real build encoded nothing: was the embedding cache warm?")
    rate = real["encoded"] / encoding["wall_s"]
    # On a shared machine the wall clock counts other programs' time: the encoder's CPU seconds
    # spread over every core are what it takes on the machine alone (it keeps them all busy).
    cores = os.cpu_count() or 1
    idle_rate = real["encoded"] / (encoding["cpu_s"] / cores)
    encode_hours = papers / idle_rate / 3600
    scale = papers / fake_large["papers"]
    rows = []
    for name, spent in by_name(fake_large).items():
        wall, cpu = spent["wall_s"], spent["cpu_s"]
        if name == ENCODING:  # the stand-in's own seconds out: the rest is the build's
            wall -= fake_large["encoder_s"]
            cpu -= fake_large["encoder_cpu_s"]
            name = "encoding phase beyond the encoder (embedding cache, vectors file)"
        rows.append((name, wall, cpu))
    # Their CPU seconds: their time alone, or more where a phase keeps both cores busy (FAISS).
    other_hours = scale * sum(cpu for _, _, cpu in rows) / 3600
    model_mb = max(0.0, real["peak_rss_mb"] - fake_small["peak_rss_mb"])
    return {
        "papers": papers,
        "cores": cores,
        "encoding": encoding,
        "rate": rate,
        "idle_rate": idle_rate,
        "encode_hours": encode_hours,
        "rows": rows,
        "scale": scale,
        "other_hours": other_hours,
        "hours": encode_hours + other_hours,
        "model_mb": model_mb,
        "peak_mb": fake_large["peak_rss_mb"] + model_mb,
        "loads": (real["load"], fake_small["load"], fake_large["load"]),
    }


def print_projection(args, real: dict, fake_small: dict, fake_large: dict) -> None:
    figures = projection(args.papers, real, fake_small, fake_large)
    cores, encoding, total = figures["cores"], figures["encoding"], figures["hours"]
    encode_hours, model_mb = figures["encode_hours"], figures["model_mb"]
    print(f"machine: {cores} cores; projected times are CPU seconds (encoding: over {cores} cores)")
    print(f"| part | measured | projected to {args.papers:,} papers |")
    print("|---|---|---|")
    print(
        f"| encoding, {real['model']} at {real['precision']} (the defaults here) "
        f"| {real['encoded']:,} papers: {encoding['cpu_s']:.0f} CPU s, "
        f"{figures['idle_rate']:.1f} a second alone ({figures['rate']:.1f} by the wall clock, "
        f"load {real['load']:.1f}) | {encode_hours:.2f} h |"
    )
    for name, wall, cpu in figures["rows"]:
        print(
            f"| {name} | {cpu:.0f} CPU s ({wall:.0f} s wall) at {fake_large['papers']:,} "
            f"(load {fake_large['load']:.1f}) | {figures['scale'] * cpu / 60:.1f} min |"
        )
    verdict = "meets" if total < TARGET_HOURS else f"misses by {total - TARGET_HOURS:.2f} h"
    print(
        f"| **the whole build** | | **{total:.2f} h** (target: under {TARGET_HOURS:.0f} h; "
        f"{verdict}; encoding {100 * encode_hours / total:.0f}% of it) |"
    )
    print(
        f"| peak memory | stand-in build {fake_large['peak_rss_mb']:,.0f} MB + the model "
        f"{model_mb:,.0f} MB ({real['peak_rss_mb']:,.0f} - {fake_small['peak_rss_mb']:,.0f} MB "
        f"at {real['encoded']:,}) | {figures['peak_mb'] / 1024:.1f} GB |"
    )


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        child(*sys.argv[2:])
    else:
        main()
