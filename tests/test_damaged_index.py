"""Damaged or mismatched indexes are refused with the file named and the command to run.

The manifest holds the size and sha256 of every stored file, and CURRENT holds
the manifest's sha256. Loading checks all sizes and the hashes of the smallest files,
up to stored.CHEAP_HASH_BYTES in all; `papers info --verify` hashes everything.
"""

import ast
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from click.testing import CliRunner

from corpus import write_corpus
from fakes import FakeEncoder
import recommender
from recommender import PaperIndex, build_index
from recommender.embed import export_cache, loading
from recommender.index import build
from recommender.digests import file_digest
from recommender.index.layout import CURRENT, FORMAT_VERSION, MANIFEST, QUERY_ENCODER
from recommender.index.stored import CHEAP_HASH_BYTES
from recommender.cli import main

PACKAGE = Path(recommender.__file__).parent


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def pytest_generate_tests(metafunc):
    """`stored_file` runs over the manifest's file list of a freshly built fake-model index."""
    if "stored_file" in metafunc.fixturenames:
        # Its own cache folder: the fake's vectors must never reach the session's cache as the real model's.
        with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {"PAPERS_CACHE": str(Path(tmp) / "cache")}), \
                mock.patch.object(export_cache, "model_identity", lambda model: f"fake:{model}"), \
                mock.patch.object(loading, "load_encoder", lambda model: FakeEncoder()), \
                mock.patch.object(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None):
            build_index([write_corpus(Path(tmp) / "in")], index=Path(tmp) / "idx")
            with PaperIndex.open(Path(tmp) / "idx") as index:
                files = sorted(index.manifest["files"])
        metafunc.parametrize("stored_file", files)


@pytest.fixture
def live(workdir, fake_model) -> Path:
    """The live version folder of a freshly built index of the six-paper corpus."""
    build_index([write_corpus(workdir / "in")])
    return Path("indexes/default") / (Path("indexes/default/CURRENT").read_text().split()[0])


def flip_byte(path: Path, position: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    position = len(data) // 2 if position is None else position
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def reseal(live: Path, **changes) -> None:
    """Re-hash every file into the manifest (with `changes`) and the manifest into CURRENT:
    an index whose checksums all agree, whatever its content."""
    manifest = json.loads((live / MANIFEST).read_text())
    manifest.update(changes)
    manifest["files"] = {
        name: {"bytes": (live / name).stat().st_size, "sha256": file_digest(live / name)}
        for name in manifest["files"]
    }
    (live / MANIFEST).write_text(json.dumps(manifest))
    (live.parent / CURRENT).write_text(f"{live.name} {file_digest(live / MANIFEST)}\n")


REBUILD = "run `papers build`"


def test_the_manifest_lists_every_stored_file_with_size_and_hash(live):
    manifest = json.loads((live / MANIFEST).read_text())
    on_disk = sorted(p.relative_to(live).as_posix() for p in live.rglob("*") if p.is_file())
    assert sorted([*manifest["files"], MANIFEST]) == on_disk
    for name, entry in manifest["files"].items():
        assert entry == {"bytes": (live / name).stat().st_size,
                         "sha256": hashlib.sha256((live / name).read_bytes()).hexdigest()}
    assert (live.parent / CURRENT).read_text() == f"{live.name} {file_digest(live / MANIFEST)}\n"


def test_a_flipped_byte_in_any_stored_file_fails_verify(live, stored_file):
    flip_byte(live / stored_file)
    message = f"Error: index file {live / stored_file} does not match its checksum (altered or damaged): {REBUILD}\n"
    result = run("info", "--verify")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message)
    # Small files are hashed on every load too.
    assert run("like", "dp1").stderr == message
    # Building again repairs the index.
    assert run("build", "in/papers.jsonl").exit_code == 0
    assert run("info", "--verify").stdout.endswith("files match their checksums\n")


def test_a_flipped_byte_in_a_large_file_is_caught_by_verify_only(live, monkeypatch):
    # Files above CHEAP_HASH_BYTES are only size-checked when an index is opened.
    monkeypatch.setattr("recommender.index.stored.CHEAP_HASH_BYTES", 0)
    flip_byte(live / "vectors.npy", position=-3)
    assert run("info").exit_code == 0
    result = run("info", "--verify")
    assert (result.exit_code, result.stderr) == (
        1, f"Error: index file {live / 'vectors.npy'} does not match its checksum (altered or damaged): {REBUILD}\n")


def test_loading_hashes_the_smallest_files_within_the_budget(live, monkeypatch):
    sizes = {name: entry["bytes"] for name, entry in json.loads((live / MANIFEST).read_text())["files"].items()}
    largest, smallest = max(sizes, key=sizes.get), min(sizes, key=sizes.get)
    monkeypatch.setattr("recommender.index.stored.CHEAP_HASH_BYTES", sum(sizes.values()) - 1)
    flip_byte(live / largest)
    assert run("info").exit_code == 0  # not hashed on load: verify finds it
    assert run("info", "--verify").exit_code == 1
    flip_byte(live / largest)
    flip_byte(live / smallest)
    result = run("info")
    assert (result.exit_code, result.stderr) == (
        1, f"Error: index file {live / smallest} does not match its checksum (altered or damaged): {REBUILD}\n")


def test_a_truncated_file_fails_every_load(live, stored_file):
    path = live / stored_file
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])
    message = (f"Error: index file {path} is {size // 2} bytes, the manifest says {size} "
               f"(truncated or altered): {REBUILD}\n")
    for args in (["like", "dp1"], ["search", "video"], ["list"], ["show", "dp1"], ["info"], ["info", "--verify"]):
        result = run(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", message), args


def test_a_missing_file_fails_every_load(live, stored_file):
    (live / stored_file).unlink()
    result = run("like", "dp1")
    assert (result.exit_code, result.stderr) == (1, f"Error: index file {live / stored_file} is missing: {REBUILD}\n")


@pytest.mark.parametrize("damage, message", [
    (lambda live: reseal(live) or (live / MANIFEST).write_text(
        (live / MANIFEST).read_text().replace('"paper_count": 6', '"paper_count": 5')),
     "index file {live}/manifest.json does not match its checksum in CURRENT (altered or damaged): " + REBUILD),
    (lambda live: flip_byte(live / MANIFEST, position=0),
     "index file {live}/manifest.json is damaged: " + REBUILD),
    (lambda live: (live / MANIFEST).unlink(),
     "index indexes/default has no manifest in {name}: " + REBUILD),
    (lambda live: flip_byte(live.parent / CURRENT, position=0),
     "index file indexes/default/CURRENT is damaged: " + REBUILD),
    (lambda live: (live.parent / CURRENT).write_text("v-gone\n"),
     "index indexes/default has no manifest in v-gone: " + REBUILD),
], ids=["manifest edited", "manifest not JSON", "manifest missing", "CURRENT damaged", "CURRENT names no version"])
def test_a_damaged_manifest_or_pointer_is_refused(live, damage, message):
    damage(live)
    result = run("like", "dp1")
    assert (result.exit_code, result.stderr) == (1, "Error: " + message.format(live=live, name=live.name) + "\n")


@pytest.mark.parametrize("version, why", [
    (99, "(built by a newer papers: upgrade papers, or run `papers build` to rebuild it)"),
    (0, "(run `papers build` to rebuild it)"),
    (1, "(run `papers build` to rebuild it)"),  # before IDs and handles became sorted arrays
])
def test_another_format_version_is_refused_with_the_rebuild_command(live, version, why):
    reseal(live, format_version=version)
    result = run("like", "dp1")
    assert (result.exit_code, result.stderr) == (
        1, f"Error: index indexes/default has format version {version}, this papers reads version "
           f"{FORMAT_VERSION} {why}\n")


def test_an_index_built_with_another_model_is_refused_with_the_command_to_run(workdir, fake_model):
    write_corpus(workdir / "in")
    assert run("build", "in", "--index", "mine", "--model", "other-model").exit_code == 0
    assert run("like", "dp1", "--index", "mine").exit_code == 0
    assert run("like", "dp1", "--index", "mine", "--model", "other-model").exit_code == 0
    for args in (["like", "dp1"], ["search", "video"]):
        result = run(*args, "--index", "mine", "--model", "all-MiniLM-L6-v2")
        assert (result.exit_code, result.stderr) == (
            1, "Error: index indexes/mine was built with model 'other-model', not 'all-MiniLM-L6-v2': "
               "run `papers build --index mine --model all-MiniLM-L6-v2` to rebuild it\n")


def test_files_that_agree_with_the_manifest_but_not_each_other_are_refused(live):
    np.save(live / "vectors.npy", np.zeros((7, 256), dtype=np.float32))
    reseal(live)
    result = run("like", "dp1")
    assert (result.exit_code, result.stderr) == (
        1, f"Error: index file {live / 'vectors.npy'} has shape (7, 256): {REBUILD}\n")


class _Payload:
    """Unpickling this would create a file: proof that stored code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_loading_never_unpickles_stored_data(live, workdir):
    marker = workdir / "pwned"
    array = np.empty(7, dtype=object)
    array[:] = [_Payload(str(marker))] * 7
    np.save(live / "papers.offsets.npy", array, allow_pickle=True)
    reseal(live)
    for args in (["like", "dp1"], ["info", "--verify"], ["list"]):
        result = run(*args)
        assert (result.exit_code, result.stderr) == (
            1, f"Error: index file {live / 'papers.offsets.npy'} cannot be read "
               f"(Object arrays cannot be loaded when allow_pickle=False): {REBUILD}\n")
    assert not marker.exists()


def test_no_module_can_unpickle():
    forbidden = re.compile(r"\b(import (pickle|joblib|dill|cloudpickle|marshal|shelve)|from (pickle|joblib|dill|cloudpickle|shelve)\b"
                           r"|allow_pickle\s*=\s*True|torch\.load|read_pickle)")
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        assert not forbidden.search(source), f"{path.name}: {forbidden.search(source).group()}"
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("np.load", "numpy.load"):
                keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
                assert keywords.get("allow_pickle") == "False", f"{path.name}:{node.lineno}: {ast.unparse(node)}"


def test_a_damaged_embedding_cache_is_started_afresh(workdir, fake_model):
    write_corpus(workdir / "in")
    assert run("build", "in").exit_code == 0
    cache = export_cache.embedding_cache_path()
    cache.write_bytes(b"not a database" * 1000)
    result = run("build", "in")
    assert result.exit_code == 0
    assert result.stderr == (f"warning: embedding cache {cache} was damaged (file is not a database) "
                             "and is started afresh: every paper is encoded again\n")
    assert result.stdout == "indexed 6 papers in indexes/default: encoded 6, reused 0 from the cache (flat search)\n"
    assert run("build", "in").stdout.endswith("encoded 0, reused 6 from the cache (flat search)\n")
    assert run("info", "--verify").exit_code == 0


# ---------------------------------------------------------------- the ONNX query encoder (a real export)

QUERY_ENCODER_FILES = [f"{QUERY_ENCODER}/{name}" for name in ("model.onnx", "tokenizer.json", "onnx_encoder.json")]


@pytest.fixture(scope="module")
def real_index(tmp_path_factory):
    """An index of the six-paper corpus built with the packaged model, so with its ONNX query encoder."""
    folder = tmp_path_factory.mktemp("real")
    build_index([write_corpus(folder / "in")], index=folder / "indexes" / "default")
    return folder / "indexes" / "default"


@pytest.fixture
def real_live(real_index, workdir) -> Path:
    """A fresh copy of that index as indexes/default of the work folder; its live version folder."""
    import shutil

    shutil.copytree(real_index, workdir / "indexes" / "default")
    live = Path("indexes/default") / (Path("indexes/default/CURRENT").read_text().split()[0])
    manifest = json.loads((live / MANIFEST).read_text())
    assert set(QUERY_ENCODER_FILES) <= set(manifest["files"])  # the export is there and checksummed
    return live


@pytest.mark.model
@pytest.mark.parametrize("name", QUERY_ENCODER_FILES)
def test_a_damaged_query_encoder_is_refused(real_live, name):
    path = real_live / name
    assert run("search", "private training", "-k", "1").exit_code == 0
    flip_byte(path)
    verify = run("info", "--verify")
    message = f"Error: index file {path} does not match its checksum (altered or damaged): {REBUILD}\n"
    assert (verify.exit_code, verify.stdout, verify.stderr) == (1, "", message)
    if path.stat().st_size <= CHEAP_HASH_BYTES:  # small files are hashed on every load too
        assert run("search", "private training").stderr == message


@pytest.mark.model
@pytest.mark.parametrize("name", QUERY_ENCODER_FILES)
@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_truncated_or_missing_query_encoder_file_fails_every_load(real_live, name, damage):
    path = real_live / name
    size = path.stat().st_size
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[: size // 2])
        message = (f"Error: index file {path} is {size // 2} bytes, the manifest says {size} "
                   f"(truncated or altered): {REBUILD}\n")
    else:
        path.unlink()
        message = f"Error: index file {path} is missing: {REBUILD}\n"
    for args in (["search", "private training"], ["like", "dp1"], ["info", "--verify"]):
        result = run(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", message), args
