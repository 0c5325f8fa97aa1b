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


# (fixture, papers indexed, warning on stderr, one paper as `show --format json` gives it, categories kept for --where)
ROUND_TRIPS = [
    ("library.bib", 4,
     "warning: library.bib: 1 record without an abstract skipped (the first: library.bib:34 (entry 'goodfellow2016deep'))\n",
     {"id": "kingma2014adam", "handle": "Adam", "title": "Adam: A Method for Stochastic Optimization",
      "abstract": "We present a first-order method for stochastic objectives based on adaptive estimates of "
                  "lower-order moments, with step sizes bounded by $\\alpha$ and a regret bound of "
                  "$\\mathcal{O}(\\sqrt{T})$; it needs 50\\% less tuning than SGD.",
      "authors": ["Diederik P. Kingma", "Jimmy Ba"], "year": 2014, "venue": "arXiv preprint arXiv:1412.6980",
      "url": "https://doi.org/10.48550/arXiv.1412.6980", "source": "library.bib:15", "categories": [],
      "citation_key": "kingma2014adam", "entry_type": "article"}),
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
    assert shown(paper["id"]) == {**paper, "text_from": "abstract"}
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


@pytest.mark.parametrize("text, expected", [
    ("{\\textbackslash}emph\\{single\\}", "\\emph\\{single\\}"),  # Better BibTeX's escape of a backslash
    ('M{\\"u}ller and \\v{C}ech, G\\o{}ran, {\\ss}', "Müller and Čech, Gøran, ß"),
    ("{$k$-Means} Clustering of {BERT}", "$k$-Means Clustering of BERT"),  # braces around maths
    ("$\\alpha \\ss$ and \\emph{x} \\cite{y} 50\\%", "$\\alpha \\ss$ and \\emph{x} \\cite{y} 50\\%"),
])
def test_bibtex_text_decodes_letters_and_symbols_only(text, expected):
    from recommender.corpus.readers.bibtex import text_of

    assert text_of(text) == expected


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
     "Error: Invalid value for '--where': condition 'colour=red': unknown field 'colour': use FIELD=VALUE with FIELD one of category, year, venue "
     "(e.g. category=cs.LG, year>=2020)"),
    ("--where year not a number", "r.bib", GOOD_BIB, ["--where", "year>=recent"],
     "Error: Invalid value for '--where': condition 'year>=recent': a year is a whole number, e.g. year>=2020"),
    ("--where matches nothing", "a.json", lines(ARXIV), ["--where", "category=hep-ph"],
     "Error: no paper matches the condition category=hep-ph (of 1 read): loosen the condition"),
]


@pytest.mark.parametrize("name, content, options, message", [row[1:] for row in BAD_INPUTS],
                         ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_in_each_format_is_one_line_and_the_index_kept(workdir, fake_model, name, content, options, message):
    build_index([write_corpus(workdir / "in")])
    before = snapshot(workdir / "indexes")
    (workdir / name).write_text(content, encoding="utf-8")
    result = run("build", name, *options)
    usage = message.startswith("Error: Invalid value for '--where'")  # a bad --where: bad usage, exit 2
    assert (result.exit_code, result.stdout, result.stderr) == (2 if usage else 1, "", message + "\n")
    assert snapshot(workdir / "indexes") == before


# ---------------------------------------------------------------- files as conference and library tools write them
# Issue 23 items 1-2, issue 22 items 10-11 and 16.


def test_a_mini_conf_csv_builds_as_is(workdir, fake_model):
    """Mini-Conf's sitedata/papers.csv shape (header UID,title,authors,abstract,keywords,sessions; lists
    separated by |): its IDs, authors, keywords and sessions (as categories) kept."""
    result = build_fixture(workdir, "miniconf-papers.csv")
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    assert result.stdout.startswith("indexed 5 papers in indexes/default:")
    paper = shown("Ht9BcYeMoS")
    assert paper["authors"] == ["Priya Raman", "Jonas Lindqvist", "Mei Tanaka"]
    assert paper["categories"] == ["graph neural networks", "chemistry", "Mon Session 4"]
    assert paper["abstract"].endswith('improves every downstream task, "especially" with few labels.')
    assert shown("Lp2WsXcQaR")["title"] == "Once More with Feeling: Neural Architecture Search on a Budget"
    # keywords feed --where, in the build and in `papers list`
    listed = run("list", "--where", "category=*efficient*", "--format", "json")
    assert [row["id"] for row in json.loads(listed.stdout)] == ["Qx7LmRtAbE", "Lp2WsXcQaR"]
    bib = run("related-work", "Ht9BcYeMoS", "-k", "1", "--format", "bibtex").stdout
    assert "Priya Raman and Jonas Lindqvist and Mei Tanaka" in bib and "|" not in bib


# (case, header and one row, what `show --format json` gives for the fields named, categories)
CSV_COLUMNS = [
    ("our names", "id,title,abstract,authors,year,venue,url,categories\n"
                  "p1,T,An abstract about graphs.,Ada Lovelace;Alan Turing,2020,ICML,https://x.org/p1,cs.LG cs.DS\n",
     {"id": "p1", "authors": ["Ada Lovelace", "Alan Turing"], "year": 2020, "venue": "ICML", "url": "https://x.org/p1"},
     ["cs.LG", "cs.DS"]),
    ("Mini-Conf, any case", "uid,Title,AUTHORS,Abstract,Keywords\nB1x,T,A One|B Two,An abstract about graphs.,a|b c\n",
     {"id": "B1x", "authors": ["A One", "B Two"]}, ["a", "b c"]),
    ("paper_id and tags", "paper_id,title,abstract,tags\nP-7,T,An abstract about graphs.,\"x; y\"\n",
     {"id": "P-7"}, ["x", "y"]),
    ("Paper ID with spaces", "Paper ID,Title,Abstract,Subjects\n42,T,An abstract about graphs.,\"Physics, Optics\"\n",
     {"id": "42"}, ["Physics", "Optics"]),
    ("arxiv_id gives the ID and the link", "arxiv_id,title,abstract\narXiv:2101.00001,T,An abstract about graphs.\n",
     {"id": "2101.00001", "url": "https://arxiv.org/abs/2101.00001"}, []),
    ("doi as the ID", "doi,title,abstract\nhttps://doi.org/10.1145/3292500.3330701,T,An abstract about graphs.\n",
     {"id": "10.1145/3292500.3330701", "url": "https://doi.org/10.1145/3292500.3330701"}, []),
    ("an ID and a DOI: the DOI gives the link", "UID,DOI,title,abstract\nq1,10.1/abc,T,An abstract about graphs.\n",
     {"id": "q1", "url": "https://doi.org/10.1/abc"}, []),
    ("Zotero's CSV: the DOI before its item key", "Key,Item Type,Publication Year,Author,Title,Publication Title,DOI,Url,Abstract Note,Manual Tags\n"
                     "7ZQ3K9P4,journalArticle,2021,\"Jumper, John; Evans, Richard\",T,Nature,10.1038/x,"
                     "https://doi.org/10.1038/x,An abstract about graphs.,protein; structure\n",
     {"id": "10.1038/x", "authors": ["John Jumper", "Richard Evans"], "year": 2021, "venue": "Nature",
      "url": "https://doi.org/10.1038/x"}, ["protein", "structure"]),
    ("authors with commas and and", "id,title,abstract,authors\np1,T,An abstract about graphs.,"
                                    "\"Ada Lovelace, Alan Turing and Grace Hopper\"\n",
     {"authors": ["Ada Lovelace", "Alan Turing", "Grace Hopper"]}, []),
    ("one author written Last, First", "id,title,abstract,authors\np1,T,An abstract about graphs.,\"Lovelace, Ada\"\n",
     {"authors": ["Ada Lovelace"]}, []),
    ("a date for the year", "id,title,abstract,date\np1,T,An abstract about graphs.,2019-06-01\n", {"year": 2019}, []),
]


@pytest.mark.parametrize("text, fields, categories", [row[1:] for row in CSV_COLUMNS], ids=[row[0] for row in CSV_COLUMNS])
def test_csv_columns_tools_write_are_read(workdir, fake_model, text, fields, categories):
    (workdir / "p.csv").write_text(text, encoding="utf-8")
    result = run("build", "p.csv")
    assert result.exit_code == 0, result.output
    assert "not read" not in result.stderr or "Item Type" in result.stderr
    paper = json.loads(run("list", "--format", "json").stdout)[0]
    assert {name: paper[name] for name in fields} == fields
    assert shown(paper["id"])["categories"] == categories


def test_unread_columns_are_named_once(workdir, fake_model):
    (workdir / "p.csv").write_text("id,title,abstract,Notes,rating\n" + "".join(
        f"p{i},T{i},Abstract number {i} about graphs.,n,5\n" for i in range(3)), encoding="utf-8")
    result = run("build", "p.csv")
    assert (result.exit_code, result.stderr) == (0, "warning: p.csv: columns 'Notes', 'rating' not read (papers read id, "
                                                    "title, abstract, authors, year, venue, url, categories; see docs: "
                                                    "Inputs)\n")


def test_a_csv_categories_column_feeds_where(workdir, fake_model):
    rows = [{"id": f"p{i}", "abstract": f"Abstract {i} about graphs and kernels.", "categories": cats}
            for i, cats in enumerate(["cs.LG cs.CL", "math.CO", "cs.CL", "stat.ML cs.LG", "hep-ph"])]
    (workdir / "p.csv").write_text("id,abstract,categories\n" + "".join(
        f"{row['id']},{row['abstract']},{row['categories']}\n" for row in rows), encoding="utf-8")
    (workdir / "p.jsonl").write_text(lines(*rows), encoding="utf-8")
    for name in ("p.csv", "p.jsonl"):  # the same papers as CSV and as JSONL keep the same two
        result = run("build", name, "--where", "category=cs.LG")
        assert result.exit_code == 0, result.output
        assert [row["id"] for row in json.loads(run("list", "--format", "json").stdout)] == ["p0", "p3"]


# (case, JSON lines, `show --format json` fields, stderr)
JSON_KEYS = [
    ("Mini-Conf keys", [{"UID": "B1x", "title": "T", "abstract": "An abstract about graphs.",
                         "authors": "A One|B Two", "keywords": ["x", "y"], "sessions": ["Mon 1"]}],
     {"id": "B1x", "authors": ["A One", "B Two"], "categories": ["x", "y", "Mon 1"]}, ""),
    ("paperId-like keys in any case", [{"Paper_ID": "P1", "Abstract": "An abstract about graphs.", "Tags": "a;b"}],
     {"id": "P1", "categories": ["a", "b"]}, ""),
    ("our own output read back", [{"id": "p1", "handle": "T", "title": "T", "abstract": "An abstract about graphs.",
                                   "code_links": [], "source": "x.jsonl:1", "categories": ["cs.LG"]}],
     {"id": "p1", "categories": ["cs.LG"]}, ""),
]


@pytest.mark.parametrize("rows, fields, stderr", [row[1:] for row in JSON_KEYS], ids=[row[0] for row in JSON_KEYS])
def test_json_keys_tools_write_are_read(workdir, fake_model, rows, fields, stderr):
    (workdir / "p.jsonl").write_text(lines(*rows), encoding="utf-8")
    result = run("build", "p.jsonl")
    assert (result.exit_code, result.stderr) == (0, stderr), result.output
    paper = shown(fields["id"])
    assert {name: paper[name] for name in fields} == fields


# (case, BibTeX, paper ID, fields of `show --format json`)
BIBTEX_AS_BIBTEX = [
    ("an editor field (Zotero book section)",
     "@incollection{sec, title={A Chapter}, author={Ada Lovelace}, editor={Babbage, Charles and Somerville, Mary},\n"
     "  booktitle={Engines}, abstract={An abstract about graphs.}}\n",
     "sec", {"authors": ["Ada Lovelace"], "venue": "Engines"}),
    ("DBLP @proceedings: editors stand for authors",
     "@proceedings{DBLP:conf/x/2020, editor={Hal Daum{\\'e} III and Aarti Singh}, title={Proceedings of X 2020},\n"
     "  abstract={The proceedings of a conference about graphs.}, year={2020}}\n",
     "DBLP:conf/x/2020", {"authors": ["Hal Daumé III", "Aarti Singh"], "year": 2020}),
    ("@string concatenated with #",
     '@string{pre = "Proceedings of the "}\n@string{icml = pre # "International Conference on Machine Learning"}\n'
     '@inproceedings{p, title={T}, booktitle=icml # " 2020", abstract="An abstract " # {about {graphs}.}}\n',
     "p", {"venue": "Proceedings of the International Conference on Machine Learning 2020",
           "abstract": "An abstract about graphs."}),
    ("crossref inherits what the entry lacks",
     "@inproceedings{child, title={A Paper}, author={Ada Lovelace}, crossref={parent},\n"
     "  abstract={An abstract about graphs.}}\n"
     "@proceedings{parent, title={Proceedings of Y}, booktitle={Y 2021}, year={2021}, editor={Mary Somerville},\n"
     "  abstract={Not the child's abstract.}}\n",
     "child", {"title": "A Paper", "venue": "Y 2021", "year": 2021, "authors": ["Ada Lovelace"],
               "abstract": "An abstract about graphs."}),
    ("crossref to proceedings with a title only, any case",
     "@inproceedings{child, title={A Paper}, crossref={PARENT}, abstract={An abstract about graphs.}}\n"
     "@proceedings{parent, title={Proceedings of Z}, year={2022}}\n",
     "child", {"venue": "Proceedings of Z", "year": 2022}),
]


@pytest.mark.parametrize("text, paper_id, fields", [row[1:] for row in BIBTEX_AS_BIBTEX],
                         ids=[row[0] for row in BIBTEX_AS_BIBTEX])
def test_bibtex_is_read_as_bibtex_reads_it(workdir, fake_model, text, paper_id, fields):
    (workdir / "r.bib").write_text(text, encoding="utf-8")
    result = run("build", "r.bib")
    assert result.exit_code == 0, result.output
    paper = shown(paper_id)
    assert {name: paper[name] for name in fields} == fields


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16LE"), ("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE")])
@pytest.mark.parametrize("file", ["p.csv", "p.jsonl", "p.bib", "p.txt"])
def test_a_utf16_file_is_named_as_such(workdir, fake_model, encoding, name, file):
    text = {"p.csv": "id,abstract\np1,An abstract about graphs.\n", "p.jsonl": lines({"abstract": "An abstract."}),
            "p.bib": GOOD_BIB, "p.txt": "Heading\n\nAn abstract about graphs.\n"}[file]
    (workdir / file).write_bytes(text.encode(encoding))
    result = run("build", file)
    assert (result.exit_code, result.stderr) == (
        1, f"Error: {file}: {name} text, not UTF-8: re-save it as UTF-8 (e.g. `iconv -f {name} -t UTF-8`)\n")
