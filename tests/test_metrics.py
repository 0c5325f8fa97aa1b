"""Tests for recommender.metrics: hand-worked metric values, edge cases,
qrels / queries parsing, a cross-check against ir-measures (trec_eval) when
installed, and sanity checks on the CSFCube dev data when present."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from conftest import require_csfcube
from recommender.errors import InputError
from recommender.evaluation.metrics import (
    METRIC_NAMES,
    QueryScores,
    dcg,
    mean_scores,
    read_qrels,
    read_queries,
    score_query,
)


L3 = math.log2(3)  # discount of rank 3; ranks 1 and 2 are undiscounted

# --------------------------------------------------------------------------
# Hand-worked examples
# --------------------------------------------------------------------------

# Pool of 5: a=3 b=2 c=1 d=0 e=2; relevant (>=2): a, b, e -> R = 3.
POOL5 = {"a": 3, "b": 2, "c": 1, "d": 0, "e": 2}

# Pool of 10: p=3 q=2 r=1, n1..n7 = 0; relevant: p, q -> R = 2.
POOL10 = {"p": 3, "q": 2, "r": 1, **{f"n{i}": 0 for i in range(1, 8)}}

CASES = [
    pytest.param(
        # ranking c(1) a(3) x(unjudged->0) b(2) d(0); e never retrieved.
        ["c", "a", "x", "b", "d"], POOL5, 2,
        dict(
            # relevant at ranks 2 and 4: (1/2 + 2/4) / R=3 = 1/3
            map=1 / 3,
            # DCG@10 = 1 + 3/1 + 0/log2 3 + 2/log2 4 + 0 = 5
            # ideal 3,2,2,1,0: 3 + 2/1 + 2/log2 3 + 1/log2 4 = 5.5 + 2/log2 3
            ndcg_at_10=5 / (5.5 + 2 / L3),
            # cutoff int(0.2 * 5) = 1: DCG@1 = 1, ideal@1 = 3
            ndcg_pct_20=1 / 3,
            # 2 of the 3 relevant in the top 20
            recall_at_20=2 / 3,
            # first relevant (a) at rank 2
            mrr=1 / 2,
        ),
        id="pool5-mixed",
    ),
    pytest.param(
        # same ranking, relevant_at=1: relevant a, b, c, e -> R = 4
        ["c", "a", "x", "b", "d"], POOL5, 1,
        dict(
            # relevant at ranks 1, 2, 4: (1/1 + 2/2 + 3/4) / 4 = 2.75 / 4
            map=2.75 / 4,
            ndcg_at_10=5 / (5.5 + 2 / L3),  # NDCG ignores relevant_at
            ndcg_pct_20=1 / 3,
            recall_at_20=3 / 4,
            mrr=1.0,
        ),
        id="pool5-relevant_at-1",
    ),
    pytest.param(
        # n1 q r p n2..n7 (whole pool of 10)
        ["n1", "q", "r", "p"] + [f"n{i}" for i in range(2, 8)], POOL10, 2,
        dict(
            # q at rank 2, p at rank 4: (1/2 + 2/4) / 2 = 0.5
            map=0.5,
            # DCG = 0 + 2/1 + 1/log2 3 + 3/log2 4 = 3.5 + 1/log2 3
            # ideal 3,2,1: 3 + 2/1 + 1/log2 3 = 5 + 1/log2 3
            ndcg_at_10=(3.5 + 1 / L3) / (5 + 1 / L3),
            # cutoff int(0.2 * 10) = 2: DCG@2 = 0 + 2 = 2, ideal@2 = 3 + 2 = 5
            ndcg_pct_20=2 / 5,
            recall_at_20=1.0,
            mrr=1 / 2,
        ),
        id="pool10",
    ),
    pytest.param(
        # ranks 1 and 2 carry the same weight in CSFCube's DCG: swapping
        # n1 and p changes AP/RR but not NDCG (log2(i+1) NDCG would change).
        ["p", "n1", "q"], {"p": 3, "q": 3, "n1": 0}, 2,
        dict(
            # p at 1, q at 3: (1/1 + 2/3) / 2 = 5/6
            map=5 / 6,
            # DCG = 3 + 0/1 + 3/log2 3; ideal = 3 + 3/1 + 0
            ndcg_at_10=(3 + 3 / L3) / 6,
            # cutoff max(1, int(0.6)) = 1: 3 / 3
            ndcg_pct_20=1.0,
            recall_at_20=1.0,
            mrr=1.0,
        ),
        id="rank1-first",
    ),
    pytest.param(
        ["n1", "p", "q"], {"p": 3, "q": 3, "n1": 0}, 2,
        dict(
            # p at 2, q at 3: (1/2 + 2/3) / 2 = 7/12
            map=7 / 12,
            # DCG = 0 + 3/1 + 3/log2 3: same as above
            ndcg_at_10=(3 + 3 / L3) / 6,
            # cutoff 1: DCG@1 = 0
            ndcg_pct_20=0.0,
            recall_at_20=1.0,
            mrr=1 / 2,
        ),
        id="rank1-second",
    ),
    pytest.param(
        # 25 docs: h1 at rank 1, h2 at rank 21, the rest unjudged
        ["h1"] + [f"u{i}" for i in range(19)] + ["h2"] + [f"v{i}" for i in range(4)],
        {"h1": 2, "h2": 2}, 2,
        dict(
            # (1/1 + 2/21) / 2
            map=(1 + 2 / 21) / 2,
            # DCG@10 = 2; ideal 2,2: 2 + 2/1 = 4
            ndcg_at_10=0.5,
            # cutoff max(1, int(0.4)) = 1: 2 / 2
            ndcg_pct_20=1.0,
            # h2 is at rank 21, outside the top 20
            recall_at_20=1 / 2,
            mrr=1.0,
        ),
        id="recall-cutoff-20",
    ),
    pytest.param(
        # the only relevant doc at rank 11: just outside NDCG@10
        [f"u{i}" for i in range(10)] + ["g"], {"g": 3}, 2,
        dict(map=1 / 11, ndcg_at_10=0.0, ndcg_pct_20=0.0, recall_at_20=1.0, mrr=1 / 11),
        id="ndcg-cutoff-10",
    ),
    pytest.param(
        # oracle order: everything is 1 (R = 3 <= 20)
        ["a", "b", "e", "c", "d"], POOL5, 2,
        dict(map=1.0, ndcg_at_10=1.0, ndcg_pct_20=1.0, recall_at_20=1.0, mrr=1.0),
        id="oracle",
    ),
    pytest.param(
        # no doc reaches grade 2: binary metrics 0; graded NDCG still counts
        # grade 1. DCG = 1 + 0 = ideal -> 1; cutoff max(1, int(0.4)) = 1 -> 1/1
        ["a", "b"], {"a": 1, "b": 0}, 2,
        dict(map=0.0, ndcg_at_10=1.0, ndcg_pct_20=1.0, recall_at_20=0.0, mrr=0.0),
        id="no-relevant-judged",
    ),
    pytest.param(
        # all grades 0: ideal DCG is 0 -> NDCG defined as 0
        ["a", "b"], {"a": 0, "b": 0}, 2,
        dict(map=0.0, ndcg_at_10=0.0, ndcg_pct_20=0.0, recall_at_20=0.0, mrr=0.0),
        id="all-zero-grades",
    ),
    pytest.param(
        [], {"a": 2, "b": 3}, 2,
        dict(map=0.0, ndcg_at_10=0.0, ndcg_pct_20=0.0, recall_at_20=0.0, mrr=0.0),
        id="empty-ranking",
    ),
    pytest.param(
        ["a", "b"], {}, 2,
        dict(map=0.0, ndcg_at_10=0.0, ndcg_pct_20=0.0, recall_at_20=0.0, mrr=0.0),
        id="no-judgements",
    ),
    pytest.param(
        # only unjudged docs retrieved: they count as grade 0
        ["x", "y"], {"a": 3}, 2,
        dict(map=0.0, ndcg_at_10=0.0, ndcg_pct_20=0.0, recall_at_20=0.0, mrr=0.0),
        id="only-unjudged",
    ),
]


@pytest.mark.parametrize("ranking, judgements, relevant_at, expected", CASES)
def test_score_query_hand_worked(ranking, judgements, relevant_at, expected):
    scores = score_query(ranking, judgements, relevant_at, query_id="q")
    assert scores.query_id == "q"
    for name in METRIC_NAMES:
        assert getattr(scores, name) == pytest.approx(expected[name], abs=1e-12), name


def test_score_query_default_relevant_at_is_2_and_query_id_optional():
    scores = score_query(["c", "a", "x", "b", "d"], POOL5)
    assert scores.query_id == ""
    assert scores.map == pytest.approx(1 / 3)


def test_ndcg_pct_20_cutoff_uses_pool_size_not_ranking_length():
    # 15 judged docs -> cutoff int(0.2 * 15) = 3; ranking only 1 doc long.
    judgements = {f"d{i}": 0 for i in range(12)} | {"a": 1, "b": 1, "c": 1}
    scores = score_query(["a"], judgements)
    # DCG@3 = 1; ideal 1,1,1 @3 = 1 + 1 + 1/log2 3
    assert scores.ndcg_pct_20 == pytest.approx(1 / (2 + 1 / L3))


def test_negative_grades_count_as_zero_gain():
    scores = score_query(["a", "b"], {"a": -1, "b": 1})
    # DCG = 0 + 1/1 = 1; ideal 1,0 = 1
    assert scores.ndcg_at_10 == pytest.approx(1.0)


def test_repeated_document_in_ranking_is_an_error():
    with pytest.raises(ValueError, match=r"ranking for query 'q' lists 'a' twice"):
        score_query(["a", "b", "a"], {"a": 2}, query_id="q")


@pytest.mark.parametrize(
    "gains, k, expected",
    [
        ([], 10, 0.0),
        ([3], 10, 3.0),
        # 1 + 1/1 + 1/log2 3 + 1/log2 4
        ([1, 1, 1, 1], 10, 2.5 + 1 / L3),
        # cut at k = 2: 1 + 1
        ([1, 1, 1, 1], 2, 2.0),
        # 3 + 2/1 + 3/log2 3 + 0 + 1/log2 5 + 2/log2 6
        ([3, 2, 3, 0, 1, 2], 6, 5 + 3 / L3 + 1 / math.log2(5) + 2 / math.log2(6)),
    ],
)
def test_dcg_csfcube_form(gains, k, expected):
    assert dcg(gains, k) == pytest.approx(expected)


def test_mean_scores():
    per_query = [
        QueryScores("q1", map=0.5, ndcg_at_10=1.0, ndcg_pct_20=0.25, recall_at_20=0.0, mrr=1.0),
        QueryScores("q2", map=0.25, ndcg_at_10=0.0, ndcg_pct_20=0.75, recall_at_20=1.0, mrr=0.5),
    ]
    means = mean_scores(per_query)
    assert list(means) == list(METRIC_NAMES)
    assert means == pytest.approx(
        {"map": 0.375, "ndcg_at_10": 0.5, "ndcg_pct_20": 0.5, "recall_at_20": 0.5, "mrr": 0.75}
    )


def test_mean_scores_empty_is_an_error():
    with pytest.raises(ValueError, match="no query scores"):
        mean_scores([])


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------

def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def test_read_qrels(tmp_path):
    path = _write(
        tmp_path, "qrels.txt",
        "q1 0 d1 3\nq1 0 d2 0\r\n\n  \nq2\tQ0\td1\t-1\nq1 0 d3 2  \n",
    )
    qrels = read_qrels(path)
    assert qrels == {"q1": {"d1": 3, "d2": 0, "d3": 2}, "q2": {"d1": -1}}
    assert list(qrels["q1"]) == ["d1", "d2", "d3"]
    assert read_qrels(str(path)) == qrels


@pytest.mark.parametrize(
    "text, message",
    [
        ("q1 0 d1 3\nq1 0 d2\n",
         "line 2: expected 'query_id 0 doc_id relevance', got 'q1 0 d2'"),
        ("q1 0 d1 high\n",
         "line 1: expected 'query_id 0 doc_id relevance', got 'q1 0 d1 high'"),
        ("q1 0 d1 1.5\n",
         "line 1: expected 'query_id 0 doc_id relevance', got 'q1 0 d1 1.5'"),
        ("\nq1 0 d1 1 extra\n",
         "line 2: expected 'query_id 0 doc_id relevance', got 'q1 0 d1 1 extra'"),
        ("q1 0 d1 1\nq1 0 d1 2\n",
         "line 2: document d1 judged twice for query q1"),
        ("q1 0 " + "d" * 100 + " 1 x\n",
         "line 1: expected 'query_id 0 doc_id relevance', got 'q1 0 " + "d" * 72 + "...'"),
    ],
)
def test_read_qrels_malformed(tmp_path, text, message):
    path = _write(tmp_path, "qrels.txt", text)
    with pytest.raises(InputError) as caught:
        read_qrels(path)
    assert str(caught.value) == f"{path} {message}"


@pytest.mark.parametrize("reader", [read_qrels, read_queries])
def test_unreadable_files(tmp_path, reader):
    missing = tmp_path / "missing.txt"
    with pytest.raises(InputError) as caught:
        reader(missing)
    assert str(caught.value) == f"{missing}: no such file"

    with pytest.raises(InputError) as caught:
        reader(tmp_path)
    assert str(caught.value) == f"{tmp_path}: is a directory, not a file"

    binary = _write(tmp_path, "binary.txt", b"q1 0 d1 \xff\n")
    with pytest.raises(InputError) as caught:
        reader(binary)
    assert str(caught.value) == f"{binary}: not UTF-8 text (invalid start byte at byte 8)"


def test_read_qrels_empty(tmp_path):
    path = _write(tmp_path, "qrels.txt", "\n \n")
    with pytest.raises(InputError) as caught:
        read_qrels(path)
    assert str(caught.value) == f"{path}: no judgements"


def test_read_queries(tmp_path):
    text = "\ufeffquery_id\tpaper_id\tfacet\r\nq1_method\t1\tmethod\r\n\nq2_result\t2\tresult\n"
    path = _write(tmp_path, "queries.tsv", text)
    assert read_queries(path) == [("q1_method", "1", "method"), ("q2_result", "2", "result")]


def test_read_queries_without_header(tmp_path):
    path = _write(tmp_path, "queries.tsv", "q1\t1\tbackground\n")
    assert read_queries(path) == [("q1", "1", "background")]


@pytest.mark.parametrize(
    "text, message",
    [
        ("query_id\tpaper_id\tfacet\nq1\t1\n",
         "line 2: expected 'query_id<TAB>paper_id<TAB>facet', got 'q1\\t1'"),
        ("q1 1 method\n",
         "line 1: expected 'query_id<TAB>paper_id<TAB>facet', got 'q1 1 method'"),
        ("q1\t\tmethod\n",
         "line 1: expected 'query_id<TAB>paper_id<TAB>facet', got 'q1\\t\\tmethod'"),
        ("q1\t1\tmethod\textra\n",
         "line 1: expected 'query_id<TAB>paper_id<TAB>facet', got 'q1\\t1\\tmethod\\textra'"),
        # a header is only allowed first
        ("q1\t1\tmethod\nquery_id\tpaper_id\tfacet\nq1\t1\tmethod\n",
         "line 3: query q1 already listed on line 1"),
        ("query_id\tpaper_id\tfacet\n\n",
         ": no queries"),
    ],
)
def test_read_queries_malformed(tmp_path, text, message):
    path = _write(tmp_path, "queries.tsv", text)
    with pytest.raises(InputError) as caught:
        read_queries(path)
    expected = f"{path}{message}" if message.startswith(":") else f"{path} {message}"
    assert str(caught.value) == expected


# --------------------------------------------------------------------------
# Cross-check against ir-measures (pytrec_eval / trec_eval)
# --------------------------------------------------------------------------

def _random_query(rng: random.Random):
    """Random graded judgements and a ranking that mixes judged docs, unjudged
    docs and leaves some judged docs out."""
    pool = rng.randint(0, 60)
    judgements = {f"d{i}": rng.choice([0, 0, 0, 1, 1, 2, 3]) for i in range(pool)}
    ranking = [doc for doc in judgements if rng.random() < 0.85]
    ranking += [f"u{i}" for i in range(rng.randint(0, 15))]
    rng.shuffle(ranking)
    return judgements, ranking


@pytest.mark.parametrize("relevant_at", [1, 2, 3])
def test_cross_check_with_ir_measures(relevant_at):
    import ir_measures
    from ir_measures import AP, RR, R

    rng = random.Random(1234 + relevant_at)
    measures = {"map": AP(rel=relevant_at), "mrr": RR(rel=relevant_at),
                "recall_at_20": R(rel=relevant_at) @ 20}
    qrels, run, ours = [], [], {}
    for n in range(200):
        query_id = f"q{n}"
        judgements, ranking = _random_query(rng)
        if not judgements or not ranking:
            continue  # trec_eval reports nothing for such queries
        ours[query_id] = score_query(ranking, judgements, relevant_at, query_id=query_id)
        qrels += [ir_measures.Qrel(query_id, doc, grade) for doc, grade in judgements.items()]
        # strictly decreasing scores so trec_eval keeps our order
        run += [ir_measures.ScoredDoc(query_id, doc, float(len(ranking) - rank))
                for rank, doc in enumerate(ranking)]

    theirs = {(m.query_id, m.measure): m.value
              for m in ir_measures.iter_calc(list(measures.values()), qrels, run)}
    assert len(ours) > 150
    for query_id, scores in ours.items():
        for name, measure in measures.items():
            assert getattr(scores, name) == pytest.approx(
                theirs.get((query_id, measure), 0.0), abs=1e-9
            ), (query_id, name)


# --------------------------------------------------------------------------
# The CSFCube dev data
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def csfcube():
    folder = require_csfcube()
    return read_qrels(folder / "qrels.txt"), read_queries(folder / "queries.tsv")


def test_csfcube_files_parse(csfcube):
    qrels, queries = csfcube
    assert len(queries) == 28
    assert {facet for _, _, facet in queries} == {"background", "method", "result"}
    for query_id, _, _ in queries:
        assert len(qrels[query_id]) >= 20  # every query has a pool to rank
        assert set(qrels[query_id].values()) <= {0, 1, 2, 3}


def test_csfcube_random_ranking_scores_low(csfcube):
    qrels, queries = csfcube
    rng = random.Random(0)
    per_query = []
    for query_id, _, _ in queries:
        ranking = list(qrels[query_id])
        rng.shuffle(ranking)
        per_query.append(score_query(ranking, qrels[query_id], query_id=query_id))
    means = mean_scores(per_query)
    # random ranking of the pools: MAP ~0.12 (SPECTER gets 0.336)
    assert means["map"] < 0.2
    assert means["ndcg_pct_20"] < 0.35


def test_csfcube_oracle_ranking_is_perfect(csfcube):
    qrels, queries = csfcube
    per_query = []
    for query_id, _, _ in queries:
        judgements = qrels[query_id]
        ranking = sorted(judgements, key=lambda doc: -judgements[doc])
        per_query.append(score_query(ranking, judgements, query_id=query_id))
    means = mean_scores(per_query)
    assert means["map"] == 1.0
    assert means["ndcg_pct_20"] == 1.0
    assert means["ndcg_at_10"] == 1.0
    assert means["mrr"] == 1.0
