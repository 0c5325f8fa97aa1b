"""bf16 (embed/openvino_encoding.py): the fp32 export run by OpenVINO with bf16 products, the
default on CPUs with AMX bf16, given when asked on CPUs with AVX-512 BF16; its vectors stay
within the cosine to fp32 measured on CSFCube dev (docs/performance.md,
scripts/bench_export_rewrite.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import SEEDS, assert_batched_and_each_vector_its_own, assert_built_and_queried_at

from recommender.cli import main
from recommender.corpus.papers import read_papers
from recommender.embed import export_cache, loading, onnx_encoder, openvino_encoding
from recommender.embed.choice import EncoderRequest, choose_encoder
from recommender.embed.models import DEFAULT_MODEL, model_facts

BF16 = openvino_encoding.BF16
# The lowest cosine to fp32 bf16 gave on 200 CSFCube dev papers (docs/performance.md).
MEASURED_MIN_COSINE = 0.99997
bf16_here = pytest.mark.skipif(
    not openvino_encoding.runs_here(),
    reason="bf16 encodes on CPUs with bf16 instructions (AVX-512 BF16 or AMX), with OpenVINO",
)


@pytest.fixture(scope="module")
def texts():
    return [paper.text for paper in read_papers([SEEDS])][:12]


@pytest.mark.model
@bf16_here
def test_the_bf16_export_is_the_fp32_graph_and_stays_within_the_measured_cosine(texts):
    fp32 = export_cache.shared_export(DEFAULT_MODEL)
    folder = export_cache.shared_export(DEFAULT_MODEL, precision=BF16)
    config = json.loads((folder / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["variant"] == BF16
    assert (folder / onnx_encoder.MODEL_FILE).read_bytes() == (
        fp32 / onnx_encoder.MODEL_FILE
    ).read_bytes()
    encoder = loading.load_onnx_encoder(folder, DEFAULT_MODEL)
    assert encoder._session.inference_precision == "bf16"
    vectors = encoder.encode(texts)
    fp32_vectors = loading.load_onnx_encoder(fp32, DEFAULT_MODEL).encode(texts)
    cosines = (vectors * fp32_vectors).sum(axis=1)
    assert MEASURED_MIN_COSINE - 1e-5 < cosines.min() and cosines.max() < 1 - 1e-7  # not fp32's


@pytest.mark.model
@bf16_here
def test_a_bf16_vector_is_its_text_s_own_in_a_batch_or_alone(texts):
    # Batches of 2,048 tokens feed the matrix units; a text's vector stays its own (cosine
    # 0.999996 at least on 30 CSFCube papers).
    assert_batched_and_each_vector_its_own(BF16, texts, 2048)


# Two threads making their first OpenVINO run at once, with Python switching threads as often as
# it can: before the session made a run of its own when opened, half of such processes hung.
FIRST_RUNS_AT_ONCE = """
import sys, threading
from pathlib import Path
from recommender.embed.openvino_encoding import OpenVinoSession
sys.setswitchinterval(1e-6)
session = OpenVinoSession(Path(sys.argv[1]), 2)
barrier = threading.Barrier(2)
def first_run(n):
    feeds = {port.name: np.ones((1, 16 * (n + 2)), np.int64) for port in session.get_inputs()}
    barrier.wait()
    session.run(None, feeds)
threads = [threading.Thread(target=first_run, args=(n,)) for n in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


@pytest.mark.model
def test_two_threads_starting_to_encode_at_once_do_not_deadlock():
    model = export_cache.shared_export(DEFAULT_MODEL, precision=BF16) / onnx_encoder.MODEL_FILE
    for _ in range(4):  # 4 pairs of processes: a regression hangs at least one nearly always
        processes = [
            subprocess.Popen([sys.executable, "-c", FIRST_RUNS_AT_ONCE, str(model)])
            for _ in range(2)
        ]
        try:
            for process in processes:
                assert process.wait(timeout=120) == 0
        finally:
            for process in processes:
                process.kill()


@pytest.mark.model
@bf16_here
def test_an_index_built_at_bf16_says_so_and_is_queried_at_it(workdir):
    assert_built_and_queried_at(BF16, "bf16")


def test_a_cpu_with_amx_and_openvino_builds_the_default_model_at_bf16_else_int8_smooth(monkeypatch):
    def chosen(model=None, precision=None, device="cpu"):
        choice = choose_encoder(EncoderRequest(model, precision, device), None)
        return choice.precision

    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: True)
    monkeypatch.setattr(openvino_encoding, "bf16_instructions", lambda: True)
    monkeypatch.setattr(openvino_encoding, "installed", lambda: True)
    assert (chosen(), chosen("all-mpnet-base-v2"), chosen(precision="int8-smooth")) == (
        BF16,
        "int8",  # the quality tier's int8 ranks ahead of its fp32 on CSFCube dev: kept
        "int8-smooth",
    )
    assert chosen("all-mpnet-base-v2", BF16) == BF16
    monkeypatch.setattr(openvino_encoding, "installed", lambda: False)
    assert chosen() == "int8-smooth"
    monkeypatch.setattr(openvino_encoding, "installed", lambda: True)
    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: False)
    assert chosen() == model_facts(DEFAULT_MODEL).default_precision == "int8-smooth"
    # AVX-512 BF16 without AMX: bf16 encodes level with int8-smooth there, so it runs when asked
    assert chosen(precision=BF16) == BF16


@pytest.mark.parametrize(
    ("instructions", "openvino", "says"),
    [
        (
            False,
            True,
            "encodes on CPUs with bf16 instructions (AVX-512 BF16 or AMX), and this one has none: "
            "give fast or full",
        ),
        (True, False, "encodes with OpenVINO, which is not installed: pip install openvino"),
    ],
)
def test_bf16_is_refused_where_it_cannot_run_at_bf16(
    workdir, fake_model, monkeypatch, instructions, openvino, says
):
    monkeypatch.setattr(openvino_encoding, "bf16_instructions", lambda: instructions)
    monkeypatch.setattr(openvino_encoding, "installed", lambda: openvino)
    result = CliRunner().invoke(main, ["build", str(SEEDS), "--precision", BF16])
    assert (result.exit_code, result.output) == (
        2,
        f"Error: Invalid value for '--precision': precision bf16 {says}\n",
    )
    assert not (workdir / "indexes").exists()


def test_bf16_instructions_and_amx_are_read_from_the_cpu_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile\n")
    assert openvino_encoding.amx_bf16(cpuinfo) and openvino_encoding.bf16_instructions(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\nbugs\t: amx_bf16\n")
    assert not openvino_encoding.amx_bf16(cpuinfo)  # AVX-512 BF16 alone (AMD Zen 4): not the default
    assert openvino_encoding.bf16_instructions(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\n")
    assert not openvino_encoding.bf16_instructions(cpuinfo)
    assert not openvino_encoding.amx_bf16(tmp_path / "missing")  # no Linux CPU flags to read
    assert not openvino_encoding.bf16_instructions(tmp_path / "missing")


def test_the_bf16_export_links_the_fp32_files_and_leaves_them_as_they_are(tmp_path):
    fp32, bf16 = tmp_path / "fp32", tmp_path / "bf16"
    fp32.mkdir()
    (fp32 / onnx_encoder.MODEL_FILE).write_bytes(b"graph")
    (fp32 / onnx_encoder.TOKENIZER_FILE).write_text("{}")
    config = {"format_version": 1, "variant": "fp32", "dimension": 4}
    (fp32 / onnx_encoder.CONFIG_FILE).write_text(json.dumps(config))
    export_cache.bf16_export(fp32, bf16)
    assert (bf16 / onnx_encoder.MODEL_FILE).stat().st_ino == (
        fp32 / onnx_encoder.MODEL_FILE
    ).stat().st_ino
    assert json.loads((bf16 / onnx_encoder.CONFIG_FILE).read_text()) == dict(config, variant=BF16)
    assert json.loads((fp32 / onnx_encoder.CONFIG_FILE).read_text()) == config


def test_build_and_evaluate_offer_three_precisions():
    """`--precision` offers auto, full and fast (embed.models.PRECISION_CHOICES), in a short help."""
    from recommender.embed.models import PRECISION_CHOICES

    assert PRECISION_CHOICES == ("auto", "full", "fast")
    for command in ("build", "evaluate"):
        (option,) = [param for param in main.get_command(None, command).params if param.name == "precision"]
        assert tuple(option.type.choices) == PRECISION_CHOICES, command
        assert len(option.help) < 300, command
