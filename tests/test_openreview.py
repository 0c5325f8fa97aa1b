"""OpenReview as exported: API v2 notes in the API's answer, API v1 notes one a line, the
dictionary of notes by ID a venue site publishes, and a plain list; the forum page is the
link, the venue or decision the venue, withdrawn and desk-rejected submissions named in one
warning and kept when asked."""

import json
import shutil

import pytest

from conftest import FIXTURES


def build(workdir, run, name, *options):
    shutil.copy(FIXTURES / name, workdir / name)
    return run("build", name, *options)


def shown(run, paper_id):
    result = run("show", paper_id, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_api_v2_notes_as_the_api_answers(workdir, run):
    result = build(workdir, run, "openreview-v2.json")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("indexed 2 papers")
    assert result.stderr == (
        "warning: openreview-v2.json: 2 withdrawn or desk-rejected submissions left out (Wd7XyZ0aB1 "
        "(openreview-v2.json item 3), Dr5StU8vW2 (openreview-v2.json item 4)); "
        "`papers build --keep-withdrawn` keeps them\n")
    paper = shown(run, "aB3dE5fG7h")
    assert (paper["title"], paper["authors"], paper["venue"], paper["year"], paper["url"]) == (
        "Private Fine-Tuning at Scale", ["Jane Smith", "Hans Müller"], "ICLR 2024 poster", 2024,
        "https://openreview.net/forum?id=aB3dE5fG7h")
    assert "differential privacy" in paper["categories"]
    listed = run("list", "--where", "category=recurrent networks", "--format", "json")
    assert [row["id"] for row in json.loads(listed.stdout)] == ["Kq9LmN2pR4"]


def test_withdrawn_submissions_are_kept_when_asked(workdir, run):
    result = build(workdir, run, "openreview-v2.json", "--keep-withdrawn")
    assert result.exit_code == 0 and result.stderr == "", result.output
    assert result.stdout.startswith("indexed 4 papers")
    assert shown(run, "Wd7XyZ0aB1")["venue"] == "ICLR 2024 Conference Withdrawn Submission"


def test_api_v1_notes_one_a_line_with_decisions(workdir, run):
    result = build(workdir, run, "openreview-v1.jsonl")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("indexed 2 papers")
    assert "1 withdrawn or desk-rejected submission left out (" in result.stderr
    assert "openreview-v1.jsonl:3)); `papers build --keep-withdrawn` keeps them" in result.stderr
    paper = shown(run, "HkgsPhNYPS")
    assert (paper["venue"], paper["year"], paper["url"]) == (
        "ICLR 2020 (Accept (Poster))", 2020, "https://openreview.net/forum?id=HkgsPhNYPS")
    assert shown(run, "rkgpv2VFvr")["venue"] == "ICLR 2020 (Reject)"


def test_a_venue_sites_notes_by_id(workdir, run):
    result = build(workdir, run, "openreview-papers.json")
    assert result.exit_code == 0 and result.stderr == "", result.output
    assert result.stdout.startswith("indexed 2 papers")
    paper = shown(run, "Syx4wnEtvH")
    assert (paper["title"], paper["authors"], paper["venue"]) == (
        "Large Batch Optimization for Deep Networks", ["Yang You", "Jing Li"], "ICLR 2020")


def test_a_plain_list_of_notes(workdir, run):
    notes = json.loads((FIXTURES / "openreview-v2.json").read_text())["notes"][:2]
    (workdir / "notes.json").write_text(json.dumps(notes))
    result = run("build", "notes.json")
    assert result.exit_code == 0 and result.stderr == "", result.output
    assert shown(run, "Kq9LmN2pR4")["venue"] == "ICLR 2024 spotlight"


@pytest.mark.parametrize("change, message", [
    (lambda note: note["content"].update(title={"value": ["A", "B"]}),
     "notes.json item 1: OpenReview 'title' must be text, got list"),
    (lambda note: [note.pop("forum"), note.pop("id")], "notes.json item 1: OpenReview note has no 'forum' or 'id'"),
    (lambda note: note["content"].update(authors={"value": [{"name": "Jane"}]}),
     "notes.json item 1: OpenReview 'authors' must be a list of names"),
])
def test_bad_notes_are_one_line(workdir, run, change, message):
    notes = json.loads((FIXTURES / "openreview-v2.json").read_text())["notes"][:2]
    change(notes[0])
    (workdir / "notes.json").write_text(json.dumps(notes))
    result = run("build", "notes.json")
    assert (result.exit_code, result.stderr) == (1, f"Error: {message}\n")
    assert not list(workdir.glob("indexes/*/CURRENT"))  # no index made
