"""Reliability, round four: the user's files. Each case through a real `papers` process, in the
test's own folder (FIFOs and devices made there, never the real /dev)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
LAUNCHER = TESTS / "build_launcher.py"  # `papers` with the fake model (tests/fakes.py)


def papers(workdir: Path, *args: str, stdin: str | None = None, timeout: float = 120):
    """A real `papers` process in `workdir`, with the deterministic fake encoder."""
    return subprocess.run([sys.executable, str(LAUNCHER), *args], cwd=workdir, capture_output=True,
                          text=True, input=stdin, timeout=timeout, env=dict(os.environ))


def damaged_cache(path: Path) -> None:
    """A real SQLite embedding cache, its middle pages overwritten (a disk error, a bad copy)."""
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, dimension INTEGER, "
                           "vector BLOB, checksum INTEGER)")
        connection.execute("CREATE TABLE state (name TEXT PRIMARY KEY, value TEXT)")
        connection.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)",
                               [(f"key{i}", 4, bytes([i % 256]) * 1600, 0) for i in range(2000)])
    connection.close()
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.seek(size // 2)
        handle.write(b"\xa5" * 200_000)


# ---------------------------------------------------------------- the embedding cache


def test_cache_clear_on_a_damaged_cache_says_so_in_one_line(workdir, own_embedding_cache):
    damaged_cache(own_embedding_cache / "embeddings.sqlite")
    cleared = papers(workdir, "cache", "clear")
    assert cleared.returncode == 0, cleared.stderr
    assert "Traceback" not in cleared.stderr and cleared.stderr == ""
    cache = own_embedding_cache / "embeddings.sqlite"
    assert cleared.stdout.startswith(f"the embedding cache {cache} was damaged (")
    assert len(cleared.stdout.splitlines()) == 1
    info = papers(workdir, "cache", "info", "--format", "json")
    assert info.returncode == 0 and '"entries": 0' in info.stdout


def test_cache_info_lists_what_else_the_cache_folder_keeps(workdir, tmp_path, monkeypatch):
    home = tmp_path / "cache"
    monkeypatch.setenv("PAPERS_CACHE", str(home))
    export = home / "onnx" / "abc-v1-r2"
    export.mkdir(parents=True)
    (export / "model.onnx").write_bytes(b"m" * 1000)
    (home / "onnx" / "abc-v1-r2-bf16").mkdir()
    os.link(export / "model.onnx", home / "onnx" / "abc-v1-r2-bf16" / "model.onnx")  # once
    staging = home / "onnx" / ".export-123"  # not an entry; its bytes are on the disk all the same
    staging.mkdir()
    (staging / "model.onnx").write_bytes(b"s" * 100)
    (home / "openvino").mkdir()
    (home / "openvino" / "k.blob").write_bytes(b"b" * 500)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"o" * 10_000)
    (home / "openvino" / "linked.blob").symlink_to(outside)  # a link: an entry of 0 bytes
    info = json.loads(papers(workdir, "cache", "info", "--format", "json").stdout)
    kept = {kind["folder"]: (kind["entries"], kind["bytes"], kind["path"]) for kind in info["kept"]}
    assert info["folder"] == str(home)
    assert kept == {
        "onnx": (2, 1100, str(home / "onnx")),
        "static": (0, 0, str(home / "static")),
        "models": (0, 0, str(home / "models")),
        "openvino": (2, 500, str(home / "openvino")),
    }
    assert not (home / "static").exists()  # asking makes nothing
    table = papers(workdir, "cache", "info").stdout.splitlines()
    assert table[3] == f"also kept in {home} (each made again when needed):"
    assert table[4:] == [
        "  onnx/        2     1.1 KB  model exports (ONNX)",
        "  static/      0        0 B  static tier tables",
        "  models/      0        0 B  models unpacked from their parts",
        "  openvino/    2      500 B  compiled models (OpenVINO)",
    ]


def test_cache_info_on_a_damaged_cache_has_no_traceback(workdir, own_embedding_cache):
    damaged_cache(own_embedding_cache / "embeddings.sqlite")
    info = papers(workdir, "cache", "info")
    assert info.returncode == 0 and "Traceback" not in info.stderr
    assert len(info.stderr.splitlines()) <= 1
    cache = own_embedding_cache / "embeddings.sqlite"
    assert info.stdout.startswith(f"embedding cache: {cache}\nsize: ")


# ---------------------------------------------------------------- indexes rm


@pytest.fixture
def real_index(workdir):
    """An index on "another disk" (a folder outside the home), built by a real process."""
    from corpus import write_corpus

    write_corpus(workdir / "in")
    built = papers(workdir, "build", "in", "--index", str(workdir / "disk" / "real"))
    assert built.returncode == 0, built.stderr
    return workdir / "disk" / "real"


def tree(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*"))


def add_tags(index_dir: Path) -> None:
    with sqlite3.connect(index_dir / "tags.sqlite") as connection:  # as `papers serve` makes it
        connection.execute("CREATE TABLE tags (paper TEXT, tag TEXT)")
        connection.execute("INSERT INTO tags VALUES ('dp1', 'to-read')")
    connection.close()


def test_rm_of_a_linked_index_removes_the_link_only(workdir, real_index):
    (workdir / "indexes").mkdir()
    (workdir / "indexes" / "alias").symlink_to(real_index)
    before = tree(real_index)
    # The link works for every command.
    assert papers(workdir, "info", "--index", "alias").returncode == 0
    removed = papers(workdir, "indexes", "rm", "alias")
    assert (removed.returncode, removed.stderr) == (
        0, f"removed the link indexes/alias; the index it points to ({real_index}) is kept "
           "(give its path to remove it)\n")
    assert not (workdir / "indexes" / "alias").is_symlink()
    assert tree(real_index) == before
    assert papers(workdir, "info", "--index", str(real_index)).returncode == 0


def test_rm_dot_inside_an_index_removes_nothing(workdir, real_index):
    before = tree(real_index)
    for given in (".", "./", "v-x/.."):
        refused = papers(real_index, "indexes", "rm", given)
        assert (refused.returncode, refused.stderr) == (
            2, f"Error: refusing to remove '{given}': give the index's name, "
               "or its path from outside it\n")
        assert tree(real_index) == before


def test_rm_keeps_the_users_tags_unless_asked(workdir, real_index):
    add_tags(real_index)
    removed = papers(workdir, "indexes", "rm", str(real_index))
    assert (removed.returncode, removed.stderr) == (
        0, f"removed index {real_index} ({real_index}); "
           f"kept its tags ({real_index / 'tags.sqlite'}): "
           "add --with-tags to remove them\n")
    assert tree(real_index) == ["tags.sqlite"]
    with sqlite3.connect(real_index / "tags.sqlite") as connection:
        assert connection.execute("SELECT tag FROM tags").fetchall() == [("to-read",)]
    connection.close()
    # A rebuild under the same name finds them again; asked for, they go with the index.
    assert papers(workdir, "build", "in", "--index", str(real_index)).returncode == 0
    assert "tags.sqlite" in tree(real_index)
    removed = papers(workdir, "indexes", "rm", str(real_index), "--with-tags")
    assert removed.returncode == 0
    assert removed.stderr == f"removed index {real_index} ({real_index})\n"
    assert not real_index.exists()


def test_rm_with_tags_removes_the_tags_an_earlier_rm_kept(workdir, real_index):
    add_tags(real_index)
    assert papers(workdir, "indexes", "rm", str(real_index)).returncode == 0
    removed = papers(workdir, "indexes", "rm", str(real_index), "--with-tags")
    assert removed.returncode == 0
    assert removed.stderr == f"removed index {real_index} ({real_index})\n"
    assert not real_index.exists()


@pytest.mark.parametrize("answer", ["y", "n"])
def test_rm_on_a_terminal_asks_about_the_tags(workdir, real_index, answer):
    import pty

    add_tags(real_index)
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, str(LAUNCHER), "indexes", "rm", str(real_index)],
                               cwd=workdir, stdin=terminal, stdout=subprocess.DEVNULL,
                               stderr=terminal)
    os.close(terminal)
    seen = b""
    while b"remove them too?" not in seen:
        seen += os.read(controller, 1024)
    os.write(controller, answer.encode() + b"\n")
    assert process.wait(timeout=60) == 0
    with contextlib.suppress(OSError):  # EIO once the process's end of the terminal is closed
        while chunk := os.read(controller, 1024):
            seen += chunk
    os.close(controller)
    question = f"index {real_index} has tags ({real_index / 'tags.sqlite'}): remove them too? [y/N]"
    assert question in seen.decode()
    assert real_index.exists() == (answer == "n")


# ---------------------------------------------------------------- --out onto what is not a file


@pytest.fixture(scope="module")
def built_home(tmp_path_factory):
    """A folder holding an index of the six-paper corpus, built once by a real process."""
    from corpus import write_corpus

    folder = tmp_path_factory.mktemp("out-targets")
    write_corpus(folder / "in")
    built = papers(folder, "build", "in")
    assert built.returncode == 0, built.stderr
    return folder


OUT_COMMANDS = [["sessions", "--n", "2"], ["related-work", "--all", "-k", "2"]]


def expected_output(folder: Path, command: list[str]) -> str:
    plain = papers(folder, *command)
    assert plain.returncode == 0, plain.stderr
    return plain.stdout


def read_in_background(opener) -> tuple[threading.Thread, list[bytes]]:
    received: list[bytes] = []

    def read() -> None:
        with opener() as stream:
            received.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, received


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=["sessions", "related-work"])
def test_out_dash_is_standard_output(built_home, command):
    written = papers(built_home, *command, "--out", "-")
    assert (written.returncode, written.stderr) == (0, "")
    assert written.stdout == expected_output(built_home, command)
    assert not (built_home / "-").exists()


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=["sessions", "related-work"])
def test_out_onto_a_fifo_writes_into_it(built_home, tmp_path, command):
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    reader, received = read_in_background(lambda: open(fifo, "rb"))
    written = papers(built_home, *command, "--out", str(fifo))
    reader.join(timeout=60)
    assert written.returncode == 0, written.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO, not a file put in its place
    assert received == [expected_output(built_home, command).encode()]
    assert os.listdir(tmp_path) == ["plan.fifo"]  # no temporary file left beside it


def test_out_onto_a_character_device_writes_into_it(built_home, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a device node (mknod) needs root")
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the null device, in the test's folder
    written = papers(built_home, "sessions", "--n", "2", "--out", str(null))
    assert written.returncode == 0, written.stderr
    status = os.lstat(null)
    assert stat.S_ISCHR(status.st_mode) and status.st_rdev == os.makedev(1, 3)
    assert os.listdir(tmp_path) == ["null"]


def test_out_onto_a_socket_writes_into_it(built_home, tmp_path):
    path = tmp_path / "plan.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    @contextlib.contextmanager
    def accepted():
        connection, _ = listener.accept()
        with connection, connection.makefile("rb") as stream:
            yield stream

    with listener:
        reader, received = read_in_background(accepted)
        written = papers(built_home, "sessions", "--n", "2", "--out", str(path))
        reader.join(timeout=60)
    assert written.returncode == 0, written.stderr
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    assert received == [expected_output(built_home, ["sessions", "--n", "2"]).encode()]


def test_out_onto_a_link_to_the_processs_standard_output(built_home, tmp_path):
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    written = papers(built_home, "sessions", "--n", "2", "--out", str(link))
    assert written.returncode == 0, written.stderr
    assert written.stdout == expected_output(built_home, ["sessions", "--n", "2"])
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert os.listdir(tmp_path) == ["stdout"]


# ---------------------------------------------------------------- leftovers in the user cache

# An export that stops part-way (`make` writes a file, says where, then waits to be killed).
STOPPING_EXPORT = """
import sys, time
from pathlib import Path
from recommender.embed import export_cache

def make(staging):
    (staging / "model.onnx").write_bytes(b"x" * 1_000_000)
    print(staging, flush=True)
    time.sleep(600)

export_cache.cached_entry(Path(sys.argv[1]) / "static" / "entry", ("model.onnx",), make, "source")
"""

# The next export of another model, which finishes.
NEXT_EXPORT = """
import sys
from pathlib import Path
from recommender.embed import export_cache

export_cache.cached_entry(Path(sys.argv[1]) / "static" / "other", ("model.onnx",),
                          lambda staging: (staging / "model.onnx").write_bytes(b"y"), "source")
"""


def stopping_export(cache: Path) -> tuple[subprocess.Popen, Path]:
    process = subprocess.Popen([sys.executable, "-c", STOPPING_EXPORT, str(cache)],
                               stdout=subprocess.PIPE, text=True)
    staging = Path(process.stdout.readline().strip())
    assert staging.name.startswith(".export-") and (staging / "model.onnx").is_file()
    return process, staging


@pytest.mark.parametrize("next_run", ["cache info", "cache clear", "an export"])
def test_leftovers_of_killed_exports_are_removed_by_the_next_run_never_a_live_ones(
        workdir, own_embedding_cache, next_run):
    # The live one first: an export's start removes leftovers too.
    live, working = stopping_export(own_embedding_cache)
    killed, left = stopping_export(own_embedding_cache)
    killed.kill()
    killed.wait()
    killed.stdout.close()
    try:
        if next_run == "an export":
            result = subprocess.run(
                [sys.executable, "-W", "always", "-c", NEXT_EXPORT, str(own_embedding_cache)],
                capture_output=True, text=True, timeout=120)
        else:
            result = papers(workdir, *next_run.split())
        assert result.returncode == 0, result.stderr
        assert ("removed 1 folder (1.0 MB) that interrupted model exports or unpackings left "
                f"in the cache folder {own_embedding_cache}") in result.stderr
        assert not left.exists()
        assert (working / "model.onnx").is_file()  # its owner is still at work
    finally:
        live.kill()
        live.wait()
        live.stdout.close()


def test_unowned_leftovers_are_removed_once_untouched_for_an_hour(workdir, own_embedding_cache):
    old = own_embedding_cache / "models" / ".unpack-quality-abc123"
    recent = own_embedding_cache / "static" / ".export-x1"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "archive.zip").write_bytes(b"z" * 1000)
    for path in (old / "archive.zip", old):
        os.utime(path, (0, 0))  # made by a version of papers before owners were recorded, long ago
    info = papers(workdir, "cache", "info")
    assert info.returncode == 0 and "removed 1 folder (0.0 MB)" in info.stderr
    assert not old.exists() and recent.exists()
    assert papers(workdir, "cache", "info").stderr == ""  # reported once


# ---------------------------------------------------------------- readers across mv and rm

# A reader that opens the index, says so, waits for a line on stdin, then reads every paper's
# related work (papers.jsonl, vectors, the TF-IDF arrays: files it had not read yet).
READER = """
import json, sys
sys.path.insert(0, sys.argv[2])
from fakes import FakeEncoder
from recommender import PaperIndex, related_work, select_rows
from recommender.query import paper_index as query

query.load_query_encoder = lambda stored, model: FakeEncoder(name=model)
with PaperIndex.open(sys.argv[1]) as index:
    print("open", flush=True)
    sys.stdin.readline()
    lists = related_work(index, select_rows(index, [], all_papers=True), k=2)
    print(json.dumps([[item.paper.id, [r.paper.id for r in item.related]] for item in lists]),
          flush=True)
    print(index.search("private training").__len__(), flush=True)
"""


def reader(index: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", READER, str(index), str(TESTS)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "open\n"
    return process


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate("go\n", timeout=120)
    return process.returncode, out, err


@pytest.mark.parametrize("change", ["mv", "rm"])
def test_a_reader_keeps_reading_the_version_it_opened(workdir, real_index, change):
    if change == "rm":  # an index of the home folder, where `papers indexes` looks
        assert papers(workdir, "build", "in", "--index", "gone").returncode == 0
        real_index = workdir / "indexes" / "gone"
    expected = finish(reader(real_index))
    assert expected[0] == 0, expected[2]
    opened = reader(real_index)
    moved = str(workdir / "moved")
    args = ["mv", str(real_index), moved] if change == "mv" else ["rm", str(real_index)]
    changed = papers(workdir, "indexes", *args)
    assert changed.returncode == 0, changed.stderr
    assert finish(opened) == expected
    if change == "rm":  # the version it held, set aside while it read, goes once it has let go
        assert [p.name for p in real_index.parent.iterdir() if p.name.startswith(".removed-")]
        assert papers(workdir, "indexes").returncode == 0
        assert list(real_index.parent.iterdir()) == []


def test_serve_follows_a_renamed_index_and_says_when_it_is_removed(tmp_path):
    pytest.importorskip("fastapi", reason="papers serve needs the serve extra: "
                                          "pip install -e '.[serve]'")
    from corpus import PAPERS
    from serving import build_fake_index, start_server

    index_dir = build_fake_index(tmp_path / "index", PAPERS)
    server = start_server(index_dir, cwd=tmp_path)
    try:
        status, before = server.json("/api/like?id=dp1")
        assert status == 200
        renamed = papers(tmp_path, "indexes", "mv", str(index_dir), str(tmp_path / "renamed"))
        assert renamed.returncode == 0
        assert server.json("/api/like?id=dp1") == (200, before)
        # A rebuild at the new path is what it serves next: it follows the folder, not the old path.
        build_fake_index(tmp_path / "renamed", PAPERS[:-1])
        status, after = server.json("/api/papers?limit=100")
        listed = after["papers"] if isinstance(after, dict) else after
        assert status == 200 and len(listed) == len(PAPERS) - 1
        assert papers(tmp_path, "indexes", "rm", str(tmp_path / "renamed")).returncode == 0
        status, body = server.json("/api/like?id=dp1")
        assert status == 503
        assert f"index {tmp_path / 'renamed'} was removed" in json.dumps(body)
    finally:
        server.stop()
    assert not any("Traceback" in line for line in server.errors), server.errors
