"""Choosing where a build encodes: `--engine local|ray` and `--device auto|cpu|cuda` (no Ray needed here)."""

import sys

import pytest
from click.testing import CliRunner

from recommender import build_index
from recommender.cli import main
from recommender.embed import loading, sentence_transformer
from recommender.errors import InputError
from recommender.index import build


@pytest.mark.parametrize("gpu, device, expected", [
    (False, "auto", "cpu"),
    (True, "auto", "cuda"),
    (False, "cpu", "cpu"),
    (True, "cpu", "cpu"),
    (True, "cuda", "cuda"),
])
def test_device_choice(monkeypatch, gpu, device, expected):
    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: gpu)
    assert loading.resolve_device(device) == expected


@pytest.mark.model  # imports torch
def test_auto_follows_torch_on_this_machine():
    """No GPU here: auto encodes on the CPU (on a GPU runner, on the GPU)."""
    import torch

    assert loading.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


def test_cuda_without_a_gpu_is_one_line(workdir, monkeypatch):
    from corpus import write_corpus

    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: False)
    monkeypatch.setattr(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None)
    write_corpus(workdir / "in")
    result = CliRunner().invoke(main, ["build", "in", "--device", "cuda"])
    assert (result.exit_code, result.output) == (
        1, "Error: device cuda: torch sees no CUDA GPU on this machine: use device cpu or auto\n"
    )
    assert not (workdir / "indexes" / "default" / "CURRENT").exists()


def test_cpu_uses_the_onnx_export_and_cuda_the_full_model(monkeypatch):
    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: True)
    calls = []
    monkeypatch.setattr(loading, "load_onnx_encoder", lambda folder, model, threads=None: calls.append(("onnx", threads)))
    monkeypatch.setattr(loading, "load_encoder", lambda model, device="auto": calls.append(("full", device)))
    loading.encoder_spec("m", "/export", "cpu", threads=1)()
    loading.encoder_spec("m", "/export", "auto")()
    loading.encoder_spec("m", None, "cpu")()
    assert calls == [("onnx", 1), ("full", "cuda"), ("full", "cpu")]


def test_missing_ray_extra_is_one_line(papers_cli, monkeypatch, workdir):
    from corpus import write_corpus

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    write_corpus(workdir / "in")
    result = papers_cli("build", "in", "--engine", "ray")
    assert (result.exit_code, result.output) == (
        1, "Error: the ray engine needs Ray, which is not installed: run `pip install 'papers-like[ray]'`\n"
    )


@pytest.mark.parametrize("options, message", [
    ({"engine": "spark"}, "unknown engine 'spark': use one of local, ray"),
    ({"device": "tpu"}, "unknown device 'tpu': use one of auto, cpu, cuda"),
])
def test_unknown_engine_or_device(workdir, fake_model, options, message):
    from corpus import write_corpus

    with pytest.raises(InputError) as error:
        build_index([write_corpus(workdir / "in")], **options)
    assert str(error.value) == message
