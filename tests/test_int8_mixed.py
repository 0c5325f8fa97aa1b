"""The careful int8 precision (int8-mixed): int8 weights but for the groups that cost the ranking,
which stay fp32 (embed/quantisation.py; chosen by scripts/int8_sensitivity.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import SEEDS, assert_built_and_queried_at

from recommender import build_index
from recommender.cli import main
from recommender.corpus.papers import read_papers
from recommender.embed import export_cache, loading, onnx_encoder, quantisation
from recommender.embed.models import DEFAULT_MODEL

MIXED = quantisation.MIXED
# The lowest cosine to fp32 int8-mixed gave on 120 CSFCube dev papers (docs/performance.md).
MEASURED_MIN_COSINE = 0.9959


def all_weight_nodes(model_file) -> set[str]:
    """The nodes of a graph that multiply by (or look up in) a float weight."""
    return {name for names in quantisation.weight_groups(model_file).values() for name in names}


@pytest.fixture(scope="module")
def exports():
    """The default model's exports at each precision, from the test session's shared cache."""
    return {
        precision: export_cache.shared_export(DEFAULT_MODEL, precision=precision)
        for precision in quantisation.PRECISIONS
    }


@pytest.mark.model
def test_the_mixed_export_keeps_exactly_the_chosen_groups_in_fp32(exports):
    import onnx

    fp32_model = exports["fp32"] / onnx_encoder.MODEL_FILE
    mixed_model = exports[MIXED] / onnx_encoder.MODEL_FILE
    kept = set(quantisation.kept_nodes(fp32_model, quantisation.KEPT_IN_FP32[MIXED]))
    assert kept and kept < all_weight_nodes(fp32_model)
    # Every other weight of the fp32 graph is int8 now, and only those.
    assert all_weight_nodes(mixed_model) == kept
    quantised = {
        node.name.removesuffix("_quant")
        for node in onnx.load(str(mixed_model)).graph.node
        if node.op_type == "MatMulInteger"
    }
    groups = quantisation.weight_groups(fp32_model)
    matmuls = {name for kind in quantisation.KINDS if kind != "embeddings" for name in groups[kind]}
    assert quantised == matmuls - kept
    config = json.loads((exports[MIXED] / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["variant"] == MIXED


@pytest.mark.model
def test_mixed_vectors_stay_within_the_measured_cosine_of_fp32(exports):
    texts = [paper.text for paper in read_papers([SEEDS])][:12]
    vectors = {
        precision: loading.load_onnx_encoder(folder, DEFAULT_MODEL).encode(texts)
        for precision, folder in exports.items()
    }
    mixed = (vectors[MIXED] * vectors["fp32"]).sum(axis=1)
    every_weight = (vectors["int8"] * vectors["fp32"]).sum(axis=1)
    assert MEASURED_MIN_COSINE < mixed.min() and mixed.max() < 0.99999  # moved, not far
    assert mixed.mean() > every_weight.mean()  # closer than int8 in every weight


@pytest.mark.model
def test_an_index_built_at_int8_mixed_says_so_and_is_queried_at_it(workdir):
    assert_built_and_queried_at(MIXED, "mixed")
    notices: list[str] = []
    kept = build_index([SEEDS], "mixed", notice=notices.append)
    assert kept.encoded == 0 and any(f"precision {MIXED}" in line for line in notices)


@pytest.mark.parametrize(
    "arguments, parameter, message",
    [
        (
            {"precision": MIXED, "device": "cuda"},
            "device",
            f"precision {MIXED} encodes on the CPU (ONNX Runtime or OpenVINO): on a GPU give "
            "precision full",
        ),
        (
            {"model": "static", "precision": MIXED},
            "precision",
            f"the model 'static' has one precision, fp32 (table lookups): give none, not {MIXED}",
        ),
        (
            {"model": "all-mpnet-base-v2", "precision": MIXED},
            "precision",
            "the model 'all-mpnet-base-v2' encodes at fp32, "
            f"int8, int8-static or bf16, not {MIXED}: give one of those, or none",
        ),
    ],
)
def test_int8_mixed_where_it_does_not_fit_is_one_line(
    workdir, fake_model, monkeypatch, arguments, parameter, message
):
    """int8-mixed is the default nowhere: the Python API builds it (for the benchmarks), the CLI
    does not offer it."""
    from recommender.embed import sentence_transformer
    from recommender.errors import OptionError

    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: True)
    with pytest.raises(OptionError) as refused:
        build_index([SEEDS], "default", **arguments)
    assert (str(refused.value), refused.value.parameter) == (message, parameter)
    assert not (workdir / "indexes" / "default").exists()
    result = CliRunner().invoke(main, ["build", str(SEEDS), "--precision", MIXED])
    assert result.exit_code == 2 and "'int8-mixed' is not one of 'auto', 'full', 'fast'" in result.output
