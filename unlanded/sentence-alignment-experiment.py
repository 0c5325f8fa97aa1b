"""Experiment (issue 10): sentence alignment from SEPARATELY encoded sentences, measured under main's CV.

    OMP_NUM_THREADS=1 python unlanded/sentence-alignment-experiment.py [--data ../shared/eval/csfcube-dev]
        [--index-root /tmp/sent10] [--cache /tmp/sent10] [--repeats 50]

Not product code. Every CSFCube dev paper's abstract is split with the project's splitter
(`corpus.text.split_sentences`, the SENTENCE_END rule the sentence windows cut at) and every
sentence is encoded on its own as "<title>. <sentence>" with the index's own ONNX encoder
(1 thread); the vectors are cached as .npy under --cache. The window pass is timed on a
sample of papers against the sentence pass on the same papers (the build-cost ratio).

Alignment of candidate c for query paper q: mean over q's sentences (title excluded) of the
best cosine with any sentence of c. Variants of q's sentences:
  whole   every sentence of q (our splitter);
  gold    q's sentences of the query's facet, gold split and roles (query_sentences.jsonl;
          "objective" counted as background, "other" left out), encoded title-prefixed;
  own     q's sentences of the query's facet (our splitter), roles from relevance10's
          cue-phrase + position classifier (copied below, needs no CSFCube data).
  (a facet with no sentence of that role falls back to all of q's sentences.)

Fusion: main's candidate pool for the query (POOL from each side, `Recommender._pool`), z-scores
over that pool of window cosine, TF-IDF and alignment (as `ranking.fuse` normalises), score =
wd z(dense) + wl z(tfidf) + wa z(align), put back on the window cosine's scale as `fuse` does;
the judged candidates ranked by it as `rank_rows` ranks them (ties by ID). With wa = 0 this is
main's ranking exactly (checked). Then tune_relevance's repeated 2-fold CV (same folds, seed 0).
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))  # tune_relevance
import tune_relevance as tune  # noqa: E402

from recommender.arrays import sorted_union  # noqa: E402
from recommender.corpus.text import split_sentences  # noqa: E402
from recommender.embed import loading  # noqa: E402
from recommender.embed.windows import Chunking, embed_texts, split_windows  # noqa: E402
from recommender.evaluation import metrics  # noqa: E402
from recommender.evaluation.evaluate import rank_rows  # noqa: E402
from recommender.index.store import QUERY_ENCODER  # noqa: E402
from recommender.query.ranking import DENSE_WEIGHT, POOL, fuse, select  # noqa: E402

DENSE_SHARES = (0.5, 0.6, 0.7, 0.8)  # wd; wl = 1 - wd (0.5 holds the issue author's 1:1:2 z-sum at wa = 1)
ALIGN_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
SETTINGS = list(itertools.product(DENSE_SHARES, ALIGN_WEIGHTS))
DEFAULT = SETTINGS.index((DENSE_WEIGHT, 0.0))
AUTHOR = SETTINGS.index((0.5, 1.0))
GOLD_ROLE = {"background": "background", "objective": "background", "method": "method", "result": "result"}

# ---- relevance10:recommender/embed/roles.py, copied verbatim (classifier only) ----
ROLES = ("background", "method", "result")
CUES = {
    "background": re.compile(
        r"\b(recent(ly)?|has been|have been|had been|is an? (important|challenging|fundamental|key|central|crucial)"
        r"|remains?|however|existing|traditional(ly)?|previous(ly)?|prior work|widely|growing|increasing(ly)?"
        r"|popular|challeng\w*|problem of|little|limited|lack|in this (paper|work)|this (paper|work)"
        r"|we (study|investigate|address|consider|explore|examine|focus))\b", re.IGNORECASE),
    "method": re.compile(
        r"\b(we (propose|present|introduce|develop|design|describe|use|apply|train|extend|formulate|build|employ"
        r"|leverage|adopt|define|model|learn|combine|exploit|construct)|our (approach|method|model|framework|system"
        r"|algorithm|technique)|based on|consists? of|by (using|combining|learning|leveraging)|which (uses|learns)"
        r"|algorithm|architecture|framework|formulat\w*)\b", re.IGNORECASE),
    "result": re.compile(
        r"\b(experiment(s|al|ally)?|results?|show(s|ed|n)?|demonstrat\w*|outperform\w*|achiev\w*|improve(s|d|ment|ments)?"
        r"|state[- ]of[- ]the[- ]art|significant(ly)?|accuracy|evaluat\w*|empirical(ly)?|find|found|suggest\w*"
        r"|better|superior|competitive|benchmark\w*|gains?|effective(ness)?)\b", re.IGNORECASE),
}
CUE_WEIGHT = 0.5
CUE_CAP = 2
POSITION_WEIGHT = 1.0


def position_scores(count: int) -> np.ndarray:
    if count < 2:
        return np.zeros((count, len(ROLES)))
    where = np.linspace(0.0, 1.0, count)
    return np.stack([1.0 - 2.0 * where, 1.0 - 2.0 * np.abs(where - 0.5), 2.0 * where - 1.0], axis=1)


def cue_scores(sentences: Sequence[str]) -> np.ndarray:
    out = np.zeros((len(sentences), len(ROLES)))
    for i, sentence in enumerate(sentences):
        for j, role in enumerate(ROLES):
            out[i, j] = min(len(CUES[role].findall(sentence)), CUE_CAP)
    return out


def classify(sentences: Sequence[str]) -> list[int]:
    if not sentences:
        return []
    scores = CUE_WEIGHT * cue_scores(sentences) + POSITION_WEIGHT * position_scores(len(sentences))
    return monotone_path(scores)


def monotone_path(scores: np.ndarray) -> list[int]:
    n, k = scores.shape
    best = np.full((n, k), -np.inf)
    back = np.zeros((n, k), dtype=np.int64)
    best[0] = scores[0]
    for i in range(1, n):
        for j in range(k):
            previous = int(np.argmax(best[i - 1, : j + 1]))
            best[i, j] = best[i - 1, previous] + scores[i, j]
            back[i, j] = previous
    path = [int(np.argmax(best[-1]))]
    for i in range(n - 1, 0, -1):
        path.append(int(back[i, path[-1]]))
    return path[::-1]
# ---- end of the copy ----


def encode_cached(encoder, texts: list[str], path_stem: Path) -> tuple[np.ndarray, float | None]:
    """Vectors of `texts` (one encoder call per 256), cached by the texts' hash; the seconds taken if encoded now."""
    digest = hashlib.sha256("\x00".join([encoder.name, *texts]).encode("utf-8")).hexdigest()[:16]
    path = path_stem.with_name(f"{path_stem.name}-{digest}.npy")
    if path.exists():
        return np.load(path), None
    started = time.perf_counter()
    vectors = np.concatenate([encoder.encode(texts[i: i + 256]) for i in range(0, len(texts), 256)])
    seconds = time.perf_counter() - started
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors, seconds


class Experiment:
    def __init__(self, data: Path, index_root: Path, cache: Path):
        self.collection = tune.Collection(data, index_root)
        self.recommender = self.collection.open("sentences")
        self.cache = cache
        self.data = data
        rec = self.recommender
        self.papers = list(rec.papers())
        self.rows = {paper_id: row for row, paper_id in enumerate(rec.ids)}
        self.encoder = loading.load_onnx_encoder(rec.stored.path(QUERY_ENCODER), rec.manifest["model"], threads=1)
        # Our splitter's sentences of every paper, title-prefixed.
        self.sentences: list[list[str]] = []
        texts, owners = [], []
        for row, paper in enumerate(self.papers):
            found = [s for s in split_sentences(paper.abstract) if s.strip()] if paper.abstract.strip() else []
            self.sentences.append(found)
            prefix = paper.text[: paper.head]
            for sentence in found or [paper.text]:
                texts.append(prefix + sentence if found else sentence)
                owners.append(row)
        self.owners = np.asarray(owners)
        self.offsets = np.searchsorted(self.owners, np.arange(len(self.papers)))  # first sentence of each paper
        self.texts = texts
        self.sentence_vectors, seconds = encode_cached(self.encoder, texts, cache / "sentences")
        self.timing = self._timing(seconds)

    def _timing(self, full_seconds: float | None) -> dict:
        """Window pass against sentence pass on the same sample of papers (1 ONNX thread), cached in a JSON."""
        path = self.cache / "timing.json"
        if path.exists():
            return json.loads(path.read_text())
        sample = list(range(0, len(self.papers), 4))
        chosen = set(sample)
        texts = [self.papers[i].text for i in sample]
        heads = [self.papers[i].head for i in sample]
        started = time.perf_counter()
        windows = embed_texts(self.encoder, texts, Chunking(strategy="sentences"), heads=heads).vectors
        window_seconds = time.perf_counter() - started
        sample_texts = [t for t, owner in zip(self.texts, self.owners.tolist()) if owner in chosen]
        started = time.perf_counter()
        sentence_vectors = np.concatenate([self.encoder.encode(sample_texts[i: i + 256])
                                           for i in range(0, len(sample_texts), 256)])
        sentence_seconds = time.perf_counter() - started
        window_count = sum(len(split_windows(
            t, self.encoder.token_spans(t), self.encoder.max_tokens, 32, h)) for t, h in zip(texts, heads))
        stored = np.asarray(self.recommender.vectors[np.asarray(sample)], dtype=np.float32)
        mine = self.sentence_vectors[np.isin(self.owners, sample)]
        timing = {
            "sample_papers": len(sample), "sample_windows": window_count, "sample_sentences": len(sample_texts),
            "window_seconds": window_seconds, "sentence_seconds": sentence_seconds,
            "ratio": sentence_seconds / window_seconds,
            "all_sentences": len(self.texts), "all_sentence_seconds": full_seconds,
            "window_vectors_vs_index_max_abs_diff": float(np.abs(windows - stored).max()),
            "sentence_vectors_recheck_max_abs_diff": float(np.abs(sentence_vectors - mine).max()),
        }
        path.write_text(json.dumps(timing, indent=1))
        return timing

    def alignment(self, query_vectors: np.ndarray) -> np.ndarray:
        """[papers]: mean over the query sentences of the best cosine with any sentence of each paper."""
        cosines = query_vectors.astype(np.float64) @ self.sentence_vectors.astype(np.float64).T  # [m, sentences]
        best = np.maximum.reduceat(cosines, self.offsets, axis=1)  # [m, papers]
        return best.mean(axis=0)

    def query_sets(self) -> dict[str, list[np.ndarray]]:
        """Per query (in queries.tsv order), the query-side sentence vectors of each variant."""
        gold = {}
        with open(self.data / "query_sentences.jsonl", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                gold[record["paper_id"]] = record["sentences"]
        gold_texts, gold_index = [], {}
        for paper_id, sentences in gold.items():
            paper = self.papers[self.rows[paper_id]]
            prefix = paper.text[: paper.head]
            for i, sentence in enumerate(sentences):
                gold_index[(paper_id, i)] = len(gold_texts)
                gold_texts.append(prefix + " ".join(sentence["text"].split()))
        gold_vectors, _ = encode_cached(self.encoder, gold_texts, self.cache / "gold")
        out = {"whole": [], "gold": [], "own": []}
        self.fallbacks = {"gold": 0, "own": 0}
        self.used = {"whole": [], "gold": [], "own": []}
        for _, paper_id, facet in self.collection.queries:
            row = self.rows[paper_id]
            own = self.sentence_vectors[self.owners == row]
            out["whole"].append(own)
            self.used["whole"].append(len(own))
            sentences = gold[paper_id]
            keep = [gold_index[(paper_id, i)] for i, s in enumerate(sentences) if GOLD_ROLE.get(s["facet"]) == facet]
            if not keep:
                self.fallbacks["gold"] += 1
                keep = [gold_index[(paper_id, i)] for i, s in enumerate(sentences) if s["facet"] in GOLD_ROLE]
            out["gold"].append(gold_vectors[keep])
            self.used["gold"].append(len(keep))
            roles = classify(self.sentences[row])
            mask = np.array([ROLES[r] == facet for r in roles], dtype=bool)
            if not mask.any():
                self.fallbacks["own"] += 1
                mask[:] = True
            out["own"].append(own[mask])
            self.used["own"].append(int(mask.sum()))
        return out

    def classifier_accuracy(self) -> tuple[int, int]:
        right = total = 0
        with open(self.data / "query_sentences.jsonl", encoding="utf-8") as handle:
            for line in handle:
                sentences = json.loads(line)["sentences"]
                for sentence, role in zip(sentences, classify([s["text"] for s in sentences])):
                    total += 1
                    right += GOLD_ROLE.get(sentence["facet"]) == ROLES[role]  # "other" counts as an error
        return right, total

    def candidates(self):
        """Per query: (judged rows, pool positions, dense, lexical over `everything`, everything)."""
        rec = self.recommender
        out = []
        for query_id, paper_id, _ in self.collection.queries:
            query_row = self.rows[paper_id]
            query = rec._seed_query([query_row], [], "hybrid", False)
            dense_rows, lexical_rows = rec._pool(query, {query_row}, POOL, "hybrid")
            pool = sorted_union(dense_rows, lexical_rows)
            judged_ids = self.collection.qrels[query_id]
            judged = np.asarray(sorted(self.rows[d] for d in judged_ids if d in self.rows), dtype=np.int64)
            everything = sorted_union(pool, judged)
            found, lexical = rec._lexical_found(query, 1, everything)
            lexical = lexical[np.searchsorted(found, everything)]
            dense = rec._query_cosines(query, everything)
            out.append((query_id, judged, np.searchsorted(everything, pool), dense, lexical, everything))
        return out

    def figures(self, candidates, aligns: list[np.ndarray] | None) -> np.ndarray:
        """[settings, queries, 2] MAP / NDCG%20 x100 for every (wd, wa) setting."""
        rec = self.recommender
        out = np.zeros((len(SETTINGS), len(candidates), 2))
        for q, (query_id, judged, pool, dense, lexical, everything) in enumerate(candidates):
            align = aligns[q][everything] if aligns is not None else np.zeros(len(everything))
            at = np.searchsorted(everything, judged)
            judged_ids = self.collection.qrels[query_id]
            for s, (wd, wa) in enumerate(SETTINGS):
                scores = fuse3(dense, lexical, align, pool, wd, wa)[at]
                order = select(judged, scores, rec.tiebreak, rec.vectors, len(judged))[0]
                result = metrics.score_query([rec.ids[row] for row in order], judged_ids, query_id=query_id)
                out[s, q] = [100 * result.map, 100 * result.ndcg_pct_20]
        return out


def fuse3(dense, lexical, align, pool, wd: float, wa: float) -> np.ndarray:
    """`ranking.fuse`'s hybrid score with a third z-scored term (wa x alignment); wa = 0 is `fuse` exactly."""
    dense = np.asarray(dense, dtype=np.float64)
    z = _standardised
    mixed = wd * z(dense, pool) + (1.0 - wd) * z(lexical, pool)
    if wa:
        mixed = mixed + wa * z(align, pool)
    standing = z(mixed, pool)
    sample = dense[pool]
    return np.clip(float(sample.mean()) + standing * float(sample.std()), -1.0, 1.0).astype(np.float32)


def _standardised(scores, pool):
    scores = np.asarray(scores, dtype=np.float64)
    sample = scores[pool] if len(pool) else scores
    spread = float(sample.std())
    return (scores - float(sample.mean())) / (spread if spread > 1e-9 else 1.0)


def name(setting: int) -> str:
    wd, wa = SETTINGS[setting]
    return f"wd {wd:.1f} wl {1 - wd:.1f} wa {wa:.2f}"


def paired(held: np.ndarray, other: np.ndarray) -> str:
    gain = held - other
    return (f"MAP {gain[:, 0].mean():+.2f} (sd {gain[:, 0].std():.2f}, better in {int((gain[:, 0] > 0).sum())}, "
            f"worse in {int((gain[:, 0] < 0).sum())} of {len(gain)}), NDCG%20 {gain[:, 1].mean():+.2f} "
            f"(sd {gain[:, 1].std():.2f}, better in {int((gain[:, 1] > 0).sum())}, worse in {int((gain[:, 1] < 0).sum())})")


def baselines(scores: np.ndarray, papers: list[str], repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Held-out per fold of main's fixed default, and of the control CV (wa = 0, only the dense share chosen)."""
    fixed = []
    for train, _ in tune.folds(papers, repeats):
        mask = np.array([paper in train for paper in papers])
        fixed.append(scores[DEFAULT, ~mask].mean(axis=0))
    control = scores[[i for i, (_, wa) in enumerate(SETTINGS) if wa == 0]]
    return np.array(fixed), tune.cross_validate(control, papers, repeats)[0]


def report_variant(label: str, scores: np.ndarray, papers: list[str], repeats: int, short: bool = False) -> None:
    held, chosen = tune.cross_validate(scores, papers, repeats)
    fixed, control = baselines(scores, papers, repeats)
    counts = np.bincount(chosen, minlength=len(SETTINGS))
    wa_counts = {wa: int(sum(counts[i] for i, (_, a) in enumerate(SETTINGS) if a == wa)) for wa in ALIGN_WEIGHTS}
    top = int(np.argmax(counts))
    print(f"\n== {label}")
    print(f"  CV held-out MAP {held[:, 0].mean():.2f} (sd {held[:, 0].std():.2f}), NDCG%20 {held[:, 1].mean():.2f} "
          f"(sd {held[:, 1].std():.2f}); same folds: main's fixed default {fixed[:, 0].mean():.2f} / "
          f"{fixed[:, 1].mean():.2f}, control CV (wa = 0) {control[:, 0].mean():.2f} / {control[:, 1].mean():.2f}")
    print(f"  fold-paired minus main's fixed default: {paired(held, fixed)}")
    print(f"  fold-paired minus control CV (wa = 0): {paired(held, control)}")
    print("  alignment weight chosen: " + ", ".join(f"{wa:g}: {n}" for wa, n in wa_counts.items()))
    for index in np.argsort(-counts, kind="stable")[: 2 if short else 4]:
        if counts[index]:
            print(f"    chosen {counts[index]:3d}x {name(index)}  (all: {tune.fmt(scores[index].mean(axis=0))})")
    difference = scores[top] - scores[DEFAULT]
    low, high = tune.bootstrap(difference)
    print(f"  most chosen {name(top)}: all {len(papers)} queries {tune.fmt(scores[top].mean(axis=0))} vs default "
          f"{tune.fmt(scores[DEFAULT].mean(axis=0))}; paired bootstrap 95% of the difference MAP "
          f"{low[0]:+.2f} to {high[0]:+.2f}, NDCG%20 {low[1]:+.2f} to {high[1]:+.2f}")
    for metric, column in (("MAP", 0), ("NDCG%20", 1)):
        change = difference[:, column]
        print(f"    {metric} per query: better {int((change > 0.5).sum())}, worse {int((change < -0.5).sum())}, "
              f"within 0.5 {int((abs(change) <= 0.5).sum())}; mean {change.mean():+.2f}, median {np.median(change):+.2f}")
    if short:
        return
    best = int(np.argmax(scores.mean(axis=1).sum(axis=1)))
    print(f"  (not CV) best on all: {name(best)} {tune.fmt(scores[best].mean(axis=0))}; the issue author's "
          f"1:1:2 z-sum ({name(AUTHOR)}): {tune.fmt(scores[AUTHOR].mean(axis=0))}")
    for wd in DENSE_SHARES:
        print(f"  all by alignment weight at wd {wd}: " + ", ".join(
            f"{wa:g}: {tune.fmt(scores[SETTINGS.index((wd, wa))].mean(axis=0))}" for wa in ALIGN_WEIGHTS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/eval/csfcube-dev")
    parser.add_argument("--index-root", type=Path, default=Path("/tmp/sent10"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/sent10"))
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--drop", default="5052952",
                        help="a query paper left out in a sensitivity rerun (5052952: its method query has 2 relevant "
                             "candidates, so its MAP swings 57 -> 20 with the weights and dominates the folds it is in)")
    args = parser.parse_args()
    experiment = Experiment(args.data, args.index_root, args.cache)
    try:
        timing = experiment.timing
        print(f"sentences: {len(experiment.texts)} over {len(experiment.papers)} papers "
              f"(encoded in {timing['all_sentence_seconds'] or 0:.0f} s at 1 thread when first run)")
        print(f"build cost, same {timing['sample_papers']} papers, 1 ONNX thread: window pass "
              f"{timing['window_seconds']:.1f} s ({timing['sample_windows']} windows), sentence pass "
              f"{timing['sentence_seconds']:.1f} s ({timing['sample_sentences']} sentences): ratio "
              f"{timing['ratio']:.2f}x (checks: window vectors vs index max |diff| "
              f"{timing['window_vectors_vs_index_max_abs_diff']:.1e}, sentence re-encode {timing['sentence_vectors_recheck_max_abs_diff']:.1e})")
        right, total = experiment.classifier_accuracy()
        print(f"own classifier on the gold dev sentences: {right}/{total} = {100 * right / total:.1f}%")

        candidates = experiment.candidates()
        papers = experiment.collection.papers()
        base = experiment.figures(candidates, None)
        shipped = experiment.collection.run("sentences")
        assert np.array_equal(base[DEFAULT], shipped), "wa = 0 must reproduce main's ranking"
        for q, (_, judged, pool, dense, lexical, _e) in enumerate(candidates):  # fuse3 == fuse at wa = 0
            assert np.array_equal(fuse3(dense, lexical, 0, pool, DENSE_WEIGHT, 0.0),
                                  fuse(dense, lexical, "hybrid", pool, DENSE_WEIGHT))
        print(f"main's default reproduced: {tune.fmt(shipped.mean(axis=0))} (wa = 0 identical per query)")
        control = base[[i for i, (_, wa) in enumerate(SETTINGS) if wa == 0]]
        held, chosen = tune.cross_validate(control, papers, args.repeats)
        print(f"control, wa = 0 (dense share only chosen): CV held-out {held[:, 0].mean():.2f} (sd {held[:, 0].std():.2f})"
              f" / {held[:, 1].mean():.2f} (sd {held[:, 1].std():.2f}); all queries by dense share: " + ", ".join(
                  f"{wd}: {tune.fmt(base[SETTINGS.index((wd, 0.0))].mean(axis=0))}" for wd in DENSE_SHARES))

        sets = experiment.query_sets()
        print(f"query sentences used (mean per query): " + ", ".join(
            f"{k} {np.mean(v):.1f}" for k, v in experiment.used.items()) + f"; facet fallbacks to all: {experiment.fallbacks}")
        labels = {"whole": "(i) whole-paper alignment (our splitter, every abstract sentence of the query)",
                  "gold": "(ii) facet alignment, gold split + gold roles (objective -> background, other out)",
                  "own": "(iii) facet alignment, our splitter + own classifier roles"}
        for variant, label in labels.items():
            aligns = [experiment.alignment(vectors) for vectors in sets[variant]]
            scores = experiment.figures(candidates, aligns)
            np.save(args.cache / f"scores-{variant}.npy", scores)
            report_variant(label, scores, papers, args.repeats)
            keep = [i for i, paper in enumerate(papers) if paper != args.drop]
            report_variant(f"{variant}, sensitivity: query paper {args.drop} left out", scores[:, keep],
                           [papers[i] for i in keep], args.repeats, short=True)
    finally:
        experiment.collection.close()


if __name__ == "__main__":
    main()
