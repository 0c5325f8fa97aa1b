"""ONNX variants measured by scripts/bench_encode.py and not adopted by the package.

The package exports the plain fp32 graph (recommender.embed.onnx_encoder.export_onnx). For the
benchmark, this module rewrites such an export in place as

* "O2": onnxruntime's offline transformer fusions (attention, layer norm, GELU), what optimum calls O2;
* "int8": dynamic int8 quantisation of the plain graph's weights (faster, but vectors move).

The result is read by the same OnnxEncoder (its onnx_encoder.json records the variant).

Quoted in: nowhere on its own: a helper module of bench_encode.py (not run by itself).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from recommender.embed.onnx_encoder import CONFIG_FILE, MODEL_FILE, export_onnx

VARIANTS = ("fp32", "O2", "int8")


def export_variant(model_name_or_path: str, out_dir: Path, variant: str) -> Path:
    """export_onnx, then the graph rewritten as `variant`; returns `out_dir`."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown ONNX variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    out_dir = export_onnx(model_name_or_path, Path(out_dir))
    if variant == "fp32":
        return out_dir
    model = out_dir / MODEL_FILE
    rewritten = out_dir / f".{variant}.onnx"
    if variant == "O2":
        from transformers import AutoConfig

        optimise(model, rewritten, AutoConfig.from_pretrained(model_name_or_path))
    else:
        # Like sentence-transformers' export_dynamic_quantized_onnx_model: quantise the plain graph
        # (the fused one has contrib ops the quantiser cannot type).
        quantise(model, rewritten)
    os.replace(rewritten, model)
    config_path = out_dir / CONFIG_FILE
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["variant"] = variant
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out_dir


def optimise(src: Path, dst: Path, hf_config) -> Path:
    """onnxruntime's offline transformer fusions (attention, layer norm, GELU): optimum's "O2"."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimised = optimize_model(
        str(src),
        model_type="bert",  # the fusions of ORT's "bert" type also match RoBERTa-like encoders
        num_heads=int(getattr(hf_config, "num_attention_heads", 0) or 0),
        hidden_size=int(getattr(hf_config, "hidden_size", 0) or 0),
        opt_level=2,  # 99 would bake in hardware-specific (NCHWc) layouts
        use_gpu=False,
        only_onnxruntime=False,
    )
    optimised.save_model_to_file(str(dst))
    return dst


def quantise(src: Path, dst: Path) -> Path:
    """Dynamic int8 quantisation of the weights, as the package does it (recommender.embed.quantisation):
    `src` is the model.onnx of an export folder, `dst` the quantised graph's file."""
    import shutil
    import tempfile

    from recommender.embed.quantisation import quantise_export

    with tempfile.TemporaryDirectory() as tmp:
        quantised = quantise_export(src.parent, Path(tmp))
        shutil.copyfile(quantised / MODEL_FILE, dst)
    return dst
