"""Ceiling: the best merge of the two kinds' own orders (title-only, with text) for AP, per query."""
from __future__ import annotations
import sys, warnings
from pathlib import Path
import numpy as np
sys.path.insert(0, "scripts"); sys.path.insert(0, "unlanded")
from title_only_cost import Csfcube, build, variants, SHARED, fmt
from importlib import import_module; _m = import_module("title-only-smoothing"); scores, neighbours = _m.scores, _m.neighbours
from recommender.query.ranking import select
from recommender.evaluation import metrics

def best_merge_ap(a, b, R):
    n, m = len(a), len(b)
    ca = np.concatenate([[0], np.cumsum(a)]); cb = np.concatenate([[0], np.cumsum(b)])
    dp = np.full((n + 1, m + 1), -1.0); dp[0, 0] = 0.0
    for i in range(n + 1):
        for j in range(m + 1):
            if dp[i, j] < 0: continue
            p = i + j + 1
            hits = ca[i] + cb[j]
            if i < n:
                v = dp[i, j] + (a[i] * (hits + 1) / p)
                dp[i + 1, j] = max(dp[i + 1, j], v)
            if j < m:
                v = dp[i, j] + (b[j] * (hits + 1) / p)
                dp[i, j + 1] = max(dp[i, j + 1], v)
    return dp[n, m] / R if R else 0.0

def main():
    csf = Csfcube(SHARED / "csfcube-dev")
    scratch = Path(".scratch/title-only")
    for name, short in variants(csf.papers, csf.seeds, [0, 1, 2]):
        if not name.startswith("half"): continue
        csf.short = short
        with build(csf.papers, short, scratch / ("csf-" + name.replace(", ", "-").replace(" ", "-"))) as index:
            rows = csf.rows(index)
            nb, _ = neighbours(index.vectors, index.title_only, 5)
            for label, beta in (("plain", 0.0), ("smoothed k5 b.25", 0.25)):
                aps, actual = [], []
                for query_id, paper_id, _ in csf.queries:
                    judged = csf.qrels[query_id]
                    cands = np.asarray(sorted({rows[d] for d in judged if d in rows}), dtype=np.int64)
                    s = scores(index, rows[paper_id], cands, nb, beta, 1.0)
                    ranked, _ = select(cands, s, index.tiebreak, index.vectors, len(cands), None, None)
                    ranked = ranked.tolist()
                    ids = [index.ids[r] for r in ranked]
                    rel = [judged.get(i, 0) >= 2 for i in ids]
                    R = sum(1 for g in judged.values() if g >= 2)
                    t = index.title_only
                    a = [x for r, x in zip(ranked, rel) if not t[r]]
                    b = [x for r, x in zip(ranked, rel) if t[r]]
                    aps.append(100 * best_merge_ap(np.array(a, float), np.array(b, float), R))
                    actual.append(100 * metrics.score_query(ids, judged, query_id=query_id).map)
                print(f"{name} {label}: actual MAP {np.mean(actual):.2f}, best merge of the kinds' orders {np.mean(aps):.2f}")

with warnings.catch_warnings():
    warnings.simplefilter("ignore"); main()
