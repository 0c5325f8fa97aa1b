"""Model-free IR evaluation maths for ``papers evaluate`` (query by example).

Inputs are a test collection in the CSFCube layout (see
``shared/eval/csfcube-dev/README.md``): a TREC qrels file of graded judgements
and a ``queries.tsv`` naming, for every query, the paper that is the query.
For one query the caller ranks the judged candidates (the query paper itself
is not a candidate) and :func:`score_query` scores that ranking;
:func:`mean_scores` averages the per-query scores (macro average, every query
weighs the same).

Conventions shared by every metric:

* ``ranking`` is the caller's order, best first; ties were broken already.
* A document of the ranking with no judgement counts as grade 0. A judged
  document missing from the ranking is simply never retrieved, so it still
  counts in the denominators (number of relevant documents, ideal DCG).
* "Relevant" means ``grade >= relevant_at`` (CSFCube: 2, i.e. the two top
  grades of 0..3). Binary metrics (AP, Recall@20, RR) use that; NDCG uses the
  grades themselves as gains (negative grades are treated as 0).
* DCG is the form of CSFCube's own evaluation script (the ``rank_metrics``
  ``dcg_at_k(method=0)`` form), not the ``log2(i + 1)`` form of trec_eval::

      DCG@k = r_1 + sum_{i=2..k} r_i / log2(i)      (i = 1-based rank)

  so ranks 1 and 2 both have discount 1. NDCG@k = DCG@k of the ranking over
  DCG@k of the ideal ranking, the judged grades sorted descending; 0 when the
  ideal DCG is 0 (no positive grade judged).

Nothing heavier than the standard library is imported here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InputError

__all__ = [
    "QueryScores",
    "METRIC_NAMES",
    "read_qrels",
    "read_queries",
    "score_query",
    "mean_scores",
    "dcg",
]

RECALL_CUTOFF = 20
NDCG_CUTOFF = 10
NDCG_POOL_FRACTION = 0.2

#: Keys of :func:`mean_scores`'s result, in display order.
METRIC_NAMES = ("map", "ndcg_at_10", "ndcg_pct_20", "recall_at_20", "mrr")


# --------------------------------------------------------------------------
# Reading the collection
# --------------------------------------------------------------------------


def _numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its line end) of a UTF-8 file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    yield from enumerate(text.splitlines(), start=1)


def _shown(line: str) -> str:
    """The offending line as shown in an error message (quoted, cut at 80)."""
    if len(line) > 80:
        line = line[:77] + "..."
    return repr(line)


def read_qrels(path) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file: one ``query_id 0 doc_id relevance`` a line.

    Fields are separated by any whitespace; the second field (TREC's
    "iteration", ``0`` in CSFCube) is ignored; ``relevance`` is an integer.
    Blank lines are skipped. Returns ``{query_id: {doc_id: relevance}}`` in
    file order.

    Raises :class:`~recommender.errors.InputError` naming the file and the
    1-based line for a malformed line, for a document judged twice for the
    same query, and when the file holds no judgement at all.
    """
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    for number, line in _numbered_lines(path):
        if not line.strip():
            continue
        fields = line.split()
        relevance = None
        if len(fields) == 4:
            try:
                relevance = int(fields[3])
            except ValueError:
                relevance = None
        if relevance is None:
            raise InputError(
                f"{path} line {number}: expected 'query_id 0 doc_id relevance', got {_shown(line)}"
            )
        query_id, _, doc_id, _ = fields
        judged = qrels.setdefault(query_id, {})
        if doc_id in judged:
            raise InputError(
                f"{path} line {number}: document {doc_id} judged twice for query {query_id}"
            )
        judged[doc_id] = relevance
    if not qrels:
        raise InputError(f"{path}: no judgements")
    return qrels


_QUERIES_HEADER = ("query_id", "paper_id", "facet")


def read_queries(path) -> list[tuple[str, str, str]]:
    """Read ``queries.tsv``: ``query_id<TAB>paper_id<TAB>facet`` a line.

    The first non-blank line may be the header ``query_id paper_id facet``
    (tab-separated, any case); blank lines are skipped; fields are stripped.
    Returns ``[(query_id, paper_id, facet), ...]`` in file order.

    Raises :class:`~recommender.errors.InputError` naming the file and the
    1-based line for a line without exactly three non-empty tab-separated
    fields or a repeated query_id, and when the file lists no query.
    """
    path = Path(path)
    queries: list[tuple[str, str, str]] = []
    seen: dict[str, int] = {}
    first = True
    for number, line in _numbered_lines(path):
        if not line.strip():
            continue
        fields = tuple(field.strip() for field in line.split("\t"))
        if first and tuple(f.lower() for f in fields) == _QUERIES_HEADER:
            first = False
            continue
        first = False
        if len(fields) != 3 or not all(fields):
            raise InputError(
                f"{path} line {number}: expected 'query_id<TAB>paper_id<TAB>facet', "
                f"got {_shown(line)}"
            )
        query_id = fields[0]
        if query_id in seen:
            raise InputError(
                f"{path} line {number}: query {query_id} already listed on line {seen[query_id]}"
            )
        seen[query_id] = number
        queries.append(fields)
    if not queries:
        raise InputError(f"{path}: no queries")
    return queries


# --------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryScores:
    """Scores of one query's ranking, each in [0, 1].

    map          -- average precision (the per-query term of MAP)
    ndcg_at_10   -- NDCG@10, CSFCube DCG form
    ndcg_pct_20  -- NDCG%20: NDCG at int(0.2 * judged pool size), at least 1
    recall_at_20 -- binary recall in the top 20
    mrr          -- reciprocal rank of the first relevant document
    """

    query_id: str
    map: float
    ndcg_at_10: float
    ndcg_pct_20: float
    recall_at_20: float
    mrr: float


def dcg(gains: Sequence[float], k: int) -> float:
    """DCG@k in CSFCube's form: ``r_1 + sum_{i=2..k} r_i / log2(i)``.

    ``gains`` are in rank order; only the first ``k`` count.
    """
    total = 0.0
    for rank, gain in enumerate(gains[:k], start=1):
        if gain:
            total += gain if rank == 1 else gain / math.log2(rank)
    return total


def _ndcg(gains: list[float], ideal: list[float], k: int) -> float:
    ideal_dcg = dcg(ideal, k)
    if ideal_dcg <= 0.0:
        return 0.0
    return dcg(gains, k) / ideal_dcg


def score_query(
    ranking: Sequence[str],
    judgements: dict[str, int],
    relevant_at: int = 2,
    *,
    query_id: str = "",
) -> QueryScores:
    """Score one ranking against one query's judgements.

    ``ranking`` lists document ids best first (it must not repeat an id);
    ``judgements`` maps every judged document of the query to its grade.
    Unjudged documents in the ranking count as grade 0. With R the number of
    judged documents with grade >= ``relevant_at``:

    * AP (``map``): the mean, over the R relevant documents, of precision at
      the rank where each is retrieved, a relevant document never retrieved
      contributing 0; i.e. ``sum_{relevant ranks k} (hits in top k / k) / R``.
      0 when R = 0. (trec_eval ``map``; CSFCube's ``average_precision`` when
      the whole pool is ranked.)
    * NDCG@10 (``ndcg_at_10``): graded gains, CSFCube DCG form
      ``r_1 + sum_{i>=2} r_i / log2(i)`` (not trec_eval's ``log2(i + 1)``),
      divided by the DCG@10 of the judged grades sorted descending.
    * NDCG%20 (``ndcg_pct_20``): the same NDCG at cutoff
      ``max(1, int(0.2 * len(judgements)))``, 20% of the judged pool
      (CSFCube's headline metric beside MAP).
    * Recall@20 (``recall_at_20``): relevant documents in the top 20 over R
      (binary, not capped at 20); 0 when R = 0.
    * RR (``mrr``): 1 / rank of the first relevant document; 0 when none is
      retrieved. Its mean over queries is MRR.

    Raises ``ValueError`` when the ranking repeats a document id.
    """
    seen: set[str] = set()
    for doc in ranking:
        if doc in seen:
            raise ValueError(f"ranking for query {query_id!r} lists {doc!r} twice")
        seen.add(doc)

    grades = [judgements.get(doc, 0) for doc in ranking]
    relevant = [grade >= relevant_at for grade in grades]
    total_relevant = sum(1 for grade in judgements.values() if grade >= relevant_at)

    hits = 0
    precision_sum = 0.0
    first_hit = 0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            precision_sum += hits / rank
            if not first_hit:
                first_hit = rank

    if total_relevant:
        average_precision = precision_sum / total_relevant
        recall = sum(relevant[:RECALL_CUTOFF]) / total_relevant
    else:
        average_precision = recall = 0.0
    reciprocal_rank = 1.0 / first_hit if first_hit else 0.0

    gains = [float(max(grade, 0)) for grade in grades]
    ideal = sorted((float(max(grade, 0)) for grade in judgements.values()), reverse=True)
    pool_cutoff = max(1, int(NDCG_POOL_FRACTION * len(judgements)))

    return QueryScores(
        query_id=query_id,
        map=average_precision,
        ndcg_at_10=_ndcg(gains, ideal, NDCG_CUTOFF),
        ndcg_pct_20=_ndcg(gains, ideal, pool_cutoff),
        recall_at_20=recall,
        mrr=reciprocal_rank,
    )


def mean_scores(per_query: Sequence[QueryScores]) -> dict[str, float]:
    """Macro-average per-query scores: ``{metric: mean over queries}``.

    Keys are :data:`METRIC_NAMES` (``map`` is then MAP and ``mrr`` MRR);
    values are fractions in [0, 1] (CSFCube reports them x100).
    Raises ``ValueError`` for an empty list.
    """
    if not per_query:
        raise ValueError("no query scores to average")
    count = len(per_query)
    rows = [asdict(scores) for scores in per_query]
    return {name: math.fsum(row[name] for row in rows) / count for name in METRIC_NAMES}
