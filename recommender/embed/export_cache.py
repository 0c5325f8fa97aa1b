"""One ONNX export per model, made once and shared by every index built with that model.

The export (torch, sentence-transformers, `torch.onnx.export`) costs a build about
7 s and ~1 GB before a single paper is encoded; with it cached, a build never
imports torch. Entries live in the user cache folder (`$PAPERS_CACHE`, else
platformdirs' user cache dir), one folder per model, named by the sha256 of the
model folder's files, so an edited or replaced model gets its own export:

    <cache>/onnx/<model sha256[:32]>-v<export format>/
        model.onnx, tokenizer.json, onnx_encoder.json   (what onnx_encoder.export_onnx writes)
        export.json                                     sha256 and size of each of those files

An entry is checked against export.json every time it is used; a damaged one is
replaced by a fresh export. Entries appear by rename, so concurrent builds never
see half an export. This module and model_parts (models unpacked from registry parts) are the only ones
that write in the cache folder (user_cache names it).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable

from ..digests import file_digest
from ..errors import ModelError
from . import onnx_encoder
from .user_cache import CACHE_VARIABLE, cache_home, remove_entry  # noqa: F401 - where callers have found them

RECORD = "export.json"
_FILES = (onnx_encoder.MODEL_FILE, onnx_encoder.TOKENIZER_FILE, onnx_encoder.CONFIG_FILE)


def model_folder(model: str) -> Path | None:
    """The local folder holding `model`'s files: the packaged MiniLM, a folder, or a model already in the
    Hugging Face cache; None when there is none (the export then cannot be shared)."""
    from .sentence_transformer import resolve_model_path, set_offline

    path = Path(resolve_model_path(model))
    if path.is_dir():
        return path
    set_offline()
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    for repo in (model, f"sentence-transformers/{model}") if "/" not in model else (model,):
        try:
            return Path(snapshot_download(repo, local_files_only=True))
        except Exception:  # noqa: BLE001 - not in the local cache: this model's export is not shared
            continue
    return None


def folder_digest(folder: Path) -> str:
    """sha256 over every file of `folder` (relative path and content), in path order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        digest.update(path.relative_to(folder).as_posix().encode("utf-8") + b"\0")
        digest.update(file_digest(path).encode("ascii"))
    return digest.hexdigest()


def shared_export(model: str, exporting: Callable[[], None] | None = None) -> Path | None:
    """The folder of `model`'s ONNX export in the cache, exported now if missing or damaged.

    `exporting` is called before an export starts. None when the model has no local folder to
    key the export by. Raises ModelError when the model cannot be exported, OSError when the
    cache cannot be written."""
    folder = model_folder(model)
    if folder is None:
        return None
    entry = cache_home() / "onnx" / f"{folder_digest(folder)[:32]}-v{onnx_encoder.FORMAT_VERSION}"
    if _intact(entry):
        return entry
    if exporting is not None:
        exporting()
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".export-"))
    try:
        try:
            onnx_encoder.export_onnx(str(folder), staging)
        except ModelError as error:
            if isinstance(error.__cause__, OSError):
                raise error.__cause__  # the cache folder could not be written (the build falls back)
            raise
        files = {name: {"bytes": (staging / name).stat().st_size, "sha256": file_digest(staging / name)}
                 for name in _FILES}
        (staging / RECORD).write_text(json.dumps({"source": str(folder), "files": files}, indent=2) + "\n",
                                      encoding="utf-8")
        if entry.exists():  # damaged: moved aside first, since a folder is not replaced by rename
            remove_entry(entry)
        try:
            os.rename(staging, entry)
        except OSError:
            if not _intact(entry):  # another build's export won the race only if it is whole
                raise
    finally:
        remove_entry(staging)
    return entry


def _intact(entry: Path) -> bool:
    try:
        record = json.loads((entry / RECORD).read_text(encoding="utf-8"))
        return all(
            (entry / name).stat().st_size == expected["bytes"] and file_digest(entry / name) == expected["sha256"]
            for name, expected in record["files"].items()
        ) and set(record["files"]) == set(_FILES)
    except (OSError, ValueError, KeyError, TypeError):
        return False
