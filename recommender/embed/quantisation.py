"""int8 precisions: an ONNX export rewritten with dynamically quantised weights.

Build time only (onnxruntime's quantisation tools, which import onnx); the result is read by the
same :class:`~recommender.embed.onnx_encoder.OnnxEncoder`, whose config records the precision.
On 2 cores it encodes MiniLM about 2.1x as fast as the fp32 graph, at a cost in ranking measured on
CSFCube (docs/tiers.md, scripts/bench_tiers.py). int8-mixed keeps the weights that cost the most
(the feed-forward down projections) in fp32: vectors closer to fp32's, 1.44x as fast
(docs/performance.md, scripts/int8_sensitivity.py). int8-smooth first divides each MatMul's
activations by per-channel scales folded into its weights (SmoothQuant, embed/smoothing.py), then
quantises every weight as int8 does. int8-static quantises the activations too, with scales
calibrated once on the shipped abstracts (NNCF's post-training quantisation, its SmoothQuant and
bias correction included), for OpenVINO to run (openvino_encoding.py): 1.3-1.4x int8-smooth's
encoding speed on an AMD EPYC (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Collection
from pathlib import Path

from ..errors import ModelError
from ..files import write_text
from . import onnx_encoder
from .openvino_encoding import BF16, INT8_STATIC

#: int8 with the groups of weights that cost the ranking kept in fp32 (KEPT_IN_FP32).
MIXED = "int8-mixed"
#: int8 with activation outliers moved into the weights first (SmoothQuant, embed/smoothing.py):
#: as fast as int8 (~1.9x fp32 against 2.0x) with vectors closer to fp32's (docs/performance.md).
SMOOTH = "int8-smooth"
#: Every precision an export has: fp32, the int8 ones written here, and bf16 (the fp32 graph run by
#: OpenVINO in bf16: openvino_encoding.py).
PRECISIONS = ("fp32", "int8", MIXED, SMOOTH, INT8_STATIC, BF16)
#: The texts int8-static's activation scales are calibrated on: the project's seed abstracts
#: (NeurIPS 2025), one a paragraph, each cut into the windows a build encodes.
CALIBRATION_FILE = Path(__file__).with_name("calibration-abstracts.txt")
#: The kinds of weights a transformer layer multiplies by, in the names of the exported graph:
#: the attention's query/key/value projections, its output projection, the feed-forward network's
#: up projection (to the intermediate width) and its down projection; and the embedding tables.
KINDS = ("attention_qkv", "attention_output", "ffn_up", "ffn_down", "embeddings")
_KIND_PATTERNS = (
    ("attention_qkv", re.compile(r"/attention/self/(query|key|value)/")),
    ("attention_output", re.compile(r"/attention/output/dense/")),
    ("ffn_up", re.compile(r"/intermediate/dense/")),
    ("ffn_down", re.compile(r"/output/dense/")),  # after attention/output: the FFN's own
    ("embeddings", re.compile(r"/embeddings/")),
)
#: The groups each int8 precision keeps in fp32: a kind ("ffn_down") or a layer ("layer.0").
#: Quantised alone, the FFN down projections moved MiniLM's vectors more than any other kind or
#: layer (mean cosine to fp32 0.9973; every weight 0.9951, every weight but them 0.9978):
#: scripts/int8_sensitivity.py, docs/performance.md.
KEPT_IN_FP32: dict[str, tuple[str, ...]] = {
    "int8": (),
    MIXED: ("ffn_down",),
    SMOOTH: (),
}
#: The precisions whose fp32 graph is smoothed before quantising, and the migration strength of
#: each (chosen by cosine to fp32 alone, among 0.3/0.5/0.65/0.8, on 120 CSFCube dev papers:
#: scripts/int8_sensitivity.py --smooth, docs/performance.md).
SMOOTHING_ALPHA: dict[str, float] = {SMOOTH: 0.65}


def quantise_export(fp32_folder: Path, out_dir: Path, precision: str = "int8") -> Path:
    """Write to `out_dir` the export in `fp32_folder` at the int8 `precision` (its KEPT_IN_FP32
    groups left in fp32); return `out_dir`.

    Weights get per-channel int8 scales (per-tensor scales moved MiniLM's vectors to cosine ~0.88
    of the fp32 ones, per-channel to ~0.99); activations are quantised at run time, so no
    calibration data is needed, except at int8-static (:func:`static_quantise_model`). Raises
    ModelError when the graph cannot be quantised.
    """
    fp32_folder, out_dir = Path(fp32_folder), Path(out_dir)
    config = json.loads((fp32_folder / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".quantise-") as tmp:
        staged = Path(tmp) / onnx_encoder.MODEL_FILE
        try:
            source = fp32_folder / onnx_encoder.MODEL_FILE
            if precision == INT8_STATIC:
                static_quantise_model(source, staged, calibration_feeds(fp32_folder))
            else:
                kept = kept_nodes(source, KEPT_IN_FP32[precision])
                if precision in SMOOTHING_ALPHA:
                    smoothed = Path(tmp) / "smoothed.onnx"
                    smooth_export_model(source, smoothed, SMOOTHING_ALPHA[precision], kept)
                    source = smoothed
                quantise_model(source, staged, kept)
        except OSError:
            raise  # the cache folder cannot be written: the caller tells that apart
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line for the CLI
            raise ModelError(
                f"cannot quantise the ONNX export in {fp32_folder} to {precision}: "
                f"{type(exc).__name__}:"
                f" {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            ) from exc
        config["variant"] = precision
        shutil.copyfile(
            fp32_folder / onnx_encoder.TOKENIZER_FILE, Path(tmp) / onnx_encoder.TOKENIZER_FILE
        )
        write_text(
            Path(tmp) / onnx_encoder.CONFIG_FILE, json.dumps(config, indent=2) + "\n", durable=False
        )
        for name in (
            onnx_encoder.MODEL_FILE,
            onnx_encoder.TOKENIZER_FILE,
            onnx_encoder.CONFIG_FILE,
        ):
            os.replace(Path(tmp) / name, out_dir / name)
    return out_dir


def smooth_export_model(
    source: Path, target: Path, alpha: float, kept: Collection[str] = ()
) -> None:
    """Write to `target` the fp32 graph in `source` smoothed with the activation maxima shipped for
    the default model (smoothing.shipped_maxima) at strength `alpha`; the MatMuls named in `kept`
    (left in fp32) are not smoothed. Raises ValueError when the maxima do not fit the graph."""
    import onnx

    from . import smoothing

    graph = onnx.load(str(source), load_external_data=False).graph
    skipped = set(kept)
    sites = [site for site in smoothing.smoothing_sites(graph) if not set(site.matmuls) & skipped]
    smoothing.smooth_model(
        source, target, smoothing.shipped_maxima(), alpha, [site.key for site in sites]
    )


def weight_groups(model_file: Path) -> dict[str, list[str]]:
    """The names of the nodes of the ONNX graph in `model_file` that int8 quantises (the MatMuls by
    a float weight, the embedding lookups), by group: each kind of KINDS, and each layer
    ("layer.0").

    Raises ValueError when a weight's kind cannot be told from its name (another architecture's
    graph)."""
    import onnx

    graph = onnx.load(str(model_file), load_external_data=False).graph
    weights = {  # float ones only: a quantised graph's int8 weights are done
        initializer.name
        for initializer in graph.initializer
        if initializer.data_type == onnx.TensorProto.FLOAT
    }
    groups: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for node in graph.node:
        if not (
            (node.op_type == "MatMul" and any(name in weights for name in node.input))
            or (node.op_type == "Gather" and node.input and node.input[0] in weights)
        ):
            continue
        kind = next((kind for kind, pattern in _KIND_PATTERNS if pattern.search(node.name)), None)
        if kind is None:
            raise ValueError(f"the weights of node {node.name} are of no known kind")
        groups[kind].append(node.name)
        layer = re.search(r"/(layer\.\d+)/", node.name)
        if layer is not None:
            groups.setdefault(layer.group(1), []).append(node.name)
    return groups


def kept_nodes(model_file: Path, kept_groups: Collection[str]) -> list[str]:
    """The names of the nodes of `kept_groups` (kinds or layers) in the graph in `model_file`."""
    if not kept_groups:
        return []
    groups = weight_groups(model_file)
    missing = sorted(set(kept_groups) - set(groups))
    if missing:
        raise ValueError(f"the graph has no weights of group {missing[0]}")
    return sorted({name for group in kept_groups for name in groups[group]})


def quantise_model(source: Path, target: Path, keep_fp32: Collection[str] = ()) -> None:
    """Write to `target` the ONNX graph in `source` with its weights in int8 (per channel,
    activations quantised at run time), except the nodes named in `keep_fp32`."""
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
            nodes_to_exclude=list(keep_fp32),
        )
    finally:
        root.setLevel(level)


def calibration_abstracts() -> list[str]:
    """The abstracts int8-static is calibrated on (CALIBRATION_FILE)."""
    text = CALIBRATION_FILE.read_text(encoding="utf-8")
    return [paragraph.strip() for paragraph in text.split("\n\n") if paragraph.strip()]


def calibration_feeds(fp32_folder: Path) -> list[dict]:
    """The inputs of the export in `fp32_folder` for each window of the calibration abstracts, one
    window a run, as a build cuts them (default "sentences" chunking; the abstracts have no
    title)."""
    import numpy as np
    import onnx
    from tokenizers import Tokenizer

    from .windows import Chunking, split_windows

    config = json.loads((fp32_folder / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
    max_length = int(config["max_seq_length"])
    max_tokens = max_length - int(config.get("num_special_tokens", 2))
    spans_tokenizer = Tokenizer.from_file(str(fp32_folder / onnx_encoder.TOKENIZER_FILE))
    spans_tokenizer.no_padding()
    spans_tokenizer.no_truncation()
    tokenizer = Tokenizer.from_file(str(fp32_folder / onnx_encoder.TOKENIZER_FILE))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)  # as the encoder does
    graph = onnx.load(str(fp32_folder / onnx_encoder.MODEL_FILE), load_external_data=False).graph
    names = [port.name for port in graph.input]
    feeds = []
    for abstract in calibration_abstracts():
        spans = spans_tokenizer.encode(abstract, add_special_tokens=False).offsets
        for window, _ in split_windows(abstract, spans, max_tokens, Chunking().overlap, 0):
            encoding = tokenizer.encode(window)
            ids = np.asarray([encoding.ids], dtype=np.int64)
            arrays = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
            feeds.append({name: arrays[name] for name in names})
    return feeds


def static_quantise_model(source: Path, target: Path, feeds: list[dict]) -> None:
    """Write to `target` the ONNX graph in `source` with its MatMuls' weights and activations
    quantised to int8 (QuantizeLinear/DequantizeLinear pairs), their scales calibrated on `feeds`
    (NNCF's post-training quantisation for transformers: SmoothQuant, then min-max scales, then
    bias correction)."""
    import nncf
    import onnx

    nncf.set_log_level(logging.ERROR)
    model = onnx.load(str(source))
    # NNCF draws progress bars on the standard streams (rich); a build reports its own steps.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        quantised = nncf.quantize(
            model,
            nncf.Dataset(feeds),
            model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(feeds),
        )
    onnx.save(quantised, str(target))
