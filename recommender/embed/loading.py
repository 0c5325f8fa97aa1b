"""Loading a model as an Encoder: the full sentence-transformers model, or its ONNX export.

Both are heavy imports, made only here and only when a text has to be encoded.
Callers go through this module's attributes, so tests can swap in a fake encoder.
"""

from __future__ import annotations

from pathlib import Path

from .windows import Encoder


def load_encoder(model: str) -> Encoder:
    """The full sentence-transformers encoder (heavy: imports torch)."""
    from .sentence_transformer import SentenceTransformerEncoder

    return SentenceTransformerEncoder(model)


def load_onnx_encoder(folder: Path, model: str) -> Encoder:
    """The ONNX export of `model` stored in `folder` (no torch)."""
    from .onnx_encoder import OnnxEncoder

    return OnnxEncoder(folder, name=model)
