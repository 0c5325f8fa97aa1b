"""Choose the hybrid ranking's settings by repeated 2-fold cross-validation on a test collection.

    python scripts/tune_relevance.py [--data ../shared/eval/csfcube-dev] [--index-root DIR] [--repeats 50]
        [--model NAME] [--precision P] [--compare WEIGHT/POOL,...]

Builds (or reuses) two indexes of the collection with `papers evaluate`'s own
code, "sentences" chunking (windows that start with the title and end at
sentence ends, the default) and "windows" (plain token windows, the previous
default); the first build of each encodes every paper: minutes. Then:

* each ranker's MAP / NDCG%20 on all the queries (x100), every query ranked
  over its judged pool as `papers evaluate` ranks it (`evaluate.rank_rows`);
* repeated 2-fold cross-validation over the query papers (a paper's queries,
  one per facet, stay on one side): in each fold the setting (chunking, dense
  weight, pool size) with the best MAP + NDCG%20 on one half is measured on the
  other half. The held-out figures' mean and spread are what to expect on new
  queries; the setting chosen most often is what ships;
* the same cross-validation for the previous default's family (plain windows,
  a fixed convex mix of the two cosines), for a like-for-like comparison;
* a per-query bootstrap 95% interval of the shipped setting's figures.

With `--compare WEIGHT/POOL,...` (e.g. `--compare 0.7/200,0.7/50`) it prints instead a paired
comparison on sentence windows: each given setting against the shipped one (the index's own dense
weight, the shared POOL), on all the queries and on the held-out half of the same folds, as
differences with their spread over folds; and the setting the cross-validation above chooses most
often, for reference.

Quoted in: docs/ranking.md (every figure of "How the settings were chosen"), README.md's headline
figures, docs/models.md (the quality tier's fusion weight and its int8 comparison) and
docs/performance.md (the quality tier at int8-static).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from recommender.embed.quantisation import PRECISIONS
from recommender.embed.windows import Chunking
from recommender.evaluation import metrics
from recommender.evaluation.evaluate import evaluate, rank_rows
from recommender.query import paper_index as ranker
from recommender.query import pooling
from recommender.query.ranking import POOL, select

CHUNKINGS = ("sentences", "windows")
WEIGHTS = (0.5, 0.55, 0.6, 2 / 3, 0.7, 0.75, 0.8)  # of the window cosine; the rest to TF-IDF
POOLS = (50, 100, 200)  # candidates from each side the per-query normalisation is measured over
CONVEX_WEIGHTS = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)  # the previous default's family: w x dense + (1-w) x TF-IDF


class Collection:
    """The collection and its indexes; every setting's per-query figures, computed once."""

    def __init__(self, data: Path, root: Path, model: str | None = None, precision: str | None = None):
        self.files = (data / "corpus.jsonl", data / "queries.tsv", data / "qrels.txt")
        self.root = root
        self.model, self.precision = model, precision  # None: the defaults
        self.opened: dict = {}
        self.queries = metrics.read_queries(self.files[1])
        self.qrels = metrics.read_qrels(self.files[2])

    def open(self, chunking: str):
        """Build (or reuse) the index with `papers evaluate`'s own code, then keep it open."""
        if chunking not in self.opened:
            started = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # duplicate papers kept once: reported by `papers evaluate`
                evaluation = evaluate(*self.files, index=self.root / f"eval-{chunking}", model=self.model,
                                      precision=self.precision, chunking=Chunking(strategy=chunking), mode="lexical")
            if evaluation.build is not None:
                print(f"# built the {chunking} index in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            self.opened[chunking] = ranker.PaperIndex.open(self.root / f"eval-{chunking}")
        return self.opened[chunking]

    def run(self, chunking: str, mode: str = "hybrid", weight: float | None = None, pool: int = POOL) -> np.ndarray:
        """[queries, 2]: MAP and NDCG%20 (x100) of each query, ranked as `papers evaluate` ranks it."""
        recommender = self.open(chunking)
        pooling.POOL = pool  # the pool `score_rows` normalises each query's scores over
        try:
            return self._figures(recommender, lambda query_row, rows: rank_rows(recommender, query_row, rows, mode, weight))
        finally:
            pooling.POOL = POOL

    def convex(self, weight: float) -> np.ndarray:
        """The previous default: plain windows, weight x window cosine + (1 - weight) x TF-IDF cosine."""
        recommender = self.open("windows")

        def ranked(query_row, rows):
            rows = np.asarray(sorted(rows), dtype=np.int64)
            dense = recommender.score_rows(query_row, rows, "dense").astype(np.float64)
            lexical = recommender.score_rows(query_row, rows, "lexical").astype(np.float64)
            scores = (weight * dense + (1 - weight) * lexical).astype(np.float32)
            return select(rows, scores, recommender.tiebreak, recommender.vectors, len(rows))[0].tolist()

        return self._figures(recommender, ranked)

    def _figures(self, recommender, ranked) -> np.ndarray:
        rows = {paper_id: row for row, paper_id in enumerate(recommender.ids)}
        out = []
        for query_id, paper_id, _ in self.queries:
            judged = self.qrels[query_id]
            order = ranked(rows[paper_id], [rows[doc] for doc in judged if doc in rows])
            scores = metrics.score_query([recommender.ids[row] for row in order], judged, query_id=query_id)
            out.append([100 * scores.map, 100 * scores.ndcg_pct_20])
        return np.array(out)

    def papers(self) -> list[str]:
        return [paper_id for _, paper_id, _ in self.queries]

    def close(self) -> None:
        for opened in self.opened.values():
            opened.close()


def fmt(cells: np.ndarray) -> str:
    return f"{cells[0]:5.1f} / {cells[1]:5.1f}"


def folds(papers: list[str], repeats: int, seed: int = 0):
    """Repeated 2-fold splits of the query papers: (train papers, test papers) pairs."""
    rng = np.random.default_rng(seed)
    unique = sorted(set(papers))
    for _ in range(repeats):
        order = rng.permutation(len(unique))
        half = {unique[i] for i in order[: len(unique) // 2]}
        yield half, set(unique) - half
        yield set(unique) - half, half


def cross_validate(scores: np.ndarray, papers: list[str], repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """scores [settings, queries, 2] -> (held-out [folds, 2], chosen setting per fold)."""
    held, chosen = [], []
    for train, _ in folds(papers, repeats):
        mask = np.array([paper in train for paper in papers])
        best = int(np.argmax(scores[:, mask].mean(axis=1).sum(axis=1)))
        chosen.append(best)
        held.append(scores[best, ~mask].mean(axis=0))
    return np.array(held), np.array(chosen)


def bootstrap(scores: np.ndarray, draws: int = 2000, seed: int = 0) -> np.ndarray:
    """[2, 2]: the 2.5% and 97.5% points of the mean over queries resampled with replacement."""
    rng = np.random.default_rng(seed)
    means = np.array([scores[rng.integers(0, len(scores), len(scores))].mean(axis=0) for _ in range(draws)])
    return np.percentile(means, [2.5, 97.5], axis=0)


def report(collection: Collection, repeats: int) -> None:
    papers = collection.papers()
    shipped_name = (f"shipped: sentence windows, z-fusion, dense weight "
                    f"{collection.open('sentences').dense_weight:.2f}, pool {POOL}")
    rows = {
        "dense, plain windows (previous)": collection.run("windows", "dense"),
        "dense, title-prefixed sentence windows": collection.run("sentences", "dense"),
        "lexical (TF-IDF)": collection.run("sentences", "lexical"),
        "previous default: plain windows, 0.55 x dense + 0.45 x TF-IDF": collection.convex(0.55),
        "z-fusion, plain windows, shipped weight and pool": collection.run("windows"),
        shipped_name: collection.run("sentences"),  # the index's own weight (its model's)
    }
    print(f"ranker (judged pool, {len(papers)} queries)                              MAP / NDCG%20")
    for name, figures in rows.items():
        print(f"  {name:70} {fmt(figures.mean(axis=0))}")

    settings = list(itertools.product(CHUNKINGS, WEIGHTS, POOLS))
    started = time.perf_counter()
    scores = np.stack([collection.run(chunking, "hybrid", weight, pool) for chunking, weight, pool in settings])
    print(f"# {len(settings)} settings evaluated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    held, chosen = cross_validate(scores, papers, repeats)
    print(f"\nz-fusion: repeated 2-fold CV over {len(set(papers))} query papers ({2 * repeats} folds), "
          "setting chosen on one half, measured on the other:")
    print(f"  held-out MAP {held[:, 0].mean():.1f} (sd {held[:, 0].std():.1f}), "
          f"NDCG%20 {held[:, 1].mean():.1f} (sd {held[:, 1].std():.1f})")
    counts = np.bincount(chosen, minlength=len(settings))
    for index in np.argsort(-counts, kind="stable")[:5]:
        if counts[index]:
            chunking, weight, pool = settings[index]
            print(f"  chosen {counts[index]:3d}x: {chunking:9} dense weight {weight:.2f} pool {pool:3d}   "
                  f"(all queries {fmt(scores[index].mean(axis=0))})")

    convex = np.stack([collection.convex(weight) for weight in CONVEX_WEIGHTS])
    held_convex, chosen_convex = cross_validate(convex, papers, repeats)
    print("\nprevious default's family (plain windows, convex mix), the same folds:")
    print(f"  held-out MAP {held_convex[:, 0].mean():.1f} (sd {held_convex[:, 0].std():.1f}), "
          f"NDCG%20 {held_convex[:, 1].mean():.1f} (sd {held_convex[:, 1].std():.1f}); "
          f"weights chosen {sorted(set(CONVEX_WEIGHTS[i] for i in chosen_convex))}")
    gain = held - held_convex
    print(f"  z-fusion minus previous, fold by fold: MAP {gain[:, 0].mean():+.1f} (sd {gain[:, 0].std():.1f}, "
          f"better in {int((gain[:, 0] > 0).sum())} of {len(gain)} folds), NDCG%20 {gain[:, 1].mean():+.1f} "
          f"(sd {gain[:, 1].std():.1f})")

    shipped = rows[shipped_name]
    low, high = bootstrap(shipped)
    print(f"\nshipped, bootstrap 95% over queries: MAP {low[0]:.1f}-{high[0]:.1f}, NDCG%20 {low[1]:.1f}-{high[1]:.1f}")
    previous = rows["previous default: plain windows, 0.55 x dense + 0.45 x TF-IDF"]
    difference = shipped - previous
    low, high = bootstrap(difference)
    print(f"shipped minus previous default, paired bootstrap 95%: MAP {low[0]:+.1f} to {high[0]:+.1f}, "
          f"NDCG%20 {low[1]:+.1f} to {high[1]:+.1f}")
    for name, column in (("MAP", 0), ("NDCG%20", 1)):
        change = difference[:, column]
        print(f"  {name} per query: better on {int((change > 0.5).sum())}, worse on {int((change < -0.5).sum())}, "
              f"within 0.5 on {int((abs(change) <= 0.5).sum())} of {len(change)}; median change {np.median(change):+.1f}")


def parse_settings(text: str) -> list[tuple[float, int]]:
    """"0.7/200,0.7/50" -> [(0.7, 200), (0.7, 50)]: dense weights and pools to compare."""
    settings = []
    for item in text.split(","):
        weight, _, pool = item.strip().partition("/")
        try:
            settings.append((float(weight), int(pool) if pool else POOL))
        except ValueError:
            raise SystemExit(f"--compare: '{item}' is not WEIGHT/POOL (e.g. 0.7/200)") from None
        if not 0.0 <= settings[-1][0] <= 1.0 or settings[-1][1] < 1:
            raise SystemExit(f"--compare: '{item}': the weight must be in 0..1, the pool at least 1")
    return settings


def compare(collection: Collection, candidates: list[tuple[float, int]], repeats: int) -> None:
    """Each candidate (dense weight, pool) against the shipped setting on sentence windows, paired:
    on all the queries, and on the held-out half of each fold of the same repeated 2-fold splits."""
    papers = collection.papers()
    shipped_weight = collection.open("sentences").dense_weight
    shipped = collection.run("sentences")  # the index's own weight, the shared POOL
    settings = list(itertools.product(CHUNKINGS, WEIGHTS, POOLS))
    grid = np.stack([collection.run(chunking, "hybrid", weight, pool)
                     for chunking, weight, pool in settings])
    held, chosen = cross_validate(grid, papers, repeats)
    counts = np.bincount(chosen, minlength=len(settings))
    top = int(np.argmax(counts))
    chunking, weight, pool = settings[top]
    print(f"CV over the grid ({len(settings)} settings, {len(chosen)} folds): held-out MAP "
          f"{held[:, 0].mean():.2f} (sd {held[:, 0].std():.2f}), NDCG%20 {held[:, 1].mean():.2f} "
          f"(sd {held[:, 1].std():.2f}); chosen most often {chunking} {weight:.2f}/{pool} "
          f"({counts[top]} of {len(chosen)} folds)")
    if chunking == "sentences" and (weight, pool) not in candidates:
        candidates = [*candidates, (weight, pool)]
    # The pool is shared by every model (query.ranking.POOL); only the weight is a model's own.
    at_pool = [index for index, (chunking, _, pool) in enumerate(settings)
               if chunking == "sentences" and pool == POOL]
    held, chosen = cross_validate(grid[at_pool], papers, repeats)
    counts = np.bincount(chosen, minlength=len(at_pool))
    choices = ", ".join(f"{settings[at_pool[i]][1]:.2f} {counts[i]}x"
                        for i in np.argsort(-counts, kind="stable") if counts[i])
    print(f"CV over the weights alone (sentence windows, the shared pool {POOL}): held-out MAP "
          f"{held[:, 0].mean():.2f} (sd {held[:, 0].std():.2f}), NDCG%20 {held[:, 1].mean():.2f} "
          f"(sd {held[:, 1].std():.2f}); chosen {choices}")
    masks = [np.array([paper in test for paper in papers]) for _, test in folds(papers, repeats)]
    print(f"\nshipped: sentence windows, dense weight {shipped_weight:.2f}, pool {POOL}: all "
          f"{len(papers)} queries MAP / NDCG%20 {fmt(shipped.mean(axis=0))}; held out "
          f"{fmt(np.mean([shipped[mask].mean(axis=0) for mask in masks], axis=0))}")
    print(f"candidate minus shipped, paired: all queries, then held out over {len(masks)} folds "
          "(mean, sd over folds, folds where MAP + NDCG%20 is below the shipped)")
    for weight, pool in candidates:
        figures = collection.run("sentences", "hybrid", weight, pool)
        per_query = figures - shipped
        per_fold = np.array([per_query[mask].mean(axis=0) for mask in masks])
        below = int((per_fold.sum(axis=1) < -1e-9).sum())
        above = int((per_fold.sum(axis=1) > 1e-9).sum())
        print(f"  {weight:.2f}/{pool:<3d}  all {fmt(figures.mean(axis=0))} "
              f"({per_query[:, 0].mean():+.2f} / {per_query[:, 1].mean():+.2f}); held out MAP "
              f"{per_fold[:, 0].mean():+.2f} (sd {per_fold[:, 0].std():.2f}), NDCG%20 "
              f"{per_fold[:, 1].mean():+.2f} (sd {per_fold[:, 1].std():.2f}); below in {below}, "
              f"above in {above} of {len(per_fold)} folds; MAP per query: higher on "
              f"{int((per_query[:, 0] > 0.5).sum())}, "
              f"lower on {int((per_query[:, 0] < -0.5).sum())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/eval/csfcube-dev")
    parser.add_argument("--index-root", type=Path, default=Path.home() / ".cache/papers-tune-relevance",
                        help="where the collection's indexes (and their encoded vectors) are kept: a re-run reuses them")
    parser.add_argument("--model", help="the model to build the indexes with (default: the default model); "
                        "give each model its own --index-root")
    parser.add_argument("--precision", choices=PRECISIONS, help="the encoder's precision (default: fp32)")
    parser.add_argument("--repeats", type=int, default=50, help="2-fold splits (each gives 2 folds)")
    parser.add_argument("--compare", type=parse_settings, metavar="WEIGHT/POOL,...",
                        help="instead of the report: these sentence-window settings against the "
                        "shipped one, paired, on the same folds")
    args = parser.parse_args()
    collection = Collection(args.data, args.index_root, args.model, args.precision)
    try:
        if args.compare:
            compare(collection, args.compare, args.repeats)
        else:
            report(collection, args.repeats)
    finally:
        collection.close()


if __name__ == "__main__":
    main()
