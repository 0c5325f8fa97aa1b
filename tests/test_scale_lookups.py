"""At 10k papers, the lookups that do not grow with the corpus give exactly what a
straightforward scan gives: rows named by IDs, handles and prefixes, the tie-break
order, TF-IDF scores bit for bit, the top rows by TF-IDF score (with and without the bound that
prunes them), and the lists of `like` and `related-work`."""

import json
import random
from unittest import mock

import numpy as np
import pytest

from fakes import FakeEncoder
from recommender import PaperIndex, build_index
from recommender.embed import loading
from recommender.index import build, keys, lexical as lexical_module
from recommender.index.lexical import LexicalIndex, combine
from recommender.query import paper_index as recommender_module
from recommender.reading.related import related_work

PAPERS = 10_000


def synthetic_papers(count: int) -> list[dict]:
    """Zipf-like words, few distinct titles (so handles tie: X, X-2, ...), IDs sharing prefixes and case."""
    generator = random.Random(11)
    words = [f"{a}{b}{c}" for a in ("pro", "neu", "gra", "lin", "den", "spa") for b in "aeiou" for c in ("ral", "nt", "x", "lity", "mer")]
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    titles = ["Graph Models", "graph models", "Straße Networks", "STRASSE Networks", "Ωmega", "Dense Retrieval"]
    titles += [" ".join(generator.sample(words, 2)).title() for _ in range(300)]
    papers = []
    for number in range(count):
        style = number % 4
        paper_id = (f"2101.{number:05d}", f"P{number}", f"Aa-{number:x}", f"straße-{number}")[style]
        abstract = " ".join(generator.choices(words, weights, k=generator.randint(20, 70))) + "."
        papers.append({"id": paper_id, "title": generator.choice(titles), "abstract": abstract})
    return papers


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scale")
    corpus = folder / "papers.jsonl"
    corpus.write_text("".join(json.dumps(paper) + "\n" for paper in synthetic_papers(PAPERS)), encoding="utf-8")
    encoder = FakeEncoder()
    with mock.patch.object(loading, "load_encoder", lambda model: encoder), \
            mock.patch.object(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None):
        build_index([corpus], index=folder / "idx")
    with PaperIndex.open(folder / "idx") as opened:
        opened.use_query_encoder(encoder)  # `why`'s sentence pairs (the build kept no query encoder)
        yield opened


# ---------------------------------------------------------------- the straightforward versions


def scan_matching_rows(reference: str, ids: list[str], handles: list[str]) -> list[int]:
    exact = [row for row, paper_id in enumerate(ids) if paper_id == reference]
    if exact:
        return exact
    folded = reference.casefold()
    by_handle = [row for row, handle in enumerate(handles) if handle.casefold() == folded]
    if len(by_handle) > 1:
        by_handle = [row for row in by_handle if handles[row] == reference] or by_handle
    if by_handle:
        return by_handle
    return [row for row, paper_id in enumerate(ids) if paper_id.casefold().startswith(folded)]


def sorting_tiebreak(ids: list[str]) -> np.ndarray:
    order = sorted(range(len(ids)), key=ids.__getitem__)
    tiebreak = np.empty(len(order), dtype=np.int64)
    tiebreak[order] = np.arange(len(order))
    return tiebreak


def add_at_scores(lexical: LexicalIndex, query) -> np.ndarray:
    out = np.zeros(lexical.size, dtype=np.float32)
    if len(query.indices) == 0:
        return out
    starts = np.asarray(lexical.csc_indptr)[query.indices]
    lengths = np.asarray(lexical.csc_indptr)[query.indices + 1] - starts
    positions = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)] or [np.zeros(0, np.int64)])
    weights = np.repeat(query.values, lengths)
    np.add.at(out, np.asarray(lexical.csc_indices)[positions], np.asarray(lexical.csc_data)[positions] * weights)
    return out


def sorted_top(lexical: LexicalIndex, query, k: int, also=(), stats=None):
    """`LexicalIndex.top` the straightforward way: every row scored, sorted by (score descending, row)."""
    scores = add_at_scores(lexical, query)
    best = np.lexsort((np.arange(len(scores)), -scores))[:k]
    rows = np.union1d(best, np.asarray(also, dtype=np.int64))
    return rows, scores[rows]


@pytest.fixture(params=["default", "forced"])
def pruning(request, monkeypatch):
    """`LexicalIndex.top` as configured, or with its bound tried on every query and used whenever it prunes."""
    if request.param == "forced":
        monkeypatch.setattr(lexical_module, "PRUNE_MIN_POSTINGS", 0)
        monkeypatch.setattr(lexical_module, "ROW_COST", 1)
        monkeypatch.setattr(lexical_module, "GIVE_UP", 1.0)
    return request.param


def references(index) -> list[str]:
    generator = random.Random(5)
    ids, handles = index.ids, index.handles
    chosen = generator.sample(range(len(index)), 150)
    out = []
    for row in chosen:
        paper_id, handle = ids[row], handles[row]
        out += [paper_id, paper_id.upper(), paper_id[: generator.randint(1, len(paper_id))], handle, handle.lower(),
                handle.upper(), handle.casefold(), handle.split("-")[0]]
    return out + ["2101.0", "p1", "P", "aa-1", "STRASSE-1", "strasse networks", "ΩMEGA-3", "nothing-like-it", "2101.99999"]


# ---------------------------------------------------------------- the comparisons


def test_the_index_is_big_and_tie_heavy(index):
    assert len(index) == PAPERS
    assert sum(handle.startswith("Graph Models") for handle in index.handles) > 20
    assert index.ids == [paper.id for paper in index.papers()]
    assert index.handles == [paper.handle for paper in index.papers()]


def test_rows_found_by_bisection_are_the_rows_a_scan_finds(index):
    ids, handles = index.ids, index.handles
    for reference in references(index):
        assert index.keys.matching_rows(reference) == scan_matching_rows(reference, ids, handles), reference


def test_excluded_rows_are_the_rows_a_scan_finds(index):
    ids, handles = index.ids, index.handles
    wanted = references(index)[::7]
    folded = {value.casefold() for value in wanted}
    expected = {row for row, (i, h) in enumerate(zip(ids, handles)) if i in wanted or h.casefold() in folded}
    assert index.keys.rows_named(wanted) == expected and expected


def test_the_stored_tiebreak_is_the_id_order(index):
    assert np.array_equal(index.tiebreak, sorting_tiebreak(index.ids))
    assert [index.keys.id_of(row) for row in range(0, PAPERS, 97)] == index.ids[::97]


def test_term_by_term_scores_equal_one_add_at_bit_for_bit(index):
    lexical = index.lexical
    queries = [lexical.row(row) for row in range(0, PAPERS, 499)]
    queries.append(combine([lexical.row(1), lexical.row(2), lexical.row(3)], [1.0, 1.0, -0.5]))
    queries.append(lexical.transform("prorral neuantx graelity"))
    for query in queries:
        assert np.array_equal(lexical.scores(query), add_at_scores(lexical, query))


def lists(index, run):
    return [[item.to_dict() for item in run(seed)] for seed in ("P1", "graph models-3", "2101.00008", "Aa-6", "straße-15")]


def test_top_rows_equal_those_of_a_sort_bit_for_bit(index, pruning):
    lexical, used = index.lexical, []
    queries = [lexical.row(row) for row in range(0, PAPERS, 251)]
    queries.append(combine([lexical.row(1), lexical.row(2), lexical.row(3)], [1.0, 1.0, -0.5]))
    queries.append(combine([lexical.row(4), lexical.row(5)], [1.0, -1.0]))
    queries.append(lexical.transform("prorral neuantx graelity"))
    for number, query in enumerate(queries):
        for k in (10, 100, 1000):
            also = random.Random(number).sample(range(PAPERS), 100)
            stats: dict = {}
            rows, scores = lexical.top(query, k, also, stats)
            want_rows, want_scores = sorted_top(lexical, query, k, also)
            assert (rows.tolist(), scores.tobytes()) == (want_rows.tolist(), want_scores.tobytes())
            used.append(stats["pruned"])
    if pruning == "forced":
        assert sum(used) > len(used) // 2


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_like_lists_equal_those_of_the_scans(index, mode, pruning):
    def run(seed):
        return index.like(seed, k=12, mode=mode, why=True, exclude=["P5", "Graph Models"])

    new = lists(index, run)
    with mock.patch.object(LexicalIndex, "scores", add_at_scores), mock.patch.object(LexicalIndex, "top", sorted_top):
        ids, handles = index.ids, index.handles
        with mock.patch.object(keys.Keys, "matching_rows", lambda self, ref: scan_matching_rows(ref, ids, handles)), \
                mock.patch.object(recommender_module.PaperIndex, "tiebreak", sorting_tiebreak(ids)):
            old = lists(index, run)
    assert new == old and all(new)


def test_related_work_lists_equal_those_of_the_scans(index):
    rows = list(range(0, PAPERS, 611))
    new = [[(r.id, r.score) for r in item.related] for item in related_work(index, rows, k=5)]
    with mock.patch.object(LexicalIndex, "scores", add_at_scores), \
            mock.patch.object(recommender_module.PaperIndex, "tiebreak", sorting_tiebreak(index.ids)):
        old = [[(r.id, r.score) for r in item.related] for item in related_work(index, rows, k=5)]
    assert new == old and all(new)


def test_vectors_read_with_pread_equal_the_memory_map(index):
    from recommender.index.layout import VECTORS

    rows = np.array(sorted(random.Random(3).sample(range(PAPERS), 300)))
    query = np.asarray(index.vectors[17], dtype=np.float32)
    with index.stored.array_reader(VECTORS).reading() as read:
        read_rows = lambda block: np.concatenate([read(row, row + 1) for row in block])  # noqa: E731
        assert np.array_equal(read_rows(rows), np.asarray(index.vectors)[rows])
        assert np.array_equal(index.cosines(rows, query, read_rows), index.cosines(rows, query))
