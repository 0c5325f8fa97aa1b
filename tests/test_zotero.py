"""A Zotero library read in place: a real zotero.sqlite made from Zotero's schema (the tables of
tests/fixtures/zotero-schema.sql) with items of several types, creators, collections, tags,
notes, attachments, an annotation and the trash; read while another connection holds it
locked as Zotero does, never written."""

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import FIXTURES

TYPES = {"annotation": 1, "attachment": 3, "book": 7, "conferencePaper": 11, "journalArticle": 22, "note": 28,
         "preprint": 31}
FIELDS = {"title": 1, "abstractNote": 2, "date": 6, "url": 13, "DOI": 59, "publicationTitle": 38,
          "proceedingsTitle": 69, "pages": 32, "volume": 19, "repository": 122, "citationKey": 125, "publisher": 8}
CREATOR_TYPES = {"author": 8, "editor": 10}

ITEMS = [  # (key, type, fields, creators as (type, first, last, fieldMode))
    ("ABCD2345", "journalArticle",
     {"title": "Private Training at Scale", "abstractNote": "We train large models with differential privacy and "
      "per-example gradient clipping.", "date": "2023-05-01 2023-05-01", "DOI": "10.5555/priv.2023",
      "publicationTitle": "Journal of Privacy", "volume": "4", "pages": "101-120"},
     [("author", "Jane", "Smith", 0), ("author", "", "OpenAI Team", 1)]),
    ("EFGH6789", "conferencePaper",
     {"title": "Gated Linear Recurrences", "abstractNote": "Gated linear recurrences match attention on long "
      "sequences at a fraction of the cost.", "date": "2024", "proceedingsTitle": "Proceedings of ICML 2024",
      "url": "https://example.org/glr"},
     [("author", "Ana", "Lee", 0)]),
    ("JKLM2345", "preprint",
     {"title": "Light Spanners of Planar Graphs", "abstractNote": "Every planar graph has a light spanner, found "
      "in linear time with separators.", "date": "2022-11", "repository": "arXiv", "citationKey": "lee2022light",
      "url": "https://arxiv.org/abs/2211.00001"},
     [("author", "Bo", "Cruz", 0)]),
    ("NOAB3456", "book", {"title": "Deep Learning", "date": "2016"}, [("editor", "Ian", "Goodfellow", 0)]),
    ("NOTE2345", "note", {}, []),
    ("ATTA2345", "attachment", {"title": "Full Text PDF"}, []),
    ("ANNO2345", "annotation", {}, []),
    ("TRSH2345", "journalArticle",
     {"title": "A Trashed Paper", "abstractNote": "This item is in the trash and is not a paper of the library."},
     [("author", "Ida", "Berg", 0)]),
]


def make_library(path: Path, version: int = 129) -> Path:
    """A zotero.sqlite as Zotero writes one, from the schema's tables."""
    database = sqlite3.connect(path)
    database.executescript((FIXTURES / "zotero-schema.sql").read_text())
    database.execute("INSERT INTO version VALUES ('userdata', ?)", (version,))
    database.execute("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (1, 'user', 1, 1)")
    database.executemany("INSERT INTO itemTypesCombined VALUES (?, ?, 1, 0)", [(i, n) for n, i in TYPES.items()])
    database.executemany("INSERT INTO fieldsCombined VALUES (?, ?, NULL, NULL, 0)", [(i, n) for n, i in FIELDS.items()])
    database.executemany("INSERT INTO creatorTypes VALUES (?, ?)", [(i, n) for n, i in CREATOR_TYPES.items()])
    values: dict[str, int] = {}
    for item_id, (key, kind, fields, creators) in enumerate(ITEMS, start=1):
        database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, ?, 1, ?)",
                         (item_id, TYPES[kind], key))
        for name, value in fields.items():
            if value not in values:
                values[value] = len(values) + 1
                database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (?, ?)", (values[value], value))
            database.execute("INSERT INTO itemData VALUES (?, ?, ?)", (item_id, FIELDS[name], values[value]))
        for order, (role, first, last, mode) in enumerate(creators):
            found = database.execute("SELECT creatorID FROM creators WHERE firstName = ? AND lastName = ?",
                                     (first, last)).fetchone()
            creator = found[0] if found else database.execute(
                "INSERT INTO creators (firstName, lastName, fieldMode) VALUES (?, ?, ?)", (first, last, mode)).lastrowid
            database.execute("INSERT INTO itemCreators VALUES (?, ?, ?, ?)", (item_id, creator, CREATOR_TYPES[role], order))
    database.execute("INSERT INTO itemNotes VALUES (5, 1, '<p>My notes on privacy</p>', 'My notes')")
    database.execute("INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) "
                     "VALUES (6, 1, 0, 'application/pdf', 'storage:paper.pdf')")
    database.execute("INSERT INTO itemAnnotations (itemID, parentItemID, type, text, sortIndex, position, isExternal) "
                     "VALUES (7, 6, 1, 'highlighted', '00000|000000|00000', '{}', 0)")
    database.execute("INSERT INTO deletedItems (itemID) VALUES (8)")
    database.executemany("INSERT INTO collections (collectionID, collectionName, parentCollectionID, libraryID, key) "
                         "VALUES (?, ?, ?, 1, ?)", [(1, "Thesis", None, "COLL0001"), (2, "Related work", 1, "COLL0002"),
                                                    (3, "Old", None, "COLL0003")])
    database.execute("INSERT INTO deletedCollections (collectionID) VALUES (3)")
    database.executemany("INSERT INTO collectionItems VALUES (?, ?, 0)", [(2, 1), (2, 3), (1, 2), (3, 2)])
    database.execute("INSERT INTO tags (tagID, name) VALUES (1, 'to-read')")
    database.execute("INSERT INTO itemTags VALUES (2, 1, 0)")
    database.commit()
    database.close()
    return path


@pytest.fixture
def library(workdir):
    folder = workdir / "Zotero"
    folder.mkdir()
    return make_library(folder / "zotero.sqlite")


def shown(run, paper_id):
    result = run("show", paper_id, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def everything_in(folder: Path) -> dict:
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(folder.iterdir())}


def test_a_library_is_read_in_place(workdir, run, library):
    before = everything_in(library.parent)
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("indexed 4 papers")  # the book without an abstract: by its title
    assert "3 with abstracts, 1 title only" in result.stdout
    assert everything_in(library.parent) == before  # nothing written beside it, the database unchanged
    listed = json.loads(run("list", "--format", "json").stdout)
    assert [row["id"] for row in listed] == ["ABCD2345", "EFGH6789", "JKLM2345", "NOAB3456"]  # no note, attachment, trash
    paper = shown(run, "ABCD2345")
    assert (paper["title"], paper["authors"], paper["year"], paper["venue"], paper["url"], paper["entry_type"]) == (
        "Private Training at Scale", ["Jane Smith", "OpenAI Team"], 2023, "Journal of Privacy",
        "https://doi.org/10.5555/priv.2023", "article")
    assert paper["categories"] == ["Thesis/Related work"]
    assert shown(run, "EFGH6789")["categories"] == ["Thesis", "to-read"]  # the trashed collection left out
    assert shown(run, "JKLM2345")["citation_key"] == "lee2022light"
    related = json.loads(run("list", "--where", "category=Thesis/Related work", "--format", "json").stdout)
    assert [row["id"] for row in related] == ["ABCD2345", "JKLM2345"]
    bib = run("related-work", "ABCD2345", "-k", "2", "--format", "bibtex").stdout
    assert "@article{smith2023private," in bib and "doi = {10.5555/priv.2023}" in bib
    assert "@misc{lee2022light," in bib and "@inproceedings{lee2024gated," in bib


def test_read_while_zotero_holds_it_locked(workdir, run, library):
    """Zotero keeps its database under an exclusive lock while it runs: the build reads it anyway,
    without waiting, writing or taking a lock that would stop Zotero's next write."""
    zotero = sqlite3.connect(library, timeout=0)
    zotero.execute("PRAGMA locking_mode=EXCLUSIVE")
    zotero.execute("BEGIN EXCLUSIVE")
    zotero.execute("UPDATE items SET synced = 1")
    zotero.commit()  # the exclusive lock stays held, as Zotero holds it
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            sqlite3.connect(f"file:{library}?mode=ro", uri=True, timeout=0).execute("SELECT 1 FROM items").fetchone()
        result = run("build", str(library))
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("indexed 4 papers")
        zotero.execute("UPDATE items SET synced = 0")  # Zotero writes on, unblocked
        zotero.commit()
    finally:
        zotero.close()


def test_read_while_zotero_writes_in_wal_mode(workdir, run, library):
    zotero = sqlite3.connect(library, timeout=0)
    zotero.execute("PRAGMA journal_mode=WAL")
    zotero.execute("BEGIN IMMEDIATE")
    zotero.execute("UPDATE items SET synced = 1")  # a write under way, not committed
    try:
        result = run("build", str(library))
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("indexed 4 papers")
        zotero.commit()  # not blocked by the read
    finally:
        zotero.close()


def test_the_default_profile_is_found(workdir, run, monkeypatch, library):
    monkeypatch.setenv("HOME", str(workdir))
    result = run("build", "zotero:")
    assert result.exit_code == 0, result.output
    # A data directory set in Zotero's settings (Linux profile) wins over ~/Zotero.
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    library.rename(elsewhere / "zotero.sqlite")
    profile = workdir / ".zotero" / "zotero" / "abcd1234.default"
    profile.mkdir(parents=True)
    (profile / "prefs.js").write_text(f'user_pref("extensions.zotero.dataDir", "{elsewhere}");\n'
                                      'user_pref("extensions.zotero.useDataDir", true);\n')
    assert run("build", "zotero:", "--index", "other").exit_code == 0
    (profile / "prefs.js").unlink()
    missing = run("build", "zotero:", "--index", "third")
    assert (missing.exit_code, missing.stderr) == (
        1, f"Error: zotero: no Zotero database at {workdir / 'Zotero' / 'zotero.sqlite'}: "
           "give the path of your zotero.sqlite\n")


def test_an_unknown_schema_is_named_in_one_line(workdir, run):
    (workdir / "z").mkdir()
    library = make_library(workdir / "z" / "zotero.sqlite", version=400)
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    assert (f"warning: {library}: from a Zotero version whose database schema (400) is not known to papers "
            "(it knows 80 to 129): read as far as it goes\n") in result.stderr


def test_not_a_zotero_database(workdir, run):
    other = workdir / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    result = run("build", str(other))
    assert result.exit_code == 1 and result.stderr.startswith(f"Error: {other}: not a Zotero database (no ")
    (workdir / "text.sqlite").write_text("a text file, not a database\n" * 100)
    result = run("build", "text.sqlite")
    assert (result.exit_code, result.stderr) == (1, "Error: text.sqlite: cannot be read "
                                                    "as a database (file is not a database): give the path of "
                                                    "Zotero's database\n")


def test_better_bibtex_keys_beside_the_database(workdir, run, library):
    keys = sqlite3.connect(library.parent / "better-bibtex.sqlite")
    keys.execute("CREATE TABLE citationkey (itemID INTEGER PRIMARY KEY, itemKey TEXT NOT NULL, libraryID INTEGER "
                 "NOT NULL, citationKey TEXT NOT NULL, pinned INTEGER DEFAULT 0)")
    keys.execute("INSERT INTO citationkey VALUES (2, 'EFGH6789', 1, 'LeeGated2024', 0)")
    keys.commit()
    keys.close()
    assert run("build", str(library)).exit_code == 0
    assert shown(run, "EFGH6789")["citation_key"] == "LeeGated2024"
    assert shown(run, "JKLM2345")["citation_key"] == "lee2022light"  # Zotero 7's own field first


# ------------------------------------------------------------------ collections as tags of the index

def test_collections_are_tags_of_the_index(workdir, run, library):
    assert run("build", str(library)).exit_code == 0
    listed = json.loads(run("tags", "--format", "json").stdout)
    assert {row["tag"]: row["papers"] for row in listed} == {
        "Thesis": ["EFGH6789"], "Thesis/Related work": ["ABCD2345", "JKLM2345"]}  # the trashed "Old" left out
    liked = json.loads(run("like", "--tag", "Thesis/Related work", "--format", "json").stdout)
    assert [row["id"] for row in liked] == ["EFGH6789", "NOAB3456"]  # the collection's papers left out
    # The user's own tagging and marks under a collection's name add to it, and outlive a rebuild.
    assert run("tags", "add", "Thesis/Related work", "EFGH6789").exit_code == 0
    assert run("tags", "seen", "Thesis", "ABCD2345").exit_code == 0
    refused = run("tags", "remove", "Thesis/Related work", "ABCD2345")
    assert (refused.exit_code, refused.stderr) == (1, (
        "Error: paper ABCD2345 is in the collection 'Thesis/Related work' of the library this index was built "
        "from: take it out of the collection there and rebuild\n"))
    database = sqlite3.connect(library)
    database.execute("DELETE FROM collectionItems WHERE collectionID = 2 AND itemID = 3")
    database.commit()
    database.close()
    assert run("build", str(library)).exit_code == 0
    listed = json.loads(run("tags", "--format", "json").stdout)
    assert {row["tag"]: (row["papers"], row["seen"]) for row in listed} == {
        "Thesis": (["EFGH6789"], ["ABCD2345"]), "Thesis/Related work": (["ABCD2345", "EFGH6789"], [])}


def test_a_tag_name_is_any_printable_path(workdir, run, library):
    assert run("build", str(library)).exit_code == 0
    assert run("tags", "add", "Reading group: week 3 (théorie)", "ABCD2345").exit_code == 0
    for bad in ("", "a\nb", "/Thesis", "Thesis/", "a//b", " padded", "x" * 201):
        result = run("tags", "add", bad, "ABCD2345")
        assert result.exit_code != 0 and "cannot be used: a tag is 1 to 200 printable characters" in result.stderr


def test_collection_tags_in_the_api_and_pages(workdir, run, library):
    from serving import start_server

    built = run("build", str(library))
    assert built.exit_code == 0, built.output
    index_dir = Path(built.stdout.split(" in ", 1)[1].split(": ", 1)[0])
    server = start_server(index_dir)
    try:
        status, listed = server.json("/api/tags")
        assert status == 200 and {"tag": "Thesis/Related work", "papers": ["ABCD2345", "JKLM2345"]} in listed
        status, liked = server.json("/api/tags/Thesis/Related%20work/recommendations")
        assert status == 200 and [row["id"] for row in liked] == ["EFGH6789", "NOAB3456"]
        status, body = server.json("/api/tags?tag=Reading%2Fweek%201&paper=EFGH6789", method="PUT")
        assert (status, body) == (200, {"tag": "Reading/week 1", "papers": ["EFGH6789"]})
        status, body = server.json("/api/marks/not?tag=Thesis%2FRelated%20work&paper=EFGH6789", method="PUT")
        assert (status, body["papers"]) == (200, ["EFGH6789"])
        assert server.json("/api/marks/not/Thesis/Related%20work")[1]["papers"] == ["EFGH6789"]
        status, body = server.json("/api/tags/Reading%2Fweek%201/JKLM2345", method="PUT")
        assert status == 400 and "give it in the query" in body["error"]
        status, body = server.json("/api/marks/seen/Thesis%2FRelated%20work/JKLM2345", method="PUT")
        assert status == 400 and "give it in the query" in body["error"]
        status, _, page = server.get("/tags")
        assert status == 200 and b'href="/tags/Thesis%2FRelated%20work"' in page
        status, _, page = server.get("/tags/Thesis%2FRelated%20work")
        assert status == 200 and "Tag “Thesis/Related work”" in page.decode()
        assert b"Private Training at Scale" in page and b"Light Spanners" in page
        status, _, page = server.get("/?tags=Thesis%2FRelated%20work")
        assert status == 200 and b'<a href="/tags/Thesis%2FRelated%20work">Thesis/Related work</a>' in page
        status, _, page = server.get("/tags/%3Cb%3Ex%3C%2Fb%3E")  # escaped in the page
        assert status == 200 and b"<b>x</b>" not in page and b"&lt;b&gt;x&lt;/b&gt;" in page
    finally:
        server.stop()


def test_a_rebuild_reports_what_changed_in_the_library(workdir, run, library):
    first = run("build", str(library))
    assert first.exit_code == 0 and "since the last build" not in first.stdout
    database = sqlite3.connect(library)
    # Added: a new article; changed: the abstract of EFGH6789; removed: JKLM2345 moved to the trash.
    database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (9, ?, 1, 'NEWW2345')",
                     (TYPES["journalArticle"],))
    for field_name, value_id, value in (("title", 900, "Sparse Attention Revisited"),
                                        ("abstractNote", 901, "Sparse attention patterns recover dense quality.")):
        database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (?, ?)", (value_id, value))
        database.execute("INSERT INTO itemData VALUES (9, ?, ?)", (FIELDS[field_name], value_id))
    database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (902, 'A new abstract about gates.')")
    database.execute("UPDATE itemData SET valueID = 902 WHERE itemID = 2 AND fieldID = ?", (FIELDS["abstractNote"],))
    database.execute("INSERT INTO deletedItems (itemID) VALUES (3)")
    database.commit()
    database.close()
    again = run("build", str(library))
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("indexed 4 papers in ")
    assert again.stdout.endswith("; since the last build 1 added, 1 changed, 1 removed\n")
    assert "added: NEWW2345\nchanged: EFGH6789\nremoved: JKLM2345\n" in again.stderr
    unchanged = run("build", str(library))
    assert unchanged.stdout.endswith("3 with abstracts, 1 title only\n")  # no changes to say
    assert "added:" not in unchanged.stderr and "changed:" not in unchanged.stderr


def test_a_large_change_names_the_first_papers_and_counts_the_rest(workdir, run):
    from corpus import PAPERS, write_corpus

    write_corpus(workdir / "in", PAPERS[:1])
    assert run("build", "in").exit_code == 0
    many = [dict(PAPERS[1], id=f"p{number:02d}", title=f"Paper {number}") for number in range(12)]
    (workdir / "in" / "more.json").write_text(json.dumps(many))
    result = run("build", "in")
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("; since the last build 12 added, 0 changed, 0 removed\n")
    assert "added: p00, p01, p02, p03, p04, p05, p06, p07, p08, p09 and 2 more\n" in result.stderr


def test_a_collection_s_tag_page_in_a_browser(workdir, run, library, browser):
    """The tags page links the collection's page; its "Not interested" button comes back to it; its papers
    show no "remove" button (the collection is the library's), a tag of the user's on the same paper does."""
    from serving import start_server

    built = run("build", str(library))
    index_dir = Path(built.stdout.split(" in ", 1)[1].split(": ", 1)[0])
    server = start_server(index_dir)
    context = browser.new_context()
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    try:
        page.goto(server.url + "tags")
        page.get_by_role("link", name="Thesis/Related work").click()
        page.wait_for_url("**/tags/Thesis%2FRelated%20work")
        assert page.locator("h1").inner_text() == "Tag “Thesis/Related work”"
        assert page.locator("ul.tagged a").all_inner_texts() == ["Private Training at Scale",
                                                                 "Light Spanners of Planar Graphs"]
        page.locator("ol.papers > li").first.locator("form.mark button.not").click()
        page.wait_for_url("**/tags/Thesis%2FRelated%20work")
        assert server.json("/api/marks/not/Thesis/Related%20work")[1]["papers"] == ["EFGH6789"]
        assert page.locator("section.marked.not li").count() == 1
        # The collection's papers cannot be removed here: no "remove" button, on the tag page or theirs
        assert page.locator("ul.tagged form.untag").count() == 0
        assert page.locator("ul.tagged .collection").count() == 2
        assert server.get("/api/tags/mine/ABCD2345", method="PUT")[0] == 200
        page.goto(server.url + "paper/ABCD2345")
        tags = page.locator("ul.tags li")
        assert tags.filter(has_text="Thesis/Related work").locator("form.untag").count() == 0
        assert tags.filter(has_text="mine").locator("form.untag").count() == 1
    finally:
        context.close()
        server.stop()
    assert problems == []


# ------------------------------------------------------------------ a committed snapshot, never the file itself

def files_of(folder: Path) -> dict:
    """Every file of Zotero's folder with its bytes and modification time."""
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(folder.iterdir())}


def titles_read(library: Path) -> dict:
    from recommender.corpus.readers import zotero

    return {record.fields["id"]: record.fields["title"] for record in zotero.read(library)}


COMMITTED = {"ABCD2345": "Private Training at Scale", "EFGH6789": "Gated Linear Recurrences",
             "JKLM2345": "Light Spanners of Planar Graphs", "NOAB3456": "Deep Learning"}
TITLES = "valueID IN (SELECT valueID FROM itemData WHERE fieldID = 1)"
# A Zotero that writes: a transaction whose pages spill into the file (a cache of a few pages and a
# megabyte of new rows), then it waits to be killed. argv: the database, the journal mode, what to
# commit first ("" for nothing), then whether to keep the exclusive lock.
WRITER = f"""
import sqlite3, sys, time
database = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0)
database.execute(f"PRAGMA journal_mode={{sys.argv[2]}}")
database.execute("PRAGMA wal_autocheckpoint=0")
if sys.argv[4] == "exclusive":
    database.execute("PRAGMA locking_mode=EXCLUSIVE")
if sys.argv[3]:
    database.execute("UPDATE itemDataValues SET value = ? || value WHERE {TITLES}", (sys.argv[3],))
database.execute("PRAGMA cache_size=2")
database.execute("BEGIN EXCLUSIVE")
database.execute("UPDATE itemDataValues SET value = 'UNCOMMITTED ' || value WHERE {TITLES}")
database.execute("CREATE TABLE filler (x)")
database.execute("INSERT INTO filler SELECT randomblob(2000) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
                 "SELECT i + 1 FROM n WHERE i < 600) SELECT i FROM n)")
print("ready", flush=True)
time.sleep(600)
"""


def start_writer(library: Path, mode: str, commit: str = "", lock: str = ""):
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", WRITER, str(library), mode, commit, lock],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    return process


def kill(process) -> None:
    """SIGKILL, as a crash or a force-quit ends Zotero."""
    process.kill()
    process.wait()
    process.stdout.close()


def test_a_hot_journal_of_a_killed_zotero_is_rolled_back_in_the_copy(workdir, run, library):
    """Zotero killed mid-transaction leaves its changed pages in the file and the old ones in a hot
    journal: what is read is the committed state, and the journal stays for Zotero to roll back."""
    kill(start_writer(library, "DELETE"))
    journal = library.with_name("zotero.sqlite-journal")
    assert journal.stat().st_size > 0 and b"UNCOMMITTED" in library.read_bytes()  # the pages spilled
    before = files_of(library.parent)
    assert titles_read(library) == COMMITTED
    (workdir / "link.sqlite").symlink_to(library)  # the journal is beside the file the link names
    assert titles_read(workdir / "link.sqlite") == COMMITTED
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    assert shown(run, "ABCD2345")["title"] == "Private Training at Scale"
    assert files_of(library.parent) == before  # the hot journal untouched, nothing beside it


@pytest.mark.parametrize("lock", ["exclusive", "killed"])
def test_a_wal_is_read_with_its_committed_changes_only(workdir, run, library, lock):
    """Zotero in WAL mode: changes committed since the last checkpoint are read (from the log),
    a transaction under way is not, whether Zotero holds its exclusive lock or was killed."""
    writer = start_writer(library, "WAL", commit="New: ", lock="exclusive" if lock == "exclusive" else "")
    try:
        if lock == "killed":
            kill(writer)
        assert b"New: " not in library.read_bytes()  # only in the log
        before = files_of(library.parent)
        assert titles_read(library) == {key: f"New: {title}" for key, title in COMMITTED.items()}
        result = run("build", str(library))
        assert result.exit_code == 0, result.output
        assert files_of(library.parent) == before
    finally:
        kill(writer)


# A Zotero starting and writing again and again: BEGIN EXCLUSIVE with no busy timeout, every title given
# the transaction's number; counts how often it was refused. argv: the database, the file that stops it, and
# the pause between transactions (seconds).
STARTING = f"""
import os, sqlite3, sys, time
database = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0)
tries = refused = 0
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):
    tries += 1
    try:
        database.execute("BEGIN EXCLUSIVE")
    except sqlite3.OperationalError:
        refused += 1
        continue
    database.execute("UPDATE itemDataValues SET value = printf('v%d %s', ?, substr(value, instr(value, ' ') + 1))"
                     " WHERE {TITLES}", (tries,))
    database.execute("COMMIT")
    time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0.005)
print(tries, refused, flush=True)
"""


def test_a_zotero_starting_during_the_read_is_never_refused(workdir, library):
    """Reads while Zotero takes its exclusive lock again and again (no busy timeout): Zotero is
    never refused, and each read is one committed state (every title of one transaction)."""
    import subprocess
    import sys
    import time

    database = sqlite3.connect(library)
    database.execute(f"UPDATE itemDataValues SET value = 'v0 ' || value WHERE {TITLES}")
    database.commit()
    database.close()
    stop = workdir / "stop"
    zotero = subprocess.Popen([sys.executable, "-c", STARTING, str(library), str(stop)], stdout=subprocess.PIPE,
                              text=True)
    assert zotero.stdout.readline() == "ready\n"
    versions = []
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            titles = titles_read(library)
            assert len({title.split()[0] for title in titles.values()}) == 1, titles  # one transaction's
            versions.append(next(iter(titles.values())).split()[0])
    finally:
        stop.touch()
        tries, refused = map(int, zotero.communicate(timeout=60)[0].split())
    assert tries > 100 and refused == 0, (tries, refused)
    assert len(set(versions)) > 5  # the reads saw Zotero's writes go on


def test_a_library_zotero_never_stops_writing_is_one_line(workdir, run, library, monkeypatch):
    """Copies are made again while the files change; a bounded number of times, then one line."""
    from recommender.corpus.readers import snapshot

    import tempfile

    states = iter(range(1000))
    monkeypatch.setattr(snapshot, "_states", lambda path: (next(states),))
    monkeypatch.setattr(snapshot.time, "sleep", lambda seconds: None)
    # Temporary folders of this test's own, so that another run's snapshot in /tmp is not counted.
    private = workdir / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    result = run("build", str(library))
    assert (result.exit_code, result.stderr) == (1, (
        f"Error: {library}: Zotero kept writing to the database while it was read: try again in a moment, "
        "or close Zotero first\n"))
    assert list(private.iterdir()) == []  # the snapshot's copies removed


# ------------------------------------------------------------------ whose papers, and odd bytes and tables

def add_item(database, item_id: int, key: str, library_id: int, title: str, abstract: str, **fields) -> None:
    database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, ?, ?, ?)",
                     (item_id, TYPES["journalArticle"], library_id, key))
    for number, (name, value) in enumerate({"title": title, "abstractNote": abstract, **fields}.items()):
        value_id = item_id * 10 + number
        database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (?, ?)", (value_id, value))
        database.execute("INSERT INTO itemData VALUES (?, ?, ?)", (item_id, FIELDS[name], value_id))


def test_feed_items_are_left_out_and_groups_are_their_own_collections(workdir, run, library):
    database = sqlite3.connect(library)
    database.executemany("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (?, ?, 1, 1)",
                         [(2, "group"), (3, "feed")])
    database.execute("INSERT INTO groups VALUES (4711, 2, 'Lab/ML', '', 0)")
    database.execute("INSERT INTO feeds (libraryID, name, url) VALUES (3, 'arXiv cs.LG', 'https://arxiv.org/rss')")
    add_item(database, 20, "FEED2345", 3, "A Feed Item", "An abstract from an RSS feed, not a paper of the user.")
    database.execute("INSERT INTO feedItems (itemID, guid) VALUES (20, 'oai:arXiv.org:1')")
    # A group item with the key of one of the user's items, in one of the group's collections.
    add_item(database, 21, "ABCD2345", 2, "Group Reading on Privacy", "A group's copy of a paper on privacy.",
             citationKey="smith2023private")
    database.execute("INSERT INTO collections (collectionID, collectionName, libraryID, key) "
                     "VALUES (9, 'Reading', 2, 'COLL0009')")
    database.execute("INSERT INTO collectionItems VALUES (9, 21, 0)")
    database.commit()
    database.close()
    before = files_of(library.parent)
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    listed = json.loads(run("list", "--format", "json").stdout)
    assert [row["id"] for row in listed] == ["ABCD2345", "EFGH6789", "JKLM2345", "NOAB3456", "group4711-ABCD2345"]
    group = shown(run, "group4711-ABCD2345")
    assert (group["title"], group["categories"]) == ("Group Reading on Privacy",
                                                     ["Groups/Lab∕ML", "Groups/Lab∕ML/Reading"])
    assert shown(run, "ABCD2345")["title"] == "Private Training at Scale"  # the user's own
    tags = {row["tag"]: row["papers"] for row in json.loads(run("tags", "--format", "json").stdout)}
    assert tags["Groups/Lab∕ML/Reading"] == ["group4711-ABCD2345"] and "Thesis" in tags
    mine = run("build", str(library), "--where", "category!=Groups/*", "--index", "mine")  # groups left out
    assert mine.exit_code == 0 and mine.stdout.startswith("indexed 4 papers"), mine.output
    assert files_of(library.parent) == before


def test_one_bad_byte_is_one_replaced_character(workdir, run, library):
    database = sqlite3.connect(library)
    for table, column, where in (("itemDataValues", "value", "value = 'Gated Linear Recurrences'"),
                                 ("creators", "lastName", "lastName = 'Lee'"),
                                 ("collections", "collectionName", "collectionID = 1"),
                                 ("tags", "name", "tagID = 1")):
        database.execute(f"UPDATE {table} SET {column} = CAST(X'436166E9' || CAST({column} AS BLOB) AS TEXT) "
                         f"WHERE {where}")  # "Caf\xe9" + the value: Latin-1, not UTF-8
    database.commit()
    database.close()
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    paper = shown(run, "EFGH6789")
    assert (paper["title"], paper["authors"]) == ("Caf\ufffdGated Linear Recurrences", ["Ana Caf\ufffdLee"])
    assert paper["categories"] == ["Caf\ufffdThesis", "Caf\ufffdto-read"]


def test_a_table_a_newer_zotero_changed_is_left_out_with_one_warning(workdir, run, library):
    database = sqlite3.connect(library)
    database.execute("ALTER TABLE creators RENAME COLUMN fieldMode TO nameMode")  # a newer shape
    database.execute("DROP TABLE collectionItems")
    database.execute("CREATE TABLE collectionItems (collectionID INT, itemKey TEXT)")
    database.commit()
    database.close()
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("indexed 4 papers")  # the book by its title
    warning = next(line for line in result.stderr.splitlines() if "left out" in line)
    assert warning.startswith(f"warning: {library}: from a Zotero whose database papers cannot read whole; left "
                              "out: creators (no such column: c.fieldMode); collections' items (no such column: "
                              "itemID)")
    assert shown(run, "ABCD2345")["title"] == "Private Training at Scale"


@pytest.mark.parametrize("written", ["as UTF-8", "escaped"])
def test_a_data_directory_with_letters_beyond_ascii(workdir, run, monkeypatch, library, written):
    monkeypatch.setenv("HOME", str(workdir))
    elsewhere = workdir / "Bibliothèque Zoë 📚"
    elsewhere.mkdir()
    library.rename(elsewhere / "zotero.sqlite")
    name = str(elsewhere) if written == "as UTF-8" else json.dumps(str(elsewhere))[1:-1]  # \u00e8, surrogates
    assert (written == "escaped") == ("\\ud83d\\udcda" in name)
    profile = workdir / ".zotero" / "zotero" / "abcd1234.default"
    profile.mkdir(parents=True)
    (profile / "prefs.js").write_text(f'user_pref("extensions.zotero.dataDir", "{name}");\n', encoding="utf-8")
    result = run("build", "zotero:")
    assert result.exit_code == 0, result.output


def test_odd_collection_names_still_become_tags(workdir, run, library):
    long_name = "A folder of papers on the privacy of training data " * 3  # 3 levels: over 200 characters
    database = sqlite3.connect(library)
    database.executemany("INSERT INTO collections (collectionID, collectionName, parentCollectionID, libraryID, key) "
                         "VALUES (?, ?, ?, 1, ?)", [(4, long_name, None, "COLL0004"), (5, long_name, 4, "COLL0005"),
                                                    (6, "Last level", 5, "COLL0006"),
                                                    (7, "Evil\u202eftp.exe\x07 bell", None, "COLL0007")])
    database.executemany("INSERT INTO collectionItems VALUES (?, ?, 0)", [(6, 1), (7, 2)])
    database.commit()
    database.close()
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    assert (f"warning: {library}: collection names made tag names: 1 with control, text-direction or other "
            "invisible characters (left out), 1 over 200 characters (shortened, e.g. 'A folder of") in result.stderr
    tags = {row["tag"]: row["papers"] for row in json.loads(run("tags", "--format", "json").stdout)}
    assert tags["Evilftp.exe bell"] == ["EFGH6789"]
    long_tag = next(tag for tag in tags if tag.startswith("A folder"))
    assert len(long_tag) <= 200 and "… (" in long_tag and tags[long_tag] == ["ABCD2345"]
    liked = run("like", "--tag", long_tag, "--format", "json")
    assert liked.exit_code == 0, liked.output


def test_items_sharing_a_citation_key_get_letters_as_bibtex_tools_give(workdir, run, library):
    import shutil
    import subprocess

    database = sqlite3.connect(library)
    database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (801, 'smith2023')")
    database.executemany("INSERT INTO itemData VALUES (?, ?, 801)", [(item, FIELDS["citationKey"]) for item in (1, 2)])
    database.commit()
    database.close()
    result = run("build", str(library))
    assert result.exit_code == 0, result.output
    assert (f"warning: {library}: 1 item(s) share a citation key with another item and were given a letter after "
            "it: smith2023a (EFGH6789)\n") in result.stderr
    assert [shown(run, key)["citation_key"] for key in ("ABCD2345", "EFGH6789")] == ["smith2023", "smith2023a"]
    bib = run("related-work", "ABCD2345", "-k", "2", "--format", "bibtex").stdout
    assert "@article{smith2023," in bib and "@inproceedings{smith2023a," in bib
    if shutil.which("bibtex"):
        (workdir / "refs.bib").write_text(bib)
        (workdir / "min.bst").write_text("ENTRY { title } {} {}\nREAD\n")
        (workdir / "doc.aux").write_text("\\citation{*}\n\\bibdata{refs}\n\\bibstyle{min}\n")
        done = subprocess.run(["bibtex", "-terse", "doc"], cwd=workdir, capture_output=True, text=True)
        assert done.returncode < 2 and "Repeated entry" not in done.stdout, done.stdout


def test_a_daily_sync_does_not_add_a_duplicate_item_again(workdir, run, library):
    """A library holding one paper twice (the same DOI, a second item retitled): the build keeps it
    once, and `add --sync` of the same library adds nothing, the second item's key naming it."""
    database = sqlite3.connect(library)
    database.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (9, ?, 1, 'DUPL2345')",
                     (TYPES["journalArticle"],))
    for field_name, value_id, value in (("title", 900, "Private training at scale (preprint)"),
                                        ("abstractNote", 901, "Differentially private training of large models.")):
        database.execute("INSERT INTO itemDataValues (valueID, value) VALUES (?, ?)", (value_id, value))
        database.execute("INSERT INTO itemData VALUES (9, ?, ?)", (FIELDS[field_name], value_id))
    doi = database.execute("SELECT valueID FROM itemDataValues WHERE value = '10.5555/priv.2023'").fetchone()[0]
    database.execute("INSERT INTO itemData VALUES (9, ?, ?)", (FIELDS["DOI"], doi))
    database.commit()
    database.close()
    assert run("build", str(library)).exit_code == 0
    synced = run("add", str(library), "--sync", "--no-compact")
    assert synced.exit_code == 0, synced.output
    assert synced.stdout.startswith("added 0 papers") and "removed 0 gone from it" in synced.stdout
    assert shown(run, "DUPL2345")["id"] == "ABCD2345"
