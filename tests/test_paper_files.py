"""Reading papers from seed text, JSONL and CSV files: IDs, handles, duplicates, input errors."""

import hashlib
import json
import re
import sys
import warnings

import pytest

from conftest import SEEDS
from recommender.errors import InputError
from recommender.corpus.papers import InputWarning, Paper, derive_id, first_sentence, read_papers

ABSTRACT_A = "We introduce FooNet, a network for foo. It beats bar on baz."
ABSTRACT_B = "This paper studies graph sparsification with spectral bounds. Code at https://github.com/x/spars."


def test_seed_text_format(tmp_path):
    path = tmp_path / "conf.txt"
    path.write_text(f"NeurIPS 2025 Papers\n\n{ABSTRACT_A}\n\n{ABSTRACT_B}\n", encoding="utf-8")
    papers = read_papers([path])
    assert [p.abstract for p in papers] == [ABSTRACT_A, ABSTRACT_B]
    assert [p.venue for p in papers] == ["NeurIPS 2025 Papers"] * 2
    assert [p.source for p in papers] == [f"{path}:3", f"{path}:5"]
    assert papers[0].title == ""
    assert papers[0].handle == "FooNet"
    assert papers[1].code_links == ("https://github.com/x/spars",)


def test_seed_text_paragraph_lines_are_joined(tmp_path):
    path = tmp_path / "conf.txt"
    path.write_text("Heading\n\nWe introduce FooNet,\na network for foo.\n", encoding="utf-8")
    assert read_papers([path])[0].abstract == "We introduce FooNet, a network for foo."


def test_seed_text_without_heading_keeps_first_abstract(tmp_path):
    path = tmp_path / "conf.txt"
    path.write_text(f"{ABSTRACT_A}\n\n{ABSTRACT_B}\n", encoding="utf-8")
    assert len(read_papers([path])) == 2


def test_jsonl_keeps_ids_and_metadata(tmp_path):
    path = tmp_path / "papers.jsonl"
    rows = [
        {"id": "p1", "title": "FooNet: Networks for Foo", "abstract": ABSTRACT_A,
         "authors": ["Ada Lovelace", "Alan Turing"], "year": 2024, "venue": "ICML", "url": "https://example.org/p1"},
        {"id": "p2", "title": "Sparsifiers", "abstract": ABSTRACT_B},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    first, second = read_papers([path])
    assert (first.id, first.title, first.authors, first.year, first.venue, first.url) == (
        "p1", "FooNet: Networks for Foo", ("Ada Lovelace", "Alan Turing"), 2024, "ICML", "https://example.org/p1")
    assert first.handle == "FooNet"
    assert first.text == "FooNet: Networks for Foo. " + ABSTRACT_A
    assert second.id == "p2"


def test_csv_with_same_columns(tmp_path):
    path = tmp_path / "papers.csv"
    path.write_text(
        'id,title,abstract,authors,year\np1,FooNet,"We introduce FooNet, a network.",Ada Lovelace; Alan Turing,2020\n',
        encoding="utf-8",
    )
    (paper,) = read_papers([path])
    assert (paper.id, paper.title, paper.abstract, paper.authors, paper.year) == (
        "p1", "FooNet", "We introduce FooNet, a network.", ("Ada Lovelace", "Alan Turing"), 2020)


def test_folder_reads_every_supported_file_in_order(tmp_path):
    (tmp_path / "b.txt").write_text(f"Heading\n\n{ABSTRACT_B}\n", encoding="utf-8")
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "a1", "abstract": ABSTRACT_A}) + "\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("ignored", encoding="utf-8")
    assert [p.id for p in read_papers([tmp_path])] == ["a1", derive_id("", ABSTRACT_B)]


def test_derived_ids_are_stable_and_normalised():
    assert derive_id("", ABSTRACT_A) == derive_id("", "  " + ABSTRACT_A.upper().replace(" ", "\n "))
    assert derive_id("", ABSTRACT_A) != derive_id("", ABSTRACT_B)
    assert len(derive_id("", ABSTRACT_A)) == 12


def test_derived_ids_collapse_every_unicode_space_as_the_stored_ones_were():
    # Stored indexes hold IDs derived with the rule "runs of \\s made one space, stripped, casefolded":
    # collapsing spaces faster must not change one of them.
    spaces = "".join(chr(i) for i in range(sys.maxunicode + 1) if re.fullmatch(r"\s", chr(i)))
    title, abstract = f"{spaces}Title\u00a0\u2003Of{spaces}", f"Deep{spaces}NETS\x1c\x1fGo. {spaces}"
    rule = re.sub(r"\s+", " ", f"{title}\n{abstract}").strip().casefold()
    assert derive_id(title, abstract) == hashlib.sha256(rule.encode("utf-8")).hexdigest()[:12] == "8fc5359ca2b2"


def test_ids_and_handles_do_not_depend_on_file_order(tmp_path):
    one = tmp_path / "one.txt"
    two = tmp_path / "two.txt"
    one.write_text("H\n\nWe propose StreamFlow for video. It is fast.\n", encoding="utf-8")
    two.write_text("H\n\nWe propose StreamFlow for audio. It is slow.\n", encoding="utf-8")
    forward = {p.id: p.handle for p in read_papers([one, two])}
    backward = {p.id: p.handle for p in read_papers([two, one])}
    assert forward == backward
    assert sorted(forward.values()) == ["StreamFlow", "StreamFlow-2"]


def test_same_text_twice_is_kept_once_with_a_warning(tmp_path):
    path = tmp_path / "conf.txt"
    path.write_text(f"Heading\n\n{ABSTRACT_A}\n\n{ABSTRACT_A}\n", encoding="utf-8")
    with pytest.warns(InputWarning, match=rf"^{path}:5: same paper as {path}:3; kept once$"):
        papers = read_papers([path])
    assert len(papers) == 1


def test_seed_corpus_gives_38_unique_handles():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        papers = read_papers([SEEDS])
    assert len(papers) == 38
    assert len({p.handle.casefold() for p in papers}) == 38
    assert len({p.id for p in papers}) == 38
    handles = {p.handle for p in papers}
    assert {"FlashDP", "VADB", "TFLA", "AnyMDP", "Dyn-O", "PaZO", "BenchmarkCards", "LipKANs", "NAAS", "KLDO",
            "AlignedGen", "StreamFlow", "ViGoRL", "DataSIR", "MultiTalk", "SemCoT", "RUAGO", "SPARKE"} <= handles


def test_paper_round_trips_through_dict():
    paper = Paper(id="x", title="T", abstract="A.", handle="T", authors=("A",), year=2020, code_links=("u",))
    assert Paper.from_dict(json.loads(json.dumps(paper.to_dict()))) == paper


def test_first_sentence():
    assert first_sentence("One thing. Two things.") == "One thing."
    assert first_sentence("We use e.g. tricks. Next.") == "We use e.g. tricks."


@pytest.mark.parametrize("content, suffix, message", [
    ("", ".txt", "{path}: file is empty"),
    ("{not json\n", ".jsonl", "{path} line 1: not valid JSON (Expecting property name enclosed in double quotes): fix or remove the line"),
    ('{"id": "x"}\n', ".jsonl", "{path}:1: record has no 'abstract' field: every paper needs one"),
    ("id,title\nx,y\n", ".csv", "{path}: CSV has no 'abstract' column (columns: id, title): name the columns id, title, abstract"),
])
def test_input_errors_name_file_and_line(tmp_path, content, suffix, message):
    path = tmp_path / f"bad{suffix}"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_papers([path])
    assert str(caught.value) == message.format(path=path)
