"""Encoding throughput of `papers build --engine ray` (a local Ray cluster) against the local build, in one run.

    python scripts/bench_ray.py [--csfcube 400] [--rounds 2]

Texts: the seed abstracts plus the first N CSFCube dev papers ("title. abstract"), read
with the project's own reader. Both sides run the build's encoding stage, `embed_texts`
(windows, pooling; no cache) with the packaged model's ONNX export: locally in this
process (ONNX Runtime, its default threads), and through `RayEncoder` on a local Ray
cluster of this machine's cores (one actor a core, one thread each, each loading the
export). The Ray figure is given without and with the cluster's start and stop, which
a build pays once. Rounds alternate the two so machine load hits both alike; the best
round of each counts. Needs the ray extra: pip install 'papers-like[ray]'.

Quoted in: docs/scaling-out.md (the table of encoding stages).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone without installing
sys.path.insert(0, str(REPO / "scripts"))

from bench_build_throughput import corpus_texts  # noqa: E402
from recommender.embed import loading  # noqa: E402
from recommender.embed.onnx_encoder import export_onnx  # noqa: E402
from recommender.embed.ray_engine import RayEncoder, RaySession  # noqa: E402
from recommender.embed.sentence_transformer import DEFAULT_MODEL, resolve_model_path  # noqa: E402
from recommender.embed.windows import Chunking, embed_texts, split_windows  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csfcube", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    texts = corpus_texts(args.csfcube)

    with tempfile.TemporaryDirectory() as folder:
        export = Path(folder) / "onnx"
        export_onnx(resolve_model_path(DEFAULT_MODEL), export)
        spec = loading.encoder_spec(DEFAULT_MODEL, export, "cpu")
        probe = spec()
        windows = sum(len(split_windows(t, probe.token_spans(t), probe.max_tokens, Chunking().overlap)) for t in texts)
        local_times, ray_times, ray_total_times, startups = [], [], [], []
        local_vectors = ray_vectors = None
        actors = None
        for _ in range(args.rounds):
            started = time.perf_counter()
            local_vectors = embed_texts(spec(), texts, Chunking()).vectors
            local_times.append(time.perf_counter() - started)

            started = time.perf_counter()
            with RaySession() as session:
                ready = time.perf_counter()
                encoder = RayEncoder(session, spec, spec(), "cpu")
                actors = encoder.actors
                ray_vectors = embed_texts(encoder, texts, Chunking()).vectors
                done = time.perf_counter()
            stopped = time.perf_counter()
            startups.append(ready - started)
            ray_times.append(done - ready)
            ray_total_times.append(stopped - started)

    deviation = float(1 - np.sum(local_vectors * ray_vectors, axis=1).min())
    local, ray, ray_total = min(local_times), min(ray_times), min(ray_total_times)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"texts: {len(texts)} (seeds + {args.csfcube} CSFCube), {windows} windows; model {DEFAULT_MODEL} (ONNX export)")
    print(f"rounds: {args.rounds}, best of each")
    print(f"local build, this process:          {local:7.1f} s  {len(texts) / local:6.1f} texts/s  1.00x")
    print(f"Ray, {actors} actors, encoding only:     {ray:7.1f} s  {len(texts) / ray:6.1f} texts/s  {local / ray:.2f}x")
    print(f"Ray, with cluster start and stop:   {ray_total:7.1f} s  {len(texts) / ray_total:6.1f} texts/s  "
          f"{local / ray_total:.2f}x  (start {min(startups):.1f} s)")
    print(f"largest 1 - cos between local and Ray vectors: {deviation:.1e}")


if __name__ == "__main__":
    main()
