"""Build tiers: int8 and fp32 precision, the static fast tier, and upgrading a fast index in place."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import SEEDS
from corpus import write_corpus
from fakes import FakeEncoder
from recommender import build_index
from recommender.cli import main
from recommender.embed import export_cache, loading, onnx_encoder, quantisation, static_encoder
from recommender.embed.windows import Chunking, cache_key, precision_key
from recommender.embed.models import DEFAULT_MODEL, model_facts
from recommender.errors import EncodingInterrupted, InputError
from recommender.index import build
from recommender.index.home import resolve_index_dir
from recommender.index.layout import QUERY_ENCODER
from recommender.index.stored import open_stored
from recommender.query import ranking
from recommender.query import paper_index as query

#: What a new index of the default model is built at on this machine (bf16 with AMX, else int8-smooth).
DEFAULT_PRECISION = model_facts(DEFAULT_MODEL).cpu_precision()


def manifest(name: str) -> dict:
    with open_stored(resolve_index_dir(name), verify=True) as stored:
        return stored.manifest


# ---------------------------------------------------------------- precision


def test_fp32_cache_keys_are_those_made_before_precisions_and_int8_ones_differ():
    old = hashlib.sha256("m\x00sentences:32\x00a text".encode("utf-8")).hexdigest()
    assert cache_key("m", Chunking(), "a text") == cache_key(precision_key("m", "fp32"), Chunking(), "a text") == old
    assert cache_key(precision_key("m", "int8"), Chunking(), "a text") != old


def test_a_build_records_its_precision_a_rebuild_keeps_it_and_another_encodes_everything(workdir, fake_model):
    notices = []
    first = build_index([SEEDS], "a", precision="int8")
    kept = build_index([SEEDS], "a", notice=notices.append)
    assert (first.encoded, kept.encoded, manifest("a")["precision"]) == (first.papers, 0, "int8")
    assert notices == [f"keeping this index's precision int8: the precision {DEFAULT_PRECISION} (the default for "
                       "new indexes) would encode every paper again"]
    other = build_index([SEEDS], "a", precision="fp32")
    assert (other.encoded, other.reused, manifest("a")["precision"]) == (other.papers, 0, "fp32")
    build_index([SEEDS], "b")
    assert manifest("b")["precision"] == DEFAULT_PRECISION


def test_papers_precision_sets_the_precision_where_none_is_given(workdir, fake_model, monkeypatch):
    monkeypatch.setenv("PAPERS_PRECISION", "int8")
    built = CliRunner().invoke(main, ["build", str(SEEDS), "--quiet"])
    assert built.exit_code == 0, built.output
    assert manifest("default")["precision"] == "int8"
    given = CliRunner().invoke(main, ["build", str(SEEDS), "--quiet", "--index", "b", "--precision", "fp32"])
    assert given.exit_code == 0 and manifest("b")["precision"] == "fp32"  # the option wins
    monkeypatch.setenv("PAPERS_PRECISION", "int4")
    refused = CliRunner().invoke(main, ["build", str(SEEDS), "--index", "c"])
    assert refused.exit_code == 2 and "Invalid value for '--precision': 'int4' is not one of" in refused.output
    assert not (workdir / "indexes" / "c").exists()


def test_a_precision_is_chosen_as_auto_full_or_fast_the_model_table_says_what_each_means(monkeypatch):
    """`full` is fp32, `fast` each model's fastest recipe that keeps the ranking (the model table's), `auto`
    the model's default (as none); a recipe's own name still reads; a model with no measured fast recipe
    refuses `fast` in one line."""
    from recommender.embed import openvino_encoding
    from recommender.embed.choice import EncoderRequest, choose_encoder
    from recommender.errors import OptionError

    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: False)

    def chosen(model, precision):
        return choose_encoder(EncoderRequest(model, precision, "cpu"), None).precision

    assert [chosen(None, p) for p in ("auto", None, "full", "fast", "int8-smooth")] == [
        "int8-smooth", "int8-smooth", "fp32", "int8-smooth", "int8-smooth"]
    assert [chosen("all-mpnet-base-v2", p) for p in ("auto", "full", "fast")] == ["int8", "fp32", "int8"]
    assert [chosen("static", p) for p in ("auto", "full", "fast")] == ["fp32", "fp32", "fp32"]
    assert chosen("./my-model", "full") == "fp32"
    with pytest.raises(OptionError, match="the model './my-model' has no precision measured to rank as fp32 "
                                          "does: give auto or full") as refused:
        chosen("./my-model", "fast")
    assert refused.value.parameter == "precision"
    with pytest.raises(OptionError, match="unknown precision 'fp16': use one of auto, full, fast"):
        chosen(None, "fp16")


def test_papers_build_precision_fast_and_full_and_info_says_them_in_those_words(workdir, fake_model, monkeypatch):
    from recommender.embed import openvino_encoding

    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: False)
    runner = CliRunner()
    for name, precision, recipe, words in (("f", "fast", "int8-smooth", "fast (int8-smooth)"),
                                           ("full", "full", "fp32", "full (fp32)"),
                                           ("old", "int8", "int8", "int8")):  # an older name still reads
        built = runner.invoke(main, ["build", str(SEEDS), "--quiet", "--index", name, "--precision", precision])
        assert built.exit_code == 0, built.output
        assert manifest(name)["precision"] == recipe
        info = runner.invoke(main, ["info", "--index", name])
        assert f"dimensions, {words})\n" in info.output
    kept = runner.invoke(main, ["build", str(SEEDS), "--index", "old", "--precision", "auto"])
    assert kept.exit_code == 0 and manifest("old")["precision"] == "int8"  # a rebuild keeps its recipe
    assert "keeping this index's precision int8" in kept.output
    refused = runner.invoke(main, ["build", str(SEEDS), "--index", "m", "--precision", "int8-mixed"])
    assert (refused.exit_code, refused.output) == (2, "Error: Invalid value for '--precision': 'int8-mixed' is "
                                                      "not one of 'auto', 'full', 'fast' (see `main build "
                                                      "--help`)\n")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("PAPERS_CACHE", str(folder))
    return folder


@pytest.fixture
def model_dir(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights-1")
    return folder


@pytest.fixture
def exports(monkeypatch):
    """Stand-ins for the torch export and the quantiser; each call is counted."""
    calls = []

    def export(source, out_dir):
        calls.append(("export", source))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "model.onnx").write_bytes(b"onnx:" + (Path(source) / "model.safetensors").read_bytes())
        (out_dir / "tokenizer.json").write_text("{}")
        (out_dir / "onnx_encoder.json").write_text(json.dumps({"format_version": 1, "variant": "fp32"}))
        return out_dir

    def quantise(fp32_folder, out_dir, precision="int8"):
        calls.append(("quantise", fp32_folder))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "model.onnx").write_bytes(b"int8:" + (fp32_folder / "model.onnx").read_bytes())
        (out_dir / "tokenizer.json").write_text("{}")
        (out_dir / "onnx_encoder.json").write_text(json.dumps({"format_version": 1, "variant": "int8"}))
        return out_dir

    monkeypatch.setattr(onnx_encoder, "export_onnx", export)
    monkeypatch.setattr(quantisation, "quantise_export", quantise)
    return calls


def test_the_int8_export_is_made_once_from_the_fp32_one_and_kept_beside_it(cache, model_dir, exports):
    told = []
    int8 = export_cache.shared_export(str(model_dir), lambda: told.append("export"), "int8",
                                      lambda: told.append("quantise"))
    fp32 = export_cache.shared_export(str(model_dir), lambda: told.append("export"))
    assert export_cache.shared_export(str(model_dir), precision="int8") == int8
    assert (int8.parent, int8.name) == (fp32.parent, f"{fp32.name}-int8")
    assert told == ["export", "quantise"] and [kind for kind, _ in exports] == ["export", "quantise"]
    assert (int8 / "model.onnx").read_bytes() == b"int8:onnx:weights-1"
    record = json.loads((int8 / export_cache.RECORD).read_text())
    assert record["files"]["model.onnx"]["sha256"] == hashlib.sha256(b"int8:onnx:weights-1").hexdigest()
    (int8 / "model.onnx").write_bytes(b"int8:damaged")
    assert export_cache.shared_export(str(model_dir), precision="int8") == int8
    assert [kind for kind, _ in exports] == ["export", "quantise", "quantise"]  # the fp32 export was intact
    assert (int8 / "model.onnx").read_bytes() == b"int8:onnx:weights-1"


@pytest.mark.model
def test_a_real_int8_build_encodes_and_answers_queries_with_the_quantised_model(workdir):
    build_index([SEEDS], "fp32", precision="fp32")
    build_index([SEEDS], "int8", precision="int8")
    with query.PaperIndex.open("fp32") as fp32, query.PaperIndex.open("int8") as int8:
        assert (fp32.manifest["precision"], int8.manifest["precision"]) == ("fp32", "int8")
        cosines = (np.asarray(fp32.vectors) * np.asarray(int8.vectors)).sum(axis=1)
        assert 0.9 < cosines.min() < 0.99999  # moved by the quantisation, not far
        int8_model = int8.stored.path(f"{QUERY_ENCODER}/model.onnx").stat().st_size
        assert int8_model < 0.4 * fp32.stored.path(f"{QUERY_ENCODER}/model.onnx").stat().st_size
        results = int8.search("differentially private training of language models", k=3)
        assert int8._query_encoder.variant == "int8" and results[0].paper.label == "FlashDP"


def test_a_gpu_build_is_fp32_and_an_int8_index_is_not_rebuilt_on_one_silently(workdir, fake_model, monkeypatch):
    from recommender.embed import sentence_transformer

    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: True)
    build_index([SEEDS], "gpu", device="cuda")
    assert manifest("gpu")["precision"] == "fp32"
    build_index([SEEDS], "cpu", precision="int8")
    with pytest.raises(InputError) as error:
        build_index([SEEDS], "cpu", device="cuda")
    assert str(error.value) == (f"index {resolve_index_dir('cpu')} is int8, which encodes on the CPU: encode "
                                "on the CPU, or give precision full to encode every paper again on the GPU")
    assert error.value.parameter == "device"


@pytest.mark.parametrize("arguments, message", [
    (["--precision", "int8", "--device", "cuda"],
     "Invalid value for '--device': precision int8 encodes on the CPU (ONNX Runtime or OpenVINO): on a GPU give precision full"),
    (["--model", "static", "--precision", "int8"],
     "Invalid value for '--precision': the model 'static' has one precision, fp32 (table lookups): give none, "
     "not int8"),
    (["--model", "static", "--device", "cuda"],
     "Invalid value for '--device': the model 'static' encodes on the CPU (a table lookup, thousands of papers a "
     "second): give no GPU device"),
])
def test_a_precision_that_does_not_fit_is_one_line(workdir, fake_model, monkeypatch, arguments, message):
    from recommender.embed import sentence_transformer

    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: True)
    result = CliRunner().invoke(main, ["build", str(SEEDS), *arguments])
    assert (result.exit_code, result.output) == (2, f"Error: {message}\n")
    assert not (workdir / "indexes" / "default").exists()


# ---------------------------------------------------------------- the static fast tier

WORD = re.compile(r"\w+")


def write_static_model(folder, max_length: int = 24, dimension: int = 16):
    """A small static model in the layout `static_encoder.distill` writes: a word-level tokenizer over
    the seeds' words (cutting at `max_length` tokens, as the distilled one cuts at 128) and a random table."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from recommender.corpus.papers import read_papers

    words = sorted({w.lower() for paper in read_papers([SEEDS]) for w in WORD.findall(paper.text)})
    vocabulary = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.enable_truncation(max_length=max_length)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / static_encoder.TOKENIZER_FILE))
    table = np.random.default_rng(0).standard_normal((len(vocabulary), dimension)).astype(np.float32)
    save_file({static_encoder.TABLE_KEY: table}, str(folder / static_encoder.WEIGHTS_FILE))
    (folder / static_encoder.CONFIG_FILE).write_text(json.dumps(
        {"format_version": 1, "kind": "static", "dimension": dimension, "vocabulary": len(vocabulary)}))
    return folder


@pytest.mark.model
def test_the_static_encoder_gives_sentence_transformers_vectors(tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from recommender.corpus.papers import read_papers

    folder = write_static_model(tmp_path / "static")
    texts = [paper.text for paper in read_papers([SEEDS])] + ["", "unknownword", "one"]
    ours = static_encoder.StaticEncoder(folder).encode(texts)
    theirs = SentenceTransformer(modules=[StaticEmbedding.load(str(folder))], device="cpu").encode(
        texts[:-3], normalize_embeddings=True)
    assert np.abs(ours[:-3] - theirs).max() < 1e-5
    assert not ours[-3].any() and static_encoder.StaticEncoder(folder).max_tokens == 24


@pytest.fixture
def distilled(monkeypatch):
    """Distillation writes the small static model (counted); the full model is the fake encoder."""
    calls = []

    def distill(source, out_dir):
        calls.append(source)
        return write_static_model(out_dir)

    monkeypatch.setattr(static_encoder, "distill", distill)
    full = FakeEncoder(name="all-MiniLM-L6-v2")
    real_prepare = build.prepare_query_encoder
    monkeypatch.setattr(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32":
                        real_prepare(model, writer, previous, on_phase, precision) if model == "static" else None)
    monkeypatch.setattr(loading, "load_encoder", lambda model, device="auto": full)
    real_load = query.load_query_encoder
    monkeypatch.setattr(query, "load_query_encoder",
                        lambda stored, model: real_load(stored, model) if model == "static" else full)
    return calls, full


def test_a_static_build_distils_once_and_its_queries_use_the_static_table(cache, workdir, distilled):
    calls, _ = distilled
    phases = []
    build_index([SEEDS], "fast", model="static", on_phase=lambda name, total: phases.append(name))
    build_index([SEEDS], "fast-2", model="static")
    assert len(calls) == 1 and phases.count("distilling static embeddings from the default model (once, a few minutes)") == 1
    built = manifest("fast")
    assert (built["model"], built["precision"], built["query_encoder"], built["dimension"]) == ("static", "fp32", "static", 16)
    with query.PaperIndex.open("fast") as fast:
        assert fast.dense_weight == ranking.dense_weight_for("static") != ranking.DENSE_WEIGHT
        results = fast.search("differentially private training of language models", k=3)
        assert isinstance(fast._query_encoder, static_encoder.StaticEncoder) and len(results) == 3
        # A free text is windowed and pooled as the build does: a stored paper's text finds itself.
        paper = fast.papers_at([5])[0]
        assert np.allclose(fast.encode_query(paper.text, paper.head), fast.vectors[5], atol=1e-5)


def test_an_upgrade_serves_the_fast_version_until_the_full_one_is_committed_and_resumes(
        cache, workdir, distilled, monkeypatch):
    from recommender.embed import windows

    _, full = distilled
    build_index([SEEDS], "arxiv", model="static")
    papers = manifest("arxiv")["paper_count"]
    monkeypatch.setattr(windows, "ENCODE_BATCH", 8)
    monkeypatch.setattr(windows, "ENCODE_GROUP", 8)
    seen, encode = [], full.encode

    def stopping(texts):
        with query.PaperIndex.open("arxiv") as live:  # a query while the upgrade runs
            seen.append((live.manifest["model"], len(live.search("privacy", k=2))))
        if len(seen) == 3:
            raise KeyboardInterrupt
        return encode(texts)

    monkeypatch.setattr(full, "encode", stopping)
    with pytest.raises(EncodingInterrupted) as stopped:
        build_index([], "arxiv", upgrade=True)
    assert stopped.value.kept == 16 and seen == [("static", 2)] * 3 and manifest("arxiv")["model"] == "static"
    monkeypatch.setattr(full, "encode", encode)
    notices = []
    report = build_index([], "arxiv", upgrade=True, notice=notices.append)
    assert (report.papers, report.reused, report.encoded) == (papers, 16, papers - 16)
    assert notices == [f"resuming: 16 of {papers} papers already encoded"]
    upgraded = manifest("arxiv")
    assert (upgraded["model"], upgraded["precision"]) == ("all-MiniLM-L6-v2", DEFAULT_PRECISION)
    with query.PaperIndex.open("arxiv") as index:
        assert index.dense_weight == ranking.DENSE_WEIGHT


def test_only_a_fast_index_can_be_upgraded(workdir, fake_model):
    build_index([SEEDS], "full")
    with pytest.raises(InputError) as error:
        build_index([], "full", upgrade=True)
    assert str(error.value) == (f"index {resolve_index_dir('full')} was built with 'all-MiniLM-L6-v2', not the "
                                "fast tier ('static'): there is nothing to upgrade")
    result = CliRunner().invoke(main, ["build", "--upgrade", "--index", "full", "--model", "static"])
    assert (result.exit_code, result.output) == (
        2, "Error: Invalid value for '--model': an upgrade builds with a full model, not 'static': give none "
           "(the default) or another\n")
    result = CliRunner().invoke(main, ["build", "--upgrade", "--index", "full", "--where", "year>=2020"])
    assert (result.exit_code, result.output) == (
        2, "Error: Invalid value for '--where': an upgrade that keeps only some papers needs inputs: the index's "
           "own papers are upgraded as they are\n")


def test_each_model_ranks_with_the_dense_weight_its_measurements_chose():
    assert ranking.dense_weight_for("all-MiniLM-L6-v2") == ranking.DENSE_WEIGHT == 0.7
    assert ranking.dense_weight_for("all-MiniLM-L6-v2", "int8") == 0.7
    assert ranking.dense_weight_for("./my-model") == 0.7
    assert ranking.dense_weight_for("static") == 0.4
    assert (ranking.dense_weight_for("all-mpnet-base-v2"), ranking.dense_weight_for("all-mpnet-base-v2", "int8")) == (
        0.8, 0.75)


def test_on_a_cpu_without_amx_the_default_model_builds_int8_smooth_the_quality_tier_int8_and_others_fp32(
        monkeypatch):
    from recommender.embed import openvino_encoding, sentence_transformer
    from recommender.embed.choice import EncoderRequest, choose_encoder
    from recommender.embed.models import model_facts

    models = ("all-MiniLM-L6-v2", "./my-model", "all-mpnet-base-v2")
    assert [model_facts(m).default_precision for m in models] == ["int8-smooth", "fp32", "int8"]
    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: False)  # with AMX: tests/test_bf16.py

    def chosen(model, precision=None, device="cpu"):
        choice = choose_encoder(EncoderRequest(model, precision, device), None)
        return choice.model, choice.precision

    assert chosen("all-mpnet-base-v2") == ("all-mpnet-base-v2", "int8")
    assert chosen("all-mpnet-base-v2", "fp32") == ("all-mpnet-base-v2", "fp32")
    assert chosen(None) == ("all-MiniLM-L6-v2", "int8-smooth")
    assert chosen("./my-model") == ("./my-model", "fp32")
    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: True)  # auto on a GPU machine
    assert chosen("all-mpnet-base-v2", device="auto") == ("all-mpnet-base-v2", "fp32")
    assert chosen(None, device="auto") == ("all-MiniLM-L6-v2", "fp32")


def test_without_amx_the_default_model_builds_int8_static_from_the_size_its_builds_were_measured_to_gain(
        monkeypatch):
    """The size rule of the model table: a new index of the default model of at least `large_corpus_precision`'s
    papers is int8-static (auto and fast alike), below it int8-smooth; full, a recipe's own name, the other
    models, a GPU build and AMX's bf16 do not follow it; a notice says which was chosen and why."""
    from recommender.embed import openvino_encoding, sentence_transformer
    from recommender.embed.choice import EncoderRequest, choose_encoder, new_index_precision

    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: False)
    recipe, papers = model_facts(DEFAULT_MODEL).large_corpus_precision
    assert recipe == "int8-static" and papers > 1
    notices = []

    def chosen(model, precision, count, device="cpu"):
        return choose_encoder(EncoderRequest(model, precision, device), None, notices.append, "", count).precision

    assert [chosen(None, p, papers - 1) for p in (None, "auto", "fast", "full")] == [
        "int8-smooth", "int8-smooth", "int8-smooth", "fp32"]
    assert notices == []
    assert [chosen(None, p, papers) for p in (None, "auto", "fast", "full", "int8-smooth")] == [
        "int8-static", "int8-static", "int8-static", "fp32", "int8-smooth"]
    assert notices == [f"precision int8-static for {papers:,} papers (int8-static from {papers:,} papers, "
                       "int8-smooth below, whole builds measured)"] * 3
    assert chosen(None, None, None) == "int8-smooth"  # a corpus of unknown size: the smaller one's
    assert [chosen(m, None, 10 * papers) for m in ("all-mpnet-base-v2", "static", "./my-model")] == [
        "int8", "fp32", "fp32"]
    assert new_index_precision(None, None, papers) == (DEFAULT_MODEL, "int8-static")  # as `papers evaluate` asks
    assert new_index_precision(None, None, papers - 1) == (DEFAULT_MODEL, "int8-smooth")
    assert model_facts(DEFAULT_MODEL).precision_words("int8-static") == "fast (int8-static)"
    monkeypatch.setattr(sentence_transformer, "cuda_available", lambda: True)
    assert chosen(None, None, papers, device="auto") == "fp32"  # a GPU build stays fp32
    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: True)
    monkeypatch.setattr(openvino_encoding, "installed", lambda: True)
    assert chosen(None, None, papers) == "bf16"  # AMX's default, at any size
    assert chosen(None, "fast", papers) == "int8-smooth"  # the size rule was measured without AMX


def test_where_openvino_cannot_load_a_large_corpus_falls_back_to_int8_smooth_with_one_notice(monkeypatch):
    from recommender.embed import openvino_encoding
    from recommender.embed.choice import EncoderRequest, choose_encoder

    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: False)
    monkeypatch.setattr(openvino_encoding, "static_unavailable", lambda: "NNCF is not installed")
    papers = model_facts(DEFAULT_MODEL).large_corpus_precision[1]
    for precision in (None, "fast"):
        notices = []
        choice = choose_encoder(EncoderRequest(None, precision, "cpu"), None, notices.append, "", papers)
        assert choice.precision == "int8-smooth"
        assert notices == [f"precision int8-smooth: int8-static (int8-static from {papers:,} papers, int8-smooth "
                           "below) cannot run here: NNCF is not installed"]


def test_whether_int8_static_can_run_is_whether_openvino_loads_and_nncf_is_there(monkeypatch):
    import sys

    from recommender.embed import openvino_encoding

    assert openvino_encoding.static_unavailable() is None  # both are dependencies of the package
    monkeypatch.setitem(sys.modules, "nncf", None)  # as if not installed
    assert openvino_encoding.static_unavailable() == "NNCF is not installed"
    monkeypatch.setitem(sys.modules, "openvino", None)  # its import fails
    assert openvino_encoding.static_unavailable() == (
        "OpenVINO fails to load (ModuleNotFoundError: import of openvino halted; None in sys.modules)")


def test_a_build_takes_the_size_rule_and_a_rebuild_or_add_keeps_its_index_s_precision(
        workdir, fake_model, monkeypatch):
    """Through `build_index`, the corpus counted once read: 38 seed papers against a rule moved to 20 papers
    (the model table is the only place it is written)."""
    from dataclasses import replace

    from recommender.embed import models, openvino_encoding

    monkeypatch.setattr(openvino_encoding, "amx_bf16", lambda: False)
    facts = model_facts(DEFAULT_MODEL)
    monkeypatch.setitem(models._BY_NAME, DEFAULT_MODEL, replace(facts, large_corpus_precision=("int8-static", 20)))
    few = write_corpus(workdir / "few")  # 6 papers
    notices = []
    build_index([SEEDS], "large", notice=notices.append)
    assert manifest("large")["precision"] == "int8-static"
    assert notices == ["precision int8-static for 38 papers (int8-static from 20 papers, int8-smooth below, whole "
                       "builds measured)"]
    small = build_index([few], "small")
    assert (small.papers, manifest("small")["precision"]) == (6, "int8-smooth")
    notices.clear()
    grown = build_index([few, SEEDS], "small", notice=notices.append)  # the same index, grown past the size
    assert (manifest("small")["precision"], grown.reused) == ("int8-smooth", 6)
    assert notices == ["keeping this index's precision int8-smooth: the precision int8-static (the default for "
                       "new indexes of 44 papers) would encode every paper again"]
    notices.clear()
    build_index([few], "large", notice=notices.append)  # shrunk below the size: its precision kept
    assert manifest("large")["precision"] == "int8-static"
    assert notices == ["keeping this index's precision int8-static: the precision int8-smooth (the default for "
                       "new indexes) would encode every paper again"]


def test_whether_queries_need_the_build_s_export_is_a_fact_of_the_encoder():
    """An index's queries need its export where its papers were encoded at a reduced precision or by a
    distilled table (the fast tier's), whatever the model is called (embed/models.py answers it)."""
    from recommender.embed.models import MODELS, export_required

    fast = next(facts for facts in MODELS if facts.tier == "fast")
    assert export_required(fast.export, "fp32") and fast.exported_only
    assert export_required("onnx", "int8-smooth") and export_required(None, "bf16")
    assert not export_required("onnx", "fp32") and not export_required(None, "fp32")


# ---------------------------------------------------------------- the model a rebuild keeps


@pytest.mark.parametrize("model", ["static", "./my-model"])
def test_a_rebuild_without_a_model_keeps_the_index_s_model_with_a_notice(workdir, fake_model,
                                                                         model):
    (workdir / "my-model").mkdir()
    papers = workdir / "papers"
    papers.mkdir()
    for seed in sorted(SEEDS.iterdir())[:2]:
        (papers / seed.name).write_bytes(seed.read_bytes())
    first = CliRunner().invoke(main, ["build", str(papers), "--index", "kept", "--model", model])
    assert first.exit_code == 0, first.output
    count = manifest("kept")["paper_count"]
    (papers / "new.txt").write_text(
        "A new paper\n\nOne more abstract about private training of language models.\n",
        encoding="utf-8")
    again = CliRunner().invoke(main, ["build", str(papers), "--index", "kept"])
    assert again.exit_code == 0, again.output
    built = manifest("kept")
    assert (built["model"], built["paper_count"], built["encoded"]) == (model, count + 1, 1)
    assert (f"keeping this index's model {model}: the model all-MiniLM-L6-v2 (the default for new "
            "indexes) would encode every paper again") in again.output
    default = CliRunner().invoke(
        main, ["build", str(papers), "--index", "kept", "--model", "all-MiniLM-L6-v2"])
    assert default.exit_code == 0 and "keeping" not in default.output
    rebuilt = manifest("kept")
    assert (rebuilt["model"], rebuilt["encoded"]) == ("all-MiniLM-L6-v2", count + 1)

