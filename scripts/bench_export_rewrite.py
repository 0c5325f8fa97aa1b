#!/usr/bin/env python
"""The default model's encoding paths against the fp32 graph as torch exports it, in one run.

    python scripts/bench_export_rewrite.py [--papers 240] [--rounds 3] [--profile] [--quality]
        [--bf16-budgets 512,1024,4096] [--bf16-vs-int8] [--int8-static] [--work /tmp/bench-export-rewrite]

Six encoders of all-MiniLM-L6-v2, each through the build's own path (`embed_texts`: title-prefixed
sentence windows, no cache), over the same CSFCube dev papers:

- fp32 as torch exports it, in batches: an attention mask made in every layer and a NaN guard
  after every softmax (the export before `embed/attention_masks.py`; made under --work), in
  token-budget batches on two threads a run;
- fp32 with the masks made once (the export builds use, from the user cache), in batches;
- the same one text a run, two runs at once on one thread each (what `--precision fp32` uses);
- int8-smooth in batches;
- int8-smooth one text a run, two at once (what builds use on CPUs without AMX bf16: a text's
  vector is its own alone);
- bf16: the fp32 export run by OpenVINO at bf16, in batches of 2,048 tokens (what builds use on
  CPUs with AMX bf16).

The encoders take turns round by round, so a shared machine's load falls on all alike. Reported:
each one's CPU time (this process's) and wall time, as the median of its per-round ratios to the
first one with their range; the mean and least cosine of its vectors to the first one's; and the
mean and least cosine between a paper encoded alone and in the others' batch (1.0 where a vector
does not depend on its batch). --profile first prints each fp32 graph's kernel time by operator
(bench_encode.py's ONNX Runtime profile, the build's batches). --quality does the same for the
quality tier instead (all-mpnet-base-v2; its parts installed): fp32 and int8, each in batches and
one text a run, and bf16, on the first 60 papers. The bf16 rows need a CPU with bf16 instructions
(AVX-512 BF16 or AMX); --bf16-budgets adds a bf16 row for each other token budget a batch (the
build's is 2,048). --bf16-vs-int8 times only the int8 default against bf16, for CPUs where the two
are close (AVX-512 BF16 without AMX). --int8-static times the fp32 export (one text a run, the
baseline), the int8 default (int8-smooth; with --quality, int8) and int8-static (OpenVINO, batches of
1,024 tokens as builds use, and of 2,048).

Quoted in: docs/measured-int8-smooth.md and docs/measured-openvino.md ("One text a run, and the attention masks made once", "bf16 without
AMX", "int8-static").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared/eval/csfcube-dev"
MINILM = "all-MiniLM-L6-v2"


def as_torch_exports(work: Path) -> Path:
    """The fp32 export without the shared masks (made once under `work`)."""
    from recommender.embed import attention_masks, onnx_encoder
    from recommender.embed.sentence_transformer import resolve_model_path

    folder = work / "fp32-as-exported"
    if not (folder / onnx_encoder.MODEL_FILE).exists():
        real = attention_masks.simplify_attention_masks
        attention_masks.simplify_attention_masks = lambda model: 0
        try:
            onnx_encoder.export_onnx(resolve_model_path(MINILM), folder)
        finally:
            attention_masks.simplify_attention_masks = real
    return folder


def compare(encoders: dict, texts: list[str], heads: list[str], rounds: int) -> None:
    """Print the table for `encoders`, the first one the baseline."""
    import numpy as np

    from recommender.embed.windows import embed_texts

    vectors = {}
    for label, encoder in encoders.items():
        vectors[label] = embed_texts(encoder, texts, heads=heads).vectors
    baseline = next(iter(encoders))
    cpu: dict[str, list[float]] = {label: [] for label in encoders}
    wall: dict[str, list[float]] = {label: [] for label in encoders}
    for _ in range(rounds):
        for label, encoder in encoders.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            embed_texts(encoder, texts, heads=heads)
            wall[label].append(time.perf_counter() - began)
            cpu[label].append(time.process_time() - began_cpu)
    print(f"{len(texts)} CSFCube dev papers, {rounds} interleaved rounds; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")
    print("| encoder | CPU s a round (median) | x baseline, CPU (range) | x baseline, wall (range) "
          "| mean / min cos to baseline | alone vs in a batch, mean / min cos |")
    print("|---|---|---|---|---|---|")
    for label, encoder in encoders.items():
        cpu_ratios = [b / t for b, t in zip(cpu[baseline], cpu[label])]
        wall_ratios = [b / t for b, t in zip(wall[baseline], wall[label])]
        cos = (vectors[label] * vectors[baseline]).sum(axis=1)
        alone = np.stack([embed_texts(encoder, [text], heads=[head]).vectors[0]
                          for text, head in zip(texts[:30], heads[:30])])
        own = (alone * vectors[label][:30]).sum(axis=1)
        print(f"| {label} | {statistics.median(cpu[label]):.1f} "
              f"| {statistics.median(cpu_ratios):.2f} ({min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}) "
              f"| {statistics.median(wall_ratios):.2f} ({min(wall_ratios):.2f}-{max(wall_ratios):.2f}) "
              f"| {cos.mean():.5f} / {cos.min():.5f} | {own.mean():.6f} / {own.min():.6f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the CSFCube dev folder")
    parser.add_argument("--papers", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--quality", action="store_true")
    parser.add_argument("--bf16-budgets", default="",
                        help="other token budgets a bf16 batch, comma-separated (extra rows)")
    parser.add_argument("--int8-static", action="store_true",
                        help="time int8-static against fp32 and the int8 default")
    parser.add_argument("--bf16-vs-int8", action="store_true",
                        help="time only the int8 default (int8-smooth; with --quality, int8) one "
                        "text a run against bf16 at 2,048 and 1,024 tokens a batch")
    parser.add_argument("--work", type=Path,
                        default=Path(tempfile.gettempdir()) / "bench-export-rewrite")
    args = parser.parse_args()


    from recommender.corpus.papers import read_papers
    from recommender.embed import export_cache, loading
    from recommender.embed.onnx_encoder import OnnxEncoder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        corpus = read_papers([args.data / "corpus.jsonl"])[: args.papers]
    texts, heads = [paper.text for paper in corpus], [paper.head for paper in corpus]
    budgets = [int(budget) for budget in args.bf16_budgets.split(",") if budget]
    if args.int8_static:
        model, int8, papers = (("all-mpnet-base-v2", "int8", 60) if args.quality
                               else (MINILM, "int8-smooth", len(texts)))
        static = export_cache.shared_export(model, precision="int8-static")
        encoders = {"fp32, one text a run": loading.load_onnx_encoder(
                        export_cache.shared_export(model), model),
                    f"{int8}, one text a run (the default)": loading.load_onnx_encoder(
                        export_cache.shared_export(model, precision=int8), model)}
        for budget in (1024, 2048):
            encoder = loading.load_onnx_encoder(static, model)
            encoder.tokens_per_batch = budget
            encoders[f"int8-static, OpenVINO, batches of {budget:,} tokens"] = encoder
        compare(encoders, texts[:papers], heads[:papers], args.rounds)
        return
    if args.bf16_vs_int8:
        model, int8, papers = (("all-mpnet-base-v2", "int8", 60) if args.quality
                               else (MINILM, "int8-smooth", len(texts)))
        compare({f"{int8}, one text a run": loading.load_onnx_encoder(
                    export_cache.shared_export(model, precision=int8), model),
                 **bf16_encoder(model, "bf16, batches of 2,048 tokens"),
                 **bf16_budgets(model, budgets or [1024])},
                texts[:papers], heads[:papers], args.rounds)
        return
    if args.quality:
        compare({**quality_encoders(), **bf16_budgets("all-mpnet-base-v2", budgets)}, texts[:60],
                heads[:60], args.rounds)
        return
    smooth_folder = export_cache.shared_export(MINILM, precision="int8-smooth")
    batched = OnnxEncoder(smooth_folder, MINILM, one_text_a_run=False)  # on 2 threads a run
    fp32_folder = export_cache.shared_export(MINILM)
    encoders = {
        "fp32 as torch exports it (masks in every layer), batches": OnnxEncoder(
            as_torch_exports(args.work), MINILM, one_text_a_run=False),
        "fp32, masks made once, batches": OnnxEncoder(fp32_folder, MINILM, one_text_a_run=False),
        "fp32, masks made once, one text a run (--precision fp32)": loading.load_onnx_encoder(
            fp32_folder, MINILM),
        "int8-smooth, batches": batched,
        "int8-smooth, one text a run (the default without AMX)": loading.load_onnx_encoder(
            smooth_folder, MINILM),
        **bf16_encoder(MINILM, "bf16, OpenVINO, batches of 2,048 tokens (the default with AMX)"),
        **bf16_budgets(MINILM, budgets),
    }
    if args.profile:
        from bench_encode import profile_ops  # scripts/, beside this file

        for label in list(encoders)[:2]:
            profile_ops(encoders[label].folder, texts, args.work)
    compare(encoders, texts, heads, args.rounds)

def quality_encoders() -> dict:
    from recommender.embed import export_cache, loading
    from recommender.embed.onnx_encoder import OnnxEncoder

    folder = export_cache.shared_export("all-mpnet-base-v2", precision="int8")
    batched = OnnxEncoder(folder, "all-mpnet-base-v2", one_text_a_run=False)
    fp32_folder = export_cache.shared_export("all-mpnet-base-v2")
    return {
        "all-mpnet-base-v2 fp32, batches": OnnxEncoder(
            fp32_folder, "all-mpnet-base-v2", one_text_a_run=False),
        "all-mpnet-base-v2 fp32, one text a run": loading.load_onnx_encoder(
            fp32_folder, "all-mpnet-base-v2"),
        "all-mpnet-base-v2 int8, batches": batched,
        "all-mpnet-base-v2 int8, one text a run (the default)": loading.load_onnx_encoder(
            folder, "all-mpnet-base-v2"),
        **bf16_encoder("all-mpnet-base-v2", "all-mpnet-base-v2 bf16, OpenVINO, batches"),
    }


def bf16_budgets(model: str, budgets: list[int]) -> dict:
    """{label: the bf16 encoder of `model` at another token budget a batch} for each budget."""
    encoders = {}
    for budget in budgets:
        label = f"bf16, batches of {budget:,} tokens"
        for encoder in bf16_encoder(model, label).values():
            encoder.tokens_per_batch = budget
            encoders[label] = encoder
    return encoders


def bf16_encoder(model: str, label: str) -> dict:
    """{label: the bf16 encoder of `model`}, or nothing where this CPU cannot run bf16."""
    from recommender.embed import export_cache, loading, openvino_encoding

    if not openvino_encoding.runs_here():
        print(f"(no bf16 row: neither {openvino_encoding.AVX512_BF16_FLAG} nor {openvino_encoding.AMX_FLAG} is "
              "among this CPU's flags, or OpenVINO is not installed)")
        return {}
    return {label: loading.load_onnx_encoder(
        export_cache.shared_export(model, precision=openvino_encoding.BF16), model)}


if __name__ == "__main__":
    main()
