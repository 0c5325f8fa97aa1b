"""Tests for recommender.index.ann (small synthetic data, no timing assertions)."""

import numpy as np
import pytest

import faiss

from recommender.errors import InputError
from recommender.index import ann

DIM = 64
APPROX = ("ivf", "hnsw")
ALL = ("flat",) + APPROX


def clustered(n, dim=DIM, n_centres=40, seed=0):
    """Normalised Gaussian mixture (fixed centres, draws vary with ``seed``).

    Clustered like real embeddings; uniform random data would be unrealistic for IVF.
    """
    crng = np.random.default_rng(12345)
    centres = crng.standard_normal((n_centres, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    lab = rng.integers(0, n_centres, n)
    x = centres[lab] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


@pytest.fixture(scope="module")
def data():
    return clustered(3000)


@pytest.fixture(scope="module")
def indexes(data):
    return {k: ann.build_faiss_index(data, ann.choose_index(len(data), DIM, k)) for k in ALL}


def exact_topk(xb, xq, k):
    return np.argsort(-(xq @ xb.T), axis=1, kind="stable")[:, :k]


# ---------------------------------------------------------------- choose_index

def test_small_corpus_is_exact():
    c = ann.choose_index(38, 384)
    assert c.kind == "flat"
    assert c.reason == "exact inner-product search: 38 papers <= 50,000"


def test_threshold_boundary():
    assert ann.choose_index(ann.EXACT_LIMIT, 384).kind == "flat"
    big = ann.choose_index(ann.EXACT_LIMIT + 1, 384)
    assert big.kind != "flat"
    assert f"{ann.EXACT_LIMIT + 1:,}" in big.reason


def test_million_uses_ivf_with_sqrt_lists():
    c = ann.choose_index(1_000_000, 384)
    assert c.kind == "ivf"
    assert c.params == {"nlist": 4000, "encoding": "SQfp16", "train_size": 160_000, "niter": 10}  # 40 points a list
    assert "1,000,000" in c.reason


def test_zero_papers():
    assert ann.choose_index(0, 384).kind == "flat"


@pytest.mark.parametrize("kind", ALL)
def test_override(kind):
    for n in (10, 10_000_000):
        c = ann.choose_index(n, 384, kind)
        assert c.kind == kind
        assert "requested" in c.reason


def test_override_case_insensitive():
    assert ann.choose_index(10, 384, "IVF").kind == "ivf"


@pytest.mark.parametrize("bad", ["annoy", "", "exact", None])
def test_unknown_kind(bad):
    with pytest.raises(InputError):
        ann.choose_index(100, 384, bad)


@pytest.mark.parametrize("n,dim", [(-1, 384), (10, 0)])
def test_bad_sizes(n, dim):
    with pytest.raises(InputError):
        ann.choose_index(n, dim)


def test_build_unknown_kind(data):
    with pytest.raises(InputError):
        ann.build_faiss_index(data, ann.IndexChoice("lsh", {}, ""))


def test_build_unknown_ivf_encoding(data):
    with pytest.raises(InputError, match="unknown IVF encoding 'bogus'"):
        ann.build_faiss_index(data[:500], ann.IndexChoice("ivf", {"nlist": 4, "encoding": "bogus"}, ""))


# ---------------------------------------------------------------- build / search

@pytest.mark.parametrize("kind", ALL)
def test_duplicate_vector_is_top_hit(kind, data, indexes):
    rows = np.array([0, 1, 17, 999, 2999])
    scores, ids = ann.search_index(indexes[kind], data[rows].copy(), 5)
    assert ids.shape == scores.shape == (5, 5)
    assert list(ids[:, 0]) == list(rows)
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-3)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # descending


@pytest.mark.parametrize("kind", APPROX)
def test_recall_on_clustered_data(kind, data, indexes):
    queries = clustered(200, seed=1)  # fresh draws, same centres
    truth = exact_topk(data, queries, 10)
    _, ids = ann.search_index(indexes[kind], queries, 10)
    recall = np.mean([len(np.intersect1d(a, b)) for a, b in zip(ids, truth)]) / 10
    assert recall >= 0.9


def test_flat_is_exact(data, indexes):
    queries = clustered(50, seed=2)
    _, ids = ann.search_index(indexes["flat"], queries, 10)
    np.testing.assert_array_equal(ids, exact_topk(data, queries, 10))


def self_recall(index, x, k=10, queries=256, seed=1):
    """recall@k of ``index`` against exact search, the documented tuning measure: a seeded sample
    of stored vectors as queries, each query's own row left out."""
    rows = np.sort(np.random.default_rng(seed).choice(len(x), size=queries, replace=False))
    truth = [[t for t in row if t != q][:k] for row, q in zip(exact_topk(x, x[rows], k + 1), rows)]
    _, ids = index.search(x[rows], k + 1)
    found = [[i for i in row if i != q][:k] for row, q in zip(ids, rows)]
    return np.mean([len(set(a) & set(b)) for a, b in zip(found, truth)]) / k


def test_ivf_nprobe_is_the_smallest_that_reaches_the_target(data, indexes):
    ivf = indexes["ivf"]
    tuned = ivf.nprobe
    assert tuned > 1  # one list is not enough on this data: the tuner had work to do
    assert self_recall(ivf, data) >= ann.TUNE_TARGET_RECALL
    ivf.nprobe = tuned // 2
    try:
        assert self_recall(ivf, data) < ann.TUNE_TARGET_RECALL
    finally:
        ivf.nprobe = tuned


def test_hnsw_ef_search_is_raised_until_the_target_is_reached():
    # A sparse graph (M=12) over unclustered vectors: faiss's default efSearch of 16 misses neighbours.
    x = np.random.default_rng(0).standard_normal((3000, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    hnsw = ann.build_faiss_index(x, ann.IndexChoice("hnsw", {"M": 12, "ef_construction": 40}))
    tuned = hnsw.hnsw.efSearch
    assert self_recall(hnsw, x) >= ann.TUNE_TARGET_RECALL
    hnsw.hnsw.efSearch = 16
    assert self_recall(hnsw, x) < ann.TUNE_TARGET_RECALL
    hnsw.hnsw.efSearch = tuned // 2
    assert self_recall(hnsw, x) < ann.TUNE_TARGET_RECALL


@pytest.mark.parametrize("kind", ALL)
def test_tuned_params_survive_serialisation(kind, indexes, tmp_path):
    path = str(tmp_path / f"{kind}.faiss")
    faiss.write_index(indexes[kind], path)
    back = faiss.read_index(path)
    assert ann.index_description(back) == ann.index_description(indexes[kind])
    queries = clustered(20, seed=6)
    np.testing.assert_array_equal(ann.search_index(back, queries, 10)[1], ann.search_index(indexes[kind], queries, 10)[1])


def test_ivf_build_is_deterministic(data):
    choice = ann.choose_index(len(data), DIM, "ivf")
    a = ann.build_faiss_index(data, choice, seed=3)
    b = ann.build_faiss_index(data, choice, seed=3)
    q = clustered(30, seed=4)
    assert a.nprobe == b.nprobe
    np.testing.assert_array_equal(ann.search_index(a, q, 10)[1], ann.search_index(b, q, 10)[1])


def test_descriptions(indexes):
    assert ann.index_description(indexes["flat"]).startswith("exact flat (3,000 vectors, 64-d")
    assert "nprobe=" in ann.index_description(indexes["ivf"])
    assert "efSearch=" in ann.index_description(indexes["hnsw"])


def test_k_larger_than_corpus():
    x = clustered(5)
    idx = ann.build_faiss_index(x, ann.choose_index(5, DIM))
    scores, ids = ann.search_index(idx, x[0], 8)  # 1-D query accepted
    assert ids.shape == (1, 8)
    assert sorted(ids[0, :5]) == [0, 1, 2, 3, 4]
    assert list(ids[0, 5:]) == [-1, -1, -1]
    assert np.all(np.isneginf(scores[0, 5:]))


def test_empty_index_and_k_zero():
    idx = ann.build_faiss_index(np.zeros((0, DIM), np.float32), ann.choose_index(0, DIM))
    scores, ids = ann.search_index(idx, clustered(3), 4)
    assert ids.shape == (3, 4) and np.all(ids == -1)
    scores, ids = ann.search_index(idx, clustered(3), 0)
    assert ids.shape == (3, 0)


def test_search_batches_match(data, indexes, monkeypatch):
    q = clustered(70, seed=5)
    whole = ann.search_index(indexes["flat"], q, 10)
    monkeypatch.setattr(ann, "SEARCH_BATCH", 16)
    batched = ann.search_index(indexes["flat"], q, 10)
    np.testing.assert_array_equal(whole[1], batched[1])
    np.testing.assert_allclose(whole[0], batched[0])


@pytest.mark.parametrize("kind", ALL)
def test_single_query_on_one_thread_finds_what_a_batch_finds(kind, data, indexes):
    """A single query runs on one OpenMP thread (faster on a busy machine); same neighbours,
    scores to float rounding, and the caller's thread count is restored."""
    q = clustered(20, seed=6)
    threads = faiss.omp_get_max_threads()
    batch = ann.search_index(indexes[kind], q, 10)
    for row in range(len(q)):
        scores, ids = ann.search_index(indexes[kind], q[row], 10)
        np.testing.assert_array_equal(ids[0], batch[1][row])
        np.testing.assert_allclose(scores[0], batch[0][row], atol=1e-6)
    assert faiss.omp_get_max_threads() == threads


def test_query_dimension_mismatch(indexes):
    with pytest.raises(InputError):
        ann.search_index(indexes["flat"], np.ones((1, DIM + 1), np.float32), 3)


def test_float64_input_accepted(data):
    idx = ann.build_faiss_index(data[:100].astype(np.float64), ann.choose_index(100, DIM))
    _, ids = ann.search_index(idx, data[7].astype(np.float64), 1)
    assert ids[0, 0] == 7


# ---------------------------------------------------------------- add_to_index

@pytest.mark.parametrize("kind", ALL)
def test_add_to_index(kind, data):
    first, extra = data[:2500], data[2500:]
    idx = ann.build_faiss_index(first, ann.choose_index(len(first), DIM, kind))
    ann.add_to_index(idx, extra)
    assert idx.ntotal == len(data)
    rows = np.array([2500, 2750, 2999])
    _, ids = ann.search_index(idx, data[rows], 1)
    assert list(ids[:, 0]) == list(rows)
    ann.add_to_index(idx, np.zeros((0, DIM), np.float32))  # no-op
    assert idx.ntotal == len(data)


def test_add_wrong_dimension(indexes):
    with pytest.raises(InputError):
        ann.add_to_index(indexes["flat"], np.ones((2, DIM * 2), np.float32))
