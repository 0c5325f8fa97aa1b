"""What reasons (phrases, the closest pair of sentences) cost a page of ten results, against the
same lookup without them in the same run; and what sentence vectors kept at build time would cost.

    python scripts/bench_reasons.py INDEX [--repeats 5] [--tag-seeds 5] [--build-sample 200]

The lookups: `like` of one paper (`papers like --why`), a tag of several papers (the tag page) and
`explain` of each of the ten results against the seed (the inspect page, one paper a page: ten
pages). "Without reasons" is the same call with `with_reasons` left out, so the difference is the
reasons alone. Cold: the first call of a fresh process (the encoder loaded by it), as a CLI command
or a server's first page meets it; warm: the median of the next `--repeats` calls, each of another
seed and another tag (no sentence encoded before). Each lookup is first in a process of its own
for its cold figure; the warm ones run after the others of their repeat. Every figure is
a ratio or a difference against its baseline of the same run; nothing here is a test.

The build-time alternative: for `--build-sample` papers, the sentences a pair may show
(`reasons.sentences_of`), the time to encode them against the time to encode the papers as a build
does, and their size as float32 vectors against the papers' own vectors.

Quoted in: docs/measured-ranking.md ("Reasons": what they cost a page of ten).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, {root!r})
from recommender import PaperIndex
from recommender.query import lookups
from recommender.reading.tags import TagStore, recommend_for_tags

index_dir, repeats, seeds, with_reasons, first = {index!r}, {repeats}, {seeds}, {reasons}, {first!r}
if not with_reasons:
    lookups.IndexLookups.with_reasons = lambda self, results, seeds: list(results)
times = {{"like": [], "tag": [], "inspect": []}}
with PaperIndex.open(index_dir) as index:
    store = TagStore(index.stored.index_dir)
    for repeat in range(repeats + 1):  # a new seed and a new tag each time: nothing encoded before
        papers = index.papers_at(
            [(repeat * (seeds + 1) + i) % len(index) for i in range(seeds + 1)]
        )
        seed, tagged = papers[0], papers[1:]
        tag = f"bench-reasons-{{repeat}}"
        for paper in tagged:
            store.add(tag, paper.id)
        results = index.like(seed.id, k=10)  # the inspect pages' papers (not timed)

        def like():
            index.like(seed.id, k=10, why=True)

        def tag_page():
            recommend_for_tags(index, store, [tag], k=10, why=True)

        def inspect():
            for result in results:
                index.explain(result.id, seed=seed.id)

        lookups_in_order = {{"like": like, "tag": tag_page, "inspect": inspect}}
        for name in [first] + [name for name in lookups_in_order if name != first]:
            started, cpu = time.perf_counter(), time.process_time()
            lookups_in_order[name]()
            times[name].append((time.perf_counter() - started, time.process_time() - cpu))
        for paper in tagged:
            store.remove(tag, paper.id)
print(json.dumps(times))
"""


def run_child(index: Path, repeats: int, seeds: int, reasons: bool, first: str) -> dict:
    code = CHILD.format(root=str(ROOT), index=str(index), repeats=repeats, seeds=seeds,
                        reasons=reasons, first=first)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.splitlines()[-1])


def build_cost(index: Path, sample: int) -> None:
    import numpy as np

    from recommender import PaperIndex
    from recommender.query.reasons import reason_text, sentences_of

    with PaperIndex.open(index) as opened:
        papers = opened.papers_at(range(min(sample, len(opened))))
        opened.encode_sentences(["warm up the encoder"])
        started = time.perf_counter()
        for paper in papers:
            opened.encode_query(paper.text, paper.head)
        papers_time = time.perf_counter() - started
        sentences = [s for paper in papers for s in sentences_of(reason_text(paper))]
        started = time.perf_counter()
        for start in range(0, len(sentences), 64):
            opened.encode_sentences(sentences[start : start + 64])
        sentences_time = time.perf_counter() - started
        dimension = opened.manifest["dimension"]
        vectors = np.dtype(np.float32).itemsize * dimension
    print(f"\nbuild-time alternative, {len(papers)} papers: {len(sentences)} sentences "
          f"({len(sentences) / len(papers):.1f} a paper)")
    print(f"  encoding the papers as a build does: {papers_time:.2f} s; their sentences: "
          f"{sentences_time:.2f} s ({sentences_time / papers_time:.2f}x)")
    per_paper = len(sentences) / len(papers) * vectors / 1024
    print(f"  size as float32: {per_paper:.1f} KB a paper against "
          f"{vectors / 1024:.1f} KB of its own vector "
          f"({len(sentences) / len(papers):.1f}x the vectors)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tag-seeds", type=int, default=5)
    parser.add_argument("--build-sample", type=int, default=200)
    args = parser.parse_args()
    names = {"like": "`papers like --why`", "tag": "tag page", "inspect": "inspect pages, ten"}
    rows = []
    for name, label in names.items():
        without = run_child(args.index, args.repeats, args.tag_seeds, False, name)
        with_ = run_child(args.index, args.repeats, args.tag_seeds, True, name)
        for phase, pick in (("cold", lambda t: t[0]),
                            ("warm", lambda t: [statistics.median(x) for x in zip(*t[1:])])):
            rows.append((f"{label}, {phase}", pick(without[name]), pick(with_[name])))
    print("| lookup (a page of ten) | without reasons, s | with, s | difference, s | ratio "
          "| difference in CPU time, s |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, (base, base_cpu), (reasoned, reasoned_cpu) in rows:
        print(f"| {label} | {base:.3f} | {reasoned:.3f} | {reasoned - base:+.3f} | "
              f"{reasoned / base:.2f}x | {reasoned_cpu - base_cpu:+.3f} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    build_cost(args.index, args.build_sample)


if __name__ == "__main__":
    main()
