"""Ceiling of shift-type corrections: per query, the best single offset of title-only papers' fused z."""
from __future__ import annotations
import sys, warnings
from pathlib import Path
import numpy as np
sys.path.insert(0, "scripts"); sys.path.insert(0, "unlanded")
from title_only_cost import Csfcube, build, variants, SHARED
from importlib import import_module; _m = import_module("title-only-smoothing"); scores, neighbours = _m.scores, _m.neighbours
from recommender.evaluation import metrics

def main():
    csf = Csfcube(SHARED / "csfcube-dev")
    scratch = Path(".scratch/title-only")
    offsets = np.linspace(-0.3, 0.5, 33)
    for name, short in variants(csf.papers, csf.seeds, [0, 1, 2]):
        if not name.startswith("half"): continue
        csf.short = short
        with build(csf.papers, short, scratch / ("csf-" + name.replace(", ", "-").replace(" ", "-"))) as index:
            rows = csf.rows(index)
            nb, _ = neighbours(index.vectors, index.title_only, 5)
            for label, beta, strength in (("plain, no shift", 0.0, 0.0), ("smoothed k5 b.25, no shift", 0.25, 0.0)):
                best, fixed = [], np.zeros(len(offsets))
                for query_id, paper_id, _ in csf.queries:
                    judged = csf.qrels[query_id]
                    cands = np.asarray(sorted({rows[d] for d in judged if d in rows}), dtype=np.int64)
                    s = scores(index, rows[paper_id], cands, nb, beta, strength).astype(np.float64)
                    t = index.title_only[cands]
                    per = []
                    for o in offsets:
                        order = np.argsort(-(s + o * t), kind="stable")
                        ids = [index.ids[r] for r in cands[order].tolist()]
                        per.append(100 * metrics.score_query(ids, judged, query_id=query_id).map)
                    best.append(max(per)); fixed += np.array(per)
                fixed /= len(csf.queries)
                print(f"{name} {label}: best offset per query {np.mean(best):.2f}; best one offset for all {fixed.max():.2f} at {offsets[fixed.argmax()]:+.3f}; offset 0 {fixed[np.argmin(abs(offsets))]:.2f}")

with warnings.catch_warnings():
    warnings.simplefilter("ignore"); main()
