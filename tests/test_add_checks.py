"""`papers add` keeps every promise a build keeps: it runs the build's checks of an index and its
inputs (index/checks.CHECKS), merges the same paper under two IDs into one with an alias, refuses
one ID for two papers, and `--sync` compares whole sources and replaces a changed text."""

import json

import pytest
from corpus import PAPERS, write_corpus

from recommender.index import checks

PRIVACY = "Private training with gradient clipping and calibrated noise under a privacy budget."
DUPLICATED = [
    {
        "id": "vid-a",
        "title": "Aesthetic Video Ranking",
        "url": "https://doi.org/10.1145/12345",
        "abstract": "Ranking short videos by aesthetic quality with annotations from professional editors.",
    },
    {
        "id": "vid-b",
        "title": "Aesthetic video ranking",
        "url": "https://doi.org/10.1145/12345",
        "abstract": "We rank short clips by aesthetic quality, with labels from professional video editors.",
    },
    {
        "id": "rnn-a",
        "title": "Gated Linear Recurrences",
        "abstract": "Gated linear recurrences match attention on long sequences at a fraction of the cost.",
    },
    {
        "id": "rnn-b",
        "title": "Gated Linear Recurrences",
        "abstract": "Gated linear recurrences match attention on long sequences at a fraction of the cost.",
    },
    {
        "id": "graphs",
        "title": "Light Spanners",
        "abstract": "Every planar graph has a light spanner, found in linear time with separators.",
    },
]


def listed(run) -> list[str]:
    result = run("list", "--format", "json")
    assert result.exit_code == 0, result.output
    return sorted(row["id"] for row in json.loads(result.stdout))


def shown_id(run, reference) -> str:
    result = run("show", reference, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["id"]


def test_a_sync_of_a_folder_leaves_the_papers_of_a_file_named_like_it(workdir, run):
    """Syncing `refs` is about the folder refs/, never about `refs old.jsonl` beside it."""
    write_corpus(workdir / "refs", PAPERS[:3])
    write_corpus(workdir, PAPERS[3:], name="refs old.jsonl")
    write_corpus(workdir, PAPERS[:1], name="refs.jsonl")
    assert run("build", "refs", "refs old.jsonl").exit_code == 0
    result = run("add", "refs", "--sync", "--no-compact")
    assert result.exit_code == 0, result.output
    assert "removed 0 gone from it" in result.output
    assert listed(run) == sorted(paper["id"] for paper in PAPERS)
    # The folder emptied of one paper: only that one goes.
    write_corpus(workdir / "refs", PAPERS[:2])
    result = run("add", "./refs/", "--sync", "--no-compact")
    assert "removed 1 gone from it" in result.output, result.output
    assert listed(run) == sorted(paper["id"] for paper in PAPERS if paper["id"] != "vid1")


@pytest.mark.filterwarnings("ignore:.*same paper")
def test_adding_the_built_file_again_adds_no_duplicate(workdir, run):
    write_corpus(workdir, DUPLICATED, name="papers.jsonl")
    assert run("build", "papers.jsonl").exit_code == 0
    again = run("add", "papers.jsonl", "--no-compact")
    assert again.exit_code == 0, again.output
    assert again.output.startswith("added 0 papers") and "5 already in the index" in again.output
    assert listed(run) == ["graphs", "rnn-a", "vid-a"]
    assert shown_id(run, "vid-b") == "vid-a"


@pytest.mark.filterwarnings("ignore:.*same paper")
def test_the_same_paper_under_another_id_becomes_an_alias(workdir, run):
    """A record of a paper the index holds (the same DOI, or the same text) under another ID is
    left out with a warning, and its ID names the index's paper, through a compaction too."""
    write_corpus(workdir, DUPLICATED[:1] + DUPLICATED[2:3], name="papers.jsonl")
    assert run("build", "papers.jsonl").exit_code == 0
    other = [
        {**DUPLICATED[1], "id": "10.1145/12345-preprint"},
        {**DUPLICATED[3], "id": "rnn-copy"},
        {
            "id": "new1",
            "title": "Sparse Attention",
            "abstract": "Sparse attention recovers dense quality.",
        },
    ]
    write_corpus(workdir, other, name="other.jsonl")
    result = run("add", "other.jsonl", "--no-compact")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("added 1 paper ") and "2 already in the index" in result.stdout
    assert "warning: 2 duplicate papers kept once" in result.stderr
    assert listed(run) == ["new1", "rnn-a", "vid-a"]
    assert shown_id(run, "rnn-copy") == "rnn-a" and shown_id(run, "RNN-COPY") == "rnn-a"
    assert run("build", "--compact").exit_code == 0
    assert shown_id(run, "rnn-copy") == "rnn-a" and listed(run) == ["new1", "rnn-a", "vid-a"]


def test_a_sync_replaces_a_paper_whose_text_changed(workdir, run):
    library = write_corpus(workdir / "library", PAPERS)
    assert run("build", str(library)).exit_code == 0
    retitled = [
        {**paper, "title": "FlashDP Revisited"} if paper["id"] == "dp1" else paper
        for paper in PAPERS
    ]
    write_corpus(workdir / "library", retitled)
    result = run("add", str(library), "--sync", "--no-compact")
    assert result.exit_code == 0, result.output
    assert (
        result.output.startswith("added 1 paper ")
        and "replaced 1 changed, removed 0" in result.output
    )
    shown = json.loads(run("show", "dp1", "--format", "json").stdout)
    assert shown["title"] == "FlashDP Revisited"
    assert listed(run) == sorted(paper["id"] for paper in PAPERS)  # one dp1, not two
    again = run("add", str(library), "--sync", "--no-compact")
    assert again.output.startswith("added 0 papers") and "replaced 0 changed" in again.output
    # Without --sync, the index's text stays, as it always has.
    write_corpus(workdir / "library", PAPERS)
    kept = run("add", str(library), "--no-compact")
    assert kept.output.startswith("added 0 papers")
    assert json.loads(run("show", "dp1", "--format", "json").stdout)["title"] == "FlashDP Revisited"


@pytest.mark.filterwarnings("ignore:.*same paper")
def test_remove_takes_an_alias(workdir, run):
    write_corpus(workdir, DUPLICATED, name="papers.jsonl")
    assert run("build", "papers.jsonl").exit_code == 0
    result = run("remove", "VID-B", "rnn-a")
    assert (result.exit_code, result.output) == (0, "removed 2 papers from default\n")
    assert listed(run) == ["graphs"]


def test_add_refuses_a_file_where_two_papers_share_an_id_as_build_does(built, workdir):
    clash = [
        {"id": "same", "title": "One", "abstract": "A first paper about gradient clipping."},
        {"id": "same", "title": "Two", "abstract": "A second paper about video aesthetics."},
    ]
    write_corpus(workdir / "clash", clash)
    refused = built("build", "clash", "--index", "other")
    added = built("add", "clash", "--no-compact")
    assert refused.exit_code == added.exit_code != 0
    assert added.output == refused.output
    assert "ID 'same' is also used by clash/papers.jsonl:1 for a different paper" in added.output
    assert not (workdir / "indexes/default/SEGMENTS").exists()


@pytest.mark.parametrize("check", checks.CHECKS, ids=lambda check: check.__name__)
def test_add_runs_every_check_a_build_runs(built, workdir, monkeypatch, check):
    """Each check of the list refuses what it refuses in `add` as in `build`, with the same line,
    and the index is left as it was."""
    seen = []

    def refusing(inputs):
        test = check(inputs)

        def refuse(paper):
            test(paper)
            seen.append(paper.id)
            from recommender.errors import InputError

            raise InputError(f"{paper.source}: refused by {check.__name__}")

        return refuse

    original = checks.CHECKS
    monkeypatch.setattr(
        checks, "CHECKS", tuple(refusing if each is check else each for each in original)
    )
    write_corpus(
        workdir / "new", [{"id": "n1", "title": "New", "abstract": "A new paper about graphs."}]
    )
    before = listed(built)
    added = built("add", "new", "--no-compact")
    rebuilt = built("build", "new", "--index", "other")
    assert added.exit_code == rebuilt.exit_code != 0
    assert (
        added.output
        == rebuilt.output
        == f"Error: new/papers.jsonl:1: refused by {check.__name__}\n"
    )
    assert seen == ["n1", "n1"]
    monkeypatch.setattr(checks, "CHECKS", original)
    assert listed(built) == before and not (workdir / "indexes/default/SEGMENTS").exists()
