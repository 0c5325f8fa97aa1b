"""The quality tier end to end: an index built with all-mpnet-base-v2 from its installed parts, queried
through its ONNX export without torch, and listed by `papers models`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SEEDS, real_parts_or_skip

QUERY_WITHOUT_TORCH = """
import runpy, sys
sys.argv = ["papers", *sys.argv[1:]]
try:
    runpy.run_module("recommender", run_name="__main__")
except SystemExit as stop:
    assert stop.code in (0, None), stop.code
heavy = sorted(name for name in ("torch", "transformers", "sentence_transformers") if name in sys.modules)
print("heavy:", heavy, file=sys.stderr)
"""


def papers(*args, cwd):
    return subprocess.run([sys.executable, "-c", QUERY_WITHOUT_TORCH, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def mpnet_index(tmp_path_factory):
    real_parts_or_skip()
    folder = tmp_path_factory.mktemp("quality")
    built = subprocess.run([sys.executable, "-m", "recommender", "build", str(SEEDS), "--model", "all-mpnet-base-v2",
                            "--index", "mp", "-q"], cwd=folder, capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stderr
    return folder


@pytest.mark.model
def test_an_index_of_the_large_model_is_built_and_described(mpnet_index):
    info = papers("info", "--index", "mp", "--format", "json", cwd=mpnet_index)
    assert info.returncode == 0, info.stderr
    details = json.loads(info.stdout)
    assert (details["model"], details["dimension"]) == ("all-mpnet-base-v2", 768)
    assert details["precision"] == "int8"  # its default on a CPU: it ranks as well as fp32 (docs/models.md)


@pytest.mark.model
@pytest.mark.parametrize("args", [["like", "FlashDP", "-k", "3"],
                                  ["search", "differentially private training of large models", "-k", "3"]])
def test_lookups_of_the_large_model_load_no_torch(mpnet_index, args):
    done = papers(*args, "--index", "mp", "--format", "json", cwd=mpnet_index)
    assert done.returncode == 0, done.stderr
    assert "heavy: []" in done.stderr
    results = json.loads(done.stdout)
    assert len(results) == 3
    if args[0] == "search":
        assert results[0]["title"] == "FlashDP"  # the paper the query paraphrases ranks first


def test_models_lists_the_tiers_and_how_to_install_the_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERS_CACHE", str(tmp_path / "empty-cache"))
    listed = subprocess.run([sys.executable, "-m", "recommender", "models", "--format", "json"], capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    models = {model["name"]: model for model in json.loads(listed.stdout)}
    assert [models[name]["tier"] for name in ("all-MiniLM-L6-v2", "static", "all-mpnet-base-v2")] == [
        "default", "fast", "quality"]
    assert models["all-MiniLM-L6-v2"]["status"] == "installed"
    assert models["all-mpnet-base-v2"]["status"] in ("not installed", "installed (unpacked on first use)")
    assert models["all-mpnet-base-v2"]["download_bytes"] == 404_421_332
