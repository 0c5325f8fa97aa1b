"""Several seeds as one profile: which way of scoring them `like` should ship, by repeated cross-validation
over two expert-judged dev sets together.

    python scripts/tune_profiles.py [--csfcube ../shared/eval/csfcube-dev] [--reviewers ../shared/eval/reviewers-dev]
                                    [--repeats 50] [--draws 1000]

The sets (each index built once in .scratch/ with `papers evaluate`'s own code, then reused; the embedding
cache keeps the model's vectors, so a rerun encodes nothing):

* CSFCube dev, profile protocols (recommender/evaluation/profiles.py): one-topic profiles (a query paper
  and half its relevant candidates as seeds, the rest of its judged pool ranked) and mixed profiles (the
  seeds of two or three of them); MAP and NDCG%20 (x100, higher is better).
* reviewers dev (recommender/evaluation/reviewers.py): each researcher's own papers as the profile,
  the papers they rated ranked against their expertise, in ten samples; the weighted pair loss (lower
  is better).

Methods (a seed's scores are those a one-seed `like` gives, hybrid = the dense/TF-IDF z-fusion, or
the dense cosine alone): what `like` shipped before (topics: seeds clustered, each cluster a centroid,
the best kept), the centroid (Rocchio), per-seed max, mean, mean of the top k (also with k at most half
the seeds, so two seeds on two topics are not averaged), a soft maximum
(log-sum-exp with a temperature), mixtures of these with the centroid, a linear SVM of the seeds against
every other paper of the corpus (arxiv-sanity-lite's way, scikit-learn LinearSVC on the embeddings).

Reported: every setting's figure on each set with its bootstrap sd (over query papers for CSFCube's
profiles, over researchers for the loss); then repeated 2-fold cross-validation, each fold splitting
the CSFCube query papers and the researchers in halves: the setting with the best sum of the three
criteria (one-topic and mixed (MAP + NDCG%20) / 2, and 100 x (1 - loss)), each in units of its
bootstrap sd, on the training halves is measured on the held-out halves; mean (sd over folds) per
family and over every setting, and the gain over the centroid fold by fold.

Quoted in: docs/profiles.md (the tables of "How the ranking was chosen").
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from recommender.corpus.papers import read_papers
from recommender.evaluation import metrics, profiles as protocol, reviewers as reviewer_format
from recommender.evaluation.evaluate import evaluation_build, prepare_index
from recommender.query import profiles
from recommender.query.paper_index import PaperIndex
from tune_relevance import folds  # scripts/, beside this file: the same repeated 2-fold splits

TOP_K = (2, 3, 5)
TEMPERATURES = (0.02, 0.05, 0.1)
MIX_WEIGHTS = (0.25, 0.5, 0.75)  # of the per-seed part; the rest to the centroid
CLUSTER_DISTANCES = (0.3, 0.4, 0.5)
SVM_C = (0.01, 0.1, 1.0)
SHARED = Path(__file__).resolve().parents[2] / "shared/eval"


class Case:
    """One profile to score: its seed rows, the rows ranked, and what the methods share, computed once."""

    def __init__(self, recommender: PaperIndex, seeds: list[int], rows: np.ndarray):
        self.recommender, self.seeds, self.rows = recommender, seeds, rows
        self.cached: dict = {}

    def get(self, key, make):
        if key not in self.cached:
            self.cached[key] = make()
        return self.cached[key]

    def per_seed(self, mode: str) -> np.ndarray:
        return self.get(("seeds", mode), lambda: self.recommender.seed_scores(self.seeds, self.rows, mode)
                        .astype(np.float64))

    def centroid(self, mode: str = "hybrid") -> np.ndarray:
        return self.get(("centroid", mode), lambda: self.recommender.score_rows(
            self.seeds, self.rows, mode, profile="centroid").astype(np.float64))


def methods(vectors: np.ndarray) -> dict[str, dict]:
    """{family: {setting name: scorer(case) -> scores}}."""

    def svm(c):
        def score(case):
            positive = np.zeros(len(vectors), dtype=bool)
            positive[case.seeds] = True
            return profiles.svm_scores(vectors, positive, c)[case.rows]
        return score

    def clusters(distance):
        def score(case):
            groups = profiles.seed_clusters(vectors[case.seeds], distance)
            return profiles.best_topic(np.stack([case.recommender.score_rows([case.seeds[i] for i in group], case.rows,
                                                                             profile="centroid") for group in groups]))
        return score

    families: dict[str, dict] = {
        "topics (shipped before)": {"topics": lambda case: case.recommender.score_rows(case.seeds, case.rows,
                                                                                       profile="topics")},
        "centroid (Rocchio)": {"centroid": lambda case: case.centroid(),
                               "centroid dense": lambda case: case.centroid("dense")},
    }
    for mode in ("hybrid", "dense"):
        def per(reduce, mode=mode):
            return lambda case: reduce(case.per_seed(mode))
        families[f"max ({mode})"] = {f"max {mode}": per(lambda s: s.max(axis=0))}
        families[f"mean ({mode})"] = {f"mean {mode}": per(lambda s: s.mean(axis=0))}
        families[f"mean of top k ({mode})"] = {f"top{k} {mode}": per(lambda s, k=k: profiles.top_mean(s, k))
                                               for k in TOP_K}
        families[f"mean of top k, k <= seeds / 2 ({mode})"] = {
            f"top{k}/half {mode}": per(lambda s, k=k: profiles.top_mean(s, profiles.pooled_seeds(len(s), k)))
            for k in TOP_K}
        families[f"log-sum-exp ({mode})"] = {f"lse t={t:g} {mode}": per(lambda s, t=t: profiles.soft_max(s, t))
                                             for t in TEMPERATURES}
        families[f"a x top k + (1-a) x centroid ({mode})"] = {
            f"{a:g} top{k} + centroid {mode}": (lambda case, a=a, k=k, mode=mode:
                                                 a * profiles.top_mean(case.per_seed(mode), k)
                                                 + (1 - a) * case.centroid(mode))
            for k in TOP_K for a in MIX_WEIGHTS}
    families["linear SVM, seeds vs corpus"] = {f"svm C={c:g}": svm(c) for c in SVM_C}
    return families


def flat(families: dict) -> tuple[list[str], list]:
    return ([name for family in families.values() for name in family],
            [scorer for family in families.values() for scorer in family.values()])


def csfcube_cells(recommender: PaperIndex, sets: dict, families: dict) -> dict[str, np.ndarray]:
    """{protocol: [settings, profiles, 2]} MAP and NDCG%20 (x100)."""
    rows_by_id = {paper_id: row for row, paper_id in enumerate(recommender.ids)}
    _, scorers = flat(families)
    out = {}
    for name, profile_list in sets.items():
        started = time.perf_counter()
        cells = np.zeros((len(scorers), len(profile_list), 2))
        for j, profile in enumerate(profile_list):
            seeds = [rows_by_id[doc] for doc in profile.seeds]
            pool = np.asarray(sorted(rows_by_id[doc] for doc in profile.judged if doc in rows_by_id), dtype=np.int64)
            case = Case(recommender, seeds, pool)
            for i, scorer in enumerate(scorers):
                scores = protocol.score_profile(recommender, profile, rows_by_id,
                                                scorer=lambda s, r: scorer(case))
                cells[i, j] = 100 * scores.map, 100 * scores.ndcg_pct_20
        print(f"# csfcube {name}: {len(profile_list)} profiles x {len(scorers)} settings in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        out[name] = cells
    return out


def reviewer_cells(recommender: PaperIndex, data: reviewer_format.ReviewerSet, families: dict):
    """([settings, samples, researchers] costs, weights) of the pair loss."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # two IDs of one text: found by their text below
        papers = read_papers([data.papers_file])
    rows_by_id = {paper.id: row for paper, row in zip(papers, recommender.find_papers(papers)) if row is not None}
    _, scorers = flat(families)
    started = time.perf_counter()
    costs, weights = [], []
    cases: dict = {}

    def scorer_for(i):
        def score(seeds, rows):
            key = (tuple(seeds), tuple(rows.tolist()))
            if key not in cases:
                cases[key] = Case(recommender, seeds, rows)
            return scorers[i](cases[key])
        return score

    for i in range(len(scorers)):
        figures = reviewer_format.score_set(data, rows_by_id, scorer_for(i), draws=0)
        costs.append(figures.costs)
        weights.append(figures.weights)
    print(f"# reviewers: {len(data.profiles)} profiles x {len(scorers)} settings in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return np.stack(costs), np.stack(weights)


def loss(costs: np.ndarray, weights: np.ndarray) -> float:
    total = weights.sum(axis=-1)
    return float((costs.sum(axis=-1) / np.where(total > 0, total, 1)).mean())


def boot_sd(values: np.ndarray, draws: int, seed: int = 0) -> float:
    """Bootstrap sd of the mean of `values` (per query paper or profile)."""
    rng = np.random.default_rng(seed)
    return float(np.std([values[rng.integers(0, len(values), len(values))].mean() for _ in range(draws)]))


def boot_loss_sd(costs: np.ndarray, weights: np.ndarray, draws: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    count = costs.shape[-1]
    return float(np.std([loss(costs[:, pick], weights[:, pick])
                         for pick in (rng.integers(0, count, count) for _ in range(draws))]))


def criteria(csf: dict, sets: dict, costs, weights, train_papers=None, train_researchers=None) -> np.ndarray:
    """[settings, 3]: one-topic and mixed (MAP + NDCG%20) / 2, and 100 x (1 - loss), on the given halves."""
    out = []
    for name in ("one topic", "mixed"):
        mask = np.array([train_papers is None or set(p.papers) <= train_papers for p in sets[name]])
        out.append(csf[name][:, mask].mean(axis=(1, 2)))
    keep = np.ones(costs.shape[-1], bool) if train_researchers is None else train_researchers
    total = weights[..., keep].sum(axis=-1)
    out.append(100 * (1 - (costs[..., keep].sum(axis=-1) / np.where(total > 0, total, 1)).mean(axis=1)))
    return np.stack(out, axis=1)


def report(csf: dict, sets: dict, costs, weights, names: list[str], families: dict, repeats: int, draws: int) -> None:
    researchers = costs.shape[-1]
    print(f"sets: CSFCube one topic {len(sets['one topic'])} profiles, mixed {len(sets['mixed'])}; "
          f"reviewers {researchers} researchers x {costs.shape[1]} samples")
    print(f"\n{'setting (all profiles; bootstrap sd)':34} {'one topic MAP':>14} {'NDCG%20':>12} {'mixed MAP':>12} "
          f"{'NDCG%20':>12} {'reviewers loss':>16}")
    one_papers = [p.papers[0] for p in sets["one topic"]]
    for i, name in enumerate(names):
        one, mix = csf["one topic"][i], csf["mixed"][i]
        cells = [f"{one[:, c].mean():6.1f} ({boot_sd(one[:, c], draws):3.1f})" for c in (0, 1)]
        cells += [f"{mix[:, c].mean():6.1f} ({boot_sd(mix[:, c], draws):3.1f})" for c in (0, 1)]
        cells.append(f"{loss(costs[i], weights[i]):.3f} ({boot_loss_sd(costs[i], weights[i], draws):.3f})")
        print(f"  {name:32} " + " ".join(f"{cell:>12}" for cell in cells))

    baseline = names.index("centroid")
    rng = np.random.default_rng(1)
    splits = []
    for train, test in folds(one_papers, repeats):
        half = rng.permutation(researchers) < researchers // 2
        splits.append((train, test, half, ~half))
    # Each criterion in units of how much the centroid's figure varies from one held-out half to another
    # (mixed profiles share their query papers, so a bootstrap over profiles would understate theirs).
    central = {name: cells[[baseline]] for name, cells in csf.items()}
    scale = np.std([criteria(central, sets, costs[[baseline]], weights[[baseline]], test, test_r)[0]
                    for _, test, _, test_r in splits], axis=0)
    print(f"\ncriteria's units (sd over held-out halves of the centroid's): one topic {scale[0]:.2f}, "
          f"mixed {scale[1]:.2f}, 100 x (1 - loss) {scale[2]:.2f}")
    held_cache = {}

    def held(train_papers, test_papers, train_r, test_r):
        key = (frozenset(test_papers), tuple(test_r))
        if key not in held_cache:
            held_cache[key] = (criteria(csf, sets, costs, weights, train_papers, train_r) / scale,
                               _held_figures(csf, sets, costs, weights, test_papers, test_r))
        return held_cache[key]

    groups, start = {}, 0
    for family, settings in families.items():
        groups[family] = list(range(start, start + len(settings)))
        start += len(settings)
    groups["any setting, chosen in each fold"] = list(range(len(names)))
    print(f"\nrepeated 2-fold CV ({2 * repeats} folds; CSFCube query papers and researchers each split in halves): "
          "the setting with the best sum of the three criteria in bootstrap-sd units on one half, measured on the "
          "other; held-out mean (sd over folds)")
    print(f"{'family':44} {'one MAP':>12} {'one NDCG':>12} {'mixed MAP':>12} {'mixed NDCG':>12} {'loss':>14}"
          f"  {'vs centroid: one MAP, mixed MAP, loss':>38}  chosen")
    base = None
    for family, candidates in [("centroid (Rocchio)", [baseline])] + list(groups.items()):
        chosen, figures = [], []
        for train, test, train_r, test_r in splits:
            value, out = held(train, test, train_r, test_r)
            best = candidates[int(np.argmax(value[candidates].sum(axis=1)))]
            chosen.append(best)
            figures.append(out[best])
        figures = np.array(figures)  # [folds, 5]
        if base is None:
            base = figures
            continue
        gain = figures - base
        counts = np.bincount(chosen, minlength=len(names))
        picked = ", ".join(f"{names[i]} {counts[i]}x" for i in np.argsort(-counts, kind="stable")[:2] if counts[i])
        cells = [f"{figures[:, c].mean():6.1f} ({figures[:, c].std():3.1f})" for c in range(4)]
        cells.append(f"{figures[:, 4].mean():.3f} ({figures[:, 4].std():.3f})")
        print(f"  {family:42} " + " ".join(f"{cell:>12}" for cell in cells)
              + f"  {gain[:, 0].mean():+5.1f} {gain[:, 2].mean():+5.1f} {gain[:, 4].mean():+.3f}"
              f" (loss better {int((gain[:, 4] < 0).sum())}/{len(gain)})  {picked}")


def _held_figures(csf, sets, costs, weights, test_papers, test_r) -> np.ndarray:
    """[settings, 5]: one-topic MAP, NDCG%20, mixed MAP, NDCG%20, loss on the held-out halves."""
    out = []
    for name in ("one topic", "mixed"):
        mask = np.array([set(p.papers) <= test_papers for p in sets[name]])
        out.append(csf[name][:, mask].mean(axis=1))
    total = weights[..., test_r].sum(axis=-1)
    out.append((costs[..., test_r].sum(axis=-1) / np.where(total > 0, total, 1)).mean(axis=1)[:, None])
    return np.concatenate(out, axis=1)


def open_index(corpus: Path, index: Path) -> PaperIndex:
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate papers kept once: `papers evaluate` reports it
        if prepare_index(evaluation_build(corpus, index=index)) is not None:
            print(f"# built {index} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return PaperIndex.open(index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csfcube", type=Path, default=SHARED / "csfcube-dev")
    parser.add_argument("--reviewers", type=Path, default=SHARED / "reviewers-dev")
    parser.add_argument("--scratch", type=Path, default=Path(".scratch"), help="where the indexes are kept")
    parser.add_argument("--repeats", type=int, default=50, help="2-fold splits (each gives 2 folds)")
    parser.add_argument("--draws", type=int, default=1000, help="bootstrap draws")
    parser.add_argument("--mixed", type=int, default=protocol.MIXED_COUNT, help="mixed profiles of each size")
    args = parser.parse_args()
    data = reviewer_format.read_reviewer_set(args.reviewers)
    with open_index(args.csfcube / "corpus.jsonl", args.scratch / "eval-csfcube-dev") as recommender:
        sets = protocol.protocols(metrics.read_queries(args.csfcube / "queries.tsv"),
                                  metrics.read_qrels(args.csfcube / "qrels.txt"), count=args.mixed,
                                  present=set(recommender.ids))  # as `papers evaluate` builds them
        families = methods(np.asarray(recommender.vectors))
        csf = csfcube_cells(recommender, sets, families)
    with open_index(data.papers_file, args.scratch / "eval-reviewers-dev") as recommender:
        costs, weights = reviewer_cells(recommender, data, methods(np.asarray(recommender.vectors)))
    names, _ = flat(families)
    np.savez(args.scratch / "tune_profiles_cells.npz", names=names, costs=costs, weights=weights,
             **{f"csf {name}": cells for name, cells in csf.items()})  # the figures, to re-read the CV
    report(csf, sets, costs, weights, names, families, args.repeats, args.draws)


if __name__ == "__main__":
    main()
