"""Title-only corrections beyond the shipped mean shift, on CSFCube dev (half title-only, seeds 0-2):
the mean shift at strengths 1.5-3, a per-kind z-score (mean and spread), per-kind quantile matching.
Run from the repository root."""
import sys, warnings
sys.path.insert(0, "scripts")
import numpy as np
import title_only_cost as t
from recommender.query import ranking

orig = ranking.title_only_shift
MIN = ranking.TITLE_ONLY_MIN_GROUP

def zkind(scores, title_only, pool, strength):
    scores = np.asarray(scores, float); title_only = np.asarray(title_only, bool)
    shift = np.zeros(len(scores))
    if strength == 0 or not title_only.any(): return shift
    pool = np.asarray(pool, np.int64) if len(pool) else np.arange(len(scores))
    short = title_only[pool]
    if short.sum() < MIN or (~short).sum() < MIN: return shift
    a = scores[pool][~short]; b = scores[pool][short]
    sa, sb = a.std(), b.std()
    new = a.mean() + (scores - b.mean()) * (sa / sb if sb > 1e-9 else 1.0)
    shift[title_only] = strength * (new - scores)[title_only]
    return shift

def quant(scores, title_only, pool, strength):
    scores = np.asarray(scores, float); title_only = np.asarray(title_only, bool)
    shift = np.zeros(len(scores))
    if strength == 0 or not title_only.any(): return shift
    pool = np.asarray(pool, np.int64) if len(pool) else np.arange(len(scores))
    short = title_only[pool]
    if short.sum() < MIN or (~short).sum() < MIN: return shift
    a = np.sort(scores[pool][~short]); b = np.sort(scores[pool][short])
    # percentile of each title-only score among title-only, mapped into text distribution
    p = np.interp(scores, b, np.linspace(0, 1, len(b)))
    new = np.interp(p, np.linspace(0, 1, len(a)), a)
    shift[title_only] = strength * (new - scores)[title_only]
    return shift

variants = {"mean": orig, "zkind": zkind, "quant": quant}
strengths = [0.0, 1.0, 1.5, 2.0, 3.0]
from pathlib import Path
csf = t.Csfcube(t.SHARED / "csfcube-dev")
scratch = Path(".scratch/title-only"); scratch.mkdir(parents=True, exist_ok=True)
res = {}
for name, short in t.variants(csf.papers, csf.seeds, [0, 1, 2]):
    csf.short = short
    with t.build(csf.papers, short, scratch / ("csf-" + name.replace(", ", "-").replace(" ", "-"))) as index:
        for vn, fn in variants.items():
            ranking.title_only_shift = fn
            for s in strengths:
                if vn != "mean" and s not in (1.0,): continue
                f = csf.figures(index, s)
                res[(name, vn, s)] = f
                print(name, vn, s, t.fmt(f.mean(axis=0)), flush=True)
