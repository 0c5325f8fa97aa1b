"""Loading a model as an Encoder: the full sentence-transformers model, or its ONNX export.

Both are heavy imports, made only here and only when a text has to be encoded.
Callers go through this module's attributes, so tests can swap in a fake encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .windows import Encoder


def load_encoder(model: str, device: str = "auto") -> Encoder:
    """The full sentence-transformers encoder (heavy: imports torch)."""
    from .sentence_transformer import SentenceTransformerEncoder

    return SentenceTransformerEncoder(model, device=device)


def load_onnx_encoder(folder: Path, model: str, threads: int | None = None) -> Encoder:
    """The ONNX export of `model` stored in `folder` (no torch)."""
    from .onnx_encoder import OnnxEncoder

    return OnnxEncoder(folder, name=model, threads=threads)


def load_static_encoder(folder: Path, model: str) -> Encoder:
    """The static embeddings stored in `folder` (no torch, no ONNX Runtime)."""
    from .static_encoder import StaticEncoder

    return StaticEncoder(folder, name=model)


def load_exported_encoder(folder: Path, model: str, threads: int | None = None) -> Encoder:
    """What a build wrote to `folder` for `model`: its static embeddings, else its ONNX export."""
    from .static_encoder import is_static_folder

    if is_static_folder(folder):
        return load_static_encoder(folder, model)
    return load_onnx_encoder(folder, model, threads=threads)


def resolve_device(device: str) -> str:
    """The device to encode on, cpu or cuda, for auto, cpu or cuda (imports torch unless cpu)."""
    from .sentence_transformer import resolve_device as resolve

    return resolve(device)


@dataclass(frozen=True)
class EncoderSpec:
    """How to load the encoder a build uses, small and picklable: calling it loads the encoder.

    The fp32 ONNX export is used on the CPU (it is faster there than torch, same vectors);
    on a CUDA GPU the full model. An int8 export or static embeddings (`exported_only`) are the
    only encoder of their precision: used whatever the device. A Ray build sends this to every
    worker.
    """

    model: str
    onnx_folder: str | None = None  # the build's export: ONNX, or static embeddings
    device: str = "auto"  # "auto", "cpu" or "cuda"
    threads: int | None = None  # ONNX Runtime threads (default: onnx_encoder.INTRA_OP_THREADS)
    exported_only: bool = False

    def __call__(self) -> Encoder:
        device = self.device
        if self.onnx_folder is not None and self.exported_only:
            return load_exported_encoder(Path(self.onnx_folder), self.model, threads=self.threads)
        if self.onnx_folder is not None:
            device = resolve_device(device)
            if device == "cpu":
                return load_onnx_encoder(Path(self.onnx_folder), self.model, threads=self.threads)
        if (
            device == "auto"
        ):  # the loader's own default; loaders swapped in by tests take the model only
            return load_encoder(self.model)
        return load_encoder(self.model, device=device)


def encoder_spec(
    model: str,
    onnx_folder: str | Path | None = None,
    device: str = "auto",
    threads: int | None = None,
    exported_only: bool = False,
) -> EncoderSpec:
    """The encoder a build of `model` uses: its export in `onnx_folder` if any, on `device`
    (with `exported_only`, that export whatever the device)."""
    return EncoderSpec(
        model, str(onnx_folder) if onnx_folder is not None else None, device, threads, exported_only
    )
