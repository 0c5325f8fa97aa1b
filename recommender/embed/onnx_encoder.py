"""Sentence embeddings with ONNX Runtime, so that a query needs neither torch nor transformers.

Build time: :func:`export_onnx` loads a sentence-transformers model (torch), exports its transformer
to ``model.onnx`` and writes its tokenizer (``tokenizer.json``) and pooling settings
(``onnx_encoder.json``) beside it, in a folder the index keeps.

Query time: :class:`OnnxEncoder` reads that folder and encodes with numpy, onnxruntime and
tokenizers only (OpenVINO instead of onnxruntime for a bf16 or int8-static export:
openvino_encoding.py); importing this module imports nothing heavier (the build-time imports are
inside :func:`export_onnx`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..arrays import unit_rows
from ..errors import ModelError
from ..files import write_text
from . import openvino_encoding
from .user_cache import cache_home

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "onnx_encoder.json"
FORMAT_VERSION = 1
#: How the export is made, within one format: a folder of an earlier revision still loads (an
#: index built before keeps its own export), but the user cache makes the current one anew.
#: 2: the attention masks made once (attention_masks.py).
#: 3: traced without the weights, which are written a tensor at a time, their transposes folded
#: (onnx_weights.py); the shape arithmetic left to ONNX Runtime's folding.
EXPORT_REVISION = 3

#: The graph is the plain fp32 export: the same numbers as torch up to float rounding. Its int8
#: versions are written by quantisation.py, its bf16 one is the same graph run by OpenVINO (the
#: config's "variant" says which); fused variants were
#: measured and not adopted (scripts/onnx_variants.py, scripts/bench_encode.py).
VARIANT = "fp32"

POOLING_MODES = ("mean", "max", "cls", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# Names used by the legacy 1_Pooling/config.json booleans.
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}

INTRA_OP_THREADS = 2
BATCH_SIZE = 32
TOKENS_PER_BATCH = 512


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _pooling_modes(config: dict) -> list[str]:
    """The pooling modes of a 1_Pooling/config.json, in its new or legacy spelling."""
    mode = config.get("pooling_mode")
    if mode is None:
        modes = [name for key, name in _LEGACY_POOLING_KEYS.items() if config.get(key)]
        return modes or ["mean"]
    return [mode] if isinstance(mode, str) else list(mode)


# --------------------------------------------------------------------------- build time


def export_onnx(model_name_or_path: str, out_dir: Path) -> Path:
    """Export a sentence-transformers model to ``out_dir`` for :class:`OnnxEncoder`; return
    ``out_dir``.

    Only models made of a Transformer, a Pooling and optionally a Normalize module can be exported;
    anything else (Dense layers, static embeddings, ...) raises :class:`ModelError`, as does any
    failure to load or export the model.
    """
    out_dir = Path(out_dir)
    try:
        return _export(str(model_name_or_path), out_dir)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line for the CLI
        raise ModelError(
            f"cannot export model {model_name_or_path!r} to ONNX: {_one_line(exc)}"
        ) from exc


def _export(model_name_or_path: str, out_dir: Path) -> Path:
    import gc
    import tempfile

    from .attention_masks import simplify_attention_masks
    from .onnx_weights import save_with_weights

    st = _load_for_export(model_name_or_path)
    graph = _graph_inputs(st, model_name_or_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".export-") as tmp:
        tmp_dir = Path(tmp)
        final = tmp_dir / MODEL_FILE
        model, weights, reference = _trace(st, graph, tmp_dir / "traced.onnx")
        simplify_attention_masks(model)
        # The weights go from the torch model into the file one at a time: no serialised copy of
        # the whole model is ever in memory (onnx_weights.py).
        save_with_weights(model, weights, final)
        # The torch model's weights (0.44 GB for the quality tier) are not needed past here: the
        # graph is checked from the file, against `reference`.
        del st, weights
        gc.collect()

        hidden = int(reference.shape[-1])
        config = {
            "format_version": FORMAT_VERSION,
            "export_revision": EXPORT_REVISION,
            "source_model": model_name_or_path,
            "variant": VARIANT,
            "input_names": graph.input_names,
            "pad_id": int(graph.pad_id),
            "hidden_size": hidden,
            "dimension": hidden * len(graph.settings["pooling_modes"]),
            **graph.settings,
        }
        _check_graph(final, graph, reference)
        graph.tokenizer.save(str(tmp_dir / TOKENIZER_FILE))
        write_text(tmp_dir / CONFIG_FILE, json.dumps(config, indent=2) + "\n", durable=False)
        os.replace(final, out_dir / MODEL_FILE)
        os.replace(tmp_dir / TOKENIZER_FILE, out_dir / TOKENIZER_FILE)
        os.replace(tmp_dir / CONFIG_FILE, out_dir / CONFIG_FILE)
    return out_dir


def _load_for_export(model_name_or_path: str):
    """The sentence-transformers model, loaded on the CPU (a ModelError, one line, if it cannot
    be)."""
    import warnings

    from .sentence_transformer import quiet_libraries, set_offline

    set_offline()
    from sentence_transformers import SentenceTransformer

    quiet_libraries()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return SentenceTransformer(model_name_or_path, device="cpu")
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"cannot load model {model_name_or_path!r}: {_one_line(exc)}") from exc


@dataclass(frozen=True)
class _GraphInputs:
    """What the export needs of the model besides its weights: its pooling settings, the inputs
    the graph takes, the tokenizer (neither truncation nor padding baked in), its padding ID and
    a padded sample batch to trace and check the graph with."""

    settings: dict
    input_names: list[str]
    tokenizer: Tokenizer
    pad_id: int
    arrays: dict[str, list[list[int]]]


def _graph_inputs(st, model_name_or_path: str) -> _GraphInputs:
    settings = _read_settings(st)
    transformer: Any = st[0]  # sentence-transformers' Transformer module: its parts are untyped
    hf_model = transformer.auto_model.eval()
    hf_tokenizer = transformer.tokenizer
    if hf_tokenizer is None or not getattr(hf_tokenizer, "is_fast", False):
        raise ModelError(
            f"model {model_name_or_path!r} has no fast tokenizer (tokenizer.json); cannot export"
        )

    # The inputs the graph takes: those the tokenizer produces and the model's forward accepts.
    import inspect

    accepted = set(inspect.signature(hf_model.forward).parameters)
    input_names: list[str] = [
        n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted
    ]
    if (
        "token_type_ids" not in getattr(hf_tokenizer, "model_input_names", [])
        and "token_type_ids" in input_names
    ):
        input_names.remove("token_type_ids")

    # The tokenizer with neither truncation nor padding baked in: OnnxEncoder sets its own.
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
    tokenizer.no_truncation()
    tokenizer.no_padding()
    pad_id = hf_tokenizer.pad_token_id
    if pad_id is None:
        pad_id = 0

    sample = tokenizer.encode_batch(["a sample sentence to trace the graph", "short"])
    length = max(len(e.ids) for e in sample)
    arrays = {
        "input_ids": [e.ids + [pad_id] * (length - len(e.ids)) for e in sample],
        "attention_mask": [e.attention_mask + [0] * (length - len(e.ids)) for e in sample],
        "token_type_ids": [e.type_ids + [0] * (length - len(e.ids)) for e in sample],
    }
    return _GraphInputs(settings, input_names, tokenizer, pad_id, arrays)


def _trace(st, graph: _GraphInputs, traced: Path) -> tuple[Any, dict[str, np.ndarray], np.ndarray]:
    """The model's graph traced on the sample batch without its weights (an ONNX ModelProto whose
    inputs include them; written to `traced` on the way), the weights by the names the graph gives
    them (numpy views of the torch model's tensors), and what torch gives for the batch, to check
    the graph against."""
    import logging
    import warnings

    import onnx
    import torch

    input_names = graph.input_names
    hf_model = st[0].auto_model

    class _Body(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(input_names, args))).last_hidden_state

    dummy = tuple(torch.tensor(graph.arrays[n], dtype=torch.long) for n in input_names)
    axes: dict[str, dict[int, str]] = {n: {0: "batch", 1: "sequence"} for n in input_names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    # The TorchScript exporter (dynamo=False) is the one optimum uses too; it needs no
    # onnxscript.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    # eval() on the wrapper too: the exporter restores the wrapper's mode recursively afterwards,
    # and a wrapper left in training mode would switch dropout on in the whole model.
    body = _Body(hf_model).eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        reference = body(*dummy).numpy()
        # Without the weights (export_params=False, they stay graph inputs) and without constant
        # folding, whose folded weights torch would keep to itself: the exporter then holds no
        # copy of the weights, and onnx_weights folds their transposes as it writes them. The rest
        # of the constant arithmetic (shapes) ONNX Runtime folds when it loads the graph.
        torch.onnx.export(
            body,
            dummy,
            str(traced),
            dynamo=False,
            input_names=input_names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            export_params=False,
            do_constant_folding=False,
        )
    model = onnx.load(str(traced))
    tensors = {
        **dict(body.named_parameters(remove_duplicate=False)),
        **dict(body.named_buffers(remove_duplicate=False)),
    }
    names = [port.name for port in model.graph.input if port.name not in input_names]
    missing = [name for name in names if name not in tensors]
    if missing:
        raise ModelError(f"the exported graph reads {missing[0]!r}, which the model does not have")
    weights = {name: tensors[name].detach().numpy() for name in names}
    return model, weights, reference


def _check_graph(final: Path, graph: _GraphInputs, reference: np.ndarray) -> None:
    """Check the written graph runs and reproduces torch, with no NaN where padding is (pooling
    multiplies those positions by 0, and NaN * 0 is NaN)."""
    probe = _make_session(final)
    feeds = {n: np.asarray(graph.arrays[n], dtype=np.int64) for n in graph.input_names}
    got = probe.run(None, feeds)[0]
    if got.shape != reference.shape:
        raise ModelError(
            f"exported ONNX model gives shape {got.shape}, torch gives {reference.shape}"
        )
    valid = np.asarray(graph.arrays["attention_mask"], dtype=bool)
    deviation = float(np.abs(got - reference)[valid].max())
    if deviation > 1e-3 or not np.isfinite(got).all():
        raise ModelError("exported ONNX model does not reproduce the torch model's outputs")


def _read_settings(st) -> dict:
    """Pooling / normalisation / length settings of a loaded SentenceTransformer.

    They come from its modules.json, 1_Pooling/config.json and sentence_bert_config.json, as the
    model read them; a module this encoder cannot reproduce raises ModelError.
    """
    modules = list(st)
    kinds = [type(m).__name__ for m in modules]
    if len(modules) < 2 or kinds[0] != "Transformer" or kinds[1] != "Pooling":
        raise ModelError(
            f"unsupported model layout {kinds}; need Transformer, Pooling[, Normalize]"
        )
    if any(k != "Normalize" for k in kinds[2:]):
        raise ModelError(
            f"unsupported model layout {kinds}; need Transformer, Pooling[, Normalize]"
        )
    pooling = modules[1]
    config = pooling.get_config_dict() if hasattr(pooling, "get_config_dict") else vars(pooling)
    modes = _pooling_modes(config)
    bad = [m for m in modes if m not in POOLING_MODES]
    if bad:
        raise ModelError(f"unsupported pooling mode(s) {bad}")
    max_seq_length = st.max_seq_length
    if not max_seq_length or max_seq_length <= 2:
        raise ModelError(f"model has no usable max_seq_length ({max_seq_length!r})")
    tok = modules[0].tokenizer
    specials = int(tok.num_special_tokens_to_add(pair=False)) if tok is not None else 2
    return {
        "pooling_modes": modes,
        "normalize": "Normalize" in kinds[2:],
        "max_seq_length": int(max_seq_length),
        "num_special_tokens": specials,
    }


# --------------------------------------------------------------------------- query time


def _make_session(path: Path, threads: int | None = None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or INTRA_OP_THREADS
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle threads sleep instead of spinning: on a busy machine spinning took ~35% more CPU time
    # and up to 2.5x the wall time for the same vectors (scripts/bench_vs_llm.py, issue 14).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """Encode texts with a model written by :func:`export_onnx`; numpy, onnxruntime, tokenizers
    only."""

    def __init__(
        self,
        folder: Path,
        name: str,
        threads: int | None = None,
        one_text_a_run: bool | None = None,
    ):
        folder = Path(folder)
        self.folder = folder
        self.name = name
        try:
            config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
            if config.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"format_version {config.get('format_version')!r}, expected {FORMAT_VERSION}"
                )
            from tokenizers import Tokenizer

            self._tokenizer_json = (folder / TOKENIZER_FILE).read_text(encoding="utf-8")
            self._tokenizer = Tokenizer.from_str(self._tokenizer_json)
            self.variant = str(config.get("variant", VARIANT))
            # Each text runs alone, on one thread, `threads` runs at once. Dynamic int8 quantises a
            # MatMul's input with one scale for the whole batch tensor, padding included, so in a
            # batch a text's vector would depend on the texts beside it (cosine 0.997 to itself
            # encoded alone); alone it is the text's own. Such small runs spread badly over
            # threads, and several at once leave no padding and no thread waiting on another:
            # int8 1.4x and fp32 ~1.1x the wall speed of batches on two threads
            # (docs/performance.md, scripts/bench_export_rewrite.py).
            # (`one_text_a_run` False batches anyway: for the benchmarks.)
            # The exports OpenVINO runs are the exception: bf16's products and int8-static's fixed
            # scales round no differently beside other texts, and larger batches feed the matrix
            # units; they too go several at once, one thread each (openvino_encoding.py).
            openvino = openvino_encoding.RUNS.get(self.variant)
            if one_text_a_run is None:
                one_text_a_run = openvino is None
            self.one_text_a_run = one_text_a_run
            parallel = self.one_text_a_run or openvino is not None  # at once, one thread each
            self.runs_at_once = (threads or INTRA_OP_THREADS) if parallel else 1
            self.tokens_per_batch = openvino.tokens_per_batch if openvino else TOKENS_PER_BATCH
            self.length_multiple = openvino_encoding.LENGTH_MULTIPLE if openvino else 1
            self._session = (
                openvino_encoding.OpenVinoSession(
                    folder / MODEL_FILE,
                    self.runs_at_once,
                    openvino.inference_precision,
                    cache_home() / openvino_encoding.COMPILED_FOLDER,
                )
                if openvino
                else _make_session(folder / MODEL_FILE, 1 if parallel else threads)
            )
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"cannot load ONNX model from {folder}: {_one_line(exc)}") from exc

        self.config = config
        self.max_seq_length = int(config["max_seq_length"])
        self.max_tokens = self.max_seq_length - int(config.get("num_special_tokens", 2))
        self.dimension = int(config["dimension"])
        self._pooling = list(config["pooling_modes"])
        self._pad_id = int(config.get("pad_id", 0))
        self._input_names = [i.name for i in self._session.get_inputs()]
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_seq_length)
        self._span_tokenizer: Tokenizer | None = None

    def __repr__(self) -> str:
        return (
            f"OnnxEncoder({self.name!r}, dimension={self.dimension}, folder={str(self.folder)!r})"
        )

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character offsets (start, end) of the content tokens of ``text``, untruncated, no
        specials."""
        if self._span_tokenizer is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_str(self._tokenizer_json)
            tok.no_truncation()
            tok.no_padding()
            self._span_tokenizer = tok
        encoding = self._span_tokenizer.encode(text, add_special_tokens=False)
        return [(start, end) for start, end in encoding.offsets]

    def encode(self, texts: list[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """L2-normalised float32 embeddings, shape (len(texts), dimension), in the order given."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(texts)
        if self.one_text_a_run:
            batches = [[i] for i in range(len(texts))]
        else:
            batches = self._length_batches([len(e.ids) for e in encodings], batch_size)
        runs = [[encodings[i] for i in batch] for batch in batches]
        for batch, vectors in zip(batches, self._run_all(runs)):
            out[batch] = vectors
        return unit_rows(out)

    def _length_batches(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        """Positions in batches of similar length, longest first (like sentence-transformers: little
        padding), each of at most `batch_size` texts and `tokens_per_batch` tokens, so that long
        windows do not multiply the attention's memory: peak RSS follows the budget."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batches, start = [], 0
        while start < len(order):
            longest = lengths[order[start]]
            count = max(1, min(batch_size, self.tokens_per_batch // max(longest, 1)))
            batches.append(order[start : start + count])
            start += count
        return batches

    def _run_all(self, runs: list) -> list[np.ndarray]:
        """Each run's vectors, `runs_at_once` runs at a time (ONNX Runtime and OpenVINO run one
        session from several threads at once), in the order given."""
        if self.runs_at_once == 1 or len(runs) == 1:
            return [self._encode_batch(run) for run in runs]
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(self.runs_at_once, thread_name_prefix="papers-encode")
        try:
            return list(pool.map(self._encode_batch, runs))
        finally:
            # An interruption (Ctrl-C) stops what has not started, not only the caller.
            pool.shutdown(wait=True, cancel_futures=True)

    def _encode_batch(self, encodings) -> np.ndarray:
        n = len(encodings)
        length = max(len(e.ids) for e in encodings)
        length = min(-(-length // self.length_multiple) * self.length_multiple, self.max_seq_length)
        ids = np.full((n, length), self._pad_id, dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.int64)
        types = np.zeros((n, length), dtype=np.int64)
        for row, e in enumerate(encodings):
            k = len(e.ids)
            ids[row, :k] = e.ids
            mask[row, :k] = 1
            types[row, :k] = e.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._session.run(None, {name: arrays[name] for name in self._input_names})[0]
        return self._pool(hidden.astype(np.float32, copy=False), mask)

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        m = mask[:, :, None].astype(np.float32)
        counts = np.maximum(m.sum(axis=1), 1e-9)
        lengths = mask.sum(axis=1)
        parts = []
        for mode in self._pooling:
            if mode == "mean":
                parts.append((hidden * m).sum(axis=1) / counts)
            elif mode == "mean_sqrt_len_tokens":
                parts.append((hidden * m).sum(axis=1) / np.sqrt(counts))
            elif mode == "max":
                parts.append(np.where(m > 0, hidden, -np.inf).max(axis=1))
            elif mode == "cls":
                parts.append(hidden[:, 0])
            elif mode == "lasttoken":
                parts.append(hidden[np.arange(len(hidden)), np.maximum(lengths - 1, 0)])
            elif mode == "weightedmean":
                w = m * np.arange(1, hidden.shape[1] + 1, dtype=np.float32)[None, :, None]
                parts.append((hidden * w).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-9))
            else:  # pragma: no cover - rejected at export time
                raise ModelError(f"unsupported pooling mode {mode!r}")
        return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
