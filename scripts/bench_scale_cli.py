#!/usr/bin/env python
"""The real CLI on synthetic corpora of 10k, 100k and 1M papers, as ratios to `import numpy, faiss`.

    python scripts/bench_scale_cli.py [--sizes 10000 100000 1000000] [--out /tmp/bench_scale_cli]
                                      [--runs 7] [--results results.jsonl] [--corpus topics|mixed]
                                      [--build-only] [--check-topics [--real-index DIR]] [--compare-code DIR]

Corpus: synthetic papers made of real sentences from the CSFCube dev corpus
(/work/shared/eval/csfcube-dev/corpus.jsonl, or --sentences; 2,7xx papers), IDs
`syn0000001`..., titles taken from CSFCube (so handles tie in groups, as real titles do).

* `--corpus topics` (default): papers cluster by topic, as real abstracts do. A topic is
  a CSFCube paper (its "home") and its NEIGHBOURS (7) nearest other CSFCube papers by the
  fake encoder's cosine of their abstracts. Each synthetic paper picks a home at random
  and draws 4-9 sentences, each from the topic's sentences, or with probability STRAY
  (0.15) from anywhere in CSFCube; its title is the home's title half the time, else a
  topic member's. 1M papers: ~365 per home, topics overlapping as fields do.
* `--corpus mixed`: the worst case for an IVF index, no topics at all: 4-9 sentences
  drawn from anywhere, any title (the corpus of the first 1M measurement).

`--check-topics` checks that the fake encoder's neighbourhoods follow the topics: on
20k papers of each kind, the share of 1,000 papers' exact top-10 neighbours that
belong to the paper's topic (against chance), and the recall@10 of an IVF index at a
few nprobe values. Measured: topics, 37% of the top-10 in the topic (chance 0.3%),
recall@10 0.96 at nprobe 64 of 566 lists; mixed, 0.76 at nprobe 64. With `--real-index DIR`
(an index built with the real model), the same IVF recall by share of lists probed at that
index's size, for its vectors, the fake encoder's vectors of the same papers, and topics and
mixed corpora. Measured on CSFCube's 2,734 papers (MiniLM, sentence windows; IVF209), recall@10
at 5% / 10% / 20% of the lists: MiniLM 0.93 / 0.98 / 0.99; fake, same papers 0.77 / 0.86 /
0.93; topics 0.81 / 0.90 / 0.95; mixed 0.51 / 0.69 / 0.87. Real embeddings cluster more
than the topics corpus; the mixed one is a worst case far from what this real corpus shows.

Built through `build_index` with the test suite's fake encoder (tests/fakes.py,
384 dimensions) in a fresh process; its peak RSS and the time outside the encoder
(reading, naming, TF-IDF, FAISS, writing) per paper are reported. The build keeps the
real `prepare_query_encoder`: the index gets the ONNX export of the packaged MiniLM
(384 dimensions too) as its query encoder, linked from the shared export cache, which
the benchmark points at OUT/onnx-cache (PAPERS_CACHE) so that the model is exported
once for every size. The papers are still encoded by the fake encoder, so `search`
encodes its query with the real ONNX model and searches the fake vectors: right for
timing, meaningless for relevance.

Then the real CLI in fresh processes (page cache warm, as for any second command: every file
of the index is read once first), each run alternating with the baseline `python -c "import
numpy, faiss"` so that a busy machine slows both alike: cold `like` (hybrid), `like --mode
lexical` (no FAISS: the lookup without the probed IVF lists), `show`; and cold `search`
(hybrid, a query of 8 words) alternating with its own baseline, the ONNX query encoder's
load time in a fresh process (`python -c` importing recommender.embed.onnx_encoder, loading
OnnxEncoder on the index's export and encoding one short query), reported as the difference.
The package's bytecode is cached (PYTHONDONTWRITEBYTECODE is dropped for the commands), as
an installed package's is. Peak RSS of each command is its process's ru_maxrss (getrusage
RUSAGE_CHILDREN in a wrapper). `--compare-code DIR` also times `like` with another version
of the package (DIR holds its `recommender/`, e.g. from `git archive <commit> recommender |
tar -x -C DIR`) on the same indexes, alternating: cold through the CLI, and warm through the
Python API (median of 30 `PaperIndex.like` calls in one process). Each size appends one
JSON line to --results; the table is printed at the end.

Quoted in: docs/measured-scale.md ("Lookups and builds from 10k to 1M papers": every table there) and README.md's headline figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import process_usage  # scripts/, beside this file

ROOT = Path(__file__).resolve().parent.parent
CSFCUBE = Path("/work/shared/eval/csfcube-dev/corpus.jsonl")
DIMENSION = 384
NEIGHBOURS = 7  # a topic: a CSFCube paper and its 7 nearest others
STRAY = 0.15  # share of a topical paper's sentences drawn from anywhere
KINDS = ("topics", "mixed")
TARGETS = {"like": 2.0, "show": 1.5, "like_rss_mb": 300, "search_minus_encoder_s": 0.4}
QUERY = "graph neural networks for scientific citation recommendation tasks"
CACHE = "onnx-cache"  # under --out: PAPERS_CACHE for the builds, so the model is exported once

def environment(root: Path = ROOT) -> dict:
    """PYTHONPATH to this checkout (or `root`); bytecode written and used (to a cache outside the checkout), as an
    installed package has it: without, every command would compile the package's modules anew (~30 ms)."""
    cache = "bench_scale_cli-pycache" if root == ROOT else "bench_scale_cli-pycache-" + hashlib.sha1(str(root).encode()).hexdigest()[:8]
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=str(Path(tempfile.gettempdir()) / cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(command: list[str], root: Path = ROOT) -> dict:
    return process_usage.measure(command, environment(root))


# ---------------------------------------------------------------- corpus


def read_source(path: Path) -> list[tuple[str, list[str]]]:
    """CSFCube papers as (title, sentences of the abstract longer than 20 characters)."""
    papers = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", record.get("abstract") or "") if len(s.strip()) > 20]
            if sentences and record.get("title"):
                papers.append((record["title"], sentences))
    return papers


def fake_vectors(texts: list[str]) -> np.ndarray:
    """The benchmark's encoder (the test suite's fake, 384-d, first 256 words; no windows)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fakes import FakeEncoder

    return FakeEncoder(dimension=DIMENSION, max_tokens=256).encode(texts)


def neighbourhoods(source: list[tuple[str, list[str]]]) -> list[list[int]]:
    """Each CSFCube paper with its NEIGHBOURS nearest others, by the fake encoder's cosine of the abstracts."""
    vectors = fake_vectors([title + ". " + " ".join(sentences) for title, sentences in source])
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, np.inf)  # itself first
    nearest = np.argsort(-similarity, axis=1, kind="stable")[:, : NEIGHBOURS + 1]
    return nearest.tolist()


def corpus_records(count: int, source: list[tuple[str, list[str]]], kind: str):
    """(record, topic) for `count` synthetic papers; topic is the home CSFCube paper (None for mixed)."""
    generator = random.Random(count)
    everything = [sentence for _, sentences in source for sentence in sentences]
    titles = [title for title, _ in source]
    if kind == "mixed":
        for number in range(count):
            abstract = " ".join(generator.choices(everything, k=generator.randint(4, 9)))
            yield {"id": f"syn{number:07d}", "title": generator.choice(titles), "abstract": abstract}, None
        return
    near = neighbourhoods(source)
    pools = [[sentence for member in members for sentence in source[member][1]] for members in near]
    for number in range(count):
        home = generator.randrange(len(source))
        members, pool = near[home], pools[home]
        sentences = [
            generator.choice(everything) if generator.random() < STRAY else generator.choice(pool)
            for _ in range(generator.randint(4, 9))
        ]
        title = titles[members[0] if generator.random() < 0.5 else generator.choice(members)]
        yield {"id": f"syn{number:07d}", "title": title, "abstract": " ".join(sentences)}, home


def write_corpus(path: Path, count: int, source_path: Path, kind: str) -> None:
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        for record, _ in corpus_records(count, read_source(source_path), kind):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(temporary, path)


def check_topics(source_path: Path, count: int = 20_000, queries: int = 1000, k: int = 10) -> None:
    """Do the fake encoder's neighbourhoods follow the topics? For `queries` papers of a
    `count`-paper corpus of each kind: the share of their exact top-k neighbours (cosine of
    the fake vectors) whose home CSFCube paper is the query's home or one of its
    NEIGHBOURS neighbours, against the share by chance; and the recall@10 of an IVF index
    with 4*sqrt(count) lists at a few nprobe values, as the build tunes it."""
    source = read_source(source_path)
    near = neighbourhoods(source)
    for kind in ("topics", "mixed"):
        records = list(corpus_records(count, source, kind))
        vectors = fake_vectors([r["title"] + ". " + r["abstract"] for r, _ in records])
        rng = np.random.default_rng(0)
        rows = rng.choice(count, size=queries, replace=False)
        scores = vectors[rows] @ vectors.T
        scores[np.arange(queries), rows] = -np.inf
        top = np.argsort(-scores, axis=1)[:, :k]
        line = f"{kind}: {count:,} papers"
        if kind == "topics":
            homes = np.array([topic for _, topic in records])
            same = np.mean([np.isin(homes[top[i]], near[homes[row]]).mean() for i, row in enumerate(rows)])
            chance = (NEIGHBOURS + 1) / len(source)
            line += f"; top-{k} neighbours in the query's topic neighbourhood: {same:.0%} (chance {chance:.1%})"
        nlist, recalls = ivf_recalls(vectors, rows, top, lambda lists: (4, 16, 64, 256))
        recalls = [f"nprobe {nprobe}: {recall:.2f}" for nprobe, recall in recalls]
        print(f"{line}; IVF{nlist} recall@{k}: " + ", ".join(recalls), flush=True)


SHARES = (0.02, 0.05, 0.1, 0.2, 0.4)  # of the IVF lists probed


def ivf_recalls(vectors: np.ndarray, rows: np.ndarray, top: np.ndarray, probes) -> tuple[int, list]:
    """(nlist, [(nprobe, recall@k)]) of an IVF index of `vectors` with 4*sqrt(n) lists (as the build
    makes it): each query row's neighbours (itself left out) against its exact top-k `top`, for each
    nprobe of `probes(nlist)`."""
    import faiss

    k = top.shape[1]
    nlist = int(round(4 * math.sqrt(len(vectors))))
    index = faiss.index_factory(vectors.shape[1], f"IVF{nlist},Flat", faiss.METRIC_INNER_PRODUCT)
    index.cp.seed, index.cp.spherical, index.cp.niter = 0, True, 10
    index.train(vectors)
    index.add(vectors)
    recalls = []
    for nprobe in probes(nlist):
        index.nprobe = nprobe
        _, got = index.search(vectors[rows], k + 1)
        hits = sum(len(np.intersect1d(got[i][got[i] != row][:k], top[i])) for i, row in enumerate(rows))
        recalls.append((nprobe, hits / top.size))
    return nlist, recalls


def recall_by_share(vectors: np.ndarray, queries: int = 500, k: int = 10) -> str:
    """Recall@k of an IVF index with 4*sqrt(n) lists against exact search, for `queries` of the
    vectors, probing each share of SHARES of the lists."""
    vectors = np.ascontiguousarray(vectors / np.linalg.norm(vectors, axis=1, keepdims=True), dtype=np.float32)
    rows = np.random.default_rng(0).choice(len(vectors), size=min(queries, len(vectors)), replace=False)
    scores = vectors[rows] @ vectors.T
    scores[np.arange(len(rows)), rows] = -np.inf
    top = np.argsort(-scores, axis=1)[:, :k]
    nlist, recalls = ivf_recalls(vectors, rows, top, lambda lists: [max(1, int(round(share * lists))) for share in SHARES])
    shown = ", ".join(f"{share:.0%} {recall:.2f}" for share, (_, recall) in zip(SHARES, recalls))
    return f"IVF{nlist} recall@{k} by share of lists probed: {shown}"


def check_real(index_dir: Path, source_path: Path) -> None:
    """How the real model's neighbourhoods compare with the synthetic corpora's, at the size of an
    index built with it (e.g. `papers evaluate`'s CSFCube index): the recall an IVF index reaches
    by share of lists probed, for the index's own vectors, the fake encoder's vectors of the same
    papers, and topics and mixed corpora of the same size."""
    from recommender import PaperIndex

    with PaperIndex.open(str(index_dir)) as index:
        real = np.array(index.vectors, dtype=np.float32)
        texts = [paper.title + ". " + paper.abstract for paper in index.papers()]
        model = index.manifest.get("model")
    source = read_source(source_path)
    count = len(texts)
    kinds = {f"the index's own vectors ({model})": real, "the fake encoder, same papers": fake_vectors(texts)}
    for kind in KINDS:
        records = [record for record, _ in corpus_records(count, source, kind)]
        kinds[f"the fake encoder, {kind} corpus"] = fake_vectors([r["title"] + ". " + r["abstract"] for r in records])
    for name, vectors in kinds.items():
        print(f"{count:,} papers, {name}: {recall_by_share(vectors)}", flush=True)


# ---------------------------------------------------------------- build (in a fresh process)


def build_child(corpus: str, index: str, report: str) -> None:
    """Build with the fake encoder; write timings and peak RSS to `report`."""
    import resource

    sys.path.insert(0, str(ROOT / "tests"))
    from fakes import FakeEncoder

    from recommender.embed import loading
    from recommender.embed.sentence_transformer import DEFAULT_MODEL
    from recommender.index import build

    encoder = FakeEncoder(name="fake-384", dimension=DIMENSION, max_tokens=256)
    # Wall seconds and CPU seconds (of this process, all threads): CPU time per paper is what
    # a busy shared machine does not distort.
    timers = {"encode_s": 0.0, "read_s": 0.0, "encode_cpu_s": 0.0, "read_cpu_s": 0.0}

    def timed(name, function):
        def wrapper(*args, **kwargs):
            started, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                timers[name] += time.perf_counter() - started
                timers[name.replace("_s", "_cpu_s")] += time.process_time() - cpu
        return wrapper

    encoder.encode = timed("encode_s", encoder.encode)
    encoder.token_spans = timed("encode_s", encoder.token_spans)
    encoder.encoded_texts = _Discard()  # the fake keeps every text otherwise
    loading.load_encoder = lambda model: encoder
    # The papers are encoded by the fake, even though the index has an ONNX export (a build uses it otherwise).
    loading.encoder_spec = lambda model, onnx_folder=None, device="auto", threads=None, exported_only=False: (
        lambda: encoder)
    # The real export step, of the real model (same dimension), linked from PAPERS_CACHE: `search` then
    # encodes its query with the real ONNX model.
    prepare = build.prepare_query_encoder
    build.prepare_query_encoder = lambda model, writer, previous, on_phase=None, *precision: prepare(
        DEFAULT_MODEL, writer, previous, on_phase, *precision)  # code before precisions passes none
    if hasattr(build, "read_papers"):  # code before the streaming build (--compare-code, bench_build_memory.py --code)
        build.read_papers = timed("read_s", build.read_papers)
    else:  # the papers are read into the build's spool
        build.PaperSpool.read = timed("read_s", build.PaperSpool.read)
    started, cpu = time.perf_counter(), time.process_time()
    result = build.build_index([corpus], index=index, model="fake-384")
    total, total_cpu = time.perf_counter() - started, time.process_time() - cpu
    Path(report).write_text(json.dumps({
        "papers": result.papers, "build_s": total, "build_cpu_s": total_cpu, **timers,
        "build_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "index_kind": result.index_kind,
    }))


class _Discard(list):
    def extend(self, items) -> None:
        pass


# ---------------------------------------------------------------- one size


WARM_CALLS = 30


def warm_child(index: str) -> None:
    """Median milliseconds of WARM_CALLS `PaperIndex.like` calls in one process (the Python API, warm)."""
    from recommender import PaperIndex

    with PaperIndex.open(index) as recommender:
        count, times = len(recommender), []
        for call in range(WARM_CALLS):
            started = time.perf_counter()
            recommender.like(f"syn{(call * 7919) % count:07d}")
            times.append(time.perf_counter() - started)
    print(json.dumps({"warm_like_ms": 1000 * statistics.median(times)}))


def warm_like(index: Path, root: Path) -> float:
    out = subprocess.run([sys.executable, __file__, "--warm-child", str(index)], capture_output=True, text=True,
                         env=environment(root))
    if out.returncode:
        raise SystemExit(f"warm like failed with {root}:\n{out.stderr}")
    return json.loads(out.stdout)["warm_like_ms"]


def read_through(index: Path) -> None:
    """Every file of the index read once, so that each timed command finds what it reads in the page
    cache: else the first command to touch a seed's postings reads them from disk, and whichever
    command runs first in a round (this code's `like`, before --compare-code's) is the slower."""
    for path in sorted(index.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                while handle.read(1 << 24):
                    pass


def run_size(size: int, out: Path, runs: int, source: Path, kind: str, build_only: bool = False,
             other: Path | None = None) -> dict | None:
    out.mkdir(parents=True, exist_ok=True)
    name = f"{kind}-{size}"
    corpus, index, report = out / f"corpus-{name}.jsonl", out / f"index-{name}", out / f"build-{name}.json"
    if not corpus.exists():
        print(f"[{size}] writing the {kind} corpus", flush=True)
        write_corpus(corpus, size, source, kind)
    if not report.exists():
        print(f"[{size}] building", flush=True)
        measure([sys.executable, __file__, "--build-child", str(corpus), str(index), str(report)])
    built = json.loads(report.read_text())
    if build_only:
        print(f"[{size}] built: " + json.dumps(built), flush=True)
        return None
    manifest_path = next(index.glob("v-*/manifest.json"))
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("query_encoder") != "onnx":
        raise SystemExit(f"{index} has no ONNX query encoder (built by an older version of this script): "
                         f"remove it and {report}, or use another --out")
    python = sys.executable
    cli = [python, "-m", "recommender"]
    export = manifest_path.parent / "query-encoder"  # layout.QUERY_ENCODER
    # The ONNX query encoder's own cost in a fresh process: imports, loading the export, one short query.
    encoder_baseline = [python, "-c", "import sys; from recommender.embed.onnx_encoder import OnnxEncoder; "
                        "OnnxEncoder(sys.argv[1], name='minilm').encode(['citation recommendation'])", str(export)]
    search = cli + ["search", QUERY, "--index", str(index)]
    baseline = [python, "-c", "import numpy, faiss"]
    generator = random.Random(1)
    seeds = [f"syn{generator.randrange(size):07d}" for _ in range(runs + 1)]
    read_through(index)
    for command in (baseline, cli + ["like", seeds[-1], "--index", str(index)], cli + ["show", seeds[-1], "--index", str(index)],
                    encoder_baseline, search):
        measure(command)  # the interpreters' own files too
    if other is not None:
        measure(cli + ["like", seeds[-1], "--index", str(index)], other)
    times: dict[str, list] = {"baseline": [], "like": [], "like_lexical": [], "show": [], "encoder_baseline": [],
                              "search": []}
    if other is not None:
        times["like_other_code"] = []
    rss: dict[str, list] = {name: [] for name in times}
    print(f"[{size}] timing {runs} runs", flush=True)
    for run in range(runs):
        for name, command in (
            ("baseline", baseline),
            ("like", cli + ["like", seeds[run], "--index", str(index)]),
            # Without FAISS: what the lookup costs beyond the probed IVF lists.
            ("like_lexical", cli + ["like", seeds[run], "--mode", "lexical", "--index", str(index)]),
            ("show", cli + ["show", seeds[run], "--index", str(index)]),
            # `search` against the ONNX query encoder's own load time, alternating.
            ("encoder_baseline", encoder_baseline),
            ("search", search),
            # The same `like` with another version of the package (--compare-code), alternating.
            *([("like_other_code", cli + ["like", seeds[run], "--index", str(index)])] if other is not None else []),
        ):
            result = measure(command, other if name == "like_other_code" else ROOT)
            times[name].append(result["wall"])
            rss[name].append(result["rss_kb"] / 1024)
    base = statistics.median(times["baseline"])
    row = {
        "papers": size,
        "corpus": kind,
        "baseline_s": base,
        "like_s": statistics.median(times["like"]),
        "like_ratio": statistics.median(times["like"]) / base,
        "like_rss_mb": max(rss["like"]),
        "like_lexical_s": statistics.median(times["like_lexical"]),
        "like_lexical_ratio": statistics.median(times["like_lexical"]) / base,
        "like_lexical_rss_mb": max(rss["like_lexical"]),
        "show_s": statistics.median(times["show"]),
        "show_ratio": statistics.median(times["show"]) / base,
        "show_rss_mb": max(rss["show"]),
        "baseline_rss_mb": max(rss["baseline"]),
        "search_query": QUERY,
        "encoder_baseline_s": statistics.median(times["encoder_baseline"]),
        "encoder_baseline_rss_mb": max(rss["encoder_baseline"]),
        "search_s": statistics.median(times["search"]),
        "search_minus_encoder_s": statistics.median(times["search"]) - statistics.median(times["encoder_baseline"]),
        # The per-run differences (each search against the baseline run just before it), for their spread.
        "search_minus_encoder_runs_s": [s - b for s, b in zip(times["search"], times["encoder_baseline"])],
        "search_rss_mb": max(rss["search"]),
        "build_s": built["build_s"],
        "build_encode_s": built["encode_s"],
        "build_read_s": built["read_s"],
        "build_us_per_paper_without_encoding": 1e6 * (built["build_s"] - built["encode_s"]) / size,
        "build_cpu_s": built["build_cpu_s"],
        "build_encode_cpu_s": built["encode_cpu_s"],
        "build_read_cpu_s": built["read_cpu_s"],
        "build_cpu_us_per_paper_without_encoding": 1e6 * (built["build_cpu_s"] - built["encode_cpu_s"]) / size,
        "build_read_cpu_us_per_paper": 1e6 * built["read_cpu_s"] / size,
        "build_rss_mb": built["build_rss_mb"],
        "index_kind": built["index_kind"],
        "faiss": manifest["index"]["description"],
        "index_mb": sum(p.stat().st_size for p in index.rglob("*") if p.is_file() and p.name != "cache.sqlite") / 2**20,
        "runs": runs,
    }
    if other is not None:
        row.update({
            "other_code": str(other),
            "like_other_code_ratio": statistics.median(times["like_other_code"]) / base,
            "like_other_code_rss_mb": max(rss["like_other_code"]),
        })
        # Warm lookups through the Python API, alternating the two versions (medians of WARM_CALLS calls).
        warm = {"this": [], "other": []}
        for _ in range(2):
            warm["other"].append(warm_like(index, other))
            warm["this"].append(warm_like(index, ROOT))
        row.update({"warm_like_ms": min(warm["this"]), "warm_like_other_code_ms": min(warm["other"])})
    return row


def probes(description: str) -> str:
    """"nprobe 192 of 4,000 lists" from the manifest's description of the FAISS index; "all (flat)" for exact search."""
    found = re.search(r"nlist=([\d,]+), nprobe=([\d,]+)", description)
    return f"{found.group(2)} of {found.group(1)} lists" if found else "all (flat)"


def table(rows: list[dict]) -> str:
    lines = [
        "| papers (corpus) | FAISS probes | baseline | cold `like` (ratio, peak RSS) | `like --mode lexical` (ratio, peak RSS) "
        "| `show` (ratio) | ONNX encoder alone | cold `search` (minus encoder alone, peak RSS) "
        "| build CPU µs/paper, encoding excl. | of which reading + naming | build wall s | build peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['papers']:,} ({r.get('corpus', 'mixed')}) | {probes(r['faiss'])} | {r['baseline_s']:.2f} s "
            f"| {r['like_s']:.2f} s ({r['like_ratio']:.2f}x, {r['like_rss_mb']:.0f} MB) "
            f"| {r['like_lexical_s']:.2f} s ({r['like_lexical_ratio']:.2f}x, {r['like_lexical_rss_mb']:.0f} MB) "
            f"| {r['show_s']:.2f} s ({r['show_ratio']:.2f}x) "
            + (f"| {r['encoder_baseline_s']:.2f} s | {r['search_s']:.2f} s ({r['search_minus_encoder_s']:+.2f} s, "
               f"{r['search_rss_mb']:.0f} MB) " if "search_s" in r else "| | not measured ")
            + f"| {r['build_cpu_us_per_paper_without_encoding']:.0f} | {r['build_read_cpu_us_per_paper']:.0f} "
            f"| {r['build_s']:.0f} | {r['build_rss_mb'] / 1024:.1f} GB |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--build-child":
        build_child(*sys.argv[2:])
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--warm-child":
        warm_child(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_scale_cli"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sentences", type=Path, default=CSFCUBE)
    parser.add_argument("--results", type=Path, default=None, help="JSON lines file (default OUT/results.jsonl)")
    parser.add_argument("--corpus", choices=KINDS, default="topics",
                        help="topics: papers clustered by topic, as real ones are (default); mixed: no topics (worst case)")
    parser.add_argument("--check-topics", action="store_true",
                        help="only check that the fake encoder's neighbourhoods follow the topics, then stop")
    parser.add_argument("--real-index", type=Path, metavar="DIR",
                        help="with --check-topics: also compare an index built with the real model (its vectors) "
                             "with the synthetic corpora at its size")
    parser.add_argument("--build-only", action="store_true", help="write the corpora and build, without timing the CLI")
    parser.add_argument("--compare-code", type=Path, metavar="DIR",
                        help="also time `like` (cold, and warm through the API) with the package in DIR, e.g. "
                             "`git archive <commit> recommender | tar -x -C DIR`")
    parser.add_argument("--table", type=Path, help="only print the table of a results file (JSON lines), then stop")
    args = parser.parse_args()
    if args.check_topics:
        check_topics(args.sentences)
        if args.real_index:
            check_real(args.real_index, args.sentences)
        return
    if args.table:
        print(table([json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]))
        return
    # The builds link the model's ONNX export from this cache: exported once, by the first build.
    os.environ["PAPERS_CACHE"] = str(args.out / CACHE)
    # Exported here, in its own process, so that no build's time or memory includes the export.
    export = subprocess.run([sys.executable, "-c", "from recommender.embed.export_cache import shared_export; "
                             "from recommender.embed.sentence_transformer import DEFAULT_MODEL; shared_export(DEFAULT_MODEL)"],
                            capture_output=True, text=True, env=environment())
    if export.returncode:
        raise SystemExit(f"exporting the model to ONNX failed:\n{export.stderr}")
    results = args.results or args.out / "results.jsonl"
    rows = []
    for size in args.sizes:
        row = run_size(size, args.out, args.runs, args.sentences, args.corpus, args.build_only, args.compare_code)
        if row is None:
            continue
        rows.append(row)
        args.out.mkdir(parents=True, exist_ok=True)
        with open(results, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    print(f"baseline: `python -c \"import numpy, faiss\"` in the same run; targets: like <= {TARGETS['like']}x, "
          f"show <= {TARGETS['show']}x, like peak RSS <= {TARGETS['like_rss_mb']} MB; cold search within "
          f"{TARGETS['search_minus_encoder_s']} s of the ONNX encoder alone (`python -c` loading it and encoding one query)")
    print(table(rows))
    compared = [r for r in rows if "other_code" in r]
    if compared:
        print(f"\n`like` with {compared[0]['other_code']} against this checkout, same indexes, same run:\n")
        print("| papers (corpus) | cold, other code | cold, this code | warm API call, other code | warm, this code |")
        print("|---|---|---|---|---|")
        for r in compared:
            print(f"| {r['papers']:,} ({r['corpus']}) | {r['like_other_code_ratio']:.2f}x, {r['like_other_code_rss_mb']:.0f} MB "
                  f"| {r['like_ratio']:.2f}x, {r['like_rss_mb']:.0f} MB | {r['warm_like_other_code_ms']:.1f} ms | {r['warm_like_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
