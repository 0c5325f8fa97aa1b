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


def run_on(workdir, run, command, name, text):
    """`papers COMMAND NAME` over `text` written as NAME in the work folder."""
    (workdir / name).write_text(text)
    return run(command, name)


def json_lines(records) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


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
    result = run_on(workdir, run, "build", "notes.json", json.dumps(notes))
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
    result = run_on(workdir, run, "build", "notes.json", json.dumps(notes))
    assert (result.exit_code, result.stderr) == (1, f"Error: {message}\n")
    assert not list(workdir.glob("indexes/*/CURRENT"))  # no index made


def v2_note(forum, venueid, venue, **content):
    return {"id": forum, "forum": forum, "cdate": 1746000000000, "pdate": 1758000000000,
            "invitations": [f"{venueid}/-/Submission"],
            "content": {"title": {"value": f"Paper {forum}"},
                        "abstract": {"value": f"The abstract of paper {forum}."},
                        "authors": {"value": ["Ada Lovelace"]}, "venue": {"value": venue},
                        "venueid": {"value": venueid}, **content}}


def test_the_withdrawn_warning_names_the_papers_and_the_option(workdir, run):
    venue = "ICLR.cc/2024/Conference"
    notes = [v2_note("kept1", venue, "ICLR 2024 poster")] + [
        v2_note(f"gone{i}", f"{venue}/Withdrawn_Submission", "ICLR 2024 Withdrawn") for i in range(5)]
    # a workshop whose name says "Withdrawn": its accepted papers are its papers
    notes.append(v2_note("ws1", "ICLR.cc/2024/Workshop/WithdrawnTalk", "Withdrawn Ideas Workshop"))
    result = run_on(workdir, run, "build", "notes.json", json.dumps(notes))
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "warning: notes.json: 5 withdrawn or desk-rejected submissions left out (gone0 (notes.json "
        "item 2), gone1 (notes.json item 3), gone2 (notes.json item 4) and 2 more); "
        "`papers build --keep-withdrawn` keeps them\n")
    assert result.stdout.startswith("indexed 2 papers")
    assert shown(run, "ws1")["venue"] == "Withdrawn Ideas Workshop"


def test_forum_links_are_percent_encoded(workdir, run):
    notes = [v2_note("x&id=evil#frag", "TMLR", "TMLR")]
    assert run_on(workdir, run, "build", "notes.json", json.dumps(notes)).exit_code == 0
    listed = json.loads(run("list", "--format", "json").stdout)
    assert shown(run, listed[0]["id"])["url"] == "https://openreview.net/forum?id=x%26id%3Devil%23frag"


@pytest.mark.parametrize("stamp", ["1e300", "NaN", "Infinity", "-Infinity"])
def test_an_odd_publication_date_is_no_date(workdir, run, stamp):
    note = v2_note("d1", "TMLR", "TMLR")
    note["pdate"] = "@stamp@"
    text = json.dumps([note]).replace('"@stamp@"', stamp)
    result = run_on(workdir, run, "build", "notes.json", text)
    assert result.exit_code == 0, result.output
    assert shown(run, "d1")["year"] == 2025  # the creation date's


def test_keywords_given_as_a_number(workdir, run):
    notes = [v2_note("k1", "TMLR", "TMLR", keywords={"value": 42})]
    result = run_on(workdir, run, "build", "notes.json", json.dumps(notes))
    assert result.exit_code == 0, result.output
    assert "42" in shown(run, "k1")["categories"]
    notes = [v2_note("k1", "TMLR", "TMLR", keywords={"value": {"a": 1}})]
    result = run_on(workdir, run, "build", "notes.json", json.dumps(notes))
    assert (result.exit_code, result.stderr) == (
        1, "Error: notes.json item 1: OpenReview 'keywords' must be a list of words\n")


def test_one_record_with_an_odd_id_is_skipped_by_build_and_add(workdir, run):
    good = {"title": "Good", "abstract": "Differentially private training of language models."}
    odd = {"title": "Odd", "abstract": "An abstract about video aesthetics and models."}
    lines = [{"id": "p1", **good}, {"id": "p\u202e2", **odd}]
    result = run_on(workdir, run, "build", "day1.jsonl", json_lines(lines))
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "warning: day1.jsonl: 1 record skipped for their ID (the first: day1.jsonl:2: ID "
        "'p\\u202e2' contains an invisible or text-direction character (U+202E RIGHT-TO-LEFT "
        "OVERRIDE): give an ID of visible characters)\n")
    lines = [{"id": "p3", **good, "abstract": "Sparse attention for long documents."},
             {"id": "p\x1b[31m4", **odd}]
    result = run_on(workdir, run, "add", "day2.jsonl", json_lines(lines))
    assert result.exit_code == 0, result.output
    assert "day2.jsonl:2: ID 'p\\x1b[31m4' contains a tab, line break or control character" in result.stderr
    assert sorted(row["id"] for row in json.loads(run("list", "--format", "json").stdout)) == ["p1", "p3"]
