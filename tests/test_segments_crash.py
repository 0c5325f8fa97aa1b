"""`papers add` and `papers build --compact` killed at chosen and at random points, as real
processes
(tests/build_launcher.py), while this process reads the index: every reader sees the old set of
papers
or the new one, never a mixture, and the next add or compaction cleans up."""

import random
import signal
import time

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
