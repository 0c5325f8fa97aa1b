"""Measure the rankers on a test collection and tune the hybrid's dense weight.

    python scripts/tune_relevance.py [--data ../shared/eval/csfcube-dev] [--step 0.05]

Builds (or reuses) two indexes of the corpus, windows and truncate chunking
(the first build encodes every paper: minutes), then prints each ranker's
figures (x100), the hybrid's curve over dense weights, a split-half check (tune
on half the queries, measure on the other half, both ways), per-facet figures,
reciprocal rank fusion for comparison, and how the rule for a query paper
judged against itself moves the figures. Every figure except the RRF and
self-judgement comparisons comes from `recommender.evaluate.evaluate`, i.e.
from what `papers evaluate` prints.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from recommender.evaluation import metrics
from recommender.query.recommender import Recommender
from recommender.embed.windows import Chunking
from recommender.evaluation.evaluate import eval_index_name, evaluate, rank_rows
from recommender.query.ranking import DENSE_WEIGHT

SHOWN = ("map", "ndcg_pct_20", "ndcg_at_10", "recall_at_20", "mrr")
HEAD = "  MAP NDCG%20 NDCG@10  R@20   MRR"


def figures(scores: dict, names=SHOWN) -> str:
    return " ".join(f"{100 * scores[name]:5.1f}" for name in names)


def mean(evaluation, subset=None) -> dict:
    return metrics.mean_scores([q.scores for q in evaluation.queries if subset is None or q.query_id in subset])


def objective(scores: dict) -> float:
    """What the weight is chosen on: MAP and NDCG%20, CSFCube's two headline figures, equally."""
    return scores["map"] + scores["ndcg_pct_20"]


class Collection:
    def __init__(self, data: Path, chunking: str, index: str):
        self.files = (data / "corpus.jsonl", data / "queries.tsv", data / "qrels.txt")
        self.chunking, self.index = Chunking(strategy=chunking), index
        started = time.perf_counter()
        self.run("dense")  # builds the index, or reuses it
        print(f"# {chunking}: index {index} ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)

    def run(self, mode: str, weight: float = DENSE_WEIGHT, pool: str = "judged"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # duplicate papers kept once: reported by `papers evaluate`
            return evaluate(*self.files, index=self.index, chunking=self.chunking, mode=mode,
                            dense_weight=weight, pool=pool)

    def _loop(self, ranked):
        """Per-query scores of a custom ranking `ranked(recommender, query_row, judged) -> (ids, judged)`."""
        recommender = Recommender.open(self.index)
        rows = {paper_id: row for row, paper_id in enumerate(recommender.ids)}
        qrels = metrics.read_qrels(self.files[2])
        out = []
        for query_id, paper_id, _ in metrics.read_queries(self.files[1]):
            ranking, judged = ranked(recommender, rows, rows[paper_id], dict(qrels[query_id]))
            out.append(metrics.score_query(ranking, judged, query_id=query_id))
        return metrics.mean_scores(out)

    def self_rule(self, mode: str, rule: str, weight: float = DENSE_WEIGHT) -> dict:
        """'drop': forget the query paper's judgement of itself; 'unranked': keep it, never rank the paper."""
        def ranked(recommender, rows, query_row, judged):
            query_id = recommender.ids[query_row]
            if rule == "drop":
                judged.pop(query_id, None)
            candidates = [rows[doc] for doc in judged if doc in rows and doc != query_id]
            order = rank_rows(recommender, query_row, candidates, mode, weight)
            return [recommender.ids[row] for row in order], judged
        return self._loop(ranked)

    def rrf(self, k: int = 60) -> dict:
        """Reciprocal rank fusion of the dense and lexical ranks over the whole corpus, judged pool kept."""
        def ranked(recommender, rows, query_row, judged):
            everything = np.arange(len(recommender))
            fused = np.zeros(len(everything))
            for mode in ("dense", "lexical"):
                scores = recommender.score_rows(query_row, everything, mode)
                ranks = np.empty(len(everything))
                ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(everything) + 1)
                fused += 1.0 / (k + ranks)
            candidates = [rows[doc] for doc in judged if doc in rows]
            order = sorted(candidates, key=lambda row: (-fused[row], recommender.ids[row]))
            return [recommender.ids[row] for row in order], judged
        return self._loop(ranked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/eval/csfcube-dev")
    parser.add_argument("--step", type=float, default=0.05)
    args = parser.parse_args()
    windows = Collection(args.data, "windows", eval_index_name("corpus"))
    truncate = Collection(args.data, "truncate", "eval-truncate")
    chosen = f"hybrid {DENSE_WEIGHT:.2f}"

    print(f"ranker (judged pool)               {HEAD}")
    rankers = {
        "dense, windows": windows.run("dense"),
        "dense, truncate": truncate.run("dense"),
        "lexical (TF-IDF)": windows.run("lexical"),
        f"{chosen}, windows": windows.run("hybrid"),
        f"{chosen}, truncate": truncate.run("hybrid"),
    }
    for name, evaluation in rankers.items():
        print(f"{name:34} {figures(mean(evaluation))}")
    print(f"{'RRF k=60, windows':34} {figures(windows.rrf())}")
    print(f"{chosen + ', windows, all pool':34} {figures(mean(windows.run('hybrid', pool='all')))}")

    print("\nthe query paper judged against itself (2 queries): MAP / NDCG%20 when it is")
    print("                  ranked (first)    judgement dropped   kept, never ranked")
    for name, collection, mode in (("dense, truncate", truncate, "dense"), ("dense, windows", windows, "dense"),
                                   ("lexical", windows, "lexical"), (chosen, windows, "hybrid")):
        cells = [figures(mean(collection.run(mode)), SHOWN[:2])]
        cells += [figures(collection.self_rule(mode, rule), SHOWN[:2]) for rule in ("drop", "unranked")]
        print(f"  {name:15} " + "       ".join(cells))

    weights = [round(float(w), 4) for w in np.arange(0.0, 1.0 + 1e-9, args.step)]
    curve = {w: windows.run("hybrid", w) for w in weights}
    ordered = sorted(q.query_id for q in curve[weights[0]].queries)
    halves = (set(ordered[: len(ordered) // 2]), set(ordered[len(ordered) // 2:]))
    print(f"\nhybrid, windows, by dense weight  {HEAD}   half A MAP N%20  half B MAP N%20")
    for w, evaluation in curve.items():
        print(f"  {w:4.2f}                            {figures(mean(evaluation))}   "
              f"{figures(mean(evaluation, halves[0]), SHOWN[:2])}       {figures(mean(evaluation, halves[1]), SHOWN[:2])}")

    def plateau(w, subset=None):
        """The objective averaged over the weights within 0.1 of w: favours broad plateaus over spikes."""
        near = [v for v in weights if abs(v - w) <= 0.1 + 1e-9]
        return sum(objective(mean(curve[v], subset)) for v in near) / len(near)

    print(f"\nbest weight on all queries: {max(weights, key=lambda w: objective(mean(curve[w]))):.2f} (peak), "
          f"{max(weights, key=plateau):.2f} (middle of the best plateau, +-0.1)")
    print("\nsplit-half check (halves of the sorted query ids, 14 + 14; objective MAP + NDCG%20, plateau-averaged):")
    for name, tune, check in (("A, check on B", *halves), ("B, check on A", *reversed(halves))):
        best = max(weights, key=lambda w: plateau(w, tune))
        oracle = max(weights, key=lambda w: plateau(w, check))
        nearest = min(weights, key=lambda w: abs(w - DENSE_WEIGHT))
        print(f"  tune on {name}: best w={best:.2f}; held-out MAP/NDCG%20 {figures(mean(curve[best], check), SHOWN[:2])} "
              f"(at the shipped w={nearest:.2f}: {figures(mean(curve[nearest], check), SHOWN[:2])}; "
              f"held-out half's own best w={oracle:.2f}: {figures(mean(curve[oracle], check), SHOWN[:2])})")

    facets = sorted({q.facet for q in curve[weights[0]].queries})
    print(f"\nper facet                               {HEAD}")
    for facet in facets:
        members = {q.query_id for q in curve[weights[0]].queries if q.facet == facet}
        for name in ("dense, windows", "dense, truncate", "lexical (TF-IDF)", f"{chosen}, windows"):
            print(f"  {facet:10} {name:28} {figures(mean(rankers[name], members))}  ({len(members)} queries)")

    hybrid, dense = rankers[f"{chosen}, windows"].queries, rankers["dense, windows"].queries
    better = sum(objective(vars(h.scores)) > objective(vars(d.scores)) for h, d in zip(hybrid, dense))
    worse = sum(objective(vars(h.scores)) < objective(vars(d.scores)) for h, d in zip(hybrid, dense))
    print(f"\n{chosen} vs dense windows per query (MAP + NDCG%20): better on {better}, worse on {worse}, "
          f"of {len(hybrid)}")


if __name__ == "__main__":
    main()
