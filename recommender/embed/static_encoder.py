"""The fast tier: static token embeddings distilled from a sentence-transformers model.

Build time, once per source model: :func:`distill` runs sentence-transformers'
``StaticEmbedding.from_distillation`` (model2vec: every vocabulary token through the model,
PCA to 256 dimensions, SIF weighting; torch) and writes the table as ``model.safetensors``
with its ``tokenizer.json`` and ``static_encoder.json``.

Encoding: :class:`StaticEncoder` tokenizes and averages table rows, as ``StaticEmbedding``
does, with numpy, tokenizers and safetensors only: thousands of abstracts a second on one
core, no torch, no ONNX Runtime.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ..files import write_text

#: The model name that selects the fast tier (distilled from the default model).
STATIC_MODEL = "static"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "static_encoder.json"
FILES = (WEIGHTS_FILE, TOKENIZER_FILE, CONFIG_FILE)
FORMAT_VERSION = 1
TABLE_KEY = "embedding.weight"  # the name StaticEmbedding saves its table under
PCA_DIMS = 256
# Tokens a text is cut at when its tokenizer sets no limit (the distilled one cuts at 128, as
# StaticEmbedding does: longer texts are windowed like for the transformer models).
MAX_TOKENS = 512


def distill(source_model: str, out_dir: Path) -> Path:
    """Distil static embeddings from the sentence-transformers model folder `source_model` into
    `out_dir`."""
    out_dir = Path(out_dir)
    try:
        return _distill(str(source_model), out_dir)
    except (ModelError, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line for the CLI
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ModelError(
            f"cannot distil static embeddings from {source_model!r}: {type(exc).__name__}: {first}"
        ) from exc


def _distill(source_model: str, out_dir: Path) -> Path:
    import logging
    import warnings

    from .sentence_transformer import quiet_libraries, set_offline

    set_offline()
    try:
        import model2vec  # noqa: F401 - StaticEmbedding.from_distillation needs it
    except ImportError:
        raise ModelError(
            "the static tier needs model2vec 0.7: run `pip install 'model2vec[distill]>=0.7,<0.8'`"
        ) from None
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    quiet_libraries()
    for name in ("model2vec", "sentence_transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings(), _quiet_progress():
        warnings.simplefilter("ignore")
        static = StaticEmbedding.from_distillation(source_model, device="cpu", pca_dims=PCA_DIMS)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".distil-") as tmp:
        static.save(tmp)  # model.safetensors ("embedding.weight") and tokenizer.json
        config = {
            "format_version": FORMAT_VERSION,
            "kind": "static",
            "source_model": source_model,
            "dimension": int(static.embedding_dim),
            "vocabulary": int(static.num_embeddings),
        }
        write_text(Path(tmp) / CONFIG_FILE, json.dumps(config, indent=2) + "\n", durable=False)
        for name in FILES:
            os.replace(Path(tmp) / name, out_dir / name)
    return out_dir


@contextlib.contextmanager
def _quiet_progress():
    """model2vec's own per-token progress bar off: the build's progress says what is happening."""
    import functools

    from model2vec.distill import inference

    bar = getattr(inference, "tqdm", None)
    if bar is not None:
        inference.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            inference.tqdm = bar


def is_static_folder(folder: Path) -> bool:
    """Whether `folder` holds a static model written by :func:`distill`."""
    return (Path(folder) / CONFIG_FILE).is_file()


class StaticEncoder:
    """Mean of a text's token rows, L2-normalised: numpy, tokenizers and safetensors only."""

    def __init__(self, folder: Path, name: str = STATIC_MODEL):
        folder = Path(folder)
        self.folder = folder
        self.name = name
        try:
            config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
            if config.get("format_version") != FORMAT_VERSION or config.get("kind") != "static":
                raise ValueError(f"not a static model of format {FORMAT_VERSION}")
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            table = load_file(str(folder / WEIGHTS_FILE))[TABLE_KEY]
            self._tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        except Exception as exc:  # noqa: BLE001
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ModelError(
                f"cannot load static model from {folder}: {type(exc).__name__}: {first}"
            ) from exc
        if table.ndim != 2 or table.shape[0] != self._tokenizer.get_vocab_size():
            raise ModelError(
                f"cannot load static model from {folder}: its table does not fit its tokenizer"
            )
        self._table = np.ascontiguousarray(table, dtype=np.float32)
        # Encoding keeps the tokenizer's own truncation, as StaticEmbedding does; windows fit inside
        # it.
        truncation = self._tokenizer.truncation
        self.max_tokens = int(truncation["max_length"]) if truncation else MAX_TOKENS
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._span_tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self._span_tokenizer.no_padding()
        self._span_tokenizer.no_truncation()
        self.config = config
        self.dimension = int(self._table.shape[1])

    def __repr__(self) -> str:
        return (
            f"StaticEncoder({self.name!r}, dimension={self.dimension}, folder={str(self.folder)!r})"
        )

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character offsets of the tokens of `text`, untruncated."""
        offsets = self._span_tokenizer.encode(text, add_special_tokens=False).offsets
        return [(start, end) for start, end in offsets]

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 embeddings, shape (len(texts), dimension); a text without tokens is
        zeros."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = [
            encoding.ids
            for encoding in self._tokenizer.encode_batch(texts, add_special_tokens=False)
        ]
        lengths = np.fromiter((len(row) for row in ids), np.int64, len(ids))
        if lengths.any():
            from scipy.sparse import csr_matrix

            # Each text's mean row as one sparse product (a gather of every token's row would copy
            # ~1 KB a token, and numpy's reduceat over rows is slow).
            flat = np.fromiter(
                (token for row in ids for token in row), np.int64, int(lengths.sum())
            )
            weights = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)
            indptr = np.concatenate(([0], np.cumsum(lengths)))
            means = (
                csr_matrix((weights, flat, indptr), shape=(len(texts), len(self._table)))
                @ self._table
            )
            out[:] = means
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
