"""Reliability, round four: the user's files. Each case through a real `papers` process, in the
test's own folder (FIFOs and devices made there, never the real /dev)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
LAUNCHER = TESTS / "build_launcher.py"  # `papers` with the fake model (tests/fakes.py)


def papers(workdir: Path, *args: str, stdin: str | None = None, timeout: float = 120):
    """A real `papers` process in `workdir`, with the deterministic fake encoder."""
    return subprocess.run([sys.executable, str(LAUNCHER), *args], cwd=workdir, capture_output=True, text=True,
                          input=stdin, timeout=timeout, env=dict(os.environ))


def damaged_cache(path: Path) -> None:
    """A real SQLite embedding cache whose middle pages are overwritten (a disk error, a bad copy)."""
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, dimension INTEGER, vector BLOB, checksum INTEGER)")
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
    assert cleared.stdout.startswith(f"the embedding cache {own_embedding_cache / 'embeddings.sqlite'} was damaged (")
    assert len(cleared.stdout.splitlines()) == 1
    info = papers(workdir, "cache", "info", "--format", "json")
    assert info.returncode == 0 and '"entries": 0' in info.stdout


def test_cache_info_on_a_damaged_cache_has_no_traceback(workdir, own_embedding_cache):
    damaged_cache(own_embedding_cache / "embeddings.sqlite")
    info = papers(workdir, "cache", "info")
    assert info.returncode == 0 and "Traceback" not in info.stderr and len(info.stderr.splitlines()) <= 1
    assert info.stdout.startswith(f"embedding cache: {own_embedding_cache / 'embeddings.sqlite'}\nsize: ")
