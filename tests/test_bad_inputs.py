"""Bad input: one clear line, a non-zero exit, and the existing index untouched.

Each row of a table is one case, run through the CLI exactly as a user would.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from corpus import write_corpus
from recommender import build_index
from recommender.cli import main
from recommender.embed.windows import pool_windows, split_windows


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under root: the whole state of the indexes."""
    return {
        path.relative_to(root).as_posix(): (path.read_bytes() if path.is_file() else None)
        for path in sorted(root.rglob("*"))
    }


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def built(workdir, fake_model):
    """An index of the six-paper corpus, and the bytes of everything under indexes/."""
    build_index([write_corpus(workdir / "in")])
    return snapshot(workdir / "indexes")


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)


def jsonl(*rows) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


ABSTRACT = "We study graph sparsification with spectral bounds and fast solvers."

# (case, files to write, `papers build` arguments, exact stderr)
BUILD_CASES = [
    ("missing path", {}, ["nope.txt"],
     "Error: nope.txt: no such file or folder"),
    ("empty file", {"bad/empty.txt": ""}, ["bad/empty.txt"],
     "Error: bad/empty.txt: file is empty"),
    ("whitespace-only file", {"bad/blank.jsonl": " \n\t\n\n"}, ["bad/blank.jsonl"],
     "Error: bad/blank.jsonl: file is empty"),
    ("folder with no readable papers", {"bad/paper.docx": b"PK\x03\x04", "bad/notes.md": "notes",
                                        "bad/.hidden/p.txt": ABSTRACT}, ["bad"],
     "Error: bad: folder has no .txt, .jsonl, .json, .csv, .bib or .pdf files of papers"),
    ("unsupported file type", {"bad/paper.docx": b"PK\x03\x04"}, ["bad/paper.docx"],
     "Error: bad/paper.docx: unsupported file type '.docx': use .txt (one abstract a paragraph), .jsonl, .json, .csv, "
     ".bib, .pdf or Zotero's zotero.sqlite (see docs/input-formats.md)"),
    ("binary file", {"bad/model.txt": bytes(range(256)) * 4}, ["bad/model.txt"],
     "Error: bad/model.txt: looks like a binary file (contains NUL bytes): give a UTF-8 text file"),
    ("not UTF-8", {"bad/latin1.txt": f"Heading\n\n{ABSTRACT}\n\nCaf\u00e9 au lait and graph theory.\n".encode("latin-1")},
     ["bad/latin1.txt"],
     "Error: bad/latin1.txt line 5: not valid UTF-8 (byte 0xe9): re-save the file as UTF-8"),
    ("malformed JSONL line", {"bad/p.jsonl": jsonl({"abstract": ABSTRACT}, '{"abstract": "unfinished'),}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl line 2: not valid JSON (Unterminated string starting at): fix or remove the line"),
    ("JSONL line not an object", {"bad/p.jsonl": jsonl(["a", "list"])}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl line 1: expected a JSON object with 'abstract', got list"),
    ("JSONL nested too deeply", {"bad/p.jsonl": "[" * 100_000 + "\n"}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl line 1: JSON nested too deeply: give one flat object a line"),
    ("JSONL object without abstract", {"bad/p.jsonl": jsonl({"abstract": ABSTRACT}, {"title": "No text"})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:2: record has no 'abstract' field: every paper needs one"),
    ("JSONL abstract not text", {"bad/p.jsonl": jsonl({"abstract": ["a", "b"]})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: 'abstract' must be text, got list"),
    ("JSONL authors not names", {"bad/p.jsonl": jsonl({"abstract": ABSTRACT, "authors": [{"name": "A"}]})},
     ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: 'authors' must be a list of names (strings)"),
    ("JSONL year not a number", {"bad/p.jsonl": jsonl({"abstract": ABSTRACT, "year": "soon"})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: year 'soon' is not a whole number"),
    ("empty abstract", {"bad/p.jsonl": jsonl({"id": "e1", "abstract": ""})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: abstract is empty: give the text or remove the record"),
    ("whitespace-only abstract", {"bad/p.jsonl": jsonl({"abstract": ABSTRACT}, {"abstract": " \t\u00a0\n "})},
     ["bad/p.jsonl"],
     "Error: bad/p.jsonl:2: abstract is empty: give the text or remove the record"),
    ("control characters only", {"bad/p.jsonl": jsonl({"abstract": "\u0007\u001b\u0000"})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: abstract is empty: give the text or remove the record"),
    ("CSV without needed columns", {"bad/p.csv": "id,title,notes\np1,A,Some text\n"}, ["bad/p.csv"],
     "Error: bad/p.csv: CSV has no 'abstract' column (columns: id, title, notes): name the columns id, title, abstract"),
    ("CSV with a ragged row", {"bad/p.csv": f"id,title,abstract\np1,A,{ABSTRACT}\np2,B,We study X, and Y\n"},
     ["bad/p.csv"],
     "Error: bad/p.csv line 3: 4 fields where the header has 3: quote fields that contain commas"),
    ("CSV empty abstract cell", {"bad/p.csv": "id,title,abstract\np1,A,\n"}, ["bad/p.csv"],
     "Error: bad/p.csv:2: abstract is empty: give the text or remove the record"),
    ("CSV header only", {"bad/p.csv": "id,title,abstract\n"}, ["bad/p.csv"],
     "Error: bad/p.csv: no papers found"),
    ("same ID, different text", {"bad/p.jsonl": jsonl({"id": "p1", "abstract": ABSTRACT},
                                                       {"id": "p1", "abstract": "A different paper."})},
     ["bad/p.jsonl"],
     "Error: bad/p.jsonl:2: ID 'p1' is also used by bad/p.jsonl:1 for a different paper: give each paper its own ID"),
    ("same ID across files", {"bad/a.jsonl": jsonl({"id": "dp1", "abstract": ABSTRACT}),
                              "bad/b.csv": "id,abstract\ndp1,Another text entirely.\n"},
     ["bad/a.jsonl", "bad/b.csv"],
     "Error: bad/b.csv:2: ID 'dp1' is also used by bad/a.jsonl:1 for a different paper: give each paper its own ID"),
    ("one bad file among good ones", {"bad/good.txt": f"Heading\n\n{ABSTRACT}\n", "bad/zz.jsonl": "{oops\n"},
     ["bad"],
     "Error: bad/zz.jsonl line 1: not valid JSON (Expecting property name enclosed in double quotes): fix or remove the line"),
    ("index path is a file", {"bad/good.txt": f"Heading\n\n{ABSTRACT}\n", "bad/taken": "x"},
     ["bad/good.txt", "--index", "bad/taken"],
     "Error: index bad/taken is a file, not an index folder: choose another index"),
    # Issue 13, round two of the reliability sweep.
    ("ID with a line break", {"bad/p.jsonl": jsonl({"id": "a\nb", "abstract": ABSTRACT})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: ID 'a\\nb' contains a tab, line break or control character: give an ID on one line"),
    ("ID with a tab", {"bad/p.csv": f'id,abstract\n"c\td",{ABSTRACT}\n'}, ["bad/p.csv"],
     "Error: bad/p.csv:2: ID 'c\\td' contains a tab, line break or control character: give an ID on one line"),
    ("text file with only a heading", {"bad/h.txt": "NeurIPS 2025 Papers\n"}, ["bad/h.txt"],
     "Error: bad/h.txt: only a heading line ('NeurIPS 2025 Papers'), no abstracts: put one abstract a paragraph below it"),
    ("empty --index", {"bad/good.txt": f"Heading\n\n{ABSTRACT}\n"}, ["bad/good.txt", "--index", ""],
     "Error: index name is empty: give an index name or folder"),
    ("an index folder given as input", {}, ["indexes/default"],
     "Error: indexes/default: an index folder, not papers: give the files or folders it was built from"),
    ("CSV with a repeated column", {"bad/p.csv": "id,abstract,abstract\np1,First text.,Second text.\n"}, ["bad/p.csv"],
     "Error: bad/p.csv: CSV column 'abstract' appears more than once: give each column once"),
    ("--index the folder of all indexes", {"bad/good.txt": f"Heading\n\n{ABSTRACT}\n"}, ["bad/good.txt", "--index", "./indexes"],
     "Error: index ./indexes is the folder that holds every index: give an index name"),
    # Issue 22 item 13: IDs that look like other IDs.
    ("ID with a right-to-left override", {"bad/p.jsonl": jsonl({"id": "dp\u202e1", "abstract": ABSTRACT})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: ID 'dp\\u202e1' contains an invisible or text-direction character "
     "(U+202E RIGHT-TO-LEFT OVERRIDE): give an ID of visible characters"),
    ("ID with a left-to-right isolate", {"bad/p.csv": f"id,abstract\n\u2066dp1\u2069,{ABSTRACT}\n"}, ["bad/p.csv"],
     "Error: bad/p.csv:2: ID '\\u2066dp1\\u2069' contains an invisible or text-direction character "
     "(U+2066 LEFT-TO-RIGHT ISOLATE): give an ID of visible characters"),
    ("ID with a zero-width space", {"bad/p.jsonl": jsonl({"id": "dp\u200b1", "abstract": ABSTRACT})}, ["bad/p.jsonl"],
     "Error: bad/p.jsonl:1: ID 'dp\\u200b1' contains an invisible or text-direction character "
     "(U+200B ZERO WIDTH SPACE): give an ID of visible characters"),
    ("BibTeX key with a zero-width joiner", {"bad/r.bib": f"@article{{dp\u200d1, abstract={{{ABSTRACT}}}}}\n"}, ["bad/r.bib"],
     "Error: bad/r.bib:1 (entry 'dp\u200d1'): ID 'dp\\u200d1' contains an invisible or text-direction character "
     "(U+200D ZERO WIDTH JOINER): give an ID of visible characters"),
    # Issue 22 item 16: UTF-16 is text in another encoding, not a binary file.
    ("UTF-16 from Notepad", {"bad/p.txt": f"Heading\n\n{ABSTRACT}\n".encode("utf-16")}, ["bad/p.txt"],
     "Error: bad/p.txt: UTF-16LE text, not UTF-8: re-save it as UTF-8 (e.g. `iconv -f UTF-16LE -t UTF-8`)"),
]


@pytest.mark.parametrize("files, args, message", [row[1:] for row in BUILD_CASES], ids=[row[0] for row in BUILD_CASES])
def test_bad_build_input_is_refused_and_the_index_kept(workdir, built, files, args, message):
    write_files(workdir, files)
    result = run("build", *args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message + "\n")
    assert snapshot(workdir / "indexes") == built


# (case, `papers ...` arguments, exact stderr); the index holds the six papers of tests/corpus.py.
QUERY_CASES = [
    ("unknown handle suggests the nearest", ["like", "FlashDB"],
     "Error: no paper 'FlashDB' in the index: closest matches: FlashDP"),
    ("unknown ID with nothing near", ["like", "zzzzzzzz"],
     "Error: no paper 'zzzzzzzz' in the index: see `papers list`"),
    ("ambiguous ID prefix", ["like", "vid"],
     "Error: 'vid' matches 2 papers: vid1 (VADB), vid2 (Video Quality Models): give more of the ID"),
    ("empty reference", ["like", " "],
     "Error: empty paper reference: give an ID or handle (see `papers list`)"),
    ("unknown --not", ["like", "dp1", "--not", "FlashDB"],
     "Error: no paper 'FlashDB' in the index: closest matches: FlashDP"),
    ("unknown paper to show", ["show", "TFLB"],
     "Error: no paper 'TFLB' in the index: closest matches: TFLA"),
    ("-k 0", ["like", "dp1", "-k", "0"], "Error: Invalid value for '-k': k must be at least 1, got 0"),
    ("negative -k", ["search", "private training", "-k", "-3"], "Error: Invalid value for '-k': k must be at least 1, got -3"),
    ("--min-score above 1", ["like", "dp1", "--min-score", "1.5"],
     "Error: Invalid value for '--min-score': min_score must be between -1 and 1 (scores are cosine similarities), got 1.5"),
    ("--min-score below -1", ["search", "video", "--min-score", "-2"],
     "Error: Invalid value for '--min-score': min_score must be between -1 and 1 (scores are cosine similarities), got -2"),
    ("--min-score not a number", ["like", "dp1", "--min-score", "nan"],
     "Error: Invalid value for '--min-score': min_score must be between -1 and 1 (scores are cosine similarities), got nan"),
    ("--diverse outside 0..1", ["like", "dp1", "--diverse", "1.5"],
     "Error: Invalid value for '--diverse': diverse must be between 0 and 1 (1 = relevance only), got 1.5"),
    ("--exclude file missing", ["like", "dp1", "--exclude", "read.txt"],
     "Error: read.txt: no such file (--exclude takes a file of paper IDs or handles, one a line)"),
    ("empty search text", ["search", "  "], "Error: empty search text: give some words to search for"),
    ("index name that does not exist", ["like", "dp1", "--index", "other"],
     "Error: no index at indexes/other (names resolve under $PAPERS_HOME): run `papers build --index other` first"),
    ("index built with another model", ["like", "dp1", "--model", "other-model"],
     "Error: index indexes/default was built with model 'all-MiniLM-L6-v2', not 'other-model': "
     "run `papers build --model other-model` to rebuild it"),
    # Issue 13, round two of the reliability sweep.
    ("search text not UTF-8", ["search", "caf\udce9 au lait"],
     "Error: search text is not valid UTF-8 (byte 0xe9): use a UTF-8 terminal or re-type the text"),
    ("empty --index", ["like", "dp1", "--index", ""], "Error: index name is empty: give an index name or folder"),
    ("like X --not X", ["like", "dp1", "--not", "dp1"],
     "Error: Invalid value for '--not': 'dp1' is given both as a paper to be like and as one to be unlike: "
     "drop one of them"),
    ("like X --not X by handle", ["like", "dp1", "vid1", "--not", "FlashDP"],
     "Error: Invalid value for '--not': 'FlashDP' is given both as a paper to be like and as one to be unlike: "
     "drop one of them"),
    ("--index is a file", ["like", "dp1", "--index", "./in/papers.jsonl"],
     "Error: in/papers.jsonl is a file, not an index folder: give an index name or folder"),
    ("reference with a line break", ["show", "dp\n1"], "Error: no paper 'dp\\n1' in the index: closest matches: dp1"),
    ("--out among the index's files", ["related-work", "dp1", "--out", "indexes/default/CURRENT"],
     "Error: indexes/default/CURRENT is inside the index folder indexes/default: write it somewhere else"),
    ("--out in a build folder", ["sessions", "--n", "2", "--out", "indexes/default/v-1/s.md"],
     "Error: indexes/default/v-1/s.md is inside the index folder indexes/default: write it somewhere else"),
]


# Option values out of range are bad usage: exit 2, as click's own usage errors (issue 23, item 12).
USAGE_ERRORS = {"-k 0", "negative -k", "--min-score above 1", "--min-score below -1", "--min-score not a number",
                "--diverse outside 0..1", "like X --not X", "like X --not X by handle"}


@pytest.mark.parametrize("args, message, code", [(*row[1:], 2 if row[0] in USAGE_ERRORS else 1) for row in QUERY_CASES],
                         ids=[row[0] for row in QUERY_CASES])
def test_bad_query_is_refused_and_the_index_kept(workdir, built, args, message, code):
    result = run(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (code, "", message + "\n")
    assert snapshot(workdir / "indexes") == built


@pytest.mark.parametrize("args", [["like", "dp1"], ["search", "video"], ["show", "dp1"], ["list"], ["info"]])
def test_querying_before_any_index_says_what_to_run(workdir, fake_model, args):
    result = run(*args)
    assert (result.exit_code, result.stderr) == (
        1, "Error: no index at indexes/default (names resolve under $PAPERS_HOME): run `papers build` first\n")
    assert not (workdir / "indexes").exists()


def test_k_larger_than_the_index_returns_every_other_paper(workdir, built):
    # Decision: -k above the index size is not an error; it returns all the other papers.
    result = run("like", "dp1", "-k", "1000", "--format", "json")
    assert result.exit_code == 0
    assert sorted(row["id"] for row in json.loads(result.stdout)) == ["dp2", "rnn1", "rnn2", "vid1", "vid2"]
    result = run("search", "private video kernels", "-k", "1000", "--format", "json", "--diverse", "0.5")
    assert len(json.loads(result.stdout)) == 6


def test_a_200000_character_abstract_is_embedded_from_windows(open_index, workdir, fake_model):
    words = [f"w{i % 997}x{i % 13}" for i in range(40_000)]
    abstract = " ".join(words)[:200_000].rsplit(" ", 1)[0]
    assert len(abstract) > 199_000
    path = write_corpus(workdir / "in", [{"id": "long", "abstract": abstract},
                                         {"id": "short", "abstract": ABSTRACT}])
    result = run("build", str(path.relative_to(workdir)))
    assert result.exit_code == 0, result.output
    recommender = open_index()
    assert recommender.show("long").abstract == abstract  # stored whole
    # No title and no sentence end: "sentences" chunking cuts plain token windows, sharing no sentence.
    windows = split_windows(abstract, fake_model.token_spans(abstract), fake_model.max_tokens, 32, head=0)
    assert len(windows) > 500
    assert sum(1 for text in fake_model.encoded_texts if text in abstract) == len(windows)
    expected = pool_windows(fake_model.encode([text for text, _ in windows]),
                            [count for _, count in windows])
    np.testing.assert_allclose(recommender.vectors[recommender.resolve("long")], expected, atol=1e-5)
    first_window_only = fake_model.encode([windows[0][0]])[0]
    assert float(expected @ first_window_only) < 0.9


def test_a_200000_character_abstract_in_csv_is_read(open_index, workdir, fake_model):
    abstract = ("spectral graph sparsification " * 7000)[:200_000].strip()
    (workdir / "long.csv").write_text(f'id,abstract\nlong,"{abstract}"\nshort,{ABSTRACT}\n', encoding="utf-8")
    result = run("build", "long.csv")
    assert result.exit_code == 0, result.output
    assert open_index().show("long").abstract == abstract


def test_control_characters_are_cleaned_and_scripts_kept(open_index, workdir, fake_model):
    (workdir / "seeds.txt").write_text(
        "Heading\n\nWe present \x1b[31mRedNet\x1b[0m,\x07 a\tmodel \x85for \u4e2d\u6587 and \u0420\u0443\u0441\u0441\u043a\u0438\u0439\n"
        "text with \u0627\u0644\u0639\u0631\u0628\u064a\u0629 and \u00e9\u0301 accents.\n",
        encoding="utf-8")
    write_corpus(workdir, [{"id": "j1", "title": "Bell\u0007 \u009b2J Title", "abstract": "Tab\tand\u0000nul \ud800 lone."}],
                 "more.jsonl")
    result = run("build", "seeds.txt", "more.jsonl")
    assert result.exit_code == 0, result.output
    recommender = open_index()
    text_paper, json_paper = recommender.papers()
    assert text_paper.abstract == (
        "We present [31mRedNet [0m, a model for \u4e2d\u6587 and \u0420\u0443\u0441\u0441\u043a\u0438\u0439 "
        "text with \u0627\u0644\u0639\u0631\u0628\u064a\u0629 and \u00e9\u0301 accents.")
    assert (json_paper.title, json_paper.abstract) == ("Bell 2J Title", "Tab and nul lone.")
    shown = run("show", "j1")
    assert shown.exit_code == 0 and "\x1b" not in shown.stdout and "\x9b" not in shown.stdout


def test_the_same_text_twice_is_stored_once_with_a_warning(open_index, workdir, fake_model):
    (workdir / "a.txt").write_text(f"Heading\n\n{ABSTRACT}\n", encoding="utf-8")
    (workdir / "b.txt").write_text(f"Other heading\n\nFirst paper here.\n\n{ABSTRACT.upper()}\n", encoding="utf-8")
    result = run("build", "a.txt", "b.txt")
    assert result.exit_code == 0
    assert result.stderr == "warning: b.txt:5: same paper as a.txt:3; kept once\n"
    assert len(open_index()) == 2


def test_handles_equal_only_under_casefold_resolve_by_exact_case(workdir, fake_model):
    # unique_handles keeps "Straße" and "STRASSE" apart (lower() differs); casefold() does not.
    write_corpus(workdir / "in", [{"id": "s1", "title": "Straße", "abstract": "Roads and streets in cities."},
                                  {"id": "s2", "title": "STRASSE", "abstract": "Street networks and traffic."},
                                  {"id": "o1", "title": "Other", "abstract": ABSTRACT}])
    assert run("build", "in").exit_code == 0
    assert run("show", "Straße", "--format", "json").stdout == run("show", "s1", "--format", "json").stdout
    assert run("show", "STRASSE", "--format", "json").stdout == run("show", "s2", "--format", "json").stdout
    assert run("like", "strasse").stderr == (
        "Error: 'strasse' matches 2 papers: s1 (Straße), s2 (STRASSE): give more of the ID\n")


# ---------------------------------------------------------------- files of IDs (--from, --exclude)
# Issue 22 item 12, issue 23 item 11: read like input files (a BOM and CRLF from Notepad), `# comments` after an ID.

ID_FILES = [
    ("UTF-8 BOM", b"\xef\xbb\xbfvid1\nrnn2\n"),
    ("BOM and CRLF", b"\xef\xbb\xbfvid1\r\nrnn2\r\n"),
    ("comments after the IDs", b"# Friday\nvid1   # read in March\nrnn2\t# Ana's pick\n\n"),
    ("a BOM, no newline at the end", b"\xef\xbb\xbfvid1\nrnn2"),
]


@pytest.mark.parametrize("content", [row[1] for row in ID_FILES], ids=[row[0] for row in ID_FILES])
def test_id_files_are_read_like_input_files(workdir, built, content):
    (workdir / "ids.txt").write_bytes(content)
    result = run("related-work", "--from", "ids.txt", "-k", "1", "--format", "jsonl")
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["vid1", "rnn2"]
    result = run("like", "dp1", "--exclude", "ids.txt", "-k", "10", "--format", "json")
    assert result.exit_code == 0, result.output
    assert sorted(row["id"] for row in json.loads(result.stdout)) == ["dp2", "rnn1", "vid2"]


def test_a_utf16_id_file_says_so(workdir, built):
    (workdir / "ids.txt").write_bytes("vid1\r\n".encode("utf-16"))
    result = run("like", "dp1", "--exclude", "ids.txt")
    assert (result.exit_code, result.stderr) == (
        1, "Error: ids.txt: UTF-16LE text, not UTF-8: re-save it as UTF-8 (e.g. `iconv -f UTF-16LE -t UTF-8`) "
           "(--exclude takes a file of paper IDs or handles, one a line)\n")


# ---------------------------------------------------------------- --from-file: match first, then skip
# Issue 23 item 3: an entry without an abstract that names a paper of the index is that paper.

FROM_FILE_CASES = [
    ("BibTeX keys", "@misc{dp2, title={Private Fine-Tuning}}\n@misc{vid2, title={Video Quality Models}}\n",
     2, "reading.bib: 2 of 2 papers found in the index, 0 embedded now\n"),
    ("a key and one that names nothing", "@misc{dp2, title={Private Fine-Tuning}}\n@misc{zz9, title={Unknown}}\n",
     1, "warning: reading.bib: 1 record without an abstract and not in the index skipped (the first: reading.bib:2 "
        "(entry 'zz9'))\nreading.bib: 1 of 1 papers found in the index, 0 embedded now\n"),
]


@pytest.mark.parametrize("text, found, stderr", [row[1:] for row in FROM_FILE_CASES], ids=[row[0] for row in FROM_FILE_CASES])
def test_from_file_entries_without_abstracts_are_matched_first(workdir, built, text, found, stderr):
    (workdir / "reading.bib").write_text(text, encoding="utf-8")
    result = run("like", "--from-file", "reading.bib", "-k", "2", "--format", "json")
    assert (result.exit_code, result.stderr) == (0, stderr), result.output
    seeds = {"dp2", "vid2"} if found == 2 else {"dp2"}
    assert not seeds & {row["id"] for row in json.loads(result.stdout)}


def test_from_file_of_unknown_entries_without_abstracts_is_one_line(workdir, built):
    (workdir / "reading.bib").write_text("@misc{zz9, title={Unknown}}\n", encoding="utf-8")
    result = run("like", "--from-file", "reading.bib")
    assert (result.exit_code, result.stdout, result.stderr) == (
        1, "", "Error: reading.bib: none of its 1 records has an abstract or names a paper of the index (by key, DOI "
               "or arXiv ID): give their abstracts\n")


def test_from_file_entries_match_by_doi_and_arxiv_id(workdir, fake_model):
    from corpus import PAPERS

    papers = [dict(PAPERS[0], url="https://doi.org/10.1145/flash.2024"), dict(PAPERS[2], url="https://arxiv.org/abs/2402.00031")]
    build_index([write_corpus(workdir / "in", papers + PAPERS[3:])])
    (workdir / "reading.bib").write_text("@misc{a, doi={10.1145/FLASH.2024}}\n@misc{b, eprint={2402.00031v2}}\n", encoding="utf-8")
    result = run("related-work", "--from-file", "reading.bib", "-k", "1", "--format", "jsonl")
    assert (result.exit_code, result.stderr) == (0, "reading.bib: 2 of 2 papers found in the index, 0 embedded now\n")
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["dp1", "vid1"]
