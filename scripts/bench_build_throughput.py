"""Encoding throughput of a build against plain `SentenceTransformer.encode`, in one run.

    python scripts/bench_build_throughput.py [--csfcube 400] [--rounds 3]

Texts: the seed abstracts plus the first N CSFCube dev papers ("title. abstract"),
read with the project's own reader. Baseline: `SentenceTransformer.encode` of those
texts at its defaults (it truncates at 256 tokens). Build path: what `papers build`
does, i.e. the ONNX export of the same model through `embed_texts`, long texts cut
into windows and pooled (more tokens encoded than the baseline). Rounds alternate
the two so machine load hits both alike; the best round of each counts.

Quoted in: docs/measured-overview.md (the table's build-encoding row, and "Build throughput").
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

from recommender.embed.windows import Chunking, embed_texts  # noqa: E402
from recommender.embed.sentence_transformer import DEFAULT_MODEL, SentenceTransformerEncoder, resolve_model_path  # noqa: E402
from recommender.embed.onnx_encoder import OnnxEncoder, export_onnx  # noqa: E402
from recommender.corpus.papers import read_papers  # noqa: E402

CSFCUBE = REPO.parent / "shared" / "eval" / "csfcube-dev" / "corpus.jsonl"


def corpus_texts(csfcube: int) -> list[str]:
    texts = [paper.text for paper in read_papers([REPO / "seeds"])]
    if CSFCUBE.exists() and csfcube:
        with tempfile.TemporaryDirectory() as folder:
            sample = Path(folder) / "sample.jsonl"
            lines = CSFCUBE.read_text(encoding="utf-8").splitlines()[:csfcube]
            sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # duplicate abstracts in the sample
                texts += [paper.text for paper in read_papers([sample])]
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csfcube", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    texts = corpus_texts(args.csfcube)

    torch_encoder = SentenceTransformerEncoder(DEFAULT_MODEL)
    with tempfile.TemporaryDirectory() as folder:
        export_onnx(resolve_model_path(DEFAULT_MODEL), Path(folder) / "onnx")
        onnx_encoder = OnnxEncoder(Path(folder) / "onnx", name=DEFAULT_MODEL)
        windows = sum(
            1 + max(0, -(-(len(torch_encoder.token_spans(t)) - 254) // (254 - 32))) for t in texts
        )
        baseline_times, build_times = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            torch_encoder.model.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
            baseline_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            built = embed_texts(onnx_encoder, texts, Chunking()).vectors
            build_times.append(time.perf_counter() - started)
        same_path = embed_texts(torch_encoder, texts, Chunking()).vectors  # build path with torch, for deviation
    base_rate = len(texts) / min(baseline_times)
    build_rate = len(texts) / min(build_times)
    deviation = float(np.max(1 - np.sum(built * same_path, axis=1)))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{len(texts)} papers, {windows} windows of <= 254 tokens for the build path")
    print("| path | papers/s | ratio | target |")
    print("|---|---|---|---|")
    print(f"| plain SentenceTransformer.encode (truncates) | {base_rate:.1f} | 1.00x | |")
    print(f"| papers build: ONNX fp32, windows | {build_rate:.1f} | {build_rate / base_rate:.2f}x | >= 1.3x |")
    print(f"largest 1 - cos between the ONNX and torch build paths: {deviation:.1e}")


if __name__ == "__main__":
    main()
