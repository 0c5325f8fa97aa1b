"""Experiment: smooth a title-only paper's two cosines with those of its nearest papers with a text."""
from __future__ import annotations
import sys, warnings, itertools
from pathlib import Path
import numpy as np
sys.path.insert(0, "scripts")
from title_only_cost import Csfcube, build, variants, SHARED, fmt
from recommender.query import ranking, pooling
from recommender.query.pooling import pool_candidates, lexical_candidates, query_cosines
from recommender.arrays import sorted_union
from recommender.evaluation import metrics
from recommender.query.ranking import POOL, select

def neighbours(vectors, short, k):
    """[n, k] rows of the k papers with a text nearest each row (by stored vector)."""
    V = np.asarray(vectors, dtype=np.float32)
    texted = np.flatnonzero(~short)
    out = np.full((len(V), k), -1, dtype=np.int64)
    sims = np.zeros((len(V), k), dtype=np.float32)
    rows = np.flatnonzero(short)
    S = V[rows] @ V[texted].T
    top = np.argsort(-S, axis=1)[:, :k]
    out[rows] = texted[top]
    sims[rows] = np.take_along_axis(S, top, axis=1)
    return out, sims

def scores(index, qrow, rows, nb, beta, strength, lex_beta=None):
    lex_beta = beta if lex_beta is None else lex_beta
    query = index._per_seed_queries([qrow], [], "hybrid", False, [])[0]
    dense_rows, lexical_rows = pool_candidates(index, query, {qrow}, POOL, "hybrid")
    pool = sorted_union(dense_rows, lexical_rows)
    everything = sorted_union(pool, rows)
    short = index.title_only
    extra = nb[everything][short[everything]].ravel() if beta or lex_beta else np.zeros(0, np.int64)
    extra = extra[extra >= 0]
    allrows = sorted_union(everything, extra)
    found, lexical = lexical_candidates(index, query, 1, allrows)
    lex = dict(zip(found.tolist(), lexical.tolist()))
    dense = dict(zip(allrows.tolist(), query_cosines(index, query, allrows).tolist()))
    d = np.array([dense[r] for r in everything.tolist()])
    l = np.array([lex[r] for r in everything.tolist()])
    if beta or lex_beta:
        for i, r in enumerate(everything.tolist()):
            if short[r]:
                n = nb[r]
                d[i] = (1 - beta) * d[i] + beta * np.mean([dense[x] for x in n])
                l[i] = (1 - lex_beta) * l[i] + lex_beta * np.mean([lex[x] for x in n])
    fused = ranking.fuse(d, l, "hybrid", np.searchsorted(everything, pool), index.dense_weight,
                         short[everything], strength)
    return fused[np.searchsorted(everything, rows)]

def figures(csf, index, nb, beta, strength, lex_beta=None):
    rows = csf.rows(index)
    out = []
    for query_id, paper_id, _ in csf.queries:
        judged = csf.qrels[query_id]
        cands = np.asarray(sorted({rows[doc] for doc in judged if doc in rows}), dtype=np.int64)
        s = scores(index, rows[paper_id], cands, nb, beta, strength, lex_beta)
        ranked, _ = select(cands, s, index.tiebreak, index.vectors, len(cands), None, None)
        sc = metrics.score_query([index.ids[r] for r in ranked.tolist()], judged, query_id=query_id)
        out.append([100 * sc.map, 100 * sc.ndcg_pct_20])
    return np.array(out)

def main():
    csf = Csfcube(SHARED / "csfcube-dev")
    scratch = Path(".scratch/title-only")
    K = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [5, 10, 20]
    B = [float(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [0.0, 0.25, 0.5, 0.75]
    S = [float(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [0.0, 1.0]
    results = {}
    for name, short in variants(csf.papers, csf.seeds, [0, 1, 2]):
        if not name.startswith("half"):
            continue
        csf.short = short
        with build(csf.papers, short, scratch / ("csf-" + name.replace(", ", "-").replace(" ", "-"))) as index:
            for k in K:
                nb, _ = neighbours(index.vectors, index.title_only, k)
                for b, s in itertools.product(B, S):
                    if b == 0 and k != K[0]:
                        continue
                    f = figures(csf, index, nb, b, s)
                    results.setdefault((k, b, s), []).append(f)
                    print(f"# {name} k={k} beta={b} strength={s}: {fmt(f.mean(axis=0))}", file=sys.stderr, flush=True)
    print("k beta strength: mean over seeds MAP / NDCG%20 (per-seed MAP)")
    for key, fs in results.items():
        m = np.mean([f.mean(axis=0) for f in fs], axis=0)
        print(key, fmt(m), [round(float(f.mean(axis=0)[0]), 2) for f in fs])
    np.save(".scratch/expand_results.npy", {str(k): np.stack(v) for k, v in results.items()}, allow_pickle=True)

if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main()


def cross_validate(results_file=".scratch/expand_results.npy"):
    """Repeated 2-fold CV over the query papers: the (k, beta) chosen on one half, its MAP / NDCG%20
    gain over the shipped correction (strength 1, no smoothing) on the other."""
    from collections import Counter

    from tune_relevance import folds

    csf = Csfcube(SHARED / "csfcube-dev")
    papers = [p for _, p, _ in csf.queries]
    R = np.load(results_file, allow_pickle=True).item()
    keys = [k for k in R if k.endswith(", 1.0)")]
    base = R["(3, 0.0, 1.0)"]
    arr = np.stack([R[k] for k in keys])
    gains, chosen = [], []
    for train, _ in folds(papers, 50):
        m = np.array([p in train for p in papers])
        b = int(np.argmax(arr[:, :, m].mean(axis=(1, 2)).sum(axis=1)))
        chosen.append(keys[b])
        gains.append((arr[b][:, ~m] - base[:, ~m]).mean(axis=(0, 1)))
    g = np.array(gains)
    print(f"held-out gain: MAP {g[:, 0].mean():+.2f} (sd {g[:, 0].std():.2f}), "
          f"NDCG%20 {g[:, 1].mean():+.2f} (sd {g[:, 1].std():.2f}); chosen {Counter(chosen).most_common(3)}")
