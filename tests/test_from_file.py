"""Seeds from outside the index: `like --from-file` and `related-work --from-file`.

Papers of the file the index holds (same ID or same text) count as their stored
selves and never come back as results; the others are embedded at query time
with the index's query encoder."""

import json

import numpy as np
import pytest

from conftest import FIXTURES
from corpus import PAPERS
from recommender.corpus.papers import Paper

OUTSIDE = {"id": "new1", "title": "Private Language Model Training",
           "abstract": "Differentially private training of language models with per-sample gradient clipping."}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path.name


def results(run, *args):
    result = run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_a_paper_of_the_index_is_recognised_by_text_and_left_out(built, workdir):
    # dp1 under another ID and spacing: the same paper.
    name = write_jsonl(workdir / "list.jsonl", [dict(PAPERS[0], id="mine-1",
                                                      abstract="  " + PAPERS[0]["abstract"].upper())])
    found, stderr = results(built, "like", "--from-file", name)
    assert found == results(built, "like", "dp1")[0]
    assert stderr == "list.jsonl: 1 of 1 papers found in the index, 0 embedded now\n"
    # Combined with IDs and --not, as if it had been named by ID.
    assert results(built, "like", "dp2", "--from-file", name, "--not", "vid1")[0] == \
        results(built, "like", "dp1", "dp2", "--not", "vid1")[0]


def test_a_paper_of_the_index_is_recognised_by_id(built, workdir):
    name = write_jsonl(workdir / "list.jsonl", [{"id": "rnn1", "abstract": "Other text, same ID."}])
    assert results(built, "like", "--from-file", name)[0] == results(built, "like", "rnn1")[0]


def test_a_paper_outside_the_index_is_embedded_like_a_search(built, workdir):
    name = write_jsonl(workdir / "list.jsonl", [OUTSIDE])
    found, stderr = results(built, "like", "--from-file", name)
    text = Paper(OUTSIDE["id"], OUTSIDE["title"], OUTSIDE["abstract"]).text
    # One outside seed: the query is its embedding and its TF-IDF vector, as `search` builds them.
    assert found == results(built, "search", text)[0]
    assert [row["id"] for row in found][:2] == ["dp1", "dp2"]
    assert stderr == "list.jsonl: 0 of 1 papers found in the index, 1 embedded now\n"


def test_outside_papers_count_as_the_stored_ones_would(built, workdir, open_index, monkeypatch):
    # Not recognised (as if the index lacked it), dp1's own text embeds to its stored vector.
    recommender = open_index()
    monkeypatch.setattr(recommender, "find_papers", lambda papers: [None] * len(papers))
    dp1 = recommender.show("dp1")
    np.testing.assert_allclose(recommender.encode_query(dp1.text), recommender.vectors[0], atol=1e-6)
    outside = recommender.like("dp2", papers=[dp1], not_=["vid1"], k=5)
    stored = recommender.like("dp1", "dp2", not_=["vid1"], k=5)
    assert [r.id for r in outside if r.id != "dp1"] == [r.id for r in stored]
    # Hybrid scores are z-scores over the candidate pool, which here holds dp1 itself (not known to be
    # a seed): the order is the same, the scale is not.


def test_the_python_api_takes_papers(built, workdir, open_index):
    recommender = open_index()
    paper = Paper(OUTSIDE["id"], OUTSIDE["title"], OUTSIDE["abstract"])
    assert [r.id for r in recommender.like(papers=[paper], k=2)] == ["dp1", "dp2"]
    assert recommender.find_papers([paper, recommender.show("vid2")]) == [None, 3]
    with pytest.raises(Exception, match="no paper given"):
        recommender.like()


def test_a_paper_is_found_by_its_text_without_reading_every_stored_paper(built, workdir, open_index, monkeypatch):
    recommender = open_index()
    # A lookup must not grow with the corpus: no list of every ID, no pass over the stored papers.
    monkeypatch.setattr(recommender.keys, "all_ids", lambda: pytest.fail("read every ID"))
    monkeypatch.setattr(recommender, "papers", lambda: pytest.fail("read every paper"))
    vid2 = recommender.show("vid2")
    respaced = Paper("mine", "  " + vid2.title.upper(), vid2.abstract.replace(" ", "\n  "))
    outside = Paper(OUTSIDE["id"], OUTSIDE["title"], OUTSIDE["abstract"])
    assert recommender.find_papers([respaced, outside, Paper("dp1", "", "Any text: the ID decides.")]) == [3, None, 0]


def test_a_digest_shared_by_other_papers_is_confirmed_on_their_text(workdir, fake_model, open_index, monkeypatch):
    # Every paper stored under one digest: only the text itself can tell them apart.
    from corpus import write_corpus
    from recommender import build_index
    from recommender.index import keys

    monkeypatch.setattr(keys, "digest", lambda key: 7)
    build_index([write_corpus(workdir / "in")])
    recommender = open_index()
    vid2 = recommender.show("vid2")
    assert len(recommender.keys.rows_with("text", "anything")) == len(PAPERS)
    assert recommender.find_papers([Paper("mine", vid2.title, vid2.abstract),
                                    Paper(OUTSIDE["id"], OUTSIDE["title"], OUTSIDE["abstract"])]) == [3, None]


def test_an_index_built_before_the_text_digests_is_scanned(workdir, fake_model, open_index, monkeypatch):
    from corpus import write_corpus
    from recommender import build_index
    from recommender.index import stages
    from recommender.index.layout import KEY_ARRAYS

    monkeypatch.setattr(stages, "KEY_ARRAYS", tuple(n for n in KEY_ARRAYS if "_digest" not in n))
    build_index([write_corpus(workdir / "in")])
    recommender = open_index()
    assert "keys/text_digests.npy" not in recommender.manifest["files"]
    assert recommender.keys.rows_with("text", "anything") is recommender.keys.rows_with("identifier", "x") is None
    vid2 = recommender.show("vid2")
    assert recommender.find_papers([Paper("mine", vid2.title.lower(), vid2.abstract),
                                    Paper(OUTSIDE["id"], OUTSIDE["title"], OUTSIDE["abstract"])]) == [3, None]


def test_a_paper_of_the_index_is_recognised_by_its_arxiv_id_or_doi(workdir, fake_model, open_index, monkeypatch):
    # An index of the arXiv snapshot; a reading list as Zotero exports it, other IDs and texts.
    from recommender import build_index, read_papers

    build_index([FIXTURES / "arxiv-metadata-oai-snapshot.json"])
    recommender = open_index()
    monkeypatch.setattr(recommender, "papers", lambda: pytest.fail("read every paper"))
    rows = {paper_id: recommender.resolve(paper_id) for paper_id in ("1706.03762", "1412.6980", "0704.0001")}
    with pytest.warns(UserWarning):  # goodfellow2016deep has no abstract
        library = read_papers([FIXTURES / "library.bib"])
    assert [p.id for p in library] == ["vaswani2017attention", "kingma2014adam", "he2016deep", "muller2019graphs"]
    # By the eprint field, by arXiv's own DOI; he2016deep (a CVF page) and muller2019graphs are not in it.
    assert recommender.find_papers(library) == [rows["1706.03762"], rows["1412.6980"], None, None]
    other = "Another version of the text."
    assert recommender.find_papers([
        Paper("mine-1", "Retitled", other, url="https://arxiv.org/abs/1706.03762v7"),
        # 0704.0001's record also has a doi field: one identifier a paper, and the arXiv ID is the one kept.
        Paper("mine-2", "Retitled", other, url="https://doi.org/10.1103/PHYSREVD.76.013009"),
        Paper("10.48550/arXiv.1412.6980", "Retitled", other),  # CSL JSON: the DOI is the ID
        Paper("mine-3", "Retitled", other, url="https://arxiv.org/abs/9999.99999"),
    ]) == [rows["1706.03762"], None, rows["1412.6980"], None]


def test_a_bibtex_library_against_an_arxiv_index(papers_cli, workdir):
    import shutil

    shutil.copy(FIXTURES / "arxiv-metadata-oai-snapshot.json", workdir / "arxiv.json")
    shutil.copy(FIXTURES / "library.bib", workdir / "library.bib")
    assert papers_cli("build", "arxiv.json").exit_code == 0
    result = papers_cli("related-work", "--from-file", "library.bib", "-k", "1", "--format", "jsonl")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == "library.bib: 2 of 4 papers found in the index, 2 embedded now"
    lists = [json.loads(line) for line in result.stdout.splitlines()]
    # Found by eprint and by arXiv's DOI: listed as the stored papers, never among their own related.
    assert [entry["id"] for entry in lists] == ["1706.03762", "1412.6980", "he2016deep", "muller2019graphs"]
    assert all(entry["related"][0]["id"] != entry["id"] for entry in lists)


def test_any_input_format_works(built, workdir):
    (workdir / "list.bib").write_text(
        "@article{mine, title={Private Language Model Training}, abstract={Differentially private training of "
        "language models with per-sample gradient clipping.}}\n@book{nothing, title={No abstract}}\n")
    found, stderr = results(built, "like", "--from-file", "list.bib", "-k", "2")
    assert [row["id"] for row in found] == ["dp1", "dp2"]
    assert stderr == ("warning: list.bib: 1 record without an abstract and not in the index skipped (the first: list.bib:2 (entry 'nothing'))\n"
                      "list.bib: 0 of 1 papers found in the index, 1 embedded now\n")


def test_related_work_from_file(built, workdir):
    name = write_jsonl(workdir / "list.jsonl", [{"id": "vid2", "abstract": "Known by its ID."}, OUTSIDE])
    lists, stderr = results(built, "related-work", "dp1", "--from-file", name, "-k", "2")
    assert [entry["id"] for entry in lists] == ["dp1", "vid2", "new1"]
    assert lists[:2] == results(built, "related-work", "dp1", "vid2", "-k", "2")[0]
    assert lists[2]["title"] == OUTSIDE["title"]
    # The outside paper's list is `like`'s for it alone.
    alone = write_jsonl(workdir / "alone.jsonl", [OUTSIDE])
    like = results(built, "like", "--from-file", alone, "-k", "2")[0]
    assert [row["id"] for row in lists[2]["related"]] == [row["id"] for row in like] == ["dp1", "dp2"]
    assert [row["score"] for row in lists[2]["related"]] == [row["score"] for row in like]
    # (click 8.3 also warns that related-work's get_text_stream is deprecated: not ours to test here)
    assert stderr.splitlines()[0] == "list.jsonl: 1 of 2 papers found in the index, 1 embedded now"
    # --from-file alone is enough; --from FILE (IDs) keeps its meaning.
    (workdir / "ids.txt").write_text("rnn1\n")
    only, _ = results(built, "related-work", "--from-file", name, "--from", "ids.txt", "-k", "2")
    assert [entry["id"] for entry in only] == ["rnn1", "vid2", "new1"]


@pytest.mark.parametrize("args, message", [
    (["like", "--from-file", "nope.bib"], "Error: nope.bib: no such file or folder"),
    (["like"], "Error: no paper given: name at least one paper ID or handle, or give papers from a file"),
    (["related-work", "--from-file", "bad.json"], "Error: bad.json line 1: not valid JSON (Expecting value): fix the file"),
])
def test_bad_from_file(built, workdir, args, message):
    (workdir / "bad.json").write_text("[oops]")
    result = built(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message + "\n")


@pytest.mark.model
def test_from_file_with_the_real_model(workdir, monkeypatch):
    from corpus import write_corpus
    from recommender import PaperIndex, build_index

    build_index([write_corpus(workdir / "in")])
    with PaperIndex.open() as recommender:
        dp1 = recommender.show("dp1")
        # The query encoder embeds a paper's text to (nearly) its stored vector.
        assert float(recommender.encode_query(dp1.text) @ recommender.vectors[0]) > 0.9999
        paper = Paper(OUTSIDE["id"], OUTSIDE["title"], OUTSIDE["abstract"])
        found = recommender.like(papers=[paper], k=2)
        assert {r.id for r in found} == {"dp1", "dp2"}
        recognised = recommender.like(papers=[Paper("x", dp1.title, dp1.abstract)], k=5)
        assert "dp1" not in [r.id for r in recognised]
