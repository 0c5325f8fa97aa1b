"""Several seeds as one profile: which way of scoring them `like` should ship, by repeated cross-validation.

    python scripts/tune_profiles.py [--data ../shared/eval/csfcube-dev] [--index DIR] [--repeats 50]

Measures, on protocols built from a CSFCube-layout collection (recommender/evaluation/profiles.py):
one-topic profiles (a query paper and half its relevant candidates as seeds, the other relevant ones
as targets, its judged candidates less the seeds as the pool) and mixed profiles (the seeds of two or
three one-topic profiles of different query papers; the pools and judgements of all). Each profile's
pool is ranked by every method below, then:

* each method's MAP / NDCG%20 (x100) on each protocol, over all its profiles;
* repeated 2-fold cross-validation over the query papers (a profile is on a side when all its query
  papers are): within each method family the setting with the best mean MAP + NDCG%20 over both
  protocols on one half is measured on the other half, and the same over every setting of every
  family; held-out mean and sd on each protocol, and the gain over today's centroid
  fold by fold.

Methods (each seed's score is the fused score a one-seed `like` gives, `Recommender.seed_scores`):
what `like` ships (`Recommender.score_rows`: clusters at profiles.CLUSTER_DISTANCE, the best one), centroid (Rocchio: the mean of the seeds' vectors, `like` before profiles), the mean of the seeds'
scores, their best (max), mixtures a x max + (1 - a) x mean and a x max + (1 - a) x centroid,
clusters of the seeds (average linkage on cosine distance) each scored as a centroid and the best
cluster kept (or mixed with the clusters' mean as above), and a linear SVM of the seeds against every other paper on the embeddings (as
arxiv-sanity-lite does on TF-IDF). The index (its encoded vectors) is built once in --index and
reused.

Quoted in: docs/reading-groups-notes.md (the table of "Several seeds as one profile").
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from recommender.evaluation import metrics, profiles as protocol
from recommender.evaluation.evaluate import prepare_index
from recommender.query import profiles
from recommender.query.recommender import Recommender
from tune_relevance import folds  # scripts/, beside this file: the same repeated 2-fold splits

MAX_WEIGHTS = (0.25, 0.4, 0.5, 0.6, 0.75)
CLUSTER_DISTANCES = (0.3, 0.4, 0.5, 0.6, 0.7)
SVM_C = (0.01, 0.1, 1.0)
CLUSTER_MAX_WEIGHTS = (0.5, 0.75)


def methods(recommender: Recommender):
    """{family: {setting name: scorer(seed_rows, rows, cached per-seed scores) -> scores}}."""
    vectors = np.asarray(recommender.vectors)

    def centroid(seeds, rows, per_seed):
        return recommender.score_rows(seeds, rows, profile="centroid")

    cluster_scores = {}  # (seeds, distance) -> [clusters, rows]: shared by the settings that mix them

    def per_cluster(seeds, rows, distance):
        key = (tuple(seeds), distance)
        if key not in cluster_scores:
            groups = profiles.seed_clusters(vectors[seeds], distance)
            cluster_scores[key] = np.stack([recommender.score_rows([seeds[i] for i in group], rows, profile="centroid")
                                            for group in groups])
        return cluster_scores[key]

    def clusters(distance, a=1.0):
        return lambda seeds, rows, per_seed: profiles.best_and_mean(per_cluster(seeds, rows, distance), a)

    def svm(c):
        def score(seeds, rows, per_seed):
            positive = np.zeros(len(vectors), dtype=bool)
            positive[seeds] = True
            return profiles.svm_scores(vectors, positive, c)[rows]
        return score

    def mix_centroid(a):
        return lambda seeds, rows, per_seed: a * per_seed.max(axis=0) + (1 - a) * centroid(seeds, rows, per_seed)

    return {
        "shipped: like (topics, best one)": {"shipped": lambda seeds, rows, per_seed: recommender.score_rows(seeds, rows)},
        "centroid (today)": {"centroid": centroid},
        "mean of seeds' scores": {"mean": lambda seeds, rows, per_seed: per_seed.mean(axis=0)},
        "max of seeds' scores": {"max": lambda seeds, rows, per_seed: per_seed.max(axis=0)},
        "a x max + (1-a) x mean": {f"max/mean a={a:g}": (lambda a: lambda s, r, p: profiles.best_and_mean(p, a))(a)
                                   for a in MAX_WEIGHTS},
        "a x max + (1-a) x centroid": {f"max/centroid a={a:g}": mix_centroid(a) for a in MAX_WEIGHTS},
        "clusters, best cluster's centroid": {f"clusters d={d:g}": clusters(d) for d in CLUSTER_DISTANCES},
        "clusters, a x best + (1-a) x mean": {f"clusters d={d:g} a={a:g}": clusters(d, a)
                                              for d in CLUSTER_DISTANCES for a in CLUSTER_MAX_WEIGHTS},
        "linear SVM, seeds vs rest": {f"svm C={c:g}": svm(c) for c in SVM_C},
    }


def figures(recommender: Recommender, sets: dict[str, list[protocol.Profile]], families) -> dict:
    """{protocol: [settings, profiles, 2]} MAP and NDCG%20 (x100), with the settings' names in order."""
    rows_by_id = {paper_id: row for row, paper_id in enumerate(recommender.ids)}
    names = [name for family in families.values() for name in family]
    scorers = [scorer for family in families.values() for scorer in family.values()]
    out = {}
    for name, profile_list in sets.items():
        started = time.perf_counter()
        cells = np.zeros((len(scorers), len(profile_list), 2))
        for j, profile in enumerate(profile_list):
            seeds = [rows_by_id[doc] for doc in profile.seeds]
            pool = np.asarray(sorted(rows_by_id[doc] for doc in profile.judged if doc in rows_by_id), dtype=np.int64)
            per_seed = recommender.seed_scores(seeds, pool).astype(np.float64)  # once a profile, for every mix
            for i, scorer in enumerate(scorers):
                scores = protocol.score_profile(recommender, profile, rows_by_id,
                                                scorer=lambda s, r: scorer(s, r, per_seed))
                cells[i, j] = 100 * scores.map, 100 * scores.ndcg_pct_20
        print(f"# {name}: {len(profile_list)} profiles x {len(scorers)} settings in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        out[name] = cells
    return {"names": names, **out}


def cross_validate(cells: dict, sets: dict, candidates: list[int], repeats: int):
    """Per fold: the candidate setting with the best mean (MAP + NDCG%20) over both protocols' training
    profiles, and its held-out [protocol] -> (MAP, NDCG%20). Returns (chosen [folds], held {protocol: [folds, 2]})."""
    papers = [paper for profile in sets["one topic"] for paper in profile.papers]
    chosen, held = [], {name: [] for name in sets}
    for train, test in folds(papers, repeats):
        value = np.zeros(len(candidates))
        masks = {}
        for name, profile_list in sets.items():
            in_train = np.array([set(p.papers) <= train for p in profile_list])
            in_test = np.array([set(p.papers) <= test for p in profile_list])
            masks[name] = in_test
            value += cells[name][candidates][:, in_train].mean(axis=1).sum(axis=1)
        best = candidates[int(np.argmax(value))]
        chosen.append(best)
        for name in sets:
            held[name].append(cells[name][best, masks[name]].mean(axis=0))
    return np.array(chosen), {name: np.array(values) for name, values in held.items()}


def report(recommender: Recommender, sets: dict, repeats: int) -> None:
    families = methods(recommender)
    cells = figures(recommender, sets, families)
    names = cells["names"]
    sizes = ", ".join(f"{sum(p.topics == t for p in sets['mixed'])} of {t} topics" for t in protocol.MIXED_TOPICS)
    print(f"protocols: one topic {len(sets['one topic'])} profiles; mixed {len(sets['mixed'])} profiles ({sizes})")
    print(f"\n{'setting (all profiles)':28} {'one topic MAP / NDCG%20':>24} {'mixed MAP / NDCG%20':>22}")
    for i, name in enumerate(names):
        one, mix = cells["one topic"][i].mean(axis=0), cells["mixed"][i].mean(axis=0)
        print(f"  {name:26} {one[0]:12.1f} / {one[1]:5.1f} {mix[0]:12.1f} / {mix[1]:5.1f}")

    baseline = names.index("centroid")
    _, held_base = cross_validate(cells, sets, [baseline], repeats)
    print(f"\nrepeated 2-fold CV over {len({p.papers[0] for p in sets['one topic']})} query papers "
          f"({2 * repeats} folds): setting chosen on one half (mean MAP + NDCG%20 over both protocols), "
          "measured on the other; held-out mean (sd)")
    print(f"{'family':36} {'one topic MAP':>14} {'NDCG%20':>12} {'mixed MAP':>12} {'NDCG%20':>12}"
          f"  {'mixed MAP gain vs centroid':>28}  chosen")
    groups, start = {}, 0
    for family, settings in families.items():
        groups[family] = list(range(start, start + len(settings)))
        start += len(settings)
    groups["any setting, chosen in each fold"] = list(range(len(names)))
    for family, candidates in groups.items():
        chosen, held = cross_validate(cells, sets, candidates, repeats)
        one, mix = held["one topic"], held["mixed"]
        gain = mix[:, 0] - held_base["mixed"][:, 0]
        loss = one[:, 0] - held_base["one topic"][:, 0]
        counts = np.bincount(chosen, minlength=len(names))
        picked = ", ".join(f"{names[i]} {counts[i]}x" for i in np.argsort(-counts, kind="stable")[:2] if counts[i])
        print(f"  {family:34} {one[:, 0].mean():6.1f} ({one[:, 0].std():3.1f}) {one[:, 1].mean():6.1f} ({one[:, 1].std():3.1f})"
              f" {mix[:, 0].mean():6.1f} ({mix[:, 0].std():3.1f}) {mix[:, 1].mean():6.1f} ({mix[:, 1].std():3.1f})"
              f"  {gain.mean():+5.1f} (better {int((gain > 0).sum()):3d}/{len(gain)}; one topic {loss.mean():+.1f})  {picked}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/eval/csfcube-dev")
    parser.add_argument("--index", type=Path, default=Path(".scratch/eval-csfcube-dev"),
                        help="the collection's index (its encoded vectors): built on the first run, then reused")
    parser.add_argument("--repeats", type=int, default=50, help="2-fold splits (each gives 2 folds)")
    parser.add_argument("--mixed", type=int, default=protocol.MIXED_COUNT, help="mixed profiles of each size")
    args = parser.parse_args()
    corpus, queries, qrels = args.data / "corpus.jsonl", args.data / "queries.tsv", args.data / "qrels.txt"
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate papers kept once: `papers evaluate` reports it
        if prepare_index(corpus, args.index) is not None:
            print(f"# built {args.index} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    with Recommender.open(args.index) as recommender:
        sets = protocol.protocols(metrics.read_queries(queries), metrics.read_qrels(qrels), count=args.mixed,
                                  present=set(recommender.ids))  # as `papers evaluate` builds them
        report(recommender, sets, args.repeats)


if __name__ == "__main__":
    main()
