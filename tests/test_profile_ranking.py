"""Recommendations for a person: several seeds ranked seed by seed (each candidate's best seeds mixed
with their centroid), "because of", tags in the CLI with not-interested and seen marks, and the reviewer format's loss."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from corpus import TWO_TOPIC_SEEDS as SEEDS
from corpus import two_topic_papers, write_corpus
from recommender import build_index
from recommender.errors import InputError, OptionError
from recommender.evaluation import reviewers
from recommender.query import profiles

REVIEWERS = Path(__file__).resolve().parents[2] / "shared/eval/reviewers-dev"


@pytest.fixture
def index(open_index, workdir, fake_model):
    build_index([write_corpus(workdir / "in", two_topic_papers())])
    return open_index()


def test_top_mean_and_soft_max_over_arrays():
    scores = np.array([[0.9, 0.1], [0.5, 0.2], [0.1, 0.3], [0.3, 0.0]])
    assert profiles.top_mean(scores, 2).tolist() == pytest.approx([0.7, 0.25])
    assert profiles.top_mean(scores, 1).tolist() == pytest.approx(scores.max(axis=0))
    assert profiles.top_mean(scores, 9).tolist() == pytest.approx(scores.mean(axis=0))  # fewer seeds than k
    assert profiles.soft_max(scores, 1e-4).tolist() == pytest.approx(scores.max(axis=0), abs=1e-3)
    assert profiles.soft_max(scores, 1e4).tolist() == pytest.approx(scores.mean(axis=0), abs=1e-3)
    with pytest.raises(ValueError, match="k >= 1"):
        profiles.top_mean(scores, 0)
    with pytest.raises(ValueError, match="temperature"):
        profiles.soft_max(scores, 0.0)


def test_several_seeds_mix_each_candidates_best_seeds_with_their_centroid(index):
    seeds = [index.resolve(seed) for seed in SEEDS]
    rows = np.array([row for row in range(len(index)) if row not in seeds])
    best = profiles.top_mean(index.seed_scores(seeds, rows), profiles.PROFILE_TOP_K)
    centroid = index.score_rows(seeds, rows, profile="centroid")
    weight = profiles.PROFILE_SEED_WEIGHT
    assert 0 < weight < 1
    expected = weight * best + (1 - weight) * centroid
    np.testing.assert_allclose(index.score_rows(seeds, rows), expected, atol=1e-6)
    results = index.like(*SEEDS, k=5)
    by_row = dict(zip(rows.tolist(), expected.tolist()))
    assert [r.score for r in results] == pytest.approx(sorted(by_row.values(), reverse=True)[:5], abs=1e-5)


def test_because_of_names_the_closest_seeds_with_their_cosines(index):
    results = index.like("privacy-0", "privacy-1", "video-0", k=4, why=True)
    handles = {index.ids[row]: handle for row, handle in enumerate(index.handles)}
    for result in results:
        assert 1 <= len(result.because) <= 3
        cosines = [cosine for _, _, cosine in result.because]
        assert cosines == sorted(cosines, reverse=True)
        for seed, handle, cosine in result.because:
            assert handles[seed] == handle
            vectors = index.vectors_at([index.resolve(seed), index.resolve(result.id)]).astype(np.float64)
            assert cosine == pytest.approx(float(vectors[0] @ vectors[1] / np.linalg.norm(vectors, axis=1).prod()),
                                           abs=1e-5)
        if not result.id.startswith("between"):  # the closest seed is of the paper's own topic
            assert result.because[0][0].split("-")[0] == result.id.split("-")[0]
    assert index.like("privacy-0", k=2, why=True)[0].because == ()  # one seed: it is the reason


def test_cli_why_shows_because_of_in_the_table_and_the_json(workdir, papers_cli):
    write_corpus(workdir / "in", two_topic_papers())
    assert papers_cli("build", "in").exit_code == 0
    data = json.loads(papers_cli("like", *SEEDS, "-k", "3", "--why", "--format", "json").stdout)
    assert all(row["because"] and set(row["because"][0]) == {"id", "handle", "cosine"} for row in data)
    table = papers_cli("like", *SEEDS, "-k", "3", "--why", "--wide").stdout
    assert table.count("because of ") == 3


def test_tags_in_the_cli_not_interested_and_seen(workdir, papers_cli):
    write_corpus(workdir / "in", two_topic_papers())
    assert papers_cli("build", "in").exit_code == 0
    assert papers_cli("tags").stdout.startswith("no tags yet")
    added = papers_cli("tags", "add", "mine", "privacy-0", "privacy-1")
    assert added.exit_code == 0 and "mine: 2 papers" in added.stderr
    listed = json.loads(papers_cli("tags", "--format", "json").stdout)
    assert listed == [{"tag": "mine", "papers": ["privacy-0", "privacy-1"], "not": [], "seen": []}]

    def ids(*extra):
        result = papers_cli("like", "--tag", "mine", "-k", "6", "--format", "json", *extra)
        assert result.exit_code == 0, result.output
        return [row["id"] for row in json.loads(result.stdout)]

    first = ids()
    assert not {"privacy-0", "privacy-1"} & set(first) and first[0].startswith("privacy")
    # Seen: left out only with --exclude-seen
    assert papers_cli("tags", "seen", "mine", first[0]).exit_code == 0
    assert first[0] in ids() and first[0] not in ids("--exclude-seen", "mine")
    # Not interested: a negative seed of the tag's profile, never listed, its neighbours pushed down
    assert papers_cli("tags", "not", "mine", "between-0").exit_code == 0
    unlike = ids()
    assert "between-0" not in unlike
    scores = {row["id"]: row["score"] for row in json.loads(
        papers_cli("like", "--tag", "mine", "-k", "16", "--format", "json").stdout)}
    before = {row["id"]: row["score"] for row in json.loads(
        papers_cli("like", "privacy-0", "privacy-1", "-k", "16", "--format", "json").stdout)}
    assert scores["between-1"] < before["between-1"]
    assert json.loads(papers_cli("tags", "--format", "json").stdout)[0]["not"] == ["between-0"]
    assert papers_cli("tags", "unmark", "mine", first[0], "--mark", "seen").exit_code == 0
    assert first[0] in ids("--exclude-seen", "mine")
    # Remove, and the errors
    assert papers_cli("tags", "remove", "mine", "privacy-1").exit_code == 0
    assert json.loads(papers_cli("tags", "--format", "json").stdout)[0]["papers"] == ["privacy-0"]
    wrong = papers_cli("like", "--tag", "mine", "video-0")
    assert wrong.exit_code == 2 and "--tag takes its seeds from the tag" in wrong.stderr
    alone = papers_cli("like", "video-0", "--exclude-seen", "mine")
    assert alone.exit_code == 2 and "give --tag too" in alone.stderr
    empty = papers_cli("like", "--tag", "nothing")
    assert empty.exit_code != 0 and "holds no papers" in empty.stderr and "Traceback" not in empty.output
    # The store is the one `papers serve` uses: beside the index
    assert (workdir / "indexes" / "default" / "tags.sqlite").is_file()


def test_pair_loss_counts_weighted_mistakes_and_half_ties():
    assert reviewers.pair_loss([3, 2, 1], [5, 3, 1]) == (0.0, 8.0)  # all agree; weights 2 + 4 + 2
    assert reviewers.pair_loss([1, 2, 3], [5, 3, 1]) == (8.0, 8.0)  # all against
    assert reviewers.pair_loss([1, 1, 0], [5, 3, 3]) == (1.0, 4.0)  # the (5, 3) tie costs half of 2
    costs = np.array([[1.0, 0.0], [2.0, 2.0]])
    weights = np.array([[4.0, 4.0], [4.0, 4.0]])
    figures = reviewers.loss_figures(costs, weights, ["a", "b"], draws=200)
    assert figures.loss == pytest.approx((1 / 8 + 4 / 8) / 2)
    assert figures.low <= figures.loss <= figures.high and figures.sd > 0


def write_reviewer_folder(folder: Path) -> Path:
    """Two researchers (privacy, video), each rating two of their topic's papers high and two others low."""
    folder.mkdir(parents=True, exist_ok=True)
    write_corpus(folder, two_topic_papers(), "papers.jsonl")
    profiles_ = [{"sample": sample, "researcher": name, "papers": [f"{name}-0", f"{name}-{sample}"]}
                 for sample in (1, 2) for name in ("privacy", "video")]
    (folder / "profiles.jsonl").write_text("".join(json.dumps(p) + "\n" for p in profiles_), encoding="utf-8")
    lines = ["researcher\tpaper_id\texpertise"]
    for name, other in (("privacy", "video"), ("video", "privacy")):
        lines += [f"{name}\t{name}-4\t5", f"{name}\t{name}-5\t4.5", f"{name}\tbetween-0\t2", f"{name}\t{other}-3\t1"]
    (folder / "ratings.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_evaluate_profiles_reports_the_loss_with_its_spread(workdir, papers_cli):
    folder = write_reviewer_folder(workdir / "reviewers")
    result = papers_cli("evaluate", "--profiles", "reviewers", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["profiles_loss"]
    assert data["researchers"] == 2 and data["samples"] == 2 and data["profiles"] == 4
    assert 0.0 <= data["loss"] < 0.2 and data["interval"][0] <= data["loss"] <= data["interval"][1]
    table = papers_cli("evaluate", "--profiles", str(folder)).stdout
    assert "loss" in table and "95% interval" in table
    # Beside a query-by-example collection's MAP / NDCG%20: one report, one JSON document
    (workdir / "queries.tsv").write_text("query_id\tpaper_id\tfacet\npriv\tprivacy-0\tmethod\n", encoding="utf-8")
    (workdir / "qrels.txt").write_text("".join(f"priv 0 privacy-{n} 2\n" for n in range(1, 6)), encoding="utf-8")
    both = papers_cli("evaluate", "--corpus", "reviewers/papers.jsonl", "--queries", "queries.tsv", "--qrels",
                      "qrels.txt", "--profiles", "reviewers", "--format", "json")
    assert both.exit_code == 0, both.output
    together = json.loads(both.stdout)
    assert together["overall"]["map"] > 0 and together["profiles_loss"] == data
    (folder / "ratings.tsv").write_text("researcher\tpaper_id\texpertise\nprivacy\tprivacy-4\tmany\n", encoding="utf-8")
    bad = papers_cli("evaluate", "--profiles", str(folder))
    assert bad.exit_code != 0 and "ratings.tsv line 2" in bad.stderr and "Traceback" not in bad.output
    none = papers_cli("evaluate")
    assert none.exit_code == 2 and "--profiles DIR" in none.stderr
    with pytest.raises(InputError, match="lacks ratings.tsv"):
        (folder / "ratings.tsv").unlink()
        reviewers.read_reviewer_set(folder)


def test_evaluate_reviewers_takes_the_build_and_ranking_as_evaluate_does(workdir, fake_model, papers_cli):
    from recommender.index.request import BuildRequest
    from recommender.query.ranking import RankingRequest

    folder = write_reviewer_folder(workdir / "reviewers")
    asked = reviewers.evaluate_reviewers(
        folder, build=BuildRequest.of(index="own"), ranking=RankingRequest(mode="lexical"), dense_weight=0.5)
    assert asked.build is not None and asked.settings["index"].endswith("own") and asked.settings["mode"] == "lexical"
    keywords = reviewers.evaluate_reviewers(folder, index="own", mode="lexical", dense_weight=0.5)
    assert keywords.build is None and keywords.to_dict() == asked.to_dict()  # the same index, reused
    assert reviewers.evaluate_reviewers(folder).settings["index"].endswith("eval-reviewers")
    with pytest.raises(TypeError, match="not both: mode"):
        reviewers.evaluate_reviewers(folder, ranking=RankingRequest(mode="lexical"), mode="dense")
    with pytest.raises(TypeError, match="not both: index"):
        reviewers.evaluate_reviewers(folder, build=BuildRequest.of(index="own"), index="other")
    with pytest.raises(TypeError, match="evaluate_reviewers.. got an unexpected keyword argument 'pool'"):
        reviewers.evaluate_reviewers(folder, pool="all")
    with pytest.raises(OptionError, match="dense_weight"):
        reviewers.evaluate_reviewers(folder, dense_weight=2.0)
    # The command's build settings reach the profiles' index as they reach the collection's
    windows = papers_cli("evaluate", "--profiles", "reviewers", "--index", "win", "--chunking", "windows",
                         "--format", "json")
    assert windows.exit_code == 0, windows.output
    assert json.loads(windows.stdout)["profiles_loss"]["settings"]["chunking"] == "windows"


def require_reviewers() -> Path:
    """The reviewers dev set (../shared/eval/reviewers-dev): skipped without it, failed under CI=true."""
    if not REVIEWERS.is_dir():
        message = f"{REVIEWERS} is missing: the reviewers dev set is needed for this test"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so it must be there)", pytrace=False)
        pytest.skip(message)
    return REVIEWERS


def test_the_reviewers_dev_set_reads_as_its_readme_says():
    data = reviewers.read_reviewer_set(require_reviewers())
    assert len(data.researchers) == 33
    assert sorted({p.sample for p in data.profiles}) == list(range(1, 11))
    assert all(2 <= len(p.papers) <= 20 for p in data.profiles)
    assert all(1 <= grade <= 5 for rated in data.ratings.values() for grade in rated.values())


@pytest.fixture(scope="module")
def server_index(tmp_path_factory):
    pytest.importorskip("fastapi", reason="papers serve needs the serve extra: pip install -e '.[serve]'")
    from serving import build_fake_index

    return build_fake_index(tmp_path_factory.mktemp("profile-serve") / "index", two_topic_papers())


def test_the_api_marks_papers_and_gives_the_clis_json(server_index, fake_model):
    from click.testing import CliRunner
    from serving import start_server

    from recommender.cli import main

    running = start_server(server_index)
    try:
        assert running.json("/api/tags/mine/privacy-0", method="PUT")[0] == 200
        assert running.json("/api/tags/mine/video-0", method="PUT")[0] == 200
        assert running.json("/api/marks/not/mine/between-0", method="PUT") == (
            200, {"tag": "mine", "kind": "not", "papers": ["between-0"]})
        status, first = running.json("/api/tags/mine/recommendations?k=3&why=true")
        assert status == 200 and first[0]["because"] and "between-0" not in [row["id"] for row in first]
        assert running.json(f"/api/marks/seen/mine/{first[0]['id']}", method="PUT")[0] == 200
        assert running.json("/api/marks/seen/mine") == (200, {"tag": "mine", "kind": "seen", "papers": [first[0]["id"]]})
        status, unseen = running.json("/api/tags/mine/recommendations?k=3&why=true&exclude_seen=mine")
        cli = CliRunner().invoke(main, ["like", "--tag", "mine", "-k", "3", "--why", "--exclude-seen", "mine",
                                        "--index", str(server_index), "--format", "json"], catch_exceptions=False)
        assert status == 200 and unseen == json.loads(cli.output)  # the same store, the same JSON
        assert first[0]["id"] not in [row["id"] for row in unseen]
        assert running.json(f"/api/marks/seen/mine/{first[0]['id']}", method="DELETE")[1]["papers"] == []
        assert running.json("/api/marks/maybe/mine")[0] == 422
    finally:
        running.stop()
    assert not any("Traceback" in line for line in running.errors), running.errors


@pytest.mark.model
def test_the_profile_ranking_reaches_its_loss_on_reviewers_dev(workdir):
    # Encodes the 683 papers with the real model (a few minutes on 2 cores), then ranks every researcher's
    # rated papers as `like` ranks their profile. Shipped: 0.173 (bootstrap sd 0.021) on this dev half
    # (docs/profiles.md); the topics profile before gave 0.184, the centroid 0.194. Room for float noise.
    result = reviewers.evaluate_reviewers(require_reviewers())
    assert result.profiles == 330 and len(result.figures.researchers) == 33
    assert result.figures.loss <= 0.176
    assert result.figures.low < result.figures.loss < result.figures.high
