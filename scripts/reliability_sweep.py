"""Adversarial sweep (issue 13): hostile or careless uses of `papers`, each run as a real process.

    python scripts/reliability_sweep.py [--only SUBSTRING]

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
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def one_error_line(code, stderr, expected_code=1) -> str | None:
    """None when the failure is the clean kind: the expected exit, one Error line (warnings allowed)."""
    if "Traceback" in stderr:
        return "traceback: " + stderr.strip().splitlines()[-1]
    errors = [line for line in stderr.splitlines()
              if line.strip() and not line.startswith(("warning: ", "encoding", "related work"))]  # bar labels
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
    return expect_error(cwd, "related-work", "dp1", "-k", "0")


@case("related-work -k 10**20")
def _(cwd):
    return expect_ok(cwd, "related-work", "dp1", "-k", str(10 ** 20))


@case("sessions --n 0")
def _(cwd):
    return expect_error(cwd, "sessions", "--n", "0")


@case("sessions --n 10**20")
def _(cwd):
    return expect_error(cwd, "sessions", "--n", str(10 ** 20))


@case("sessions --max-per-session -1")
def _(cwd):
    return expect_error(cwd, "sessions", "--n", "2", "--max-per-session", "-1")


@case("map --n 10**20")
def _(cwd):
    return expect_error(cwd, "map", "--out", "m.html", "--n", str(10 ** 20))


@case("--min-score inf")
def _(cwd):
    return expect_error(cwd, "like", "dp1", "--min-score", "inf")


@case("--diverse nan")
def _(cwd):
    return expect_error(cwd, "like", "dp1", "--diverse", "nan")


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
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("laying out")]  # progress
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
    from recommender.index import store

    source, target = cwd / "src", cwd / "dst"
    source.mkdir()
    (source / "model.onnx").write_bytes(b"good")
    import hashlib

    record = {"model.onnx": {"bytes": 4, "sha256": hashlib.sha256(b"good").hexdigest()}}
    (source / "model.onnx").write_bytes(b"bad!")
    if store.link_checked(source, target, record) or target.exists():
        return "a damaged file was linked"
    (source / "model.onnx").unlink()
    (cwd / "good").write_bytes(b"good")
    (source / "model.onnx").symlink_to(cwd / "good")
    return "a link was linked" if store.link_checked(source, target, record) else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
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
        if options.only not in name:
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
