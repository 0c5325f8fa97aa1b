"""LexicalIndex.top: the k best rows by TF-IDF score (equal scores: lower rows first) and the scores
of given rows, through the column-max bound when it can, exactly as scoring every row gives them.

On a 3,000-paper corpus of Zipf-like words where many papers share their text (equal scores), with
the bound forced on for queries of every size (PRUNE_MIN_POSTINGS = 0, ROW_COST = 1, GIVE_UP = 1):
the same rows and the same float32 scores, bit for bit, as the straightforward full scoring and
sort. And an index built before the column maxima were stored scores in full and gives the same
lists."""

import contextlib
import json
import random
from unittest import mock

import numpy as np
import pytest

from fakes import FakeEncoder
from recommender import PaperIndex, build_index
from recommender.embed import loading
from recommender.errors import IndexCorruptError
from recommender.index import build, lexical as lexical_module
from recommender.digests import file_digest
from recommender.index.layout import COLUMN_MAX, CURRENT, LEXICAL_ARRAYS, MANIFEST
from recommender.index.lexical import LexicalIndex, SparseVector, build_tfidf, combine

PAPERS = 3000


def texts() -> list[str]:
    """Zipf-like words over abstracts of 5-60 words; every 7th abstract repeats an earlier one,
    and papers 2000-2059 all repeat paper 1999."""
    generator = random.Random(7)
    words = [f"{a}{b}{c}" for a in ("pro", "neu", "gra", "lin", "den") for b in "aeiou" for c in ("ral", "nt", "x", "lity", "mer", "sk")]
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    out: list[str] = []
    for number in range(PAPERS):
        if 2000 <= number < 2060:
            out.append(out[1999])
        elif number % 7 == 6:
            out.append(out[generator.randrange(len(out))])
        else:
            out.append(" ".join(generator.choices(words, weights, k=generator.randint(5, 60))))
    return out


@pytest.fixture(scope="module")
def lexical() -> LexicalIndex:
    arrays, vocabulary, stop_words = build_tfidf(texts())
    return LexicalIndex(arrays, lambda: vocabulary, stop_words)


@pytest.fixture
def pruning(monkeypatch):
    """The bound is tried on every query, however few its postings, and used whenever it prunes."""
    monkeypatch.setattr(lexical_module, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(lexical_module, "ROW_COST", 1)
    monkeypatch.setattr(lexical_module, "GIVE_UP", 1.0)


def sorted_top(lexical: LexicalIndex, query: SparseVector, k: int, also) -> tuple[np.ndarray, np.ndarray]:
    """The straightforward version: score every row, sort by (score descending, row)."""
    scores = lexical.scores(query)
    best = sorted(range(len(scores)), key=lambda row: (-scores[row], row))[:k]
    rows = np.array(sorted(set(best) | {int(row) for row in also}), dtype=np.int64)
    return rows, scores[rows]


def queries(lexical: LexicalIndex) -> dict[str, SparseVector]:
    row = lexical.row
    return {
        "one paper": row(0),
        "a long paper": row(max(range(PAPERS), key=lambda r: len(row(r).indices))),
        "a short paper": row(min(range(PAPERS), key=lambda r: len(row(r).indices) or 99)),
        "a repeated paper": row(13),
        "a paper repeated 60 times": row(2010),
        "three papers": combine([row(1), row(2), row(3)], [1 / 3, 1 / 3, 1 / 3]),
        "two papers, one unlike": combine([row(4), row(5), row(6)], [0.5, 0.5, -0.5]),
        "one paper, two unlike": combine([row(7), row(8), row(9)], [1.0, -0.5, -0.5]),
        "only unlike": combine([row(10)], [-1.0]),
        "common words": lexical.transform("proaral proaral neuant gra"),
        "rare words": lexical.transform("densklity denuax lineral"),
        "a free text": lexical.transform(texts()[99]),
        "no known word": lexical.transform("nothing here"),
    }


CASES = [(k, also) for k in (1, 10, 100, 400, PAPERS - 1, PAPERS) for also in ("none", "random", "best")]


@pytest.mark.parametrize("k, also", CASES)
def test_top_equals_scoring_every_row_bit_for_bit(lexical, pruning, k, also):
    generator = random.Random(k)
    for name, query in queries(lexical).items():
        full = lexical.scores(query)
        extra = {"none": [], "random": generator.sample(range(PAPERS), 50),
                 "best": np.argsort(-full, kind="stable")[:30].tolist() + [PAPERS - 1, 0]}[also]
        stats: dict = {}
        rows, scores = lexical.top(query, k, extra, stats)
        want_rows, want_scores = sorted_top(lexical, query, k, extra)
        assert rows.tolist() == want_rows.tolist(), name
        assert scores.dtype == np.float32 and scores.tobytes() == want_scores.tobytes(), name


def test_the_bound_is_used_on_most_queries_and_ties_at_the_kth_score(lexical, pruning):
    """The table above goes through the bound (not only through full scoring), including queries
    whose k-th best score is shared by rows on both sides of the cut."""
    pruned, tied = [], []
    for k in (10, 100, 400):
        for name, query in queries(lexical).items():
            stats: dict = {}
            lexical.top(query, k, [], stats)
            pruned.append((name, k, stats["pruned"]))
            best = np.sort(lexical.scores(query))[::-1]
            if stats["pruned"] and best[k - 1] == best[k] and best[k] > 0:
                tied.append((name, k))
    assert sum(used for _, _, used in pruned) >= len(pruned) // 2, pruned
    assert not any(used for name, _, used in pruned if name in ("only unlike", "no known word"))
    assert tied, "no query with equal scores across the k-th place went through the bound"


def test_without_pruning_small_queries_are_scored_in_full(lexical):
    stats: dict = {}
    rows, scores = lexical.top(lexical.row(0), 10, [], stats)
    assert stats == {"pruned": False, "postings": int(sum(np.diff(lexical.csc_indptr)[lexical.row(0).indices]))}
    assert (rows.tolist(), scores.tobytes()) == tuple(x.tolist() if i == 0 else x.tobytes()
                                                      for i, x in enumerate(sorted_top(lexical, lexical.row(0), 10, [])))


def test_an_index_without_column_maxima_scores_in_full_with_the_same_results(lexical, pruning):
    arrays = {name: getattr(lexical, name) for name in LEXICAL_ARRAYS}
    old = LexicalIndex(arrays, lambda: lexical.vocabulary, lexical.stop_words)
    assert old.column_max is None
    for name, query in queries(lexical).items():
        stats: dict = {}
        rows, scores = old.top(query, 100, [5, 17], stats)
        assert not stats["pruned"]
        new_rows, new_scores = lexical.top(query, 100, [5, 17])
        assert (rows.tolist(), scores.tobytes()) == (new_rows.tolist(), new_scores.tobytes()), name
    # Related work computes the maxima it needs from the columns: the same as those stored.
    assert old.maxima().tobytes() == lexical.column_max.tobytes()


def test_scores_at_rows_equal_full_scores_bit_for_bit(lexical):
    rows = np.array(sorted(random.Random(2).sample(range(PAPERS), 200)))
    for name, query in queries(lexical).items():
        assert lexical.scores_at(query, rows).tobytes() == lexical.scores(query)[rows].tobytes(), name


# ---------------------------------------------------------------- through stored files


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("top")
    corpus = folder / "papers.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"P{number}", "title": f"Paper {number}", "abstract": text}) + "\n"
                              for number, text in enumerate(texts())), encoding="utf-8")
    with mock.patch.object(loading, "load_encoder", lambda model: FakeEncoder()), \
            mock.patch.object(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None):
        build_index([corpus], index=folder / "idx")
    return folder / "idx"


def live_version(index_dir):
    return index_dir / (index_dir / CURRENT).read_text().split()[0]


def without_column_maxima(index_dir, target):
    """A copy of the index as built before the maxima were stored: no file, no manifest entry."""
    import shutil

    shutil.copytree(index_dir, target)
    live = live_version(target)
    (live / COLUMN_MAX).unlink()
    manifest = json.loads((live / MANIFEST).read_text())
    del manifest["files"][COLUMN_MAX]
    (live / MANIFEST).write_text(json.dumps(manifest))
    (target / CURRENT).write_text(f"{live.name} {file_digest(live / MANIFEST)}\n")
    return target


def lists(index_dir, mode):
    with PaperIndex.open(index_dir, verify=True) as index:
        return [[(item.id, item.score) for item in index.like(*seeds, k=15, not_=unlike, mode=mode)]
                for seeds, unlike in ((["P1"], []), (["P13"], []), (["P2", "P3"], ["P4"]), (["P700"], ["P5", "P6"]))]


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_like_lists_of_an_index_without_column_maxima_are_the_same(built, tmp_path, pruning, mode):
    old = without_column_maxima(built, tmp_path / "old")
    with PaperIndex.open(old) as index:
        assert index.lexical.column_max is None
    with PaperIndex.open(built) as index:
        stats: dict = {}
        index.lexical.top(index.lexical.row(0), 100, [], stats)
        assert stats["pruned"]
    new_lists = lists(built, mode)
    assert new_lists == lists(old, mode) and all(new_lists)


def test_scores_read_the_querys_columns_at_once_with_the_same_results(built):
    """Scoring every row reads all the query's columns in one batched read, not one read per term (a
    tenth of a `like`), and gives what adding column after column gives, bit for bit."""
    from recommender.index import stored

    single_reads = []
    reading = stored.ArrayReader.reading

    @contextlib.contextmanager
    def counted(self):
        with reading(self) as read:
            def counting(start, stop):
                single_reads.append((self.name, start, stop))
                return read(start, stop)

            yield counting

    with PaperIndex.open(built) as index, mock.patch.object(stored.ArrayReader, "reading", counted):
        lexical = index.lexical
        for name, query in queries(lexical).items():
            expected = np.zeros(lexical.size, dtype=np.float32)
            for term, weight in zip(query.indices.tolist(), query.values):
                start, end = lexical.csc_indptr[term], lexical.csc_indptr[term + 1]
                np.add.at(expected, lexical.csc_indices[start:end], lexical.csc_data[start:end] * weight)
            assert lexical.scores(query).tobytes() == expected.tobytes(), name
            assert single_reads == [], name


def test_column_maxima_that_do_not_fit_the_vocabulary_are_refused(built, tmp_path):
    import shutil

    shutil.copytree(built, tmp_path / "bad")
    live = live_version(tmp_path / "bad")
    np.save(live / COLUMN_MAX, np.zeros(3, dtype=np.float32))
    manifest = json.loads((live / MANIFEST).read_text())
    manifest["files"][COLUMN_MAX] = {"bytes": (live / COLUMN_MAX).stat().st_size,
                                           "sha256": file_digest(live / COLUMN_MAX)}
    (live / MANIFEST).write_text(json.dumps(manifest))
    (tmp_path / "bad" / CURRENT).write_text(f"{live.name} {file_digest(live / MANIFEST)}\n")
    with PaperIndex.open(tmp_path / "bad") as index, pytest.raises(IndexCorruptError) as error:
        index.like("P1")
    assert str(error.value) == (f"index file {live / COLUMN_MAX} does not match the vocabulary: "
                                f"run `papers build --index {tmp_path / 'bad'}`")
