"""`papers add` and `papers build --compact` killed at chosen and at random points, as real
processes
(tests/build_launcher.py), while this process reads the index: every reader sees the old set of
papers
or the new one, never a mixture, and the next add or compaction cleans up."""

import gc
import random
import re
import signal
import time
from pathlib import Path

import pytest

from corpus import PAPERS, write_corpus
from recommender import build_index
from recommender.query.segmented import open_index
from launching import POINTS, finish, launch

MORE = [
    {
        "id": f"new{number:02d}",
        "title": f"Gradient clipping study {number}",
        "abstract": f"Private training of language models, variant {number}, "
        "with clipping and noise.",
    }
    for number in range(40)
]
OLD = frozenset(paper["id"] for paper in PAPERS)
NEW = OLD | frozenset(paper["id"] for paper in MORE)


def live_ids() -> frozenset[str]:
    """The papers a reader opening the index now sees (and can query)."""
    with open_index() as index:
        found = {paper.id for paper in index.papers()}
        assert index.like("dp1", k=3)
    gc.collect()  # a reader in a reference cycle would hold its segment from being removed
    return frozenset(found)


def leftovers(workdir) -> list[str]:
    from recommender.index.segments import read_segments

    folder = workdir / "indexes/default/segments"
    listed = set(read_segments(workdir / "indexes/default").segments)
    return (
        sorted(path.name for path in folder.iterdir() if path.name not in listed)
        if folder.exists()
        else []
    )


@pytest.fixture
def base(workdir, fake_model):
    build_index([write_corpus(workdir / "old")])
    write_corpus(workdir / "new", MORE)
    assert live_ids() == OLD


@pytest.mark.parametrize("point", [*POINTS, "before-publish"])
def test_an_add_killed_at_a_chosen_point_leaves_the_old_set_or_the_new(workdir, base, point):
    code, _, _ = finish(launch(workdir, "add", "new", "--no-compact", point=point))
    assert code == -signal.SIGKILL
    assert live_ids() == OLD  # the segment list was never replaced
    code, out, err = finish(launch(workdir, "add", "new", "--no-compact"))
    assert code == 0, err
    assert live_ids() == NEW
    assert leftovers(workdir) == []


def _kill_at_random(workdir, rng, *args):
    """Start `papers ARGS`, read the index until a random moment, kill it; every read a whole
    set."""
    seen = set()
    process = launch(workdir, *args)
    deadline = time.monotonic() + rng.uniform(0.3, 3.0)
    while time.monotonic() < deadline and process.poll() is None:
        seen.add(live_ids())
    process.send_signal(signal.SIGKILL)
    finish(process)
    seen.add(live_ids())
    return seen


def test_adds_and_compactions_killed_at_random_points_show_every_reader_a_whole_set(
    workdir, base, monkeypatch
):
    monkeypatch.setenv("PAPERS_TEST_ENCODE_SECONDS", "0.05")
    rng = random.Random(33)
    for _ in range(3):
        assert _kill_at_random(workdir, rng, "add", "new", "--no-compact") <= {OLD, NEW}
    code, _, err = finish(launch(workdir, "add", "new", "--no-compact"))
    assert code == 0, err
    assert live_ids() == NEW
    for _ in range(3):
        assert _kill_at_random(workdir, rng, "build", "--compact") == {NEW}
    code, _, err = finish(launch(workdir, "build", "--compact"))
    assert code == 0, err
    assert live_ids() == NEW
    assert not (workdir / "indexes/default/segments").exists()


MORE2 = [
    {
        "id": f"late{number:02d}",
        "title": f"Video aesthetic study {number}",
        "abstract": f"Aesthetic assessment of videos, variant {number}, with annotations.",
    }
    for number in range(3)
]
LATE = NEW | frozenset(paper["id"] for paper in MORE2)


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def _segment_names(workdir) -> tuple[str, ...]:
    from recommender.index.segments import read_segments

    return read_segments(workdir / "indexes/default").segments


def test_an_add_past_the_share_compacts_in_the_background_and_adds_go_on(
    workdir, base, monkeypatch, tmp_path
):
    """The add returns while its compaction is held just before it swaps the base in; readers
    see whole sets, an add meanwhile is published and kept by the compaction, a second
    compaction is not started; released, the compaction publishes."""
    sync = tmp_path / "sync"
    monkeypatch.setenv("PAPERS_TEST_CHILD_POINT", "before-current")
    code, out, err = finish(launch(workdir, "add", "new", action="hold", sync=sync))
    assert code == 0, err
    assert "compacting the index in the background (process" in out
    _wait_for(lambda: (sync / "ready").exists(), "the compaction reached its hold")
    assert live_ids() == NEW  # the segment is live before the compaction ends
    write_corpus(workdir / "late", MORE2)
    monkeypatch.setenv("PAPERS_TEST_CHILD_POINT", "")
    code, out, err = finish(launch(workdir, "add", "late"))
    assert code == 0, err
    assert "added 3 papers" in out and "a compaction of the index is running already" in out
    assert live_ids() == LATE
    (sync / "release").touch()
    seen = set()
    _wait_for(
        lambda: seen.add(live_ids())
        or not (workdir / "indexes/default/segments/compacting").exists(),
        "the compaction finished",
    )
    assert seen <= {LATE} and live_ids() == LATE
    # The compacted base holds the first add's papers; the later add stays a segment of it.
    assert len(_segment_names(workdir)) == 1
    code, out, err = finish(launch(workdir, "add", "late"))  # removes what readers held then
    assert code == 0 and "added 0 papers" in out, err
    assert leftovers(workdir) == [] and live_ids() == LATE


def test_a_background_compaction_killed_is_resumed_by_a_later_add(workdir, base, monkeypatch):
    monkeypatch.setenv("PAPERS_TEST_CHILD_POINT", "before-current")
    code, out, err = finish(launch(workdir, "add", "new"))
    assert code == 0 and "in the background" in out, err
    folder = workdir / "indexes/default/segments/compacting"
    child = int(re.search(r"\(process (\d+)\)", out).group(1))
    _wait_for(lambda: not Path(f"/proc/{child}").exists(), "the compaction was killed")
    assert live_ids() == NEW and len(_segment_names(workdir)) == 1
    monkeypatch.setenv("PAPERS_TEST_CHILD_POINT", "")
    code, out, err = finish(launch(workdir, "add", "new"))  # nothing new; the share still passed
    assert code == 0 and "added 0 papers" in out and "in the background" in out, err
    # The compaction's own folder goes before its last step (removing the emptied segments):
    # its process ending is what says it finished.
    child = int(re.search(r"\(process (\d+)\)", out).group(1))
    _wait_for(lambda: not Path(f"/proc/{child}").exists(), "the compaction finished")
    assert not folder.exists()
    assert live_ids() == NEW and _segment_names(workdir) == ()
    assert not (workdir / "indexes/default/segments").exists()


@pytest.mark.parametrize("point", ["before-publish", "before-swap"])
def test_a_compaction_killed_while_it_swaps_its_base_in_leaves_a_whole_set(workdir, base, point):
    """Killed with its new base moved in but not listed, or listed but CURRENT not swapped:
    readers see the same papers, and the next compaction finishes the work."""
    code, _, err = finish(launch(workdir, "add", "new", "--no-compact"))
    assert code == 0, err
    code, _, _ = finish(launch(workdir, "build", "--compact", point=point))
    assert code == -signal.SIGKILL
    assert live_ids() == NEW and len(_segment_names(workdir)) == 1
    code, _, err = finish(launch(workdir, "build", "--compact"))
    assert code == 0, err
    assert live_ids() == NEW and _segment_names(workdir) == ()
    assert not (workdir / "indexes/default/segments").exists()
    versions = sorted(path.name for path in (workdir / "indexes/default").glob("v-*"))
    assert len(versions) == 1  # the killed compaction's base removed too


def test_a_background_compaction_that_failed_is_reported_by_the_next_add(workdir, base):
    from recommender.index.segments import failed_compaction

    folder = workdir / "indexes/default/segments/compacting"
    folder.mkdir(parents=True)
    (folder / "log").write_text("a warning\nError: disk full writing v-1/vectors.npy\n")
    assert failed_compaction(workdir / "indexes/default") == "disk full writing v-1/vectors.npy"
    code, out, err = finish(launch(workdir, "add", "new"))
    assert code == 0
    assert "the last background compaction failed (disk full writing v-1/vectors.npy)" in err
    child = int(re.search(r"\(process (\d+)\)", out).group(1))  # tried again: waited for
    _wait_for(lambda: not Path(f"/proc/{child}").exists(), "the compaction ended")
    assert failed_compaction(workdir / "indexes/default") is None and live_ids() == NEW
    folder.mkdir(parents=True)
    (folder / "log").write_text("SomeWarning: a paper read twice\n")  # warnings are no failure
    assert failed_compaction(workdir / "indexes/default") is None


def test_an_add_to_an_index_given_by_a_relative_path_compacts_that_index(
    workdir, fake_model, monkeypatch
):
    """`--index ./stored` is a folder, as for `build` and `like`: the add's background compaction
    compacts it, not an index named 'stored' under $PAPERS_HOME, and what the add prints names it
    so that it resolves to the same folder."""
    from recommender.index.home import rebuild_hint
    from recommender.index.segments import read_segments

    monkeypatch.setenv("PAPERS_HOME", str(workdir / "home"))
    build_index([write_corpus(workdir / "old")], index="./stored")
    write_corpus(workdir / "new", MORE)
    code, out, err = finish(launch(workdir, "add", "new", "--index", "./stored"))
    assert code == 0 and "in the background" in out, err
    assert re.match(r"added \d+ papers to \./stored \(", out), out
    child = int(re.search(r"\(process (\d+)\)", out).group(1))
    _wait_for(lambda: not Path(f"/proc/{child}").exists(), "the compaction ended")
    log = workdir / "stored/segments/compacting/log"
    assert not log.exists(), log.read_text()
    assert read_segments(workdir / "stored").segments == ()
    with open_index("./stored") as index:
        assert {paper.id for paper in index.papers()} == NEW
    assert not (workdir / "home/stored").exists()
    assert "--index ./stored" in rebuild_hint(Path("stored"))


def test_a_background_compaction_is_detached_from_the_process_that_started_it(workdir):
    """A process that starts a compaction and ends before it (a short `papers add`) leaves no
    child of its own behind (no ResourceWarning as it exits); the compaction runs on in a session
    of its own, a failure to start it is in its log."""
    import os
    import subprocess
    import sys

    from recommender.index.segments import failed_compaction

    index = workdir / "stored"
    starter = (
        "import sys\n"
        "from recommender.index import segments\n"
        "segments.compaction_command = lambda index_dir: sys.argv[2:]\n"
        "print(segments.start_compaction(sys.argv[1]))\n"
    )

    def start(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", starter, str(index),
             *command],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))

    started = start(sys.executable, "-c", "import time; time.sleep(3)")
    assert started.returncode == 0 and started.stderr == "", started.stderr
    child = int(started.stdout)
    assert Path(f"/proc/{child}").exists() and os.getsid(child) == child  # outlived its starter
    _wait_for(lambda: not Path(f"/proc/{child}").exists(), "the compaction ended, reaped")
    failed = start("/nonexistent/papers")
    assert failed.returncode == 0 and failed.stderr == "", failed.stderr
    _wait_for(lambda: failed_compaction(index) is not None, "the failure was logged")
    assert failed_compaction(index).startswith("/nonexistent/papers could not be started: [Errno 2]")
