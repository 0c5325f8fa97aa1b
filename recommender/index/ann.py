"""Choice, construction and search of the FAISS vector index.

Vectors are L2-normalised float32 sentence embeddings, so cosine similarity is
the inner product and every index here uses ``METRIC_INNER_PRODUCT``.

Policy (see :func:`choose_index`):

* ``n <= EXACT_LIMIT`` -> ``IndexFlatIP``: exact search.  A single-query scan
  of 50,000 x 384-d vectors takes ~3 ms on one core (measured, 2-core EPYC),
  so below this size an approximate index would buy nothing but recall loss
  and a training step.  The limit leaves ~3x headroom on the 10 ms target for
  slower machines; exact search reaches ~6 ms at 100k and ~60 ms at 1M.
* ``n > EXACT_LIMIT`` -> IVF with ``nlist ~ 4*sqrt(n)`` lists, vectors stored
  as float16 scalar-quantised codes (``SQfp16``).  fp16 halves the stored
  size (index = 0.5x the raw float32 vectors, so the build peak stays well
  under 2x raw even while the caller holds the float32 matrix) and its
  rounding error (~1e-4 on a cosine) does not disturb the top-10, unlike
  8-bit codes.  Coarse centroids come from seeded k-means on a seeded sample,
  so builds are deterministic.  ``nprobe`` is then tuned on the data itself:
  a seeded sample of stored vectors is used as queries, exact neighbours are
  computed by brute force, and the smallest ``nprobe`` whose recall@10 reaches
  ``TUNE_TARGET_RECALL`` (0.97, a margin over the 0.95 requirement) is kept in
  the index (it is serialised by ``faiss.write_index``).
* HNSW is available on request (``requested="hnsw"``) but never chosen
  automatically: building HNSW32 over 1M vectors on 2 cores takes tens of
  minutes, its graph adds ~256 bytes per vector on top of full float32
  storage (> 2x raw with the caller's copy), and its multi-threaded
  construction is not deterministic (we build it single-threaded).

faiss is imported lazily: this module sits on the cold ``papers like`` path.
"""

from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import IndexCorruptError, InputError, OptionError

EXACT_LIMIT = 50_000
"""Largest corpus searched exactly (flat inner product); see module docstring."""

KINDS = ("auto", "flat", "hnsw", "ivf")

TUNE_TARGET_RECALL = 0.97
"""recall@10 the build-time tuner aims for (requirement: >= 0.95)."""

TUNE_QUERIES = 256
"""Stored vectors used as tuning queries (their own row is excluded)."""

SEARCH_BATCH = 1024
"""Queries per faiss call in :func:`search_index`; bounds result-buffer memory."""

ADD_BATCH = 65_536
"""Vectors per faiss ``add`` call; bounds temporary memory while adding."""

IVF_TRAIN_PER_LIST = 40
"""Training points per IVF list (faiss warns below 39)."""

IVF_MIN_TRAIN = 20_000
IVF_KMEANS_ITER = 10
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80

_NPROBE_STEPS = (
    1,
    2,
    4,
    6,
    8,
    12,
    16,
    24,
    32,
    48,
    64,
    96,
    128,
    192,
    256,
    384,
    512,
    768,
    1024,
    1536,
    2048,
    3072,
    4096,
)
_EF_STEPS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


@dataclass(frozen=True)
class IndexChoice:
    """Which index to build and why.  ``reason`` is shown by ``papers info``."""

    kind: str  # "flat" | "hnsw" | "ivf"
    params: dict = field(default_factory=dict)
    reason: str = ""


def _ivf_nlist(n: int) -> int:
    """~4*sqrt(n) lists, but never so many that a list gets < 39 points."""
    nlist = int(round(4 * math.sqrt(max(n, 1))))
    return max(1, min(nlist, n // 39 if n >= 39 else 1))


def choose_index(n: int, dim: int, requested: str = "auto") -> IndexChoice:
    """Pick the index type for ``n`` vectors of dimension ``dim``.

    ``requested`` is ``"auto"`` (policy in the module docstring) or one of
    ``"flat"``, ``"hnsw"``, ``"ivf"`` to force a kind.  Raises
    :class:`~recommender.errors.InputError` for anything else.
    """
    req = requested.strip().lower() if isinstance(requested, str) else requested
    if req not in KINDS:
        raise InputError(f"unknown index kind {requested!r}; expected one of {', '.join(KINDS)}")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"corpus size must be a non-negative integer, got {n!r}")
    if not isinstance(dim, (int, np.integer)) or dim <= 0:
        raise InputError(f"vector dimension must be a positive integer, got {dim!r}")
    n, dim = int(n), int(dim)

    if req == "auto":
        if n <= EXACT_LIMIT:
            return IndexChoice(
                "flat", {}, f"exact inner-product search: {n:,} papers <= {EXACT_LIMIT:,}"
            )
        why = f"{n:,} papers > {EXACT_LIMIT:,}"
        req = "ivf"
    else:
        why = f"{n:,} papers (requested)"

    if req == "flat":
        return IndexChoice("flat", {}, f"exact inner-product search: {why}")
    if req == "hnsw":
        params: dict[str, int | str] = {"M": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION}
        return IndexChoice(
            "hnsw",
            params,
            f"approximate HNSW{HNSW_M} graph search, efSearch tuned for recall@10 >= "
            f"{TUNE_TARGET_RECALL:.2f}: {why}",
        )
    nlist = _ivf_nlist(n)
    params = {
        "nlist": nlist,
        "encoding": "SQfp16",
        "train_size": min(n, max(IVF_MIN_TRAIN, IVF_TRAIN_PER_LIST * nlist)),
        "niter": IVF_KMEANS_ITER,
    }
    return IndexChoice(
        "ivf",
        params,
        f"approximate IVF search ({nlist:,} lists, float16 vectors), nprobe tuned for "
        f"recall@10 >= {TUNE_TARGET_RECALL:.2f}: {why}",
    )


# --------------------------------------------------------------------------- helpers


def _as_matrix(vectors, dim: int | None = None, what: str = "vectors") -> np.ndarray:
    x = np.asarray(vectors)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2:
        raise InputError(f"{what} must be a 2-D array, got shape {x.shape}")
    if dim is not None and x.shape[1] != dim:
        raise InputError(f"{what} have dimension {x.shape[1]}, index expects {dim}")
    if x.dtype != np.float32 or not x.flags.c_contiguous:
        x = np.ascontiguousarray(x, dtype=np.float32)
    return x


@contextmanager
def _omp_threads(nthreads: int):
    import faiss

    old = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(nthreads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(old)


class Rows(Protocol):
    """Vectors read a piece at a time (writer.ArrayFile): an index is built without holding them
    all."""

    shape: tuple[int, ...]

    def read(self, start: int, stop: int) -> np.ndarray: ...

    def take(self, rows: np.ndarray) -> np.ndarray: ...


class _ArrayRows:
    """An array in memory as Rows (views, no copies)."""

    def __init__(self, x: np.ndarray):
        self.x, self.shape = x, x.shape

    def read(self, start: int, stop: int) -> np.ndarray:
        return self.x[start:stop]

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self.x[rows]


def _rows(vectors) -> tuple[Rows, np.ndarray | None]:
    """The vectors as Rows, and as one float32 matrix when they are in memory."""
    if hasattr(vectors, "read") and hasattr(vectors, "take"):
        if len(vectors.shape) != 2:
            raise InputError(f"vectors must be a 2-D array, got shape {vectors.shape}")
        return vectors, None
    x = _as_matrix(vectors)
    return _ArrayRows(x), x


def _add_batched(index, x: Rows) -> None:
    for i0 in range(0, x.shape[0], ADD_BATCH):
        index.add(_as_matrix(x.read(i0, i0 + ADD_BATCH)))


def _add_ivf(index, x: Rows) -> None:
    """`_add_batched` into an IVF index whose inverted lists are sized first: each list's vectors
    are counted (one pass assigning them), so the lists get exactly their size instead of growing
    by doubling (up to twice the memory). The same calls as index.add, so the same index."""
    import faiss

    invlists = faiss.extract_index_ivf(index).invlists
    if not isinstance(invlists, faiss.ArrayInvertedLists) or index.ntotal:
        _add_batched(index, x)
        return
    n = x.shape[0]
    lists = np.empty(n, dtype=np.int64)
    for i0 in range(0, n, ADD_BATCH):  # the batches index.add would assign
        lists[i0 : i0 + ADD_BATCH] = index.quantizer.assign(
            _as_matrix(x.read(i0, i0 + ADD_BATCH)), 1
        ).ravel()
    for list_no, count in enumerate(np.bincount(lists, minlength=index.nlist).tolist()):
        if count:
            invlists.resize(list_no, count)  # allocates exactly `count` entries...
            invlists.resize(list_no, 0)  # ...kept as capacity (a std::vector keeps it when shrunk)
    for i0 in range(0, n, ADD_BATCH):
        batch = _as_matrix(x.read(i0, i0 + ADD_BATCH))
        assigned = np.ascontiguousarray(lists[i0 : i0 + len(batch)])
        index.add_core(len(batch), faiss.swig_ptr(batch), None, faiss.swig_ptr(assigned))


def _is_hnsw(index) -> bool:
    import faiss

    return isinstance(index, faiss.IndexHNSW)


def _measure_recall(index, queries: np.ndarray, qids: np.ndarray, gt: np.ndarray, k: int) -> float:
    _, ids = index.search(queries, k + 1)
    hits = 0
    for row, q in enumerate(qids):
        got = ids[row][ids[row] != q][:k]
        hits += len(np.intersect1d(got, gt[row], assume_unique=False))
    return hits / gt.size


def _exact_neighbours(
    queries: np.ndarray, x: Rows, matrix: np.ndarray | None, k: int
) -> np.ndarray:
    """Ids of each query's k nearest vectors by inner product: faiss.knn over the matrix in memory,
    else over ADD_BATCH rows at a time, the best k of all kept (higher score, then lower id, first).
    """
    import faiss

    if matrix is not None:
        return faiss.knn(queries, matrix, k, metric=faiss.METRIC_INNER_PRODUCT)[1]
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    for i0 in range(0, x.shape[0], ADD_BATCH):
        scores, ids = faiss.knn(
            queries, _as_matrix(x.read(i0, i0 + ADD_BATCH)), k, metric=faiss.METRIC_INNER_PRODUCT
        )
        best_scores = np.concatenate([best_scores, scores], axis=1)
        best_ids = np.concatenate([best_ids, np.where(ids < 0, -1, ids + i0)], axis=1)
        order = np.lexsort((best_ids, -best_scores), axis=1)[:, :k]
        best_scores = np.take_along_axis(best_scores, order, axis=1)
        best_ids = np.take_along_axis(best_ids, order, axis=1)
    return best_ids


def _tune(
    index,
    x: Rows,
    seed: int,
    setter,
    steps,
    cap: int,
    k: int = 10,
    matrix: np.ndarray | None = None,
):
    """Smallest step whose recall@k on sampled stored vectors >= target."""
    n = x.shape[0]
    if n <= k + 1:
        setter(min(cap, steps[-1]))
        return
    rng = np.random.default_rng(seed + 1)
    qids = np.sort(rng.choice(n, size=min(TUNE_QUERIES, n), replace=False))
    queries = _as_matrix(x.take(qids))
    gt_ids = _exact_neighbours(queries, x, matrix, k + 1)
    gt = np.stack([r[r != q][:k] for r, q in zip(gt_ids, qids)])
    chosen = None
    for step in steps:
        if step >= cap:
            chosen = cap
            break
        setter(step)
        if _measure_recall(index, queries, qids, gt, k) >= TUNE_TARGET_RECALL:
            chosen = step
            break
    setter(chosen if chosen is not None else cap)


# --------------------------------------------------------------------------- public API


def build_faiss_index(vectors: np.ndarray | Rows, choice: IndexChoice, seed: int = 0):
    """Build the index described by ``choice`` over ``vectors`` (float32, L2-normalised): an array,
    or :class:`Rows` read a batch at a time (a file of them), which gives the same index.

    Rows keep their order: result id ``i`` is row ``i`` of ``vectors``.  The
    build is deterministic for a given ``seed`` (seeded training sample and
    k-means for IVF; single-threaded insertion for HNSW).  Search parameters
    (IVF ``nprobe``, HNSW ``efSearch``) are tuned on the data so recall@10 vs
    exact search reaches ``TUNE_TARGET_RECALL`` and are stored in the index.
    """
    import faiss

    kind = choice.kind
    if kind not in ("flat", "hnsw", "ivf"):
        raise OptionError(f"unknown index kind {kind!r}: use one of flat, hnsw, ivf", "index_type")
    x, matrix = _rows(vectors)
    n, dim = x.shape
    if dim == 0:
        raise InputError("vectors have dimension 0")
    index: Any  # faiss's index classes: their fields and downcasts are not typed

    if kind == "flat" or (kind == "ivf" and n == 0):
        index = faiss.IndexFlatIP(dim)
        _add_batched(index, x)
        return index

    if kind == "hnsw":
        return _hnsw_index(x, matrix, choice, seed)
    return _ivf_index(x, matrix, choice, seed)


def _hnsw_index(x: Rows, matrix, choice: IndexChoice, seed: int):
    """An HNSW index of the rows `x`, its efSearch tuned to TUNE_TARGET_RECALL."""
    import faiss

    m = int(choice.params.get("M", HNSW_M))
    index: Any = faiss.IndexHNSWFlat(x.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = int(choice.params.get("ef_construction", HNSW_EF_CONSTRUCTION))
    with _omp_threads(1):  # parallel HNSW insertion is order-dependent
        _add_batched(index, x)

    def set_ef(ef):
        index.hnsw.efSearch = int(ef)

    _tune(index, x, seed, set_ef, _EF_STEPS, cap=max(_EF_STEPS[-1], 16), matrix=matrix)
    return index


def _ivf_index(x: Rows, matrix, choice: IndexChoice, seed: int):
    """An IVF index of the rows `x`: trained on a seeded sample, its nprobe tuned to
    TUNE_TARGET_RECALL."""
    import faiss

    n, dim = x.shape
    ip = faiss.METRIC_INNER_PRODUCT
    index: Any
    nlist = int(choice.params.get("nlist", _ivf_nlist(n)))
    nlist = max(1, min(nlist, n))
    encoding = choice.params.get("encoding", "SQfp16")
    train_size = int(
        choice.params.get("train_size", max(IVF_MIN_TRAIN, IVF_TRAIN_PER_LIST * nlist))
    )
    train_size = max(min(train_size, n), nlist)
    niter = int(choice.params.get("niter", IVF_KMEANS_ITER))

    # `encoding` is a faiss factory code for the stored vectors: always "SQfp16" here (see the
    # module
    # docstring); scripts/bench_scale.py compares others ("SQ8", "Flat") through the same path.
    try:
        index = faiss.index_factory(dim, f"IVF{nlist},{encoding}", ip)
    except RuntimeError:
        raise OptionError(f"unknown IVF encoding {encoding!r}") from None
    index.cp.seed = int(seed)
    index.cp.spherical = True  # unit-norm centroids suit cosine / inner product
    index.cp.niter = niter
    index.cp.max_points_per_centroid = 1 << 30  # we sample ourselves
    index.cp.min_points_per_centroid = 1

    if train_size < n:
        rng = np.random.default_rng(seed)
        sample = _as_matrix(x.take(np.sort(rng.choice(n, size=train_size, replace=False))))
    else:
        sample = _as_matrix(x.read(0, n))
    index.train(sample)
    del sample
    _add_ivf(index, x)

    def set_nprobe(p):
        index.nprobe = int(p)

    _tune(index, x, seed, set_nprobe, _NPROBE_STEPS, cap=nlist, matrix=matrix)
    return index


def add_to_index(index, vectors) -> None:
    """Append ``vectors`` (ids continue from ``index.ntotal``) without retraining.

    IVF keeps its trained centroids and tuned ``nprobe``: fine for growth of
    the same kind of papers, but rebuild when the corpus has grown a lot
    (e.g. when :func:`choose_index` for the new size differs).
    """
    x, _ = _rows(vectors)
    if x.shape[1] != index.d:
        raise InputError(f"vectors have dimension {x.shape[1]}, index expects {index.d}")
    if x.shape[0] == 0:
        return
    if not index.is_trained:
        raise InputError("index is not trained; build it with build_faiss_index first")
    if _is_hnsw(index):
        with _omp_threads(1):
            _add_batched(index, x)
    else:
        _add_batched(index, x)


def search_index(index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` inner-product search.

    Returns ``(scores, ids)``, both of shape ``(nq, k)``; ``ids`` are row
    numbers, ``-1`` where fewer than ``k`` results exist (score ``-inf``
    there).  Queries go to faiss in batches of ``SEARCH_BATCH``; a single query
    on one OpenMP thread.
    """
    q = _as_matrix(queries, dim=index.d, what="queries")
    k = int(k)
    if k < 0:
        raise InputError(f"k must be >= 0, got {k}")
    nq = q.shape[0]
    scores = np.full((nq, k), -np.inf, dtype=np.float32)
    ids = np.full((nq, k), -1, dtype=np.int64)
    if k == 0 or nq == 0 or index.ntotal == 0:
        return scores, ids
    # One query on one thread: FAISS would split a flat scan (or IVF's coarse one) over all
    # OpenMP threads, whose start and spinning cost more than the scan itself on a busy
    # machine (10k flat, 2 cores under load: ~20 ms -> 0.3 ms; the same neighbours).
    with _omp_threads(1) if nq == 1 else nullcontext():
        for i0 in range(0, nq, SEARCH_BATCH):
            d, i = index.search(q[i0 : i0 + SEARCH_BATCH], k)
            scores[i0 : i0 + len(d)] = d
            ids[i0 : i0 + len(i)] = i
    if (ids >= index.ntotal).any():  # forged or damaged lists: never an index into the papers
        raise IndexCorruptError(
            f"the search index gives paper numbers beyond its {index.ntotal:,} vectors"
        )
    scores[ids < 0] = -np.inf
    return scores, ids


def index_description(index) -> str:
    """One line describing the index, e.g. for ``papers info``."""
    import faiss

    idx = faiss.downcast_index(index)
    n, d = idx.ntotal, idx.d
    base = f"{n:,} vectors, {d}-d, inner product"
    if isinstance(idx, faiss.IndexHNSW):
        h: Any = idx.hnsw  # faiss's HNSW: nb_neighbors is not in its typing
        m = h.nb_neighbors(1)
        return f"HNSW{m} graph ({base}, efConstruction={h.efConstruction}, efSearch={h.efSearch})"
    if isinstance(idx, faiss.IndexIVF):
        if isinstance(idx, faiss.IndexIVFScalarQuantizer):
            qt = idx.sq.qtype
            enc = {
                faiss.ScalarQuantizer.QT_fp16: "float16",
                faiss.ScalarQuantizer.QT_8bit: "8-bit",
            }.get(qt, f"SQ{qt}")
        elif isinstance(idx, faiss.IndexIVFFlat):
            enc = "float32"
        else:
            enc = type(idx).__name__
        return f"IVF, {enc} vectors ({base}, nlist={idx.nlist:,}, nprobe={idx.nprobe})"
    if isinstance(idx, faiss.IndexFlat):
        return f"exact flat ({base})"
    return f"{type(idx).__name__} ({base})"
