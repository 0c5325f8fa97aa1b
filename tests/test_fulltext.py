"""Papers without abstracts: the text of a Zotero library's items from the full texts Zotero
extracted (`.zotero-ft-cache`), else their PDFs, else their titles alone; a .bib's `file` field; a
folder of PDFs; damaged, encrypted and image-only PDFs skipped in one line; each kind counted by the
build and shown. PDFs are real ones written by tests/pdfs.py; the Zotero database is made from
Zotero's schema."""

import json
import os
import sqlite3
from pathlib import Path

from conftest import FIXTURES
from pdfs import paper_pdf, pdf_bytes

TYPES = {"attachment": 3, "book": 7, "bookSection": 8, "journalArticle": 22, "report": 34, "thesis": 41}
FIELDS = {"title": 1, "abstractNote": 2, "date": 6}
ARTICLE = "Private training with gradient clipping protects each example of the data set."
CACHED = ("Sparse Attention\nA. Author\nAbstract\nWe make attention sparse by routing each token to a few "
          "others, cutting the cost of long sequences from quadratic to linear while keeping accuracy.\n"
          "1 Introduction\nTransformers are everywhere.")
IN_PDF = ("We bound the mixing time of random walks on expander graphs by their spectral gap and show the "
          "bound is tight for Ramanujan graphs.")
ITEMS = [  # key, type, fields, attachment (key, file name, full text cached, PDF bytes)
    ("ARTI0001", "journalArticle", {"title": "Private Training", "abstractNote": ARTICLE}, None),
    ("BOOK0001", "book", {"title": "Sparse Attention Explained"}, ("ATTB0001", "book.pdf", CACHED, None)),
    ("CHAP0001", "bookSection", {"title": "Mixing of Random Walks"}, ("ATTC0001", "chapter.pdf", None, "paper")),
    ("THES0001", "thesis", {"title": "A Thesis Never Scanned"}, None),
    ("REPT0001", "report", {"title": "A Report Under Lock"}, ("ATTR0001", "report.pdf", None, "encrypted")),
    ("NOTI0001", "report", {"date": "2020"}, None),  # no title: not a paper
    ("ALON0001", "attachment", {"title": "scan0042.pdf"}, ("ALON0001", "scan0042.pdf", None, "alone")),
]


def make_library(folder: Path) -> Path:
    path = folder / "zotero.sqlite"
    database = sqlite3.connect(path)
    database.executescript((FIXTURES / "zotero-schema.sql").read_text())
    database.execute("INSERT INTO version VALUES ('userdata', 129)")
    database.execute("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (1, 'user', 1, 1)")
    database.executemany("INSERT INTO itemTypesCombined VALUES (?, ?, 1, 0)", [(i, n) for n, i in TYPES.items()])
    database.executemany("INSERT INTO fieldsCombined VALUES (?, ?, NULL, NULL, 0)", [(i, n) for n, i in FIELDS.items()])
    database.executemany("INSERT INTO creatorTypes VALUES (?, ?)", [(8, "author")])
    next_id = len(ITEMS) + 1
    for item_id, (key, kind, fields, attachment) in enumerate(ITEMS, start=1):
        database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, ?, 1, ?)",
                         (item_id, TYPES[kind], key))
        for name, value in fields.items():
            value_id = database.execute("INSERT INTO itemDataValues (value) VALUES (?)", (value,)).lastrowid
            database.execute("INSERT INTO itemData VALUES (?, ?, ?)", (item_id, FIELDS[name], value_id))
        if attachment is None:
            continue
        attachment_key, name, cached, pdf = attachment
        storage = folder / "storage" / attachment_key
        storage.mkdir(parents=True)
        if cached:
            (storage / ".zotero-ft-cache").write_text(cached)
        if pdf == "paper":
            paper_pdf(storage / name, fields["title"], IN_PDF)
        elif pdf == "alone":
            paper_pdf(storage / name, "Expanders Without Metadata", IN_PDF.replace("mixing", "cover"),
                      metadata_title="Expanders Without Metadata")
        elif pdf == "encrypted":
            (storage / name).write_bytes(pdf_bytes([["A secret report with enough words to be text."]],
                                                   encrypted=True))
        if kind == "attachment":
            parent, attachment_id = None, item_id
        else:
            parent, attachment_id = item_id, next_id
            next_id += 1
            database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, ?, 1, ?)",
                             (attachment_id, TYPES["attachment"], attachment_key))
        database.execute("INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) "
                         "VALUES (?, ?, 0, 'application/pdf', ?)", (attachment_id, parent, f"storage:{name}"))
    # Collections: one all of whose items became papers, one partly, one whose only item has no title.
    database.executemany("INSERT INTO collections (collectionID, collectionName, parentCollectionID, libraryID, key) "
                         "VALUES (?, ?, NULL, 1, ?)", [(1, "Books", "COLL0001"), (2, "Mixed", "COLL0002"),
                                                      (3, "Unreadable", "COLL0003")])
    database.executemany("INSERT INTO collectionItems VALUES (?, ?, 0)", [(1, 2), (1, 4), (2, 1), (2, 6), (3, 6)])
    database.commit()
    database.close()
    return path


def every_file(folder: Path) -> dict:
    return {str(path): (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_every_titled_item_of_a_library_is_a_paper_with_its_kind_of_text(workdir, run):
    folder = workdir / "Zotero"
    folder.mkdir()
    library = make_library(folder)
    before = every_file(folder)
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("indexed 6 papers")
    assert "1 with abstracts, 1 from full texts, 2 from PDFs, 2 title only" in result.stdout
    assert "report.pdf: PDF encrypted" in result.stderr and "read by its title only" in result.stderr
    assert every_file(folder) == before  # nothing of Zotero's written, not even a time changed
    listed = {row["id"]: row for row in json.loads(run("list", "--format", "json").stdout)}
    assert sorted(listed) == ["ALON0001", "ARTI0001", "BOOK0001", "CHAP0001", "REPT0001", "THES0001"]
    kinds = {key: json.loads(run("show", key, "--format", "json").stdout) for key in listed}
    assert {key: paper["text_from"] for key, paper in kinds.items()} == {
        "ARTI0001": "abstract", "BOOK0001": "full text", "CHAP0001": "pdf", "ALON0001": "pdf",
        "THES0001": "title only", "REPT0001": "title only"}
    assert kinds["BOOK0001"]["abstract"].startswith("We make attention sparse")
    assert "Transformers are everywhere" not in kinds["BOOK0001"]["abstract"]  # the abstract, not the body
    assert kinds["CHAP0001"]["abstract"] == IN_PDF
    assert kinds["ALON0001"]["title"] == "Expanders Without Metadata"  # its file name gave way to its own
    assert kinds["THES0001"]["abstract"] == ""
    shown = run("show", "THES0001").stdout
    assert "title only" in shown


def test_collections_whose_items_are_not_all_papers_are_listed_with_why(workdir, run):
    from serving import start_server

    folder = workdir / "Zotero"
    folder.mkdir()
    built = run("build", str(make_library(folder)))
    assert built.exit_code == 0, built.output
    listed = {row["tag"]: row for row in json.loads(run("tags", "--format", "json").stdout)}
    assert listed["Books"]["papers"] == ["BOOK0001", "THES0001"] and "left_out" not in listed["Books"]
    assert (listed["Mixed"]["papers"], listed["Mixed"]["left_out"]) == (["ARTI0001"], {"have no title": 1})
    assert (listed["Unreadable"]["papers"], listed["Unreadable"]["left_out"]) == ([], {"have no title": 1})
    table = run("tags").stdout
    assert "1 of 2 items; 1 have no title" in table and "0 of 1 items; 1 have no title" in table
    refused = run("like", "--tag", "Unreadable")
    assert (refused.exit_code, refused.stderr) == (1, "Error: collection 'Unreadable' holds no papers (0 of 1 items; 1 "
                                                      "have no title): give its items titles in the library and build "
                                                      "again, or tag some papers\n")
    index_dir = Path(built.stdout.split(" in ", 1)[1].split(": ", 1)[0])
    server = start_server(index_dir)
    try:
        status, _, page = server.get("/tags")
        assert status == 200 and "Unreadable</a> (0 papers: <span class=\"items-note\">0 of 1 items; 1 have no title" in page.decode()
        status, _, page = server.get("/tags/Mixed")
        assert status == 200 and "Of the library's collection: 1 of 2 items; 1 have no title." in page.decode().replace("&#39;", "'")
        status, _, page = server.get("/paper/THES0001")
        assert status == 200 and "title only: no abstract or full text was read" in page.decode()
        status, _, page = server.get("/paper/BOOK0001")
        assert status == 200 and "From its full text" in page.decode()
    finally:
        server.stop()


def test_a_folder_of_pdfs_builds_and_skips_what_it_cannot_read(workdir, run):
    folder = workdir / "pdfs"
    folder.mkdir()
    paper_pdf(folder / "walks.pdf", "Mixing of Random Walks", IN_PDF)
    paper_pdf(folder / "doi.pdf", "Graph Sparsifiers", "We sparsify graphs by sampling edges by resistance "
              "and keep every cut within a small factor. doi: 10.5555/sparse.2020")
    (folder / "damaged.pdf").write_bytes((folder / "walks.pdf").read_bytes()[:400])
    (folder / "locked.pdf").write_bytes(pdf_bytes([["Words enough to be a text layer, under a password."]],
                                                  encrypted=True))
    (folder / "scan.pdf").write_bytes(pdf_bytes([["x"]], image_only=True))
    (folder / "huge.pdf").write_bytes(b"%PDF-1.4\n")
    os.truncate(folder / "huge.pdf", 300 * 1024 * 1024)  # sparse: no disk used
    (folder / "again").mkdir()
    paper_pdf(folder / "again" / "walks.pdf", "Cover Times of Random Walks", IN_PDF.replace("mixing", "cover"))
    result = run("build", str(folder))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("indexed 3 papers") and "3 from PDFs" in result.stdout
    # Files are read in order (again/walks.pdf first): the second walks.pdf takes its folder's name too.
    assert "pdfs/walks.pdf: another PDF is named 'walks.pdf' too: its ID is 'pdfs/walks'" in result.stderr
    for name, why in (("damaged", "damaged"), ("locked", "encrypted"), ("scan", "no text"), ("huge", "300 MB")):
        lines = [line for line in result.stderr.splitlines() if f"{name}.pdf" in line]
        assert len(lines) == 1 and why in lines[0] and "left out" in lines[0], result.stderr
    listed = {row["id"]: row for row in json.loads(run("list", "--format", "json").stdout)}
    assert sorted(listed) == ["10.5555/sparse.2020", "pdfs/walks", "walks"]


def test_a_bib_file_field_gives_the_text_of_its_pdf(workdir, run):
    (workdir / "papers").mkdir()
    paper_pdf(workdir / "papers" / "walks.pdf", "Mixing of Random Walks", IN_PDF)
    (workdir / "library.bib").write_text(
        "@article{walks, title = {Mixing of Random Walks}, file = {:papers/walks.pdf:PDF}}\n"
        f"@book{{abs, title = {{Absolute}}, file = {{Full Text:{workdir / 'papers' / 'walks.pdf'}:application/pdf}}}}\n"
        "@article{gone, title = {A Missing File}, file = {:papers/none.pdf:PDF}}\n"
        "@article{latex, title = {Single {\\textbackslash}emph\\{single\\}}, abstract = {M{\\\"u}ller's "
        "{\\textbackslash}emph\\{single\\} method of G\\o{}ran.}}\n")
    result = run("build", str(workdir / "library.bib"))
    assert result.exit_code == 0, result.output
    assert "1 with abstracts, 2 from PDFs, 1 title only" in result.stdout
    shown = {key: json.loads(run("show", key, "--format", "json").stdout) for key in ("walks", "abs", "gone", "latex")}
    assert shown["walks"]["abstract"] == IN_PDF and shown["walks"]["text_from"] == "pdf"
    assert shown["gone"]["text_from"] == "title only"
    assert shown["latex"]["abstract"] == "Müller's \\emph\\{single\\} method of Gøran."
    markdown = run("show", "latex", "--format", "markdown").stdout
    assert "textbackslash" not in markdown and "emph" in markdown


def test_a_full_text_gives_its_abstract_else_its_opening():
    from recommender.corpus.fulltext import abstract_of

    assert abstract_of(CACHED).startswith("We make attention sparse") and "Transformers" not in abstract_of(CACHED)
    body = "A body with no heading. " * 200
    opening = abstract_of(body)
    assert opening.startswith("A body with no heading.") and len(opening) <= 2000 and opening.endswith(".")


def test_without_the_pdf_library_papers_are_read_by_their_titles_with_one_line(workdir, monkeypatch):
    import sys
    import warnings

    from recommender.corpus import fulltext
    from recommender.corpus.papers import read_papers

    monkeypatch.setitem(sys.modules, "pypdfium2", None)  # `import pypdfium2` raises ImportError
    monkeypatch.setattr(fulltext, "_said", set())
    for name in ("a", "b"):
        paper_pdf(workdir / f"{name}.pdf", f"Paper {name.upper()} on Walks", IN_PDF)
    (workdir / "library.bib").write_text("@book{a, title = {Paper A on Walks}, file = {:a.pdf:PDF}}\n"
                                         "@book{b, title = {Paper B on Walks}, file = {:b.pdf:PDF}}\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        papers = read_papers([workdir / "library.bib"])
        with_pdfs = read_papers([workdir / "library.bib", workdir / "a.pdf"])
    assert [paper.text_from for paper in papers] == ["title only", "title only"] and len(with_pdfs) == 2
    said = [str(warning.message) for warning in caught]
    assert len(said) == 2 and all("pip install pypdfium2" in line for line in said), said
