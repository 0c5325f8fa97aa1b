"""What papers with a title only cost the ranking, and the correction of their standing.

    python scripts/title_only_cost.py [--csfcube ../shared/eval/csfcube-dev]
        [--reviewers ../shared/eval/reviewers-dev] [--scratch .scratch/title-only]
        [--seeds 0,1,2] [--repeats 50]

Each set is indexed (with the packaged model, through `build_index`; the embedding cache encodes
each distinct text once, so the variants after the first cost no encoding) as:

* "full": today's index, every paper with its abstract;
* "half, seed S": a random half of the papers (drawn with seed S) made title-only (empty abstract,
  `text_from` "title only"), the query papers (CSFCube) and profile papers (reviewers) kept whole:
  a user's seed is typically a paper they hold in full;
* "all": every paper but those title-only; "all, seeds too": every paper title-only, seeds included.

CSFCube dev: MAP and NDCG%20 (x100) of the queries ranked over their judged pools as `papers
evaluate` ranks them; reviewers dev: the profile pair loss (lower is better). Each at the
correction strengths STRENGTHS (`ranking.TITLE_ONLY_STRENGTH`; 0 = no correction).

Then: how title-only papers' cosines compare with the same papers' in the full index (paired, by
relevance), where relevant papers of each kind rank; the strength chosen by repeated 2-fold
cross-validation over the query papers of the half indexes (the gain over no correction held out,
its sd over folds); and whether half the corpus title-only loses at most half of what the
all-title-only index loses.

Quoted in: docs/measured-ranking.md ("Papers with a title only"), summed up in docs/ranking.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from tune_relevance import folds  # scripts/, beside this file: the same repeated 2-fold splits

from recommender.corpus.fulltext import TITLE_ONLY
from recommender.corpus.papers import Paper, read_papers
from recommender.evaluation import metrics
from recommender.evaluation import reviewers as reviewer_format
from recommender.evaluation.evaluate import rank_rows
from recommender.index.build import build_index
from recommender.query import ranking
from recommender.query.paper_index import PaperIndex

SHARED = Path(__file__).resolve().parents[2] / "shared/eval"
STRENGTHS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25)
REVIEWER_STRENGTHS = (0.0, 1.0)  # each a pass over every profile of every index: minutes


def read(path: Path) -> list[Paper]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate papers kept once, as `papers evaluate` does
        return read_papers([path])


def shortened(
    papers: list[Paper], keep: set[str], fraction: float, seed: int, of_drawable: bool = False
) -> set[str]:
    """The IDs of `fraction` of the papers (`of_drawable`: of those not in `keep`), drawn with
    `seed` from those not in `keep`."""
    drawable = sorted(paper.id for paper in papers if paper.id not in keep)
    if fraction >= 1.0:
        return set(drawable)
    rng = np.random.default_rng(seed)
    count = round(fraction * len(drawable if of_drawable else papers))
    return {drawable[i] for i in rng.permutation(len(drawable))[:count]}


def build(papers: list[Paper], short: set[str], index: Path) -> PaperIndex:
    """The index of `papers`, those in `short` with their title alone (built once, then reused)."""
    if not (index / "current").exists() and not index.exists():
        started = time.perf_counter()

        def own():
            for paper in papers:
                yield (
                    dataclasses.replace(paper, abstract="", text_from=TITLE_ONLY)
                    if paper.id in short
                    else paper
                )

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build_index([], index=index, own_papers=own, built_by="evaluate")
        print(
            f"# built {index.name} ({len(short)} title-only) in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    opened = PaperIndex.open(index)
    mask = opened.title_only
    found = 0 if mask is None else int(mask.sum())
    # Two papers of one title made title-only are one paper to the build (kept once): a few fewer.
    assert 0.99 * len(short) <= found <= len(short), (
        f"{index}: {found} title-only papers, {len(short)} made"
    )
    return opened


class Csfcube:
    def __init__(self, data: Path):
        self.corpus = data / "corpus.jsonl"
        self.queries = metrics.read_queries(data / "queries.tsv")
        self.qrels = metrics.read_qrels(data / "qrels.txt")
        self.papers = read(self.corpus)
        self.seeds = {paper_id for _, paper_id, _ in self.queries}
        self.short: set[str] = set()  # the papers of the index being measured made title-only

    def rows(self, recommender: PaperIndex) -> dict[str, int]:
        """Each paper's row, found by its text where the build kept another paper of that text (two
        papers of one title, both made title-only)."""
        built = [
            dataclasses.replace(paper, abstract="", text_from=TITLE_ONLY)
            if paper.id in self.short
            else paper
            for paper in self.papers
        ]
        return {
            paper.id: row
            for paper, row in zip(built, recommender.find_papers(built))
            if row is not None
        }

    def figures(self, recommender: PaperIndex, strength: float) -> np.ndarray:
        """[queries, 2]: MAP and NDCG%20 (x100) of each query, as `papers evaluate` ranks it."""
        ranking.TITLE_ONLY_STRENGTH = strength
        rows = self.rows(recommender)
        out = []
        for query_id, paper_id, _ in self.queries:
            judged = self.qrels[query_id]
            order = rank_rows(
                recommender, rows[paper_id], sorted({rows[doc] for doc in judged if doc in rows})
            )
            scores = metrics.score_query(
                [recommender.ids[row] for row in order], judged, query_id=query_id
            )
            out.append([100 * scores.map, 100 * scores.ndcg_pct_20])
        return np.array(out)

    def cosines(self, recommender: PaperIndex) -> dict[str, np.ndarray]:
        """Every judged (query, candidate) pair's dense and lexical cosines, hybrid rank percentile
        (0 = first) without correction, grade, and whether the candidate is title-only."""
        ranking.TITLE_ONLY_STRENGTH = 0.0
        rows = self.rows(recommender)
        mask = recommender.title_only
        out: dict[str, list] = {
            key: [] for key in ("query", "paper", "dense", "lexical", "place", "grade", "short")
        }
        for number, (query_id, paper_id, _) in enumerate(self.queries):
            judged = {
                rows[doc]: (doc, grade)
                for doc, grade in self.qrels[query_id].items()
                if doc in rows and doc != paper_id and rows[doc] != rows[paper_id]
            }
            candidates = np.array(sorted(judged), dtype=np.int64)
            dense = recommender.score_rows(rows[paper_id], candidates, "dense")
            lexical = recommender.score_rows(rows[paper_id], candidates, "lexical")
            order = rank_rows(recommender, rows[paper_id], candidates.tolist())
            place = {row: i / max(len(order) - 1, 1) for i, row in enumerate(order)}
            for row, d, w in zip(candidates.tolist(), dense.tolist(), lexical.tolist()):
                out["query"].append(number)
                out["paper"].append(judged[row][0])
                out["dense"].append(d)
                out["lexical"].append(w)
                out["place"].append(place[row])
                out["grade"].append(judged[row][1])
                out["short"].append(bool(mask is not None and mask[row]))
        return {key: np.array(value) for key, value in out.items()}


class Reviewers:
    def __init__(self, data: Path):
        self.data = reviewer_format.read_reviewer_set(data)
        self.papers = read(self.data.papers_file)
        self.seeds = {paper for profile in self.data.profiles for paper in profile.papers}

    def costs(self, recommender: PaperIndex, strength: float) -> tuple[np.ndarray, np.ndarray]:
        ranking.TITLE_ONLY_STRENGTH = strength
        rows_by_id = {
            paper.id: row
            for paper, row in zip(self.papers, recommender.find_papers(self.papers))
            if row is not None
        }
        figures = reviewer_format.score_set(
            self.data, rows_by_id, lambda seeds, rows: recommender.score_rows(seeds, rows), draws=0
        )
        return figures.costs, figures.weights


def loss(costs: np.ndarray, weights: np.ndarray) -> float:
    total = weights.sum(axis=1)
    return float((costs.sum(axis=1) / np.where(total > 0, total, 1)).mean())


def fmt(cells) -> str:
    return f"{cells[0]:5.2f} / {cells[1]:5.2f}"


def variants(papers, seeds: set[str], seed_list, of_drawable=False) -> list[tuple[str, set[str]]]:
    """CSFCube: half the corpus; reviewers (most papers are some profile's): half the others."""
    out = [("full", set())]
    out += [
        (f"half, seed {seed}", shortened(papers, seeds, 0.5, seed, of_drawable))
        for seed in seed_list
    ]
    out.append(("all", shortened(papers, seeds, 1.0, 0)))
    out.append(("all, seeds too", {paper.id for paper in papers}))
    return out


def describe_cosines(full: dict, half: dict) -> None:
    """Paired: the same judged pairs in the full index and in a half index, by kind and relevance."""
    keys = {
        (q, p): i for i, (q, p) in enumerate(zip(full["query"].tolist(), full["paper"].tolist()))
    }
    at = [keys.get((q, p)) for q, p in zip(half["query"].tolist(), half["paper"].tolist())]
    both = np.array(
        [i is not None for i in at]
    )  # a pair whose papers the half index merged: left out
    half = {key: values[both] for key, values in half.items()}
    full = {key: values[[i for i in at if i is not None]] for key, values in full.items()}
    short = half["short"]
    relevant = half["grade"] >= 2
    print(
        "  judged pairs (query, candidate), by the candidate's kind in the half index and relevance (grade >= 2):"
    )
    print(
        f"  {'':34} {'pairs':>6} {'dense full':>10} {'dense now':>10} {'lexical full':>12} {'lexical now':>11}"
        f" {'place full':>10} {'place now':>9}"
    )
    for kind, kind_mask in (("title-only", short), ("with abstract", ~short)):
        for name, rel_mask in (("relevant", relevant), ("not relevant", ~relevant)):
            m = kind_mask & rel_mask
            print(
                f"  {kind + ', ' + name:34} {int(m.sum()):6d} {full['dense'][m].mean():10.3f} "
                f"{half['dense'][m].mean():10.3f} {full['lexical'][m].mean():12.3f} {half['lexical'][m].mean():11.3f}"
                f" {full['place'][m].mean():10.3f} {half['place'][m].mean():9.3f}"
            )
    print(
        "  (place: position in the query's hybrid ranking of its judged pool, 0 = first, 1 = last; mean)"
    )
    # The z-score of each pair within its query, by kind: how far a kind is moved.
    for key in ("dense", "lexical"):
        shift_all, shift_rel = [], []
        for query in np.unique(half["query"]):
            q = half["query"] == query
            values = half[key][q]
            z = (values - values.mean()) / (values.std() or 1.0)
            s, r = short[q], relevant[q]
            if s.any() and (~s).any():
                shift_all.append(z[~s].mean() - z[s].mean())
            if (s & r).any() and (~s & r).any():
                shift_rel.append(z[~s & r].mean() - z[s & r].mean())
        print(
            f"  {key}: mean z within a query, with abstract minus title-only: all judged {np.mean(shift_all):+.2f}"
            f" (sd over queries {np.std(shift_all):.2f}), relevant only {np.mean(shift_rel):+.2f}"
        )


def cross_validate(per_strength: np.ndarray, papers: list[str], repeats: int):
    """per_strength [strengths, seeds, queries, 2] -> held-out gain over strength 0 [folds, 2] and
    the strength chosen in each fold (on the training query papers of every half index)."""
    gains, chosen = [], []
    for train, _ in folds(papers, repeats):
        mask = np.array([paper in train for paper in papers])
        value = per_strength[:, :, mask].mean(axis=(1, 2)).sum(axis=1)
        best = int(np.argmax(value))
        chosen.append(best)
        gains.append((per_strength[best][:, ~mask] - per_strength[0][:, ~mask]).mean(axis=(0, 1)))
    return np.array(gains), np.array(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csfcube", type=Path, default=SHARED / "csfcube-dev")
    parser.add_argument("--reviewers", type=Path, default=SHARED / "reviewers-dev")
    parser.add_argument("--scratch", type=Path, default=Path(".scratch/title-only"))
    parser.add_argument("--seeds", default="0,1,2", help="the random halves' seeds")
    parser.add_argument(
        "--repeats", type=int, default=50, help="2-fold splits (each gives 2 folds)"
    )
    parser.add_argument(
        "--reviewer-seeds",
        default="0",
        help="the random halves' seeds on the reviewer set (each a few minutes)",
    )
    parser.add_argument("--only", choices=("csfcube", "reviewers"), help="measure one set only")
    args = parser.parse_args()
    seed_list = [int(seed) for seed in args.seeds.split(",")]
    args.scratch.mkdir(parents=True, exist_ok=True)
    if args.only != "reviewers":
        report_csfcube(Csfcube(args.csfcube), args.scratch, seed_list, args.repeats)
    if args.only != "csfcube":
        report_reviewers(
            Reviewers(args.reviewers),
            args.scratch,
            [int(seed) for seed in args.reviewer_seeds.split(",")],
            args.repeats,
        )


def report_csfcube(csf: Csfcube, scratch: Path, seed_list, repeats: int) -> None:
    figures: dict[str, np.ndarray] = {}  # name -> [strengths, queries, 2]
    pairs: dict[str, dict] = {}
    for name, short in variants(csf.papers, csf.seeds, seed_list):
        csf.short = short
        with build(
            csf.papers, short, scratch / ("csf-" + name.replace(", ", "-").replace(" ", "-"))
        ) as index:
            figures[name] = np.stack([csf.figures(index, s) for s in STRENGTHS])
            if name in ("full", f"half, seed {seed_list[0]}"):
                pairs[name] = csf.cosines(index)
    ranking.TITLE_ONLY_STRENGTH = 0.0
    count = len(csf.queries)
    print(
        f"CSFCube dev, {count} queries over their judged pools, MAP / NDCG%20 (x100), by correction strength:"
    )
    print(f"  {'index':22} " + " ".join(f"{'strength ' + format(s, 'g'):>15}" for s in STRENGTHS))
    for name, cells in figures.items():
        print(
            f"  {name:22} "
            + " ".join(f"{fmt(cells[i].mean(axis=0)):>15}" for i in range(len(STRENGTHS)))
        )
    halves = np.stack(
        [figures[f"half, seed {seed}"] for seed in seed_list], axis=1
    )  # [strengths, seeds, q, 2]
    means = halves.mean(axis=2)  # [strengths, seeds, 2]
    print(
        f"  half, over {len(seed_list)} seeds: "
        + "; ".join(
            f"strength {s:g} {fmt(means[i].mean(axis=0))} (range MAP {means[i, :, 0].min():.2f}-{means[i, :, 0].max():.2f},"
            f" NDCG {means[i, :, 1].min():.2f}-{means[i, :, 1].max():.2f})"
            for i, s in enumerate(STRENGTHS)
        )
    )

    print(
        f"\nHow title-only papers score (half, seed {seed_list[0]}, against the same pairs in the full index):"
    )
    describe_cosines(pairs["full"], pairs[f"half, seed {seed_list[0]}"])

    papers = [paper_id for _, paper_id, _ in csf.queries]
    gains, chosen = cross_validate(halves, papers, repeats)
    counts = np.bincount(chosen, minlength=len(STRENGTHS))
    print(
        f"\nCV ({2 * repeats} folds over {len(set(papers))} query papers, the {len(seed_list)} half indexes): "
        f"held-out gain of the chosen strength over none: MAP {gains[:, 0].mean():+.2f} (sd {gains[:, 0].std():.2f}),"
        f" NDCG%20 {gains[:, 1].mean():+.2f} (sd {gains[:, 1].std():.2f}); chosen "
        + ", ".join(
            f"{STRENGTHS[i]:g} {counts[i]}x"
            for i in np.argsort(-counts, kind="stable")
            if counts[i]
        )
    )
    for i, s in enumerate(STRENGTHS[1:], start=1):
        per_seed = (halves[i] - halves[0]).mean(axis=1)  # [seeds, 2]
        print(
            f"  strength {s:g} minus none, all queries: MAP {per_seed[:, 0].mean():+.2f} "
            f"(seeds {', '.join(f'{v:+.2f}' for v in per_seed[:, 0])}), NDCG%20 {per_seed[:, 1].mean():+.2f} "
            f"(seeds {', '.join(f'{v:+.2f}' for v in per_seed[:, 1])})"
        )

    shipped = STRENGTHS.index(ranking_strength())
    full = figures["full"][0].mean(axis=0)
    every = figures["all"][0].mean(axis=0)
    for label, i in (
        ("without correction", 0),
        (f"shipped strength {STRENGTHS[shipped]:g}", shipped),
    ):
        half = halves[i].mean(axis=(0, 1))
        every_i = figures["all"][i].mean(axis=0)
        lost_half, lost_all = full - half, full - every_i
        met = all(lost_half <= 0.5 * lost_all)
        print(
            f"  target, {label}: half loses {fmt(lost_half)}, all loses {fmt(lost_all)} "
            f"(ratio MAP {lost_half[0] / lost_all[0]:.2f}, NDCG%20 {lost_half[1] / lost_all[1]:.2f}): "
            f"{'met' if met else 'not met'}"
        )
    del every


def report_reviewers(rev: Reviewers, scratch: Path, seed_list, repeats: int) -> None:
    losses: dict[str, list[float]] = {}
    cells: dict[str, list] = {}
    for name, short in variants(rev.papers, rev.seeds, seed_list, of_drawable=True):
        with build(
            rev.papers, short, scratch / ("rev-" + name.replace(", ", "-").replace(" ", "-"))
        ) as index:
            if index.title_only is None or name == "all, seeds too":  # nothing the shift can move
                cells[name] = [rev.costs(index, 0.0)] * len(REVIEWER_STRENGTHS)
            else:
                cells[name] = [rev.costs(index, s) for s in REVIEWER_STRENGTHS]
            losses[name] = [loss(*c) for c in cells[name]]
            print(
                f"# {name}: " + ", ".join(f"{v:.4f}" for v in losses[name]),
                file=sys.stderr,
                flush=True,
            )
    ranking.TITLE_ONLY_STRENGTH = 0.0
    researchers = cells["full"][0][0].shape[1]
    print(
        f"\nreviewers dev, {researchers} researchers, pair loss (lower is better), by correction strength:"
    )
    print(
        f"  {'index':22} "
        + " ".join(f"{'strength ' + format(s, 'g'):>13}" for s in REVIEWER_STRENGTHS)
    )
    for name, values in losses.items():
        print(f"  {name:22} " + " ".join(f"{v:13.4f}" for v in values))
    halves = np.array([losses[f"half, seed {seed}"] for seed in seed_list])  # [seeds, strengths]
    print(
        "  half, mean over seeds: "
        + ", ".join(
            f"{s:g} {halves[:, i].mean():.4f} (range {halves[:, i].min():.4f}-{halves[:, i].max():.4f})"
            for i, s in enumerate(REVIEWER_STRENGTHS)
        )
    )
    # The researchers' spread: the same change measured on random halves of the researchers.
    rng = np.random.default_rng(0)
    shipped = REVIEWER_STRENGTHS.index(ranking_strength())
    for i, s in enumerate(REVIEWER_STRENGTHS[1:], start=1):
        changes = []
        for _ in range(2 * repeats):
            keep = rng.permutation(researchers) < researchers // 2
            changes.append(
                np.mean(
                    [
                        loss(c[i][0][:, keep], c[i][1][:, keep])
                        - loss(c[0][0][:, keep], c[0][1][:, keep])
                        for c in (cells[f"half, seed {seed}"] for seed in seed_list)
                    ]
                )
            )
        print(
            f"  strength {s:g} minus none on halves of the researchers: {np.mean(changes):+.4f} (sd {np.std(changes):.4f})"
        )
    full, every = losses["full"][0], losses["all"]
    for label, i in (
        ("without correction", 0),
        (f"shipped strength {REVIEWER_STRENGTHS[shipped]:g}", shipped),
    ):
        lost_half, lost_all = halves[:, i].mean() - full, every[i] - full
        print(
            f"  target, {label}: half adds {lost_half:+.4f}, all adds {lost_all:+.4f} "
            f"(ratio {lost_half / lost_all:.2f}): {'met' if lost_half <= 0.5 * lost_all else 'not met'}"
        )


def ranking_strength() -> float:
    """The strength `like` ships (read before the measurements move it)."""
    return SHIPPED


SHIPPED = ranking.TITLE_ONLY_STRENGTH

if __name__ == "__main__":
    main()
