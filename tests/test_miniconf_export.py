"""A conference site's "similar papers": `related-work --all --format miniconf` writes the
`paper_recs.json` that sites built on Mini-Conf read (each paper's ID to a list of IDs, itself
first, as the site's paper page shows that list from its second entry), read back by the reading
steps of the ICLR 2020 and ACL 2020 sites' own code (re-implemented here, the lines cited)."""

import csv
import json
import shutil
from pathlib import Path

from conftest import FIXTURES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "inputs.md"


def test_a_mini_conf_site_gets_its_similar_papers(workdir, run):
    shutil.copy(FIXTURES / "miniconf-papers.csv", workdir / "papers.csv")
    assert run("build", "papers.csv").exit_code == 0
    result = run("related-work", "--all", "-k", "3", "--format", "miniconf", "--out", "paper_recs.json")
    assert result.exit_code == 0, result.output
    recs = json.loads((workdir / "paper_recs.json").read_text(encoding="utf-8"))
    uids = [row["UID"] for row in _csv_rows(workdir / "papers.csv")]
    assert sorted(recs) == sorted(uids)
    for uid, similar in recs.items():
        assert similar[0] == uid and len(similar) == 4 and len(set(similar)) == 4 and set(similar) <= set(uids)
        # the same list, in the same order, as `related-work --format json`
        listed = json.loads(run("related-work", uid, "-k", "3", "--format", "json").stdout)[0]
        assert similar[1:] == [related["id"] for related in listed["related"]]
    # What Mini-Conf's poster page does with it: every similar paper is one of the site's papers.
    by_uid = {row["UID"]: row for row in _csv_rows(workdir / "papers.csv")}
    assert all(by_uid[other]["title"] for similar in recs.values() for other in similar[1:])


def _csv_rows(path):
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------- the sites that read it


def load_sitedata(folder: Path) -> dict:
    """What the sites' loaders do with their `sitedata/` folder: every file, its name split once
    at its dot into (name, type) (a name with another dot stops the site), a .json file parsed
    into site_data[name], a .csv into its rows. Checked in ICLR/iclr.github.io at
    c2320fab7f7420f85cbc1a5b4207461d1cf931fb, main.py lines 35-38, and in
    acl-org/acl-2020-virtual-conference at 6cba387ccd6a05e0d9447e5aa2ed6d402c609181,
    miniconf/load_site_data.py lines 110-124 (which keeps only the names it registers, among them
    `paper_recs`, line 60)."""
    site_data = {}
    for path in sorted(folder.iterdir()):
        name, kind = path.name.split(".")
        if kind == "json":
            site_data[name] = json.loads(path.read_text(encoding="utf-8"))
        elif kind == "csv":
            with open(path, newline="", encoding="utf-8") as handle:
                site_data[name] = list(csv.DictReader(handle))
    return site_data


def iclr_poster_similar(site_data: dict, note_id: str) -> list[dict]:
    """The ICLR 2020 site's poster page's similar papers: each ID of the paper's list looked up in
    `papers.json` (a KeyError stops the page), the first left out (ICLR/iclr.github.io, main.py
    lines 301-305); the page links each by the key the loader copied into `content.iclr_id`
    (main.py line 91, templates/pages/page.html line 126)."""
    papers = site_data["papers"]
    for key, note in papers.items():
        note["content"]["iclr_id"] = key
    return [papers[other] for other in site_data["paper_recs"][note_id]][1:]


def acl_paper_similar(site_data: dict, uid: str) -> list[dict]:
    """ACL 2020's paper page's similar papers: a paper's list is `paper_recs.get(UID, [UID])`
    (acl-org/acl-2020-virtual-conference, miniconf/load_site_data.py line 497), each entry after
    the first looked up among the papers by UID (main.py lines 138-140)."""
    by_uid = {row["UID"]: row for row in site_data["main_papers"]}
    similar = site_data["paper_recs"].get(uid, [uid])
    return [by_uid[other] for other in similar[1:]]


def _notes(count: int) -> dict:
    topics = ["private training with gradient clipping", "video aesthetics and frames",
              "graph spanners and shortest paths"]
    return {
        f"Note{number:04d}xx": {
            "id": f"Note{number:04d}xx", "forum": f"Note{number:04d}xx", "number": number,
            "invitation": "ICLR.cc/2020/Conference/-/Blind_Submission",
            "content": {"title": f"Paper {number} on {topics[number % 3]}",
                        "authors": ["Ada Lovelace"], "keywords": [topics[number % 3].split()[0]],
                        "abstract": f"We study {topics[number % 3]}, variant {number}."},
        }
        for number in range(count)
    }


def test_the_iclr_2020_sites_poster_page_reads_the_file(workdir, run):
    sitedata = workdir / "sitedata"
    sitedata.mkdir()
    (sitedata / "papers.json").write_text(json.dumps(_notes(9)), encoding="utf-8")
    assert run("build", "sitedata/papers.json").exit_code == 0
    result = run("related-work", "--all", "-k", "3", "--format", "miniconf", "--out",
                 "sitedata/paper_recs.json")
    assert result.exit_code == 0, result.output
    site_data = load_sitedata(sitedata)
    assert sorted(site_data["paper_recs"]) == sorted(site_data["papers"])
    for note_id in site_data["papers"]:
        shown = iclr_poster_similar(site_data, note_id)
        listed = json.loads(run("related-work", note_id, "-k", "3", "--format", "json").stdout)[0]
        assert [note["content"]["iclr_id"] for note in shown] == [r["id"] for r in listed["related"]]
        assert [note["content"]["title"] for note in shown] == [r["title"] for r in listed["related"]]
        assert note_id not in [note["content"]["iclr_id"] for note in shown]


def test_the_acl_2020_sites_paper_page_reads_the_file(workdir, run):
    sitedata = workdir / "sitedata"
    sitedata.mkdir()
    shutil.copy(FIXTURES / "acl2020-main-papers.csv", sitedata / "main_papers.csv")
    assert run("build", "sitedata/main_papers.csv").exit_code == 0
    result = run("related-work", "--all", "-k", "2", "--format", "miniconf", "--out",
                 "sitedata/paper_recs.json")
    assert result.exit_code == 0, result.output
    site_data = load_sitedata(sitedata)
    for row in site_data["main_papers"]:
        shown = acl_paper_similar(site_data, row["UID"])
        listed = json.loads(run("related-work", row["UID"], "-k", "2", "--format", "json").stdout)[0]
        assert [paper["UID"] for paper in shown] == [r["id"] for r in listed["related"]]
        assert len(shown) == 2 and row["UID"] not in [paper["UID"] for paper in shown]


def test_the_docs_name_the_sites_that_read_the_file():
    """Mini-Conf's own poster page has no similar papers (Mini-Conf/Mini-Conf at
    6b12a6de93c55b1175fdddfa244fb0c635142e2c, main.py lines 167-173, and no template or script
    names paper_recs): the page says which sites read the file instead."""
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    assert "Mini-Conf itself never reads this file" in text
    for site in ("ICLR/iclr.github.io", "acl-org/acl-2020-virtual-conference",
                 "acl-org/emnlp-2020-virtual-conference"):
        assert f"[{site}](https://github.com/{site})" in text
    assert "paper_recs.json` a Mini-Conf site reads" not in text
