"""Researchers' own papers as profiles: the reviewer-expertise format and its loss.

A folder holds `papers.jsonl` (`{"id", "title", "abstract"}` a line), `profiles.jsonl` (`{"sample",
"researcher", "papers"}`: a researcher's profile in one random sample) and `ratings.tsv`
(`researcher`, `paper_id`, `expertise`: how expert the researcher is to review the paper, higher =
more). For each sample and researcher, the papers the researcher rated are scored by their
similarity to the profile; the loss (Stelmakh et al., "A Gold Standard Dataset for the Reviewer
Assignment Problem", 2023) is the weighted share of pairs the scores order against the expertise: a
pair of different expertise weighs their difference, costs its weight when ordered against it and
half when tied; a sample's loss is its costs over its weights, the figure the mean over the samples
(0 = perfect, lower is better).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:
    from ..index.request import BuildRequest
    from ..query.ranking import RankingRequest

FILES = ("papers.jsonl", "profiles.jsonl", "ratings.tsv")
# Bootstrap draws over researchers for the loss's spread.
DRAWS = 1000


@dataclass(frozen=True)
class ReviewerProfile:
    """One researcher's profile in one sample."""

    sample: int
    researcher: str
    papers: tuple[str, ...]


@dataclass(frozen=True)
class ReviewerSet:
    """A folder in the reviewer format, read."""

    folder: Path
    profiles: list[ReviewerProfile]
    ratings: dict[str, dict[str, float]]  # researcher -> paper -> expertise

    @property
    def papers_file(self) -> Path:
        return self.folder / FILES[0]

    @property
    def researchers(self) -> list[str]:
        return sorted(self.ratings)


@dataclass(frozen=True)
class LossFigures:
    """The loss of a ranking: its mean over samples, the bootstrap spread over researchers, and the
    per-(sample, researcher) costs and weights it is made of ([samples, researchers])."""

    loss: float
    sd: float
    low: float  # 2.5% and 97.5% points of the bootstrap
    high: float
    costs: np.ndarray
    weights: np.ndarray
    researchers: list[str]

    def to_dict(self) -> dict:
        return {
            "loss": round(self.loss, 4),
            "sd": round(self.sd, 4),
            "interval": [round(self.low, 4), round(self.high, 4)],
            "researchers": len(self.researchers),
            "samples": int(self.costs.shape[0]),
        }


def is_reviewer_folder(folder: str | Path) -> bool:
    """Whether `folder` holds the reviewer format's three files."""
    return all((Path(folder) / name).is_file() for name in FILES)


def read_reviewer_set(folder: str | Path) -> ReviewerSet:
    """Read a folder in the reviewer format (InputError naming the file and line of anything
    wrong)."""
    folder = Path(folder)
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise InputError(
            f"{folder} is not a profile collection: it lacks {', '.join(missing)} "
            f"(it needs {', '.join(FILES)})"
        )
    profiles = []
    with open(folder / FILES[1], encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                profile = ReviewerProfile(
                    int(record["sample"]),
                    str(record["researcher"]),
                    tuple(str(paper) for paper in record["papers"]),
                )
            except (ValueError, KeyError, TypeError):
                raise InputError(
                    f"{folder / FILES[1]} line {number}: not a profile "
                    '{"sample", "researcher", "papers"}: fix or remove the line'
                ) from None
            if profile.papers:
                profiles.append(profile)
    ratings: dict[str, dict[str, float]] = {}
    with open(folder / FILES[2], encoding="utf-8", newline="") as table:
        for number, row in enumerate(csv.reader(table, delimiter="\t"), start=1):
            if not row or (number == 1 and row[:1] == ["researcher"]):
                continue
            try:
                researcher, paper, expertise = row[0], row[1], float(row[2])
                if not math.isfinite(expertise):
                    raise ValueError
            except (IndexError, ValueError):
                raise InputError(
                    f"{folder / FILES[2]} line {number}: not"
                    " 'researcher<TAB>paper_id<TAB>expertise' with a number: fix or remove the"
                    " line"
                ) from None
            ratings.setdefault(researcher, {})[paper] = expertise
    if not profiles or not ratings:
        raise InputError(f"{folder}: no profiles or no ratings: nothing to evaluate")
    profiles = [profile for profile in profiles if profile.researcher in ratings]
    return ReviewerSet(folder, profiles, ratings)


def pair_loss(
    scores: Sequence[float] | np.ndarray, expertise: Sequence[float]
) -> tuple[float, float]:
    """(cost, weight) of one researcher's rated papers: every pair of different expertise weighs the
    difference; it costs its weight when the scores order it against the expertise, half when tied.
    """
    # float noise between equal texts is a tie
    rounded = np.round(np.asarray(scores, dtype=np.float64), 6)
    grades = np.asarray(expertise, dtype=np.float64)
    upper = np.triu_indices(len(rounded), 1)
    difference = (grades[:, None] - grades[None, :])[upper]
    order = (rounded[:, None] - rounded[None, :])[upper]
    weight = np.abs(difference)
    cost = np.where(
        order == 0, 0.5 * weight, np.where(np.sign(order) != np.sign(difference), weight, 0.0)
    )
    cost[difference == 0] = 0.0
    return float(cost.sum()), float(weight.sum())


def loss_figures(
    costs: np.ndarray,
    weights: np.ndarray,
    researchers: list[str],
    draws: int = DRAWS,
    seed: int = 0,
) -> LossFigures:
    """The mean loss over samples of [samples, researchers] costs and weights, with its bootstrap
    spread over researchers (resampled with replacement, the same draw in every sample)."""
    loss = float(np.mean(_sample_losses(costs, weights)))
    if draws <= 0:
        return LossFigures(
            loss, float("nan"), float("nan"), float("nan"), costs, weights, researchers
        )
    rng = np.random.default_rng(seed)
    count = costs.shape[1]
    drawn = np.array(
        [
            np.mean(_sample_losses(costs[:, pick], weights[:, pick]))
            for pick in (rng.integers(0, count, count) for _ in range(draws))
        ]
    )
    low, high = np.percentile(drawn, [2.5, 97.5])
    return LossFigures(
        loss, float(drawn.std()), float(low), float(high), costs, weights, researchers
    )


def _sample_losses(costs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    total = weights.sum(axis=1)
    return costs.sum(axis=1) / np.where(total > 0, total, 1.0)


def score_set(
    reviewers: ReviewerSet,
    rows_by_id: dict[str, int],
    scorer: Callable[[list[int], np.ndarray], np.ndarray],
    draws: int = DRAWS,
) -> LossFigures:
    """The loss of `scorer(seed_rows, rated_rows) -> scores` on every sample and researcher. A paper
    the index lacks under its own ID (a build keeps a duplicate text once) is found by `rows_by_id`
    if the caller mapped it; a rated paper found nowhere is left out of its researcher's pairs."""
    researchers = reviewers.researchers
    column = {researcher: i for i, researcher in enumerate(researchers)}
    samples = sorted({profile.sample for profile in reviewers.profiles})
    line = {sample: i for i, sample in enumerate(samples)}
    costs = np.zeros((len(samples), len(researchers)))
    weights = np.zeros_like(costs)
    for profile in reviewers.profiles:
        seeds = list(
            dict.fromkeys(rows_by_id[paper] for paper in profile.papers if paper in rows_by_id)
        )
        rated = [
            (rows_by_id[paper], grade)
            for paper, grade in reviewers.ratings[profile.researcher].items()
            if paper in rows_by_id
        ]
        if not seeds or len(rated) < 2:
            continue
        rows = np.array([row for row, _ in rated], dtype=np.int64)
        scores = scorer(seeds, rows)
        cost, weight = pair_loss(scores, [grade for _, grade in rated])
        costs[line[profile.sample], column[profile.researcher]] = cost
        weights[line[profile.sample], column[profile.researcher]] = weight
    return loss_figures(costs, weights, researchers, draws)


@dataclass(frozen=True)
class ReviewerEvaluation:
    """The loss of `like`'s profile ranking on a reviewer-format folder, and how it was measured."""

    settings: dict
    figures: LossFigures
    profiles: int  # (sample, researcher) profiles scored
    build: object | None = None  # the BuildReport when the index had to be (re)built

    def to_dict(self) -> dict:
        return {"settings": self.settings, "profiles": self.profiles, **self.figures.to_dict()}


def evaluate_reviewers(
    folder: str | Path,
    *,
    build: BuildRequest | None = None,
    ranking: RankingRequest | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str, int | None], None] | None = None,
    **settings,
) -> ReviewerEvaluation:
    """Build (or reuse) an index of the folder's papers, rank every researcher's rated papers by
    their profile as `like` ranks several seeds (`PaperIndex.score_rows`), and give the loss with
    its spread.

    The index is built as `build` (a BuildRequest) says, else as the keywords index, model,
    precision and chunking say (as `evaluate`'s; its index by default eval-<folder name>). The
    papers are scored in the mode of `ranking` (a RankingRequest), else of the keyword mode (default
    "hybrid"): the loss orders the scores of every rated paper, so the ranking's min_score and
    diverse do not enter it. The keyword dense_weight (None: the one `like` uses for the index) is
    the dense cosine's weight in hybrid scores. `on_phase(name, total)` and `progress(done, total)`
    are told how a build goes.
    """
    from ..corpus.papers import read_papers
    from ..index.request import BuildHooks
    from ..query.paper_index import PaperIndex
    from .evaluate import REVIEWER_SETTINGS, evaluation_requests, prepare_index

    asked, ranked, scoring = evaluation_requests(
        Path(folder) / FILES[0],
        build,
        ranking,
        settings,
        caller="evaluate_reviewers",
        accepted=REVIEWER_SETTINGS,
        default_index=f"eval-{Path(folder).resolve().name}",
    )
    data = read_reviewer_set(folder)
    report = prepare_index(asked, BuildHooks(progress, on_phase))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the build warned about duplicate papers as it read them
        papers = read_papers([data.papers_file])
    with PaperIndex.open(asked.index) as recommender:
        # A build keeps a duplicate text once: its other IDs are found by their text
        # (`find_papers`).
        rows_by_id = {
            paper.id: row
            for paper, row in zip(papers, recommender.find_papers(papers))
            if row is not None
        }
        mode = ranked.mode
        weight = scoring.dense_weight
        weight = recommender.dense_weight if weight is None else weight
        figures = score_set(
            data, rows_by_id, lambda seeds, rows: recommender.score_rows(seeds, rows, mode, weight)
        )
        manifest = recommender.manifest
        shown = {
            "index": str(recommender.stored.index_dir),
            "papers": len(recommender),
            "model": manifest["model"],
            "precision": manifest.get("precision", "fp32"),
            "chunking": manifest["chunking"]["strategy"],
            "mode": mode,
            "dense_weight": weight if mode == "hybrid" else None,
            "folder": str(folder),
        }
    scored = int((figures.weights > 0).sum())
    return ReviewerEvaluation(shown, figures, scored, report)
