"""The ONNX export is made once per model, in the user cache, and shared by every index built with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SEEDS
from fakes import FakeEncoder
from recommender import build_index
from recommender.embed import export_cache, loading, onnx_encoder
from recommender.index.home import resolve_index_dir
from recommender.index.layout import QUERY_ENCODER, VECTORS
from recommender.index.stored import open_stored
from recommender.query import paper_index as query

EXPORT_FILES = ("model.onnx", "tokenizer.json", "onnx_encoder.json")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("PAPERS_CACHE", str(folder))
    return folder


@pytest.fixture
def model_dir(tmp_path):
    """A model folder: the export is keyed by its files' content."""
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights-1")
    (folder / "1_Pooling" / "config.json").write_text("{}")
    return folder


@pytest.fixture
def exports(monkeypatch):
    """A stand-in for the torch export: writes the three files from the model folder; counts its calls."""
    calls = []

    def export(source, out_dir):
        calls.append(source)
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        weights = (Path(source) / "model.safetensors").read_bytes()
        (out_dir / "model.onnx").write_bytes(b"onnx:" + weights)
        (out_dir / "tokenizer.json").write_text("{}")
        (out_dir / "onnx_encoder.json").write_text(json.dumps({"format_version": 1}))
        return out_dir

    monkeypatch.setattr(onnx_encoder, "export_onnx", export)
    return calls


def test_the_first_use_exports_and_later_ones_reuse(cache, model_dir, exports):
    told = []
    first = export_cache.shared_export(str(model_dir), lambda: told.append("exporting"))
    second = export_cache.shared_export(str(model_dir), lambda: told.append("exporting"))
    assert (first, len(exports), told) == (second, 1, ["exporting"])
    assert first.parent == cache / "onnx"
    assert sorted(p.name for p in first.iterdir()) == sorted([*EXPORT_FILES, export_cache.RECORD])
    assert [p.name for p in (cache / "onnx").iterdir()] == [first.name]  # no staging folder left


def test_an_edited_model_gets_its_own_export(cache, model_dir, exports):
    first = export_cache.shared_export(str(model_dir))
    (model_dir / "model.safetensors").write_bytes(b"weights-2")
    second = export_cache.shared_export(str(model_dir))
    assert first != second and len(exports) == 2
    assert (second / "model.onnx").read_bytes() == b"onnx:weights-2"


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove", "record"])
def test_a_damaged_export_is_made_again(cache, model_dir, exports, damage):
    entry = export_cache.shared_export(str(model_dir))
    target = entry / ("model.onnx" if damage != "record" else export_cache.RECORD)
    if damage == "flip":
        data = bytearray(target.read_bytes())
        data[-1] ^= 1
        target.write_bytes(bytes(data))
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:-1])
    elif damage == "remove":
        target.unlink()
    else:
        target.write_text("not json")
    assert export_cache.shared_export(str(model_dir)) == entry
    assert len(exports) == 2
    assert (entry / "model.onnx").read_bytes() == b"onnx:weights-1"


def test_a_model_with_no_local_folder_is_not_shared(cache, exports):
    assert export_cache.shared_export("no-such-model-anywhere") is None
    assert exports == [] and not cache.exists()


@pytest.fixture
def fake_onnx(monkeypatch):
    """Builds and queries run through the real export plumbing, with the fake encoder behind it."""
    encoder = FakeEncoder()
    monkeypatch.setattr(loading, "load_onnx_encoder", lambda folder, model, threads=None: encoder)
    monkeypatch.setattr(loading, "load_encoder", lambda model, device="auto": encoder)
    monkeypatch.setattr(query, "load_query_encoder", lambda stored, model: encoder)
    return encoder


def test_indexes_of_one_model_share_one_export(cache, model_dir, exports, fake_onnx, workdir):
    phases = []
    for name in ("a", "b"):
        build_index([SEEDS], name, model=str(model_dir), precision="fp32",
                    on_phase=lambda phase, total: phases.append(phase))
    assert len(exports) == 1
    assert phases.count("exporting the model to ONNX (once per model)") == 1
    entry = next((cache / "onnx").iterdir())
    for name in ("a", "b"):
        with open_stored(resolve_index_dir(name), verify=True) as stored:
            assert stored.manifest["query_encoder"] == "onnx"
            assert set(f"{QUERY_ENCODER}/{file}" for file in EXPORT_FILES) <= set(stored.manifest["files"])
            for file in EXPORT_FILES:
                assert stored.path(f"{QUERY_ENCODER}/{file}").read_bytes() == (entry / file).read_bytes()
            assert not stored.path(f"{QUERY_ENCODER}/{export_cache.RECORD}").exists()


def test_a_cache_that_cannot_be_written_gives_the_index_its_own_export(tmp_path, monkeypatch, model_dir, exports,
                                                                      fake_onnx, workdir):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("PAPERS_CACHE", str(blocked / "cache"))  # under a file: mkdir fails
    with pytest.warns(UserWarning, match="encoded without the embedding cache"):  # nor is the cache there
        build_index([SEEDS], "a", model=str(model_dir), precision="fp32")
    assert len(exports) == 1  # exported into the index itself
    with open_stored(resolve_index_dir("a"), verify=True) as stored:
        assert stored.manifest["query_encoder"] == "onnx"
        assert stored.path(f"{QUERY_ENCODER}/model.onnx").read_bytes() == b"onnx:weights-1"


@pytest.mark.model
def test_no_build_imports_torch_in_its_own_process(tmp_path):
    # The whole point of the shared export: a build with it cached needs neither torch nor
    # sentence-transformers; the first makes it in a child process that ends with it, so that
    # its memory is not held while encoding.
    script = (
        "import sys\n"
        "from recommender import build_index\n"
        "build_index([sys.argv[1]], sys.argv[2])\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    env = dict(os.environ, PAPERS_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    loaded = []
    for name in ("first", "second"):
        out = subprocess.run([sys.executable, "-c", script, str(SEEDS), str(tmp_path / name)],
                             capture_output=True, text=True, env=env, check=True)
        loaded.append(out.stdout.strip())
    assert loaded == ["[]", "[]"]
    assert [p.name for p in (tmp_path / "cache" / "onnx").iterdir()] != []  # the first did export
    vectors = [open_stored(tmp_path / name, verify=True) for name in ("first", "second")]
    try:
        import numpy as np

        first, second = (stored.load_array(VECTORS) for stored in vectors)
        assert np.array_equal(first, second)
    finally:
        for stored in vectors:
            stored.close()


def test_an_export_process_that_dies_is_one_error_not_a_hang():
    # `apart` runs the export in a child: one killed (out of memory, a signal) is a ModelError
    # the command line words in one line, not a traceback or a build waiting for ever.
    from recommender.errors import ModelError

    with pytest.raises(ModelError, match="ended before it was done"):
        export_cache.apart(os._exit, 9)


def test_an_export_asked_for_by_a_program_read_from_standard_input_is_made(tmp_path):
    """A program read from standard input (`python - < script.py`, a heredoc): a spawned child would
    have to run that program again and cannot, so `apart` does the work in the program's own process
    (from a program in a file it still runs a child: the test above)."""
    program = "import os\nfrom recommender.embed.export_cache import apart\nprint(apart(os.path.abspath, 'x'))\n"
    done = subprocess.run([sys.executable, "-"], input=program, cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert (done.returncode, done.stdout) == (0, f"{tmp_path / 'x'}\n"), done.stderr
