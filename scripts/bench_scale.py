#!/usr/bin/env python
"""Scale benchmark for recommender.ann on synthetic embeddings (no model needed).

    python scripts/bench_scale.py [--sizes 100000 1000000] [--queries 1000]
                                  [--kinds auto] [--threads 0]

Data: a hierarchical Gaussian mixture on the unit sphere, standing in for
clustered sentence embeddings (uniform random 384-d vectors are unrealistic
and make every partitioned index look bad):
64 topics (random unit vectors) -> ``--centres`` sub-topic centres
(topic + noise, cosine ~0.6 between sub-topics of one topic) -> points
(centre + isotropic noise with a per-cluster spread, cosine to their centre
0.74-0.89), cluster sizes log-normal.  Queries are fresh draws from the same
mixture (not stored vectors).

Each (size, kind) runs in a fresh subprocess so ru_maxrss peaks do not mix.
Reported per row:
  build s        choose_index + build_faiss_index (incl. training and nprobe tuning)
  disk MB        faiss.write_index size
  peak RSS       process peak after the build (includes the float32 vectors
                 the caller holds), in GB and as a ratio to raw vector bytes
  p50/p99 ms     single-query search_index(k=10) latency
  exact p50 ms   baseline measured in the same process: brute-force
                 inner-product search of the same queries (faiss.knn, no copy)
  speed-up       exact p50 / index p50
  recall@10      vs exact top-10 over --queries queries
faiss threads: default (= cores) unless --threads; faiss runs a single query on
one thread for both flat and IVF, so latencies are effectively single-thread.

Quoted in: docs/performance.md and docs/measured-overview.md (the 1M recall, latency and build-memory rows, and "Scale") and README.md's headline figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DIM = 384
K = 10
CHUNK = 65_536


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _normalise(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


class Mixture:
    """Hierarchical Gaussian mixture on the unit sphere (see module docstring)."""

    def __init__(self, dim: int, n_centres: int, seed: int, n_topics: int = 64,
                 spread=(0.4, 0.8), bridge: float = 0.8, bridge_max: float = 0.7):
        rng = np.random.default_rng(seed)
        topics = _normalise(rng.standard_normal((n_topics, dim)).astype(np.float32))
        parent = rng.integers(0, n_topics, n_centres)
        noise = rng.standard_normal((n_centres, dim)).astype(np.float32) / np.sqrt(dim)
        self.centres = _normalise(topics[parent] + 0.8 * noise)
        w = rng.lognormal(0.0, 1.0, n_centres)
        self.weights = w / w.sum()
        self.spread = rng.uniform(*spread, n_centres).astype(np.float32)
        self.bridge, self.bridge_max = bridge, bridge_max
        self.dim = dim

    def sample(self, n: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        out = np.empty((n, self.dim), dtype=np.float32)
        for i0 in range(0, n, CHUNK):
            m = min(CHUNK, n - i0)
            lab = rng.choice(len(self.weights), size=m, p=self.weights)
            z = rng.standard_normal((m, self.dim), dtype=np.float32)
            z *= self.spread[lab, None] / np.sqrt(self.dim)
            z += self.centres[lab]
            if self.bridge:
                # interdisciplinary papers: pulled part-way towards another cluster
                other = rng.choice(len(self.weights), size=m, p=self.weights)
                a = rng.uniform(0.0, self.bridge_max, m).astype(np.float32)
                a[rng.random(m) >= self.bridge] = 0.0
                z *= (1.0 - a)[:, None]
                z += a[:, None] * self.centres[other]
            out[i0:i0 + m] = _normalise(z)
        return out


def worker(n: int, kind: str, nq: int, n_centres: int, seed: int, threads: int,
           encoding: str | None) -> dict:
    import faiss
    from recommender.index import ann

    if threads:
        faiss.omp_set_num_threads(threads)
    t0 = time.perf_counter()
    mix = Mixture(DIM, n_centres, seed)
    xb = mix.sample(n, seed + 1)
    xq = mix.sample(nq, seed + 2)
    gen_s = time.perf_counter() - t0
    raw = xb.nbytes
    rss_before = maxrss_bytes()

    t0 = time.perf_counter()
    choice = ann.choose_index(n, DIM, kind)
    if encoding and choice.kind == "ivf":
        choice = ann.IndexChoice(choice.kind, {**choice.params, "encoding": encoding}, choice.reason)
    index = ann.build_faiss_index(xb, choice, seed=seed)
    build_s = time.perf_counter() - t0
    peak = maxrss_bytes()

    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "index.faiss")
        faiss.write_index(index, path)
        disk = os.path.getsize(path)

    # latency: single queries through the public API
    n_lat = min(nq, 1000)
    for i in range(min(10, n_lat)):
        ann.search_index(index, xq[i:i + 1], K)
    lat = np.empty(n_lat)
    for i in range(n_lat):
        t = time.perf_counter()
        ann.search_index(index, xq[i:i + 1], K)
        lat[i] = time.perf_counter() - t

    # baseline: exact single-query search on the same vectors (no copy)
    n_base = min(n_lat, max(30, int(2e7 // n)))
    base = np.empty(n_base)
    faiss.knn(xq[:1], xb, K, metric=faiss.METRIC_INNER_PRODUCT)
    for i in range(n_base):
        t = time.perf_counter()
        faiss.knn(xq[i:i + 1], xb, K, metric=faiss.METRIC_INNER_PRODUCT)
        base[i] = time.perf_counter() - t

    # recall@10 vs exact, ground truth in batches
    t0 = time.perf_counter()
    hits = 0
    _, got = ann.search_index(index, xq, K)
    for i0 in range(0, nq, 256):
        _, gt = faiss.knn(xq[i0:i0 + 256], xb, K, metric=faiss.METRIC_INNER_PRODUCT)
        for a, b in zip(got[i0:i0 + 256], gt):
            hits += len(np.intersect1d(a, b))
    gt_s = time.perf_counter() - t0

    return {
        "n": n, "kind": choice.kind, "requested": kind,
        "description": ann.index_description(index), "reason": choice.reason,
        "gen_s": gen_s, "build_s": build_s, "gt_s": gt_s,
        "disk_mb": disk / 1e6, "raw_gb": raw / 1e9,
        "rss_before_gb": rss_before / 1e9, "peak_gb": peak / 1e9, "peak_ratio": peak / raw,
        "p50_ms": float(np.percentile(lat, 50) * 1e3), "p99_ms": float(np.percentile(lat, 99) * 1e3),
        "exact_p50_ms": float(np.percentile(base, 50) * 1e3), "n_base": n_base,
        "recall10": hits / (nq * K), "nq": nq,
        "threads": faiss.omp_get_max_threads(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--kinds", nargs="+", default=["auto"], help="auto flat ivf hnsw")
    ap.add_argument("--centres", type=int, default=2000, help="sub-topic clusters in the mixture")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="faiss OpenMP threads (0 = default)")
    ap.add_argument("--encoding", default=None,
                    help="override the IVF vectors' faiss encoding (SQfp16, SQ8, Flat: the package uses SQfp16)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.worker:
        res = worker(a.sizes[0], a.kinds[0], a.queries, a.centres, a.seed, a.threads, a.encoding)
        print("RESULT " + json.dumps(res), flush=True)
        return 0

    rows = []
    for n in a.sizes:
        for kind in a.kinds:
            cmd = [sys.executable, __file__, "--worker", "--sizes", str(n), "--kinds", kind,
                   "--queries", str(a.queries), "--centres", str(a.centres),
                   "--seed", str(a.seed), "--threads", str(a.threads)]
            if a.encoding:
                cmd += ["--encoding", a.encoding]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
            if proc.returncode or not line:
                sys.stderr.write(proc.stderr)
                print(f"size {n} kind {kind}: worker failed (rc={proc.returncode})", file=sys.stderr)
                continue
            r = json.loads(line[0][7:])
            rows.append(r)
            print(f"# n={n:,} {kind}: {r['description']} -- wall {time.perf_counter() - t0:.0f}s "
                  f"(gen {r['gen_s']:.0f}s, ground truth {r['gt_s']:.0f}s)", file=sys.stderr, flush=True)

    print(f"\nSynthetic hierarchical Gaussian mixture, {DIM}-d, {a.centres} clusters; "
          f"{a.queries} fresh queries; k={K}; faiss threads={rows[0]['threads'] if rows else '?'}\n")
    print("| n | index | build s | disk MB | peak RSS GB (x raw) | p50 ms | p99 ms "
          "| exact p50 ms | speed-up | recall@10 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']:,} | {r['description']} | {r['build_s']:.1f} | {r['disk_mb']:.0f} "
              f"| {r['peak_gb']:.2f} ({r['peak_ratio']:.2f}x) | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
              f"| {r['exact_p50_ms']:.2f} | {r['exact_p50_ms'] / r['p50_ms']:.1f}x | {r['recall10']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
