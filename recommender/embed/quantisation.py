"""int8 precision: an ONNX export rewritten with dynamically quantised weights.

Build time only (onnxruntime's quantisation tools, which import onnx); the result is read by the
same :class:`~recommender.embed.onnx_encoder.OnnxEncoder`, whose config records the precision.
On 2 cores it encodes MiniLM about 2.1x as fast as the fp32 graph, at a cost in ranking measured on
CSFCube (docs/tiers.md, scripts/bench_tiers.py).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import ModelError
from . import onnx_encoder

PRECISIONS = ("fp32", "int8")
# : What new indexes are built with unless the model's facts say otherwise (embed.models; a rebuild
# keeps
# : its index's own). Measured in the full pipeline on CSFCube dev (scripts/bench_tiers.py,
# docs/tiers.md):
# : int8 encodes MiniLM 2.1x as fast but its cross-validated MAP is 1.0 and NDCG%20 0.5 below
# fp32's, past
#: the 0.3 it was allowed to lose, so fp32 stays the default.
DEFAULT_PRECISION = "fp32"


def quantise_export(fp32_folder: Path, out_dir: Path) -> Path:
    """Write to `out_dir` the int8 version of the fp32 export in `fp32_folder`; return `out_dir`.

    Weights get per-channel int8 scales (per-tensor scales moved MiniLM's vectors to cosine ~0.88
    of the fp32 ones, per-channel to ~0.99); activations are quantised at run time, so no
    calibration data is needed. Raises ModelError when the graph cannot be quantised.
    """
    fp32_folder, out_dir = Path(fp32_folder), Path(out_dir)
    config = json.loads((fp32_folder / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".quantise-") as tmp:
        staged = Path(tmp) / onnx_encoder.MODEL_FILE
        try:
            _quantise(fp32_folder / onnx_encoder.MODEL_FILE, staged)
        except OSError:
            raise  # the cache folder cannot be written: the caller tells that apart
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line for the CLI
            raise ModelError(
                f"cannot quantise the ONNX export in {fp32_folder} to int8: {type(exc).__name__}:"
                f" {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            ) from exc
        config["variant"] = "int8"
        shutil.copyfile(
            fp32_folder / onnx_encoder.TOKENIZER_FILE, Path(tmp) / onnx_encoder.TOKENIZER_FILE
        )
        (Path(tmp) / onnx_encoder.CONFIG_FILE).write_text(
            json.dumps(config, indent=2) + "\n", encoding="utf-8"
        )
        for name in (
            onnx_encoder.MODEL_FILE,
            onnx_encoder.TOKENIZER_FILE,
            onnx_encoder.CONFIG_FILE,
        ):
            os.replace(Path(tmp) / name, out_dir / name)
    return out_dir


def _quantise(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # "please consider pre-processing" is logged on the root logger
    try:
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=False,
        )
    finally:
        root.setLevel(level)
