"""Failures a user meets, each one clear line with the index kept: inputs holding an index, unreadable
folders, full disks, NaN vectors, closed standard output, signals, memory limits, odd file names and links.

Permission cases run a real `papers` process with root's overrides dropped
(setpriv removes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH); full-disk cases run
on a small tmpfs mounted for the test. Each skips, with its reason, where the
machine does not allow it.
"""

import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from corpus import PAPERS, write_corpus
from recommender import build_index
from recommender.cli import main
from recommender.index.writer import IndexWriter
from system import NO_OVERRIDES, fill

TESTS = Path(__file__).resolve().parent
LAUNCHER = TESTS / "build_launcher.py"


def run(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="papers")


def papers_process(workdir: Path, *args, drop_root_overrides: bool = False, **options) -> subprocess.CompletedProcess:
    """`papers ARGS` as a real process (the fake model), optionally without root's permission overrides."""
    env = dict(os.environ, PAPERS_TEST_POINT="")
    env.pop("PAPERS_INDEX", None)
    command = [sys.executable, str(LAUNCHER), *args]
    if drop_root_overrides:
        command = [*NO_OVERRIDES, *command]
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.run(command, cwd=workdir, env=env, timeout=300, **options)


def live_files(index_dir: Path) -> dict[str, bytes]:
    """CURRENT and the files of every build folder: what readers see."""
    return {
        path.relative_to(index_dir).as_posix(): path.read_bytes()
        for path in sorted(index_dir.rglob("*"))
        if path.is_file() and (path.name == "CURRENT" or path.relative_to(index_dir).parts[0].startswith("v-"))
    }


def without_build_names(text: str) -> str:
    return re.sub(r"(\.tmp|v)-\d{8}T\d{6}-\d+-[0-9a-f]{6}", r"\1-*", text)


# ---------------------------------------------------------------- 1. an index inside its own input folder


def test_an_index_kept_in_its_input_folder_is_not_read_back(workdir, fake_model, open_index):
    folder = workdir / "s"
    write_corpus(folder, PAPERS[:3], "a.jsonl")
    write_corpus(folder, PAPERS[3:], "b.jsonl")
    assert run("build", "s", "--index", "s/idx").exit_code == 0
    again = run("build", "s", "--index", "s/idx")
    assert (again.exit_code, again.stderr) == (0, "warning: s/idx: an index folder, not papers: skipped\n")
    (folder / "b.jsonl").unlink()
    third = run("build", "s", "--index", "s/idx")
    assert third.exit_code == 0
    assert third.stdout.startswith("indexed 3 papers in s/idx")
    assert open_index("s/idx").ids == ["dp1", "dp2", "vid1"]  # the deleted papers stay deleted


def test_any_index_among_the_inputs_is_skipped_even_half_built(workdir, fake_model, open_index):
    write_corpus(workdir / "s")
    assert run("build", "s", "--index", "s/other").exit_code == 0
    (workdir / "s/other/CURRENT").unlink()  # a first build killed before it went live
    result = run("build", "s")
    assert (result.exit_code, result.stderr) == (0, "warning: s/other: an index folder, not papers: skipped\n")
    assert len(open_index()) == len(PAPERS)


# ---------------------------------------------------------------- 2. an unreadable subfolder


@pytest.mark.parametrize("unreadable, message", [
    ("in/sub", "Error: in/sub: cannot read folder (Permission denied): fix its permissions or leave it out\n"),
    ("in/sub/b.jsonl", "Error: in/sub/b.jsonl: cannot read file (Permission denied): fix its permissions or leave it out\n"),
])
def test_an_unreadable_subfolder_stops_the_build_like_an_unreadable_file(workdir, no_overrides, unreadable, message):
    workdir.chmod(0o755)
    write_corpus(workdir / "in", PAPERS[:3], "a.jsonl")
    write_corpus(workdir / "in/sub", PAPERS[3:], "b.jsonl")
    (workdir / unreadable).chmod(0)
    try:
        done = papers_process(workdir, "build", "in", drop_root_overrides=True, text=True)
    finally:
        (workdir / unreadable).chmod(0o755)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", message)
    assert not (workdir / "indexes/default/CURRENT").exists()


# ---------------------------------------------------------------- 3. search text that is not UTF-8


def test_search_text_in_latin_1_bytes_is_refused_in_one_line(workdir, fake_model):
    build_index([write_corpus(workdir / "in")])
    done = papers_process(workdir, "search", "caf\xe9 au lait".encode("latin-1"))
    assert (done.returncode, done.stdout, done.stderr.decode()) == (
        1, b"", "Error: search text is not valid UTF-8 (byte 0xe9): use a UTF-8 terminal or re-type the text\n")


# ---------------------------------------------------------------- 4. a full disk while the build writes


FULL_AT = [
    # (where the disk fills up, what the build writes there, the path its error names)
    ("scratch_file", "papers.jsonl", "indexes/default/.tmp-*/.scratch/papers.jsonl"),  # the papers read, spooled
    ("save_faiss", "faiss.index", "indexes/default/.tmp-*/faiss.index"),
    ("array_file", "vectors.npy", "indexes/default/.tmp-*/vectors.npy"),
    ("save_jsonl", "papers.jsonl", "indexes/default/.tmp-*/papers.jsonl"),
    ("commit", "manifest.json", "indexes/default/.tmp-*/manifest.json"),
]


@pytest.mark.parametrize("method, name, shown", FULL_AT, ids=[row[1] for row in FULL_AT])
def test_a_full_disk_during_a_build_names_the_file_and_keeps_the_old_index(small_disk, fake_model, monkeypatch, method,
                                                                           name, shown):
    write_corpus(small_disk / "old")
    assert run("build", "old").exit_code == 0
    index_dir = small_disk / "indexes/default"
    before = live_files(index_dir)
    write_corpus(small_disk / "new", PAPERS + [
        {"id": f"n{i}", "abstract": f"Paper {i} about topic{i} and words{i * 7} in graphs."} for i in range(50)
    ])
    real = getattr(IndexWriter, method)

    def full_then_write(writer, *args, **kwargs):
        if method == "commit" or args[0].endswith(name):
            fill(small_disk)
        return real(writer, *args, **kwargs)

    monkeypatch.setattr(IndexWriter, method, full_then_write)
    result = run("build", "new")
    assert (result.exit_code, result.stdout, without_build_names(result.stderr)) == (1, "", (
        f"Error: cannot write {shown}: No space left on device: free some disk space or choose another index "
        "(the index default is unchanged)\n"))
    (small_disk / "filler").unlink()
    assert live_files(index_dir) == before
    assert sorted(p.name for p in index_dir.iterdir()) == [".lock", "CURRENT", *[
        p.name for p in index_dir.glob("v-*")]]  # the build's private folder is gone
    assert run("info", "--verify").exit_code == 0


@pytest.mark.model
def test_a_full_disk_during_the_model_export_fails_the_build(small_disk, monkeypatch):
    # Decision (docs/guarantees.md): no silently ~60x slower index; the build fails, naming the folder.
    # The disk fills as the build asks for the export (made in the user cache, or found there), so the
    # export placed in the index meets a full disk whether or not the session made it already.
    from recommender.embed import export_cache

    real = export_cache.query_export

    def full_then_export(*args, **kwargs):
        fill(small_disk)
        return real(*args, **kwargs)

    monkeypatch.setattr(export_cache, "query_export", full_then_export)
    write_corpus(small_disk / "in")
    result = run("build", "in")
    assert (result.exit_code, result.stdout, without_build_names(result.stderr)) == (1, "", (
        "Error: cannot write indexes/default/.tmp-*/query-encoder: No space left on device: free some disk space "
        "or choose another index (the index default is unchanged)\n"))
    assert not (small_disk / "indexes/default/CURRENT").exists()


# ---------------------------------------------------------------- 9. click's usage errors


USAGE_CASES = [
    (["like", "dp1", "-k", "ten"], "Error: Invalid value for '-k': 'ten' is not a valid integer (see `papers like --help`)"),
    (["search", "x", "--format", "xml"],
     "Error: Invalid value for '--format': 'xml' is not one of 'table', 'json', 'jsonl', 'csv', 'markdown' "
     "(see `papers search --help`)"),
    (["like", "dp1", "--exclude", "in"], "Error: Invalid value for '--exclude': File 'in' is a directory (see `papers like --help`)"),
    (["show"], "Error: Missing argument 'PAPER' (see `papers show --help`)"),
    (["lik", "dp1"], "Error: No such command 'lik'. Did you mean 'like'? (see `papers --help`)"),
    (["--bogus"], "Error: No such option '--bogus' (see `papers --help`)"),
    (["build", "--chunking", "words"],
     "Error: Invalid value for '--chunking': 'words' is not one of 'sentences', 'windows', 'truncate' (see `papers build --help`)"),
]


@pytest.mark.parametrize("args, message", USAGE_CASES, ids=[" ".join(row[0]) for row in USAGE_CASES])
def test_usage_errors_are_one_line(workdir, fake_model, args, message):
    (workdir / "in").mkdir()
    result = run(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message + "\n")


def test_bare_papers_still_shows_the_help(workdir):
    result = run()
    assert result.exit_code == 2 and result.stderr.startswith("Usage: papers [OPTIONS] COMMAND [ARGS]...")
    assert "Commands:" in result.stderr


# ---------------------------------------------------------------- 10. a bad --model


@pytest.mark.model  # imports torch
def test_a_model_that_cannot_be_loaded_gives_no_slower_model_warning(workdir):
    # Without the fake model: the real export and loader refuse a folder that is not a model.
    (workdir / "not-a-model").mkdir()
    write_corpus(workdir / "in")
    result = run("build", "in", "--model", "not-a-model")
    assert result.exit_code == 1
    assert "will use the full model" not in result.stderr
    assert result.stderr.startswith("Error: cannot load model 'not-a-model' (")
    assert result.stderr.endswith("): give a local sentence-transformers model folder; nothing is downloaded\n")
    assert result.stderr.count("\n") == 1
    assert not (workdir / "indexes/default/CURRENT").exists()


# ---------------------------------------------------------------- 12. NaN in stored vectors


@pytest.fixture
def nan_index(workdir, fake_model, monkeypatch):
    """An index whose vectors.npy holds a NaN in dp2's row, as if damaged past the load-time hashing."""
    build_index([write_corpus(workdir / "in")])
    monkeypatch.setattr("recommender.index.stored.CHEAP_HASH_BYTES", 0)  # as for a vector file over the threshold
    path = next((workdir / "indexes/default").glob("v-*/vectors.npy"))
    vectors = np.load(path, mmap_mode="r+")
    vectors[1, 5] = np.nan
    vectors.flush()
    del vectors
    return workdir


NAN_MESSAGE = ("Error: index file indexes/default/v-*/vectors.npy holds values that are not numbers (NaN or infinity) "
               "in row 1: run `papers build`\n")


@pytest.mark.parametrize("args", [
    ["like", "dp2"], ["like", "dp1"], ["search", "private fine-tuning language models"], ["sessions", "--n", "2"],
    ["related-work", "--all", "--out", "r.md"], ["map", "--out", "m.html"],
], ids=lambda args: " ".join(args))
def test_nan_in_vectors_is_refused_as_damage(nan_index, args):
    result = run(*args)
    assert (result.exit_code, result.stdout, without_build_names(result.stderr)) == (1, "", NAN_MESSAGE)
    assert sorted(p.name for p in nan_index.iterdir()) == ["in", "indexes"]  # no output file, whole or partial


def test_nan_in_vectors_is_caught_by_verify(nan_index, monkeypatch):
    assert "does not match its checksum" in run("info", "--verify").stderr


# ---------------------------------------------------------------- 13. standard output closed


@pytest.mark.parametrize("args", [["list"], ["like", "dp1"], ["info"], ["related-work", "dp1"]])
def test_results_with_standard_output_closed_fail(workdir, fake_model, args):
    build_index([write_corpus(workdir / "in")])
    done = papers_process(workdir, *args, text=True, stdout=None, preexec_fn=lambda: os.close(1))
    assert (done.returncode, done.stderr) == (
        1, "Error: standard output is closed: nothing can be printed (redirect it to a file)\n")


def test_related_work_to_a_file_needs_no_standard_output(workdir, fake_model):
    build_index([write_corpus(workdir / "in")])
    done = papers_process(workdir, "related-work", "dp1", "--out", "r.md", text=True, stdout=None,
                          preexec_fn=lambda: os.close(1))
    assert (done.returncode, done.stderr) == (0, "wrote related work for 1 papers to r.md\n")
    assert (workdir / "r.md").read_text().startswith("#")


# ---------------------------------------------------------------- found by the sweep (scripts/reliability_sweep.py)


def test_sigterm_during_related_work_out_leaves_no_partial_file(workdir, fake_model, monkeypatch):
    from recommender.render import related

    build_index([write_corpus(workdir / "in")])
    real = related.write_related

    def write_then_terminated(lists, handle, *args):
        real(lists, handle, *args)
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` would, mid-run

    monkeypatch.setattr(related, "write_related", write_then_terminated)
    before = signal.getsignal(signal.SIGTERM)  # not always SIG_DFL: an earlier test's ray.init installs one
    result = run("related-work", "--all", "--out", "r.md")
    assert result.exit_code == 128 + signal.SIGTERM
    assert sorted(p.name for p in workdir.iterdir()) == ["in", "indexes"]
    assert signal.getsignal(signal.SIGTERM) is before  # put back once the command ends


class SignalsOnCollection:
    """An object whose finalizer sends this process a signal: its handler runs inside the finalizer,
    where Python reports an exception and ignores it."""

    def __init__(self, number):
        self.number = number

    def __del__(self):
        os.kill(os.getpid(), self.number)


def signal_where_python_ignores_exceptions(where, number, senders):
    if where == "finalizer":
        SignalsOnCollection(number)  # collected at once
        return
    if where == "gc callback":

        def callback(phase, info):
            if phase == "stop":
                os.kill(os.getpid(), number)

        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)
        return
    # `kill` from another process while the program collects, with a GC callback installed (as a
    # test suite's or a profiler's): the handler runs in the first Python code after the collection
    # the signal arrived in, the callback.
    heap = [[n] for n in range(300_000)]
    gc.callbacks.append(timed_collection)
    try:
        senders.append(subprocess.Popen(["sh", "-c", f"sleep 0.2; kill -{number.name[3:]} {os.getpid()}"]))
        for _ in range(300):
            gc.collect()
    finally:
        gc.callbacks.remove(timed_collection)
    del heap


def timed_collection(phase, info):
    timed_collection.started = time.perf_counter()


@pytest.mark.parametrize("where", ["finalizer", "gc callback", "collection killed by another process"])
@pytest.mark.parametrize("number, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "Ctrl-C"])
def test_a_stop_landing_where_python_ignores_exceptions_still_stops_the_command(
        workdir, fake_model, monkeypatch, where, number, status):
    """A signal arriving during a collection has its handler run inside a finalizer or a GC callback
    (a test suite's, a library's): the stop is delivered again, not lost."""
    from recommender.render import related

    build_index([write_corpus(workdir / "in")])
    real = related.write_related

    def write_then_stopped(lists, handle, *args):
        real(lists, handle, *args)
        signal_where_python_ignores_exceptions(where, number, senders)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the command goes on working until the stop reaches it
            time.sleep(0.01)

    monkeypatch.setattr(related, "write_related", write_then_stopped)
    hook, senders = sys.unraisablehook, []
    # Ctrl-C as in a terminal: a process started in the background (`cmd &`, as CI may start the
    # tests) begins with SIGINT ignored, and Python then leaves it so.
    interactive = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = run("related-work", "--all", "--out", "r.md")
    finally:
        signal.signal(signal.SIGINT, interactive)
        for sender in senders:
            sender.wait()
    assert result.exit_code == status  # the lost stop ends the command, not its 30 s of work
    assert sorted(p.name for p in workdir.iterdir()) == ["in", "indexes"]
    assert sys.unraisablehook is hook  # put back once the command ends


def test_a_stop_lost_again_while_its_last_delivery_is_ending_is_delivered_once_more(
        workdir, fake_model, monkeypatch):
    """On a loaded machine the thread that delivered a lost stop can still be ending when the stop is
    lost again (in the next collection): it is delivered once more, not dropped."""
    import _thread
    import threading
    from types import SimpleNamespace

    from recommender.render import related

    build_index([write_corpus(workdir / "in")])
    real_interrupt, real_write = _thread.interrupt_main, related.write_related
    deliveries = []

    def interrupt_slowly(signum):
        deliveries.append(signum)
        if len(deliveries) == 1:  # lost where it lands (as in a finalizer); the thread lingers
            time.sleep(1.0)
        else:
            real_interrupt(signum)

    def write_then_lost_twice(lists, handle, *args):
        real_write(lists, handle, *args)
        lost = SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(), exc_traceback=None,
                               err_msg=None, object=None)
        sys.unraisablehook(lost)
        deadline = time.monotonic() + 10
        while not deliveries and time.monotonic() < deadline:
            time.sleep(0.005)
        assert [t for t in threading.enumerate() if t.daemon and t.is_alive()]  # the first still ending
        sys.unraisablehook(lost)  # lost again
        while time.monotonic() < deadline:
            time.sleep(0.01)

    monkeypatch.setattr(_thread, "interrupt_main", interrupt_slowly)
    monkeypatch.setattr(related, "write_related", write_then_lost_twice)
    interactive = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = run("related-work", "--all", "--out", "r.md")
    finally:
        signal.signal(signal.SIGINT, interactive)
    assert len(deliveries) == 2 and result.exit_code == 130, (deliveries, result.output)
    assert sorted(p.name for p in workdir.iterdir()) == ["in", "indexes"]


def test_a_memory_limit_gives_one_line(workdir, fake_model):
    build_index([write_corpus(workdir / "in")])
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (200 << 20, 200 << 20))

    done = subprocess.run([sys.executable, "-m", "recommender", "like", "dp1"], cwd=workdir, capture_output=True,
                          text=True, preexec_fn=limit, env=dict(os.environ, PYTHONPATH=str(TESTS.parent)))
    if done.returncode == 0:
        pytest.skip("200 MB of address space is enough here: no memory error to show")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "ulimit -v" in done.stderr


def test_a_file_name_that_is_not_utf8_is_read(workdir, fake_model, open_index):
    folder = workdir / "odd"
    folder.mkdir()
    with open(os.path.join(bytes(folder), b"caf\xe9.jsonl"), "w") as handle:
        handle.write(json.dumps(PAPERS[0]) + "\n")
    result = run("build", "odd")
    assert (result.exit_code, result.stderr) == (0, "")
    assert open_index().show("dp1").source == "odd/caf\ufffd.jsonl:1"


def test_a_broken_link_named_like_a_paper_file_stops_the_build(workdir, fake_model):
    write_corpus(workdir / "in")
    (workdir / "in/gone.jsonl").symlink_to(workdir / "nowhere.jsonl")
    result = run("build", "in")
    assert (result.exit_code, result.stderr) == (1, "Error: in/gone.jsonl: broken symbolic link: fix or remove it\n")


def test_a_link_to_a_folder_is_not_followed_and_says_so(workdir, fake_model, open_index):
    write_corpus(workdir / "elsewhere", PAPERS[:2])
    write_corpus(workdir / "in", PAPERS[2:])
    (workdir / "in/loop").symlink_to(workdir / "in")
    (workdir / "in/more").symlink_to(workdir / "elsewhere")
    result = run("build", "in")
    assert (result.exit_code, result.stderr) == (0, (
        "warning: in/loop: a link to a folder, not followed: give the folder itself\n"
        "warning: in/more: a link to a folder, not followed: give the folder itself\n"))
    assert len(open_index()) == 4


def test_a_folder_with_a_file_named_current_is_still_read(workdir, fake_model, open_index):
    write_corpus(workdir / "notes")
    (workdir / "notes/CURRENT").write_text("what I am reading\n")
    assert run("build", "notes").exit_code == 0
    assert len(open_index()) == len(PAPERS)


def test_papers_index_of_spaces_means_the_default(workdir, fake_model, monkeypatch):
    build_index([write_corpus(workdir / "in")])
    monkeypatch.setenv("PAPERS_INDEX", "  ")
    assert run("like", "dp1").exit_code == 0


def test_an_unreadable_index_says_so_instead_of_damaged(workdir, fake_model, no_overrides):
    workdir.chmod(0o755)
    build_index([write_corpus(workdir / "in")])
    (workdir / "indexes/default").chmod(0)
    try:
        done = papers_process(workdir, "like", "dp1", drop_root_overrides=True, text=True)
    finally:
        (workdir / "indexes/default").chmod(0o755)
    assert (done.returncode, done.stderr) == (
        1, "Error: cannot read index indexes/default: permission denied: ask its owner, or build your own\n")


def test_an_unwritable_out_folder_names_the_output(workdir, fake_model, no_overrides):
    workdir.chmod(0o755)
    build_index([write_corpus(workdir / "in")])
    (workdir / "locked").mkdir(mode=0o555)
    done = papers_process(workdir, "related-work", "dp1", "--out", "locked/r.md", drop_root_overrides=True, text=True)
    assert (done.returncode, done.stderr) == (1, "Error: locked/r.md: Permission denied\n")


def test_a_huge_abstract_is_announced(workdir, fake_model):
    abstract = " ".join(f"w{i % 997}x{i % 13}" for i in range(15_000))
    assert len(abstract) > 100_000
    write_corpus(workdir / "in", [{"id": "huge", "abstract": abstract}, PAPERS[0]])
    result = run("build", "in")
    assert (result.exit_code, result.stderr) == (0, (
        f"warning: in/papers.jsonl:1: abstract is {len(abstract):,} characters long (a whole paper?): "
        "encoding it takes minutes with the real model\n"))
