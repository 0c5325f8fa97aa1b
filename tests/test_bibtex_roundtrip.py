"""BibTeX that round-trips: a .bib built into an index and written out again by
`related-work --all --format bibtex` is the same entries (key, entry type, every field), as
the real `bibtex` program and bibtexparser read them."""

import os
import shutil
import subprocess

import bibtexparser
import pytest

from conftest import FIXTURES
from recommender.corpus.citation import unique_citation_keys
from recommender.corpus.papers import Paper, read_papers
from recommender.render.bibtex import bibtex_entry

# Every field the fixtures use, as the real bibtex program reads them back.
FIELDS = ("title author editor booktitle journal year month volume number pages publisher address "
          "doi url eprint archiveprefix note keywords abstract").split()
TYPES = ("article", "inproceedings", "incollection", "proceedings", "book", "misc", "phdthesis", "techreport")

# A style file that prints each entry's type, key and raw fields, one a line.
DUMP_BST = "ENTRY { " + " ".join(FIELDS) + " } {} {}\n" + """
MACRO {jan} {"January"}
FUNCTION {field.line} { duplicate$ empty$ { pop$ pop$ } { swap$ ": " * swap$ * write$ newline$ } if$ }
FUNCTION {dump}
{ "@" type$ * " " * cite$ * write$ newline$
""" + "".join(f'  "{name}" {name} field.line\n' for name in FIELDS) + "}\n" + "".join(
    f"FUNCTION {{{kind}}} {{ dump }}\n" for kind in TYPES) + """
FUNCTION {default.type} { dump }
READ
ITERATE {call.type$}
"""


def bibtex_reads(folder, bib_text: str) -> str:
    """What the real `bibtex` reads from a .bib: every entry, its type, key and fields."""
    if shutil.which("bibtex") is None:
        if os.environ.get("CI"):
            pytest.fail("bibtex is not installed (apt-get install texlive-binaries)", pytrace=False)
        pytest.skip("bibtex is not installed (apt-get install texlive-binaries)")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "refs.bib").write_text(bib_text, encoding="utf-8")
    (folder / "dump.bst").write_text(DUMP_BST, encoding="utf-8")
    (folder / "doc.aux").write_text("\\citation{*}\n\\bibdata{refs}\n\\bibstyle{dump}\n", encoding="utf-8")
    done = subprocess.run(["bibtex", "-terse", "doc"], cwd=folder, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (folder / "doc.blg").read_text().count("Warning--"), (folder / "doc.blg").read_text()
    return (folder / "doc.bbl").read_text(encoding="utf-8")


def bibtexparser_reads(bib_text: str) -> dict:
    """{key: (entry type, {field: value})} as bibtexparser reads the .bib (whitespace collapsed)."""
    library = bibtexparser.parse_string(bib_text)
    assert not library.failed_blocks
    months = {"jan": "January"}
    entries = {entry.key: (entry.entry_type.lower(),
                           {field.key.lower(): " ".join(months.get(field.value, field.value).split())
                            for field in entry.fields})
               for entry in library.entries}
    for kind, fields in entries.values():  # a crossref's fields, as BibTeX inherits them
        parent = entries.get(fields.pop("crossref", None), (None, {}))[1]
        fields.update({name: value for name, value in parent.items() if name not in fields and name != "title"})
    return entries


@pytest.fixture
def library(workdir, run):
    """The fixture library built into an index, and what `related-work --all --format bibtex` writes."""
    source = (FIXTURES / "roundtrip.bib").read_text(encoding="utf-8")
    (workdir / "refs.bib").write_text(source, encoding="utf-8")
    assert run("build", "refs.bib").exit_code == 0
    written = run("related-work", "--all", "-k", "2", "--format", "bibtex")
    assert written.exit_code == 0, written.output
    return source, written.stdout


def test_a_bib_comes_back_as_it_went_in_for_bibtexparser(library):
    source, written = library
    went_in, came_out = bibtexparser_reads(source), bibtexparser_reads(written)
    assert came_out == {key: entry for key, entry in went_in.items() if "abstract" in entry[1]}
    assert came_out["smith2024private"][0] == "inproceedings"  # not @misc with howpublished
    assert came_out["smith2024private"][1]["pages"] == "12--34"
    assert "doe2023fine" in came_out  # the user's key, not a generated "doe2023private"


def test_a_bib_comes_back_as_it_went_in_for_bibtex(library, tmp_path):
    source, written = library
    went_in = bibtex_reads(tmp_path / "in", source)
    came_out = bibtex_reads(tmp_path / "out", written)
    entries = lambda text: sorted(block for block in text.split("@")[1:] if "abstract: " in block)  # noqa: E731
    assert entries(came_out) == entries(went_in)
    assert "@inproceedings smith2024private\n" in came_out and "editor: Doe, A. and Roe, B.\n" in came_out


def test_generated_keys_make_way_for_the_users_keys():
    own = Paper(id="a", title="Private things", abstract="x", authors=("Jane Doe",), year=2023,
                citation_key="doe2023private")
    generated = Paper(id="b", title="Private training", abstract="y", authors=("John Doe",), year=2023)
    keys = unique_citation_keys([generated, own])
    assert keys["a"] == "doe2023private" and keys["b"] != "doe2023private"


def test_other_inputs_keep_their_given_type_and_fields():
    paper = Paper(id="z1", title="Tiny & fast", abstract="We make it small.", venue="Proc. Small Things",
                  entry_type="incollection", citation_key="lee2020tiny",
                  bibtex_fields=(("doi", "10.1/x_y"), ("pages", "1--9")))
    entry = bibtex_entry(paper, "lee2020tiny")
    assert entry.startswith("@incollection{lee2020tiny,\n")
    assert "  booktitle = {Proc. Small Things},\n" in entry and "  pages = {1--9}" in entry


@pytest.mark.filterwarnings("ignore:.*without an abstract")
def test_the_bib_readers_paper_keeps_what_bibtex_needs():
    paper = {p.id: p for p in read_papers([FIXTURES / "roundtrip.bib"])}["smith2024private"]
    assert (paper.citation_key, paper.entry_type) == ("smith2024private", "inproceedings")
    assert dict(paper.bibtex_fields)["booktitle"] == "Advances in Neural Information Processing Systems"
    assert Paper.from_dict(paper.to_dict(stored=True)) == paper


def test_a_quoted_value_bibtex_cannot_parse_loses_its_quotes(tmp_path):
    (tmp_path / "r.bib").write_text(
        '@article{k1,\n  title = "Learning } with a stray brace",\n'
        '  abstract = "An abstract {with an open brace",\n}\n', encoding="utf-8")
    (paper,) = read_papers([tmp_path / "r.bib"])
    assert (paper.title, paper.abstract) == (
        "Learning } with a stray brace", "An abstract with an open brace")
