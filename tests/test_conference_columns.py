"""The columns conferences group their papers by (track, area, session, primary area) are
categories; a `--where` on a field no paper has says so; CMT's author lists keep the names."""

import json
import shutil

from conftest import FIXTURES


def build(workdir, run, name, *options):
    shutil.copy(FIXTURES / name, workdir / name)
    return run("build", name, *options)


def test_acl_tracks_are_categories(workdir, run):
    result = build(workdir, run, "acl2020-main-papers.csv")
    assert result.exit_code == 0, result.output
    assert "'track'" not in result.stderr  # read, not dropped with a warning
    listed = run("list", "--where", "category=Phonology*", "--format", "json")
    assert listed.exit_code == 0, listed.output
    assert [row["id"] for row in json.loads(listed.stdout)] == ["main.1", "main.4"]
    kept = build(workdir, run, "acl2020-main-papers.csv", "--where", "category=Machine Translation")
    assert kept.exit_code == 0, kept.output
    assert kept.stdout.startswith("indexed 1 paper")


def test_sessions_are_categories(workdir, run):
    result = build(workdir, run, "miniconf-papers.csv")
    assert result.exit_code == 0 and result.stderr == "", result.output
    listed = run("list", "--where", "category=Mon Session 4", "--format", "json")
    assert [row["id"] for row in json.loads(listed.stdout)] == ["Ht9BcYeMoS"]


def test_a_where_on_a_field_no_paper_has_says_so(workdir, run):
    (workdir / "p.jsonl").write_text("".join(json.dumps(
        {"id": f"p{n}", "title": f"T{n}", "abstract": f"An abstract about graphs number {n}."}) + "\n" for n in range(3)))
    result = run("build", "p.jsonl", "--where", "category=Theory")
    assert (result.exit_code, result.stderr) == (1, (
        "Error: no paper matches the condition category=Theory (of 3 read): none of the 3 papers has a category: "
        "drop that condition or add the field to the input\n"))
    assert run("build", "p.jsonl").exit_code == 0
    listed = run("list", "--where", "venue=*ICML*")
    assert (listed.exit_code, listed.stderr) == (1, (
        "Error: no paper matches the condition venue=*ICML*: none of the 3 papers has a venue: "
        "drop that condition or add the field to the input\n"))
    assert run("list", "--where", "year>=1900").exit_code == 1


def test_cmt_authors_keep_their_names(workdir, run):
    result = build(workdir, run, "cmt-papers.csv")
    assert result.exit_code == 0, result.output
    paper = json.loads(run("show", "101", "--format", "json").stdout)
    assert paper["authors"] == ["Jane Doe", "John Roe", "Ana Lee"]
    assert paper["title"] == "Spanners of Planar Graphs"
    assert json.loads(run("show", "102", "--format", "json").stdout)["authors"] == ["Min Kim"]
    listed = run("list", "--where", "category=Theory -> Graph Algorithms", "--format", "json")
    assert [row["id"] for row in json.loads(listed.stdout)] == ["101"]
