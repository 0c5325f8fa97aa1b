"""Cost of adding 1% new papers to an index, as a share of a full build.

    python scripts/bench_incremental.py [--papers 100000]

Encoding 100,000 abstracts with the real model takes most of an hour on two
cores, so the script measures the two parts of a build separately, in one run:
- everything but encoding (reading, cache look-ups, FAISS, TF-IDF, writing,
  checksums), timed for real on synthetic abstracts whose vectors are already
  in the embedding cache (put there by a stand-in encoder: no model is loaded);
- the real model's encoding rate (papers a second, long texts windowed as a
  build does), timed on the 38 real seed abstracts.
A build's cost is then its measured overhead plus (papers encoded / rate). Both
parts are of a build at fp32, the precision the real model's full encoder runs at
(a build at int8 or bf16 encodes with the model's export).

Quoted in: docs/measured-overview.md (the add-1% row, and "Incremental builds").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from recommender import PaperIndex, build_index, read_papers  # noqa: E402
from recommender.embed import loading  # noqa: E402
from recommender.embed.windows import Chunking, embed_texts  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEED_PAPERS = read_papers([REPO / "seeds"])
# Synthetic abstracts draw on the seeds' own words, so they tokenize like real ones.
VOCABULARY = sorted({word for paper in SEED_PAPERS for word in paper.abstract.split()})


class HashEncoder:
    """Deterministic stand-in used only to fill the embedding cache quickly."""

    name = "all-MiniLM-L6-v2"
    dimension = 384
    max_tokens = 254
    encoded = 0  # texts encoded, by every instance

    def token_spans(self, text):
        spans, start = [], 0
        for word in text.split(" "):
            spans.append((start, start + len(word)))
            start += len(word) + 1
        return spans

    def encode(self, texts):
        HashEncoder.encoded += len(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[row] = np.random.default_rng(seed).standard_normal(self.dimension)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def synthetic(start: int, count: int) -> list[dict]:
    rng = np.random.default_rng(start)
    words = np.array(VOCABULARY)
    # Zipf-like word use, 120-260 words an abstract, as real abstracts.
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    return [
        {"id": f"p{i:07d}", "title": f"Synthetic paper {i}",
         "abstract": " ".join(rng.choice(words, size=int(rng.integers(120, 260)), p=weights))}
        for i in range(start, start + count)
    ]


def write(path: Path, papers: list[dict]) -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
    return path


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=100_000)
    args = parser.parse_args()
    added = max(1, args.papers // 100)
    work = Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    os.environ["PAPERS_CACHE"] = str(work / "cache")  # the embedding cache of this run alone (shared by its indexes)
    try:
        base = write(work / "base.jsonl", synthetic(0, args.papers))
        extra = write(work / "extra.jsonl", synthetic(args.papers, added))
        from recommender.embed.sentence_transformer import DEFAULT_MODEL

        real_loader = loading.load_encoder
        loading.load_encoder = lambda model, device="auto": HashEncoder()
        # At fp32 with no query export a build encodes with loading.load_encoder (the stand-in); at
        # the default precision it would export the real model and encode with that.
        fp32 = {"precision": "fp32", "export_query_encoder": False}
        # Fill the cache once with every paper (not timed).
        build_index([base, extra], index=work / "warm", **fp32)
        if HashEncoder.encoded < args.papers + added:
            raise SystemExit(f"the stand-in encoded {HashEncoder.encoded:,} texts of"
                             f" {args.papers + added:,} papers: the build used another encoder")
        fresh = work / "measured"  # a new index: every vector comes from the shared cache the warm build filled
        full_overhead = timed(lambda: build_index([base], index=fresh, **fp32))
        add_overhead = timed(lambda: build_index([base, extra], index=fresh, **fp32))
        with PaperIndex.open(fresh) as opened:
            manifest = opened.manifest["index"]

        loading.load_encoder = real_loader
        encoder = loading.load_encoder(DEFAULT_MODEL)
        sample = [paper.text for paper in SEED_PAPERS]
        encoder.encode(sample[:4])  # warm-up
        seconds = timed(lambda: embed_texts(encoder, sample, Chunking()))
        rate = len(sample) / seconds
    finally:
        shutil.rmtree(work, ignore_errors=True)

    full = full_overhead + args.papers / rate
    incremental = add_overhead + added / rate
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"index after adding: {manifest['kind']} ({manifest.get('description', '')}), trained on {manifest['trained_on']:,}")
    print("| step | papers encoded | overhead s (measured) | encoding s (at measured rate) | total s |")
    print("|---|---|---|---|---|")
    print(f"| full build | {args.papers:,} | {full_overhead:.1f} | {args.papers / rate:.0f} | {full:.0f} |")
    print(f"| add 1% | {added:,} | {add_overhead:.1f} | {added / rate:.1f} | {incremental:.1f} |")
    print(f"real-model encoding rate: {rate:.1f} papers/s on the {len(SEED_PAPERS)} seed abstracts")
    print(f"adding 1% costs {100 * incremental / full:.1f}% of a full build (target: about 1%)")


if __name__ == "__main__":
    main()
