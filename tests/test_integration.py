"""The real packaged model on the seed corpus: what a user meets."""

import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import SEEDS
from recommender import PaperIndex, build_index
from recommender.cli import main

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def seed_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seed-index")
    shutil.copytree(SEEDS, folder / "seeds")
    report = build_index([folder / "seeds"], index=folder / "index")
    assert (report.papers, report.encoded, report.reused) == (38, 38, 0)
    return folder


@pytest.fixture(scope="module")
def recommender(seed_index):
    with PaperIndex.open(seed_index / "index") as opened:
        yield opened


def test_rebuild_encodes_nothing(seed_index, monkeypatch):
    from conftest import SESSION_CACHE

    monkeypatch.setenv("PAPERS_CACHE", SESSION_CACHE)  # the cache the module's index was built with
    report = build_index([seed_index / "seeds"], index=seed_index / "index")
    assert (report.encoded, report.reused) == (0, 38)


def test_abstract_text_finds_its_own_paper_first(recommender):
    for paper in list(recommender.papers())[::5]:
        results = recommender.search(paper.abstract, k=3)
        assert results[0].id == paper.id, paper.handle


def test_dp_query_has_flashdp_in_top_3(recommender):
    results = recommender.search("differentially private training of large language models", k=3)
    assert "FlashDP" in [r.paper.handle for r in results]


def test_like_never_returns_the_query_paper(recommender):
    for paper in recommender.papers():
        results = recommender.like(paper.id, k=37)
        assert paper.id not in [r.id for r in results]
        assert len(results) == 37


def test_search_uses_the_light_encoder_and_matches_the_full_model(recommender):
    from recommender.embed import export_cache
    from recommender.embed.loading import load_encoder, load_onnx_encoder

    assert recommender.manifest["query_encoder"] == "onnx"
    model, precision = recommender.manifest["model"], recommender.manifest["precision"]
    query = "video aesthetic assessment dataset"
    light = recommender.encode_query(query)
    built_with = load_onnx_encoder(export_cache.shared_export(model, precision=precision), model)
    assert float(light @ built_with.encode([query])[0]) > 0.99999  # the papers' own encoder
    full = load_encoder(model).encode([query])[0]
    # int8-smooth (the default on a CPU) was at least 0.9947 of fp32 on 120 CSFCube papers
    assert float(light @ full) > (0.999 if precision == "fp32" else 0.9947)


def test_cli_like_and_search_on_seed_index(seed_index):
    runner = CliRunner()
    index = str(seed_index / "index")
    result = runner.invoke(main, ["like", "FlashDP", "--index", index, "--format", "jsonl"])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert result.exit_code == 0 and len(rows) == 10
    assert "FlashDP" not in [row["handle"] for row in rows]
    result = runner.invoke(main, ["search", "differentially private training of large language models",
                                  "--index", index, "-k", "3", "--format", "jsonl"])
    assert "FlashDP" in [json.loads(line)["handle"] for line in result.output.splitlines()]


@pytest.mark.parametrize("command, forbidden", [
    (["like", "FlashDP"], ("torch", "sentence_transformers", "transformers", "sklearn", "scipy", "ray",
                           "onnxruntime", "recommender.embed.onnx_encoder")),
    (["search", "private training"], ("torch", "sentence_transformers", "transformers", "sklearn", "ray")),
])
def test_queries_stay_light(seed_index, command, forbidden):
    """`like` loads no model at all; `search` encodes with the ONNX export, not torch."""
    argv = ["papers", *command, "--index", str(seed_index / "index")]
    code = (
        "import sys; from recommender.cli import main\n"
        f"sys.argv = {argv!r}\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY', [m for m in {forbidden!r} if m in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr


def test_the_closest_sentences_of_two_seed_papers_are_on_their_shared_subject(recommender):
    """FlashDP (private training by per-sample gradient clipping) against PaZO (zeroth-order
    optimisation): the pair the real model picks is about stochastic gradient descent in both, and
    the heaviest shared phrase says so; none of the index's common words is shown."""
    explained = recommender.explain("PaZO", seed="FlashDP")
    (pair,) = explained.sentences
    assert "SGD" in pair.seed_sentence and "gradient descent" in pair.paper_sentence, pair
    assert 0.3 < pair.cosine < 1
    assert explained.phrases[0] == "stochastic gradient descent"
    assert not {"models", "training", "based", "methods"} & set(explained.phrases)
