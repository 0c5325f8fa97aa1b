"""Crashes and concurrent use lose nothing: real build processes are killed or paused
at chosen points (tests/build_launcher.py) while this process reads the index."""

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from corpus import PAPERS, write_corpus
from launching import POINTS, finish, launch
from recommender import PaperIndex, build_index
from recommender.cli import main

NEW_PAPERS = PAPERS + [
    {"id": "gr1", "title": "Spectral Sparsifiers", "abstract": "Graph sparsification with spectral bounds."},
    {"id": "gr2", "title": "Fast Laplacian Solvers", "abstract": "Nearly linear time Laplacian solvers for graphs."},
]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def wait_for(path: Path, process: subprocess.Popen, limit: float = 120) -> None:
    """Until the launcher touches `path` (fails if it exits first)."""
    deadline = time.monotonic() + limit
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"launcher exited with {process.returncode}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"launcher never reached {path.name}")
        time.sleep(0.02)


def leftovers(index_dir: Path) -> list[str]:
    return sorted(p.name for p in index_dir.iterdir() if p.name.startswith((".tmp-", ".CURRENT.tmp-")))


def versions(index_dir: Path) -> list[str]:
    return sorted(p.name for p in index_dir.glob("v-*"))


def answers() -> tuple[str, str, str]:
    """What readers see: a recommendation list, the paper list and a verified info."""
    like, listing, verify = run("like", "dp1", "--format", "json"), run("list", "--format", "json"), run("info", "--verify")
    assert (like.exit_code, listing.exit_code, verify.exit_code) == (0, 0, 0), (like.output, listing.output, verify.output)
    return like.stdout, listing.stdout, verify.stdout.splitlines()[-1]


@pytest.fixture
def old_index(workdir, fake_model):
    """An index of six papers, and what readers see in it; `new/` holds eight papers."""
    build_index([write_corpus(workdir / "old")])
    write_corpus(workdir / "new", NEW_PAPERS)
    return answers()


@pytest.mark.parametrize("point", POINTS)
def test_a_build_killed_at_any_point_leaves_the_old_index_or_the_new_one(open_index, workdir, old_index, point):
    index_dir = workdir / "indexes/default"
    code, _, _ = finish(launch(workdir, "build", "new", point=point))
    assert code == -signal.SIGKILL
    if point == "after-current":
        with PaperIndex.open() as index:
            assert len(index) == len(NEW_PAPERS)
        assert answers()[2] == old_index[2]  # complete: every file matches its checksum
    else:
        assert answers() == old_index  # untouched, still loadable and verified
    # The next build cleans up whatever the killed one left behind.
    result = run("build", "new")
    assert result.exit_code == 0, result.output
    assert leftovers(index_dir) == []
    assert len(versions(index_dir)) == 1
    assert len(open_index(verify=True)) == len(NEW_PAPERS)


def test_a_second_build_is_refused_while_one_runs_then_waits_with_wait(open_index, workdir, old_index):
    index_dir = workdir / "indexes/default"
    write_corpus(workdir / "small", PAPERS[:3])
    first = launch(workdir, "build", "new", point="after-encoding", action="hold", sync=workdir / "first")
    wait_for(workdir / "first/ready", first)
    tree = sorted(p.name for p in index_dir.iterdir())

    refused = run("build", "small")
    assert (refused.exit_code, refused.stdout, refused.stderr) == (
        1, "", "Error: index indexes/default is being built by another process: wait for it to finish, or build with wait, which waits its turn\n")
    assert sorted(p.name for p in index_dir.iterdir()) == tree  # the running build's folder is left alone
    assert answers() == old_index

    second = launch(workdir, "build", "small", "--wait", sync=workdir / "second")
    wait_for(workdir / "second/waiting-for-lock", second)
    assert second.poll() is None  # blocked on the lock the first build holds
    (workdir / "first/release").touch()
    assert finish(first)[:2] == (0, "indexed 8 papers in indexes/default: encoded 2, reused 6 from the cache (flat search)"
                                    "; since the last build 2 added, 0 changed, 0 removed\n")
    assert finish(second)[:2] == (0, "indexed 3 papers in indexes/default: encoded 0, reused 3 from the cache (flat search)"
                                     "; since the last build 0 added, 0 changed, 5 removed\n")
    # The builds ran one after the other: the last one's index, whole.
    assert open_index(verify=True).ids == [paper["id"] for paper in PAPERS[:3]]
    assert leftovers(index_dir) == [] and len(versions(index_dir)) == 1


@pytest.mark.parametrize("point", ["after-files", "before-rename", "before-current"])
def test_readers_during_a_build_see_the_old_index_then_the_new(workdir, old_index, point):
    build = launch(workdir, "build", "new", point=point, action="hold", sync=workdir / "sync")
    wait_for(workdir / "sync/ready", build)
    assert answers() == old_index
    (workdir / "sync/release").touch()
    assert finish(build)[0] == 0
    like, listing, _ = answers()
    assert len(json.loads(listing)) == len(NEW_PAPERS)
    assert {row["id"] for row in json.loads(like)} >= {"gr1", "gr2"}


READ_COMMANDS = [
    ["like", "dp1"], ["like", "dp1", "--mode", "lexical", "--why"], ["search", "private language models"],
    ["show", "TFLA"], ["list"], ["info", "--verify"],
]


def tree_state(root: Path) -> dict:
    """Every path under root with its content and modification time."""
    return {
        path.relative_to(root).as_posix(): (path.read_bytes() if path.is_file() else None, path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
    }


def test_reading_writes_nothing(workdir, old_index):
    # Root ignores permissions, so this is checked directly: no file or folder under
    # indexes/ is created, changed or touched by any read command.
    before = tree_state(workdir / "indexes")
    for args in READ_COMMANDS:
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
    assert tree_state(workdir / "indexes") == before


def _as_nobody(args: list[str]) -> tuple[int, str, str]:
    """Run a CLI command in a forked child that has dropped root for `nobody`.

    The interpreter lives under /root (unreadable by nobody), so every module the
    command needs is imported here first, as root.
    """
    import recommender.embed.sentence_transformer, recommender.index.ann, recommender.index.lexical, recommender.render.tables  # noqa: E401, F401
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            result = CliRunner().invoke(main, args)
            payload = json.dumps([result.exit_code, result.stdout, result.stderr])
        except BaseException as error:  # noqa: BLE001 - report anything to the parent
            payload = json.dumps([99, "", repr(error)])
        os.write(write_end, payload.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        data = pipe.read()
    os.waitpid(child, 0)
    return tuple(json.loads(data))


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to `nobody` needs root")
def test_a_read_only_index_can_be_queried_but_not_rebuilt(monkeypatch, fake_model):
    # pytest's tmp folders are private to root: use a folder `nobody` can enter.
    root = Path(tempfile.mkdtemp(prefix="papers-readonly-", dir="/tmp"))
    try:
        root.chmod(0o755)
        monkeypatch.chdir(root)
        monkeypatch.delenv("PAPERS_INDEX", raising=False)
        build_index([write_corpus(root / "in")])
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        before = tree_state(root / "indexes")
        for args in READ_COMMANDS:
            code, stdout, stderr = _as_nobody(args)
            assert (code, stderr) == (0, ""), (args, stderr)
            assert stdout == run(*args).stdout
        assert _as_nobody(["build", "in"]) == (
            1, "", "Error: cannot write index indexes/default: Permission denied: choose a writable index\n")
        assert tree_state(root / "indexes") == before
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755)
        shutil.rmtree(root)


def test_an_open_index_keeps_its_version_through_rebuilds(open_index, workdir, old_index):
    # A reader pins the version it opened (a shared lock on its manifest); builds remove
    # old versions only when no reader holds them.
    index_dir = workdir / "indexes/default"
    reader = open_index()
    before = [r.to_dict() for r in reader.like("dp1", k=3)]
    build_index(["new"])
    build_index(["new"])
    with PaperIndex.open() as index:
        assert len(versions(index_dir)) == 2 and len(index) == len(NEW_PAPERS)
    assert [r.to_dict() for r in reader.like("dp1", k=3)] == before
    assert [p.id for p in reader.papers()] == [p["id"] for p in PAPERS]
    reader.stored.close()
    del reader
    build_index(["new"])
    assert len(versions(index_dir)) == 1


def test_opening_retries_when_a_build_swaps_versions_meanwhile(open_index, workdir, old_index, monkeypatch):
    from recommender.index.stored import _read_current

    real = _read_current
    answers_ = iter([("v-removed-meanwhile", None)])
    monkeypatch.setattr("recommender.index.stored._read_current", lambda index_dir: next(answers_, None) or real(index_dir))
    assert len(open_index()) == len(PAPERS)
