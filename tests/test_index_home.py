"""Where indexes live: $PAPERS_HOME, else ./indexes/ in a checkout, else the user data
folder; `papers indexes` lists them; `papers build` outside a checkout needs an input."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from corpus import write_corpus
from recommender.cli import main
from recommender.index.home import IndexHome, index_home, resolve_index_dir


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def elsewhere(workdir, monkeypatch):
    """A folder that is not a checkout, with no $PAPERS_HOME and a private user data folder."""
    monkeypatch.delenv("PAPERS_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(workdir / "data"))
    return workdir


def test_papers_home_wins(elsewhere, monkeypatch):
    (elsewhere / "indexes").mkdir()
    monkeypatch.setenv("PAPERS_HOME", str(elsewhere / "mine"))
    assert index_home() == IndexHome(elsewhere / "mine", "PAPERS_HOME")
    assert resolve_index_dir("arxiv") == elsewhere / "mine" / "arxiv"
    assert resolve_index_dir("./arxiv") == Path("./arxiv")  # a path stays a path


def test_a_checkout_uses_its_indexes_folder(elsewhere):
    (elsewhere / "indexes").mkdir()
    assert index_home() == IndexHome(Path("indexes"), "checkout")
    assert resolve_index_dir(None) == Path("indexes/default")


def test_elsewhere_the_user_data_folder(elsewhere):
    home = elsewhere / "data" / "papers" / "indexes"
    assert index_home() == IndexHome(home, "user data folder")
    assert resolve_index_dir("default") == home / "default"


def test_build_outside_a_checkout_needs_an_input(elsewhere, fake_model):
    result = run("build")
    assert (result.exit_code, result.stdout, result.stderr) == (
        1, "", "Error: no input given: name a file or folder of papers, e.g. `papers build my-papers.bib`\n")


def test_build_and_info_say_where_the_index_is(elsewhere, fake_model):
    write_corpus(elsewhere / "in")
    home = elsewhere / "data" / "papers" / "indexes"
    result = run("build", "in")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"indexed 6 papers in {home}/default: encoded 6, reused 0 from the cache (flat search)\n"
    assert run("info").stdout.startswith(f"index:      {home}/default\n")
    result = run("like", "dp1", "--index", "nope")
    assert result.stderr == f"Error: no index at {home}/nope: run `papers build my-papers.bib --index nope` first\n"


def test_papers_indexes_lists_them(elsewhere, fake_model, monkeypatch):
    home = elsewhere / "data" / "papers" / "indexes"
    result = run("indexes")
    assert (result.exit_code, result.stdout) == (0, (
        f"no indexes in {home} (the user data folder; set $PAPERS_HOME to choose another): "
        "build one with `papers build my-papers.bib`\n"))
    write_corpus(elsewhere / "in")
    assert run("build", "in").exit_code == 0
    assert run("build", "in", "--index", "small", "--model", "other-model").exit_code == 0
    (home / "broken").mkdir()
    (home / "broken" / "CURRENT").write_text("nonsense here now\n")
    rows = json.loads(run("indexes", "--format", "json").stdout)
    assert [(row["name"], row["papers"], row["model"]) for row in rows] == [
        ("broken", None, ""), ("default", 6, "all-MiniLM-L6-v2"), ("small", 6, "other-model")]
    assert rows[0]["problem"] == f"index file {home}/broken/CURRENT is damaged: run `papers build --index broken`"
    sizes = {row["name"]: row["bytes"] for row in rows}
    # The size `info` reports: the live version's files, as the manifest lists them.
    assert sizes["default"] == json.loads(run("info", "--format", "json").stdout)["bytes"]
    monkeypatch.setenv("PAPERS_HOME", str(home))
    table = run("indexes").stdout.splitlines()
    assert table[0] == f"indexes in {home} (from $PAPERS_HOME)"
    assert table[1].split() == ["name", "papers", "model", "size", "built_at", "problem"]
    assert table[3].split()[:4] == ["default", "6", "all-MiniLM-L6-v2", f"{sizes['default'] / 1000:.1f}"]


def test_the_tests_user_data_folder_is_this_runs_own(tmp_path_factory):
    """tests/conftest.py gives the user data folder a folder of this run's: two runs on one machine
    (two CI clones side by side) never share it."""
    import os

    folder = Path(os.environ["XDG_DATA_HOME"])
    assert folder.is_dir() and folder.is_relative_to(tmp_path_factory.getbasetemp())
