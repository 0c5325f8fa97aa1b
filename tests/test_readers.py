"""Inputs people have: BibTeX, the arXiv metadata snapshot, OpenAlex, Semantic Scholar,
CSL-JSON. Each format's fixture (tests/fixtures/) is built with the fake encoder and
its metadata read back through `papers show --format json`; bad input in each format
is one line naming the file and the record, with the index untouched."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from corpus import write_corpus
from recommender import build_index
from recommender.cli import main
from recommender.corpus.papers import read_papers
from recommender.corpus.readers.bibtex import strip_braces


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def shown(paper_id: str) -> dict:
    result = run("show", paper_id, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    data.pop("code_links")
    return data


def build_fixture(workdir: Path, name: str, *options: str):
    shutil.copy(FIXTURES / name, workdir / name)
    return run("build", name, *options)


# (fixture, papers indexed, warning on stderr, one paper as `show --format json` gives it)
ROUND_TRIPS = [
    ("library.bib", 4,
     "warning: library.bib: 1 record without an abstract skipped (the first: library.bib:34 (entry 'goodfellow2016deep'))\n",
     {"id": "kingma2014adam", "handle": "Adam", "title": "Adam: A Method for Stochastic Optimization",
      "abstract": "We present a first-order method for stochastic objectives based on adaptive estimates of "
                  "lower-order moments, with step sizes bounded by $\\alpha$ and a regret bound of "
                  "$\\mathcal{O}(\\sqrt{T})$; it needs 50\\% less tuning than SGD.",
      "authors": ["Diederik P. Kingma", "Jimmy Ba"], "year": 2014, "venue": "arXiv preprint arXiv:1412.6980",
      "url": "https://doi.org/10.48550/arXiv.1412.6980", "source": "library.bib:15", "categories": []}),
    ("arxiv-metadata-oai-snapshot.json", 4, "",
     {"id": "0704.0001", "handle": "Calculation of prompt diphoton",
      "title": "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies",
      "abstract": "A fully differential calculation in perturbative quantum chromodynamics is presented for the "
                  "production of massive photon pairs at hadron colliders.",
      "authors": ["C. Bal\u00e1zs", "E. L. Berger", "P. M. Nadolsky", "C. -P. Yuan"], "year": 2007,
      "venue": "Phys.Rev.D76:013009,2007", "url": "https://arxiv.org/abs/0704.0001",
      "source": "arxiv-metadata-oai-snapshot.json:3", "categories": ["hep-ph"]}),
    ("openalex-works.json", 2,
     "warning: openalex-works.json: 1 record without an abstract skipped (the first: openalex-works.json item 3)\n",
     {"id": "W2194775991", "handle": "Deep Residual Learning", "title": "Deep Residual Learning for Image Recognition",
      "abstract": "Deeper networks are harder to train. We learn residual functions with reference to the layer "
                  "inputs, so deep networks train well.",
      "authors": ["Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun"], "year": 2016,
      "venue": "2016 IEEE Conference on Computer Vision and Pattern Recognition (CVPR)",
      "url": "https://doi.org/10.1109/cvpr.2016.90", "source": "openalex-works.json item 1",
      "categories": ["Advanced Neural Network Applications", "Computer Vision and Pattern Recognition",
                     "Computer Science", "Physical Sciences"]}),
    ("semantic-scholar.json", 2,
     "warning: semantic-scholar.json: 1 record without an abstract skipped (the first: semantic-scholar.json item 2)\n",
     {"id": "204e3073870fae3d05bcbc2f6a8e263d9b72e776", "handle": "Attention is All you Need",
      "title": "Attention is All you Need",
      "abstract": "Sequence transduction models are usually built from recurrent or convolutional networks; the "
                  "Transformer relies on attention alone and translates better.",
      "authors": ["Ashish Vaswani", "Noam M. Shazeer", "Niki Parmar"], "year": 2017,
      "venue": "Neural Information Processing Systems",
      "url": "https://www.semanticscholar.org/paper/204e3073870fae3d05bcbc2f6a8e263d9b72e776",
      "source": "semantic-scholar.json item 1", "categories": ["Computer Science"]}),
    ("zotero.json", 2,
     "warning: zotero.json: 1 record without an abstract skipped (the first: zotero.json item 3)\n",
     {"id": "10.1038/s41586-021-03819-2", "handle": "Highly accurate protein structure",
      "title": "Highly accurate protein structure prediction with AlphaFold",
      "abstract": "Proteins are essential to life; we present a neural network that predicts protein structures "
                  "with atomic accuracy even where no similar structure is known.",
      "authors": ["John Jumper", "Richard Evans", "AlphaFold Team"], "year": 2021, "venue": "Nature",
      "url": "https://doi.org/10.1038/s41586-021-03819-2", "source": "zotero.json item 2", "categories": []}),
]


@pytest.mark.parametrize("name, count, warning, paper", ROUND_TRIPS, ids=[row[0] for row in ROUND_TRIPS])
def test_each_format_round_trips_its_metadata(workdir, fake_model, name, count, warning, paper):
    result = build_fixture(workdir, name)
    assert (result.exit_code, result.stderr) == (0, warning), result.output
    assert result.stdout.startswith(f"indexed {count} papers in indexes/default:")
    assert shown(paper["id"]) == paper
    # The metadata reaches the other outputs too.
    listed = {row["id"]: row for row in json.loads(run("list", "--format", "json").stdout)}
    assert listed[paper["id"]]["url"] == paper["url"]
    csv_text = run("list", "--format", "csv").stdout
    assert paper["venue"] in csv_text and str(paper["year"]) in csv_text


def test_bibtex_keeps_latex_and_drops_protective_braces(workdir, fake_model):
    with pytest.warns(UserWarning, match="1 record without an abstract skipped"):
        papers = {paper.id: paper for paper in read_papers([FIXTURES / "library.bib"])}
    assert papers["muller2019graphs"].title == "Spectral Sparsification of Graphs in \\emph{Nearly} Linear Time"
    assert papers["muller2019graphs"].abstract.startswith("We show that every graph has a spectral sparsifier with "
                                                          "$O(n \\log n / \\epsilon^2)$ edges")
    assert papers["muller2019graphs"].authors == ("J\u00f6rg M\u00fcller", "Ana de la Cruz")
    assert papers["vaswani2017attention"].venue == "Advances in Neural Information Processing Systems"  # @string
    assert papers["vaswani2017attention"].url == "https://arxiv.org/abs/1706.03762"  # from eprint
    assert papers["vaswani2017attention"].authors[6] == "\u0141ukasz Kaiser"


@pytest.mark.parametrize("text, expected", [
    ("{BERT} and {GPT}", "BERT and GPT"),
    ("$\\mathcal{O}(n)$ {time}", "$\\mathcal{O}(n)$ time"),
    ("\\emph{word} and {\\em word}", "\\emph{word} and \\em word"),
    ("50\\% of \\$5 and \\{set\\}", "50\\% of \\$5 and \\{set\\}"),
    ("\\frac{a}{b} {x}", "\\frac{a}{b} x"),
    ("\\( {x} \\) and $$ {y} $$ {z}", "\\( {x} \\) and $$ {y} $$ z"),
])
def test_strip_braces(text, expected):
    assert strip_braces(text) == expected


def test_where_keeps_matching_arxiv_papers(workdir, fake_model):
    result = build_fixture(workdir, "arxiv-metadata-oai-snapshot.json", "--where", "category=cs.LG")
    assert result.exit_code == 0, result.output
    assert [row["id"] for row in json.loads(run("list", "--format", "json").stdout)] == ["1706.03762", "1412.6980"]
    result = run("build", "arxiv-metadata-oai-snapshot.json", "--where", "category=cs.*", "--where", "year<2015")
    assert result.exit_code == 0, result.output
    assert [row["id"] for row in json.loads(run("list", "--format", "json").stdout)] == ["1412.6980", "cs/0112017"]


def test_formats_are_recognised_by_content(workdir, fake_model):
    page = json.loads((FIXTURES / "openalex-works.json").read_text())
    (workdir / "works.jsonl").write_text("".join(json.dumps(work) + "\n" for work in page["results"][:2]))
    s2 = json.loads((FIXTURES / "semantic-scholar.json").read_text())["data"]
    (workdir / "batch.json").write_text(json.dumps([s2[0], None, s2[2]]))  # the batch endpoint answers null
    with pytest.warns(UserWarning, match="batch.json: 1 record without an abstract skipped"):
        papers = read_papers([workdir / "works.jsonl", workdir / "batch.json"])
    assert [paper.id for paper in papers] == ["W2194775991", "W2964121744", "204e3073870fae3d05bcbc2f6a8e263d9b72e776",
                                              "2c03df8b48bf3fa39054345bafabfeff15bfd11d"]


def snapshot(root: Path) -> dict:
    return {path.relative_to(root).as_posix(): (path.read_bytes() if path.is_file() else None)
            for path in sorted(root.rglob("*"))}


ARXIV = {"id": "2101.00001", "title": "T", "abstract": "An abstract about graphs.", "authors": "A. B",
         "categories": "cs.LG", "update_date": "2021-01-02"}
OPENALEX = {"id": "https://openalex.org/W1", "title": "T", "abstract_inverted_index": {"Graphs": [0], "matter.": [1]}}
S2 = {"paperId": "abc", "title": "T", "abstract": "An abstract about graphs.", "authors": [{"name": "A"}]}
CSL = {"id": "item1", "type": "article-journal", "title": "T", "abstract": "An abstract about graphs.",
       "author": [{"family": "B", "given": "A"}], "issued": {"date-parts": [[2020]]}}
GOOD_BIB = "@article{good, title={T}, abstract={An abstract about graphs.}, year=2020}\n"


def lines(*rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


# (case, file name, content, extra build options, exact stderr)
BAD_INPUTS = [
    ("bib: unclosed brace", "r.bib", GOOD_BIB + "@article{broken,\n  title = {Open\n@article{next, title={X}, abstract={Y}}\n",
     [], "Error: r.bib:2 (entry 'broken'): not valid BibTeX (Unexpected block start: `@article`. Was still looking "
         "for field-value closing `}`): fix the entry's braces, quotes and commas"),
    ("bib: duplicate key", "r.bib", GOOD_BIB + GOOD_BIB.replace("graphs", "trees"), [],
     "Error: r.bib:2 (entry 'good'): the key is used by an earlier entry too: give each entry its own key"),
    ("bib: year not a number", "r.bib", GOOD_BIB.replace("year=2020", "year={forthcoming}"), [],
     "Error: r.bib:1 (entry 'good'): year 'forthcoming' is not a whole number"),
    ("bib: no entry has an abstract", "r.bib", "@book{b1, title={A}}\n@book{b2, title={B}}\n", [],
     "Error: r.bib: none of its 2 records has an abstract: papers are found by their abstracts"),
    ("bib: comments only", "r.bib", "% nothing here\n", [], "Error: r.bib: no papers found"),
    ("arXiv: authors_parsed not lists", "a.json", lines(ARXIV, dict(ARXIV, id="2101.00002", authors_parsed="A B")),
     [], "Error: a.json:2: 'authors_parsed' must be a list of [last, first, suffix] lists of text"),
    ("arXiv: categories not text", "a.json", lines(dict(ARXIV, categories=["cs.LG"]), ARXIV), [],
     "Error: a.json:1: 'categories' must be text, got list"),
    ("arXiv: title not text", "a.jsonl", lines(ARXIV, dict(ARXIV, id="2", title={"en": "T"})), [],
     "Error: a.jsonl:2: 'title' must be text, got dict"),
    ("arXiv: broken line", "a.json", lines(ARXIV) + '{"id": "2101.00002", "title": \n', [],
     "Error: a.json line 2: not valid JSON (Expecting value): fix or remove the line"),
    ("OpenAlex: inverted index not positions", "w.json", json.dumps({"results": [
        OPENALEX, dict(OPENALEX, id="https://openalex.org/W2", abstract_inverted_index={"a": "0"})]}), [],
     "Error: w.json item 2: 'abstract_inverted_index' must map each word to a list of positions"),
    ("OpenAlex: authorships not a list", "w.jsonl", lines(dict(OPENALEX, authorships={"author": "A"})), [],
     "Error: w.jsonl:1: 'authorships' must be a list of objects"),
    ("OpenAlex: year not a number", "w.jsonl", lines(dict(OPENALEX, publication_year="soon")), [],
     "Error: w.jsonl:1: year 'soon' is not a whole number"),
    ("OpenAlex: a result not an object", "w.json", json.dumps({"results": [OPENALEX, "W2"]}), [],
     "Error: w.json item 2: expected a JSON object (an OpenAlex work), got str"),
    ("S2: authors not objects", "s.json", json.dumps([S2, dict(S2, paperId="def", authors=["A"])]), [],
     "Error: s.json item 2: 'authors' must be a list of objects with 'name'"),
    ("S2: externalIds not an object", "s.jsonl", lines(dict(S2, externalIds="DOI:10.1/x")), [],
     "Error: s.jsonl:1: 'externalIds' must be an object, got str"),
    ("S2: empty paperId", "s.json", json.dumps({"data": [dict(S2, paperId=" ")]}), [],
     "Error: s.json item 1: Semantic Scholar paper has no 'paperId'"),
    ("CSL: author not a list", "z.json", json.dumps([dict(CSL, author="A B")]), [],
     "Error: z.json item 1: 'author' must be a list of name objects (family, given or literal)"),
    ("CSL: date-parts not lists", "z.json", json.dumps([CSL, dict(CSL, id="i2", issued={"date-parts": 2020})]), [],
     "Error: z.json item 2: 'issued.date-parts' must be a list of [year, month, day] lists"),
    ("CSL: year not a number", "z.json", json.dumps([dict(CSL, issued={"date-parts": [["n.d."]]})]), [],
     "Error: z.json item 1: year 'n.d.' in 'issued.date-parts' is not a whole number"),
    ("JSON: not valid", "z.json", '[{"id": "a",\n  "title": }]', [],
     "Error: z.json line 2: not valid JSON (Expecting value): fix the file"),
    ("JSON: a bare string", "z.json", '"papers"', [],
     "Error: z.json: expected a JSON array of papers (or an object holding them), got str"),
    ("--where unknown field", "r.bib", GOOD_BIB, ["--where", "colour=red"],
     "Error: --where 'colour=red': unknown field 'colour': use FIELD=VALUE with FIELD one of category, year, venue "
     "(e.g. category=cs.LG, year>=2020)"),
    ("--where year not a number", "r.bib", GOOD_BIB, ["--where", "year>=recent"],
     "Error: --where 'year>=recent': a year is a whole number, e.g. year>=2020"),
    ("--where matches nothing", "a.json", lines(ARXIV), ["--where", "category=hep-ph"],
     "Error: no paper matches --where category=hep-ph (of 1 read): loosen the condition"),
]


@pytest.mark.parametrize("name, content, options, message", [row[1:] for row in BAD_INPUTS],
                         ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_in_each_format_is_one_line_and_the_index_kept(workdir, fake_model, name, content, options, message):
    build_index([write_corpus(workdir / "in")])
    before = snapshot(workdir / "indexes")
    (workdir / name).write_text(content, encoding="utf-8")
    result = run("build", name, *options)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message + "\n")
    assert snapshot(workdir / "indexes") == before
