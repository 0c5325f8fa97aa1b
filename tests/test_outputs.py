"""Every written output read by the reader it is for: Markdown rendered as CommonMark (HTML
allowed) in a real browser, BibTeX read by the real `bibtex` program and by bibtexparser,
CSV read as a spreadsheet reads it (formulas evaluated by the `formulas` engine), and the
hints that show a command read by a POSIX shell's rules. Also what the outputs carry
(authors, year, venue, links), BibTeX entry types, the one LaTeX policy, `sessions --format
csv`, a map's points as CSV/JSON and `indexes` in machine formats.

The real `bibtex` comes from Debian's texlive-binaries and the browser from Debian's chromium
(.ci/run installs both); without them these tests skip with the reason, and fail on CI."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from corpus import PAPERS, write_corpus
from recommender.corpus.latex import latex_text
from recommender.corpus.papers import Paper
from recommender.render.bibtex import bibtex_entry, bibtex_escape, entry_type
from recommender.render.markdown import md
from recommender.render.tables import spreadsheet_safe

ATTACKS = {  # what each hostile field does when its text becomes markup
    "img": '<img src=x onerror="window.attacked=1">',
    "script": "<script>window.attacked=2</script>",
    "link": "[click me](javascript:window.attacked=3)",
    "autolink": "<javascript:window.attacked=4>",
    "anchor": '<a href="javascript:window.attacked=5">here</a>',
    "svg": '<svg onload="window.attacked=6"></svg>',
}
HOSTILE = [
    {"id": "h1", "title": ATTACKS["img"] + " Fast Private Training",
     "abstract": f"We propose Evil, private gradient clipping. {ATTACKS['script']} {ATTACKS['link']}",
     "authors": [ATTACKS["anchor"], "Ada Lovelace"], "year": 2021, "venue": ATTACKS["svg"],
     "url": "javascript:window.attacked=7"},
    {"id": "h2", "title": ATTACKS["link"] + " private clipping",
     "abstract": f"We propose Worse, differentially private tuning. {ATTACKS['autolink']} ![x](javascript:window.attacked=8)",
     "authors": ["=HYPERLINK(\"https://evil.example\",\"x\")", "@SUM(1,1)"], "year": 2022, "venue": "+1+1",
     "url": 'https://example.org/"><img/src=x/onerror=window.attacked=9>'},
    {"id": "h3", "title": "=1+1", "abstract": "-1+1 We study video quality. $\\}, url = {javascript:alert(1)}, note = x$",
     "authors": ["-2+3"], "venue": "\t=1+1", "url": "https://example.org/ok"},
]
OUTPUT_PAPERS = PAPERS + HOSTILE


@pytest.fixture
def hostile(papers_cli, workdir):
    """The CLI over an index of the six tiny papers and three whose every field attacks a reader."""
    result = papers_cli("build", str(write_corpus(workdir / "in", OUTPUT_PAPERS)))
    assert result.exit_code == 0, result.output
    return papers_cli


# ---------------------------------------------------------------- Markdown in a browser

MARKDOWN_COMMANDS = [
    ("like", "dp2", "-k", "8", "--format", "markdown"),
    ("search", "private clipping", "-k", "9", "--format", "markdown"),
    ("list", "--format", "markdown"),
    ("show", "h1", "--format", "markdown"),
    ("show", "h2", "--format", "markdown"),
    ("related-work", "--all", "-k", "3"),
    ("sessions", "--n", "2"),
]


def commonmark_page(markdown: str) -> str:
    """The Markdown as CommonMark with raw HTML allowed (and GitHub's tables), as a page. Every
    link destination is kept, as the spec has it: markdown-it's own filter of `javascript:`
    links is off, since not every renderer has one."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    renderer.validateLink = lambda url: True
    return "<!doctype html><html><body>" + renderer.render(markdown) + "</body></html>"


@pytest.mark.parametrize("args", MARKDOWN_COMMANDS, ids=[" ".join(args[:2]) for args in MARKDOWN_COMMANDS])
def test_markdown_runs_no_script_in_a_browser(hostile, browser, args):  # noqa: F811
    result = hostile(*args)
    assert result.exit_code == 0, result.output
    page = browser.new_page()
    try:
        page.set_content(commonmark_page(result.stdout), wait_until="load")
        page.wait_for_timeout(100)  # an image's error fires after load
        for link in page.query_selector_all("a"):
            if not re.match(r"https?:", link.get_attribute("href") or "", re.I):  # web links would leave the page
                link.click(no_wait_after=True)  # a javascript: link runs when clicked
        page.wait_for_timeout(50)
        found = page.evaluate("""() => ({
            attacked: window.attacked ?? null,
            handlers: [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))
                .filter(name => name.startsWith('on')),
            scripts: document.querySelectorAll('script, img, svg, iframe').length,
            links: [...document.querySelectorAll('a')].map(a => a.getAttribute('href'))
                .filter(href => !/^https?:/i.test(href)),
        })""")
    finally:
        page.close()
    assert found == {"attacked": None, "handlers": [], "scripts": 0, "links": []}


@pytest.mark.parametrize("text", [*ATTACKS.values(), "- a list?", "1. a list?", "# heading", "> quote", "a | cell",
                                  "**bold** _em_ ~~gone~~ `code`", "&lt;b&gt; &amp;", "x\n\n---\ny", "=== x"])
def test_markdown_shows_text_as_written(text):
    """Rendered, the escaped text is the text itself: one paragraph of it, no markup."""
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(md(text))
    shown = " ".join(text.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    assert rendered == f"<p>{shown}</p>\n"


# ---------------------------------------------------------------- what the handouts show


@pytest.mark.parametrize("args", [
    ("like", "vid1", "-k", "8", "--format", "markdown"),
    ("search", "differentially private tuning", "-k", "9", "--format", "markdown"),
    ("related-work", "dp1", "-k", "8"),
    ("sessions", "--n", "2"),
], ids=["like", "search", "related-work", "sessions"])
def test_markdown_shows_authors_year_venue_and_link(run, workdir, args):
    papers = [dict(paper) for paper in PAPERS]
    papers[0].update(authors=["Ada Lovelace", "Grace Hopper"], year=2024, venue="ICML 2024",
                     url="https://example.org/flashdp")
    papers[1].update(authors=["Alan Turing"], year=2023, venue="NeurIPS")
    assert run("build", str(write_corpus(workdir / "in", papers))).exit_code == 0
    output = run(*args).stdout
    assert "Alan Turing" in output and "2023" in output and "NeurIPS" in output
    assert re.search("Ada Lovelace(, |; )Grace Hopper", output) and "ICML 2024" in output
    assert "https://example.org/flashdp" in output
    assert "ICML 2024 (2024)" not in output and "(2024). ICML" not in output  # the venue holds the year


# ---------------------------------------------------------------- BibTeX, read by bibtex

# A style that writes every field of every entry as BibTeX read it, one `name=value` line each.
DUMP_FIELDS = ("title", "author", "booktitle", "journal", "howpublished", "year", "eprint", "archiveprefix", "url",
               "note", "abstract")
DUMP_BST = "ENTRY { " + " ".join(DUMP_FIELDS) + " } {} {}\n" + """
FUNCTION {dump}
{ "@" type$ * "{" * cite$ * write$ newline$
""" + "".join(f'  {name} empty$ \'skip$ {{ "{name}=" {name} * write$ newline$ }} if$\n' for name in DUMP_FIELDS) + """  "}" write$ newline$
}
FUNCTION {article} { dump }
FUNCTION {inproceedings} { dump }
FUNCTION {misc} { dump }
FUNCTION {default.type} { dump }
READ
ITERATE {call.type$}
"""


def bibtex_program() -> str:
    found = shutil.which("bibtex")
    if found is None:
        reason = "no bibtex on PATH: install it (Debian: apt-get install texlive-binaries) to run the BibTeX tests"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def read_with_bibtex(text: str, folder: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """key -> (entry type, fields) as the real bibtex program reads `text`; fails on any warning."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "refs.bib").write_text(text, encoding="utf-8")
    (folder / "dump.bst").write_text(DUMP_BST, encoding="utf-8")
    (folder / "doc.aux").write_text("\\citation{*}\n\\bibdata{refs}\n\\bibstyle{dump}\n", encoding="utf-8")
    done = subprocess.run([bibtex_program(), "doc"], cwd=folder, capture_output=True, text=True, timeout=60)
    log = (folder / "doc.blg").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0 and "Warning--" not in log and "error" not in log.lower(), log
    entries, current = {}, None
    # bibtex breaks long output lines at spaces: a line that starts no field continues the last.
    for line in (folder / "doc.bbl").read_text(encoding="utf-8").splitlines():
        header = re.fullmatch(r"@(\w+)\{(.*)", line)
        field = re.fullmatch(rf"({'|'.join(DUMP_FIELDS)})=(.*)", line)
        if header:
            current = entries.setdefault(header.group(2), (header.group(1), {}))[1]
            name = None
        elif line == "}":
            current = None
        elif field:
            name = field.group(1)
            current[name] = field.group(2)
        else:
            current[name] += " " + line
    return {key: (kind, {n: " ".join(v.split()) for n, v in fields.items()}) for key, (kind, fields) in entries.items()}


def read_with_bibtexparser(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    import bibtexparser

    library = bibtexparser.parse_string(text)
    assert not library.failed_blocks
    return {entry.key: (entry.entry_type, {f.key.lower(): " ".join(str(f.value).split()) for f in entry.fields})
            for entry in library.entries}


def meant_fields(entry: str) -> dict[str, str]:
    """The fields `bibtex_entry` wrote, as it wrote them (each on its own `  name = {...}` line)."""
    fields = {}
    for line in entry.strip().splitlines()[1:-1]:
        name, _, value = line.strip().rstrip(",").partition(" = ")
        fields[name.lower()] = value[1:-1]
    return fields


BIBTEX_TEXTS = [
    ("maths closing the field", "Cost $\\}, url = {javascript:alert(1)}, note = x$ bound."),
    ("maths with a left brace", "We show $f(x) = \\left\\{ x \\right.$ holds."),
    ("maths with a right brace", "Sets $\\{a\\}$ and $\\left. x \\right\\}$."),
    ("maths with a percent", "Error $50%$ lower."),
    ("bare braces", "a } b { c"),
    ("escaped braces in prose", "\\} x \\{ y"),
    ("a trailing backslash", "ends with \\"),
    ("an entry inside", "@misc{x, title = {y}} and \"quotes\" }"),
    ("LaTeX specials", "50% of x_1 & y#2 ^ ~ \\emph{new} \\unknown{z}"),
    ("unbalanced maths", "a $x{$ b"),
    ("a citation", "BERT~\\citep{devlin2018bert} and \\cite[p.~2]{a,b}"),
]


@pytest.mark.parametrize("name, text", BIBTEX_TEXTS, ids=[row[0] for row in BIBTEX_TEXTS])
def test_every_field_reads_back_in_bibtex_as_written(tmp_path, name, text):
    paper = Paper(id="p1", title=text, abstract=text, authors=("Ada Lovelace", text), year=2020, venue=text,
                  url="https://example.org/a%20b#c{d}")
    entry = bibtex_entry(paper, "p1")
    meant = meant_fields(entry)
    assert set(meant) == {"title", "author", "howpublished", "year", "url", "abstract"}
    for reader in (lambda: read_with_bibtex(entry, tmp_path), lambda: read_with_bibtexparser(entry)):
        assert reader() == {"p1": ("misc", meant)}
    assert meant["url"] == "https://example.org/a%20b#c%7Bd%7D"


def test_a_hostile_paper_from_a_file_reads_back_in_bibtex(run, workdir, tmp_path):
    """--from-file: a paper of a CSV file, outside the index, in a BibTeX list."""
    assert run("build", str(write_corpus(workdir / "in"))).exit_code == 0
    (workdir / "mine.csv").write_text(
        "id,title,abstract\nx1,Private clipping,\"Differentially private clipping $\\}, url = {javascript:alert(1)}, "
        "note = x$ and $f(x) = \\left\\{ x \\right.$ bounds.\"\n", encoding="utf-8")
    result = run("related-work", "--from-file", "mine.csv", "-k", "2", "--format", "bibtex")
    assert result.exit_code == 0, result.output
    entries = read_with_bibtex(result.stdout, tmp_path)
    assert entries == read_with_bibtexparser(result.stdout)
    kind, fields = entries["x1"]
    assert set(fields) == {"title", "abstract"}
    assert fields["abstract"].startswith("Differentially private clipping")
    assert fields["abstract"].endswith("bounds.")


@pytest.mark.parametrize("venue, paper_id, url, kind, field", [
    ("ICLR 2020", "x", "", "inproceedings", "booktitle"),
    ("Proceedings of the 40th International Conference on Machine Learning", "x", "", "inproceedings", "booktitle"),
    ("NeurIPS", "x", "", "inproceedings", "booktitle"),
    ("Journal of Machine Learning Research", "x", "", "article", "journal"),
    ("IEEE Transactions on Pattern Analysis and Machine Intelligence", "x", "", "article", "journal"),
    ("Nature", "x", "", "article", "journal"),
    ("Transactions of the Association for Computational Linguistics (TACL)", "x", "", "article", "journal"),
    ("Proceedings of the National Academy of Sciences", "x", "", "article", "journal"),
    ("Findings of ACL: EMNLP 2023", "x", "", "inproceedings", "booktitle"),
    ("arXiv preprint arXiv:2101.00001", "x", "", "misc", "howpublished"),
    ("Lab notes", "x", "", "misc", "howpublished"),
    ("", "x", "", "misc", None),
    ("", "2401.00117", "", "misc", None),
    ("", "x", "https://arxiv.org/abs/1810.04805v2", "misc", None),
])
def test_bibtex_entry_types(tmp_path, venue, paper_id, url, kind, field):
    paper = Paper(id=paper_id, title="A title", abstract="An abstract.", authors=("Ada Lovelace",), year=2020,
                  venue=venue, url=url)
    assert entry_type(paper) == (kind, field or "howpublished")
    entries = read_with_bibtex(bibtex_entry(paper, "k1"), tmp_path)
    read_kind, fields = entries["k1"]
    assert read_kind == kind
    if field:
        assert fields[field] == venue
    arxiv = {"2401.00117": "2401.00117", "x": "1810.04805" if url else "2101.00001" if "arXiv:" in venue else None}[
        paper_id]
    assert (fields.get("eprint"), fields.get("archiveprefix")) == ((arxiv, "arXiv") if arxiv else (None, None))


def test_an_author_named_with_and_stays_one_author(tmp_path):
    paper = Paper(id="x", title="T", abstract="A.", authors=("Smith and Sons Ltd", "Ada Lovelace"))
    assert meant_fields(bibtex_entry(paper, "x"))["author"] == "{Smith and Sons Ltd} and Ada Lovelace"


# ---------------------------------------------------------------- one LaTeX policy


LATEX_CASES = [
    ("BERT~\\citep{devlin2018bert} is strong.", "BERT [devlin2018bert] is strong."),
    ("\\textbf{Tiny} cuts 50\\% of $O(n^2)$ cost.", "Tiny cuts 50% of $O(n^2)$ cost."),
    ("See \\url{https://x.org/a_b} and \\href{https://y.org}{this}.", "See https://x.org/a_b and this."),
    ("Kept: \\unknown{arg} and C:\\Users.", "Kept: \\unknown{arg} and C:\\Users."),
]


@pytest.mark.parametrize("text, read", LATEX_CASES)
def test_markdown_and_bibtex_read_latex_alike(run, workdir, tmp_path, text, read):
    assert latex_text(text) == read
    papers = [dict(PAPERS[0], title=text, abstract=f"We propose Tiny. {text}")] + PAPERS[1:]
    assert run("build", str(write_corpus(workdir / "in", papers))).exit_code == 0
    shown = run("show", "dp1", "--format", "markdown").stdout
    assert shown.startswith(f"## {md(read)}\n")
    assert shown.endswith(md(f"We propose Tiny. {read}") + "\n")
    kind, fields = read_with_bibtex(run("related-work", "dp1", "-k", "1", "--format", "bibtex").stdout, tmp_path)["dp1"]
    assert fields["title"] == "{" + bibtex_escape(read) + "}"
    assert fields["abstract"] == bibtex_escape(f"We propose Tiny. {read}")


def test_machine_formats_carry_the_text_as_given(run, workdir):
    text = "BERT~\\citep{devlin2018bert} cuts 50\\%."
    papers = [dict(PAPERS[0], title=text)] + PAPERS[1:]
    assert run("build", str(write_corpus(workdir / "in", papers))).exit_code == 0
    assert json.loads(run("show", "dp1", "--format", "json").stdout)["title"] == text
    assert next(csv.DictReader(io.StringIO(run("list", "--format", "csv").stdout)))["title"] == text


# ---------------------------------------------------------------- CSV as a spreadsheet reads it


def spreadsheet_value(cell: str):
    """What a spreadsheet shows for a CSV cell: a leading ' makes the rest text; a cell starting
    with = (or +, -, @, which a spreadsheet takes as the start of a formula) is evaluated; a
    number is a number."""
    import formulas

    if cell.startswith("'"):
        return cell[1:]
    stripped = cell.lstrip("\t\r")
    try:
        return float(cell)
    except ValueError:
        pass
    if stripped[:1] in ("=", "+", "-", "@"):
        formula = "=" + stripped.lstrip("=@")
        try:
            return ("formula", formulas.Parser().ast(formula)[1].compile()())
        except Exception:  # not a formula this engine knows: the spreadsheet would still have tried
            return ("formula", formula)
    return cell


@pytest.mark.parametrize("payload, value", [("=1+1", 2.0), ("+1+1", 2.0), ("-1+1", 0.0), ("@SUM(1,1)", 2.0),
                                            ("\t=1+1", 2.0)])
def test_the_payloads_are_formulas_to_a_spreadsheet(payload, value):
    """The cells the tests below write: a spreadsheet engine evaluates each as written, and not once defused."""
    assert spreadsheet_value(payload) == ("formula", value)
    assert spreadsheet_value(spreadsheet_safe(payload)) == payload


CSV_COMMANDS = [
    ("list", "--format", "csv"),
    ("like", "h3", "-k", "8", "--format", "csv"),
    ("search", "video quality", "-k", "9", "--format", "csv"),
    ("show", "h3", "--format", "csv"),
    ("related-work", "--all", "-k", "3", "--format", "csv"),
    ("sessions", "--n", "2", "--format", "csv"),
    ("map", "--out", "points.csv", "--n", "2"),
]


@pytest.mark.parametrize("args", CSV_COMMANDS, ids=[" ".join(args[:2]) for args in CSV_COMMANDS])
def test_no_csv_cell_is_a_formula(hostile, workdir, monkeypatch, args):
    monkeypatch.setitem(__import__("sys").modules, "umap", None)  # PCA: fast and deterministic
    monkeypatch.setitem(__import__("sys").modules, "openTSNE", None)
    result = hostile(*args)
    assert result.exit_code == 0, result.output
    text = (workdir / "points.csv").read_text(encoding="utf-8") if args[0] == "map" else result.stdout
    rows = list(csv.reader(io.StringIO(text)))
    shown = {cell: spreadsheet_value(cell) for row in rows for cell in row}
    assert [cell for cell, value in shown.items() if isinstance(value, tuple)] == []
    assert any(cell.startswith("'") for cell in shown)  # the hostile cells are there, defused
    for cell, value in shown.items():
        if cell.startswith("'"):
            assert value == cell[1:]


def test_defusing_follows_owasp():
    assert [spreadsheet_safe(cell) for cell in ("=A1", "+A1", "-A1", "@A1", "\tx", "\rx", "-0.125", "+3", "1e-3",
                                                "a=b", "", None, ["=x", "y"])] == [
        "'=A1", "'+A1", "'-A1", "'@A1", "'\tx", "'\rx", "-0.125", "+3", "1e-3", "a=b", "", "", "'=x; y"]


# ---------------------------------------------------------------- hints a shell can run

SHELL_NAMES = ["my;touch pwned", "a b", "$(touch pwned)", "it's", "`id`"]


@pytest.mark.parametrize("name", SHELL_NAMES)
def test_a_hint_is_one_command_to_the_shell(run, workdir, name):
    folder = workdir / name
    result = run("info", "--index", str(folder))
    command = re.search(r"run `(.*)` first", result.output).group(1)
    assert shlex.split(command) == ["papers", "build", "--index", str(folder)]

    assert run("build", str(write_corpus(workdir / "in")), "--index", str(folder)).exit_code == 0
    result = run("like", "dp1", "--index", str(folder), "--model", name)
    command = re.search(r"run `(.*)` to rebuild", result.output).group(1)
    assert shlex.split(command) == ["papers", "build", "--index", str(folder), "--model", name]


# ---------------------------------------------------------------- sessions as CSV, a map's points


def test_sessions_csv_and_map_points_agree(hostile, workdir, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "umap", None)
    monkeypatch.setitem(__import__("sys").modules, "openTSNE", None)
    plan = json.loads(hostile("sessions", "--n", "3", "--seed", "2", "--format", "json").stdout)
    sessions = {paper["id"]: session["session"] for session in plan["sessions"] for paper in session["papers"]}
    rows = list(csv.DictReader(io.StringIO(hostile("sessions", "--n", "3", "--seed", "2", "--format", "csv").stdout)))
    assert {row["id"]: int(row["session"]) for row in rows if row["role"] == "paper"} == sessions
    assert {row["label"] for row in rows} == {", ".join(session["label"]) for session in plan["sessions"]}

    for name in ("points.csv", "points.json"):
        result = hostile("map", "--n", "3", "--seed", "2", "--out", name)
        assert result.exit_code == 0, result.output
    points = json.loads((workdir / "points.json").read_text(encoding="utf-8"))
    assert points["projection"] == "PCA"
    assert {point["id"]: point["session"] for point in points["points"]} == sessions
    table = list(csv.DictReader(io.StringIO((workdir / "points.csv").read_text(encoding="utf-8"))))
    assert [(row["id"], float(row["x"]), float(row["y"]), int(row["session"])) for row in table] == [
        (p["id"], p["x"], p["y"], p["session"]) for p in points["points"]]
    assert len({(p["x"], p["y"]) for p in points["points"]}) == len(OUTPUT_PAPERS)
    assert not list(workdir.glob(".points*"))


# ---------------------------------------------------------------- indexes in machine formats


def test_indexes_give_bytes_and_full_path_as_info_does(built, workdir):
    info = json.loads(built("info", "--format", "json").stdout)
    listed = json.loads(built("indexes", "--format", "json").stdout)
    row = next(csv.DictReader(io.StringIO(built("indexes", "--format", "csv").stdout)))
    assert listed[0]["bytes"] == int(row["bytes"]) == info["bytes"] > 0
    assert listed[0]["path"] == row["path"] == str(workdir / "indexes" / "default") == os.path.abspath(info["path"])
    table = built("indexes").stdout
    size = re.search(r"size:\s+(.*)", built("info").stdout).group(1)
    assert size in table.splitlines()[2]
