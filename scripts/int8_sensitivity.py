#!/usr/bin/env python
"""Which weights cost int8 its ranking (one group quantised at a time), and int8-mixed's and
int8-smooth's figures.

    python scripts/int8_sensitivity.py [--sample 200] [--rounds 2] [--keep ffn_down,layer.5 ...]
        [--smooth [--alphas 0.3,0.5,0.65,0.8] [--write-maxima]] [--skip-sensitivity]
        [--relevance [--precisions fp32,int8-smooth]] [--repeats 50] [--work /tmp/int8-sensitivity]

Sensitivity (always): the default model's fp32 ONNX export (the user cache's) is quantised by ONNX
Runtime's `quantize_dynamic` (int8 weights per channel, activations at run time, as builds do) in
several ways: every weight (today's `int8`), one group alone (`only G`: a kind of weight in every
layer, the attention's Q/K/V, its output, the feed-forward up or down projection, the embedding
tables, or every weight of one layer) and every weight but one group (`all but G`, the group kept
in fp32 with `nodes_to_exclude`), plus each `--keep` set of groups kept in fp32. Each variant
encodes a seeded sample of CSFCube dev papers with the build's own path (`embed_texts`: title-
prefixed sentence windows, no cache); reported: mean and min cosine of each paper's vector to the
fp32 one, and papers/s as a ratio to fp32 in the same interleaved rounds (best round each, and the
spread of the per-round ratios). The ratio is the one to trust on a shared machine.

SmoothQuant (`--smooth`): the fp32 export is run over the project's seed abstracts (seeds/, the
windows a build makes, each alone so no padding counts; never the eval sets) and each MatMul's
per-channel max|activation| recorded (`smoothing.activation_maxima`); the largest difference to
the maxima shipped in the package is printed (`--write-maxima` rewrites them). Then variants of the
smoothed graph (`smoothing.smooth_model`) are quantised as int8 is: every site at each `--alphas`
strength, one kind of site alone at each, and every site but the FFN down projections with those
kept in fp32; plus the smoothed fp32 graph unquantised (must equal fp32). Reported: mean and min
cosine to fp32 on the `--sample` papers; then the throughput below for fp32, int8, int8-mixed,
int8-smooth and int8-smooth with the FFN down projections in fp32 (not a precision: slower than
int8-mixed).

Relevance (`--relevance`): the CSFCube dev and reviewers-dev indexes are built (or reused) under
--work at fp32, int8 and int8-mixed with `papers evaluate`'s own code (their vectors are kept there,
never in the project: a re-run encodes nothing); then for each precision every query is ranked over
its judged pool for each dense weight and pool size, the setting chosen by repeated 2-fold
cross-validation over the query papers (scripts/tune_relevance.py's folds and the same folds for
every precision), and the held-out MAP / NDCG%20 compared fold by fold to fp32's: the paired
difference's mean and sd. The reviewers-dev loss at each precision's own dense weight, and its
difference to fp32's (the rule for a default: within 0.005). Then the whole CSFCube dev corpus is
encoded once per precision (or a seeded sample, --throughput-papers), in interleaved rounds, as
papers/s and the ratio to fp32 (of the same texts, so of tokens/s too), in wall time and in this
process's CPU time (which other jobs on a shared machine disturb less).

Quoted in: docs/measured-encoding.md and docs/measured-int8-smooth.md ("int8: which weights cost the ranking", "int8-smooth: activation
outliers moved into the weights", "int8-static") and docs/tiers.md (int8-mixed, int8-smooth,
int8-static).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

DATA = ROOT.parent / "shared/eval"


def sample_papers(count: int, seed: int = 0):
    from recommender.corpus.papers import read_papers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        papers = read_papers([DATA / "csfcube-dev/corpus.jsonl"])
    if count >= len(papers):
        return papers
    picked = np.random.default_rng(seed).choice(len(papers), count, replace=False)
    return [papers[i] for i in sorted(picked)]


def variant_folder(fp32: Path, work: Path, label: str, kept_groups: list[str] | None) -> Path:
    """The fp32 export with its weights quantised but those of `kept_groups` (None: fp32 itself)."""
    from recommender.embed import onnx_encoder, quantisation

    if kept_groups is None:
        return fp32
    folder = work / "variants" / label.replace(" ", "_").replace("+", "-")
    if not (folder / onnx_encoder.MODEL_FILE).is_file():
        folder.mkdir(parents=True, exist_ok=True)
        for name in (onnx_encoder.TOKENIZER_FILE, onnx_encoder.CONFIG_FILE):
            shutil.copyfile(fp32 / name, folder / name)
        source = fp32 / onnx_encoder.MODEL_FILE
        staged = folder / (onnx_encoder.MODEL_FILE + ".part")
        quantisation.quantise_model(source, staged, quantisation.kept_nodes(source, kept_groups))
        os.replace(staged, folder / onnx_encoder.MODEL_FILE)
    return folder


def sensitivity(args) -> None:
    from recommender.embed import export_cache, loading, quantisation
    from recommender.embed.models import DEFAULT_MODEL
    from recommender.embed.windows import embed_texts

    fp32 = export_cache.shared_export(DEFAULT_MODEL)
    groups = quantisation.weight_groups(fp32 / "model.onnx")
    everything = list(groups)
    variants: list[tuple[str, list[str] | None]] = [("fp32", None), ("int8, every weight", [])]
    for group in everything:
        variants.append((f"only {group}", [other for other in everything if other != group
                                           and not set(groups[other]) & set(groups[group])]))
    for group in everything:
        variants.append((f"all but {group}", [group]))
    for keep in args.keep:
        variants.append((f"all but {keep}", keep.split(",")))
    papers = sample_papers(args.sample)
    texts, heads = [p.text for p in papers], [p.head for p in papers]
    print(f"{len(papers)} CSFCube dev papers (seeded sample), sentence windows; {len(variants)} "
          f"variants, {args.rounds} interleaved rounds; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs (other jobs share the machine: trust the ratios)", flush=True)
    encoders = {}
    for label, kept in variants:
        folder = variant_folder(fp32, Path(args.work), label, kept)
        encoders[label] = loading.load_onnx_encoder(folder, DEFAULT_MODEL)
        embed_texts(encoders[label], texts[:4], heads=heads[:4])  # warm-up
    times: dict[str, list[float]] = {label: [] for label, _ in variants}
    vectors = {}
    for _ in range(args.rounds):
        for label, _ in variants:
            started = time.perf_counter()
            vectors[label] = embed_texts(encoders[label], texts, heads=heads).vectors
            times[label].append(time.perf_counter() - started)
    print(f"load average after the rounds: {os.getloadavg()[0]:.1f}\n")
    print("| weights in int8 | kept in fp32 | mean cos to fp32 | min cos | speed x fp32 "
          "(best; per-round range) |")
    print("|---|---|---|---|---|")
    base = vectors["fp32"]
    for label, kept in variants:
        cos = (vectors[label] * base).sum(axis=1)
        ratios = [b / t for b, t in zip(times["fp32"], times[label])]
        best = min(times["fp32"]) / min(times[label])
        kept_text = "everything" if kept is None else (", ".join(kept) or "nothing")
        if label.startswith("only "):
            kept_text = "the rest"
        print(f"| {label} | {kept_text} | {cos.mean():.5f} | {cos.min():.4f} | {best:.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) |", flush=True)


def seed_windows(fp32: Path) -> list[str]:
    """The windows a build encodes for the project's seed abstracts (seeds/), in order."""
    from recommender.corpus.papers import read_papers
    from recommender.embed import loading
    from recommender.embed.models import DEFAULT_MODEL
    from recommender.embed.windows import embed_texts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        papers = read_papers(sorted((ROOT / "seeds").iterdir()))
    encoder = loading.load_onnx_encoder(fp32, DEFAULT_MODEL)

    class Recorder:  # the build's windowing, with the windows kept instead of encoded
        name, dimension, max_tokens = encoder.name, encoder.dimension, encoder.max_tokens
        windows: list[str] = []

        def token_spans(self, text):
            return encoder.token_spans(text)

        def encode(self, texts):
            self.windows.extend(texts)
            return np.ones((len(texts), self.dimension), dtype=np.float32)

    recorder = Recorder()
    embed_texts(recorder, [p.text for p in papers], heads=[p.head for p in papers])
    print(f"calibration: {len(papers)} seed abstracts, {len(recorder.windows)} windows")
    return recorder.windows


def window_batches(fp32: Path, windows: list[str]):
    """Each window as the graph's inputs, alone (no padding), tokenised as the encoder does."""
    import json

    from tokenizers import Tokenizer

    config = json.loads((fp32 / "onnx_encoder.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(fp32 / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=int(config["max_seq_length"]))
    for window in windows:
        encoding = tokenizer.encode(window)
        yield {"input_ids": np.array([encoding.ids], dtype=np.int64),
               "attention_mask": np.ones((1, len(encoding.ids)), dtype=np.int64),
               "token_type_ids": np.array([encoding.type_ids], dtype=np.int64)}


def smooth(args) -> None:
    """SmoothQuant variants: calibration on the seeds, cosine to fp32 by alpha and kind, speed."""
    from recommender.embed import export_cache, loading, onnx_encoder, quantisation, smoothing
    from recommender.embed.models import DEFAULT_MODEL
    from recommender.embed.windows import embed_texts

    fp32 = export_cache.shared_export(DEFAULT_MODEL)
    work = Path(args.work) / "smooth"
    work.mkdir(parents=True, exist_ok=True)
    maxima = smoothing.activation_maxima(fp32 / onnx_encoder.MODEL_FILE,
                                         window_batches(fp32, seed_windows(fp32)))
    shipped = smoothing.shipped_maxima()
    drift = max(float(np.abs(maxima[key] / shipped[key] - 1).max()) for key in maxima)
    print(f"largest relative difference to the shipped maxima: {drift:.2e}")
    if args.write_maxima:
        target = ROOT / "recommender/embed/smoothing-all-MiniLM-L6-v2.npz"
        np.savez_compressed(target, **{k: v.astype(np.float32) for k, v in maxima.items()})
        print(f"wrote {target}")
    for key in sorted(maxima, key=lambda k: (int(k.split("/")[0].split(".")[1]), k)):
        peak = maxima[key]
        print(f"  {key:28} max|x| {peak.max():6.2f}, median channel {np.median(peak):5.2f} "
              f"({peak.max() / np.median(peak):4.1f}x)")

    def variant(label, alpha=None, kept=(), only=smoothing.SMOOTHED_KINDS, quantise=True):
        folder = work / label.replace(" ", "_").replace(",", "").replace("=", "")
        if not (folder / onnx_encoder.MODEL_FILE).is_file():
            folder.mkdir(parents=True, exist_ok=True)
            for name in (onnx_encoder.TOKENIZER_FILE, onnx_encoder.CONFIG_FILE):
                shutil.copyfile(fp32 / name, folder / name)
            source = fp32 / onnx_encoder.MODEL_FILE
            if alpha is not None:
                smoothing.smooth_model(source, folder / "smoothed.onnx", maxima, alpha, only)
                source = folder / "smoothed.onnx"
            staged = folder / (onnx_encoder.MODEL_FILE + ".part")
            if quantise:
                quantisation.quantise_model(source, staged,
                                            quantisation.kept_nodes(source, kept))
            else:
                shutil.copyfile(source, staged)
            os.replace(staged, folder / onnx_encoder.MODEL_FILE)
        return folder

    alphas = [float(a) for a in args.alphas.split(",")]
    variants = [("fp32", fp32), ("int8", variant("int8")),
                ("int8-mixed (FFN down fp32)", variant("int8-mixed", kept=("ffn_down",))),
                ("smoothed fp32, not quantised",
                 variant("smoothed fp32", quantisation.SMOOTHING_ALPHA[quantisation.SMOOTH],
                         quantise=False))]
    variants += [(f"smooth a={a}", variant(f"smooth a={a}", a)) for a in alphas]
    for kind in smoothing.SMOOTHED_KINDS:
        variants += [(f"smooth a={a}, only {kind}", variant(f"smooth a={a} only {kind}", a,
                                                              only=(kind,))) for a in alphas]
    variants += [(f"smooth a={a}, FFN down fp32",
                  variant(f"smooth a={a} keep down", a, kept=("ffn_down",),
                          only=("attention_qkv", "attention_output", "ffn_up")))
                 for a in alphas]
    papers = sample_papers(args.sample)
    texts, heads = [p.text for p in papers], [p.head for p in papers]
    print(f"\n{len(papers)} CSFCube dev papers (seeded sample), sentence windows\n")
    print("| variant | mean cos to fp32 | min cos |\n|---|---|---|")
    base = None
    for label, folder in variants:
        encoder = loading.load_onnx_encoder(folder, DEFAULT_MODEL)
        vectors = embed_texts(encoder, texts, heads=heads).vectors
        base = vectors if base is None else base
        cos = (vectors * base).sum(axis=1)
        print(f"| {label} | {cos.mean():.6f} | {cos.min():.6f} |", flush=True)
    if not args.skip_throughput:
        chosen = quantisation.SMOOTHING_ALPHA[quantisation.SMOOTH]
        throughput(args, ("fp32", "int8", "int8-mixed", quantisation.SMOOTH),
                   {f"{quantisation.SMOOTH}, FFN down fp32":
                    variant(f"smooth a={chosen} keep down", chosen, kept=("ffn_down",),
                            only=("attention_qkv", "attention_output", "ffn_up"))})


def relevance(args) -> None:
    from tune_relevance import Collection, bootstrap, cross_validate

    from recommender.evaluation.reviewers import evaluate_reviewers

    precisions = tuple(args.precisions.split(","))
    weights = (0.5, 0.55, 0.6, 2 / 3, 0.7, 0.75, 0.8)
    pools = (50, 100, 200)
    settings = [(w, p) for w in weights for p in pools]
    work = Path(args.work)
    held, shipped_by = {}, {}
    print("\nCSFCube dev, hybrid ranking, sentence windows; repeated 2-fold CV "
          f"({2 * args.repeats} folds, the same for every precision)", flush=True)
    for precision in precisions:
        collection = Collection(DATA / "csfcube-dev", work / precision, precision=precision)
        try:
            started = time.perf_counter()
            collection.open("sentences")
            ready = time.perf_counter() - started
            scores = np.stack([collection.run("sentences", "hybrid", w, p) for w, p in settings])
            shipped = collection.run("sentences")
            held[precision], chosen = cross_validate(scores, collection.papers(), args.repeats)
            shipped_by[precision] = shipped
        finally:
            collection.close()
        top = int(np.argmax(np.bincount(chosen, minlength=len(settings))))
        print(f"  {precision:10} held-out MAP {held[precision][:, 0].mean():5.2f} (sd "
              f"{held[precision][:, 0].std():.2f}), NDCG%20 "
              f"{held[precision][:, 1].mean():5.2f} (sd "
              f"{held[precision][:, 1].std():.2f}); chosen most often dense weight "
              f"{settings[top][0]:.2f} pool {settings[top][1]}; all queries at the shipped "
              f"setting {shipped[:, 0].mean():5.2f} / {shipped[:, 1].mean():5.2f} "
              f"[index ready in {ready:.0f} s]", flush=True)
    for precision in [p for p in precisions if p != "fp32" and "fp32" in held]:
        paired = held[precision] - held["fp32"]
        print(f"  {precision} - fp32, fold by fold: MAP {paired[:, 0].mean():+.2f} (sd "
              f"{paired[:, 0].std():.2f}, below fp32 in {int((paired[:, 0] < 0).sum())} of "
              f"{len(paired)} folds), NDCG%20 {paired[:, 1].mean():+.2f} (sd "
              f"{paired[:, 1].std():.2f})", flush=True)
        per_query = shipped_by[precision] - shipped_by["fp32"]
        low, high = bootstrap(per_query)
        print(f"  {precision} - fp32 at the shipped setting, per query: MAP "
              f"{per_query[:, 0].mean():+.2f} (paired bootstrap 95% {low[0]:+.2f} to "
              f"{high[0]:+.2f}),"
              f" NDCG%20 {per_query[:, 1].mean():+.2f} ({low[1]:+.2f} to {high[1]:+.2f}); MAP "
              f"lower on {int((per_query[:, 0] < -0.5).sum())}, higher on "
              f"{int((per_query[:, 0] > 0.5).sum())} of {len(per_query)} queries", flush=True)
    print("\nreviewers-dev loss (lower is better; at each precision's own dense weight):")
    losses = {}
    for precision in precisions:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reviewed = evaluate_reviewers(DATA / "reviewers-dev", precision=precision,
                                          index=work / precision / "eval-reviewers-dev")
        losses[precision] = reviewed.figures
        print(f"  {precision:10} {reviewed.figures.loss:.4f} (sd {reviewed.figures.sd:.4f})",
              flush=True)
    for precision in [p for p in precisions if p != "fp32" and "fp32" in losses]:
        difference = losses[precision].loss - losses["fp32"].loss
        verdict = "within" if difference <= 0.005 else "NOT within"
        print(f"  {precision} - fp32: {difference:+.4f} ({verdict} 0.005)")
    if not args.skip_throughput:
        throughput(args, precisions)


def throughput(args, precisions, folders: dict[str, Path] | None = None) -> None:
    """The whole CSFCube dev corpus through each precision's build encoder (and each export in
    `folders`, by label), interleaved rounds."""
    from recommender.embed import export_cache, loading
    from recommender.embed.models import DEFAULT_MODEL
    from recommender.embed.windows import embed_texts

    papers = sample_papers(args.throughput_papers)
    texts, heads = [p.text for p in papers], [p.head for p in papers]
    folders = {**{precision: export_cache.shared_export(DEFAULT_MODEL, precision=precision)
                  for precision in precisions}, **(folders or {})}
    precisions = tuple(folders)
    encoders = {}
    for precision, folder in folders.items():
        encoders[precision] = loading.load_onnx_encoder(folder, DEFAULT_MODEL)
        embed_texts(encoders[precision], texts[:4], heads=heads[:4])
    times: dict[str, list[float]] = {precision: [] for precision in precisions}
    cpu: dict[str, list[float]] = {precision: [] for precision in precisions}
    for _ in range(args.throughput_rounds):
        for precision in precisions:
            started, started_cpu = time.perf_counter(), time.process_time()
            embed_texts(encoders[precision], texts, heads=heads)
            times[precision].append(time.perf_counter() - started)
            cpu[precision].append(time.process_time() - started_cpu)
    print(f"\nthroughput: {len(texts)} CSFCube dev papers (seeded sample), "
          f"{args.throughput_rounds} interleaved rounds, load average {os.getloadavg()[0]:.1f}")
    for precision in precisions:
        ratios = [b / t for b, t in zip(times["fp32"], times[precision])]
        print(f"  {precision:24} {len(texts) / min(times[precision]):6.1f} papers/s (best), "
              f"x fp32 {min(times['fp32']) / min(times[precision]):.2f} "
              f"(per round {', '.join(f'{r:.2f}' for r in ratios)}); CPU time x fp32 "
              f"{min(cpu['fp32']) / min(cpu[precision]):.2f} (per round "
              f"{', '.join(f'{b / c:.2f}' for b, c in zip(cpu['fp32'], cpu[precision]))})",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=200, help="CSFCube dev papers encoded")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved timing rounds")
    parser.add_argument("--keep", action="append", default=[],
                        help="groups kept in fp32 together, comma-separated (repeatable)")
    parser.add_argument("--skip-sensitivity", action="store_true")
    parser.add_argument("--smooth", action="store_true",
                        help="SmoothQuant: calibration on the seeds, cosine by alpha and kind, "
                             "speed of the int8-smooth precisions")
    parser.add_argument("--alphas", default="0.3,0.5,0.65,0.8",
                        help="with --smooth: the migration strengths tried")
    parser.add_argument("--write-maxima", action="store_true",
                        help="with --smooth: write the calibration into the package")
    parser.add_argument("--relevance", action="store_true",
                        help="CSFCube dev CV and reviewers-dev at fp32, int8 and int8-mixed")
    parser.add_argument("--repeats", type=int, default=50,
                        help="2-fold splits (each gives 2 folds)")
    parser.add_argument("--precisions", default="fp32,int8,int8-mixed",
                        help="those --relevance compares (fp32 first)")
    parser.add_argument("--throughput-rounds", type=int, default=2)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--throughput-only", action="store_true",
                        help="with --skip-sensitivity: only the throughput of every precision")
    parser.add_argument("--throughput-papers", type=int, default=10**9,
                        help="CSFCube dev papers the throughput encodes (default: all)")
    parser.add_argument("--work", default=str(Path(os.environ.get("TMPDIR", "/tmp"))
                                              / "int8-sensitivity"),
                        help="where the variants and the indexes (their vectors) are kept")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not args.skip_sensitivity:
        sensitivity(args)
    if args.smooth:
        smooth(args)
    if args.relevance:
        relevance(args)
    elif args.throughput_only:
        throughput(args, tuple(args.precisions.split(",")))


if __name__ == "__main__":
    main()
