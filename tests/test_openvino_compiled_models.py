"""The models OpenVINO compiles are kept in the user cache and loaded from there
(embed/openvino_encoding.py): keyed by the model file's bytes and the settings, written whole by
rename, never read or written through a link, and a damaged or unwritable cache costs only the
compiling. A tiny ONNX graph stands in for the exports here; the real ones are in
test_int8_static.py and test_bf16.py."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from recommender.embed import openvino_encoding
from recommender.embed.openvino_encoding import OpenVinoSession

pytest.importorskip("openvino")


def tiny_export(path: Path, scale: float = 2.0) -> Path:
    """An ONNX graph with an export's inputs: each token's id times the mask, times `scale`."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask")
    ]
    output = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "tokens"])
    nodes = [
        helper.make_node("Mul", ["input_ids", "attention_mask"], ["masked"]),
        helper.make_node("Cast", ["masked"], ["as_float"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["as_float", "scale"], ["out"]),
    ]
    scale_tensor = helper.make_tensor("scale", TensorProto.FLOAT, [], [scale])
    graph = helper.make_graph(nodes, "tiny", inputs, [output], [scale_tensor])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


FEEDS = {
    "input_ids": np.array([[3, 5, 7, 0]], np.int64),
    "attention_mask": np.array([[1, 1, 1, 0]], np.int64),
}


def session(model: Path, folder: Path | None, runs: int = 2) -> OpenVinoSession:
    return OpenVinoSession(model, runs, "f32", folder)


def blobs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.blob"))


def test_a_compiled_model_is_kept_and_loaded_again(tmp_path):
    model, folder = tiny_export(tmp_path / "model.onnx"), tmp_path / "cache" / "openvino"
    first = session(model, folder)
    assert first.compiled_from == "model"
    [kept] = blobs(folder)
    assert kept.is_file() and not kept.is_symlink()
    assert sorted(os.listdir(folder)) == [kept.name]  # no temporary file left beside it
    second = session(model, folder)
    assert second.compiled_from == "cache"
    assert np.array_equal(second.run(None, FEEDS)[0], first.run(None, FEEDS)[0])
    assert second.run(None, FEEDS)[0].tolist() == [[6.0, 10.0, 14.0, 0.0]]


def test_another_model_or_other_settings_get_their_own_compiled_model(tmp_path):
    folder = tmp_path / "openvino"
    model = tiny_export(tmp_path / "model.onnx")
    session(model, folder)
    assert session(model, folder, runs=1).compiled_from == "model"  # other settings
    tiny_export(model, scale=3.0)  # the same path, other bytes
    changed = session(model, folder)
    assert changed.compiled_from == "model"
    assert changed.run(None, FEEDS)[0].tolist() == [[9.0, 15.0, 21.0, 0.0]]
    assert len(blobs(folder)) == 3


def test_the_least_recently_used_compiled_models_go_once_the_folder_is_full(tmp_path):
    folder = tmp_path / "openvino"
    most = openvino_encoding.MOST_COMPILED_MODELS_KEPT
    models = [tiny_export(tmp_path / f"model-{n}.onnx", scale=n) for n in range(most + 1)]
    kept = []
    for n, model in enumerate(models[:most]):
        before = set(blobs(folder))
        session(model, folder)
        [new] = set(blobs(folder)) - before
        os.utime(new, ns=(n * 10**9, n * 10**9))  # used in this order, whatever the clock's grain
        kept.append(new)
    assert session(models[0], folder).compiled_from == "cache"  # used again: the newest now
    session(models[most], folder)  # one too many
    assert len(blobs(folder)) == most
    assert kept[0].exists() and not kept[1].exists()  # the one used longest ago went
    assert session(models[1], folder).compiled_from == "model"


def test_a_damaged_compiled_model_is_compiled_afresh_and_replaced(tmp_path):
    model, folder = tiny_export(tmp_path / "model.onnx"), tmp_path / "openvino"
    session(model, folder)
    [kept] = blobs(folder)
    whole = kept.read_bytes()
    for damage in (whole[: len(whole) // 2], b"not a compiled model"):
        kept.write_bytes(damage)
        again = session(model, folder)
        assert again.compiled_from == "model"
        assert again.run(None, FEEDS)[0].tolist() == [[6.0, 10.0, 14.0, 0.0]]
        assert session(model, folder).compiled_from == "cache"  # replaced by a whole one


def test_a_link_where_a_compiled_model_is_kept_is_neither_read_nor_written_through(tmp_path):
    model, folder = tiny_export(tmp_path / "model.onnx"), tmp_path / "openvino"
    session(model, folder)
    [kept] = blobs(folder)
    elsewhere = tmp_path / "elsewhere.blob"
    elsewhere.write_bytes(kept.read_bytes())  # a valid compiled model, behind a link
    kept.unlink()
    kept.symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    assert session(model, folder).compiled_from == "model"  # the link was not followed
    assert elsewhere.read_bytes() == before
    assert kept.is_file() and not kept.is_symlink()  # the link replaced, not written through


def test_a_fifo_where_a_compiled_model_is_kept_is_not_waited_on(tmp_path):
    model, folder = tiny_export(tmp_path / "model.onnx"), tmp_path / "openvino"
    session(model, folder)
    [kept] = blobs(folder)
    kept.unlink()
    os.mkfifo(kept)
    assert session(model, folder).compiled_from == "model"
    assert kept.is_file()


def test_another_user_s_compiled_model_is_not_loaded(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    model, folder = tiny_export(tmp_path / "model.onnx"), tmp_path / "openvino"
    session(model, folder)
    [kept] = blobs(folder)
    os.chown(kept, os.getuid() + 4242, -1)
    assert session(model, folder).compiled_from == "model"
    assert kept.stat().st_uid == os.getuid()  # replaced by this user's


def test_a_cache_that_cannot_be_written_costs_only_the_compiling(tmp_path):
    model = tiny_export(tmp_path / "model.onnx")
    (tmp_path / "a-file").write_text("not a folder")
    unwritable = tmp_path / "a-file" / "openvino"
    for _ in range(2):
        opened = session(model, unwritable)
        assert opened.compiled_from == "model"
        assert opened.run(None, FEEDS)[0].tolist() == [[6.0, 10.0, 14.0, 0.0]]
    assert session(model, None).compiled_from == "model"  # no folder: nothing kept


def test_the_key_names_the_model_bytes_settings_openvino_and_cpu(tmp_path):
    import openvino

    core = openvino.Core()
    model = tiny_export(tmp_path / "model.onnx")
    settings = {"NUM_STREAMS": "2"}
    path = openvino_encoding.compiled_path(core, model, settings, tmp_path)
    assert path == openvino_encoding.compiled_path(core, model, dict(settings), tmp_path)
    assert path != openvino_encoding.compiled_path(core, model, {"NUM_STREAMS": "1"}, tmp_path)
    link = tmp_path / "link.onnx"
    link.symlink_to(model)
    assert openvino_encoding.compiled_path(core, link, settings, tmp_path) is None
