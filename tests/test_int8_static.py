"""int8-static (embed/quantisation.py, run by embed/openvino_encoding.py): int8 weights and
activations with scales calibrated once on the shipped abstracts, run by OpenVINO in batches; its
vectors stay within the cosine to fp32 measured on CSFCube dev (docs/performance.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SEEDS, assert_batched_and_each_vector_its_own, assert_built_and_queried_at

from recommender.corpus.papers import read_papers
from recommender.embed import export_cache, loading, onnx_encoder, openvino_encoding, quantisation
from recommender.embed.models import DEFAULT_MODEL

STATIC = openvino_encoding.INT8_STATIC
# The lowest cosine to fp32 int8-static gave on 240 CSFCube dev papers (docs/performance.md).
MEASURED_MIN_COSINE = 0.9932


@pytest.fixture(scope="module")
def texts():
    return [paper.text for paper in read_papers([SEEDS])][:12]


def test_the_calibration_abstracts_are_the_seed_abstracts():
    assert quantisation.calibration_abstracts() == [paper.text for paper in read_papers([SEEDS])]


@pytest.mark.model
def test_the_int8_static_export_is_quantised_and_stays_within_the_measured_cosine(texts):
    import onnx

    folder = export_cache.shared_export(DEFAULT_MODEL, precision=STATIC)
    config = json.loads((folder / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["variant"] == STATIC
    graph = onnx.load(str(folder / onnx_encoder.MODEL_FILE)).graph
    operators = [node.op_type for node in graph.node]
    # The 6 layers' 36 weight MatMuls take int8 weights (stored so) and activations quantised with
    # fixed scales.
    int8_weights = [i for i in graph.initializer if i.data_type == onnx.TensorProto.INT8]
    assert len(int8_weights) >= 36 and operators.count("QuantizeLinear") >= 36
    assert operators.count("DequantizeLinear") >= 72 and "DynamicQuantizeLinear" not in operators
    encoder = loading.load_onnx_encoder(folder, DEFAULT_MODEL)
    assert encoder._session.inference_precision == "f32"  # the rest at fp32 on every CPU
    vectors = encoder.encode(texts)
    fp32 = export_cache.shared_export(DEFAULT_MODEL)
    fp32_vectors = loading.load_onnx_encoder(fp32, DEFAULT_MODEL).encode(texts)
    cosines = (vectors * fp32_vectors).sum(axis=1)
    assert MEASURED_MIN_COSINE - 2e-3 < cosines.min() and cosines.max() < 1 - 1e-5  # not fp32's


@pytest.mark.model
def test_an_int8_static_vector_is_its_text_s_own_in_a_batch_or_alone(texts):
    # Fixed activation scales: a text's vector does not depend on the texts beside it.
    assert_batched_and_each_vector_its_own(STATIC, texts, 1024)


@pytest.mark.model
def test_an_int8_static_encoder_loaded_from_its_kept_compiled_model_gives_the_same_vectors(
    texts, own_embedding_cache
):
    (own_embedding_cache / openvino_encoding.COMPILED_FOLDER).unlink()  # none kept yet
    folder = export_cache.shared_export(DEFAULT_MODEL, precision=STATIC)
    compiled = loading.load_onnx_encoder(folder, DEFAULT_MODEL)
    kept = loading.load_onnx_encoder(folder, DEFAULT_MODEL)
    assert (compiled._session.compiled_from, kept._session.compiled_from) == ("model", "cache")
    assert np.array_equal(kept.encode(texts), compiled.encode(texts))


@pytest.mark.model
def test_an_index_built_at_int8_static_says_so_and_is_queried_at_it(workdir):
    assert_built_and_queried_at(STATIC, "static8")


def test_int8_static_without_openvino_is_refused_in_one_line(monkeypatch, workdir):
    monkeypatch.setattr(openvino_encoding, "installed", lambda: False)
    from recommender import build_index
    from recommender.errors import OptionError

    with pytest.raises(OptionError) as refused:  # int8-static: the Python API's, for the benchmarks
        build_index([SEEDS], precision=STATIC)
    assert str(refused.value) == (
        f"precision {STATIC} encodes with OpenVINO, which is not installed: pip install openvino"
    )
    assert not (workdir / "indexes").exists() or not any((workdir / "indexes").iterdir())
