"""Nothing of the user's is lost, nothing is written through a link; and the embedding cache shared
by every index.

Second-user cases run for real: a planting process runs as `nobody` (setpriv) in a shared folder
that both can write, the victim as this (root) user; each skips, with its reason, where the
machine does not allow it.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from corpus import PAPERS, write_corpus
from fakes import FakeEncoder
from recommender import build_index
from recommender.cli import main
from recommender.embed import export_cache, loading
from recommender.index import build
from recommender.index.layout import CACHE, COLUMN_MAX, FAISS, MANIFEST, QUERY_ENCODER, VECTORS
from recommender.index.stored import CHEAP_HASH_BYTES
from system import fill

TESTS = Path(__file__).resolve().parent
LAUNCHER = TESTS / "build_launcher.py"
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def run(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="papers")


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under `folder`: a file's bytes, a link's target, a folder as such."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_dir():
            found[name] = "folder"
        else:
            found[name] = path.read_bytes()
    return found


def write_tree(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def reseal(index_dir: Path, changed: dict | None = None) -> None:
    """Forge an index as a careful attacker would: the manifest rewritten (with `changed` fields, and
    every file's hash made anew) and CURRENT pointing at its new hash, so only content checks can tell."""
    version = index_dir / (index_dir / "CURRENT").read_text().split()[0]
    manifest = json.loads((version / MANIFEST).read_text())
    for name in manifest["files"]:
        data = (version / name).read_bytes()
        manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    for key, value in (changed or {}).items():
        if value is None:
            manifest.pop(key, None)
        else:
            manifest[key] = value
    (version / MANIFEST).write_text(json.dumps(manifest))
    digest = hashlib.sha256((version / MANIFEST).read_bytes()).hexdigest()
    (index_dir / "CURRENT").write_text(f"{version.name} {digest}\n")


def live_version(index_dir: Path) -> Path:
    return index_dir / (index_dir / "CURRENT").read_text().split()[0]


# ---------------------------------------------------------------- 1. a folder that is not an index

NOT_AN_INDEX = [
    # (what the user's folder holds, what the one line names)
    ({"v-final/thesis.tex": "\\chapter{One}", ".tmp-notes/todo.txt": "call"}, ".tmp-notes/, v-final/"),
    ({"notes.txt": "mine"}, "notes.txt"),
    # A manifest that does not list every file beside it is no record of ours.
    ({"v-1/manifest.json": '{"files": {}}', "v-1/thesis.tex": "x"}, "v-1/"),
    ({".lock": "", "draft.md": "# draft"}, "draft.md"),
]


@pytest.mark.parametrize("files, named", NOT_AN_INDEX, ids=[row[1] for row in NOT_AN_INDEX])
def test_a_folder_of_the_users_is_refused_and_left_as_it_was(workdir, fake_model, files, named):
    write_corpus(workdir / "in")
    mine = workdir / "mydocs"
    write_tree(mine, files)
    before = snapshot(mine)
    result = run("build", "in", "--index", "./mydocs")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", (
        f"Error: index mydocs is a folder of other files ({named}), not an index: nothing in it was changed; "
        "give a new or empty folder, or an index name\n"))
    assert snapshot(mine) == before


def test_an_empty_folder_becomes_an_index(workdir, fake_model):
    write_corpus(workdir / "in")
    (workdir / "fresh").mkdir()
    assert run("build", "in", "--index", "./fresh").exit_code == 0
    assert run("info", "--index", "./fresh", "--verify").exit_code == 0


def test_a_rebuild_removes_only_what_the_index_made(workdir, fake_model):
    write_corpus(workdir / "in")
    assert run("build", "in").exit_code == 0
    index_dir = workdir / "indexes/default"
    first = live_version(index_dir)
    mine = {"v-final/thesis.tex": "\\chapter{One}", ".tmp-notes/todo.txt": "call"}
    write_tree(index_dir, mine)
    # And a version of ours that someone has since put a file of theirs into: not ours alone any more.
    (first / "notes.txt").write_text("kept")
    assert run("build", "in").exit_code == 0
    assert run("build", "in").exit_code == 0
    assert {name: (index_dir / name).read_text() for name in mine} == mine
    assert (first / "notes.txt").read_text() == "kept"
    versions = sorted(p.name for p in index_dir.glob("v-*"))
    assert versions == sorted(["v-final", first.name, live_version(index_dir).name])


def test_a_killed_builds_folder_is_removed_by_the_next(workdir, fake_model):
    write_corpus(workdir / "in")
    env = dict(os.environ, PAPERS_TEST_POINT="after-files")
    killed = subprocess.run([sys.executable, str(LAUNCHER), "build", "in"], cwd=workdir, env=env, capture_output=True)
    assert killed.returncode == -9
    index_dir = workdir / "indexes/default"
    assert [p.name for p in index_dir.glob(".tmp-*")]  # left behind, with its mark
    assert run("build", "in").exit_code == 0
    assert not list(index_dir.glob(".tmp-*"))


# ---------------------------------------------------------------- 2. a model replaced in its folder


@pytest.fixture
def model_folder(tmp_path, monkeypatch):
    """A model folder whose files say the width of the (fake) model they hold; no ONNX export."""
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights of the first model")
    (folder / "width").write_text("256")
    monkeypatch.setattr(loading, "load_encoder", lambda model, device="auto": FakeEncoder(
        name=model, dimension=int((Path(model) / "width").read_text())))
    monkeypatch.setattr(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None)
    return folder


def test_a_model_replaced_in_the_same_folder_is_a_new_model(workdir, model_folder):
    write_corpus(workdir / "in")
    first = run("build", "in", "--model", str(model_folder))
    assert first.stdout.endswith("encoded 6, reused 0 from the cache (flat search)\n")
    (model_folder / "model.safetensors").write_bytes(b"weights of another, narrower model")
    (model_folder / "width").write_text("128")
    # Before the rebuild, a lookup that names the model refuses the index of the model that was there.
    refused = run("search", "private training", "--model", str(model_folder))
    assert (refused.exit_code, refused.stderr) == (1, (
        f"Error: index indexes/default was built with the model that was in '{model_folder}', and that folder "
        f"holds another model now: run `papers build --model {model_folder}` to rebuild it\n"))
    again = run("build", "in", "--model", str(model_folder))
    assert again.stdout.endswith("encoded 6, reused 0 from the cache (flat search)\n")
    info = json.loads(run("info", "--format", "json").stdout)
    assert info["dimension"] == 128
    # The same files again: everything reused.
    assert run("build", "in", "--model", str(model_folder)).stdout.endswith("encoded 0, reused 6 from the cache (flat search)\n")


# ---------------------------------------------------------------- 3. reuse is checked against its record


@pytest.fixture
def onnx_exports(tmp_path, monkeypatch):
    """The real export plumbing (shared cache, links, checks) with a stand-in for torch's export and the
    fake encoder behind it; counts the exports."""
    from recommender.embed import onnx_encoder
    from recommender.query import paper_index as query

    calls = []

    def export(source, out_dir):
        calls.append(source)
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "model.onnx").write_bytes(onnx_bytes((Path(source) / "model.safetensors").read_bytes()))
        (out_dir / "tokenizer.json").write_text("{}")
        (out_dir / "onnx_encoder.json").write_text(json.dumps({"format_version": 1}))
        return out_dir

    encoder = FakeEncoder()
    monkeypatch.setenv("PAPERS_CACHE", str(tmp_path / "own-cache"))  # exports of these stand-in models of its own
    monkeypatch.setattr(onnx_encoder, "export_onnx", export)
    monkeypatch.setattr(loading, "load_onnx_encoder", lambda folder, model, threads=None: encoder)
    monkeypatch.setattr(loading, "load_encoder", lambda model, device="auto": encoder)
    monkeypatch.setattr(query, "load_query_encoder", lambda stored, model: encoder)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights-1")
    return model, calls


def onnx_bytes(weights: bytes) -> bytes:
    """The stand-in export of `weights`: larger than the bytes every open hashes (stored.CHEAP_HASH_BYTES), as
    a real model.onnx (90 MB) is, so only a check of what is reused can see its damage."""
    return b"onnx:" + weights + b"\0" * (CHEAP_HASH_BYTES + 1)


def index_export(name: str = "default") -> bytes:
    return (live_version(Path("indexes") / name) / QUERY_ENCODER / "model.onnx").read_bytes()


DAMAGE = [
    # (how the index's ONNX export is damaged; whether the shared copy, a hard link of it, is damaged too)
    ("flipped in place", True),
    ("replaced by a damaged copy", False),
    ("replaced by a link", False),
]


@pytest.mark.parametrize("damage, shared_too", DAMAGE, ids=[row[0] for row in DAMAGE])
def test_a_damaged_export_is_never_carried_into_the_new_version(workdir, onnx_exports, damage, shared_too):
    model, calls = onnx_exports
    write_corpus(workdir / "in")
    assert run("build", "in", "--model", str(model)).exit_code == 0
    target = live_version(workdir / "indexes/default") / QUERY_ENCODER / "model.onnx"
    if damage == "flipped in place":
        with open(target, "r+b") as handle:
            handle.write(b"X")
    elif damage == "replaced by a damaged copy":
        target.unlink()
        target.write_bytes(onnx_bytes(b"weights-X"))
    else:
        (workdir / "elsewhere.onnx").write_bytes(onnx_bytes(b"weights-1"))
        target.unlink()
        target.symlink_to(workdir / "elsewhere.onnx")
    assert run("info", "--verify").exit_code == 1  # the damage is seen
    rebuilt = run("build", "in", "--model", str(model))
    assert rebuilt.exit_code == 0
    assert run("info", "--verify").exit_code == 0
    assert index_export() == onnx_bytes(b"weights-1")
    assert not (live_version(workdir / "indexes/default") / QUERY_ENCODER / "model.onnx").is_symlink()
    assert len(calls) == (2 if shared_too else 1)  # a damaged shared copy is exported again


def test_a_model_edited_in_its_folder_gets_its_export_not_the_previous_builds(workdir, onnx_exports):
    model, calls = onnx_exports
    write_corpus(workdir / "in")
    assert run("build", "in", "--model", str(model)).exit_code == 0
    (model / "model.safetensors").write_bytes(b"weights-2")
    assert run("build", "in", "--model", str(model)).exit_code == 0
    assert index_export() == onnx_bytes(b"weights-2")


def test_a_link_planted_in_the_shared_export_is_not_linked_into_an_index(workdir, onnx_exports):
    model, calls = onnx_exports
    write_corpus(workdir / "in")
    assert run("build", "in", "--model", str(model), "--index", "a").exit_code == 0
    entry = next((export_cache.cache_home() / "onnx").iterdir())
    (workdir / "same-bytes.onnx").write_bytes((entry / "model.onnx").read_bytes())
    (entry / "model.onnx").unlink()
    (entry / "model.onnx").symlink_to(workdir / "same-bytes.onnx")
    assert run("build", "in", "--model", str(model), "--index", "b").exit_code == 0
    exported = live_version(workdir / "indexes/b") / QUERY_ENCODER / "model.onnx"
    assert not exported.is_symlink() and exported.read_bytes() == onnx_bytes(b"weights-1")
    assert len(calls) == 2  # the entry holding a link was made anew
    assert not (entry / "model.onnx").is_symlink()


# ---------------------------------------------------------------- 4. evaluate's index


def test_evaluate_never_replaces_an_index_it_did_not_build(workdir, fake_model):
    write_corpus(workdir / "in")
    assert run("build", "in", "--index", "mine").exit_code == 0
    before = snapshot(workdir / "indexes/mine")
    write_corpus(workdir, [{"id": "q", "abstract": "Sparse attention."}, {"id": "a", "abstract": "Dense attention."}],
                 "corpus.jsonl")
    (workdir / "queries.tsv").write_text("query_id\tpaper_id\tfacet\nq1\tq\tmethod\n")
    (workdir / "qrels.txt").write_text("q1 0 a 2\n")
    result = run("evaluate", "--corpus", "corpus.jsonl", "--queries", "queries.tsv", "--qrels", "qrels.txt",
                 "--index", "mine")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", (
        "Error: index mine is an index of 6 other papers that evaluate did not "
        "build: it is left as it is; leave the index out (eval-corpus) or give a new name\n"))
    assert snapshot(workdir / "indexes/mine") == before
    # Its own index it rebuilds and reuses as before.
    args = ["evaluate", "--corpus", "corpus.jsonl", "--queries", "queries.tsv", "--qrels", "qrels.txt", "--index", "ev"]
    assert run(*args).exit_code == 0
    (workdir / "corpus.jsonl").write_text((workdir / "corpus.jsonl").read_text() + '{"id": "b", "abstract": "More."}\n')
    assert run(*args).exit_code == 0


# ---------------------------------------------------------------- 5. never through a link: a second user


def _why_a_second_user_cannot_be_tested() -> str | None:
    if os.geteuid() != 0:
        return "dropping to another user needs root"
    if shutil.which("setpriv") is None:
        return "setpriv is not installed"
    probe = subprocess.run([*AS_NOBODY, sys.executable, "-c", "import os; print(os.getuid())"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() == "0":
        return f"cannot run python as nobody here: {probe.stderr.strip()[-200:]}"
    return None


@pytest.fixture
def shared_folder():
    """A project folder both users can write (mode 0777, no sticky bit: links in it are followed)."""
    reason = _why_a_second_user_cannot_be_tested()
    if reason:
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="papers-shared-", dir="/tmp"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_nobody(script: str) -> None:
    """Run a Python script as the second user (uid nobody)."""
    done = subprocess.run([*AS_NOBODY, sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def victim(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """`papers ARGS` as this (the first) user, a real process with the fake model."""
    env = dict(os.environ, PAPERS_TEST_POINT="")
    env.pop("PAPERS_INDEX", None)
    return subprocess.run([sys.executable, str(LAUNCHER), *args], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=300)


def next_pids(count: int = 400) -> range:
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    return range(last + 1, last + 1 + count)


# Links the second user plants, by the names the tool used for its temporary files (PID-derived).
PLANTED_OUT = [
    (["related-work", "--all"], "handout.md", ".handout.partial-{pid}.md"),
    (["sessions", "--n", "2"], "plan.md", ".plan.partial-{pid}.md"),
    (["map", "--n", "2"], "map.html", ".map.partial-{pid}.html"),
]


@pytest.mark.parametrize("args, out, planted", PLANTED_OUT, ids=[row[1] for row in PLANTED_OUT])
def test_out_in_a_shared_folder_never_writes_through_a_planted_link(workdir, shared_folder, args, out, planted):
    write_corpus(workdir / "in")
    assert victim(workdir, "build", "in").returncode == 0
    secret = workdir / "thesis.tex"
    secret.write_text("the first user's thesis")
    secret.chmod(0o644)
    names = [planted.format(pid=pid) for pid in next_pids()]
    as_nobody(f"import os\nfor name in {names!r}:\n    os.symlink({str(secret)!r}, os.path.join({str(shared_folder)!r}, name))\n")
    result = victim(workdir, *args, "--out", str(shared_folder / out))
    assert result.returncode == 0, result.stderr
    assert secret.read_text() == "the first user's thesis"
    assert (shared_folder / out).is_file() and not (shared_folder / out).is_symlink()


def test_out_replaces_a_link_planted_at_its_name_instead_of_writing_through_it(workdir, shared_folder):
    write_corpus(workdir / "in")
    assert victim(workdir, "build", "in").returncode == 0
    secret = workdir / "thesis.tex"
    secret.write_text("the first user's thesis")
    as_nobody(f"import os\nos.symlink({str(secret)!r}, {str(shared_folder / 'handout.md')!r})\n")
    assert victim(workdir, "related-work", "--all", "--out", str(shared_folder / "handout.md")).returncode == 0
    assert secret.read_text() == "the first user's thesis"
    assert not (shared_folder / "handout.md").is_symlink()


# Links (or files) the second user plants in a shared index folder before the first user's rebuild.
PLANTED_IN_INDEX = [
    # (name planted, what, the one line or None when the build goes on without it)
    (".lock", "link", "Error: cannot use index {index}: {index}/.lock is a symbolic link, which is never followed: "
                      "remove it, or choose another index\n"),
    (".lock", "file", "Error: cannot use index {index}: {index}/.lock is not a plain file of this user "
                      "(planted by someone else?): remove it, or choose another index\n"),
    ("cache.sqlite", "link", None),
    (".CURRENT.tmp-{pid}", "links", None),
]


@pytest.mark.parametrize("name, kind, message", PLANTED_IN_INDEX, ids=[f"{row[0]}-{row[1]}" for row in PLANTED_IN_INDEX])
def test_a_shared_index_folder_never_follows_a_planted_link(workdir, shared_folder, name, kind, message):
    write_corpus(workdir / "in")
    index = shared_folder / "idx"
    assert victim(workdir, "build", "in", "--index", str(index)).returncode == 0
    index.chmod(0o777)
    (index / ".lock").chmod(0o666)
    secret = workdir / "private.db"
    secret.write_bytes(b"")  # an empty file: SQLite would happily make it a database
    secret.chmod(0o666)
    before = snapshot(live_version(index))
    if kind == "link":
        as_nobody(f"import os\np = {str(index / name)!r}\nos.path.lexists(p) and os.unlink(p)\nos.symlink({str(secret)!r}, p)\n")
    elif kind == "file":
        as_nobody(f"import os\np = {str(index / name)!r}\nos.unlink(p)\nopen(p, 'w').close()\n")
    else:
        names = [name.format(pid=pid) for pid in next_pids()]
        as_nobody(f"import os\nfor n in {names!r}:\n    os.symlink({str(secret)!r}, os.path.join({str(index)!r}, n))\n")
    result = victim(workdir, "build", "in", "--index", str(index))
    assert secret.read_bytes() == b""
    if message is not None:
        assert (result.returncode, result.stdout, result.stderr) == (1, "", message.format(index=index))
        assert snapshot(live_version(index)) == before
    else:
        assert result.returncode == 0, result.stderr
        assert victim(workdir, "info", "--index", str(index), "--verify").returncode == 0


# ---------------------------------------------------------------- 14. forged and damaged records


def cache_file() -> Path:
    return export_cache.embedding_cache_path()


def test_a_cache_row_of_another_dimension_is_encoded_again(workdir, fake_model):
    write_corpus(workdir / "in")
    assert run("build", "in").exit_code == 0
    before = np.load(live_version(workdir / "indexes/default") / VECTORS)
    forged = np.ones(3, dtype=np.float32).tobytes()
    with contextlib.closing(sqlite3.connect(cache_file())) as db, db:
        key = db.execute("SELECT key FROM vectors ORDER BY key LIMIT 1 OFFSET 2").fetchone()[0]
        db.execute("UPDATE vectors SET dimension = 3, vector = ?, checksum = ? WHERE key = ?",
                   (forged, zlib.crc32(forged), key))
    result = run("build", "in")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.endswith("encoded 1, reused 5 from the cache (flat search)\n")
    assert np.array_equal(np.load(live_version(workdir / "indexes/default") / VECTORS), before)


FORGED = [
    # (what is forged, the command, the one line)
    ("no model", {"model": None}, ["info"], "names no model"),
    ("model of another type", {"model": 7}, ["search", "private training"], "names no model"),
    ("no dimension", {"dimension": None}, ["like", "dp1"], "has no valid dimension"),
    ("files not a list", {"files": "all of them"}, ["list"], "has no valid list of files"),
]


@pytest.mark.parametrize("what, changed, args, problem", FORGED, ids=[row[0] for row in FORGED])
def test_a_forged_manifest_is_one_line(workdir, fake_model, what, changed, args, problem):
    write_corpus(workdir / "in")
    assert run("build", "in").exit_code == 0
    index_dir = workdir / "indexes/default"
    reseal(index_dir)
    version = live_version(index_dir)
    manifest = json.loads((version / MANIFEST).read_text())
    for key, value in changed.items():
        if value is None:
            manifest.pop(key)
        else:
            manifest[key] = value
    (version / MANIFEST).write_text(json.dumps(manifest))
    digest = hashlib.sha256((version / MANIFEST).read_bytes()).hexdigest()
    (index_dir / "CURRENT").write_text(f"{version.name} {digest}\n")
    result = run(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", (
        f"Error: index file indexes/default/{version.name}/manifest.json {problem} (damaged or forged): "
        "run `papers build`\n"))


def test_an_ivf_index_whose_ids_are_out_of_range_is_one_line(workdir, fake_model):
    import faiss

    write_corpus(workdir / "in")
    assert run("build", "in", "--index-type", "ivf").exit_code == 0
    index_dir = workdir / "indexes/default"
    version = live_version(index_dir)
    index = faiss.read_index(str(version / FAISS))
    vectors = np.load(version / VECTORS)
    index.reset()
    index.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64) + 1000)  # as many vectors, forged ids
    faiss.write_index(index, str(version / FAISS))
    reseal(index_dir)
    for args in (["like", "dp1"], ["search", "private training"], ["related-work", "--all", "--out", "rw.md"]):
        result = run(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", (
            f"Error: index file indexes/default/{version.name}/faiss.index is damaged or forged (the search index "
            "gives paper numbers beyond its 6 vectors): run `papers build`\n")), args


# ---------------------------------------------------------------- 15, 16. odd usage, messages


def test_a_long_valid_out_name_is_written(built, workdir):
    name = "a" * 240 + ".md"  # 243 characters: the longest the folder's 255 allow, with room to spare
    result = built("related-work", "--all", "--out", name)
    assert result.exit_code == 0, result.stderr
    assert (workdir / name).read_text().startswith("#")
    assert not [p.name for p in workdir.iterdir() if "partial" in p.name]


INTERRUPTED = [
    # (command, what the Ctrl-C interrupts)
    (["related-work", "--all", "--out", "out.md"], "recommender.render.related.write_related"),
    (["map", "--n", "2", "--out", "out.html"], "recommender.reading.layout.build_map"),
    (["map", "--n", "2", "--out", "out.html"], "recommender.render.map.write_map"),
    (["sessions", "--n", "2", "--out", "out.md"], "recommender.reading.sessions.plan_sessions"),
]


@pytest.mark.parametrize("args, interrupted", INTERRUPTED, ids=[row[1].rsplit(".", 1)[1] for row in INTERRUPTED])
def test_ctrl_c_with_out_is_one_line_and_exit_130(built, workdir, monkeypatch, args, interrupted):
    module, name = interrupted.rsplit(".", 1)

    def stopped(*args, **kwargs):
        for argument in args:  # a part written first
            if hasattr(argument, "write"):
                argument.write(b"half" if "b" in getattr(argument, "mode", "") else "half")
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules[module] if module in sys.modules else __import__(module, fromlist=[name]),
                        name, stopped)
    (workdir / args[-1]).write_text("yesterday's")
    result = built(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (130, "", (
        f"interrupted: {args[-1]} was not written (an earlier file of that name is kept); run the same command again\n"))
    assert (workdir / args[-1]).read_text() == "yesterday's"
    assert not [p.name for p in workdir.iterdir() if "partial" in p.name]


def test_a_full_disk_names_the_out_file(small_disk, fake_model):
    write_corpus(small_disk / "in")
    assert run("build", "in").exit_code == 0
    fill(small_disk)
    result = run("related-work", "--all", "--out", "handout.md")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "Error: handout.md: No space left on device\n")
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "in", "indexes"]
    del result  # its traceback holds the opened index, whose mapped files would keep the disk busy
    gc.collect()


# ---------------------------------------------------------------- issue 23.4: one cache for the user


def test_a_second_index_over_overlapping_papers_encodes_only_the_new_ones(workdir, fake_model):
    write_corpus(workdir / "a")
    more = [{"id": f"new{i}", "title": f"New paper {i}", "abstract": f"Graphs number {i} and words{i}."}
            for i in range(3)]
    write_corpus(workdir / "b", PAPERS + more)
    assert run("build", "a", "--index", "first").stdout.endswith("encoded 6, reused 0 from the cache (flat search)\n")
    assert run("build", "b", "--index", "second").stdout.endswith("encoded 3, reused 6 from the cache (flat search)\n")
    assert (workdir / "indexes").exists() and not list((workdir / "indexes").rglob(CACHE))


def test_an_index_built_from_the_cache_is_identical_to_one_built_without(workdir, fake_model):
    write_corpus(workdir / "in")
    assert run("build", "in", "--index", "fresh").stdout.endswith("encoded 6, reused 0 from the cache (flat search)\n")
    assert run("build", "in", "--index", "cached").stdout.endswith("encoded 0, reused 6 from the cache (flat search)\n")
    fresh, cached = (snapshot(live_version(workdir / "indexes" / name)) for name in ("fresh", "cached"))
    manifests = [json.loads(files.pop(MANIFEST)) for files in (fresh, cached)]
    assert fresh == cached  # every stored file, byte for byte
    for manifest in manifests:
        for key in ("built_at", "encoded", "reused"):
            manifest.pop(key)
    assert manifests[0] == manifests[1]


def test_cache_info_and_clear(workdir, fake_model):
    write_corpus(workdir / "in")
    empty = json.loads(run("cache", "info", "--format", "json").stdout)
    assert {key: empty[key] for key in ("path", "bytes", "entries")} == {
        "path": str(cache_file()), "bytes": 0, "entries": 0}
    assert [kind["folder"] for kind in empty["kept"]] == ["onnx", "static", "models", "openvino"]
    assert not cache_file().exists()  # asking does not make one
    assert run("build", "in").exit_code == 0
    info = json.loads(run("cache", "info", "--format", "json").stdout)
    assert info["entries"] == 6 and info["bytes"] > 0 and info["path"] == str(cache_file())
    table = run("cache", "info").stdout
    assert table.splitlines()[0] == f"embedding cache: {cache_file()}" and "entries: 6 vectors" in table
    cleared = run("cache", "clear")
    assert cleared.exit_code == 0 and cleared.stdout.startswith(f"removed 6 vectors from the embedding cache {cache_file()}")
    assert json.loads(run("cache", "info", "--format", "json").stdout)["entries"] == 0
    assert run("build", "in").stdout.endswith("encoded 6, reused 0 from the cache (flat search)\n")
    assert run("info", "--verify").exit_code == 0


def test_a_per_index_cache_of_an_earlier_version_is_migrated(workdir, fake_model, monkeypatch):
    write_corpus(workdir / "in")
    # The earlier layout: vectors keyed by the model's name, in cache.sqlite of the index folder (fp32: it
    # predates precisions).
    monkeypatch.setattr(export_cache, "model_identity", lambda model: model)
    assert run("build", "in", "--precision", "fp32").exit_code == 0
    index_dir = workdir / "indexes/default"
    shutil.move(cache_file(), index_dir / CACHE)
    monkeypatch.setattr(export_cache, "model_identity", lambda model: f"fake:{model}")
    result = run("build", "in")
    assert result.stdout.endswith("encoded 0, reused 6 from the cache (flat search)\n")
    assert not (index_dir / CACHE).exists()
    assert json.loads(run("cache", "info", "--format", "json").stdout)["entries"] == 6


@pytest.mark.parametrize("held", ["the embedding cache", "a bare connection"])
def test_a_new_sqlite_file_waits_for_the_process_holding_its_write_lock(tmp_path, held):
    """While another connection holds a new SQLite file's write lock, SQLite refuses the switch to
    WAL at once ("database is locked"), without waiting out its busy timeout: two builds making the
    cache together failed so, 3 times in 800 races. The switch is asked again until the lock goes."""
    import threading

    from recommender import files
    from recommender.embed.embedding_cache import EmbeddingCache

    path = tmp_path / "embeddings.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, other.rollback)
    release.start()
    try:
        if held == "the embedding cache":
            with EmbeddingCache(tmp_path) as cache:
                mode = cache.connection.execute("PRAGMA journal_mode").fetchone()[0]
        else:
            connection = sqlite3.connect(path, timeout=5)
            try:
                files.switch_to_wal(connection, 5)
                mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
            finally:
                connection.close()
    finally:
        release.join()
        other.close()
    assert mode == "wal"


def test_concurrent_builds_of_two_indexes_share_the_cache(workdir, fake_model):
    write_corpus(workdir / "a")
    write_corpus(workdir / "b", PAPERS + [{"id": "x", "abstract": "Another paper on graphs."}])
    env = dict(os.environ, PAPERS_TEST_POINT="", PAPERS_TEST_ENCODE_SECONDS="0.2")
    builds = [subprocess.Popen([sys.executable, str(LAUNCHER), "build", source, "--index", source], cwd=workdir,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for source in ("a", "b")]
    outputs = [build_.communicate(timeout=300) for build_ in builds]
    assert [build_.returncode for build_ in builds] == [0, 0], outputs
    assert json.loads(run("cache", "info", "--format", "json").stdout)["entries"] == 7
    for name in ("a", "b"):
        assert run("info", "--index", name, "--verify").exit_code == 0
    assert run("build", "b", "--index", "c").stdout.endswith("encoded 0, reused 7 from the cache (flat search)\n")


@pytest.mark.model
def test_with_the_real_model_an_index_from_the_cache_is_identical(workdir):
    from conftest import SEEDS

    fresh = build_index([SEEDS], "fresh")
    cached = build_index([SEEDS], "cached")
    assert (fresh.encoded, cached.encoded, cached.reused) == (fresh.papers, 0, fresh.papers)
    first, second = (snapshot(live_version(workdir / "indexes" / name)) for name in ("fresh", "cached"))
    first.pop(MANIFEST), second.pop(MANIFEST)
    assert first == second


def test_an_array_header_claiming_more_than_its_file_is_damage_not_out_of_memory(workdir, fake_model):
    write_corpus(workdir / "in")
    assert run("build", "in").exit_code == 0
    index_dir = workdir / "indexes/default"
    version = live_version(index_dir)
    path = version / COLUMN_MAX
    data = path.read_bytes()
    header = data[:128].decode("latin-1")
    shape = header[header.index("'shape': (") + len("'shape': ("):].split(")")[0]
    forged = header.replace(f"'shape': ({shape})", "'shape': (400000000000,)").ljust(127) + "\n"
    path.write_bytes(forged[:128].encode("latin-1") + data[128:])
    reseal(index_dir)
    result = run("search", "private training", "--mode", "lexical")
    assert result.exit_code == 1 and "out of memory" not in result.stderr
    assert result.stderr.startswith(f"Error: index file indexes/default/{version.name}/{COLUMN_MAX} cannot be read (")
    assert len(result.stderr.splitlines()) == 1


# ---------------------------------------------------------------- recommender/files.py itself


def test_replacing_writes_whole_or_not_at_all(tmp_path):
    from recommender import files

    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with files.replacing(target) as handle:
            handle.write("half")
            raise RuntimeError("stopped")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    files.write_text(target, "new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    files.write_bytes(tmp_path / ("b" * 255), b"x")  # the longest name a folder allows
    assert (tmp_path / ("b" * 255)).read_bytes() == b"x"


@pytest.mark.parametrize("planted", ["link to a file", "dangling link", "file"])
def test_create_exclusive_never_opens_what_is_already_there(tmp_path, planted):
    from recommender import files

    victim_file = tmp_path / "victim"
    victim_file.write_text("mine")
    path = tmp_path / "new"
    if planted == "link to a file":
        path.symlink_to(victim_file)
    elif planted == "dangling link":
        path.symlink_to(tmp_path / "would-be-made")
    else:
        path.write_text("there")
    with pytest.raises(FileExistsError):
        files.create_exclusive(path)
    assert victim_file.read_text() == "mine" and not (tmp_path / "would-be-made").exists()


def test_open_lock_file_refuses_a_link(tmp_path):
    import errno

    from recommender import files

    (tmp_path / "target").write_text("")
    (tmp_path / ".lock").symlink_to(tmp_path / "target")
    with pytest.raises(OSError) as raised:
        files.open_lock_file(tmp_path / ".lock")
    assert raised.value.errno == errno.ELOOP
    with files.open_lock_file(tmp_path / "fresh.lock") as lock:
        assert lock.writable()


@pytest.mark.model
def test_a_model_folder_with_truncated_weights_is_called_damaged(workdir):
    from recommender.embed.sentence_transformer import DEFAULT_MODEL, resolve_model_path

    folder = workdir / "my-model"
    shutil.copytree(resolve_model_path(DEFAULT_MODEL), folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:4096])
    write_corpus(workdir / "in")
    result = run("build", "in", "--model", "./my-model", "--quiet")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: model './my-model' has a damaged weights file (")
    assert result.stderr.endswith("): copy or save the model folder again\n") and "memory" not in result.stderr
    assert not (workdir / "indexes" / "default").exists()
