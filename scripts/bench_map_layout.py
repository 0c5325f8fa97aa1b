#!/usr/bin/env python
"""The map's 2-D layout: time and how well neighbours stay neighbours, for several methods, in one
run.

    python scripts/bench_map_layout.py [--sizes 1500 5000 20000] [--methods ...] [--real]
                                       [--extra-path DIR] [--json out.json]

Each (method, size) runs in a fresh Python process, as the server's background process meets it:
the time is wall-clock from the import of the layout library to the coordinates (a numba-compiled
library such as umap-learn pays its compilation there, as a first map does).

Vectors: clustered synthetic 384-d embeddings (scripts/bench_scale.py's Mixture, 120 sub-topics), or
with --real, the CSFCube abstracts (/work/shared/eval/csfcube-dev, first 1,500) encoded by the
packaged all-MiniLM-L6-v2 (or, with --vectors, read from the vectors.npy of an index built of them
with that model: `papers build`; only the CSFCube rows are measured then, with --sizes for the
synthetic ones).

Neighbour preservation ("kNN kept"): for every paper, the share of its 10 nearest papers by cosine
of the vectors that are among its 10 nearest on the map (Euclidean), averaged. Chance is 10/n.

Methods:
  umap-default   what the map used: UMAP cosine, n_neighbors=15, min_dist=0.25, spectral init,
                 default epochs (500 under 10,000 papers, 200 above), seeded
  umap-fast      UMAP cosine, n_neighbors=10, min_dist=0.25, PCA init, 100 epochs, seeded
  pca            the first two principal components
  opentsne       openTSNE (BSD-3-Clause), PCA init, perplexity 30, one thread, its default
                 250 + 500 iterations
  opentsne-fast  the same with perplexity 15 and 50 + 100 iterations
  pacmap         PaCMAP (Apache-2.0), PCA init, defaults
  layout         what recommender/index/map_layout.py's project_2d does now (t-SNE as opentsne-fast
                 when openTSNE is installed)

Quoted in: docs/performance.md ("Reading groups and the map") and docs/measured-overview.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

K = 10
CSFCUBE = Path("/work/shared/eval/csfcube-dev/corpus.jsonl")
METHODS = ("umap-default", "umap-fast", "pca", "opentsne", "opentsne-fast", "pacmap", "layout")


def synthetic(n: int, seed: int = 0) -> np.ndarray:
    from scripts.bench_scale import Mixture

    return Mixture(384, 120, seed).sample(n, seed + 1)


def real(n: int) -> np.ndarray:
    from recommender.embed.loading import load_encoder
    from recommender.embed.models import DEFAULT_MODEL

    rows = [json.loads(line) for line in CSFCUBE.read_text(encoding="utf-8").splitlines()][:n]
    texts = [f"{row.get('title', '')}. {row.get('abstract', '')}" for row in rows]
    return np.asarray(load_encoder(DEFAULT_MODEL).encode(texts), dtype=np.float32)


def project(method: str, vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """The layout, imports included (run in a fresh process)."""
    import warnings

    warnings.simplefilter("ignore")
    if method == "layout":
        from recommender.index.map_layout import project_2d

        return project_2d(vectors, seed)[0]
    if method == "pca":
        from recommender.index.map_layout import pca_2d

        return pca_2d(vectors)
    if method.startswith("umap"):
        import umap

        options = (
            dict(n_neighbors=15, min_dist=0.25)
            if method == "umap-default"
            else dict(n_neighbors=10, min_dist=0.25, init="pca", n_epochs=100)
        )
        reducer = umap.UMAP(metric="cosine", random_state=seed, **options)
        return np.asarray(reducer.fit_transform(vectors))
    if method.startswith("opentsne"):
        from openTSNE import TSNE

        fewer = (
            dict(perplexity=15, early_exaggeration_iter=50, n_iter=100)
            if method == "opentsne-fast"
            else {}
        )
        tsne = TSNE(metric="cosine", n_jobs=1, random_state=seed, initialization="pca", **fewer)
        return np.asarray(tsne.fit(vectors))
    if method == "pacmap":
        import pacmap

        return np.asarray(pacmap.PaCMAP(random_state=seed, apply_pca=True).fit_transform(vectors))
    raise SystemExit(f"unknown method {method}")


def knn_kept(vectors: np.ndarray, layout: np.ndarray, k: int = K) -> float:
    """Mean share of each point's k nearest (cosine, in the vectors) among its k nearest on the
    map."""
    from scipy.spatial import cKDTree

    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    n = len(vectors)
    _, near_map = cKDTree(layout).query(layout, k + 1)
    kept = 0
    for start in range(0, n, 2048):
        block = vectors[start : start + 2048] @ vectors.T
        rows = np.arange(len(block))
        block[rows, start + rows] = -np.inf
        near = np.argpartition(-block, k, axis=1)[:, :k]
        for i, found in enumerate(near):
            on_map = set(near_map[start + i].tolist()) - {start + i}
            kept += len(on_map & set(found.tolist()))
    return kept / (n * k)


def worker(method: str, path: str) -> None:
    vectors = np.load(path)
    start = time.perf_counter()
    layout = project(method, vectors)
    seconds = time.perf_counter() - start
    np.save(path + f".{method}.npy", np.asarray(layout, dtype=np.float64))
    print(json.dumps({"seconds": seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1500, 5000, 20000])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--real", action="store_true", help="CSFCube with the real model (1,500)")
    parser.add_argument(
        "--vectors",
        default="",
        help="instead of encoding (--real): the vectors.npy of an index built of CSFCube",
    )
    parser.add_argument(
        "--extra-path", default="", help="a folder with openTSNE/pacmap installed (--target)"
    )
    parser.add_argument("--json", default="")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.extra_path:
            sys.path.append(args.extra_path)
        worker(*args.worker)
        return
    import tempfile

    rows = []
    datasets = [(f"synthetic {n:,}", n, False) for n in args.sizes]
    if args.real or args.vectors:
        datasets.insert(0, ("CSFCube 1,500 (real model)", 1500, True))
    with tempfile.TemporaryDirectory() as folder:
        for name, n, is_real in datasets:
            if is_real and args.vectors:
                vectors = np.asarray(np.load(args.vectors)[:n], dtype=np.float32)
            else:
                vectors = real(n) if is_real else synthetic(n)
            path = os.path.join(folder, f"{n}-{is_real}.npy")
            np.save(path, vectors)
            for method in args.methods:
                command = [sys.executable, __file__, "--worker", method, path]
                if args.extra_path:
                    command += ["--extra-path", args.extra_path]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    reason = (done.stderr.strip().splitlines() or ["failed"])[-1]
                    print(f"{name:28} {method:13} failed: {reason}", flush=True)
                    rows.append({"data": name, "method": method, "error": reason})
                    continue
                seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
                kept = knn_kept(vectors, np.load(path + f".{method}.npy"))
                print(f"{name:28} {method:13} {seconds:8.1f} s  kNN kept {kept:.3f}", flush=True)
                rows.append({"data": name, "method": method, "seconds": seconds, "knn_kept": kept})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print()
    print("| data | method | seconds | 10-NN kept |")
    print("|---|---|---:|---:|")
    for row in rows:
        if "error" in row:
            print(f"| {row['data']} | {row['method']} | failed | |")
        else:
            seconds, kept = row["seconds"], row["knn_kept"]
            print(f"| {row['data']} | {row['method']} | {seconds:.1f} | {kept:.2f} |")


if __name__ == "__main__":
    main()
