"""One paper, one ID, its other IDs kept: an ID written "arXiv:..." is the arXiv ID; a record
that is the same paper as one kept (the same text, arXiv ID or DOI) leaves its ID as an alias,
and every command and the API accept an alias and answer with the kept ID."""

import json

import pytest

from recommender.corpus.papers import read_papers
from serving import build_fake_index, start_server

STOPPED = 0

PRIVACY = "Private training with gradient clipping and calibrated noise under a privacy budget."
RECORDS = [
    {"id": "arXiv:2401.00001", "title": "Private Training", "abstract": PRIVACY},
    # The same arXiv paper from another source, its abstract worded differently.
    {"id": "2401.00001", "title": "Private training", "abstract": PRIVACY + " Code is released."},
    {"id": "vid-a", "title": "Aesthetic Video Ranking", "url": "https://doi.org/10.1145/12345",
     "abstract": "Ranking short videos by aesthetic quality with annotations from professional editors."},
    {"id": "vid-b", "title": "Aesthetic video ranking", "url": "https://doi.org/10.1145/12345",
     "abstract": "We rank short clips by aesthetic quality, with labels from professional video editors."},
    {"id": "rnn-a", "title": "Gated Linear Recurrences",
     "abstract": "Gated linear recurrences match attention on long sequences at a fraction of the cost."},
    {"id": "rnn-b", "title": "Gated Linear Recurrences",
     "abstract": "Gated linear recurrences match attention on long sequences at a fraction of the cost."},
    {"id": "graphs", "title": "Light Spanners",
     "abstract": "Every planar graph has a light spanner, found in linear time with separators."},
]


def write_records(path):
    path.write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    return path


@pytest.mark.filterwarnings("ignore:.*same paper")
def test_the_same_work_under_two_ids_is_one_paper(tmp_path):
    papers = read_papers([write_records(tmp_path / "papers.jsonl")])
    assert [paper.id for paper in papers] == ["2401.00001", "vid-a", "rnn-a", "graphs"]


def test_every_command_accepts_an_alias_and_answers_with_the_kept_id(workdir, run):
    write_records(workdir / "papers.jsonl")
    built = run("build", "papers.jsonl", "--verbose")
    assert built.exit_code == 0, built.output
    assert built.stdout.startswith("indexed 4 papers")
    assert "papers.jsonl:4: same paper (doi:10.1145/12345) as papers.jsonl:3; kept once, 'vid-b' naming it too" \
        in built.stderr
    for alias, kept in (("vid-b", "vid-a"), ("rnn-b", "rnn-a"), ("arXiv:2401.00001", "2401.00001"),
                        ("2401.00001", "2401.00001"), ("VID-B", "vid-a")):
        shown = run("show", alias, "--format", "json")
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["id"] == kept
    liked = run("like", "vid-b", "-k", "1", "--format", "json")
    assert liked.exit_code == 0, liked.output
    assert json.loads(liked.stdout)[0]["id"] != "vid-a"  # the seed itself, under its alias, is left out
    related = run("related-work", "rnn-b", "-k", "1", "--format", "json")
    assert json.loads(related.stdout)[0]["id"] == "rnn-a"
    missing = run("show", "vid-c")
    assert missing.exit_code != 0 and "no paper 'vid-c'" in missing.stderr


@pytest.mark.filterwarnings("ignore:.*same paper")
def test_the_api_accepts_an_alias(tmp_path):
    index_dir = build_fake_index(tmp_path / "index", RECORDS)
    server = start_server(index_dir)
    try:
        status, paper = server.json("/api/papers/vid-b")
        assert (status, paper["id"]) == (200, "vid-a")
        status, liked = server.json("/api/like?id=rnn-b&k=1")
        assert status == 200 and liked[0]["id"] != "rnn-a"
    finally:
        assert server.stop() == STOPPED
