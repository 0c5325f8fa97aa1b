"""Title-only candidates scored against the query's title (alpha: its share of their dense score), with
per-kind standardisation ("sep") or the shipped pool-wide z-scores and mean shift ("joint").
Run from the repository root."""
import sys, warnings
sys.path.insert(0, "scripts")
warnings.simplefilter("ignore")
import numpy as np
import title_only_cost as t
from recommender.query import ranking
from recommender.evaluation import metrics
from pathlib import Path

def z(x, m):
    x = np.asarray(x, float); s = x[m]
    return (x - s.mean()) / (s.std() if s.std() > 1e-9 else 1.0)

csf = t.Csfcube(t.SHARED / "csfcube-dev")
scratch = Path(".scratch/title-only")
title_of = {p.id: p.title for p in csf.papers}
W = ranking.DENSE_WEIGHT
for name, short in t.variants(csf.papers, csf.seeds, [0, 1, 2]):
    if not name.startswith("half") and name != "all": continue
    csf.short = short
    with t.build(csf.papers, short, scratch / ("csf-" + name.replace(", ", "-").replace(" ", "-"))) as index:
        rows = csf.rows(index)
        mask = index.title_only
        qt = index.encode_sentences([title_of[pid] for _, pid, _ in csf.queries])
        qt = qt / np.linalg.norm(qt, axis=1, keepdims=True)
        for alpha in (0.0, 0.5, 1.0):
          for variant in ("sep", "joint"):
            out = []
            for qi, (query_id, paper_id, _) in enumerate(csf.queries):
                judged = csf.qrels[query_id]
                cands = np.array(sorted({rows[d] for d in judged if d in rows}), dtype=np.int64)
                dense = index.score_rows(rows[paper_id], cands, "dense")
                lex = index.score_rows(rows[paper_id], cands, "lexical")
                vt = index.vectors_at(cands).astype(float)
                vt = vt / np.linalg.norm(vt, axis=1, keepdims=True)
                tdense = vt @ qt[qi]
                so = mask[cands]
                d2 = np.where(so, (1 - alpha) * dense + alpha * tdense, dense)
                if variant == "sep":
                    dz = np.where(so, z(d2, so), z(d2, ~so)); lz = np.where(so, z(lex, so), z(lex, ~so))
                else:
                    dz = z(d2, np.ones(len(so), bool)); lz = z(lex, np.ones(len(so), bool))
                    dz = dz + ranking.title_only_shift(dz, so, np.arange(len(so)), 1.0)
                    lz = lz + ranking.title_only_shift(lz, so, np.arange(len(so)), 1.0)
                s = W * dz + (1 - W) * lz
                order = cands[np.lexsort((index.tiebreak[cands], -np.round(s, 6)))]
                sc = metrics.score_query([index.ids[r] for r in order], judged, query_id=query_id)
                out.append([100 * sc.map, 100 * sc.ndcg_pct_20])
            print(name, variant, alpha, t.fmt(np.mean(out, axis=0)), flush=True)
