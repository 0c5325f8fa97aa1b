"""Long builds keep their work: vectors reach the embedding cache in committed groups
as they are encoded, a killed or interrupted build resumes from there, and a damaged
cached vector is encoded again instead of reused."""

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from corpus import write_corpus
from recommender import PaperIndex
from recommender.cli import main
from recommender.embed import export_cache, windows
from recommender.embed.windows import Chunking, embed_texts
from recommender.errors import EncodingInterrupted
from recommender.index.layout import CURRENT

LAUNCHER = Path(__file__).resolve().parent / "build_launcher.py"
WORDS = [f"{stem}{suffix}" for stem in ("graph", "spectral", "privacy", "gradient", "video", "kernel", "tensor",
                                        "sparse", "recurrent", "quantum", "protein", "retrieval")
         for suffix in ("s", "ing", "ation", "ical", "ness", "wise", "less", "ized")]


def many_papers(count: int, prefix: str = "p") -> list[dict]:
    """Distinct synthetic abstracts; some longer than the fake model's 40-token window."""
    rng = random.Random(count)
    return [
        {"id": f"{prefix}{i:05d}", "title": f"Paper {prefix}{i}",
         "abstract": f"{prefix}{i:05d}x " + " ".join(rng.choices(WORDS, k=rng.randint(10, 90)))}
        for i in range(count)
    ]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def cache_rows(index_dir: Path) -> int:
    """Committed vectors, read as another process would (WAL: never blocks the writer)."""
    path = export_cache.embedding_cache_path()
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
        try:
            return db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        except sqlite3.OperationalError:  # the build has not created the table yet
            return 0


def stored_vectors(index: str | None = None) -> np.ndarray:
    with PaperIndex.open(index) as recommender:
        return np.array(recommender.vectors)


class RecordingCache:
    """A VectorCache that remembers every commit and what the encoder had done by then."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.rows: dict[str, np.ndarray] = {}
        self.commits: list[tuple[int, int]] = []  # (texts in the commit, windows encoded so far)

    def get_many(self, keys):
        return {key: self.rows[key] for key in keys if key in self.rows}

    def put_many(self, items):
        self.rows.update(items)
        self.commits.append((len(items), len(self.encoder.encoded_texts)))


def test_vectors_reach_the_cache_in_groups_while_encoding_goes_on(fake_model):
    texts = [paper["abstract"] for paper in many_papers(600)]
    cache = RecordingCache(fake_model)
    result = embed_texts(fake_model, texts, Chunking(), cache)
    assert [size for size, _ in cache.commits] == [256, 256, 88]
    encoded_at_commit = [windows for _, windows in cache.commits]
    assert encoded_at_commit == sorted(encoded_at_commit) and encoded_at_commit[0] < encoded_at_commit[-1]
    # Same vectors as without a cache, and as reading them back from the cache.
    assert np.array_equal(result.vectors, embed_texts(fake_model, texts, Chunking()).vectors)
    again = embed_texts(fake_model, texts, Chunking(), cache)
    assert (again.encoded, again.reused) == (0, 600) and np.array_equal(again.vectors, result.vectors)


def test_a_slow_encoder_commits_every_few_seconds(fake_model, monkeypatch):
    monkeypatch.setattr(windows, "ENCODE_BATCH", 64)
    monkeypatch.setattr(windows, "COMMIT_SECONDS", 0.0)  # every encoder call takes longer than this
    cache = RecordingCache(fake_model)
    embed_texts(fake_model, [paper["abstract"] for paper in many_papers(600)], Chunking(), cache)
    assert [size for size, _ in cache.commits] == [64] * 9 + [24]


def test_ctrl_c_keeps_the_committed_groups_and_the_old_index(workdir, fake_model, papers_cli, monkeypatch):
    monkeypatch.setattr(windows, "ENCODE_BATCH", 64)  # a group is four encoder calls
    write_corpus(workdir / "old")
    assert papers_cli("build", "old").exit_code == 0
    old_like = papers_cli("like", "dp1", "--format", "json").stdout
    write_corpus(workdir / "big", many_papers(600))
    encode, calls = fake_model.encode, []

    def interrupted_encode(texts):
        calls.append(len(texts))
        if len(calls) == 6:
            raise KeyboardInterrupt
        return encode(texts)

    fake_model.encode = interrupted_encode
    index_dir = workdir / "indexes/default"
    result = papers_cli("build", "big")
    # Five calls of 64 papers were encoded: 256 committed as a group, 64 more on the way out.
    assert (result.exit_code, result.stdout) == (130, "")
    assert result.stderr.splitlines()[-1] == (
        "interrupted: 320 of 600 papers are encoded and kept in the cache; run the same build again to resume")
    assert cache_rows(index_dir) == 6 + 320
    assert [p.name for p in index_dir.iterdir() if p.name.startswith((".tmp-", ".CURRENT.tmp-"))] == []
    assert len(list(index_dir.glob("v-*"))) == 1
    assert papers_cli("like", "dp1", "--format", "json").stdout == old_like

    fake_model.encode = encode
    result = papers_cli("build", "big")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[0] == "resuming: 320 of 600 papers already encoded"
    assert result.stdout == ("indexed 600 papers in indexes/default: encoded 280, reused 320 from the cache (flat search)"
                             "; since the last build 600 added, 0 changed, 6 removed\n")
    # Once a build has finished encoding, the next one does not claim to resume.
    assert papers_cli("build", "big").stderr == ""


def test_the_library_says_how_many_papers_an_interrupted_build_kept(workdir, fake_model):
    from recommender import build_index

    write_corpus(workdir / "big", many_papers(300))
    encode, calls = fake_model.encode, []

    def interrupted_encode(texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return encode(texts)

    fake_model.encode = interrupted_encode
    with pytest.raises(EncodingInterrupted) as stopped:
        build_index(["big"])
    assert (stopped.value.kept, stopped.value.total) == (windows.ENCODE_GROUP, 300)
    assert cache_rows(workdir / "indexes/default") == windows.ENCODE_GROUP
    fake_model.encode = encode
    notices = []
    report = build_index(["big"], notice=notices.append)
    assert notices == [f"resuming: {windows.ENCODE_GROUP} of 300 papers already encoded"]
    assert (report.encoded, report.reused) == (300 - windows.ENCODE_GROUP, windows.ENCODE_GROUP)


def launch_slow_build(workdir: Path, *args: str, seconds_per_call: float) -> subprocess.Popen:
    env = dict(os.environ, PAPERS_TEST_ENCODE_SECONDS=str(seconds_per_call))
    env.pop("PAPERS_INDEX", None)
    env.pop("PAPERS_TEST_POINT", None)
    return subprocess.Popen([sys.executable, str(LAUNCHER), *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_build_killed_part_way_resumes_and_ends_as_an_uninterrupted_one(workdir, fake_model):
    papers = many_papers(2000)
    write_corpus(workdir / "big", papers)
    index_dir = workdir / "indexes/default"
    build = launch_slow_build(workdir, "build", "big", seconds_per_call=0.3)  # 8 calls: >= 2.4 s
    deadline = time.monotonic() + 120
    while (seen := cache_rows(index_dir)) < windows.ENCODE_GROUP:
        assert build.poll() is None, build.communicate()
        assert time.monotonic() < deadline, "no group was ever committed"
        time.sleep(0.02)
    build.send_signal(signal.SIGKILL)
    build.communicate(timeout=60)
    assert build.returncode == -signal.SIGKILL
    kept = cache_rows(index_dir)
    assert windows.ENCODE_GROUP <= seen <= kept < len(papers)  # killed part-way, nothing committed was lost
    assert not (index_dir / CURRENT).exists()

    result = run("build", "big")
    assert result.exit_code == 0, result.output
    # Before the resume, only the precision chosen for a corpus of this size may be said (on a
    # CPU without AMX: "precision int8-static for 2,000 papers (...)").
    lines, resuming = result.stderr.splitlines(), f"resuming: {kept:,} of 2,000 papers already encoded"
    assert resuming in lines, result.stderr
    assert all(line.startswith("precision ") for line in lines[:lines.index(resuming)]), result.stderr
    assert result.stdout == (f"indexed 2000 papers in indexes/default: encoded {2000 - kept}, "
                             f"reused {kept} from the cache (flat search)\n")

    assert run("build", "big", "--index", "straight").exit_code == 0
    assert np.array_equal(stored_vectors(), stored_vectors("straight"))
    for paper in papers[::250]:
        resumed = run("like", paper["id"], "--format", "json")
        straight = run("like", paper["id"], "--format", "json", "--index", "straight")
        assert resumed.exit_code == 0 and json.loads(resumed.stdout) == json.loads(straight.stdout)


def flip_bit(index_dir: Path, row: int = 0, bit: int = 0) -> None:
    with contextlib.closing(sqlite3.connect(export_cache.embedding_cache_path())) as db, db:
        key, blob = db.execute("SELECT key, vector FROM vectors ORDER BY key LIMIT 1 OFFSET ?", (row,)).fetchone()
        damaged = bytearray(blob)
        damaged[bit // 8] ^= 1 << (bit % 8)
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?", (bytes(damaged), key))


@pytest.mark.parametrize("bit", [0, 7, 1000, 256 * 32 - 1])
def test_a_flipped_bit_in_a_cached_vector_is_encoded_again(workdir, fake_model, papers_cli, bit):
    write_corpus(workdir / "in")
    assert papers_cli("build", "in").exit_code == 0
    before = stored_vectors()
    flip_bit(workdir / "indexes/default", row=3, bit=bit)
    result = papers_cli("build", "in")
    assert result.stdout == "indexed 6 papers in indexes/default: encoded 1, reused 5 from the cache (flat search)\n"
    assert np.array_equal(stored_vectors(), before)
    assert papers_cli("build", "in").stdout.endswith("encoded 0, reused 6 from the cache (flat search)\n")


def test_a_cache_written_before_checksums_is_kept_and_checked_from_then_on(workdir, fake_model, papers_cli):
    write_corpus(workdir / "in")
    assert papers_cli("build", "in").exit_code == 0
    before = stored_vectors()
    cache = export_cache.embedding_cache_path()
    with contextlib.closing(sqlite3.connect(cache)) as db, db:
        db.execute("ALTER TABLE vectors DROP COLUMN checksum")  # the layout of earlier versions
        db.execute("DROP TABLE state")
    result = papers_cli("build", "in")
    assert result.stdout == "indexed 6 papers in indexes/default: encoded 0, reused 6 from the cache (flat search)\n"
    with contextlib.closing(sqlite3.connect(cache)) as db:
        assert db.execute("SELECT count(*) FROM vectors WHERE checksum IS NULL").fetchone() == (0,)
    flip_bit(workdir / "indexes/default", row=2, bit=77)
    assert papers_cli("build", "in").stdout.endswith("encoded 1, reused 5 from the cache (flat search)\n")
    assert np.array_equal(stored_vectors(), before)


def test_the_cache_is_in_wal_mode(workdir, fake_model, papers_cli):
    write_corpus(workdir / "in")
    assert papers_cli("build", "in").exit_code == 0
    with contextlib.closing(sqlite3.connect(export_cache.embedding_cache_path())) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
