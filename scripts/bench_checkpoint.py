"""What checkpointed encoding costs: throughput with and without it, and memory as the corpus grows.

    python scripts/bench_checkpoint.py [--papers 600] [--rounds 3] [--fake SECONDS] [--small-calls]
    python scripts/bench_checkpoint.py --memory 10000 100000

Throughput: the first N CSFCube dev abstracts ("title. abstract", read with the
project's reader) encoded through `embed_texts` into a fresh embedding cache, as
`papers build` does: with the packaged model's ONNX export (the build path), or,
with --fake, tests/fakes.py's encoder sleeping SECONDS per text (no model at all).
  without: the encoding before checkpoints: encoder calls of 256 texts, every
           vector written in one transaction at the end;
  with:    today's defaults: calls of ENCODE_BATCH texts, a commit every
           ENCODE_GROUP texts or COMMIT_SECONDS;
  calls64: (with --small-calls) the same with calls of 64 texts, which would
           allow commits every few seconds on a slow machine.
Rounds alternate the variants so machine load hits them alike; the best round of
each counts, and ratios are against `without` from the same run. CPU time (all
threads of this process) is reported beside wall time: on a loaded machine it is
the steadier of the two.

Memory (--memory N...): for each N, a subprocess generates N synthetic abstracts,
then traces (tracemalloc) `embed_texts` with a fake encoder costing next to
nothing (384 dimensions, 128-word windows) into a fresh cache: the peak of memory allocated during encoding, the returned
vectors (N x 384 float32, which the index needs anyway) and the difference, the
working memory of the stage. Run it with PYTHONPATH pointing at an older checkout
to measure that one.

Quoted in: docs/measured-overview.md (the checkpoint and encoding-memory rows) and docs/guarantees.md (what a kill loses).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if "PAPERS_BENCH_KEEP_PATH" not in os.environ:
    sys.path.insert(0, str(REPO))  # run from a clone without installing
sys.path.insert(1, str(REPO / "tests"))  # the fake encoder

CSFCUBE = REPO.parent / "shared" / "eval" / "csfcube-dev" / "corpus.jsonl"
SMALL_CALLS = False


def csfcube_texts(count: int) -> list[str]:
    from recommender.corpus.papers import read_papers

    with tempfile.TemporaryDirectory() as folder:
        sample = Path(folder) / "sample.jsonl"
        lines = CSFCUBE.read_text(encoding="utf-8").splitlines()[:count]
        sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # duplicate abstracts in the sample
            return [paper.text for paper in read_papers([sample])]


def variants():
    from recommender.embed import windows

    found = {
        "without": dict(ENCODE_BATCH=256, ENCODE_GROUP=10**12, COMMIT_SECONDS=float("inf")),
        "with": dict(ENCODE_BATCH=windows.ENCODE_BATCH, ENCODE_GROUP=windows.ENCODE_GROUP,
                     COMMIT_SECONDS=windows.COMMIT_SECONDS),
    }
    if SMALL_CALLS:
        found["calls64"] = dict(found["with"], ENCODE_BATCH=64)
    return found


def timed_run(encoder, texts, settings):
    """(wall, CPU) seconds to encode `texts` into a fresh cache with the given settings, commits made, vectors."""
    from recommender.embed import windows
    from recommender.embed.windows import Chunking, embed_texts
    from recommender.embed.embedding_cache import EmbeddingCache

    saved = {name: getattr(windows, name) for name in settings}
    for name, value in settings.items():
        setattr(windows, name, value)
    try:
        with tempfile.TemporaryDirectory() as folder, EmbeddingCache(Path(folder)) as cache:
            commits = 0
            put_many = cache.put_many

            def counted(items):
                nonlocal commits
                commits += 1
                put_many(items)

            cache.put_many = counted
            started, cpu_started = time.perf_counter(), time.process_time()
            result = embed_texts(encoder, texts, Chunking(), cache)
            seconds = (time.perf_counter() - started, time.process_time() - cpu_started)
            assert result.encoded == len(texts)
    finally:
        for name, value in saved.items():
            setattr(windows, name, value)
    return seconds, commits, result.vectors


class SlowFake:
    """tests/fakes.py's encoder with a fixed cost per window, like a model."""

    def __init__(self, seconds: float):
        from fakes import FakeEncoder

        self.inner = FakeEncoder(dimension=384, max_tokens=254)
        self.name, self.dimension, self.max_tokens = "slow-fake", 384, 254
        self.seconds = seconds

    def token_spans(self, text):
        return self.inner.token_spans(text)

    def encode(self, texts):
        time.sleep(self.seconds * len(texts))
        return self.inner.encode(texts)


def throughput(args) -> None:
    texts = csfcube_texts(args.papers)
    with tempfile.TemporaryDirectory() as folder:
        if args.fake:
            encoder, what = SlowFake(args.fake), f"fake encoder, {args.fake * 1000:.0f} ms a window"
        else:
            from recommender.embed.onnx_encoder import OnnxEncoder, export_onnx
            from recommender.embed.sentence_transformer import DEFAULT_MODEL, resolve_model_path

            export_onnx(resolve_model_path(DEFAULT_MODEL), Path(folder) / "onnx")
            encoder, what = OnnxEncoder(Path(folder) / "onnx", name=DEFAULT_MODEL), f"{DEFAULT_MODEL} (ONNX export, as builds use)"
        settings = variants()
        times = {name: [] for name in settings}
        commits, vectors = {}, {}
        timed_run(encoder, texts[:32], settings["with"])  # warm-up
        for _ in range(args.rounds):
            for name, values in settings.items():
                seconds, commits[name], vectors[name] = timed_run(encoder, texts, values)
                times[name].append(seconds)
                print(f"  {name:8s} {seconds[0]:7.2f} s wall {seconds[1]:7.2f} s CPU", file=sys.stderr)
    print(f"{len(texts)} CSFCube abstracts, {what}; {args.rounds} rounds, best of each; "
          f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    base = min(t[0] for t in times["without"])
    cpu_base = min(t[1] for t in times["without"])
    print(f"{'variant':8s} {'wall s':>8s} {'papers/s':>9s} {'commits':>8s} {'wall vs without':>16s} "
          f"{'CPU s':>8s} {'CPU vs without':>15s} {'max |vector diff|':>18s}")
    for name in settings:
        best = min(t[0] for t in times[name])
        cpu = min(t[1] for t in times[name])
        deviation = float(np.abs(vectors[name] - vectors["without"]).max())
        print(f"{name:8s} {best:8.2f} {len(texts) / best:9.1f} {commits[name]:8d} {best / base:15.3f}x "
              f"{cpu:8.2f} {cpu / cpu_base:14.3f}x {deviation:18.1e}")


class CheapEncoder:
    """A fake model costing next to nothing, so the trace is of embed_texts: words are
    tokens, and a window's vector is a unit vector picked by its CRC-32."""

    name, dimension, max_tokens = "cheap-fake", 384, 128

    def token_spans(self, text):
        return [match.span() for match in re.finditer(r"\S+", text)]

    def encode(self, texts):
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        out[np.arange(len(texts)), [zlib.crc32(t.encode()) % self.dimension for t in texts]] = 1.0
        return out


def memory_child(count: int) -> None:
    """In a fresh process: trace embed_texts over `count` synthetic abstracts."""
    import resource
    import tracemalloc

    from recommender.embed.windows import Chunking, embed_texts
    from recommender.embed.embedding_cache import EmbeddingCache

    rng = random.Random(count)
    words = [f"{stem}{suffix}" for stem in ("graph", "spectral", "privacy", "gradient", "video", "kernel", "tensor",
                                            "sparse", "recurrent", "quantum", "protein", "retrieval")
             for suffix in ("s", "ing", "ation", "ical", "ness", "wise", "less", "ized")]
    texts = [f"paper{i} " + " ".join(rng.choices(words, k=rng.randint(80, 220))) for i in range(count)]
    encoder = CheapEncoder()
    with tempfile.TemporaryDirectory() as folder, EmbeddingCache(Path(folder)) as cache:
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        started = time.perf_counter()
        result = embed_texts(encoder, texts, Chunking(), cache)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "papers": count, "peak_bytes": peak, "vectors_bytes": result.vectors.nbytes,
        "texts_bytes": sum(len(t) for t in texts), "seconds": seconds,
        "maxrss_growth_bytes": (rss_after - rss_before) * 1024,
    }))


def memory(counts: list[int]) -> None:
    print("embed_texts with a near-free fake encoder (384 dimensions) into a fresh cache; tracemalloc in a subprocess per size")
    print(f"{'papers':>8s} {'peak MB':>8s} {'vectors MB':>10s} {'working MB':>10s} {'maxrss +MB':>10s} {'texts MB':>9s} {'seconds':>8s}")
    for count in counts:
        env = dict(os.environ, PAPERS_BENCH_KEEP_PATH="1")
        env.setdefault("PYTHONPATH", str(REPO))
        output = subprocess.run([sys.executable, __file__, "--memory-child", str(count)], env=env,
                                check=True, capture_output=True, text=True).stdout
        row = json.loads(output.strip().splitlines()[-1])
        mb = 1 / 1e6
        print(f"{row['papers']:8d} {row['peak_bytes'] * mb:8.1f} {row['vectors_bytes'] * mb:10.1f} "
              f"{(row['peak_bytes'] - row['vectors_bytes']) * mb:10.1f} {row['maxrss_growth_bytes'] * mb:10.1f} "
              f"{row['texts_bytes'] * mb:9.1f} {row['seconds']:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fake", type=float, default=0.0, metavar="SECONDS",
                        help="Use a fake encoder costing SECONDS per window instead of the packaged model.")
    parser.add_argument("--small-calls", action="store_true", help="Also time encoder calls of 64 texts.")
    parser.add_argument("--memory", type=int, nargs="+", metavar="N", help="Trace memory at these corpus sizes instead.")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global SMALL_CALLS
    SMALL_CALLS = args.small_calls
    if args.memory_child:
        memory_child(args.memory_child)
    elif args.memory:
        memory(args.memory)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
