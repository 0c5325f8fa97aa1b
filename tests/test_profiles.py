"""Several seeds as one profile: topics of the seeds, `like` over them, and the evaluation protocols."""

from __future__ import annotations

import json

import numpy as np
import pytest

from corpus import PRIVACY, TWO_TOPIC_SEEDS, VIDEO, two_topic_papers, write_corpus
from recommender import build_index
from recommender.evaluation import profiles as protocol
from recommender.query import profiles



@pytest.fixture
def index(open_index, workdir, fake_model):
    build_index([write_corpus(workdir / "in", two_topic_papers())])
    return open_index()


SEEDS = TWO_TOPIC_SEEDS


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_seeds_on_two_topics_find_papers_of_both_not_the_space_between(index, mode):
    found = [result.id for result in index.like(*SEEDS, k=8, mode=mode)]
    assert {paper for paper in found[:8] if not paper.startswith("between")} == {
        "privacy-2", "privacy-3", "privacy-4", "privacy-5", "video-2", "video-3", "video-4", "video-5"}
    # The centroid of the four (`like` before topics) ranks the papers between the topics first.
    rows = np.arange(len(index))
    seeds = [index.resolve(seed) for seed in SEEDS]
    centroid = index.score_rows(seeds, rows, mode, profile="centroid")
    best = index.ids[int(np.argmax(np.where(np.isin(rows, seeds), -np.inf, centroid)))]
    assert best.startswith("between")


def test_seeds_on_one_topic_are_one_centroid(index):
    # The topics profile (`like` before seeds were scored one by one), kept for comparison.
    seeds = [index.resolve(seed) for seed in ("privacy-0", "privacy-1", "privacy-2")]
    rows = np.arange(len(index))
    assert profiles.seed_clusters(index.vectors_at(seeds)) == [[0, 1, 2]]
    np.testing.assert_array_equal(index.score_rows(seeds, rows, profile="topics"),
                                  index.score_rows(seeds, rows, profile="centroid"))


def test_several_seeds_with_negatives_and_papers_from_a_file(index):
    from recommender.corpus.papers import Paper

    outside = Paper(id="mine", title="Video frames", abstract=" ".join(VIDEO.split()[:8]) + ".")
    found = [r.id for r in index.like("privacy-0", "privacy-1", "video-1", papers=[outside], k=10,
                                      not_=["between-0"])]
    assert "between-0" not in found and not {"privacy-0", "privacy-1", "video-1"} & set(found)
    assert {paper.split("-")[0] for paper in found[:10]} >= {"privacy", "video"}
    assert not [paper for paper in found[:4] if paper.startswith("between")]  # the centroid's first picks
    # --why: the terms shared with the seeds as a whole
    why = index.like("privacy-0", "video-0", k=2, why=True)
    assert all(result.why for result in why)


def test_unknown_profile_is_an_input_error(index):
    from recommender.errors import InputError

    with pytest.raises(InputError, match="unknown profile .mean.: use one of seeds, topics, centroid"):
        index.score_rows([0, 1], [2, 3], profile="mean")


def test_cli_like_with_several_seeds(workdir, papers_cli):
    write_corpus(workdir / "in", two_topic_papers())
    assert papers_cli("build", "in").exit_code == 0
    result = papers_cli("like", *SEEDS, "-k", "4", "--format", "json")
    assert result.exit_code == 0
    ids = [row["id"] for row in json.loads(result.stdout)]
    assert {paper.split("-")[0] for paper in ids} == {"privacy", "video"}


def test_seed_clusters_best_topic_and_svm_over_arrays():
    rng = np.random.default_rng(0)
    a, b = np.eye(8)[0], np.eye(8)[1]
    vectors = np.stack([a + 0.1 * rng.normal(size=8) for _ in range(3)] + [b + 0.1 * rng.normal(size=8) for _ in range(2)])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert profiles.seed_clusters(vectors) == [[0, 1, 2], [3, 4]]
    assert profiles.seed_clusters(vectors[:1]) == [[0]]
    assert profiles.best_topic(np.array([[0.1, 0.9], [0.5, 0.2]])).tolist() == pytest.approx([0.5, 0.9])
    assert profiles.best_and_mean(np.array([[0.0, 1.0], [1.0, 0.0]]), 0.5).tolist() == pytest.approx([0.75, 0.75])
    features = np.vstack([vectors, -vectors])
    positive = np.zeros(len(features), dtype=bool)
    positive[:2] = True
    scores = profiles.svm_scores(features, positive, c=1.0)
    assert scores[:2].min() > scores[5:].max()
    with pytest.raises(ValueError, match="shape"):
        profiles.best_topic(np.zeros(3))


QRELS = {
    "p_method": {"p": 3, "r1": 2, "r2": 3, "r3": 2, "r4": 2, "n1": 0, "n2": 1},
    "q_method": {"q": 3, "s1": 2, "s2": 2, "s3": 3, "n1": 2, "n3": 0},
    "q_result": {"s1": 2, "s2": 2, "t1": 1},  # two relevant: no profile
}
QUERIES = [("p_method", "p", "method"), ("q_method", "q", "method"), ("q_result", "q", "result")]


def test_one_topic_profiles_seed_the_query_paper_and_half_its_relevant_papers():
    single = protocol.one_topic(QUERIES, QRELS)
    assert [p.name for p in single] == ["p_method", "q_method"]
    first = single[0]
    assert first.seeds[0] == "p" and len(first.seeds) == 3  # the query paper and 2 of its 4 relevant
    assert set(first.seeds[1:]) < {"r1", "r2", "r3", "r4"}
    assert set(first.judged) == set(QRELS["p_method"]) - set(first.seeds)
    assert protocol.one_topic(QUERIES, QRELS) == single  # a fixed draw


def test_mixed_profiles_join_seeds_pools_and_the_best_grade():
    single = protocol.one_topic(QUERIES, QRELS)
    (both,) = protocol.mixed(single, 2)
    assert both.name == "p_method+q_method" and both.papers == ("p", "q") and both.topics == 2
    assert both.seeds == single[0].seeds + single[1].seeds
    assert both.judged["n1"] == 2  # 0 for p, 2 for q
    assert not set(both.seeds) & set(both.judged)
    assert protocol.mixed(single, 3) == []  # only two query papers
    # Two queries of one paper never make a mixed profile.
    same_paper = [single[1], protocol.Profile("q_other", ("q",), ("q", "s9"), {"s8": 2})]
    assert protocol.mixed(same_paper, 2) == []


def test_evaluate_reports_both_protocols(workdir, papers_cli):
    write_corpus(workdir, two_topic_papers(), "corpus.jsonl")
    (workdir / "queries.tsv").write_text("query_id\tpaper_id\tfacet\npriv\tprivacy-0\tmethod\nvid\tvideo-0\tmethod\n",
                                         encoding="utf-8")
    between = [f"between-{number}" for number in range(4)]
    lines = [f"priv 0 privacy-{n} 2" for n in range(1, 6)] + [f"vid 0 video-{n} 2" for n in range(1, 6)]
    lines += [f"{query} 0 {paper} 0" for query in ("priv", "vid") for paper in between]
    (workdir / "qrels.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = ["--corpus", "corpus.jsonl", "--queries", "queries.tsv", "--qrels", "qrels.txt"]
    data = json.loads(papers_cli("evaluate", *files, "--format", "json").stdout)
    assert [(row["protocol"], row["profiles"]) for row in data["profiles"]] == [("one topic", 2), ("mixed", 1)]
    # Each topic's papers above the four between them: the seeds' topics are scored one by one.
    assert data["profiles"][1]["map"] == 100.0
    table = papers_cli("evaluate", *files).stdout
    assert "\n\nseveral seeds as one profile, ranked as `like` ranks them:\nprotocol " in table
    assert table.splitlines()[-1].split()[:3] == ["mixed", "1", "100.0"]


def test_seeds_are_drawn_from_the_papers_the_index_holds():
    qrels = {"p_method": {"p": 3, "gone": 2, "r1": 2, "r2": 2, "r3": 2}}
    (profile,) = protocol.one_topic([("p_method", "p", "method")], qrels, present={"p", "r1", "r2", "r3"})
    assert "gone" not in profile.seeds and len(profile.seeds) == 3  # half of the four relevant, from the three held
    assert profile.judged["gone"] == 2  # a target never retrieved


@pytest.mark.parametrize("count, distance", [(12, 0.4), (40, 0.4), (40, 0.7), (300, 0.5)])
def test_seed_clusters_are_scipys_average_linkage_cut(count, distance):
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(count)
    centres = rng.normal(size=(4, 16))
    vectors = centres[rng.integers(0, 4, count)] + 0.6 * rng.normal(size=(count, 16))
    labels = fcluster(linkage(pdist(vectors, "cosine"), "average"), distance, "distance")
    expected = sorted(sorted(np.flatnonzero(labels == label).tolist()) for label in set(labels.tolist()))
    assert profiles.seed_clusters(vectors, distance) == expected
    assert 1 < len(expected) < count  # the cut falls inside the tree


def test_like_with_several_seeds_stays_light(index):
    import subprocess
    import sys

    code = ("import sys\nfrom recommender import PaperIndex\n"
            f"with PaperIndex.open({str(index.stored.index_dir)!r}) as index:\n"
            f"    assert len(index.like(*{SEEDS!r}, k=3)) == 3\n"
            "print(sorted(m for m in ('scipy', 'sklearn', 'torch') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
