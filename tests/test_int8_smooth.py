"""SmoothQuant before int8 (embed/smoothing.py): the rewritten fp32 graph computes what the export
does, and the int8-smooth exports made from it stay within the cosine measured on CSFCube dev
(scripts/int8_sensitivity.py --smooth, docs/performance.md)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SEEDS, assert_built_and_queried_at

from recommender.cli import main
from recommender.corpus.papers import read_papers
from recommender.embed import export_cache, loading, onnx_encoder, quantisation, smoothing
from recommender.embed.models import DEFAULT_MODEL

SMOOTH = quantisation.SMOOTH
# The lowest cosine to fp32 int8-smooth gave on 120 CSFCube dev papers (docs/performance.md).
MEASURED_MIN_COSINE = 0.9947


@pytest.fixture(scope="module")
def texts():
    return [paper.text for paper in read_papers([SEEDS])][:12]


@pytest.fixture(scope="module")
def fp32_vectors(texts):
    folder = export_cache.shared_export(DEFAULT_MODEL)
    return loading.load_onnx_encoder(folder, DEFAULT_MODEL).encode(texts)


@pytest.mark.model
def test_the_smoothed_fp32_graph_computes_what_the_export_does(tmp_path, texts, fp32_vectors):
    import onnx

    fp32 = export_cache.shared_export(DEFAULT_MODEL)
    for name in (onnx_encoder.TOKENIZER_FILE, onnx_encoder.CONFIG_FILE):
        shutil.copyfile(fp32 / name, tmp_path / name)
    smoothing.smooth_model(
        fp32 / onnx_encoder.MODEL_FILE,
        tmp_path / onnx_encoder.MODEL_FILE,
        smoothing.shipped_maxima(),
        quantisation.SMOOTHING_ALPHA[SMOOTH],
    )
    graph = onnx.load(str(tmp_path / onnx_encoder.MODEL_FILE)).graph
    # A Mul before the Q/K/V, FFN up and FFN down MatMuls of each of the six layers (the attention
    # output's division is folded into the value projection).
    assert sum(node.name.endswith("/smooth/Mul") for node in graph.node) == 6 * 3
    vectors = loading.load_onnx_encoder(tmp_path, DEFAULT_MODEL).encode(texts)
    cosines = (vectors * fp32_vectors).sum(axis=1)
    assert cosines.min() > 1 - 1e-5


def test_smoothing_moves_an_outlier_channel_into_the_weights():
    activation = np.array([1.0, 1.0, 100.0])
    weight = np.array([0.5, 0.5, 0.5])
    scales = smoothing.smoothing_scales(activation, weight, alpha=0.5)
    smoothed = activation / scales
    assert smoothed.max() / smoothed.min() == pytest.approx(10.0)  # the range's square root
    # At alpha 0.5 each channel's activation and weight peaks meet at their geometric mean.
    assert smoothed == pytest.approx(weight * scales)
    assert smoothed[2] == pytest.approx(np.sqrt(100 * 0.5))
    assert smoothing.smoothing_scales(np.zeros(2), weight[:2], 0.5).min() > 0  # never divides by 0


@pytest.mark.model
def test_the_smoothed_int8_export_stays_within_the_measured_cosine(texts, fp32_vectors):
    import onnx

    folder = export_cache.shared_export(DEFAULT_MODEL, precision=SMOOTH)
    config = json.loads((folder / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["variant"] == SMOOTH
    nodes = onnx.load(str(folder / onnx_encoder.MODEL_FILE)).graph.node
    assert any(node.op_type == "MatMulInteger" for node in nodes)
    assert any(node.name.endswith("/smooth/Mul") for node in nodes)
    vectors = loading.load_onnx_encoder(folder, DEFAULT_MODEL).encode(texts)
    cosines = (vectors * fp32_vectors).sum(axis=1)
    assert MEASURED_MIN_COSINE < cosines.min() and cosines.max() < 0.99999  # moved, not far
    every_weight = export_cache.shared_export(DEFAULT_MODEL, precision="int8")
    plain = loading.load_onnx_encoder(every_weight, DEFAULT_MODEL).encode(texts)
    assert cosines.mean() > (plain * fp32_vectors).sum(axis=1).mean()  # closer than plain int8


@pytest.mark.model
@pytest.mark.parametrize("precision", ["int8", SMOOTH])
def test_an_int8_vector_is_its_text_s_alone(texts, precision):
    # Dynamic int8 shares one activation scale across a batch tensor: in a batch beside longer
    # texts (and their padding), a text's vector moved to cosine 0.997 of its own.
    encoder = loading.load_onnx_encoder(
        export_cache.shared_export(DEFAULT_MODEL, precision=precision), DEFAULT_MODEL
    )
    together = encoder.encode(texts)
    alone = np.vstack([encoder.encode([text]) for text in texts])
    assert (together * alone).sum(axis=1).min() > 0.99999


@pytest.mark.model
def test_an_index_built_at_int8_smooth_says_so_and_is_queried_at_it(workdir):
    assert_built_and_queried_at(SMOOTH, "smooth")


def test_int8_smooth_is_for_the_default_model_only(workdir, fake_model):
    result = CliRunner().invoke(
        main, ["build", str(SEEDS), "--model", "all-mpnet-base-v2", "--precision", SMOOTH]
    )
    assert (result.exit_code, result.output) == (
        2,
        "Error: Invalid value for '--precision': the model 'all-mpnet-base-v2' encodes at fp32, "
        f"int8, int8-static or bf16, not {SMOOTH}: give one of those, or none\n",
    )
