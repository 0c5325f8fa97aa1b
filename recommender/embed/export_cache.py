"""What a model is turned into for builds and queries, made once and shared by every index.

Three kinds of entry, each made from a model folder and named by the sha256 of that
folder's files, so an edited or replaced model gets its own:

    <cache>/onnx/<model sha256[:32]>-v<export format>/        fp32 ONNX export
    (onnx_encoder.export_onnx)
    <cache>/onnx/<model sha256[:32]>-v<export format>-int8/   the same quantised to int8
    (quantisation.py; -int8-mixed, -int8-smooth alike; -bf16 the fp32 files, linked, for OpenVINO
    at bf16: openvino_encoding.py)
    <cache>/static/<model sha256[:32]>-v<static format>/      static embeddings distilled from it
    (static_encoder.py)
        ... the entry's files, and export.json: the sha256 and size of each of them

The export (torch, sentence-transformers, `torch.onnx.export`) costs a build about
7 s and ~1 GB before a single paper is encoded, the int8 quantisation a few seconds
more, the distillation a minute or two; with them cached, a build never imports torch.
Entries live in the user cache folder (`$PAPERS_CACHE`, else platformdirs' user cache dir).

    <cache>/embeddings.sqlite                          the embedding cache of every index
    (embed/embedding_cache.py)

An entry is checked against export.json every time it is used; a damaged one, or one
holding anything but plain files (a link planted there is never followed), is replaced
by a fresh export. Entries appear by rename, so concurrent builds never see half an
export. This module, model_parts (models unpacked from registry parts) and openvino_encoding
(compiled models, <cache>/openvino/) are the only ones that write in the cache folder
(user_cache names it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..digests import file_digest
from ..errors import ModelError, OptionError, caller_stacklevel
from ..files import open_exclusive, write_text
from . import model_parts, onnx_encoder, openvino_encoding, quantisation, static_encoder
from .models import model_facts
from .user_cache import (  # noqa: F401 - where callers have found them
    cache_home,
    leftovers_notice,
    remove_entry,
    remove_stale_leftovers,
    staging_folder,
)

RECORD = "export.json"
EXPORTS_FOLDER = "onnx"
STATIC_FOLDER = "static"
#: What the cache folder keeps besides the embedding cache, as `papers cache info` lists it:
#: folder -> what it holds. Each is made again when needed, and indexes keep their own links to
#: the exports, so any of them can be deleted.
KEPT_FOLDERS = {
    EXPORTS_FOLDER: "model exports (ONNX)",
    STATIC_FOLDER: "static tier tables",
    model_parts.UNPACKED_FOLDER: "models unpacked from their parts",
    openvino_encoding.COMPILED_FOLDER: "compiled models (OpenVINO)",
}
EMBEDDINGS = (  # the embedding cache, shared by every index (embedding_cache.EmbeddingCache)
    "embeddings.sqlite"
)
_FILES = (onnx_encoder.MODEL_FILE, onnx_encoder.TOKENIZER_FILE, onnx_encoder.CONFIG_FILE)
PRECISIONS = quantisation.PRECISIONS


def model_folder(model: str) -> Path | None:
    """The local folder holding `model`'s files: the packaged MiniLM, a folder, or a model already
    in the Hugging Face cache; None when there is none (the export then cannot be shared)."""
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


def embedding_cache_path() -> Path:
    """Where the embedding cache shared by every index lives."""
    return cache_home() / EMBEDDINGS


def model_identity(model: str) -> str:
    """The one value that names which model makes a vector, for the embedding cache's key: the
    sha256 of the model folder's files when the model has a local folder (so a model replaced in the
    same folder is a new model), else its name. (A precision, fp32 or int8, joins this value.)"""
    source_model = model_facts(model).distilled_from
    if (
        source_model is not None
    ):  # distilled from another model: its vectors follow that model's files
        source = model_folder(source_model)
        digest = folder_digest(source) if source is not None else source_model
        return f"static-v{static_encoder.FORMAT_VERSION}:{digest}"
    folder = model_folder(model)
    return f"files:{folder_digest(folder)}" if folder is not None else f"name:{model}"


def folder_digest(folder: Path) -> str:
    """sha256 over every file of `folder` (relative path and content), in path order.

    Remembered for this process by each file's size, mtime and inode: a build asks twice (the
    export and the embedding cache), and the model's files are hundreds of MB."""
    found = sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts)
    signature = (
        str(folder.resolve()),
        tuple((p.relative_to(folder).as_posix(), *_stat_signature(p)) for p in found),
    )
    if signature not in _DIGESTS:
        digest = hashlib.sha256()
        for path in found:
            digest.update(path.relative_to(folder).as_posix().encode("utf-8") + b"\0")
            digest.update(
                file_digest(path.resolve()).encode("ascii")
            )  # hub caches link to their blobs
        _DIGESTS[signature] = digest.hexdigest()
    return _DIGESTS[signature]


_DIGESTS: dict[tuple, str] = {}


def _stat_signature(path: Path) -> tuple[int, int, int, int]:
    status = path.stat()
    return status.st_size, status.st_mtime_ns, status.st_ino, status.st_ctime_ns


def shared_export(
    model: str,
    exporting: Callable[[], None] | None = None,
    precision: str = "fp32",
    quantising: Callable[[], None] | None = None,
) -> Path | None:
    """The folder of `model`'s ONNX export at `precision` in the cache, made now if missing or
    damaged.

    `exporting` is called before an export starts, `quantising` before an int8 quantisation. None
    when the model has no
    local folder to key the export by. Raises ModelError when the model cannot be exported, OSError
    when the cache cannot be written."""
    if precision not in PRECISIONS:
        raise OptionError(
            f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}", "precision"
        )
    folder = model_folder(model)
    if folder is None:
        return None
    name = (
        f"{folder_digest(folder)[:32]}-v{onnx_encoder.FORMAT_VERSION}"
        f"-r{onnx_encoder.EXPORT_REVISION}"
    )
    fp32 = cached_entry(
        cache_home() / EXPORTS_FOLDER / name,
        _FILES,
        lambda staging: apart(onnx_encoder.export_onnx, str(folder), staging),
        str(folder),
        exporting,
    )
    if precision == "fp32":
        return fp32
    if precision == openvino_encoding.BF16:  # the fp32 graph, run at bf16: nothing to quantise
        return cached_entry(
            cache_home() / EXPORTS_FOLDER / f"{name}-{precision}",
            _FILES,
            lambda staging: bf16_export(fp32, staging),
            str(fp32),
        )
    return cached_entry(
        cache_home() / EXPORTS_FOLDER / f"{name}-{precision}",
        _FILES,
        lambda staging: apart(quantisation.quantise_export, fp32, staging, precision),
        str(fp32),
        quantising,
    )


def bf16_export(fp32_folder: Path, out_dir: Path) -> Path:
    """Write to `out_dir` the bf16 export (openvino_encoding.py) of the fp32 export in
    `fp32_folder`: its files, linked where the file system allows, with the config's variant
    bf16."""
    fp32_folder, out_dir = Path(fp32_folder), Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in (onnx_encoder.MODEL_FILE, onnx_encoder.TOKENIZER_FILE):
            target = out_dir / name
            try:
                os.link(fp32_folder / name, target)
            except OSError:  # another file system, or links not allowed: a copy
                shutil.copyfile(fp32_folder / name, target)
        config = json.loads((fp32_folder / onnx_encoder.CONFIG_FILE).read_text(encoding="utf-8"))
        config["variant"] = openvino_encoding.BF16
        write_text(out_dir / onnx_encoder.CONFIG_FILE, json.dumps(config, indent=2), durable=False)
    except OSError as exc:
        raise ModelError(f"cannot write the bf16 export to {out_dir}: {exc}") from exc
    return out_dir


@dataclass(frozen=True)
class QueryExport:
    """What a build of a model exports for its queries, and its shared entry in the user cache."""

    kind: str  # "onnx" (an ONNX export) or "static" (a distilled table)
    entry: Path | None  # None where it cannot be shared (no model folder, a cache not writable)
    files: dict[str, dict] | None  # the entry's record (what a build checks linked files against)


def query_export(
    model: str,
    precision: str,
    exporting: Callable[[], None] | None = None,
    quantising: Callable[[], None] | None = None,
    distilling: Callable[[], None] | None = None,
) -> QueryExport:
    """The export a build of `model` at `precision` gives its index, from the user cache (made there
    once per model). A cache folder that cannot be written (read-only home, no space) is not an
    error of the build: the index then gets its own export (`export_into`), as when the model has
    no folder."""
    facts = model_facts(model)
    try:
        if facts.distilled_from is not None:
            entry = static_export(facts.distilled_from, distilling)
        else:
            entry = shared_export(model, exporting, precision, quantising)
    except OSError:
        entry = None
    return QueryExport(facts.export, entry, entry_files(entry) if entry is not None else None)


def export_into(
    model: str,
    precision: str,
    target: Path,
    staging: Path,
    exporting: Callable[[], None],
    quantising: Callable[[], None],
    distilling: Callable[[], None],
) -> None:
    """The export made into `target` (an index's own: the model has no folder to key a shared one
    by, or the user cache cannot be written); an int8 one goes through an fp32 one in `staging`,
    which the caller removes."""
    from .sentence_transformer import resolve_model_path

    source_model = model_facts(model).distilled_from
    if source_model is not None:
        distilling()
        static_encoder.distill(source_model, target)
        return
    exporting()
    if precision == "fp32":
        apart(onnx_encoder.export_onnx, resolve_model_path(model), target)
        return
    apart(onnx_encoder.export_onnx, resolve_model_path(model), staging)
    if precision == openvino_encoding.BF16:
        bf16_export(staging, target)
        return
    quantising()
    apart(quantisation.quantise_export, staging, target, precision)


def apart(make: Callable[..., Path], *args) -> Path:
    """`make(*args)` run in a child process of its own, which ends with it: an export or a
    quantisation loads the whole model (torch and ~0.4 GB of fp32 weights for the quality tier)
    and the memory it takes is not given back to the system, so a build that made it in its own
    process would encode every paper at ~2.2 GB instead of ~0.6 (docs/measured-encoding.md). Its
    error is raised here as the child raised it; a function a child cannot import by its name (a
    stand-in defined inside another), or called from a program a child cannot start again (read
    from standard input), runs here."""
    import sys

    if getattr(sys.modules.get(make.__module__), make.__qualname__, None) is not make:
        return make(*args)
    # A spawned child starts by running the parent's program again: a program read from standard
    # input (`python - < script.py`) cannot be, and the child would die before its work.
    program = getattr(sys.modules.get("__main__"), "__file__", None)
    if program is not None and not os.path.isfile(program):
        return make(*args)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(_made, make, *args).result()
        except BrokenProcessPool as exc:  # killed: out of memory, a signal
            raise ModelError(
                f"the process making the model's export for {args[0]} ended before it was done "
                "(out of memory?): free memory and build again"
            ) from exc


def _made(make: Callable[..., Path], *args) -> Path:
    """`make(*args)` in the child of `apart`, an unwritable cache raised as the OSError it is (a
    cause does not cross processes: cached_entry tells that case apart by it)."""
    try:
        return make(*args)
    except ModelError as error:
        if isinstance(error.__cause__, OSError):
            raise error.__cause__ from None
        raise


def static_export(source_model: str, distilling: Callable[[], None] | None = None) -> Path | None:
    """The folder of the static embeddings distilled from `source_model`, made now if missing or
    damaged.

    None when the model has no local folder to key them by; raises like `shared_export`."""
    folder = model_folder(source_model)
    if folder is None:
        return None
    entry = (
        cache_home()
        / STATIC_FOLDER
        / f"{folder_digest(folder)[:32]}-v{static_encoder.FORMAT_VERSION}"
    )
    return cached_entry(
        entry,
        static_encoder.FILES,
        lambda staging: static_encoder.distill(str(folder), staging),
        str(folder),
        distilling,
    )


def cached_entry(
    entry: Path,
    files: tuple[str, ...],
    make: Callable[[Path], object],
    source: str,
    starting: Callable[[], None] | None = None,
) -> Path:
    """`entry`, made by `make(staging folder)` unless it is intact (every one of `files` as its
    record says).

    The entry appears by rename, so concurrent builds never see half of one; a damaged entry is
    replaced. A ModelError caused by an OSError (the cache cannot be written) is raised as that
    OSError.
    """
    if _intact(entry, files):
        return entry
    if starting is not None:
        starting()
    entry.parent.mkdir(parents=True, exist_ok=True)
    _report_leftovers(entry.parent.parent)
    staging = staging_folder(entry.parent, ".export-")
    try:
        try:
            make(staging)
        except ModelError as error:
            if isinstance(error.__cause__, OSError):
                # the cache folder could not be written (the build falls back)
                raise error.__cause__ from None
            raise
        record = {
            name: {"bytes": (staging / name).stat().st_size, "sha256": file_digest(staging / name)}
            for name in files
        }
        with open_exclusive(staging / RECORD, "w") as stream:
            stream.write(json.dumps({"source": source, "files": record}, indent=2) + "\n")
        if entry.exists():  # damaged: moved aside first, since a folder is not replaced by rename
            remove_entry(entry)
        try:
            os.rename(staging, entry)
        except OSError:
            if not _intact(entry, files):  # another build's entry won the race only if it is whole
                raise
    finally:
        remove_entry(staging)
    return entry


def _report_leftovers(home: Path) -> None:
    """Remove what killed exports and unpackings left in the cache, and say so (a warning line)."""
    notice = leftovers_notice(remove_stale_leftovers(home), home)
    if notice:
        warnings.warn(notice, stacklevel=caller_stacklevel())


def entry_files(entry: Path) -> dict[str, dict]:
    """The entry's record: file name -> {"bytes", "sha256"} (what a build checks each linked file
    against)."""
    record = json.loads((entry / RECORD).read_text(encoding="utf-8"))
    return record["files"]


def _intact(entry: Path, files: tuple[str, ...] = _FILES) -> bool:
    """Every file of the entry is a plain file (never a link) matching its record, and nothing else
    is there."""
    try:
        if entry.is_symlink() or not (entry / RECORD).is_file() or (entry / RECORD).is_symlink():
            return False
        record = entry_files(entry)
        if set(record) != set(files) or {path.name for path in entry.iterdir()} != {*files, RECORD}:
            return False
        return all(
            (entry / name).lstat().st_size == expected["bytes"]
            and file_digest(entry / name) == expected["sha256"]
            for name, expected in record.items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
