"""A conference site's "similar papers": `related-work --all --format miniconf` writes the
`paper_recs.json` a Mini-Conf site reads (each paper's ID to a list of IDs, itself first, as
the site's poster page shows that list from its second entry)."""

import json
import shutil

from conftest import FIXTURES


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
