"""Adversarial sweep (issue 13): hostile or careless uses of `papers`, each run as a real process.

    python scripts/reliability_sweep.py [--only SUBSTRING] [--from-case N]

Runs as root on Linux (tmpfs mounts, setpriv to drop root's permission overrides);
cases that need what the machine lacks are reported as skipped. Every case runs in a
fresh folder with the six-paper corpus built into indexes/default (the fake encoder of
tests/fakes.py, through tests/build_launcher.py). A case holds when the command exits as
expected, any error is one `Error:` line with no traceback, and the index readers see
is unchanged unless the case changes it on purpose. Prints one row per case and the counts.

Quoted in: docs/guarantees.md ("The reliability sweep").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "tests" / "build_launcher.py"
sys.path[:0] = [str(REPO), str(REPO / "tests")]
from corpus import PAPERS, write_corpus  # noqa: E402

# Bare index names resolve under ./indexes/ when it exists (every case folder has one);
# anything that still looks for the user data folder finds a scratch one, never the real one.
SCRATCH_DATA = tempfile.mkdtemp(prefix="sweep-data-")
# The user cache folder (ONNX exports, the embedding cache shared by every index): a scratch one per case.
SCRATCH_CACHE = tempfile.mkdtemp(prefix="sweep-cache-")
NO_OVERRIDES = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]


CASE_CACHE = [Path(SCRATCH_CACHE)]  # the current case's own cache folder (set by main)


class Skip(Exception):
    pass


def env(**extra) -> dict:
    values = dict(os.environ, PAPERS_TEST_POINT="", PYTHONPATH=f"{REPO}:{REPO / 'tests'}", XDG_DATA_HOME=SCRATCH_DATA,
                  PAPERS_CACHE=str(CASE_CACHE[0]))
    values.pop("PAPERS_INDEX", None)
    values.pop("PAPERS_HOME", None)
    values.update(extra)
    return values


def papers(cwd: Path, *args, prefix=(), stdin=None, timeout=300, extra_env=None, preexec=None, real=False):
    """`papers ARGS` through the test launcher (fake model), or the real entry point with `real`."""
    program = ["-m", "recommender"] if real else [str(LAUNCHER)]
    command = [*prefix, sys.executable, *program, *args]
    done = subprocess.run(command, cwd=cwd, env=env(**(extra_env or {})), capture_output=True, timeout=timeout,
                          stdin=stdin, preexec_fn=preexec)
    return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def spawn(cwd: Path, *args, point="", action="hold", sync: Path | None = None, prefix=()):
    extra = {"PAPERS_TEST_POINT": point, "PAPERS_TEST_ACTION": action}
    if sync is not None:
        sync.mkdir(exist_ok=True)
        extra["PAPERS_TEST_SYNC"] = str(sync)
    return subprocess.Popen([*prefix, sys.executable, str(LAUNCHER), *args], cwd=cwd, env=env(**extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_file(path: Path, process, limit=120):
    deadline = time.monotonic() + limit
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"never reached {path.name}: {process.stderr.read() if process.poll() is not None else ''}")
        time.sleep(0.02)


def readers_view(cwd: Path, index="default") -> tuple:
    """What readers see: the paper list and a like list, or the error they get."""
    return (papers(cwd, "list", "--format", "json", "--index", index)[:2],
            papers(cwd, "like", "dp1", "--format", "json", "--index", index)[:2])


# "exporting the model to ONNX (once per model)...", "...: 7s", "...: done", "encoding: 38 papers in 3s"
PHASE_LINE = re.compile(r"(\.\.\.|: done| in \d+s|: \d+s)$")


def one_error_line(code, stderr, expected_code=1) -> str | None:
    """None when the failure is the clean kind: the expected exit, one Error line (warnings allowed)."""
    if "Traceback" in stderr:
        return "traceback: " + stderr.strip().splitlines()[-1]
    errors = [line for line in stderr.splitlines()
              if line.strip() and not line.startswith(("warning: ", "encoding", "related work"))  # bar labels
              and not PHASE_LINE.search(line)]  # a slow phase's progress (issue 23.15), not an error
    if code != expected_code:
        return f"exit {code}, expected {expected_code}: {stderr.strip()[:200]}"
    if len(errors) != 1 or not errors[0].startswith("Error: "):
        return f"not one Error line: {stderr.strip()[:300]!r}"
    return None


class Mount:
    """A small tmpfs, unmounted on exit."""

    def __init__(self, size="16m", options=""):
        if os.geteuid() != 0:
            raise Skip("mounting a tmpfs needs root")
        self.path = Path(tempfile.mkdtemp(prefix="sweep-disk-"))
        opts = f"size={size}" + (f",{options}" if options else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(self.path)], capture_output=True, text=True)
        if done.returncode:
            self.path.rmdir()
            raise Skip(f"cannot mount a tmpfs: {done.stderr.strip()}")

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        subprocess.run(["umount", "-l", str(self.path)])
        self.path.rmdir()


def fill(mount: Path) -> None:
    with open(mount / "filler", "ab", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError:
                pass


def need_overrides_droppable():
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        raise Skip("needs root and setpriv")


# ---------------------------------------------------------------- the cases
# Each takes the work folder (six papers in in/papers.jsonl, built into indexes/default)
# and returns None when it held, or what went wrong.

CASES = []


def case(name):
    def register(function):
        CASES.append((name, function))
        return function

    return register


def expect_error(cwd, *args, code=1, keep_index=True, **options):
    before = readers_view(cwd) if keep_index else None
    got_code, _, stderr = papers(cwd, *args, **options)
    problem = one_error_line(got_code, stderr, code)
    if problem:
        return problem
    if keep_index and readers_view(cwd) != before:
        return "the index changed"
    return None


def expect_ok(cwd, *args, **options):
    code, stdout, stderr = papers(cwd, *args, **options)
    if code != 0 or "Traceback" in stderr:
        return f"exit {code}: {stderr.strip()[-300:]}"
    return None


# -- signals


@case("SIGINT during a build: old index kept, leftovers cleaned by the next build")
def _(cwd):
    write_corpus(cwd / "new", PAPERS[:4])
    before = readers_view(cwd)
    build = spawn(cwd, "build", "new", point="after-files", sync=cwd / "sync")
    wait_file(cwd / "sync/ready", build)
    build.send_signal(signal.SIGINT)
    (cwd / "sync/release").touch()
    _, stderr = build.communicate(timeout=60)
    if build.returncode == 0:
        return "build finished despite SIGINT"
    if "Traceback" in stderr or len(stderr.strip().splitlines()) > 1:
        return f"not one line: {stderr!r}"
    if readers_view(cwd) != before:
        return "index changed"
    if any(p.name.startswith(".tmp-") for p in (cwd / "indexes/default").iterdir()):
        return "a .tmp- folder is left behind"
    return expect_ok(cwd, "build", "new")


@case("SIGTERM during a build: old index kept, next build cleans up")
def _(cwd):
    write_corpus(cwd / "new", PAPERS[:4])
    before = readers_view(cwd)
    build = spawn(cwd, "build", "new", point="before-current", sync=cwd / "sync")
    wait_file(cwd / "sync/ready", build)
    build.send_signal(signal.SIGTERM)
    build.communicate(timeout=60)
    if readers_view(cwd) != before:
        return "index changed"
    problem = expect_ok(cwd, "build", "new")
    left = [p.name for p in (cwd / "indexes/default").iterdir()
            if p.name.startswith((".tmp-", ".CURRENT.tmp", ".papers-partial-"))]
    return problem or (f"leftovers after the next build: {left}" if left else None)


def signal_related_work_out(cwd, signal_number) -> tuple[list[str], str]:
    """Build a 3,000-paper index, start `related-work --all --out r.md`, send the signal once its
    partial file exists; returns what is left beside it and the command's stderr."""
    write_corpus(cwd / "big", [{"id": f"b{i}", "abstract": f"Paper {i} about topic{i % 17} and word{i % 5}."}
                               for i in range(3000)])
    if papers(cwd, "build", "big", "--index", "big")[0]:
        raise RuntimeError("build failed")
    process = spawn(cwd, "related-work", "--all", "--index", "big", "--out", "r.md")
    deadline = time.monotonic() + 60
    while not list(cwd.glob(".papers-partial-*")) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal_number)
    _, stderr = process.communicate(timeout=60)
    return sorted(p.name for p in cwd.iterdir() if p.name.startswith((".r.", ".papers-partial-")) or p.name == "r.md"), stderr


@case("SIGTERM during related-work --out: no partial file left")
def _(cwd):
    left, _ = signal_related_work_out(cwd, signal.SIGTERM)
    return f"left behind: {left}" if left else None


@case("SIGINT during related-work --out: no partial file left")
def _(cwd):
    left, stderr = signal_related_work_out(cwd, signal.SIGINT)
    if left:
        return f"left behind: {left}"
    return f"not one line: {stderr!r}" if "Traceback" in stderr else None


@case("papers list | head -1 (closed pipe): quiet")
def _(cwd):
    done = subprocess.run(f"{sys.executable} {LAUNCHER} list | head -1", shell=True, cwd=cwd, env=env(),
                          capture_output=True, text=True)
    return f"stderr: {done.stderr!r}" if done.stderr else None


# -- resource limits


def ulimit(kind: str, value: int):
    import resource

    def apply():
        resource.setrlimit(kind, (value, value))

    return apply


@case("ulimit -v 1 GB during a build")
def _(cwd):
    import resource

    code, _, stderr = papers(cwd, "build", "in", "--index", "v", preexec=ulimit(resource.RLIMIT_AS, 1 << 30))
    if code == 0:
        return None
    return one_error_line(code, stderr)


@case("ulimit -v 200 MB during a build (real entry point and model): one line")
def _(cwd):
    import resource

    code, _, stderr = papers(cwd, "build", "in", "--index", "v", preexec=ulimit(resource.RLIMIT_AS, 200 << 20),
                             real=True)
    return None if code == 0 else one_error_line(code, stderr)


@case("ulimit -v 200 MB during like (real entry point): one line")
def _(cwd):
    import resource

    code, _, stderr = papers(cwd, "like", "dp1", preexec=ulimit(resource.RLIMIT_AS, 200 << 20), real=True)
    return None if code == 0 else one_error_line(code, stderr)


@case("ulimit -v 200 MB during search (real entry point and model): one line")
def _(cwd):
    import resource

    code, _, stderr = papers(cwd, "search", "private training", preexec=ulimit(resource.RLIMIT_AS, 200 << 20),
                             real=True)
    return None if code == 0 else one_error_line(code, stderr)


@case("ulimit -f 1 KB (file size) during a build: one line naming the file, index kept")
def _(cwd):
    import resource

    write_corpus(cwd / "new", [{"id": f"n{i}", "abstract": f"Paper {i} about topic{i}."} for i in range(200)])
    return expect_error(cwd, "build", "new", preexec=ulimit(resource.RLIMIT_FSIZE, 1024))


@case("ulimit -n 12 (open files) during a build: works or one line")
def _(cwd):
    import resource

    write_corpus(cwd / "new", PAPERS[:4])
    code, _, stderr = papers(cwd, "build", "new", preexec=ulimit(resource.RLIMIT_NOFILE, 12))
    return None if code == 0 else one_error_line(code, stderr)


@case("ulimit -n 12 during like: one line")
def _(cwd):
    import resource

    code, _, stderr = papers(cwd, "like", "dp1", preexec=ulimit(resource.RLIMIT_NOFILE, 12))
    return None if code == 0 else one_error_line(code, stderr)


# -- concurrency


@case("two concurrent related-work --out to the same file: one whole file")
def _(cwd):
    first = spawn(cwd, "related-work", "--all", "--out", "same.md")
    second = spawn(cwd, "related-work", "--all", "--format", "json", "--out", "same.md")
    codes = [first.wait(timeout=120), second.wait(timeout=120)]
    first.communicate(), second.communicate()
    if codes != [0, 0]:
        return f"exits {codes}"
    text = (cwd / "same.md").read_text()
    whole = text.startswith("# Related work") or json.loads(text) is not None
    left = [p.name for p in cwd.iterdir() if ".partial-" in p.name]
    return None if whole and not left else f"mixed or left over: {left}"


@case("three concurrent builds with --wait: all succeed, one version left")
def _(cwd):
    processes = [spawn(cwd, "build", "in", "--wait") for _ in range(3)]
    codes = [p.wait(timeout=300) for p in processes]
    for p in processes:
        p.communicate()
    versions = list((cwd / "indexes/default").glob("v-*"))
    return None if codes == [0, 0, 0] and len(versions) == 1 else f"exits {codes}, {len(versions)} versions"


@case("concurrent builds of two indexes from the same folder")
def _(cwd):
    processes = [spawn(cwd, "build", "in", "--index", name) for name in ("a", "b")]
    codes = [p.wait(timeout=300) for p in processes]
    for p in processes:
        p.communicate()
    return None if codes == [0, 0] else f"exits {codes}"


@case("index folder deleted after a build: one line")
def _(cwd):
    reader = spawn(cwd, "build", "in", "--index", "r", point="after-current", sync=cwd / "sync")
    wait_file(cwd / "sync/ready", reader)
    (cwd / "sync/release").touch()
    reader.communicate(timeout=60)
    shutil.rmtree(cwd / "indexes/r")
    return expect_error(cwd, "like", "dp1", "--index", "r", keep_index=False)


# -- clocks and time zones


@case("build with TZ set to a bogus zone")
def _(cwd):
    return expect_ok(cwd, "build", "in", "--index", "tz", extra_env={"TZ": "Nowhere/Bogus"})


@case("manifest edited to a built_at in the future: refused as damage in one line")
def _(cwd):
    manifest = next((cwd / "indexes/default").glob("v-*/manifest.json"))
    data = json.loads(manifest.read_text())
    data["built_at"] = "2099-01-01T00:00:00+0000"
    manifest.write_text(json.dumps(data))
    # The manifest is hashed in CURRENT: an edited manifest is damage, refused in one line.
    return expect_error(cwd, "info", keep_index=False)


@case("version folder name from a clock far in the future, then a normal build")
def _(cwd):
    index = cwd / "indexes/default"
    live = index / (index / "CURRENT").read_text().split()[0]
    future = index / "v-29991231T235959-1-abcdef"
    live.rename(future)
    digest = (index / "CURRENT").read_text().split()[1]
    (index / "CURRENT").write_text(f"{future.name} {digest}\n")
    problem = expect_ok(cwd, "like", "dp1") or expect_ok(cwd, "build", "in")
    versions = sorted(p.name for p in index.glob("v-*"))
    return problem or (None if len(versions) == 1 and versions[0] != future.name else f"versions: {versions}")


@case("two builds within the same second: distinct versions")
def _(cwd):
    return expect_ok(cwd, "build", "in") or expect_ok(cwd, "build", "in") or expect_ok(cwd, "info", "--verify")


# -- long and odd paths


@case("index name of 300 characters: one line")
def _(cwd):
    return expect_error(cwd, "build", "in", "--index", "x" * 300)


@case("input path nested past PATH_MAX: one line")
def _(cwd):
    os.chdir(cwd)
    try:
        for _ in range(20):  # relative steps: the absolute path would exceed PATH_MAX
            os.mkdir("d" * 250)
            os.chdir("d" * 250)
        Path("p.jsonl").write_text(json.dumps(PAPERS[0]) + "\n")
    finally:
        os.chdir(cwd)
    deep = "/".join(["d" * 250] * 20) + "/p.jsonl"
    return expect_error(cwd, "build", deep, "--index", "deep")


@case("file name of 255 characters with spaces and unicode")
def _(cwd):
    name = ("é paper " * 40)[:120].strip() + ".jsonl"  # 240 bytes: é is two
    write_corpus(cwd / "odd", PAPERS[:2], name)
    return expect_ok(cwd, "build", "odd", "--index", "odd")


@case("file name with a newline in it")
def _(cwd):
    write_corpus(cwd / "odd", PAPERS[:2], "two\nlines.jsonl")
    return expect_ok(cwd, "build", "odd", "--index", "odd")


@case("file name starting with a dash, after --")
def _(cwd):
    write_corpus(cwd, PAPERS[:2], "-dash.jsonl")
    return expect_ok(cwd, "build", "--index", "dash", "--", "-dash.jsonl")


@case("file name not valid UTF-8")
def _(cwd):
    folder = cwd / "odd"
    folder.mkdir()
    with open(os.path.join(bytes(folder), b"caf\xe9.jsonl"), "w") as handle:
        handle.write(json.dumps(PAPERS[0]) + "\n")
    return expect_ok(cwd, "build", "odd", "--index", "odd")


@case("symlink loop in an input folder")
def _(cwd):
    (cwd / "in/loop").symlink_to(cwd / "in")
    return expect_ok(cwd, "build", "in", "--index", "loop")


@case("symlink to a folder elsewhere: not followed, with a note")
def _(cwd):
    write_corpus(cwd / "elsewhere", PAPERS[:1], "e.jsonl")
    write_corpus(cwd / "mix", PAPERS[1:2], "m.jsonl")
    (cwd / "mix/link").symlink_to(cwd / "elsewhere")
    code, _, stderr = papers(cwd, "build", "mix", "--index", "mix")
    return None if code == 0 and "not followed" in stderr else f"exit {code}: {stderr!r}"


@case("broken symlink named like a paper file: one line")
def _(cwd):
    (cwd / "in/gone.jsonl").symlink_to(cwd / "nowhere.jsonl")
    return expect_error(cwd, "build", "in")


@case("symlinked paper file is read")
def _(cwd):
    write_corpus(cwd / "elsewhere", PAPERS[:1], "e.jsonl")
    (cwd / "lnk").mkdir()
    (cwd / "lnk/e.jsonl").symlink_to(cwd / "elsewhere/e.jsonl")
    return expect_ok(cwd, "build", "lnk", "--index", "lnk")


@case("FIFO named like a paper file in a folder: skipped, no hang")
def _(cwd):
    os.mkfifo(cwd / "in/pipe.jsonl")
    return expect_ok(cwd, "build", "in", timeout=60)


@case("a user's folder holding a file named CURRENT is still read")
def _(cwd):
    write_corpus(cwd / "notes", PAPERS[:2])
    (cwd / "notes/CURRENT").write_text("what I am reading\n")
    return expect_ok(cwd, "build", "notes", "--index", "notes")


# -- index locations


@case("--index . on a folder of the user's is refused (issue 22); an empty one builds and reads back")
def _(cwd):
    (cwd / "here").mkdir()
    write_corpus(cwd / "here/in")
    problem = expect_error(cwd / "here", "build", "in", "--index", ".", keep_index=False)
    (cwd / "empty").mkdir()
    return problem or expect_ok(cwd / "empty", "build", "../here/in", "--index", ".") or expect_ok(
        cwd / "empty", "like", "dp1", "--index", ".")


@case("--index indexes (the folder of all indexes): refused")
def _(cwd):
    return expect_error(cwd, "build", "in", "--index", "./indexes")


@case("PAPERS_INDEX set to spaces: the default index")
def _(cwd):
    return expect_ok(cwd, "like", "dp1", extra_env={"PAPERS_INDEX": "  "})


@case("index folder on a read-only filesystem: build refused in one line, queries work")
def _(cwd):
    with Mount("16m") as mount:
        shutil.copytree(cwd / "indexes", mount / "indexes")
        shutil.copytree(cwd / "in", mount / "in")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        return expect_error(mount, "build", "in") or expect_ok(mount, "like", "dp1")


@case("index moved to another name: still opens")
def _(cwd):
    shutil.move(cwd / "indexes/default", cwd / "indexes/moved")
    return expect_ok(cwd, "like", "dp1", "--index", "moved") or expect_ok(cwd, "info", "--verify", "--index", "moved")


@case("--out inside an index folder: refused, index kept")
def _(cwd):
    return expect_error(cwd, "related-work", "dp1", "--out", "indexes/default/CURRENT")


@case("--out into a missing folder: one line naming it")
def _(cwd):
    code, _, stderr = papers(cwd, "related-work", "dp1", "--out", "nowhere/r.md")
    return one_error_line(code, stderr) or (None if "nowhere" in stderr and ".partial" not in stderr else stderr)


@case("--out on a full disk: one line naming the output, no partial file")
def _(cwd):
    with Mount("16m") as mount:
        shutil.copytree(cwd / "indexes", mount / "indexes")
        fill(mount)
        code, _, stderr = papers(mount, "related-work", "--all", "--out", "r.md")
        left = [p.name for p in mount.iterdir() if p.name not in ("indexes", "filler")]
        problem = one_error_line(code, stderr)
        return problem or (f"left: {left}" if left else None) or (stderr if ".partial" in stderr else None)


@case("sessions --out on a full disk: one line naming the output")
def _(cwd):
    with Mount("16m") as mount:
        shutil.copytree(cwd / "indexes", mount / "indexes")
        fill(mount)
        code, _, stderr = papers(mount, "sessions", "--n", "2", "--out", "s.md")
        return one_error_line(code, stderr) or (stderr if ".partial" in stderr else None)


@case("embedding cache on a full disk: one line, index kept")
def _(cwd):
    with Mount("16m") as mount:
        shutil.copytree(cwd / "indexes", mount / "indexes")
        write_corpus(mount / "new", [{"id": f"n{i}", "abstract": f"Paper {i} about topic{i}."} for i in range(50)])
        fill(mount)
        return expect_error(mount, "build", "new")


@case("papers list > /dev/full: one line, non-zero")
def _(cwd):
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, str(LAUNCHER), "list"], cwd=cwd, env=env(), stdout=full,
                              stderr=subprocess.PIPE, text=True)
    return one_error_line(done.returncode, done.stderr)


@case("output to a terminal that cannot encode the titles (PYTHONIOENCODING=ascii)")
def _(cwd):
    write_corpus(cwd / "cjk", [{"id": "c1", "title": "中文 模型", "abstract": "Modèles de langue pour le chinois."},
                               {"id": "c2", "title": "Другой", "abstract": "Another abstract entirely."}])
    if papers(cwd, "build", "cjk", "--index", "cjk")[0]:
        return "build failed"
    return expect_ok(cwd, "list", "--index", "cjk", extra_env={"PYTHONIOENCODING": "ascii"})


# -- option values


@case("-k ''")
def _(cwd):
    return expect_error(cwd, "like", "dp1", "-k", "", code=2)


@case("-k 10**20")
def _(cwd):
    return expect_ok(cwd, "like", "dp1", "-k", str(10 ** 20))


@case("-k 10**6 on six papers")
def _(cwd):
    return expect_ok(cwd, "search", "private", "-k", "1000000", "--diverse", "0.5")


@case("related-work -k 0")
def _(cwd):
    return expect_error(cwd, "related-work", "dp1", "-k", "0", code=2)  # a bad option value is bad usage (issue 23.12)


@case("related-work -k 10**20")
def _(cwd):
    return expect_ok(cwd, "related-work", "dp1", "-k", str(10 ** 20))


@case("sessions --n 0")
def _(cwd):
    return expect_error(cwd, "sessions", "--n", "0", code=2)  # a bad option value is bad usage (issue 23.12)


@case("sessions --n 10**20")
def _(cwd):
    return expect_error(cwd, "sessions", "--n", str(10 ** 20), code=2)  # a bad option value is bad usage (issue 23.12)


@case("sessions --max-per-session -1")
def _(cwd):
    return expect_error(cwd, "sessions", "--n", "2", "--max-per-session", "-1", code=2)  # a bad option value is bad usage (issue 23.12)


@case("map --n 10**20")
def _(cwd):
    return expect_error(cwd, "map", "--out", "m.html", "--n", str(10 ** 20), code=2)  # a bad option value is bad usage (issue 23.12)


@case("--min-score inf")
def _(cwd):
    return expect_error(cwd, "like", "dp1", "--min-score", "inf", code=2)  # a bad option value is bad usage (issue 23.12)


@case("--diverse nan")
def _(cwd):
    return expect_error(cwd, "like", "dp1", "--diverse", "nan", code=2)  # a bad option value is bad usage (issue 23.12)


@case("--exclude every paper: empty result, exit 0")
def _(cwd):
    (cwd / "read.txt").write_text("\n".join(p["id"] for p in PAPERS))
    return expect_ok(cwd, "like", "dp1", "--exclude", "read.txt")


@case("like with a reference that is not UTF-8")
def _(cwd):
    return expect_error(cwd, "like", b"caf\xe9")


@case("show with an ID holding a newline")
def _(cwd):
    return expect_error(cwd, "show", "dp\n1")


@case("like with the same paper 500 times")
def _(cwd):
    return expect_ok(cwd, "like", *["dp1"] * 500)


@case("--from a file of 100,000 unknown IDs")
def _(cwd):
    (cwd / "ids.txt").write_text("\n".join(f"zz{i}" for i in range(100_000)))
    return expect_error(cwd, "related-work", "--from", "ids.txt")


# -- corpora at the edges


@case("a corpus of one paper: build, like, sessions --n 1, map")
def _(cwd):
    write_corpus(cwd / "one", PAPERS[:1])
    return (expect_ok(cwd, "build", "one", "--index", "one") or expect_ok(cwd, "like", "dp1", "--index", "one")
            or expect_ok(cwd, "sessions", "--n", "1", "--index", "one")
            or expect_ok(cwd, "map", "--out", "m.html", "--n", "1", "--index", "one"))


@case("--index-type ivf on six papers")
def _(cwd):
    return expect_ok(cwd, "build", "in", "--index", "ivf", "--index-type", "ivf") or expect_ok(
        cwd, "like", "dp1", "--index", "ivf")


@case("--index-type hnsw on one paper")
def _(cwd):
    write_corpus(cwd / "one", PAPERS[:1])
    return expect_ok(cwd, "build", "one", "--index", "h", "--index-type", "hnsw") or expect_ok(
        cwd, "search", "private", "--index", "h")


@case("CSV with a duplicated column name")
def _(cwd):
    (cwd / "dup.csv").write_text("id,abstract,abstract\np1,First text here.,Second text here.\n")
    return expect_error(cwd, "build", "dup.csv", "--index", "dup", keep_index=False)


@case("CSV with a BOM and CRLF line endings")
def _(cwd):
    (cwd / "bom.csv").write_bytes("\ufeffid,title,abstract\r\np1,T,Some abstract text.\r\n".encode())
    return expect_ok(cwd, "build", "bom.csv", "--index", "bom")


@case("JSONL with id given as a number and as the same string")
def _(cwd):
    (cwd / "n.jsonl").write_text('{"id": 1, "abstract": "One text."}\n{"id": "1", "abstract": "Other text."}\n')
    return expect_error(cwd, "build", "n.jsonl", "--index", "n", keep_index=False)


@case("JSONL id true (a boolean)")
def _(cwd):
    (cwd / "b.jsonl").write_text('{"id": true, "abstract": "One text."}\n')
    return expect_error(cwd, "build", "b.jsonl", "--index", "b", keep_index=False)


@case("JSONL year of 30 digits")
def _(cwd):
    (cwd / "y.jsonl").write_text('{"id": "y", "abstract": "One text.", "year": 123456789012345678901234567890}\n')
    return expect_ok(cwd, "build", "y.jsonl", "--index", "y") or expect_ok(cwd, "list", "--index", "y", "--format", "csv")


@case("search text of 1 MB")
def _(cwd):
    (cwd / "q.txt").write_text("private training " * 60_000)
    return expect_ok(cwd, "search", (cwd / "q.txt").read_text()[:120_000])


@case("an abstract of 1 MB: a size warning")
def _(cwd):
    words = " ".join(f"w{i % 997}x{i % 13}" for i in range(140_000))
    write_corpus(cwd / "huge", [{"id": "huge", "abstract": words}, PAPERS[0]])
    code, _, stderr = papers(cwd, "build", "huge", "--index", "huge", timeout=1800)
    if code:
        return f"exit {code}: {stderr[-300:]}"
    return None if "characters long" in stderr else f"no size warning: {stderr[:300]!r}"


@case("unreadable index folder (root's overrides dropped): one line")
def _(cwd):
    need_overrides_droppable()
    (cwd / "indexes/default").chmod(0)
    try:
        code, _, stderr = papers(cwd, "like", "dp1", prefix=NO_OVERRIDES)
    finally:
        (cwd / "indexes/default").chmod(0o755)
    return one_error_line(code, stderr)


@case("unreadable vectors file (root's overrides dropped): one line")
def _(cwd):
    need_overrides_droppable()
    path = next((cwd / "indexes/default").glob("v-*/vectors.npy"))
    path.chmod(0)
    try:
        code, _, stderr = papers(cwd, "like", "dp1", prefix=NO_OVERRIDES)
    finally:
        path.chmod(0o644)
    return one_error_line(code, stderr)


@case("unwritable --out folder (root's overrides dropped): one line")
def _(cwd):
    need_overrides_droppable()
    (cwd / "locked").mkdir()
    (cwd / "locked").chmod(0o555)
    code, _, stderr = papers(cwd, "related-work", "dp1", "--out", "locked/r.md", prefix=NO_OVERRIDES)
    return one_error_line(code, stderr) or (stderr if ".partial" in stderr else None)


@case("--exclude file unreadable (root's overrides dropped): one line")
def _(cwd):
    need_overrides_droppable()
    (cwd / "read.txt").write_text("dp2\n")
    (cwd / "read.txt").chmod(0)
    code, _, stderr = papers(cwd, "like", "dp1", "--exclude", "read.txt", prefix=NO_OVERRIDES)
    return one_error_line(code, stderr, expected_code=(1 if code == 1 else 2))


# -- files (issue 22, round three): what the tool removes, links it never follows, reuse it checks

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def live(cwd: Path, index="default") -> Path:
    folder = cwd / "indexes" / index if "/" not in index else Path(index)
    return folder / (folder / "CURRENT").read_text().split()[0]


def reseal(folder: Path, change=lambda manifest: None) -> None:
    """Forge the live version: the manifest's hashes made anew (and `change` applied), CURRENT updated."""
    import hashlib

    version = folder / (folder / "CURRENT").read_text().split()[0]
    manifest = json.loads((version / "manifest.json").read_text())
    for name in manifest["files"]:
        data = (version / name).read_bytes()
        manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    change(manifest)
    (version / "manifest.json").write_text(json.dumps(manifest))
    (folder / "CURRENT").write_text(f"{version.name} {hashlib.sha256((version / 'manifest.json').read_bytes()).hexdigest()}\n")


def shared_folder() -> Path:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        raise Skip("needs root and setpriv to act as a second user")
    folder = Path(tempfile.mkdtemp(prefix="sweep-shared-", dir="/tmp"))
    folder.chmod(0o777)
    return folder


def as_nobody(script: str) -> None:
    done = subprocess.run([*AS_NOBODY, sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise Skip(f"cannot run python as nobody: {done.stderr.strip()[-200:]}")


def user_folder_unchanged(cwd: Path, files: dict) -> str | None:
    mine = cwd / "mydocs"
    for name, text in files.items():
        (mine / name).parent.mkdir(parents=True, exist_ok=True)
        (mine / name).write_text(text)
    before = tree(mine)
    problem = expect_error(cwd, "build", "in", "--index", "./mydocs", keep_index=False)
    return problem or (None if tree(mine) == before else "the folder changed")


@case("build --index on a folder of the user's (v-final/, .tmp-notes/): refused, nothing changed")
def _(cwd):
    return user_folder_unchanged(cwd, {"v-final/thesis.tex": "x", ".tmp-notes/a.txt": "y"})


@case("build --index on a folder holding only a file of the user's: refused")
def _(cwd):
    return user_folder_unchanged(cwd, {"README": "mine"})


@case("build --index on a folder with a forged v-1/manifest.json beside the user's file: refused")
def _(cwd):
    return user_folder_unchanged(cwd, {"v-1/manifest.json": '{"files": {}}', "v-1/keep.txt": "mine"})


@case("build --index on a folder with a .lock and the user's file: refused")
def _(cwd):
    return user_folder_unchanged(cwd, {".lock": "", "draft.md": "mine"})


@case("a rebuild keeps v-final/ and .tmp-notes/ that the user put in the index folder")
def _(cwd):
    index = cwd / "indexes/default"
    (index / "v-final").mkdir()
    (index / "v-final/thesis.tex").write_text("mine")
    (index / ".tmp-notes").mkdir()
    (index / ".tmp-notes/a.txt").write_text("mine")
    problem = expect_ok(cwd, "build", "in") or expect_ok(cwd, "build", "in")
    kept = (index / "v-final/thesis.tex").exists() and (index / ".tmp-notes/a.txt").exists()
    return problem or (None if kept else "the user's folders were removed")


@case("a file the user put into an old version folder keeps that version")
def _(cwd):
    old = live(cwd)
    (old / "notes.txt").write_text("mine")
    problem = expect_ok(cwd, "build", "in") or expect_ok(cwd, "build", "in")
    return problem or (None if (old / "notes.txt").exists() else "removed with the old version")


@case("CURRENT replaced by a symlink: one line, never followed")
def _(cwd):
    index = cwd / "indexes/default"
    (cwd / "elsewhere").write_text((index / "CURRENT").read_text())
    (index / "CURRENT").unlink()
    (index / "CURRENT").symlink_to(cwd / "elsewhere")
    before = (cwd / "elsewhere").read_text()
    problem = expect_error(cwd, "build", "in", keep_index=False)
    return problem or (None if (cwd / "elsewhere").read_text() == before else "wrote through the link")


@case("a stored file replaced by a link to identical bytes: verify refuses it")
def _(cwd):
    path = live(cwd) / "vectors.npy"
    (cwd / "copy.npy").write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(cwd / "copy.npy")
    return expect_error(cwd, "info", "--verify", keep_index=False)


@case(".lock planted as a symlink in an index folder: one line, target unchanged")
def _(cwd):
    index = cwd / "indexes/default"
    (cwd / "secret").write_text("")
    (index / ".lock").unlink()
    (index / ".lock").symlink_to(cwd / "secret")
    return expect_error(cwd, "build", "in")


@case("cache.sqlite planted as a symlink to an empty file: not followed, the file stays empty")
def _(cwd):
    (cwd / "private.db").write_bytes(b"")
    (cwd / "indexes/default/cache.sqlite").symlink_to(cwd / "private.db")
    problem = expect_ok(cwd, "build", "in")
    return problem or (None if (cwd / "private.db").read_bytes() == b"" else "SQLite wrote through the link")


@case("the shared embeddings.sqlite is a symlink: one line")
def _(cwd):
    cache = CASE_CACHE[0] / "embeddings.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{cache}{suffix}").unlink(missing_ok=True)
    (cwd / "private.db").write_bytes(b"")
    cache.symlink_to(cwd / "private.db")
    problem = expect_error(cwd, "build", "in")
    return problem or (None if (cwd / "private.db").read_bytes() == b"" else "wrote through the link")


@case("papers cache info when the cache is a symlink: one line")
def _(cwd):
    cache = CASE_CACHE[0] / "embeddings.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{cache}{suffix}").unlink(missing_ok=True)
    cache.symlink_to(cwd / "nowhere.db")
    return expect_error(cwd, "cache", "info", keep_index=False)


@case("papers cache clear, then a build: every paper encoded again, the index verifies")
def _(cwd):
    problem = expect_ok(cwd, "cache", "clear")
    code, stdout, stderr = papers(cwd, "build", "in")
    if code or "encoded 6, reused 0" not in stdout:
        return f"exit {code}: {stdout.strip()} {stderr.strip()[-200:]}"
    return problem or expect_ok(cwd, "info", "--verify")


@case("papers cache info with no cache yet: empty, and none is made")
def _(cwd):
    shutil.rmtree(CASE_CACHE[0])
    code, stdout, _ = papers(cwd, "cache", "info", "--format", "json")
    if code or json.loads(stdout)["entries"] != 0:
        return f"exit {code}: {stdout}"
    return "a cache file was made" if (CASE_CACHE[0] / "embeddings.sqlite").exists() else None


@case("a second index over the same papers encodes none")
def _(cwd):
    code, stdout, stderr = papers(cwd, "build", "in", "--index", "second")
    return None if code == 0 and "encoded 0, reused 6" in stdout else f"exit {code}: {stdout.strip()} {stderr[-200:]}"


@case("two builds of different indexes at once share the cache")
def _(cwd):
    write_corpus(cwd / "more", PAPERS + [{"id": "x", "abstract": "Another paper on graphs and kernels."}])
    builds = [spawn(cwd, "build", source, "--index", name) for source, name in (("in", "one"), ("more", "two"))]
    outputs = [build.communicate(timeout=300) for build in builds]
    if any(build.returncode for build in builds):
        return f"a build failed: {outputs}"
    return expect_ok(cwd, "info", "--index", "one", "--verify") or expect_ok(cwd, "info", "--index", "two", "--verify")


@case("a cache row of another dimension: encoded again, no traceback")
def _(cwd):
    import sqlite3
    import zlib

    forged = b"\0\0\x80?" * 3
    with sqlite3.connect(CASE_CACHE[0] / "embeddings.sqlite") as db:
        db.execute("UPDATE vectors SET dimension = 3, vector = ?, checksum = ? WHERE rowid = (SELECT min(rowid) FROM vectors)",
                   (forged, zlib.crc32(forged)))
    db.close()
    code, stdout, stderr = papers(cwd, "build", "in")
    return None if code == 0 and "encoded 1, reused 5" in stdout else f"exit {code}: {stdout.strip()} {stderr[-300:]}"


@case("a forged manifest without a model: one line")
def _(cwd):
    reseal(cwd / "indexes/default", lambda manifest: manifest.pop("model"))
    return expect_error(cwd, "info", keep_index=False) or expect_error(cwd, "search", "private", keep_index=False)


@case("a forged manifest whose paper count is a string: one line")
def _(cwd):
    reseal(cwd / "indexes/default", lambda manifest: manifest.update(paper_count="6"))
    return expect_error(cwd, "like", "dp1", keep_index=False)


@case("an IVF index whose ids are out of range: one line")
def _(cwd):
    import faiss
    import numpy as np

    problem = expect_ok(cwd, "build", "in", "--index-type", "ivf")
    version = live(cwd)
    index = faiss.read_index(str(version / "faiss.index"))
    vectors = np.load(version / "vectors.npy")
    index.reset()
    index.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64) + 10**6)
    faiss.write_index(index, str(version / "faiss.index"))
    reseal(cwd / "indexes/default")
    return problem or expect_error(cwd, "like", "dp1", keep_index=False)


@case("a .npy header claiming 10^11 rows: damage, not 'out of memory'")
def _(cwd):
    path = live(cwd) / "lexical/column_max.npy"
    data = path.read_bytes()
    header = data[:128].decode("latin-1")
    start = header.index("'shape': (") + len("'shape': (")
    forged = (header[:start] + "100000000000," + header[header.index(")", start):]).ljust(127)[:127] + "\n"
    path.write_bytes(forged.encode("latin-1") + data[128:])
    reseal(cwd / "indexes/default")
    code, _, stderr = papers(cwd, "search", "private", "--mode", "lexical")
    return one_error_line(code, stderr) or ("said out of memory" if "out of memory" in stderr else None)


@case("evaluate --index default (an index of other papers): refused, index unchanged")
def _(cwd):
    (cwd / "c.jsonl").write_text('{"id": "q", "abstract": "Sparse attention."}\n{"id": "a", "abstract": "Dense."}\n')
    (cwd / "q.tsv").write_text("query_id\tpaper_id\tfacet\nq1\tq\tmethod\n")
    (cwd / "r.txt").write_text("q1 0 a 2\n")
    return expect_error(cwd, "evaluate", "--corpus", "c.jsonl", "--queries", "q.tsv", "--qrels", "r.txt",
                        "--index", "default")


@case("--out of 243 characters: written")
def _(cwd):
    name = "r" * 240 + ".md"
    problem = expect_ok(cwd, "related-work", "--all", "--out", name)
    return problem or (None if (cwd / name).is_file() else "no file")


@case("--out whose name is a planted symlink: replaced, the linked file untouched")
def _(cwd):
    (cwd / "thesis.tex").write_text("mine")
    (cwd / "handout.md").symlink_to(cwd / "thesis.tex")
    problem = expect_ok(cwd, "related-work", "--all", "--out", "handout.md")
    if (cwd / "thesis.tex").read_text() != "mine":
        return "wrote through the link"
    return problem or (None if not (cwd / "handout.md").is_symlink() else "still a link")


@case("SIGINT during map --out: exit 130, one line, no partial file")
def _(cwd):
    write_corpus(cwd / "big", [{"id": f"b{i}", "abstract": f"Paper {i} about topic{i % 17} and word{i % 5}."}
                               for i in range(3000)])
    if papers(cwd, "build", "big", "--index", "big")[0]:
        raise RuntimeError("build failed")
    process = subprocess.Popen([sys.executable, str(LAUNCHER), "map", "--index", "big", "--out", "m.html"], cwd=cwd,
                               env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    if process.returncode == 0:
        raise Skip("the map was written before the signal came")
    left = [p.name for p in cwd.iterdir() if "partial" in p.name or p.name == "m.html"]
    lines = [line for line in stderr.strip().splitlines() if not PHASE_LINE.search(line)]  # progress
    if process.returncode != 130 or "Aborted" in stderr or len(lines) != 1 or not lines[0].startswith("interrupted: "):
        return f"exit {process.returncode}: {stderr.strip()[-200:]!r}"
    return f"left {left}" if left else None


@case("second user plants links at the next PIDs' --out temporary names: nothing of ours overwritten")
def _(cwd):
    shared = shared_folder()
    try:
        secret = cwd / "thesis.tex"
        secret.write_text("mine")
        last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
        names = [f".h.partial-{pid}.md" for pid in range(last + 1, last + 300)]
        as_nobody(f"import os\nfor n in {names!r}:\n    os.symlink({str(secret)!r}, os.path.join({str(shared)!r}, n))\n")
        problem = expect_ok(cwd, "related-work", "--all", "--out", str(shared / "h.md"))
        return problem or (None if secret.read_text() == "mine" else "overwrote the first user's file")
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@case("second user's .papers-partial file in a shared --out folder: left alone")
def _(cwd):
    shared = shared_folder()
    try:
        theirs = shared / ".papers-partial-999999-deadbeef"
        as_nobody(f"open({str(theirs)!r}, 'w').write('theirs')\n")
        problem = expect_ok(cwd, "related-work", "--all", "--out", str(shared / "h.md"))
        return problem or (None if theirs.exists() else "removed another user's file")
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@case("second user replaces a shared index's .lock with a file of theirs: refused, one line")
def _(cwd):
    shared = shared_folder()
    try:
        index = shared / "idx"
        problem = expect_ok(cwd, "build", "in", "--index", str(index))
        index.chmod(0o777)
        (index / ".lock").unlink()
        as_nobody(f"open({str(index / '.lock')!r}, 'w').close()\n")
        return problem or expect_error(cwd, "build", "in", "--index", str(index), keep_index=False)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@case("a damaged ONNX export in the index: the rebuild does not carry it over")
def _(cwd):
    # The fake model has no export (tests/build_launcher.py): checked at the library level instead.
    sys.path.insert(0, str(REPO))
    from recommender.index.writer import link_checked

    source, target = cwd / "src", cwd / "dst"
    source.mkdir()
    (source / "model.onnx").write_bytes(b"good")
    import hashlib

    record = {"model.onnx": {"bytes": 4, "sha256": hashlib.sha256(b"good").hexdigest()}}
    (source / "model.onnx").write_bytes(b"bad!")
    if link_checked(source, target, record) or target.exists():
        return "a damaged file was linked"
    (source / "model.onnx").unlink()
    (cwd / "good").write_bytes(b"good")
    (source / "model.onnx").symlink_to(cwd / "good")
    return "a link was linked" if link_checked(source, target, record) else None

# ================================================================ round three (issue 22)
# Further cases in the families of issue 22, each written against the behaviour the issue
# asks for (the expected line or outcome), not against what the code did when written.


def build_corpus(cwd: Path, papers_list, index: str, name="papers.jsonl", folder=None) -> None:
    """Write papers into a folder of their own and build them into `index` (a harness failure if refused)."""
    folder = folder or cwd / f"src-{index}"
    write_corpus(folder, papers_list, name)
    code, _, stderr = papers(cwd, "build", str(folder.relative_to(cwd)), "--index", index)
    if code:
        raise RuntimeError(f"building {index} failed: {stderr.strip()[-300:]}")


def tree_snapshot(folder: Path) -> dict:
    """Every entry under a folder (links as their target, files as their bytes): what `nothing changed` compares."""
    found = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_file():
            found[key] = ("file", path.read_bytes())
        else:
            found[key] = ("dir",)
    return found


def refused_and_unchanged(cwd: Path, folder: Path, *args, also: Path | None = None) -> str | None:
    """The command fails in one line and nothing under `folder` (or `also`) changes."""
    before = tree_snapshot(folder), tree_snapshot(also) if also else None
    code, _, stderr = papers(cwd, *args)
    if code == 0:
        changed = before != (tree_snapshot(folder), tree_snapshot(also) if also else None)
        return "exit 0, accepted" + (" and changed the folder" if changed else "")
    problem = one_error_line(code, stderr, expected_code=code if code in (1, 2) else 1)
    if problem:
        return problem
    if before != (tree_snapshot(folder), tree_snapshot(also) if also else None):
        return "refused, but the folder changed"
    return None


# -- a folder of the user's given as --index


@case("--index on a folder holding a file v-2024.pdf and a .tmp-draft file: refused, both kept")
def _(cwd):
    (cwd / "mydocs").mkdir()
    (cwd / "mydocs/v-2024.pdf").write_bytes(b"%PDF-1.4 thesis")
    (cwd / "mydocs/.tmp-draft").write_text("draft\n")
    return refused_and_unchanged(cwd, cwd / "mydocs", "build", "in", "--index", "./mydocs")


@case("--index on a folder whose v-old is a link to another folder of the user's: refused, target kept")
def _(cwd):
    (cwd / "elsewhere").mkdir()
    (cwd / "elsewhere/chapter.tex").write_text("\\chapter{One}\n")
    (cwd / "mydocs").mkdir()
    (cwd / "mydocs/v-old").symlink_to(cwd / "elsewhere")
    return refused_and_unchanged(cwd, cwd / "mydocs", "build", "in", "--index", "./mydocs", also=cwd / "elsewhere")


@case("--index on the input folder itself (papers.jsonl in it): refused, nothing changed")
def _(cwd):
    return refused_and_unchanged(cwd, cwd / "in", "build", "in", "--index", "./in")


@case("a .tmp-notes link in an index folder: the folder it points to survives a rebuild")
def _(cwd):
    (cwd / "notes").mkdir()
    (cwd / "notes/todo.txt").write_text("read dp1\n")
    (cwd / "indexes/default/.tmp-notes").symlink_to(cwd / "notes")
    problem = expect_ok(cwd, "build", "in")
    return problem or (None if (cwd / "notes/todo.txt").exists() else "the linked folder's file was deleted")


# -- files written through planted links


def next_pids(count=400) -> range:
    try:
        last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    except (OSError, ValueError):
        raise Skip("cannot read /proc/sys/kernel/ns_last_pid to foresee the next PIDs")
    return range(last + 1, last + 1 + count)


def nobody_command(*command: str) -> list[str]:
    """A command run as the user nobody (root only)."""
    need_overrides_droppable()
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", *command]


def plant_partial_links(folder: Path, out: str, victim: Path, second_user: bool) -> None:
    """Links named as the next runs' hidden partial files for `--out out`, pointing at the victim."""
    stem, suffix = Path(out).stem, Path(out).suffix
    names = [f".{stem}.partial-{pid}{suffix}" for pid in next_pids()]
    if second_user:
        folder.chmod(0o777)  # a shared project folder another user can write
        script = "import os, sys\nfor n in sys.argv[2:]: os.symlink(sys.argv[1], n)\n"
        done = subprocess.run(nobody_command(sys.executable, "-c", script, str(victim), *names), cwd=folder,
                              capture_output=True, text=True)
        if done.returncode:
            raise Skip(f"cannot plant links as nobody: {done.stderr.strip()[-200:]}")
    else:
        for name in names:
            (folder / name).symlink_to(victim)


def victim_file(cwd: Path) -> Path:
    victim = cwd / "private" / "thesis.tex"
    victim.parent.mkdir()
    victim.write_text("\\title{Five years of work}\n")
    return victim


def written_through(cwd: Path, out: str, *args, second_user=False) -> str | None:
    victim = victim_file(cwd)
    (cwd / "shared").mkdir()
    shutil.copytree(cwd / "indexes", cwd / "shared/indexes")
    plant_partial_links(cwd / "shared", out, victim, second_user)
    code, _, stderr = papers(cwd / "shared", *args, "--out", out)
    if victim.read_text() != "\\title{Five years of work}\n":
        return "the victim's file was overwritten through a planted link"
    if code == 0:
        target = cwd / "shared" / out
        return None if target.is_file() and not target.is_symlink() else f"{out} not written"
    return one_error_line(code, stderr)


@case("map --out, partial-file links planted by another user (nobody): the victim's file unchanged")
def _(cwd):
    return written_through(cwd, "m.html", "map", "--n", "2", second_user=True)


@case("sessions --out, partial-file links planted by another user (nobody): the victim's file unchanged")
def _(cwd):
    return written_through(cwd, "s.md", "sessions", "--n", "2", second_user=True)


@case("related-work --format csv --out, links planted by nobody: the victim's file unchanged")
def _(cwd):
    return written_through(cwd, "r.csv", "related-work", "--all", "--format", "csv", second_user=True)


@case("cache.sqlite as a dangling link planted by nobody: no file created at its target")
def _(cwd):
    index = cwd / "indexes/default"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index / 'cache.sqlite'}{suffix}").unlink(missing_ok=True)
    index.chmod(0o777)
    target = cwd / "private/planted.sqlite"
    target.parent.mkdir()
    done = subprocess.run(nobody_command("ln", "-s", str(target), str(index / "cache.sqlite")), capture_output=True, text=True)
    if done.returncode:
        raise Skip(f"cannot plant a link as nobody: {done.stderr.strip()}")
    write_corpus(cwd / "new", PAPERS[:4])
    code, _, stderr = papers(cwd, "build", "new")
    if target.exists():
        return "a cache was created at the link's target"
    return None if code == 0 else one_error_line(code, stderr)


@case(".lock planted as a dangling link: no file created at its target")
def _(cwd):
    lock = cwd / "indexes/default/.lock"
    lock.unlink(missing_ok=True)
    target = cwd / "private/created-by-papers"
    target.parent.mkdir()
    lock.symlink_to(target)
    code, _, stderr = papers(cwd, "build", "in")
    if target.exists():
        return "the lock was created at the link's target"
    return None if code == 0 else one_error_line(code, stderr)


@case(".CURRENT.tmp-PID links planted for the next PIDs: the user's file unchanged after a build")
def _(cwd):
    victim = victim_file(cwd)
    index = cwd / "indexes/default"
    for pid in next_pids():
        (index / f".CURRENT.tmp-{pid}").symlink_to(victim)
    problem = expect_ok(cwd, "build", "in")
    if victim.read_text() != "\\title{Five years of work}\n":
        return "CURRENT was written through a planted link"
    return problem or expect_ok(cwd, "info", "--verify")


@case("a v-* link planted by nobody in an index folder: its target folder survives a rebuild")
def _(cwd):
    (cwd / "private").mkdir()
    (cwd / "private/manifest.json").write_text("{}")
    (cwd / "private/data.txt").write_text("mine\n")
    index = cwd / "indexes/default"
    index.chmod(0o777)
    done = subprocess.run(nobody_command("ln", "-s", str(cwd / "private"), str(index / "v-20990101T000000-1-abcdef")),
                          capture_output=True, text=True)
    if done.returncode:
        raise Skip(f"cannot plant a link as nobody: {done.stderr.strip()}")
    problem = expect_ok(cwd, "build", "in")
    return problem or (None if (cwd / "private/data.txt").exists() else "the linked folder was emptied")


# -- hostile data in outputs


HOSTILE = [
    {"id": "x1", "title": '<img src=x onerror="alert(1)"> Private training',
     "abstract": "Differentially private training of language models. <script>alert(2)</script> "
                 "[read more](javascript:alert(3)) <a href=\"javascript:alert(6)\">here</a>"},
    {"id": "x2", "title": "[Fast private kernels](javascript:alert(4))",
     "abstract": "Private training with fused gradient clipping kernels for language models. "
                 "<svg onload=alert(5)>"},
    {"id": "x-3<b>", "title": "<iframe src=javascript:alert(7)></iframe>",
     "abstract": "Video aesthetics assessment with professional annotations <details open ontoggle=alert(8)>."},
    *PAPERS,
]


class _Dangerous:
    """What a browser would run in HTML: script-ish elements, on* attributes, javascript: URLs."""

    def __init__(self):
        from html.parser import HTMLParser

        self.found = []
        found = self.found

        class Parser(HTMLParser):
            def handle_starttag(self, tag, attrs):
                if tag in ("script", "img", "svg", "iframe", "object", "embed", "details"):
                    found.append(f"<{tag}>")
                for name, value in attrs:
                    if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                        found.append(f"{tag} {name}={value!r}")

        self.parser = Parser()


def markdown_runs(text: str) -> list[str]:
    """What runs when the Markdown is rendered as CommonMark with HTML allowed and opened in a browser."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        raise Skip("needs markdown-it-py (a CommonMark renderer): pip install markdown-it-py")
    html = MarkdownIt("commonmark").render(text)
    checker = _Dangerous()
    checker.parser.feed(html)
    return checker.found


def hostile_markdown(cwd, *args) -> str | None:
    build_corpus(cwd, HOSTILE, "hostile")
    code, stdout, stderr = papers(cwd, *args, "--index", "hostile")
    if code:
        return f"exit {code}: {stderr.strip()[-200:]}"
    if "alert(" not in stdout:
        return "the hostile papers are not in the output: the case tests nothing"
    runs = markdown_runs(stdout)
    return f"rendered, it runs: {runs[:4]}" if runs else None


@case("like --format markdown with script-bearing titles and IDs: nothing runs when rendered")
def _(cwd):
    return hostile_markdown(cwd, "like", "dp1", "--format", "markdown", "--wide")


@case("search --format markdown with script-bearing titles: nothing runs when rendered")
def _(cwd):
    return hostile_markdown(cwd, "search", "private training kernels", "--format", "markdown", "--wide")


@case("list --format markdown with script-bearing titles and IDs: nothing runs when rendered")
def _(cwd):
    return hostile_markdown(cwd, "list", "--format", "markdown", "--wide")


@case("show --format markdown of a paper with a script in its abstract: nothing runs when rendered")
def _(cwd):
    return hostile_markdown(cwd, "show", "x1", "--format", "markdown")


@case("show --format markdown of a paper whose ID holds HTML: nothing runs when rendered")
def _(cwd):
    return hostile_markdown(cwd, "show", "x-3<b>", "--format", "markdown")


@case("related-work (markdown) with script-bearing titles and abstracts: nothing runs when rendered")
def _(cwd):
    return hostile_markdown(cwd, "related-work", "--all", "--why")


@case("sessions (markdown) with script-bearing titles: nothing runs when rendered")
def _(cwd):
    return hostile_markdown(cwd, "sessions", "--n", "2")


BIBTEX_STYLE = """ENTRY { title abstract url note author year } {} {}
FUNCTION {either} { duplicate$ missing$ { pop$ "" } 'skip$ if$ }
FUNCTION {default.type} {
  "KEY " cite$ * write$ newline$
  "TITLE " title either * write$ newline$
  "ABSTRACT " abstract either * write$ newline$
  "URL " url either * write$ newline$
  "NOTE " note either * write$ newline$
}
FUNCTION {article} { default.type }
FUNCTION {misc} { default.type }
FUNCTION {inproceedings} { default.type }
READ
ITERATE {call.type$}
"""


def bibtex_reads(folder: Path, text: str) -> tuple[dict, str]:
    """The fields the real `bibtex` program reads from `text`, per key, and its log."""
    if shutil.which("bibtex") is None:
        raise Skip("needs the bibtex program (Debian: texlive-binaries)")
    folder.mkdir(exist_ok=True)
    (folder / "refs.bib").write_text(text, encoding="utf-8")
    (folder / "fields.bst").write_text(BIBTEX_STYLE)
    (folder / "job.aux").write_text("\\citation{*}\n\\bibstyle{fields}\n\\bibdata{refs}\n")
    done = subprocess.run(["bibtex", "-terse", "job"], cwd=folder, capture_output=True, text=True,
                          env=dict(os.environ, max_print_line="100000"))
    entries, key = {}, None
    bbl = folder / "job.bbl"
    for line in (bbl.read_text(errors="replace").splitlines() if bbl.exists() else []):
        label, _, value = line.partition(" ")
        if label == "KEY":
            key = value
            entries[key] = {}
        elif key is not None and label in ("TITLE", "ABSTRACT", "URL", "NOTE"):
            entries[key][label.lower()] = value
    log = (folder / "job.blg").read_text(errors="replace") if (folder / "job.blg").exists() else ""
    return entries, done.stdout + log


def injected_bibtex(cwd, records, *args) -> str | None:
    """Build `records`, write related-work as BibTeX; bibtex and bibtexparser must read no url or note
    field, and every entry's title and abstract."""
    build_corpus(cwd, records, "bib")
    code, stdout, stderr = papers(cwd, "related-work", "--all", "--format", "bibtex", "--index", "bib", *args)
    if code:
        return f"exit {code}: {stderr.strip()[-200:]}"
    entries, log = bibtex_reads(cwd / "bibtex", stdout)
    problems = []
    for key, fields in entries.items():
        if fields.get("url") or fields.get("note"):
            problems.append(f"bibtex reads {key}: url={fields.get('url')!r} note={fields.get('note')!r}")
        if not fields.get("abstract") or not fields.get("title"):
            problems.append(f"bibtex lost {key}'s title or abstract")
    if len(entries) < len(records):
        problems.append(f"bibtex read {len(entries)} entries of {len(records)}")
    if "error message" in log or "I was expecting" in log:
        problems.append("bibtex errors: " + " | ".join(line for line in log.splitlines() if line.strip())[:200])
    import bibtexparser

    library = bibtexparser.parse_string(stdout)
    for entry in library.entries:
        extra = {f.key for f in entry.fields} & {"url", "note"}
        if extra:
            problems.append(f"bibtexparser reads {entry.key}: {sorted(extra)}")
    if library.failed_blocks:
        problems.append(f"bibtexparser failed on {len(library.failed_blocks)} blocks")
    return "; ".join(problems)[:400] or None


@case("BibTeX: an unbalanced } in a title closes no field (bibtex and bibtexparser)")
def _(cwd):
    return injected_bibtex(cwd, [{"id": "b1", "title": "Gradients}, url = {javascript:alert(1)}, note = {x",
                                  "abstract": "Private training of language models."}, *PAPERS[1:3]])


@case("BibTeX: \\} outside maths in an abstract adds no field")
def _(cwd):
    return injected_bibtex(cwd, [{"id": "b1", "title": "Sets",
                                  "abstract": "The set \\{a\\} \\}, url = {javascript:alert(1)}, note = {x is small."},
                                 *PAPERS[1:3]])


@case("BibTeX: an abstract holding @comment{ and # and % keeps its entry and adds no field")
def _(cwd):
    return injected_bibtex(cwd, [{"id": "b1", "title": "Comments # and 100% sure",
                                  "abstract": "@comment{ x } @misc{evil, url = {javascript:alert(1)}} # a % b"},
                                 *PAPERS[1:3]])


@case("BibTeX: an author holding } and \" adds no field")
def _(cwd):
    return injected_bibtex(cwd, [{"id": "b1", "title": "Authors", "authors": ['Smith}, url = {javascript:alert(1)', 'O"Neil'],
                                  "abstract": "Private training of language models."}, *PAPERS[1:3]])


@case("BibTeX: real LaTeX \\left. x \\right\\} in maths: bibtex keeps the abstract")
def _(cwd):
    return injected_bibtex(cwd, [{"id": "b1", "title": "Piecewise",
                                  "abstract": "We bound $\\left. \\frac{a}{b} \\right\\}_{x=0}$ for private training."}, *PAPERS[1:3]])


def csv_cells(text: str) -> list[list[str]]:
    import csv
    import io

    return list(csv.reader(io.StringIO(text, newline="")))


FORMULAS = [
    {"id": "=1+1", "title": "=HYPERLINK(\"http://evil.example\",\"click\")", "authors": ["@SUM(A1:A9)"],
     "abstract": "Private training of language models with formulas."},
    {"id": "f2", "title": "+cmd|' /C calc'!A0", "abstract": "Differentially private fine-tuning of language models."},
    {"id": "f3", "title": "-2+3", "abstract": "Video quality assessment models trained on annotations."},
    {"id": "f4", "title": "\t=1+2", "abstract": "Linear recurrent networks with gating and fast kernels."},
    {"id": "f5", "title": "\r=1+3", "abstract": "Gated linear recurrent networks compete with transformers."},
]


def is_number(cell: str) -> bool:
    """A plain number (a negative score): a spreadsheet reads it as data, and OWASP leaves it alone."""
    try:
        float(cell)
    except ValueError:
        return False
    return cell.strip() == cell


def formula_cells(cwd, *args) -> str | None:
    build_corpus(cwd, FORMULAS, "csv")
    code, stdout, stderr = papers(cwd, *args, "--format", "csv", "--index", "csv")
    if code:
        return f"exit {code}: {stderr.strip()[-200:]}"
    rows = csv_cells(stdout)
    live = sorted({cell for row in rows[1:] for cell in row if cell[:1] in ("=", "+", "-", "@", "\t", "\r")
                   and not is_number(cell)})
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        return f"rows of different widths {sorted(widths)}: a cell broke the table"
    return f"cells a spreadsheet runs: {live[:4]}" if live else None


@case("list --format csv with =, +, -, tab and CR titles and an = ID: every such cell defused")
def _(cwd):
    return formula_cells(cwd, "list")


@case("like --format csv with formula titles and IDs: every such cell defused")
def _(cwd):
    return formula_cells(cwd, "like", "f2", "-k", "5")


@case("search --format csv with formula titles: every such cell defused")
def _(cwd):
    return formula_cells(cwd, "search", "private language models", "-k", "5")


@case("related-work --format csv with formula titles, IDs and authors: every such cell defused")
def _(cwd):
    return formula_cells(cwd, "related-work", "--all")


@case("show --format csv of a paper whose ID and author start with = and @: defused")
def _(cwd):
    return formula_cells(cwd, "show", "=1+1")


def hint_commands(stderr: str) -> list[list[str]]:
    """The commands shown in backticks, split as a POSIX shell would (`;`, `|` and `&` end a command)."""
    import re
    import shlex

    commands = []
    for quoted in re.findall(r"`([^`]*)`", stderr):
        try:
            lexer = shlex.shlex(quoted, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            argv = list(lexer)
        except ValueError:
            argv = ["<unparsable>", quoted]
        if "$" in quoted and not any(f"'{part}'" in quoted for part in argv if "$" in part):
            argv = ["<expands $ outside single quotes>", quoted]
        commands.append(argv)
    return commands


def wrong_hint(stderr: str, folder: Path, cwd: Path) -> str | None:
    commands = hint_commands(stderr)
    if not commands:
        return f"no command in the hint: {stderr.strip()}"
    for argv in commands:
        if argv[0].startswith("<"):
            return f"{argv[0]}: {argv[1]}"
        if argv[:2] == ["papers", "build"]:
            index = argv[argv.index("--index") + 1] if "--index" in argv and argv[-1] != "--index" else None
            if index is None or len(argv) != argv.index("--index") + 2 or Path(cwd, index).resolve() != folder.resolve():
                return f"the hint, pasted, runs {argv}: {stderr.strip()[-160:]}"
    return None


def damaged_hint(cwd: Path, folder_name: str) -> str | None:
    """Damage an index kept in a folder with shell metacharacters; the advised command, pasted, must
    rebuild exactly that folder and run nothing else."""
    folder = cwd / folder_name
    build_corpus(cwd, PAPERS, "./" + folder_name)
    (next(folder.glob("v-*")) / "papers.jsonl").write_text("damaged\n")
    code, _, stderr = papers(cwd, "like", "dp1", "--index", "./" + folder_name)
    problem = one_error_line(code, stderr)
    if problem:
        return problem
    return wrong_hint(stderr, folder, cwd)


@case("hint for a damaged index in a folder named a;touch pwned: quoted for the shell")
def _(cwd):
    return damaged_hint(cwd, "a;touch pwned")


@case("hint for a damaged index in a folder named $(id) with a space: quoted for the shell")
def _(cwd):
    return damaged_hint(cwd, "my $(id) idx")


@case("hint for a damaged index in a folder named it's: quoted for the shell")
def _(cwd):
    return damaged_hint(cwd, "it's")


@case("hint for a missing index named a|b: quoted for the shell")
def _(cwd):
    code, _, stderr = papers(cwd, "like", "dp1", "--index", "./a|b")
    return one_error_line(code, stderr) or wrong_hint(stderr, cwd / "a|b", cwd)


# -- bad input in real shapes


def builds_and_shows(cwd, text: str, name: str, paper: str, expected: dict, encoding="utf-8") -> str | None:
    folder = cwd / "lib"
    folder.mkdir()
    (folder / name).write_bytes(text.encode(encoding))
    code, _, stderr = papers(cwd, "build", "lib", "--index", "lib")
    if code:
        return f"exit {code}: {stderr.strip()[-250:]}"
    code, stdout, stderr = papers(cwd, "show", paper, "--format", "json", "--index", "lib")
    if code:
        return f"show: exit {code}: {stderr.strip()[-200:]}"
    shown = json.loads(stdout)
    wrong = {field: shown.get(field) for field, value in expected.items() if shown.get(field) != value}
    return f"read as {wrong}" if wrong else None


@case("BibTeX: a Zotero @incollection with an editor field builds")
def _(cwd):
    return builds_and_shows(cwd, """@incollection{smith2020chapter,
  title = {Private Training in Practice},
  author = {Smith, Jane and Doe, Ann},
  editor = {Miller, Bob and {Association for Computing Machinery}},
  booktitle = {Handbook of Privacy},
  year = {2020},
  abstractNote = {Differentially private training of language models in practice.},
  abstract = {Differentially private training of language models in practice.}
}
""", "zotero.bib", "smith2020chapter", {"year": 2020})


@case("BibTeX: a DBLP @proceedings with editors only builds")
def _(cwd):
    return builds_and_shows(cwd, """@proceedings{DBLP:conf/icml/2021,
  editor    = {Marina Meila and Tong Zhang},
  title     = {Proceedings of the 38th International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {139},
  publisher = {{PMLR}},
  year      = {2021},
  abstract  = {The proceedings of a machine learning conference on many topics.}
}
@article{a1, title = {Gated Linear RNNs}, author = {Lee, K.}, year = 2022,
  abstract = {Gated linear recurrent networks compete with transformers.}}
""", "dblp.bib", "a1", {"year": 2022})


@case("BibTeX: crossref inheritance gives the entry its proceedings' year")
def _(cwd):
    return builds_and_shows(cwd, """@inproceedings{paper1,
  title = {Fast Private Training},
  author = {Smith, Jane},
  crossref = {conf21},
  abstract = {Differentially private training of language models.}
}
@proceedings{conf21,
  title = {Proceedings of the Conference},
  booktitle = {Proceedings of the Conference},
  year = {2021},
  editor = {Doe, Ann}
}
""", "crossref.bib", "paper1", {"year": 2021})


@case("BibTeX: @string concatenation with # builds the title")
def _(cwd):
    return builds_and_shows(cwd, """@string{deep = "Deep"}
@string{learn = {Learning}}
@article{c1,
  title = deep # " " # learn # { for Private Training},
  author = {Smith, Jane},
  year = 2020,
  abstract = {Differentially private training of language models.}
}
""", "strings.bib", "c1", {"title": "Deep Learning for Private Training"})


@case("BibTeX: a month macro (month = jan) and a numeric year read")
def _(cwd):
    return builds_and_shows(cwd, """@article{m1,
  title = {Gated Linear RNNs},
  author = {Lee, Kim},
  month = jan,
  year = 2023,
  abstract = {Gated linear recurrent networks compete with transformers.}
}
""", "months.bib", "m1", {"year": 2023})


@case("--from file with a UTF-8 BOM and CRLF: related-work finds the papers")
def _(cwd):
    (cwd / "friday.txt").write_bytes("\ufeffdp1\r\nvid1\r\n".encode())
    code, stdout, stderr = papers(cwd, "related-work", "--from", "friday.txt", "--format", "json")
    if code:
        return f"exit {code}: {stderr.strip()[-200:]}"
    return None if "dp1" in stdout and "vid1" in stdout else f"papers missing: {stdout[:200]!r}"


@case("--exclude file with CRLF and a BOM: the papers are left out")
def _(cwd):
    (cwd / "read.txt").write_bytes("\ufeffdp2\r\nrnn1\r\n".encode())
    code, stdout, stderr = papers(cwd, "like", "dp1", "--exclude", "read.txt", "--format", "json")
    if code:
        return f"exit {code}: {stderr.strip()[-200:]}"
    shown = {row.get("id") for row in json.loads(stdout)} if stdout.strip().startswith("[") else set()
    left = shown & {"dp2", "rnn1"}
    return f"not excluded: {sorted(left)}" if left else None


@case("--exclude file in UTF-16 (Notepad's Unicode): read, or one line saying UTF-16")
def _(cwd):
    (cwd / "read.txt").write_bytes("dp2\r\nrnn1\r\n".encode("utf-16"))
    code, stdout, stderr = papers(cwd, "like", "dp1", "--exclude", "read.txt", "--format", "json")
    if code == 0:
        shown = {row.get("id") for row in json.loads(stdout)}
        return f"not excluded: {sorted(shown & {'dp2', 'rnn1'})}" if shown & {"dp2", "rnn1"} else None
    return one_error_line(code, stderr) or (None if "UTF-16" in stderr else f"not called UTF-16: {stderr.strip()}")


def bidi_ids(cwd, records) -> str | None:
    write_corpus(cwd / "bidi", records)
    code, stdout, stderr = papers(cwd, "build", "bidi", "--index", "bidi")
    if code:
        return one_error_line(code, stderr)
    code, stdout, stderr = papers(cwd, "list", "--index", "bidi", "--wide")
    hidden = [c for c in stdout if c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u2060\ufeff"]
    return f"shown raw: {sorted({hex(ord(c)) for c in hidden})}" if hidden else None


@case("IDs dp1 and dp1+U+200B (zero-width space): refused in one line or shown escaped")
def _(cwd):
    return bidi_ids(cwd, [PAPERS[0], {**PAPERS[1], "id": "dp1\u200b"}])


@case("an ID holding U+2066 and U+2069 (isolates): refused in one line or shown escaped")
def _(cwd):
    return bidi_ids(cwd, [PAPERS[0], {**PAPERS[1], "id": "\u2066dp\u2069x"}])


@case("an ID holding U+FEFF inside it: refused in one line or shown escaped")
def _(cwd):
    return bidi_ids(cwd, [PAPERS[0], {**PAPERS[1], "id": "dp\ufeff2"}])


@case("like with a reference holding U+202E: one line, the control not echoed raw")
def _(cwd):
    code, _, stderr = papers(cwd, "like", "1pd\u202e")
    return one_error_line(code, stderr) or ("echoed U+202E raw" if "\u202e" in stderr else None)


def utf16_input(cwd, name: str, text: str) -> str | None:
    (cwd / "u16").mkdir()
    (cwd / "u16" / name).write_bytes(text.encode("utf-16"))
    code, _, stderr = papers(cwd, "build", "u16", "--index", "u16")
    if code == 0:
        return None
    problem = one_error_line(code, stderr)
    if problem:
        return problem
    return None if "UTF-16" in stderr and "binary" not in stderr else f"not called UTF-16: {stderr.strip()}"


@case("a UTF-16 JSONL file: read, or one line saying UTF-16 (not binary)")
def _(cwd):
    return utf16_input(cwd, "papers.jsonl", "".join(json.dumps(p) + "\n" for p in PAPERS))


@case("a UTF-16 CSV file (Excel's CSV UTF-16): read, or one line saying UTF-16")
def _(cwd):
    return utf16_input(cwd, "papers.csv", "id,title,abstract\r\n" + "".join(
        f"{p['id']},{p['title'].replace(',', ' ')},{p['abstract'].replace(',', ' ')}\r\n" for p in PAPERS))


@case("a UTF-16 .bib file: read, or one line saying UTF-16")
def _(cwd):
    return utf16_input(cwd, "refs.bib", "".join(
        f"@article{{{p['id']}, title = {{{p['title']}}}, abstract = {{{p['abstract']}}}}}\n" for p in PAPERS))


# -- forged records


def live_folder(index: Path) -> Path:
    return index / (index / "CURRENT").read_text().split()[0]


def forge(index: Path, name: str | None = None, data: bytes | None = None, edit_manifest=None) -> None:
    """Rewrite a stored file (or the manifest) and its records, as someone who can write the index would:
    the new file's hash in the manifest, the manifest's hash in CURRENT."""
    import hashlib

    folder = live_folder(index)
    manifest = json.loads((folder / "manifest.json").read_text())
    if name is not None:
        (folder / name).unlink()  # hard-linked into other versions: never edit in place
        (folder / name).write_bytes(data)
        manifest["files"][name] = {**manifest["files"][name], "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if edit_manifest is not None:
        edit_manifest(manifest)
    raw = json.dumps(manifest, indent=1).encode()
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").write_bytes(raw)
    (index / "CURRENT").write_text(f"{folder.name} {hashlib.sha256(raw).hexdigest()}\n")


def embedding_caches(cwd: Path) -> list[Path]:
    """The SQLite embedding caches a build of indexes/default uses: beside the index, or in $PAPERS_CACHE."""
    places = [cwd / "indexes/default"] + ([Path(env()["PAPERS_CACHE"])] if env().get("PAPERS_CACHE") else [])
    return [path for place in places if place.is_dir() for path in sorted(place.rglob("*.sqlite"))]


@case("cache rows whose dimension column lies (CRC matching): re-encoded, exit 0")
def _(cwd):
    import sqlite3

    changed = 0
    for path in embedding_caches(cwd):
        connection = sqlite3.connect(path)
        with connection:
            for table, in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                columns = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
                if "dimension" in columns:
                    changed += connection.execute(f"UPDATE {table} SET dimension = dimension * 2").rowcount
        connection.close()
    if not changed:
        raise Skip("found no cached vectors to forge")
    (cwd / "in/more.jsonl").write_text(json.dumps({"id": "new1", "abstract": "A new paper on kernels."}) + "\n")
    return expect_ok(cwd, "build", "in") or expect_ok(cwd, "info", "--verify") or expect_ok(cwd, "like", "new1")


def forged_manifest_refused(cwd, edit) -> str | None:
    forge(cwd / "indexes/default", edit_manifest=edit)
    for args in (("like", "dp1"), ("search", "private"), ("info",)):
        code, _, stderr = papers(cwd, *args)
        if code == 0 and args != ("info",):
            return f"{' '.join(args)}: exit 0 on a forged manifest"
        if code:
            problem = one_error_line(code, stderr)
            if problem:
                return f"{' '.join(args)}: {problem}"
    return None


@case("forged manifest without its paper count and dimension: one line")
def _(cwd):
    def edit(manifest):
        for key in ("count", "dimension", "papers"):
            manifest.pop(key, None)

    return forged_manifest_refused(cwd, edit)


@case("forged manifest whose files entry is a list: one line")
def _(cwd):
    return forged_manifest_refused(cwd, lambda m: m.update(files=[]))


@case("forged manifest with a file's size given as a string: one line")
def _(cwd):
    def edit(manifest):
        first = sorted(manifest["files"])[0]
        manifest["files"][first]["bytes"] = "many"

    return forged_manifest_refused(cwd, edit)


@case("forged manifest naming ../CURRENT as a file: one line, nothing outside the version read as data")
def _(cwd):
    def edit(manifest):
        name = next(iter(manifest["files"]))
        manifest["files"]["../../../etc/passwd"] = manifest["files"][name]

    return forged_manifest_refused(cwd, edit)


def forged_faiss(cwd, index_type: str, change) -> str | None:
    import faiss

    build = papers(cwd, "build", "in", "--index", "forged", "--index-type", index_type)
    if build[0]:
        return f"build: {build[2].strip()[-200:]}"
    index = cwd / "indexes/forged"
    stored = faiss.read_index(str(live_folder(index) / "faiss.index"))
    change(stored, faiss)
    forge(index, "faiss.index", bytes(faiss.serialize_index(stored)))
    for args in (("like", "dp1", "--index", "forged"), ("search", "private training", "--index", "forged", "--mode", "dense")):
        code, stdout, stderr = papers(cwd, *args)
        if code == 0:
            return f"{args[0]}: exit 0 on forged ids: {stdout.strip()[:160]!r}"
        problem = one_error_line(code, stderr)
        if problem:
            return f"{args[0]}: {problem}"
    return None


@case("flat index with more vectors than papers (forged, hashes updated): one line")
def _(cwd):
    def add_rows(stored, faiss):
        vectors = np.random.default_rng(0).standard_normal((50, stored.d)).astype(np.float32)
        stored.add(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))

    return forged_faiss(cwd, "flat", add_rows)


@case("faiss.index forged with a huge vector count (hashes updated): damage, not out of memory")
def _(cwd):
    index = cwd / "indexes/default"
    raw = bytearray((live_folder(index) / "faiss.index").read_bytes())
    # IndexFlat: fourcc, d (int32), ntotal (int64) ...: claim 2**40 vectors.
    raw[8:16] = (1 << 40).to_bytes(8, "little")
    forge(index, "faiss.index", bytes(raw))
    code, _, stderr = papers(cwd, "search", "private training", "--mode", "dense")
    problem = one_error_line(code, stderr)
    if problem:
        return problem
    return f"called out of memory: {stderr.strip()}" if "memory" in stderr.lower() else None


# -- odd usage


@case("sessions --seed 2**32: one line (exit 2), no traceback")
def _(cwd):
    code, _, stderr = papers(cwd, "sessions", "--n", "2", "--seed", str(2 ** 32))
    return None if code == 0 and "Traceback" not in stderr else one_error_line(code, stderr, expected_code=2)


@case("map --seed -1: one line (exit 2), or a map")
def _(cwd):
    code, _, stderr = papers(cwd, "map", "--n", "2", "--seed", "-1", "--out", "m.html")
    return None if code == 0 and "Traceback" not in stderr else one_error_line(code, stderr, expected_code=2)


@case("map --seed 2**63: one line (exit 2)")
def _(cwd):
    code, _, stderr = papers(cwd, "map", "--n", "2", "--seed", str(2 ** 63), "--out", "m.html")
    return one_error_line(code, stderr, expected_code=2)


def to_full(cwd, *args) -> str | None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, str(LAUNCHER), *args], cwd=cwd, env=env(), stdout=full,
                              stderr=subprocess.PIPE, text=True)
    return one_error_line(done.returncode, done.stderr)


@case("papers --help > /dev/full: one line, non-zero")
def _(cwd):
    return to_full(cwd, "--help")


@case("papers --version > /dev/full: one line, non-zero")
def _(cwd):
    return to_full(cwd, "--version")


@case("papers related-work --help > /dev/full: one line, non-zero")
def _(cwd):
    return to_full(cwd, "related-work", "--help")


def opened(pid: int, name: str) -> bool:
    """Whether the process has a file of this name open (or mapped)."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
    return any(link.endswith("/" + name) for link in links) or ("/" + name) in maps


def interrupt_out(cwd, *args) -> str | None:
    """A 3,000-paper index; Ctrl-C once the command's output is under way: exit 130, the build's kind of
    line (not click's "Aborted!"), no file or partial left."""
    write_corpus(cwd / "big", [{"id": f"b{i}", "abstract": f"Paper {i} about topic{i % 17} and word{i % 5}."}
                               for i in range(3000)])
    if papers(cwd, "build", "big", "--index", "big")[0]:
        raise RuntimeError("build failed")
    process = spawn(cwd, *args, "--index", "big")
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:  # at work: the index open, or writing
        if list(cwd.glob(".*partial*")) or list(cwd.glob(".out*")) or opened(process.pid, "vectors.npy"):
            break
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    left = sorted(p.name for p in cwd.iterdir() if p.name.startswith(".out") or p.name.startswith("out.") or "partial" in p.name)
    if process.returncode == 0:
        return "finished before the signal: the case tests nothing"
    if left:
        return f"left behind: {left}"
    if process.returncode != 130:
        return f"exit {process.returncode}, expected 130: {stderr.strip()[-200:]!r}"
    if "Aborted!" in stderr or "Traceback" in stderr:
        return f"click's or Python's message: {stderr.strip()[-200:]!r}"
    return None


@case("Ctrl-C during sessions --out: exit 130, one line, no partial file")
def _(cwd):
    return interrupt_out(cwd, "sessions", "--n", "40", "--out", "out.md")


@case("Ctrl-C during related-work --format bibtex --out: exit 130, one line, no partial file")
def _(cwd):
    return interrupt_out(cwd, "related-work", "--all", "--format", "bibtex", "--out", "out.bib")


def long_out(cwd, *args, suffix: str) -> str | None:
    name = "r" * (243 - len(suffix)) + suffix
    code, _, stderr = papers(cwd, *args, "--out", name)
    if code:
        return f"exit {code}: {stderr.strip()[-200:]}"
    return None if (cwd / name).is_file() else "the file was not written"


@case("map --out with a 243-character name: written")
def _(cwd):
    return long_out(cwd, "map", "--n", "2", suffix=".html")


@case("sessions --out with a 255-character name: written")
def _(cwd):
    name = "s" * 252 + ".md"
    code, _, stderr = papers(cwd, "sessions", "--n", "2", "--out", name)
    if code:
        return f"exit {code}: {stderr.strip()[-200:]}"
    return None if (cwd / name).is_file() else "the file was not written"


@case("--out with a 256-character name: one line naming the name as too long")
def _(cwd):
    code, _, stderr = papers(cwd, "related-work", "dp1", "--out", "r" * 253 + ".md")
    return one_error_line(code, stderr) or (None if "too long" in stderr.lower() and ".partial" not in stderr else stderr.strip())


# -- messages that point the right way


@case("map --out on a full disk: one line naming the map file, no partial left")
def _(cwd):
    with Mount("16m") as mount:
        shutil.copytree(cwd / "indexes", mount / "indexes")
        fill(mount)
        code, _, stderr = papers(mount, "map", "--n", "2", "--out", "m.html")
        left = [p.name for p in mount.iterdir() if p.name not in ("indexes", "filler")]
        problem = one_error_line(code, stderr)
        return problem or (f"left: {left}" if left else None) or (None if "m.html" in stderr and ".partial" not in stderr
                                                                   else f"does not name m.html: {stderr.strip()}")


@case("a new index on a full disk: one line naming the file or folder it could not write")
def _(cwd):
    with Mount("16m") as mount:
        shutil.copytree(cwd / "in", mount / "in")
        (mount / "indexes").mkdir()
        fill(mount)
        code, _, stderr = papers(mount, "build", "in", "--index", "fresh")
        problem = one_error_line(code, stderr)
        said = stderr.lower()
        return problem or (None if "fresh" in stderr and ("space" in said or "full" in said)
                           else f"does not name the file or the cause: {stderr.strip()}")


@case("a damaged model folder (truncated weights): one line calling it damaged, not out of memory")
def _(cwd):
    folder = packaged_model_copy(cwd / "my-model")
    weights = next(iter(sorted(folder.rglob("*.safetensors"))), None) or next(iter(sorted(folder.rglob("*.bin"))))
    weights.write_bytes(weights.read_bytes()[: 4096])
    code, _, stderr = papers(cwd, "build", "in", "--index", "m", "--model", "./my-model", real=True, timeout=900,
                             extra_env={"PAPERS_CACHE": str(cwd / "cache")})
    problem = one_error_line(code, stderr)
    if problem:
        return problem
    return f"called out of memory: {stderr.strip()}" if "memory" in stderr.lower() else None


# -- replaced and damaged models and exports (the real model: slower)


def packaged_model_copy(target: Path) -> Path:
    try:
        sys.path.insert(0, str(REPO))
        from recommender.embed.sentence_transformer import resolve_model_path
    except ImportError as error:
        raise Skip(f"cannot find the packaged model: {error}")
    source = Path(resolve_model_path("all-MiniLM-L6-v2"))
    if not source.is_dir():
        raise Skip("the packaged model all-MiniLM-L6-v2 is not a local folder")
    shutil.copytree(source, target)
    return target


def real_build(cwd, *args, cache: Path):
    return papers(cwd, "build", *args, real=True, timeout=1200, extra_env={"PAPERS_CACHE": str(cache)})


def saved_changed_model(folder: Path, width: int | None = None) -> None:
    """Replace the model saved in `folder` by another: its weights perturbed, or a Dense layer to `width`."""
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer, models

    transformers.utils.logging.disable_progress_bar()
    model = SentenceTransformer(str(folder), device="cpu")
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    if width is not None:
        width_now = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        model = SentenceTransformer(modules=[*model, models.Dense(width_now(), width)],
                                    device="cpu")
    shutil.rmtree(folder)
    model.save(str(folder))


@case("a model replaced in ./my-model, then a second index built with it: none of the old model's vectors reused (real model)")
def _(cwd):
    packaged_model_copy(cwd / "my-model")
    cache = cwd / "cache"
    code, _, stderr = real_build(cwd, "in", "--index", "a", "--model", "./my-model", cache=cache)
    if code:
        return f"first build: {stderr.strip()[-200:]}"
    before = np.load(live_folder(cwd / "indexes/a") / "vectors.npy")
    saved_changed_model(cwd / "my-model")
    code, stdout, stderr = real_build(cwd, "in", "--index", "b", "--model", "./my-model", cache=cache)
    if code:
        return f"second build: {stderr.strip()[-200:]}"
    after = np.load(live_folder(cwd / "indexes/b") / "vectors.npy")
    if np.allclose(before, after):
        return f"the old model's vectors were reused: {(stdout + stderr).strip()[-160:]!r}"
    return expect_ok(cwd, "search", "private training", "--index", "b", real=True, extra_env={"PAPERS_CACHE": str(cache)})


@case("the index rebuilt with an identical copy of its model from another folder: vectors reused (the key follows the files, real model)")
def _(cwd):
    packaged_model_copy(cwd / "model-one")
    cache = cwd / "cache"
    code, _, stderr = real_build(cwd, "in", "--index", "a", "--model", "./model-one", cache=cache)
    if code:
        return f"first build: {stderr.strip()[-200:]}"
    shutil.copytree(cwd / "model-one", cwd / "model-two")
    code, stdout, stderr = real_build(cwd, "in", "--index", "a", "--model", "./model-two", cache=cache)
    if code:
        return f"second build: {stderr.strip()[-200:]}"
    return None if "encoded 0" in stdout + stderr else f"encoded again: {(stdout + stderr).strip()[-160:]!r}"


@case("like --model ./my-model after a model of another width was saved there: one line (real model)")
def _(cwd):
    packaged_model_copy(cwd / "my-model")
    cache = cwd / "cache"
    code, _, stderr = real_build(cwd, "in", "--index", "m", "--model", "./my-model", cache=cache)
    if code:
        return f"first build: {stderr.strip()[-200:]}"
    saved_changed_model(cwd / "my-model", width=64)
    code, _, stderr = papers(cwd, "search", "private training", "--index", "m", "--model", "./my-model", real=True,
                             extra_env={"PAPERS_CACHE": str(cache)})
    return "exit 0: the index of the old model was used as the new one's" if code == 0 else one_error_line(code, stderr)


@case("the shared export's model.onnx replaced by a link to a user's file: not linked into a new index (real model)")
def _(cwd):
    cache = cwd / "cache"
    code, _, stderr = real_build(cwd, "in", "--index", "a", cache=cache)
    if code:
        return f"first build: {stderr.strip()[-200:]}"
    exports = [p for p in (cache / "onnx").iterdir() if p.is_dir()] if (cache / "onnx").is_dir() else []
    if not exports:
        raise Skip("no shared ONNX export was made (export unavailable here)")
    victim = victim_file(cwd)
    planted = exports[0] / "model.onnx"
    planted.unlink()
    planted.symlink_to(victim)
    code, _, stderr = real_build(cwd, "in", "--index", "b", cache=cache)
    if victim.read_text() != "\\title{Five years of work}\n":
        return "the user's file was written through the link"
    inode = victim.stat().st_ino
    linked = [p for p in (cwd / "indexes/b").rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_ino == inode]
    if linked:
        return f"the user's file is hard-linked into the index: {linked[0].relative_to(cwd)}"
    if code:
        return one_error_line(code, stderr)
    return expect_ok(cwd, "info", "--verify", "--index", "b", real=True) or expect_ok(
        cwd, "search", "private training", "--index", "b", real=True, extra_env={"PAPERS_CACHE": str(cache)})


@case("the index's tokenizer.json damaged, then the advised build: verify and search both pass (real model)")
def _(cwd):
    cache = cwd / "cache"
    code, _, stderr = real_build(cwd, "in", "--index", "a", cache=cache)
    if code:
        return f"first build: {stderr.strip()[-200:]}"
    tokenizers = list(live_folder(cwd / "indexes/a").rglob("tokenizer.json"))
    if not tokenizers:
        raise Skip("the index has no ONNX export (export unavailable here)")
    with open(tokenizers[0], "r+b") as handle:  # damaged in place: through a hard link, the shared export too
        handle.seek(10)
        handle.write(b"\0\0\0\0")
    code, _, stderr = papers(cwd, "search", "private training", "--index", "a", real=True,
                             extra_env={"PAPERS_CACHE": str(cache)})
    if code == 0:
        return "search ran on a damaged tokenizer"
    problem = one_error_line(code, stderr)
    if problem:
        return problem
    code, _, stderr = real_build(cwd, "in", "--index", "a", cache=cache)
    if code:
        return f"the advised build: {one_error_line(code, stderr)}"
    return expect_ok(cwd, "info", "--verify", "--index", "a", real=True) or expect_ok(
        cwd, "search", "private training", "--index", "a", real=True, extra_env={"PAPERS_CACHE": str(cache)})

# -- papers serve: a server that one client cannot take down (each case a real server on 127.0.0.1)

SERVE_SECURITY = ("content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy")


@contextlib.contextmanager
def served(cwd: Path, *args: str, env: dict | None = None, index: str = "default", open_files: int | None = None):
    """A real `papers serve --port 0` (tests/serve_launcher.py: the fake encoder) on an index of the case."""
    try:
        import fastapi  # noqa: F401
    except ImportError:
        raise Skip("the serve extra is not installed") from None
    from serving import start_server

    server = start_server(cwd / "indexes" / index, *args, env=env, cwd=cwd, open_files=open_files)
    try:
        yield server
    finally:
        server.stop()


def serve_address(server) -> tuple[str, int]:
    host, port = server.url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    return host, int(port)


def raw_http(server, data: bytes, seconds: float = 30) -> tuple[int, dict, bytes]:
    """(status, lower-cased headers, body) the server answers to these bytes, read until it closes."""
    import socket

    with socket.create_connection(serve_address(server), timeout=seconds) as connection:
        connection.sendall(data)
        chunks = []
        try:
            while chunk := connection.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/"):
        return 0, {}, body
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def unguarded(headers) -> str | None:
    present = {name.lower() for name in dict(headers)}
    missing = [name for name in SERVE_SECURITY if name not in present]
    return f"no {', '.join(missing)} header" if missing else None


def json_error(status: int, headers, body: bytes, expected: int) -> str | None:
    if status != expected:
        return f"status {status}, not {expected}: {body[:120]!r}"
    try:
        json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return f"not a JSON error: {body[:120]!r}"
    return unguarded(headers)


def log_problem(server) -> str | None:
    if any("Traceback" in line for line in server.errors):
        return "a traceback in the server's log"
    if len(server.errors) > 20:
        return f"{len(server.errors)} lines in the server's log"
    return None


@case("serve: 1,100 connections trickling request heads at `ulimit -n 1024`; a normal client is answered")
def _(cwd):
    import resource
    import socket

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    with served(cwd, open_files=1024) as server:
        slow = []
        try:
            for _ in range(1100):
                connection = socket.create_connection(serve_address(server), timeout=30)
                connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                slow.append(connection)
            try:
                status, _, _ = server.get("/api/like?id=dp1")
            except OSError as error:
                return f"a normal client got no answer during the flood: {error}"
            if status != 200:
                return f"a normal client got {status} during the flood"
        finally:
            for connection in slow:
                connection.close()
        return log_problem(server)


@case("serve: a client sending two bytes a second is cut at the head bound with a JSON 408")
def _(cwd):
    import socket

    with served(cwd) as server:
        with socket.create_connection(serve_address(server), timeout=60) as connection:
            started = time.monotonic()
            answer = b""
            for byte in b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: " + b"a" * 200:
                try:
                    answer += connection.recv(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    pass
                except OSError:
                    break
                if answer:
                    break
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.5)
                if time.monotonic() - started > 60:
                    return "still reading the head after 60 s"
        if not answer.startswith(b"HTTP/1.1 408"):
            return f"answered {answer[:60]!r}"
        return log_problem(server)


@case("serve: a 200 KB request head is refused with a JSON 431 and the security headers")
def _(cwd):
    with served(cwd) as server:
        huge = b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + b"c" * 200_000 + b"\r\n\r\n"
        return json_error(*raw_http(server, huge), 431) or log_problem(server)


@case("serve: 50 malformed requests: JSON 400s with the security headers, not a log line each")
def _(cwd):
    with served(cwd) as server:
        for _ in range(50):
            problem = json_error(*raw_http(server, b"\x16\x03\x01 not http\r\n\r\n"), 400)
            if problem:
                return problem
        return log_problem(server)


@case("serve: an unexpected error is a JSON 500 with the security headers")
def _(cwd):
    with served(cwd, env={"PAPERS_TEST_HOOKS": "1"}) as server:
        status, headers, body = server.get("/api/search?q=explode")
        return json_error(status, headers, body, 500)


@case("serve: HEAD on the pages and the API is GET without a body")
def _(cwd):
    with served(cwd) as server:
        for path in ("/", "/tags", "/paper/dp1", "/api/info", "/api/like?id=dp1", "/openapi.json"):
            status, headers, body = server.get(path, method="HEAD")
            if status != 200 or body:
                return f"HEAD {path}: {status}, {len(body)} bytes"
            problem = unguarded(headers)
            if problem:
                return f"HEAD {path}: {problem}"
        return None


@case("serve: lookups are answered while a slow map is drawn and plans are made")
def _(cwd):
    import threading

    with served(cwd, env={"PAPERS_TEST_SLOW_MAP": "30"}) as server:
        results = []
        thread = threading.Thread(target=lambda: results.extend(server.get(path)[0] for path in
                                                                ["/map"] + [f"/api/sessions?n={n}" for n in range(1, 5)]))
        thread.start()
        time.sleep(0.5)
        answered = []
        lookups = threading.Thread(target=lambda: answered.extend(server.get("/api/like?id=dp1")[0] for _ in range(20)))
        lookups.start()
        lookups.join(20)
        if lookups.is_alive() or answered != [200] * 20:
            return f"lookups held up by the long work: {len(answered)} of 20 answered in 20 s"
        thread.join(120)
        if any(status not in (200, 202) for status in results):
            return f"long work answered {results}"
        return log_problem(server)


@case("serve: 30 different session plans asked at once: each answered or told to retry, none a 500")
def _(cwd):
    import threading

    with served(cwd) as server:
        statuses: dict[int, int] = {}
        threads = [threading.Thread(target=lambda n=n: statuses.update({n: server.get(f"/api/sessions?n={n}")[0]}))
                   for n in range(1, 31)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
        # 200, or 503 (busy: retry), or 400 for more sessions than the six papers
        wrong = {n: status for n, status in statuses.items() if status not in ((200, 503) if n <= 6 else (400, 503))}
        if len(statuses) != 30 or wrong:
            return f"{30 - len(statuses)} unanswered; wrong answers: {wrong}"
        return log_problem(server)


@case("serve: ?token= sign-in through //evil.example and /\\evil.example paths redirects only to this server")
def _(cwd):
    with served(cwd, "--token", "t0ken") as server:
        for target in ("//evil.example/x?token=t0ken", "/\\evil.example?token=t0ken", "//evil.example?token=t0ken"):
            status, headers, _ = raw_http(server, f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                  "Connection: close\r\n\r\n".encode())
            location = headers.get("location", "")
            if status != 303 or location.startswith(("//", "/\\")) or "evil" in location:
                return f"{target}: {status} to {location!r}"
        return None


@case("serve: two servers on one host keep their own token cookies")
def _(cwd):
    with served(cwd, "--token", "one") as first, served(cwd, "--token", "two") as second:
        names = []
        for server, token in ((first, "one"), (second, "two")):
            _, headers, _ = raw_http(server, f"GET /?token={token} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                             "Connection: close\r\n\r\n".encode())
            names.append(headers.get("set-cookie", "").split("=", 1)[0])
        if names[0] == names[1]:
            return f"both servers set the cookie {names[0]!r}"
        return None


@case("serve: --token-file keeps the token out of the process list")
def _(cwd):
    (cwd / "token").write_text("hidden-token-value\n")
    with served(cwd, "--token-file", str(cwd / "token")) as server:
        for pid in [server.process.pid] + [int(child) for child in Path(f"/proc/{server.process.pid}/task/"
                                           f"{server.process.pid}/children").read_text().split()]:
            if b"hidden-token-value" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return f"the token is in /proc/{pid}/cmdline"
        if server.get("/api/tags/x/dp1", method="PUT", headers={"Authorization": "Bearer hidden-token-value"})[0] != 200:
            return "the token from the file is not the server's"
        return None


@case("serve: SIGTERM during a 300 s request: the client gets a JSON 503, the server exits within the bound")
def _(cwd):
    import threading

    with served(cwd, env={"PAPERS_TEST_HOOKS": "1"}) as server:
        got = []
        thread = threading.Thread(target=lambda: got.append(server.get("/api/search?q=sleep:300")))
        thread.start()
        time.sleep(1)
        server.process.send_signal(signal.SIGTERM)
        try:
            code = server.process.wait(60)
        except subprocess.TimeoutExpired:
            return "still running 60 s after SIGTERM"
        thread.join(30)
        if not got:
            return "the client got no answer"
        problem = json_error(*got[0], 503)
        if problem:
            return problem
        if not any("cut" in line for line in server.errors):
            return "the log does not say what was cut"
        return None if code == 0 else f"exit {code}"


@case("serve: kill -9 of the --workers 2 supervisor: the workers stop, the port closes")
def _(cwd):
    import socket

    with served(cwd, "--workers", "2") as server:
        pid = server.process.pid
        deadline = time.monotonic() + 60
        children: list[int] = []
        while len(children) < 2 and time.monotonic() < deadline:  # both workers up and serving
            children = [int(child) for task in os.listdir(f"/proc/{pid}/task")
                        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                        if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes()]
            time.sleep(0.2)
        if len(children) < 2 or any(server.get("/api/like?id=dp1")[0] != 200 for _ in range(10)):
            return f"the workers did not start: {children}"
        server.process.kill()
        server.process.wait(10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            alive = [child for child in children if Path(f"/proc/{child}").exists()
                     and Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
            if not alive:
                break
            time.sleep(0.5)
        else:
            for child in alive:
                os.kill(child, signal.SIGKILL)
            return f"workers {alive} still running 30 s after their supervisor died"
        try:
            socket.create_connection(serve_address(server), timeout=5).close()
        except OSError:
            return None
        return "the port still answers"


@case("serve: a damaged tags.sqlite: the pages still open")
def _(cwd):
    (cwd / "indexes/default/tags.sqlite").write_bytes(b"not a database at all" * 200)
    with served(cwd) as server:
        for path in ("/", "/paper/dp1", "/?pid=dp1", "/sessions"):
            status = server.get(path)[0]
            if status not in (200, 202):
                return f"{path}: {status}"
        return None


@case("serve: --host 127.0.0.2 answers at the address it printed")
def _(cwd):
    with served(cwd, "--host", "127.0.0.2") as server:
        status = server.get("/")[0]
        return None if status == 200 else f"its own address answered {status}"


@case("serve: papers named '.' and '..' and a 1,500-character ID open from their links")
def _(cwd):
    import re
    from urllib.parse import quote, unquote, urljoin, urlsplit

    odd = [{"id": ".", "title": "Dot", "abstract": "A paper about dots in privacy and training."},
           {"id": "..", "title": "Dot dot", "abstract": "A paper about two dots in video ranking."},
           {"id": "L" * 1500, "title": "Long", "abstract": "A paper with a long identifier in networks."}]
    write_corpus(cwd / "odd", PAPERS + odd)
    code, _, stderr = papers(cwd, "build", "odd", "--index", "odd")
    if code:
        return f"build: {stderr.strip()[-200:]}"
    with served(cwd, index="odd") as server:
        _, _, page = server.get("/?k=50")
        links = re.findall(r'href="(/paper[^"]*)"', page.decode())
        for paper in odd:
            link = next((link for link in links if unquote(re.split(r"/paper/|id=", link)[-1]) == paper["id"]), None)
            if link is None:
                return f"no link to {paper['id'][:20]!r}"
            resolved = urlsplit(urljoin(server.url + "paper/x", link.replace("&amp;", "&")))  # as a browser does
            status, _, body = server.get(resolved.path + (f"?{resolved.query}" if resolved.query else ""))
            if status != 200 or f">{paper['title']}<".encode() not in body:
                return f"the link to {paper['id'][:20]!r} opened {status}"
        if server.get("/api/papers/" + quote("L" * 1500, safe=""))[0] != 200:
            return "the long ID cannot be opened through the API"
    return None


@case("serve: 'Recommended for all tags' with 300 tags")
def _(cwd):
    import re

    with served(cwd) as server:
        for number in range(300):
            server.get(f"/api/tags/a-rather-long-tag-name-{number:03d}/dp1", method="PUT")
        page = server.get("/tags")[2].decode()
        match = re.search(r'href="([^"]*)">Recommended for all tags', page)
        if not match:
            return "no link"
        status = server.get(match.group(1).replace("&amp;", "&"))[0]
        return None if status == 200 else f"the link answered {status}"


@case("serve: API errors name the API's parameters, not the CLI's options")
def _(cwd):
    with served(cwd) as server:
        for path in ("/api/papers?where=nonsense", "/api/papers?where=year%3Eabc", "/api/papers/%20",
                     "/api/like?id=dp1&min_score=3", "/api/like?id=nothing-like-this"):
            _, _, body = server.get(path)
            message = json.loads(body).get("error", "") if body.startswith(b"{") else body.decode()
            if re.search(r"(?<![\w-])--[a-z]", message) or "`papers " in message:
                return f"{path}: {message}"
        return None



# ================================================================ round four (issue 30): user's files
# --out onto what is not a regular file, `indexes rm` and links, tags, readers during mv/rm,
# a damaged embedding cache, leftovers of killed exports.


def _read_into(opener, received: list):
    import threading

    def read():
        with opener() as stream:
            received.append(stream.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _out_into_fifo(cwd, *command):
    expected = papers(cwd, *command)
    fifo = cwd / "out.fifo"
    os.mkfifo(fifo)
    received: list = []
    reader = _read_into(lambda: open(fifo, "rb"), received)
    code, _, stderr = papers(cwd, *command, "--out", str(fifo), timeout=120)
    reader.join(timeout=60)
    if code or "Traceback" in stderr:
        return f"exit {code}: {stderr.strip()[-200:]}"
    if not stat.S_ISFIFO(os.lstat(fifo).st_mode):
        return "the FIFO was replaced by a file"
    if received != [expected[1].encode()]:
        return "the FIFO's reader did not get the output"
    return None


@case("files: --out onto a FIFO (sessions): written into, not replaced")
def _(cwd):
    return _out_into_fifo(cwd, "sessions", "--n", "2")


@case("files: --out onto a FIFO (related-work): written into, not replaced")
def _(cwd):
    return _out_into_fifo(cwd, "related-work", "--all", "-k", "2")


@case("files: --out onto a character device made in the case folder: still the device")
def _(cwd):
    if os.geteuid() != 0:
        raise Skip("mknod needs root")
    null = cwd / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    problem = expect_ok(cwd, "sessions", "--n", "2", "--out", str(null))
    if problem:
        return problem
    status = os.lstat(null)
    still = stat.S_ISCHR(status.st_mode) and status.st_rdev == os.makedev(1, 3)
    return None if still else "the device was replaced"


@case("files: --out onto a socket: written into it")
def _(cwd):
    import contextlib
    import socket

    path = cwd / "out.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    received: list = []

    @contextlib.contextmanager
    def accepted():
        connection, _ = listener.accept()
        with connection, connection.makefile("rb") as stream:
            yield stream

    with listener:
        reader = _read_into(accepted, received)
        problem = expect_ok(cwd, "sessions", "--n", "2", "--out", str(path))
        reader.join(timeout=60)
    if problem:
        return problem
    if not stat.S_ISSOCK(os.lstat(path).st_mode):
        return "the socket was replaced"
    expected = papers(cwd, "sessions", "--n", "2")[1].encode()
    return None if received and received[0] == expected else "nothing received"


@case("files: --out onto links to /proc/self/fd/1 (one link, then a chain): the process's stdout, links kept")
def _(cwd):
    (cwd / "one").symlink_to("/proc/self/fd/1")
    (cwd / "two").symlink_to(cwd / "one")
    expected = papers(cwd, "sessions", "--n", "2")[1]
    for link in ("one", "two"):
        code, stdout, stderr = papers(cwd, "sessions", "--n", "2", "--out", link)
        if code or stdout != expected:
            return f"--out {link}: exit {code}, stdout {stdout[:80]!r}, {stderr.strip()[-200:]}"
        if not (cwd / link).is_symlink():
            return f"the link {link} was replaced"
    return None


@case("files: --out - is standard output, for every --out of text")
def _(cwd):
    for command in (["sessions", "--n", "2"], ["related-work", "--all", "-k", "2"]):
        code, stdout, stderr = papers(cwd, *command, "--out", "-")
        if code or stdout != papers(cwd, *command)[1] or (cwd / "-").exists():
            return f"{command[0]} --out -: exit {code}, {stderr.strip()[-200:]}"
    return None


@case("files: indexes rm of a link to an index: the link goes, the index stays whole")
def _(cwd):
    shutil.move(cwd / "indexes/default", cwd / "elsewhere")
    (cwd / "indexes/default").symlink_to(cwd / "elsewhere")
    before = readers_view(cwd)
    problem = expect_ok(cwd, "indexes", "rm", "default")
    if problem:
        return problem
    if (cwd / "indexes/default").is_symlink():
        return "the link is still there"
    after = readers_view(cwd, str(cwd / "elsewhere"))
    return None if after == before else "the linked index was changed"


@case("files: indexes rm of a link to a folder of the user's: refused, nothing touched")
def _(cwd):
    (cwd / "mine").mkdir()
    (cwd / "mine/notes.txt").write_text("mine")
    (cwd / "indexes/notes").symlink_to(cwd / "mine")
    problem = expect_error(cwd, "indexes", "rm", "notes")
    if problem:
        return problem
    kept = (cwd / "mine/notes.txt").read_text() == "mine"
    return None if kept else "the user's folder was touched"


@case("files: indexes rm . and .. inside an index: refused before anything is removed")
def _(cwd):
    index = cwd / "indexes/default"
    version = next(index.glob("v-*"))
    before = readers_view(cwd)
    for folder, given in ((index, "."), (index, "./"), (version, "..")):
        code, _, stderr = papers(folder, "indexes", "rm", given)
        problem = one_error_line(code, stderr, 2)
        if problem:
            return f"rm {given}: {problem}"
    return None if readers_view(cwd) == before else "the index was changed"


@case("files: indexes rm keeps the user's tags (tags.sqlite) unless --with-tags, and says so")
def _(cwd):
    import sqlite3

    tags = cwd / "indexes/default/tags.sqlite"
    with sqlite3.connect(tags) as connection:
        connection.execute("CREATE TABLE tags (paper TEXT, tag TEXT)")
    connection.close()
    code, _, stderr = papers(cwd, "indexes", "rm", "default")
    if code or "kept its tags" not in stderr or not tags.is_file():
        return f"tags not kept, or not said: exit {code}, {stderr.strip()!r}"
    code, _, stderr = papers(cwd, "indexes", "rm", "default", "--with-tags")
    removed = code == 0 and not (cwd / "indexes/default").exists()
    return None if removed else f"--with-tags: {stderr.strip()!r}"


_HOLDING_READER = """
import json, sys
from recommender import PaperIndex, related_work, select_rows
with PaperIndex.open(sys.argv[1]) as index:
    print("open", flush=True)
    sys.stdin.readline()
    lists = related_work(index, select_rows(index, [], all_papers=True), k=2)
    print(json.dumps([[item.paper.id, [r.paper.id for r in item.related]] for item in lists]),
          flush=True)
"""


def _reader_across(cwd, *change):
    def reader():
        process = subprocess.Popen([sys.executable, "-c", _HOLDING_READER, "indexes/default"],
                                   cwd=cwd, env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        process.stdout.readline()
        return process

    expected = reader().communicate("go\n", timeout=120)
    held = reader()
    problem = expect_ok(cwd, "indexes", *change)
    got = held.communicate("go\n", timeout=120)
    if problem:
        return problem
    if (held.returncode, got) != (0, expected):
        return f"the reader broke: {got[1].strip()[-200:]}"
    return None


@case("files: a reader that has the index open keeps reading it across indexes mv")
def _(cwd):
    return _reader_across(cwd, "mv", "default", "renamed")


@case("files: a reader that has the index open keeps reading it across indexes rm; its version goes afterwards")
def _(cwd):
    problem = _reader_across(cwd, "rm", "default")
    if problem:
        return problem
    papers(cwd, "indexes")
    return None if not list((cwd / "indexes").iterdir()) else "the held version is left behind"


def _damaged_cache() -> None:
    import sqlite3

    path = CASE_CACHE[0] / "embeddings.sqlite"
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, dimension INTEGER, "
                           "vector BLOB, checksum INTEGER)")
        connection.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)",
                               [(f"k{i}", 4, bytes([i % 256]) * 1600, 0) for i in range(2000)])
    connection.close()
    with open(path, "r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.write(b"\xa5" * 200_000)


@case("files: cache clear on a damaged embedding cache: one line, no traceback")
def _(cwd):
    _damaged_cache()
    code, stdout, stderr = papers(cwd, "cache", "clear")
    if code or stderr or len(stdout.splitlines()) != 1:
        return f"exit {code}: {(stderr or stdout).strip()[-300:]}"
    return None


@case("files: cache info on a damaged embedding cache: no traceback")
def _(cwd):
    _damaged_cache()
    return expect_ok(cwd, "cache", "info")


def _dead_owner() -> str:
    """The owner record of a process that has ended."""
    script = "from recommender.embed.user_cache import owner_tag; print(owner_tag())"
    done = subprocess.run([sys.executable, "-c", script], env=env(), capture_output=True, text=True)
    return done.stdout.strip()


def _leftovers_removed(cwd, command, made):
    code, _, stderr = papers(cwd, *command)
    if code or "Traceback" in stderr:
        return f"exit {code}: {stderr.strip()[-200:]}"
    if "that interrupted model exports or unpackings left" not in stderr:
        return f"not reported: {stderr.strip()!r}"
    return None if not any(path.exists() for path in made) else "a leftover is still there"


@case("files: leftovers of a killed ONNX export and quality-tier unpacking: removed and reported by cache info")
def _(cwd):
    owner = _dead_owner()
    made = [CASE_CACHE[0] / "onnx" / f".export-{owner}-abc",
            CASE_CACHE[0] / "models" / f".unpack-quality-{owner}-xyz"]
    for folder in made:
        folder.mkdir(parents=True)
        (folder / "part").write_bytes(b"\0" * 100_000)
    live = CASE_CACHE[0] / "onnx" / f".export-o{os.getpid()}-0-live"  # this process owns it: kept
    live.mkdir(parents=True)
    problem = _leftovers_removed(cwd, ["cache", "info"], made)
    return problem or (None if live.is_dir() else "a live process's staging was removed")


@case("files: leftovers named before owners were recorded, untouched for hours: removed by cache clear")
def _(cwd):
    old = CASE_CACHE[0] / "onnx" / ".export-k2j3h4"
    old.mkdir(parents=True)
    os.utime(old, (0, 0))
    return _leftovers_removed(cwd, ["cache", "clear"], [old])



# ================================================================ round five (issue 46)
# Each family's cases go directly under its header; a family never edits another's.


# -- the library where it lives: Zotero read as a committed snapshot (family: zotero)


def _zotero_library(cwd, change=None) -> Path:
    """A zotero.sqlite made from Zotero's schema (tests/test_zotero.py), changed by `change(database)`."""
    import sqlite3

    from test_zotero import make_library

    (cwd / "Zotero").mkdir()
    library = make_library(cwd / "Zotero" / "zotero.sqlite")
    if change:
        database = sqlite3.connect(library)
        change(database)
        database.commit()
        database.close()
    return library


def _zotero_files(library: Path) -> dict:
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in library.parent.iterdir()}


def _zotero_built(cwd, library, expect: dict, *args) -> str | None:
    """Built from the library, Zotero's folder untouched, each paper's fields as `expect` says."""
    before = _zotero_files(library)
    problem = expect_ok(cwd, "build", str(library), "--index", "zot", *args)
    if problem:
        return problem
    if _zotero_files(library) != before:
        return "a file of Zotero's folder changed"
    for paper_id, fields in expect.items():
        code, stdout, stderr = papers(cwd, "show", paper_id, "--index", "zot", "--format", "json")
        if code:
            return f"show {paper_id}: exit {code}: {stderr.strip()[-200:]}"
        got = {name: json.loads(stdout).get(name) for name in fields}
        if got != fields:
            return f"{paper_id}: {got} instead of {fields}"
    return None


@case("zotero: a hot journal left by a killed Zotero (pages spilled): the committed titles are read")
def _(cwd):
    from test_zotero import kill, start_writer

    library = _zotero_library(cwd)
    kill(start_writer(library, "DELETE"))
    if not library.with_name("zotero.sqlite-journal").exists():
        raise Skip("no hot journal was left")
    return _zotero_built(cwd, library, {"ABCD2345": {"title": "Private Training at Scale"}})


@case("zotero: WAL under Zotero's exclusive lock: changes committed since the checkpoint are read")
def _(cwd):
    from test_zotero import kill, start_writer

    library = _zotero_library(cwd)
    writer = start_writer(library, "WAL", commit="New: ", lock="exclusive")
    try:
        return _zotero_built(cwd, library, {"ABCD2345": {"title": "New: Private Training at Scale"}})
    finally:
        kill(writer)


@case("zotero: a Zotero taking its exclusive lock again and again during builds is never refused")
def _(cwd):
    from test_zotero import STARTING

    library = _zotero_library(cwd, lambda database: database.execute(  # 20 MB: a read takes a while
        "CREATE TABLE filler AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
        "SELECT randomblob(10000) AS x FROM n"))
    stop = cwd / "stop"
    zotero = subprocess.Popen([sys.executable, "-c", STARTING, str(library), str(stop), "0.02"],
                              stdout=subprocess.PIPE, text=True)
    try:
        zotero.stdout.readline()
        for number in range(5):
            code, _, stderr = papers(cwd, "build", str(library), "--index", f"zot{number}")
            if code or "Traceback" in stderr:
                return f"exit {code}: {stderr.strip()[-200:]}"
    finally:
        stop.touch()
        tries, refused = map(int, zotero.communicate(timeout=60)[0].split())
    return None if refused == 0 else f"Zotero was refused {refused} times in {tries}"


@case("zotero: a title with a byte that is not UTF-8: read with U+FFFD, not 'not a Zotero database'")
def _(cwd):
    library = _zotero_library(cwd, lambda database: database.execute(
        "UPDATE itemDataValues SET value = CAST(X'436166E9' AS TEXT) WHERE value = 'Gated Linear Recurrences'"))
    return _zotero_built(cwd, library, {"EFGH6789": {"title": "Caf\ufffd"}})


@case("zotero: a group item with a user item's key, and RSS feed items: groups as Groups/NAME, feeds left out")
def _(cwd):
    from test_zotero import add_item

    def groups_and_feeds(database):
        database.executemany("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (?, ?, 1, 1)",
                             [(2, "group"), (3, "feed")])
        database.execute("INSERT INTO groups VALUES (12, 2, 'Lab', '', 0)")
        add_item(database, 20, "FEED2345", 3, "A Feed Item", "An RSS item, not a paper of the user.")
        database.execute("INSERT INTO feedItems (itemID, guid) VALUES (20, 'x')")
        add_item(database, 21, "ABCD2345", 2, "The Group's Copy", "A group's item with the key of the user's.")

    library = _zotero_library(cwd, groups_and_feeds)
    problem = _zotero_built(cwd, library, {"group12-ABCD2345": {"categories": ["Groups/Lab"]},
                                           "ABCD2345": {"title": "Private Training at Scale"}})
    code, _, _ = papers(cwd, "show", "FEED2345", "--index", "zot")
    return problem or (None if code else "a feed item was indexed")


@case("zotero: a collection path over 200 characters and one with a text-direction override become tags")
def _(cwd):
    def odd_names(database):
        database.executemany("INSERT INTO collections (collectionID, collectionName, parentCollectionID, libraryID,"
                             " key) VALUES (?, ?, ?, 1, ?)", [(4, "x" * 150, None, "C4"), (5, "y" * 150, 4, "C5"),
                                                              (6, "Evil\u202eexe", None, "C6")])
        database.executemany("INSERT INTO collectionItems VALUES (?, ?, 0)", [(5, 1), (6, 2)])

    library = _zotero_library(cwd, odd_names)
    problem = _zotero_built(cwd, library, {})
    code, stdout, stderr = papers(cwd, "tags", "--index", "zot", "--format", "json")
    tags = {row["tag"] for row in json.loads(stdout)} if code == 0 else set()
    missing = [name for name in ("Evilexe", "x" * 150) if not any(tag.startswith(name) for tag in tags)]
    return problem or (f"no tag for {missing}" if missing else None)


@case("zotero: two items with one citation key: BibTeX gets two keys (key, keya)")
def _(cwd):
    def shared_key(database):
        database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (801, 'same2023')")
        database.executemany("INSERT INTO itemData VALUES (?, 125, 801)", [(1,), (2,)])

    library = _zotero_library(cwd, shared_key)
    return _zotero_built(cwd, library, {"ABCD2345": {"citation_key": "same2023"},
                                        "EFGH6789": {"citation_key": "same2023a"}})


@case("zotero: a table a newer Zotero changed: left out with one warning, the rest built")
def _(cwd):
    library = _zotero_library(cwd, lambda database: database.execute(
        "ALTER TABLE creators RENAME COLUMN fieldMode TO nameMode"))
    return _zotero_built(cwd, library, {"ABCD2345": {"title": "Private Training at Scale", "authors": []}})


@case("zotero: zotero: finds a data directory named with letters beyond ASCII in prefs.js (UTF-8 and \\u escapes)")
def _(cwd):
    for number, escaped in enumerate((False, True)):
        home = cwd / f"home{number}"
        folder = home / "Bibliothèque Zoë"
        folder.mkdir(parents=True)
        library = _zotero_library(cwd) if number == 0 else cwd / "Zotero" / "zotero.sqlite"
        shutil.copy(library, folder / "zotero.sqlite")
        profile = home / ".zotero" / "zotero" / "p.default"
        profile.mkdir(parents=True)
        name = json.dumps(str(folder))[1:-1] if escaped else str(folder)
        (profile / "prefs.js").write_text(f'user_pref("extensions.zotero.dataDir", "{name}");\n', encoding="utf-8")
        problem = expect_ok(cwd, "build", "zotero:", "--index", f"z{number}", extra_env={"HOME": str(home)})
        if problem:
            return problem
    return None


# (end of the zotero family)


# -- add keeps every promise a build keeps (family: add)


def _listed_ids(cwd: Path) -> list[str]:
    code, stdout, _ = papers(cwd, "list", "--format", "json")
    return sorted(row["id"] for row in json.loads(stdout)) if code == 0 else []


@case("add: add DIR --sync leaves the papers of 'DIR old.jsonl' alone")
def _(cwd):
    write_corpus(cwd / "refs", PAPERS[:3])
    write_corpus(cwd, PAPERS[3:], name="refs old.jsonl")
    if papers(cwd, "build", "refs", "refs old.jsonl")[0]:
        return "the build failed"
    problem = expect_ok(cwd, "add", "refs", "--sync", "--no-compact")
    if problem:
        return problem
    if _listed_ids(cwd) != sorted(paper["id"] for paper in PAPERS):
        return f"papers of another source removed: {_listed_ids(cwd)}"
    return None


@case("add: the same file again, with a duplicate in it, adds no duplicate")
def _(cwd):
    twice = [*PAPERS[:2], {**PAPERS[0], "id": "dp1-copy"}]
    write_corpus(cwd / "twice", twice)
    if papers(cwd, "build", "twice")[0]:
        return "the build failed"
    code, stdout, stderr = papers(cwd, "add", "twice", "--no-compact")
    if code or not stdout.startswith("added 0 papers"):
        return f"exit {code}: {stdout.strip()} {stderr.strip()[-200:]}"
    return None if _listed_ids(cwd) == ["dp1", "dp2"] else f"listed {_listed_ids(cwd)}"


@case("add: --sync of a retitled paper replaces its text")
def _(cwd):
    write_corpus(cwd / "in", [{**PAPERS[0], "title": "Retitled"}, *PAPERS[1:]])
    code, stdout, stderr = papers(cwd, "add", "in", "--sync", "--no-compact")
    if code or "replaced 1 changed" not in stdout:
        return f"exit {code}: {stdout.strip()} {stderr.strip()[-200:]}"
    shown = papers(cwd, "show", "dp1", "--format", "json")[1]
    return None if json.loads(shown)["title"] == "Retitled" else "the old text is kept"


@case("add: a file with one ID for two papers is refused as build refuses it; remove takes an alias")
def _(cwd):
    clash = [{"id": "same", "title": "One", "abstract": "A paper about gradient clipping."},
             {"id": "same", "title": "Two", "abstract": "A paper about video aesthetics."}]
    write_corpus(cwd / "clash", clash)
    problem = expect_error(cwd, "add", "clash", "--no-compact")
    if problem:
        return problem
    write_corpus(cwd / "copy", [{**PAPERS[1], "id": "dp2-copy"}])
    if papers(cwd, "add", "copy", "--no-compact")[0]:
        return "the add failed"
    code, stdout, stderr = papers(cwd, "remove", "dp2-copy")
    if code:
        return f"remove of an alias: exit {code}: {stderr.strip()[-200:]}"
    return None if "dp2" not in _listed_ids(cwd) else "the paper is still listed"



# (end of the add family)


# -- papers fetch: bounded, one bad record never stops the routine; outputs (family: fetch)

_OAI = ('<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
        '<responseDate>2025-06-02T00:00:00Z</responseDate><request verb="ListRecords">x</request><ListRecords>')


def _oai_page(ids, token=""):
    records = "".join(
        f'<record><header><identifier>oai:arXiv.org:{i}</identifier><datestamp>2025-06-01</datestamp></header>'
        f'<metadata><arXiv xmlns="http://arxiv.org/OAI/arXiv/"><id>{i}</id><title>Paper {i}</title>'
        f'<abstract>The abstract of paper {i}.</abstract></arXiv></metadata></record>' for i in ids)
    return _OAI + records + f"<resumptionToken>{token}</resumptionToken></ListRecords></OAI-PMH>"


def _note(forum, **extra):
    return {"id": forum, "forum": forum, "cdate": 1746000000000, "pdate": 1758000000000, **extra,
            "content": {"title": {"value": f"Paper {forum}"}, "abstract": {"value": f"A study of differentially private training, number {forum}."},
                        "venueid": {"value": "NeurIPS.cc/2025/Conference"}, "venue": {"value": "NeurIPS 2025"}}}


@contextlib.contextmanager
def _loopback(*steps, then="fail"):
    """tests/fetching.py's server on 127.0.0.1 (each request takes the next step, then `then`): its
    address."""
    from fetching import OaiServer

    with OaiServer(steps, then) as server:
        yield server.base


def _arxiv(cwd, url, *extra, out="new.jsonl", timeout=120):
    return papers(cwd, "fetch", "arxiv", "--quiet", "--category", "cs.LG", "--since", "2025-06-01", "--out", out,
                  "--base-url", url, "--delay", "0", *extra, timeout=timeout)


def _venue(cwd, url, *extra, out="venue.jsonl", timeout=120):
    return papers(cwd, "fetch", "openreview", "--quiet", "NeurIPS.cc/2025/Conference", "--out", out, "--base-url", url,
                  "--delay", "0", *extra, timeout=timeout)


def _bounded_error(run, *words):
    try:
        code, _, stderr = run()
    except subprocess.TimeoutExpired:
        return "still running after its timeout: not bounded"
    problem = one_error_line(code, stderr)
    if problem:
        return problem
    return None if all(word in stderr for word in words) else f"message lacks {words}: {stderr.strip()[-200:]}"


@case("fetch --out onto a FIFO, a /dev/null link and /dev/null: written into, never replaced")
def _(cwd):
    import threading
    os.mkfifo(cwd / "fifo")
    got = []
    reader = threading.Thread(target=lambda: got.append((cwd / "fifo").read_bytes()), daemon=True)
    reader.start()
    with _loopback(_oai_page(["2506.00001"], "t1"), _oai_page(["2506.00002"])) as url:
        code, _, stderr = _arxiv(cwd, url + "/oai", out="fifo")
    with contextlib.suppress(OSError):
        os.close(os.open(cwd / "fifo", os.O_WRONLY | os.O_NONBLOCK))
    reader.join(10)
    if code or not stat.S_ISFIFO(os.lstat(cwd / "fifo").st_mode) or b"2506.00002" not in b"".join(got):
        return f"FIFO: exit {code}, still a FIFO: {stat.S_ISFIFO(os.lstat(cwd / 'fifo').st_mode)}: {stderr[-200:]}"
    os.symlink("/dev/null", cwd / "sink")
    for out in ("sink", "/dev/null"):
        with _loopback(json.dumps({"notes": [_note("n1")], "count": 1})) as url:
            code, _, stderr = _venue(cwd, url, out=out)
        if code or not stat.S_ISCHR(os.stat("/dev/null").st_mode) or not os.path.islink(cwd / "sink"):
            return f"{out}: exit {code}, replaced: {stderr[-200:]}"
    return None


@case("fetch: Retry-After of 31 years stops at once in one line; the pages fetched are kept for the rerun")
def _(cwd):
    from fetching import answer

    busy = answer("", 503, [("Retry-After", "999999999")])
    with _loopback(_oai_page(["2506.00001"], "t1"), busy, _oai_page(["2506.00002"])) as url:
        problem = _bounded_error(lambda: _arxiv(cwd, url + "/oai", timeout=60), "--longest-wait")
        if problem:
            return problem
        if _arxiv(cwd, url + "/oai")[0]:  # the same request again: it resumes
            return "the rerun failed"
    return None if (cwd / "new.jsonl").read_text().count("\n") == 2 else "the first page was not kept"


@case("fetch: a resumption token given again, and a redirect that drops it, stop in one line")
def _(cwd):
    with _loopback(then=_oai_page(["2506.00001"], "same")) as url:
        problem = _bounded_error(lambda: _arxiv(cwd, url + "/oai", timeout=60), "given before")
    if problem:
        return problem
    from fetching import answer

    redirect = answer("", 302, [("Location", "/oai?verb=ListRecords&metadataPrefix=arXiv&set=cs%3Acs%3ALG")])
    with _loopback(_oai_page(["2506.00001"], "t1"), redirect, then=_oai_page(["2506.00001"], "t1")) as url:
        return _bounded_error(lambda: _arxiv(cwd, url + "/oai", out="other.jsonl", timeout=60), "redirected")


@case("fetch openreview: a count of 10^12, and a server ignoring the offset, stop in one line")
def _(cwd):
    page = json.dumps({"notes": [_note("n1")], "count": 10**12})
    with _loopback(then=page) as url:
        problem = _bounded_error(lambda: _venue(cwd, url, timeout=60), "--max-records")
    if problem:
        return problem
    with _loopback(then=page.replace(str(10**12), "5")) as url:
        return _bounded_error(lambda: _venue(cwd, url, timeout=60), "given before")


@case("fetch: a server dripping a byte every 5 s meets the response deadline and the fetch's deadline")
def _(cwd):
    from fetching import dripping

    with _loopback(then=dripping(every=5, most=30)) as url:
        problem = _bounded_error(lambda: _arxiv(cwd, url + "/oai", "--response-timeout", "6", timeout=60),
                                 "--response-timeout")
        return problem or _bounded_error(lambda: _arxiv(cwd, url + "/oai", "--deadline", "6", timeout=60),
                                         "--deadline")


@case("fetch: a Content-Length larger than the body sent is one line")
def _(cwd):
    from fetching import short_body

    with _loopback(then=short_body(b"<OAI-PMH")) as url:
        return _bounded_error(lambda: _arxiv(cwd, url + "/oai"), "ended after 8 bytes")


@case("fetch: a damaged fetch-state.json (a list, a number) is as no state: --since last fetches the first window")
def _(cwd):
    for damage in ("[1, 2]", "7"):
        (cwd / "indexes" / "fetch-state.json").write_text(damage)
        with _loopback(then=_oai_page(["2506.00001"])) as url:
            code, _, stderr = papers(cwd, "fetch", "arxiv", "--category", "cs.LG", "--since", "last",
                                     "--out", "new.jsonl", "--base-url", url, "--delay", "0")
        if code or "Traceback" in stderr or "never fetched here: fetching the last 2 days" not in stderr:
            return f"{damage}: exit {code}: {stderr.strip()[-300:]}"
    return None


@case("fetch openreview: pdate 1e300, NaN, Infinity; an ID with escapes and U+202E; a forum ID with & and #")
def _(cwd):
    notes = [_note("n1", pdate="@1e300@"), _note("n2", pdate="@NaN@"), _note("n3", pdate="@Infinity@"),
             _note("bad\u001b[2J\u202e"), _note("x&id=evil#frag")]
    body = json.dumps({"notes": notes, "count": 5})
    for stamp in ("1e300", "NaN", "Infinity"):
        body = body.replace(f'"@{stamp}@"', stamp)
    with _loopback(body) as url:
        code, _, stderr = _venue(cwd, url)
    if code or "Traceback" in stderr or "1 skipped for their ID" not in stderr:
        return f"exit {code}: {stderr[-300:]}"
    text = (cwd / "venue.jsonl").read_text()
    if "x%26id%3Devil%23frag" not in text or "\\u202e" in text:
        return f"written: {text[-300:]}"
    problem = expect_ok(cwd, "add", "venue.jsonl")  # the routine's next step reads what fetch wrote
    return problem


@case("build/add of OpenReview notes: pdate 1e300 or Infinity, keywords a number; an odd ID skipped")
def _(cwd):
    note = _note("k1", pdate="@1e300@")
    note["content"].update(keywords={"value": 7}, venueid={"value": "TMLR"}, venue={"value": "TMLR"})
    other = _note("k2", pdate="@Infinity@")
    other["content"].update(venueid={"value": "TMLR"}, venue={"value": "TMLR"})
    (cwd / "notes.json").write_text(json.dumps([note, other]).replace('"@1e300@"', "1e300")
                                    .replace('"@Infinity@"', "Infinity"))
    problem = expect_ok(cwd, "build", "notes.json", "--index", "notes")
    if problem:
        return problem
    lines = [{"id": "q1", "abstract": "Sparse attention for long documents."},
             {"id": "q\u202e2", "abstract": "An odd identifier's paper."}]
    (cwd / "day.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return expect_ok(cwd, "add", "day.jsonl")


# (end of the fetch family)


# -- the server's background work (family: serve)


def _background_of(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
    return found


@case("serve: the background process killed while idle: /map and /api/sessions still answer")
def _(cwd):
    import signal
    import time

    with served(cwd) as server:
        if server.get("/api/sessions?n=2")[0] != 200:
            return "the first plan failed"
        for pid in _background_of(server.process.pid):
            os.kill(pid, signal.SIGKILL)
        time.sleep(1)
        status = server.get("/api/sessions?n=3")[0]
        if status != 200:
            return f"/api/sessions answered {status} after the background process died"
        deadline = time.monotonic() + 90
        while (status := server.get("/map")[0]) == 202 and time.monotonic() < deadline:
            time.sleep(1)
        return None if status == 200 else f"/map answered {status} after the background process died"


@case("serve: --token-file /dev/zero, a FIFO with no writer: one line, exit 2, at once")
def _(cwd):
    import resource

    os.mkfifo(cwd / "token.fifo")
    for path in ("/dev/zero", str(cwd / "token.fifo")):
        try:
            problem = expect_error(cwd, "serve", "--port", "0", "--token-file", path, code=2, timeout=60,
                                   preexec=ulimit(resource.RLIMIT_AS, 4 << 30))
        except subprocess.TimeoutExpired:
            return f"--token-file {path}: still running a minute later"
        if problem:
            return f"--token-file {path}: {problem}"
    return None


@case("serve: a tag written after `papers indexes mv` of the served index lands in the renamed index")
def _(cwd):
    with served(cwd) as server:
        code, _, stderr = papers(cwd, "indexes", "mv", "default", "renamed")
        if code != 0:
            return f"indexes mv: {stderr.strip()[-200:]}"
        status = server.get("/api/tags/after-mv/dp1", method="PUT")[0]
        if status != 200:
            return f"the tag write answered {status}"
    import sqlite3

    tags = cwd / "indexes" / "renamed" / "tags.sqlite"
    with contextlib.closing(sqlite3.connect(tags)) as connection:
        rows = list(connection.execute("SELECT tag, paper FROM tags WHERE tag = 'after-mv'"))
    return None if rows == [("after-mv", "dp1")] else f"the renamed index holds {rows}"


# (end of the serve family)


# -- the daily routine and the feed (family: day)


def _day(cwd, server, *, fetch_extra=()):
    """The routine's three steps (fetch --since last, add, feed of `mine` as HTML): [(code, out, err)]."""
    done = [papers(cwd, "fetch", "arxiv", "--category", "cs.LG", "--since", "last", "--out", "today.jsonl",
                   "--base-url", server.url, "--delay", "0", *fetch_extra)]
    if done[-1][0] == 0:
        done.append(papers(cwd, "add", "today.jsonl", "--index", "arxiv"))
    if done[-1][0] == 0:
        done.append(papers(cwd, "feed", "--tag", "mine", "--index", "arxiv", "--format", "html", "--out", "today.html"))
    return done


def _failed_step(done) -> str | None:
    for code, _, stderr in done:
        if code != 0 or "Traceback" in stderr:
            return f"a step exited {code}: {stderr.strip()[-300:]}"
    return None


def _routine_index(cwd):
    """The six papers in indexes/default, mine tagged with dp1, then three papers added (the feed's new ones)."""
    if papers(cwd, "tags", "add", "mine", "dp1")[0]:
        raise AssertionError("cannot tag dp1")
    write_corpus(cwd / "new", [
        {"id": "dp3", "title": "Private Language Model Training at Scale",
         "abstract": "Differentially private training of language models with gradient clipping."},
        {"id": "vid3", "title": "Aesthetic Video Assessment", "abstract": "Video aesthetic assessment models."},
        {"id": "dp4", "title": "Clipping for Private Training", "abstract": "Per-sample gradient clipping and noise."},
    ])
    code, _, stderr = papers(cwd, "add", "new", "--no-compact")
    if code:
        raise AssertionError(f"cannot add: {stderr.strip()[-200:]}")


def _feed_ids(cwd, *args) -> tuple[int, set, str]:
    code, stdout, stderr = papers(cwd, "feed", "--tag", "mine", "--format", "json", *args)
    return code, ({row["id"] for row in json.loads(stdout)} if code == 0 else set()), stderr


@case("day one from nothing: fetch --since last (loopback OAI-PMH), add to a missing index, feed of an empty tag")
def _(cwd):
    from fetching import OaiServer
    from test_daily_routine import page, record

    server = OaiServer()
    try:
        server.then = page(record("2506.00001", "Private Training at Scale", "Differentially private training."),
                            record("2506.00002", "Video Aesthetics", "Video aesthetic assessment models."))
        done = _day(cwd, server)
        first_from = server.queries[-1].get("from") if server.queries else None
    finally:
        server.close()
    problem = _failed_step(done)
    if problem or len(done) != 3:
        return problem or "the routine stopped"
    window = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 2 * 86400))
    if f"(since {window})" not in done[0][2] or first_from != window:
        return f"the first --since last did not fetch the stated window from {window}: {done[0][2].strip()!r}, from={first_from}"
    if "added 2 papers to arxiv, a new index" not in done[1][1]:
        return f"add to a missing index: {done[1][1].strip()!r}"
    if "papers tags add mine" not in done[2][2] or not (cwd / "today.html").is_file():
        return f"the feed of an empty tag: {done[2][2].strip()!r}"
    return None


@case("a day with nothing new after day one: --since last starts from the last fetch, the digest says so")
def _(cwd):
    from fetching import OaiServer
    from test_daily_routine import page, record

    server = OaiServer()
    try:
        server.then = page(record("2506.00001", "Private Training at Scale", "Differentially private training."))
        first = _day(cwd, server)
        if papers(cwd, "tags", "add", "mine", "2506.00001", "--index", "arxiv")[0]:
            return "cannot tag the first paper"
        server.then = page()
        second = _day(cwd, server)
        second_from = server.queries[-1].get("from")
    finally:
        server.close()
    problem = _failed_step(first + second)
    if problem or len(second) != 3:
        return problem or "the second day stopped"
    if second_from != time.strftime("%Y-%m-%d", time.gmtime()):
        return f"the second fetch started from {second_from}, not the first's end"
    if "No new papers." not in (cwd / "today.html").read_text(encoding="utf-8"):
        return "the digest of a day with nothing new does not say so"
    return None


@case("a look with --since moves nothing: the digest still gets every new paper, once")
def _(cwd):
    _routine_index(cwd)
    new = {"dp3", "dp4", "vid3"}
    for _ in range(2):
        code, seen, stderr = _feed_ids(cwd, "--since", "2000-01-01")
        if code or not new <= seen:
            return f"the look: exit {code}, {sorted(seen)} {stderr.strip()[-200:]}"
    code, digest, stderr = _feed_ids(cwd)
    if code or digest != new:
        return f"the digest after two looks: exit {code}, {sorted(digest)} {stderr.strip()[-200:]}"
    code, again, _ = _feed_ids(cwd)
    return None if code == 0 and again == set() else f"the digest read twice: exit {code}, {sorted(again)}"


@case("feed --since at the ends of the calendar (0001-01-01T00:00:00+14:00, 9999-12-31T23:59:59-14:00): no traceback")
def _(cwd):
    _routine_index(cwd)
    for since in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        for fmt in ("json", "html"):
            code, _, stderr = papers(cwd, "feed", "--tag", "mine", "--since", since, "--format", fmt)
            if code == 0 and "Traceback" not in stderr:
                continue
            problem = one_error_line(code, stderr, 2)
            if problem:
                return f"--since {since} --format {fmt}: {problem}"
    code, digest, _ = _feed_ids(cwd)  # the looks moved nothing
    return None if code == 0 and digest == {"dp3", "dp4", "vid3"} else f"the digest after the looks: {sorted(digest)}"


@case("damaged arrivals and feed tables in tags.sqlite: one line, exit 1, tags and index untouched")
def _(cwd):
    import sqlite3

    for damage in ("DROP TABLE arrivals; CREATE TABLE arrivals (paper TEXT)",
                   "DROP TABLE feed_places; CREATE TABLE feed_places (reader, tag, noticed, read);"
                   " INSERT INTO feed_places VALUES ('digest', 'mine', 'x', 'y')"):
        case_dir = cwd / f"damaged-{len(damage)}"
        shutil.copytree(cwd / "in", case_dir / "in")
        (case_dir / "indexes").mkdir()
        if papers(case_dir, "build", "in")[0]:
            return "cannot build"
        _routine_index(case_dir)
        if papers(case_dir, "feed", "--tag", "mine")[0]:
            return "the first feed failed"
        database = sqlite3.connect(case_dir / "indexes" / "default" / "tags.sqlite")
        database.executescript(damage)
        database.close()
        tags_before = papers(case_dir, "tags", "--format", "json")[:2]
        problem = expect_error(case_dir, "feed", "--tag", "mine")
        if problem:
            return f"{damage.split(';')[0]}: {problem}"
        code, _, stderr = papers(case_dir, "feed", "--tag", "mine")
        if "the feed's records are damaged" not in stderr:
            return f"the line does not say what is damaged: {stderr.strip()!r}"
        if papers(case_dir, "tags", "--format", "json")[:2] != tags_before:
            return "the tags changed"
    return None


@case("a day's paper with no search terms (title 'n1', abstract 'Abstract of n1.'): added, found, compacted")
def _(cwd):
    write_corpus(cwd / "day", [{"id": "n1", "title": "n1", "abstract": "Abstract of n1."}])
    before = readers_view(cwd)[0]
    problem = expect_ok(cwd, "add", "day", "--no-compact")
    if problem:
        return problem
    code, stdout, _ = papers(cwd, "show", "n1", "--format", "json")
    if code or json.loads(stdout)["id"] != "n1":
        return f"show n1: exit {code}"
    problem = expect_ok(cwd, "search", "private training", "--mode", "lexical") or expect_ok(
        cwd, "build", "--compact")
    if problem:
        return problem
    after = readers_view(cwd)[0]
    ids = lambda view: {row["id"] for row in json.loads(view[1])}  # noqa: E731
    return None if ids(after) == ids(before) | {"n1"} else f"the index holds {sorted(ids(after))}"


# (end of the day family)


# -- every item of the library: full texts, PDFs, text kinds (family: library)


def _hostile_pdfs(folder: Path) -> dict[str, str]:
    """PDFs no reader can take, each with the word its one warning line must hold."""
    from pdfs import paper_pdf, pdf_bytes

    folder.mkdir(parents=True, exist_ok=True)
    good = paper_pdf(folder / "good.pdf", "Random Walks on Expanders",
                     "We bound the mixing time of random walks on expanders by their spectral gap.")
    (folder / "truncated.pdf").write_bytes(good.read_bytes()[:500])
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "text.pdf").write_text("not a PDF at all\n")
    (folder / "locked.pdf").write_bytes(pdf_bytes([["Words enough for a text layer, locked away."]], encrypted=True))
    (folder / "scan.pdf").write_bytes(pdf_bytes([["x"]], image_only=True))
    (folder / "huge.pdf").write_bytes(b"%PDF-1.4\n")
    os.truncate(folder / "huge.pdf", 250 * 1024 * 1024)
    os.mkfifo(folder / "pipe.pdf")  # never opened: not a regular file
    return {"truncated.pdf": "damaged", "empty.pdf": "damaged", "text.pdf": "damaged", "locked.pdf": "encrypted",
            "scan.pdf": "no text", "huge.pdf": "250 MB"}


@case("library: a folder of hostile PDFs builds the readable one; each other is one warning line")
def _(cwd):
    expected = _hostile_pdfs(cwd / "pdfs")
    code, stdout, stderr = papers(cwd, "build", "pdfs", "--index", "pdfs-index", timeout=120)
    if code != 0 or "Traceback" in stderr:
        return f"exit {code}: {stderr.strip()[-300:]}"
    if not stdout.startswith("indexed 1 papers") or "1 from PDFs" not in stdout:
        return f"not the one readable PDF: {stdout!r}"
    for name, why in expected.items():
        lines = [line for line in stderr.splitlines() if name in line]
        if len(lines) != 1 or why not in lines[0]:
            return f"{name}: not one line saying {why!r}: {lines}"
    if "pipe.pdf" in stderr:
        return "the pipe was opened"
    return None


@case("library: only unreadable PDFs: one error line, no index")
def _(cwd):
    expected = _hostile_pdfs(cwd / "pdfs")
    (cwd / "pdfs/good.pdf").unlink()
    code, _, stderr = papers(cwd, "build", "pdfs", "--index", "pdfs-index", timeout=120)
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    if code != 1 or len(errors) != 1 or "Traceback" in stderr:
        return f"exit {code}: {stderr.strip()[-300:]}"
    if len(stderr.strip().splitlines()) != len(expected) + 1:
        return f"not one line a PDF and one error: {stderr!r}"
    if (cwd / "indexes/pdfs-index").exists() and any((cwd / "indexes/pdfs-index").glob("v-*")):
        return "an index was written"
    return None


@case("library: a .bib's file field naming a device, a folder, a pipe or nothing: title only, never opened")
def _(cwd):
    (cwd / "lib").mkdir()
    os.mkfifo(cwd / "lib/pipe.pdf")
    (cwd / "lib/folder.pdf").mkdir()
    (cwd / "lib/library.bib").write_text(
        "@book{zero, title = {Zero}, file = {:/dev/zero:PDF}}\n"
        "@book{pipe, title = {Pipe}, file = {:pipe.pdf:PDF}}\n"
        "@book{folder, title = {Folder}, file = {:folder.pdf:PDF}}\n"
        "@book{none, title = {Nothing}, file = {:../../nowhere.pdf:PDF}}\n")
    code, stdout, stderr = papers(cwd, "build", "lib/library.bib", "--index", "bib", timeout=60)
    if code != 0 or "Traceback" in stderr:
        return f"exit {code}: {stderr.strip()[-300:]}"
    if "4 title only" not in stdout:
        return f"not 4 title-only papers: {stdout!r}"
    return None


@case("library: Zotero storage with a 1 GB full text and a garbage PDF: bounded, nothing written")
def _(cwd):
    import sqlite3

    schema = (REPO / "tests/fixtures/zotero-schema.sql").read_text()
    folder = cwd / "Zotero"
    (folder / "storage/ATTA0001").mkdir(parents=True)
    (folder / "storage/ATTB0001").mkdir(parents=True)
    database = sqlite3.connect(folder / "zotero.sqlite")
    database.executescript(schema)
    database.execute("INSERT INTO version VALUES ('userdata', 129)")
    database.execute("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (1, 'user', 1, 1)")
    database.executemany("INSERT INTO itemTypesCombined VALUES (?, ?, 1, 0)", [(3, "attachment"), (7, "book")])
    database.execute("INSERT INTO fieldsCombined VALUES (1, 'title', NULL, NULL, 0)")
    for item_id, key, title in ((1, "BOOK0001", "A Long Book"), (2, "BOOK0002", "A Broken Book")):
        database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, 7, 1, ?)", (item_id, key))
        database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (?, ?)", (item_id, title))
        database.execute("INSERT INTO itemData VALUES (?, 1, ?)", (item_id, item_id))
    for item_id, key, parent in ((3, "ATTA0001", 1), (4, "ATTB0001", 2)):
        database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, 3, 1, ?)", (item_id, key))
        database.execute("INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) "
                         "VALUES (?, ?, 0, 'application/pdf', 'storage:x.pdf')", (item_id, parent))
    database.commit()
    database.close()
    with open(folder / "storage/ATTA0001/.zotero-ft-cache", "wb") as cache:
        cache.write(b"Abstract\nA book so long its cached text is a gigabyte. " * 20 + b"\n1 Introduction\n")
        cache.truncate(1024 ** 3)
    (folder / "storage/ATTB0001/x.pdf").write_bytes(os.urandom(4096))
    before = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}
    code, stdout, stderr = papers(cwd, "build", "Zotero/zotero.sqlite", "--index", "z", timeout=120)
    if code != 0 or "Traceback" in stderr:
        return f"exit {code}: {stderr.strip()[-300:]}"
    if "1 from full texts, 1 title only" not in stdout or "x.pdf: PDF damaged" not in stderr:
        return f"not one full text and one title only: {stdout!r} {stderr!r}"
    after = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}
    return None if after == before else "a file of Zotero's changed"


# (end of the library family)



def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="Run only the cases whose name holds this text.")
    parser.add_argument("--from-case", type=int, default=1, metavar="N", help="Run only cases N and later.")
    options = parser.parse_args()
    counts = {"held": 0, "broke": 0, "skipped": 0}
    base = Path(tempfile.mkdtemp(prefix="sweep-"))
    base.chmod(0o755)
    template = base / "template"
    template.mkdir()
    (template / "indexes").mkdir()
    write_corpus(template / "in")
    CASE_CACHE[0] = Path(SCRATCH_CACHE) / "template"
    CASE_CACHE[0].mkdir()
    if papers(template, "build", "in")[0]:
        print("cannot build the template index")
        return 2
    for number, (name, function) in enumerate(CASES, start=1):
        if options.only not in name or number < options.from_case:
            continue
        cwd = base / f"case-{number}"
        shutil.copytree(template, cwd, symlinks=True)
        CASE_CACHE[0] = Path(SCRATCH_CACHE) / f"case-{number}"
        shutil.copytree(Path(SCRATCH_CACHE) / "template", CASE_CACHE[0], symlinks=True)
        try:
            problem = function(cwd)
            verdict = "held" if problem is None else "broke"
        except Skip as reason:
            verdict, problem = "skipped", str(reason)
        except Exception as error:  # noqa: BLE001 - a harness failure is reported as a broken case
            verdict, problem = "broke", f"harness: {type(error).__name__}: {error}"
        counts[verdict] += 1
        print(f"{number:3d} {verdict:7s} {name}" + (f"\n            {problem}" if problem else ""), flush=True)
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(SCRATCH_DATA, ignore_errors=True)
    shutil.rmtree(SCRATCH_CACHE, ignore_errors=True)
    print(f"\n{sum(counts.values())} cases: {counts['held']} held, {counts['broke']} broke, {counts['skipped']} skipped")
    return 1 if counts["broke"] else 0


if __name__ == "__main__":
    sys.exit(main())
