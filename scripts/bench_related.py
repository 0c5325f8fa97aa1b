#!/usr/bin/env python
"""Benchmark of `papers related-work --all` on synthetic corpora (no model needed).

    python scripts/bench_related.py [--sizes 10000 100000] [-k 5] [--workdir DIR] [--sample 200]

Data: pseudo-word texts (a Zipf vocabulary of 30,000 words, one topic of ~n/200
per paper plus a little of a second topic, 40-90 words) and vectors made from
the texts (a sum of random word vectors, rarer words weighing more), so that
embedding and TF-IDF neighbours agree about as loosely as they do for real
abstracts. The index is built by `build_index` itself, with an encoder that
looks the vectors up, so its layout, TF-IDF and FAISS choice are the real ones
(flat up to 50,000 papers, IVF above).

Each measurement runs in a fresh subprocess so that peak RSS (ru_maxrss) is its own:
  related-work   open the index, `related_work` over every paper, lists written
                 as JSON lines to a file (what `related-work --all --format jsonl
                 --out F` does): wall time and peak RSS
  flat baseline  the same batch of queries (every paper's vector) through a plain
                 FAISS IndexFlatIP search for 100 neighbours each (`like`'s dense
                 candidates, ranking.POOL), in batches of 1024: the exact dense search alone
  ratio          related-work / flat baseline
  like x n       `PaperIndex.like` on --sample random papers, time per paper x n
  = like         sampled papers whose related-work list is identical to `like`'s
                 (ids and scores); on an IVF index `like` itself is approximate

Quoted in: docs/measured-overview.md (the `related-work --all` rows, and "Batch related-work").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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
VOCABULARY = 30_000
LETTERS = np.array(list("abcdefghijklmnoprstuvwyz"))


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def synthetic_corpus(n: int, seed: int = 0):
    """(papers as dicts, unit vectors): topic-structured pseudo-word texts and vectors made from them."""
    from scipy import sparse

    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 11, VOCABULARY)
    words = np.array(["".join(rng.choice(LETTERS, size=length)) for length in lengths])
    words = np.unique(words)[: VOCABULARY]
    rng.shuffle(words)
    size = len(words)
    zipf = 1.0 / np.arange(1, size + 1) ** 1.07
    zipf /= zipf.sum()
    topics = max(20, n // 200)
    topic_words = rng.integers(500, size, (topics, 40))
    popularity = rng.pareto(1.5, topics) + 1
    topic_of = rng.choice(topics, size=n, p=popularity / popularity.sum())
    second = rng.integers(0, topics, n)
    length = rng.integers(40, 91, n)
    rows, columns, papers = [], [], []
    for i in range(n):
        general = rng.choice(size, size=int(length[i] * 0.55), p=zipf)
        own = topic_words[topic_of[i], rng.integers(0, 40, int(length[i] * 0.35))]
        other = topic_words[second[i], rng.integers(0, 40, int(length[i] * 0.10))]
        tokens = np.concatenate([general, own, other])
        rng.shuffle(tokens)
        text = " ".join(words[tokens])
        papers.append({"id": f"s{i:07d}", "title": " ".join(words[tokens[:6]]), "abstract": text + "."})
        rows.append(np.full(len(tokens), i))
        columns.append(tokens)
    counts = sparse.csr_matrix(
        (np.ones(sum(len(c) for c in columns), dtype=np.float32), (np.concatenate(rows), np.concatenate(columns))),
        shape=(n, size),
    )
    embedding = rng.standard_normal((size, DIM)).astype(np.float32) * np.log1p(np.arange(size) / 50.0)[:, None]
    vectors = np.asarray(counts @ embedding, dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return papers, vectors


class LookupEncoder:
    """Gives each whole paper text its precomputed vector (one window per paper)."""

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self.row = {text: i for i, text in enumerate(texts)}
        self.vectors = vectors
        self.name = "synthetic"
        self.dimension = vectors.shape[1]
        self.max_tokens = 1 << 30

    def token_spans(self, text: str):
        return [(0, len(text))]

    def encode(self, texts):
        return self.vectors[[self.row[text] for text in texts]]


def build(n: int, index_dir: Path, seed: int) -> dict:
    from recommender.embed import loading
    from recommender.index import build as core
    from recommender.corpus.papers import Paper

    started = time.perf_counter()
    papers, vectors = synthetic_corpus(n, seed)
    source = index_dir.parent / f"corpus-{n}.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        for paper in papers:
            handle.write(json.dumps(paper) + "\n")
    texts = [Paper(id=p["id"], title=p["title"], abstract=p["abstract"]).text for p in papers]
    encoder = LookupEncoder(texts, vectors)
    loading.load_encoder = lambda model: encoder
    core.prepare_query_encoder = lambda *args, **kwargs: None
    generated = time.perf_counter() - started
    report = core.build_index([source], index=index_dir, model="synthetic")
    return {"generate_s": generated, "build_s": report.seconds, "index": report.index_kind}


def worker_related(index_dir: Path, k: int, out: Path) -> dict:
    started = time.perf_counter()
    from recommender.query.paper_index import PaperIndex
    from recommender.reading.related import related_work
    from recommender.render.related import write_related

    recommender = PaperIndex.open(index_dir)
    with open(out, "w", encoding="utf-8") as handle:
        write_related(related_work(recommender, range(len(recommender)), k=k), handle, "jsonl")
    return {"seconds": time.perf_counter() - started, "rss": maxrss_bytes()}


def worker_baseline(index_dir: Path, k: int) -> dict:
    import faiss

    from recommender.query.ranking import POOL
    from recommender.query.paper_index import PaperIndex

    recommender = PaperIndex.open(index_dir)
    vectors = np.ascontiguousarray(recommender.vectors, dtype=np.float32)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    fetch = max(POOL, 4 * (k + 1))
    started = time.perf_counter()
    for start in range(0, len(vectors), 1024):
        index.search(vectors[start: start + 1024], fetch)
    return {"seconds": time.perf_counter() - started, "rss": maxrss_bytes()}


def worker_like(index_dir: Path, k: int, sample: int, lists: Path, seed: int) -> dict:
    from recommender.query.paper_index import PaperIndex

    recommender = PaperIndex.open(index_dir)
    rows = np.sort(np.random.default_rng(seed).choice(len(recommender), size=min(sample, len(recommender)), replace=False))
    recommender.like(recommender.ids[0], k=k)  # load the index files first
    wanted = {int(row) for row in rows}
    started = time.perf_counter()
    expected = {row: recommender.like(recommender.ids[row], k=k) for row in rows.tolist()}
    per_paper = (time.perf_counter() - started) / len(rows)
    same = 0
    with open(lists, encoding="utf-8") as handle:
        for row, line in enumerate(handle):
            if row in wanted:
                got = [(r["id"], r["score"]) for r in json.loads(line)["related"]]
                same += got == [(r.id, round(r.score, 4)) for r in expected[row]]
    return {"per_paper_s": per_paper, "like_total_s": per_paper * len(recommender), "sampled": len(rows), "same": same}


def in_subprocess(*args: str) -> dict:
    output = subprocess.run([sys.executable, __file__, "--worker", *args], check=True, capture_output=True, text=True)
    return json.loads(output.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--sample", type=int, default=200, help="papers checked against `like`")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built indexes here (reused if present)")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "build":
            result = build(int(rest[0]), Path(rest[1]), args.seed)
        elif kind == "related":
            result = worker_related(Path(rest[0]), args.k, Path(rest[1]))
        elif kind == "baseline":
            result = worker_baseline(Path(rest[0]), args.k)
        else:
            result = worker_like(Path(rest[0]), args.k, args.sample, Path(rest[1]), args.seed)
        print(json.dumps(result))
        return

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-related-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"k={args.k}, {os.cpu_count()} cores, indexes in {workdir}")
    header = (f"{'papers':>8} {'index':>5} {'related-work':>12} {'peak RSS':>9} {'flat search':>11} {'ratio':>6} "
              f"{'like x n':>9} {'speed-up':>8} {'= like':>9}")
    rows = []
    for n in args.sizes:
        index_dir = workdir / f"index-{n}"
        if not (index_dir / "CURRENT").exists():
            built = in_subprocess("build", str(n), str(index_dir))
            print(f"built {n:,} papers in {built['build_s']:.0f} s ({built['index']}; generating took "
                  f"{built['generate_s']:.0f} s)", flush=True)
        lists = workdir / f"related-{n}.jsonl"
        related = in_subprocess("related", str(index_dir), str(lists))
        baseline = in_subprocess("baseline", str(index_dir))
        like = in_subprocess("like", str(index_dir), str(lists))
        from recommender.query.paper_index import PaperIndex

        kind = PaperIndex.open(index_dir).manifest["index"]["kind"]
        rows.append(
            f"{n:>8,} {kind:>5} {related['seconds']:>10.1f} s {related['rss'] / 2**20:>6.0f} MB "
            f"{baseline['seconds']:>9.1f} s {related['seconds'] / baseline['seconds']:>5.1f}x "
            f"{like['like_total_s']:>7.0f} s {like['like_total_s'] / related['seconds']:>7.1f}x "
            f"{like['same']:>4}/{like['sampled']}"
        )
        print(header if len(rows) == 1 else "", rows[-1], sep="\n" if len(rows) == 1 else "", flush=True)
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
