"""What a reader sees of a result table: its width follows $COLUMNS, and a pipe gets whole lines (as
`ls` and `git` do); scores with the decimals that tell different scores apart. Real processes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import PAPERS, write_corpus

LAUNCHER = Path(__file__).resolve().parent / "build_launcher.py"


def papers(workdir, *args, columns=None):
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, str(LAUNCHER), *args], cwd=workdir, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture
def index(workdir):
    write_corpus(workdir / "in", PAPERS)
    assert papers(workdir, "build", "in", "--index", "x").returncode == 0
    return workdir


def test_a_pipe_gets_whole_lines_and_columns_is_honoured(index):
    whole = papers(index, "like", "dp1", "--index", "x", "--why")
    assert whole.returncode == 0, whole.stderr
    rows = whole.stdout.splitlines()[1:]
    # Whole cells: each reason ends with its sentence pair's cosine, "(0.67)" (the quoted
    # sentences are shortened by the reason itself, not by the table).
    assert all(re.search(r"\(\d\.\d\d\)$", row) for row in rows), rows
    assert max(map(len, rows)) > 80
    for columns in ("60", "150"):
        fitted = papers(index, "like", "dp1", "--index", "x", "--why", columns=columns)
        assert max(map(len, fitted.stdout.splitlines())) <= int(columns)
    assert "…" in papers(index, "like", "dp1", "--index", "x", "--why", columns="60").stdout


def test_different_scores_never_read_alike():
    from recommender.render.tables import score_texts

    assert score_texts([0.9996, 0.9991, 0.5]) == ["0.9996", "0.9991", "0.5000"]
    assert score_texts([0.91234, 0.8]) == ["0.912", "0.800"]
    assert score_texts([0.7, 0.7]) == ["0.700", "0.700"]  # a tie shown is a tie


def test_the_help_says_what_a_score_means(workdir):
    shown = " ".join(papers(workdir, "like", "--help").stdout.split())
    assert "A score is the paper's similarity" in shown and "a real tie" in shown
