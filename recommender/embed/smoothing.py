"""SmoothQuant for dynamic int8: activation outliers moved into the weights before quantising.

Dynamic int8 quantises each MatMul's activations with one scale per tensor at run time, shared by
every token and channel of a batch, while its weights get one scale per output column. A few
activation channels far larger than the rest (after GELU most of all) then set the activations'
scale and leave the others a few levels. For a MatMul ``x @ W`` (W is [in, out]) SmoothQuant (Xiao
et al. 2022) divides each input channel j by ``s_j = max|x_j|^a / max|W_j,:|^(1-a)`` and multiplies
W's row j by it: the same product in exact arithmetic, with the outliers' range moved into the
weights, which per-channel scales absorb.

Where the division goes, in a BERT-style layer (post-LayerNorm, so a LayerNorm's output is also
the residual and cannot carry it):

- the attention's query/key/value projections (one input): a Mul by 1/s before them;
- the attention output projection: folded exactly into the value projection's output columns
  and bias (the attention context is, channel by channel, a weighted sum of the values);
- the feed-forward up projection: a Mul by 1/s before it;
- the feed-forward down projection (after GELU): a Mul by 1/s before it.

The per-channel ``max|x|`` come from a calibration run of the fp32 export over unlabelled
abstracts (:func:`activation_maxima`); for the default model they ship with the package
(``smoothing-<model>.npz``, measured by scripts/int8_sensitivity.py --smooth on the project's
seed abstracts), so the quantised export is made from them without encoding anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The kinds of MatMul smoothed, as named in quantisation.KINDS.
SMOOTHED_KINDS = ("attention_qkv", "attention_output", "ffn_up", "ffn_down")
#: The migration strength the shipped precision uses (chosen by cosine to fp32 alone,
#: docs/performance.md).
DEFAULT_ALPHA = 0.5
_LAYER = re.compile(r"/(layer\.\d+)/")


@dataclass(frozen=True)
class Site:
    """One activation that is smoothed: the tensor, the MatMuls reading it, and (for the attention
    output) the value projection the division folds into."""

    layer: str  # "layer.0"
    kind: str  # one of SMOOTHED_KINDS
    activation: str  # the graph tensor the MatMuls read
    matmuls: tuple[str, ...]  # their node names
    value_matmul: str | None = None  # attention_output only: the value projection's MatMul
    value_bias: str | None = None  # ... and its bias initializer

    @property
    def key(self) -> str:
        return f"{self.layer}/{self.kind}"


def smoothing_sites(graph) -> list[Site]:
    """Every activation of `graph` (an onnx GraphProto of a BERT-style export) to smooth, in layer
    order. Raises ValueError when the graph does not have the expected shape."""
    weights = {initializer.name for initializer in graph.initializer}
    by_layer: dict[str, dict[str, list]] = {}
    bias_of: dict[str, str] = {}  # a MatMul's output -> the bias initializer added to it
    for node in graph.node:
        if node.op_type == "Add" and len(node.input) == 2:
            for first, second in (node.input, reversed(node.input)):
                if first in weights:
                    bias_of[second] = first
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights:
            continue
        found = _LAYER.search(node.name)
        if found is None:
            continue
        name = node.name
        if re.search(r"/attention/self/(query|key|value)/", name):
            kind = "attention_qkv"
        elif "/attention/output/dense/" in name:
            kind = "attention_output"
        elif "/intermediate/dense/" in name:
            kind = "ffn_up"
        elif "/output/dense/" in name:
            kind = "ffn_down"
        else:
            raise ValueError(f"the weights of node {name} are of no known kind")
        by_layer.setdefault(found.group(1), {}).setdefault(kind, []).append(node)
    sites = []
    for layer in sorted(by_layer, key=lambda name: int(name.split(".")[1])):
        kinds = by_layer[layer]
        if sorted(kinds) != sorted(SMOOTHED_KINDS) or len(kinds["attention_qkv"]) != 3:
            raise ValueError(f"{layer} does not have the MatMuls of a BERT-style layer")
        for kind in SMOOTHED_KINDS:
            nodes = kinds[kind]
            inputs = {node.input[0] for node in nodes}
            if len(inputs) != 1:
                raise ValueError(f"the {kind} MatMuls of {layer} read different inputs")
            value_matmul = value_bias = None
            if kind == "attention_output":
                value = next(n for n in kinds["attention_qkv"] if "/value/" in n.name)
                value_matmul, value_bias = value.name, bias_of.get(value.output[0])
                if value_bias is None:
                    raise ValueError(f"the value projection of {layer} has no bias")
            sites.append(
                Site(
                    layer,
                    kind,
                    inputs.pop(),
                    tuple(n.name for n in nodes),
                    value_matmul,
                    value_bias,
                )
            )
    if not sites:
        raise ValueError("the graph has no transformer layers to smooth")
    return sites


def activation_maxima(
    model_file: Path, batches: Iterable[dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Per channel, the largest |activation| each site of the fp32 graph in `model_file` reads over
    `batches` (the graph's inputs, one window a batch so that no padding token counts), by
    :attr:`Site.key`."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(model_file))
    sites = smoothing_sites(model.graph)
    for site in sites:
        model.graph.output.append(
            onnx.helper.make_tensor_value_info(site.activation, onnx.TensorProto.FLOAT, None)
        )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    names = [site.activation for site in sites]
    wanted = {i.name for i in session.get_inputs()}
    maxima: dict[str, np.ndarray] = {}
    for batch in batches:
        outputs = session.run(names, {k: v for k, v in batch.items() if k in wanted})
        mask = batch["attention_mask"].astype(bool)
        for site, values in zip(sites, outputs):
            values = np.abs(values[mask])  # [tokens, channels], padding left out
            peak = values.max(axis=0)
            maxima[site.key] = np.maximum(maxima.get(site.key, peak), peak)
    return maxima


def smooth_model(
    source: Path,
    target: Path,
    maxima: dict[str, np.ndarray],
    alpha: float = DEFAULT_ALPHA,
    only: Iterable[str] = SMOOTHED_KINDS,
) -> None:
    """Write to `target` the fp32 graph in `source` with the activations of `only` (kinds, or sites
    by :attr:`Site.key`) smoothed by
    `maxima` (from :func:`activation_maxima`) at migration strength `alpha`: the same function,
    ready for int8 quantisation. Raises ValueError when `maxima` do not fit the graph."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    initializers = {initializer.name: initializer for initializer in graph.initializer}
    nodes = {node.name: node for node in graph.node}
    arrays: dict[str, np.ndarray] = {}

    def array(name: str) -> np.ndarray:
        if name not in arrays:
            arrays[name] = numpy_helper.to_array(initializers[name]).astype(np.float32)
        return arrays[name]

    chosen = set(only)
    new_nodes: dict[str, list] = {}  # inserted before the node of that name
    for site in smoothing_sites(graph):
        if site.kind not in chosen and site.key not in chosen:
            continue
        weight_names = [nodes[name].input[1] for name in site.matmuls]
        if site.key not in maxima:
            raise ValueError(f"no activation maxima for {site.key}")
        activation = np.asarray(maxima[site.key], dtype=np.float64)
        weight_peak = np.max([np.abs(array(name)).max(axis=1) for name in weight_names], axis=0)
        if activation.shape != weight_peak.shape:
            raise ValueError(f"the activation maxima of {site.key} do not fit its weights")
        scale = smoothing_scales(activation, weight_peak, alpha)
        for name in weight_names:
            arrays[name] = (array(name) * scale[:, None]).astype(np.float32)
        if site.kind == "attention_output":
            # context = softmax(QK^T) V, channel by channel: dividing V's output column j (and its
            # bias) by s_j divides the context's channel j by s_j, exactly.
            value_weight = nodes[site.value_matmul].input[1]
            arrays[value_weight] = (array(value_weight) / scale[None, :]).astype(np.float32)
            assert site.value_bias is not None
            arrays[site.value_bias] = (array(site.value_bias) / scale).astype(np.float32)
            continue
        base = f"{site.matmuls[0].rsplit('/', 2)[0]}/smooth"
        inverse = f"{base}.inverse_scale"
        output = f"{base}/Mul_output_0"
        graph.initializer.append(numpy_helper.from_array((1.0 / scale).astype(np.float32), inverse))
        multiply = onnx.helper.make_node("Mul", [site.activation, inverse], [output], f"{base}/Mul")
        new_nodes.setdefault(site.matmuls[0], []).append(multiply)
        for name in site.matmuls:
            nodes[name].input[0] = output
    for name, values in arrays.items():
        initializers[name].CopyFrom(numpy_helper.from_array(values, name))
    ordered: list = []
    for node in graph.node:
        ordered.extend(new_nodes.get(node.name, ()))
        ordered.append(node)
    del graph.node[:]
    graph.node.extend(ordered)
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


def shipped_maxima(model: str = "all-MiniLM-L6-v2") -> dict[str, np.ndarray]:
    """The activation maxima measured for `model` that ship with the package, by site key. Raises
    ValueError when they are missing or unreadable (a damaged install)."""
    try:
        with np.load(
            Path(__file__).with_name(f"smoothing-{model}.npz"), allow_pickle=False
        ) as stored:
            return {key: stored[key] for key in stored.files}
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"the smoothing scales of {model} shipped with papers-like cannot be read ({exc}): "
            "reinstall papers-like"
        ) from exc


def smoothing_scales(
    activation_peak: np.ndarray, weight_peak: np.ndarray, alpha: float
) -> np.ndarray:
    """s_j = max|x_j|^alpha / max|W_j,:|^(1 - alpha), 1 where a channel was never active."""
    activation_peak = np.maximum(np.asarray(activation_peak, dtype=np.float64), 1e-5)
    weight_peak = np.maximum(np.asarray(weight_peak, dtype=np.float64), 1e-5)
    scale = activation_peak**alpha / weight_peak ** (1 - alpha)
    return np.clip(scale, 1e-4, 1e4)
