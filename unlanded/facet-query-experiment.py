"""Experiment (issue 10, fourth measurement): faceted queries built at query time, no sentence store.

    OMP_NUM_THREADS=1 python unlanded/facet-query-experiment.py [--index-root /tmp/sent10] [--cache /tmp/sent10]

Not product code. It reuses `sentence-alignment-experiment.py` (same index, same candidate pools,
same cue-phrase + position role classifier, same repeated 2-fold CV folds). What it adds are the
facet signals not measured before, each added to main's z-fusion (window cosine + TF-IDF) as
further z-scores over the query's pool:

  lex-facet    TF-IDF cosine of the candidate with the query's facet sentences (+ title): needs no
               model, no build change and no storage: the cheapest `--facet` there could be;
  dense-facet  window cosine of the candidate with the query's title + facet sentences, encoded at
               query time (the one-off of an earlier session, now under the CV);
  same-role    alignment of the query's facet sentences with the candidate's sentences *of the
               same role* (candidate roles from the same classifier; the sentences separately
               encoded with their title, as in the third measurement): facet to facet.

Each family: main's dense share wd x the family's extra weight(s), chosen by CV as before; the
family's control is the same CV with the extra weights fixed at 0. Gold roles ("gold") are run
beside our classifier ("own") to show what better roles would buy.
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("sentence_alignment", HERE / "sentence-alignment-experiment.py")
sa = importlib.util.module_from_spec(_spec)
sys.modules["sentence_alignment"] = sa
_spec.loader.exec_module(sa)
tune = sa.tune

from recommender.evaluation import metrics  # noqa: E402
from recommender.query.ranking import DENSE_WEIGHT, select  # noqa: E402

DENSE_SHARES = (0.5, 0.6, 0.7, 0.8)
EXTRA = (0.0, 0.1, 0.25, 0.5, 1.0)


class NoTiming(sa.Experiment):
    def _timing(self, full_seconds):  # the build-cost timing is the third measurement's, not redone here
        return {}


def z(scores, pool):
    return sa._standardised(scores, pool)


def fused(dense, lexical, extras, pool, wd, weights):
    mixed = wd * z(dense, pool) + (1.0 - wd) * z(lexical, pool)
    for signal, weight in zip(extras, weights):
        if weight:
            mixed = mixed + weight * z(signal, pool)
    standing = z(mixed, pool)
    sample = np.asarray(dense, dtype=np.float64)[pool]
    return np.clip(float(sample.mean()) + standing * float(sample.std()), -1.0, 1.0).astype(np.float32)


def figures(experiment, candidates, extras_per_query, settings):
    rec = experiment.recommender
    out = np.zeros((len(settings), len(candidates), 2))
    for q, (query_id, judged, pool, dense, lexical, everything) in enumerate(candidates):
        extras = [signal[everything] for signal in extras_per_query[q]]
        at = np.searchsorted(everything, judged)
        judged_ids = experiment.collection.qrels[query_id]
        for s, (wd, *weights) in enumerate(settings):
            scores = fused(dense, lexical, extras, pool, wd, weights)[at]
            order = select(judged, scores, rec.tiebreak, rec.vectors, len(judged))[0]
            result = metrics.score_query([rec.ids[row] for row in order], judged_ids, query_id=query_id)
            out[s, q] = [100 * result.map, 100 * result.ndcg_pct_20]
    return out


def paired(held, other):
    gain = held - other
    return (f"MAP {gain[:, 0].mean():+.2f} (sd {gain[:, 0].std():.2f}, better in {int((gain[:, 0] > 0).sum())}, "
            f"worse in {int((gain[:, 0] < 0).sum())}), NDCG%20 {gain[:, 1].mean():+.2f} (sd {gain[:, 1].std():.2f}, "
            f"better in {int((gain[:, 1] > 0).sum())}, worse in {int((gain[:, 1] < 0).sum())})")


def report(label, scores, settings, papers, repeats, facets):
    held, chosen = tune.cross_validate(scores, papers, repeats)
    control_index = [i for i, (_, *w) in enumerate(settings) if not any(w)]
    control, _ = tune.cross_validate(scores[control_index], papers, repeats)
    default = settings.index((DENSE_WEIGHT,) + (0.0,) * (len(settings[0]) - 1))
    counts = np.bincount(chosen, minlength=len(settings))
    extra_zero = sum(counts[i] for i in control_index)
    print(f"\n== {label}")
    print(f"  CV held-out MAP {held[:, 0].mean():.2f} (sd {held[:, 0].std():.2f}), NDCG%20 {held[:, 1].mean():.2f} "
          f"(sd {held[:, 1].std():.2f}); control CV (extra weights 0) {control[:, 0].mean():.2f} / {control[:, 1].mean():.2f}")
    print(f"  fold-paired minus control: {paired(held, control)}; folds choosing no facet signal: {extra_zero} of {len(chosen)}")
    for index in np.argsort(-counts, kind="stable")[:3]:
        if counts[index]:
            print(f"    chosen {counts[index]:3d}x {settings[index]}  (all: {tune.fmt(scores[index].mean(axis=0))})")
    top = int(np.argmax(counts))
    difference = scores[top] - scores[default]
    low, high = tune.bootstrap(difference)
    print(f"  most chosen vs default, all queries: {tune.fmt(scores[top].mean(axis=0))} vs "
          f"{tune.fmt(scores[default].mean(axis=0))}; paired bootstrap 95% MAP {low[0]:+.2f} to {high[0]:+.2f}, "
          f"NDCG%20 {low[1]:+.2f} to {high[1]:+.2f}")
    for facet in ("background", "method", "result"):
        mask = np.array([f == facet for f in facets])
        print(f"    {facet:10} ({mask.sum()} queries): most chosen {tune.fmt(scores[top, mask].mean(axis=0))} vs "
              f"default {tune.fmt(scores[default, mask].mean(axis=0))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE.parents[1] / "shared/eval/csfcube-dev")
    parser.add_argument("--index-root", type=Path, default=Path("/tmp/sent10"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/sent10"))
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    experiment = NoTiming(args.data, args.index_root, args.cache)
    rec = experiment.recommender
    try:
        candidates = experiment.candidates()
        papers = experiment.collection.papers()
        facets = [facet for _, _, facet in experiment.collection.queries]
        gold = {}
        with open(args.data / "query_sentences.jsonl", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                gold[record["paper_id"]] = record["sentences"]

        # Roles of every paper's sentences (our classifier), for the facet-to-facet alignment.
        roles = [np.asarray(sa.classify(s), dtype=np.int64) if s else np.zeros(0, np.int64)
                 for s in experiment.sentences]
        sentence_roles = np.full(len(experiment.owners), -1, dtype=np.int64)
        for row, found in enumerate(roles):
            if len(found):
                start = experiment.offsets[row]
                sentence_roles[start: start + len(found)] = found

        signals = {"own": [], "gold": []}
        for _, paper_id, facet in experiment.collection.queries:
            row = experiment.rows[paper_id]
            paper = experiment.papers[row]
            title = paper.text[: paper.head]
            mine = experiment.sentences[row]
            own_roles = sa.classify(mine)
            own = [s for s, r in zip(mine, own_roles) if sa.ROLES[r] == facet] or mine
            gold_sentences = [" ".join(s["text"].split()) for s in gold[paper_id]
                              if sa.GOLD_ROLE.get(s["facet"]) == facet] or [
                " ".join(s["text"].split()) for s in gold[paper_id] if s["facet"] in sa.GOLD_ROLE]
            role = sa.ROLES.index(facet)
            for variant, sentences in (("own", own), ("gold", gold_sentences)):
                text = title + " ".join(sentences)
                lexical = rec.lexical.scores(rec.lexical.transform(text)).astype(np.float64)
                dense_query = rec.encode_query(text, head=len(title))
                dense = rec.vectors.astype(np.float64) @ dense_query.astype(np.float64)
                query_vectors = experiment.encoder.encode([title + s for s in sentences])
                cosines = query_vectors.astype(np.float64) @ experiment.sentence_vectors.astype(np.float64).T
                cosines[:, sentence_roles != role] = -1.0  # only the candidate's sentences of the same role
                best = np.maximum.reduceat(cosines, experiment.offsets, axis=1)
                has_role = np.zeros(len(experiment.papers), dtype=bool)
                has_role[experiment.owners[sentence_roles == role]] = True
                whole_best = np.maximum.reduceat(
                    query_vectors.astype(np.float64) @ experiment.sentence_vectors.astype(np.float64).T,
                    experiment.offsets, axis=1)
                same_role = np.where(has_role, best.mean(axis=0), whole_best.mean(axis=0))  # no such role: all
                signals[variant].append((lexical, dense, same_role))

        right, total = experiment.classifier_accuracy()
        print(f"own classifier on the gold dev sentences: {right}/{total} = {100 * right / total:.1f}%")
        families = {
            "lex-facet": (0,), "dense-facet": (1,), "same-role alignment": (2,),
            "lex-facet + dense-facet": (0, 1),
        }
        for variant in ("own", "gold"):
            for family, which in families.items():
                settings = [(wd, *w) for wd in DENSE_SHARES for w in itertools.product(EXTRA, repeat=len(which))]
                extras = [[signal[i] for i in which] for signal in signals[variant]]
                scores = figures(experiment, candidates, extras, settings)
                report(f"{family}, {variant} roles", scores, settings, papers, args.repeats, facets)
    finally:
        experiment.collection.close()


if __name__ == "__main__":
    main()
