"""A Zotero library read in place: its `zotero.sqlite` (`papers build zotero:` finds the default
profile's, as Zotero does on Linux, macOS and Windows).

Each regular item is a paper: title, abstract, creators (authors, else editors), date, DOI or
URL, item type and citation key (Zotero 7's `citationKey` field, else Better BibTeX's key from
its `better-bibtex.sqlite` beside the database, else none). Notes, attachments, annotations
and items in the trash are not papers. The item's collections (as paths, `Thesis/Related
work`) and tags are its categories.

The database is never written, locked or waited for: it is copied into memory with SQLite's
backup API over a read-only connection that gives up at once when Zotero holds the database
(Zotero locks it exclusively while it runs); then the file is read as immutable, and the copy
is kept only when the file did not change while it was read (else read again)."""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path
from urllib.parse import quote

from ...errors import InputError
from .base import InputWarning, Record
from .zotero_attachments import attachments

NAME = "Zotero"
# The userdata schema versions this reader knows (Zotero 5.0 to 7).
KNOWN_SCHEMA = range(80, 130)
NOT_PAPERS = ("note", "attachment", "annotation")
# Zotero item type -> BibTeX entry type (as Better BibTeX exports them).
ENTRY_TYPES = {
    "journalArticle": "article",
    "magazineArticle": "article",
    "newspaperArticle": "article",
    "conferencePaper": "inproceedings",
    "book": "book",
    "bookSection": "incollection",
    "thesis": "phdthesis",
    "report": "techreport",
    "preprint": "misc",
    "manuscript": "unpublished",
}
VENUE_FIELDS = (
    "publicationTitle",
    "proceedingsTitle",
    "conferenceName",
    "bookTitle",
    "repository",
    "university",
    "institution",
    "websiteTitle",
    "publisher",
)
# Zotero fields kept for BibTeX as Better BibTeX names them.
BIBTEX_FIELDS = {
    "DOI": "doi",
    "volume": "volume",
    "issue": "number",
    "pages": "pages",
    "publisher": "publisher",
    "place": "address",
    "ISBN": "isbn",
    "ISSN": "issn",
}
READ_ATTEMPTS = 3


def default_database() -> Path:
    """Where Zotero keeps its database: the data directory a profile's prefs.js names, else
    `~/Zotero` (Zotero's default on every system)."""
    home = Path.home()
    if sys.platform == "darwin":
        profiles = home / "Library" / "Application Support" / "Zotero" / "Profiles"
    elif sys.platform == "win32":
        profiles = (
            Path(os.environ.get("APPDATA", home / "AppData" / "Roaming"))
            / "Zotero"
            / "Zotero"
            / "Profiles"
        )
    else:
        profiles = home / ".zotero" / "zotero"
    for prefs in sorted(profiles.glob("*/prefs.js")) if profiles.is_dir() else []:
        try:
            text = prefs.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = re.search(
            r'user_pref\("extensions\.zotero\.dataDir",\s*"((?:[^"\\]|\\.)*)"\)', text
        )
        if found and 'user_pref("extensions.zotero.useDataDir", false)' not in text:
            return Path(found.group(1).encode().decode("unicode_escape")) / "zotero.sqlite"
    return home / "Zotero" / "zotero.sqlite"


def _snapshot(path: Path):
    """An in-memory copy of the database as it is at one moment, the file untouched."""
    import sqlite3

    uri = "file:" + quote(str(path.resolve()))
    memory = sqlite3.connect(":memory:")
    try:
        source = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=0, isolation_level=None)
        try:
            # A read transaction first: it fails at once when Zotero holds the lock (the backup
            # itself would wait for it, forever), and the copy is then of that one moment.
            source.execute("BEGIN")
            source.execute("SELECT count(*) FROM sqlite_master").fetchone()
            source.backup(memory)
            return memory
        finally:
            source.close()
    except sqlite3.Error:
        pass  # held by Zotero (an exclusive lock): read the file as it is on disk
    for _ in range(READ_ATTEMPTS):
        before = _state(path)
        try:
            source = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)
            try:
                source.backup(memory)
            finally:
                source.close()
        except sqlite3.DatabaseError as error:
            if _state(path) == before:
                memory.close()
                raise InputError(
                    f"{path}: cannot be read as a Zotero database ({error}): give zotero.sqlite"
                ) from None
            continue
        if _state(path) == before:
            return memory
    memory.close()
    raise InputError(
        f"{path}: Zotero kept changing the database while it was read: try again in a moment"
    )


def _state(path: Path) -> tuple:
    """What changes when Zotero writes: the file's size and time, and its write-ahead log's."""
    out: list[tuple[int, int] | None] = []
    for name in (path, path.with_name(path.name + "-wal")):
        try:
            stat = name.stat()
            out.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def read(path: Path) -> list[Record]:
    """Every paper of the library, as records."""
    import sqlite3

    if not path.is_file():
        raise InputError(f"{path}: no such Zotero database: give the path of zotero.sqlite")
    database = _snapshot(path)
    try:
        tables = {
            row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        needed = {"items", "itemData", "itemDataValues", "creators", "itemCreators", "creatorTypes"}
        if not needed <= tables:
            raise InputError(
                f"{path}: not a Zotero database (no {', '.join(sorted(needed - tables))} table): "
                "give zotero.sqlite"
            )
        version = _schema_version(database, tables)
        if version not in KNOWN_SCHEMA:
            warnings.warn(
                f"{path}: from a Zotero version whose database schema ({version}) is not known to"
                f" papers (it knows {KNOWN_SCHEMA.start} to {KNOWN_SCHEMA.stop - 1}): read as far"
                " as it goes",
                InputWarning,
                stacklevel=2,
            )
        return _records(path, database, tables)
    except sqlite3.Error as error:
        raise InputError(
            f"{path}: cannot be read as a Zotero database ({error}): give zotero.sqlite"
        ) from None
    finally:
        database.close()


def _schema_version(database, tables: set[str]) -> int | None:
    if "version" not in tables:
        return None
    row = database.execute("SELECT version FROM version WHERE schema = 'userdata'").fetchone()
    return int(row[0]) if row else None


def _records(path: Path, database, tables: set[str]) -> list[Record]:
    types = "itemTypesCombined" if "itemTypesCombined" in tables else "itemTypes"
    fields = "fieldsCombined" if "fieldsCombined" in tables else "fields"
    trash = "LEFT JOIN deletedItems d ON d.itemID = i.itemID" if "deletedItems" in tables else ""
    not_trashed = "AND d.itemID IS NULL" if trash else ""
    items = database.execute(
        f"SELECT i.itemID, i.key, t.typeName FROM items i JOIN {types} t ON t.itemTypeID ="
        f" i.itemTypeID {trash} WHERE t.typeName NOT IN ({', '.join('?' * len(NOT_PAPERS))})"
        f" {not_trashed} ORDER BY i.itemID",
        NOT_PAPERS,
    ).fetchall()
    files, alone = attachments(database, tables, path.parent)
    items = sorted(items + _pdfs_alone(database, tables, alone))
    values: dict[int, dict[str, str]] = {}
    for item_id, name, value in database.execute(
        f"SELECT d.itemID, f.fieldName, v.value FROM itemData d JOIN {fields} f ON f.fieldID ="
        " d.fieldID JOIN itemDataValues v ON v.valueID = d.valueID"
    ):
        values.setdefault(item_id, {})[name] = value if isinstance(value, str) else str(value)
    creators: dict[int, list[tuple[str, str]]] = {}
    for item_id, kind, first, last, mode in database.execute(
        "SELECT ic.itemID, ct.creatorType, c.firstName, c.lastName, c.fieldMode FROM itemCreators"
        " ic JOIN creators c ON c.creatorID = ic.creatorID JOIN creatorTypes ct ON ct.creatorTypeID"
        " = ic.creatorTypeID ORDER BY ic.itemID, ic.orderIndex"
    ):
        name = (last or "") if mode == 1 else " ".join(part for part in (first, last) if part)
        if name.strip():
            creators.setdefault(item_id, []).append((kind, name.strip()))
    collections = _collections(database, tables)
    tags: dict[int, list[str]] = {}
    if {"itemTags", "tags"} <= tables:
        for item_id, name in database.execute(
            "SELECT it.itemID, t.name FROM itemTags it JOIN tags t "
            "ON t.tagID = it.tagID ORDER BY it.itemID, t.name"
        ):
            tags.setdefault(item_id, []).append(name)
    better_bibtex = _better_bibtex_keys(path)
    records = []
    for item_id, key, type_name in items:
        data = values.get(item_id, {})
        people = creators.get(item_id, [])
        authors = [name for kind, name in people if kind == "author"] or [
            name for kind, name in people if kind == "editor"
        ]
        doi = data.get("DOI", "").strip()
        url = data.get("url", "").strip() or (f"https://doi.org/{doi}" if doi else "")
        found = re.search(r"(?<!\d)(\d{4})(?!\d)", data.get("date", ""))
        citation_key = data.get("citationKey", "").strip() or better_bibtex.get(key, "")
        extra: dict[str, object] = {
            "entry_type": ENTRY_TYPES.get(type_name, "misc"),
            "citation_key": citation_key,
            "collections": collections.get(item_id, ()),
            "bibtex_fields": tuple(
                (BIBTEX_FIELDS[name], value)
                for name, value in data.items()
                if name in BIBTEX_FIELDS and value.strip()
            ),
        }
        fields_of = {
            "id": key,
            "title": data.get("title"),
            "abstract": data.get("abstractNote"),
            "authors": authors,
            "year": found.group(1) if found else None,
            "venue": next((data[name] for name in VENUE_FIELDS if data.get(name, "").strip()), ""),
            "url": url,
        }
        label = f"{path} item {key}"
        extra["text_from"] = _text_from(fields_of, files.get(item_id), label)
        records.append(
            Record(
                fields_of,
                f"{path}:{key}",
                label,
                bulk=True,
                categories=tuple(collections.get(item_id, ()) + tuple(tags.get(item_id, ()))),
                extra=extra,
            )
        )
    return records


def _pdfs_alone(database, tables: set[str], alone: set[int]) -> list[tuple]:
    """The PDFs kept with no parent item, not in the trash, as (itemID, key, "attachment")."""
    if not alone:
        return []
    trashed = set()
    if "deletedItems" in tables:
        trashed = {row[0] for row in database.execute("SELECT itemID FROM deletedItems")}
    return [
        row
        for row in database.execute(
            "SELECT itemID, key, 'attachment' FROM items ORDER BY itemID"
        ).fetchall()
        if row[0] in alone and row[0] not in trashed
    ]


def _text_from(fields_of: dict, files, label: str) -> str | None:
    """What the item's text is; its abstract filled in from its files where it has none
    (corpus/fulltext.py)."""
    from ..fulltext import complete

    return complete(
        fields_of, files.full_texts if files else [], files.pdfs if files else [], label
    )


def _collections(database, tables: set[str]) -> dict[int, tuple[str, ...]]:
    """Each item's collections as paths ("Thesis/Related work"), collections in the trash left
    out."""
    if not {"collections", "collectionItems"} <= tables:
        return {}
    deleted = set()
    if "deletedCollections" in tables:
        deleted = {
            row[0] for row in database.execute("SELECT collectionID FROM deletedCollections")
        }
    rows = {
        cid: (name, parent)
        for cid, name, parent in database.execute(
            "SELECT collectionID, collectionName, parentCollectionID FROM collections"
        )
    }

    def path_of(cid: int) -> str | None:
        names, seen = [], set()
        while cid is not None and cid not in seen:
            if cid in deleted or cid not in rows:
                return None
            seen.add(cid)
            name, cid = rows[cid]
            names.append(name.replace("/", "∕"))  # a slash in a name is not a level
        return "/".join(reversed(names))

    out: dict[int, list[str]] = {}
    for cid, item_id in database.execute(
        "SELECT collectionID, itemID FROM collectionItems ORDER BY collectionID"
    ):
        collection_path = path_of(cid)
        if collection_path:
            out.setdefault(item_id, []).append(collection_path)
    return {item_id: tuple(sorted(paths)) for item_id, paths in out.items()}


def _better_bibtex_keys(path: Path) -> dict[str, str]:
    """Better BibTeX's citation keys by item key, from `better-bibtex.sqlite` beside the
    database."""
    import sqlite3

    beside = path.with_name("better-bibtex.sqlite")
    if not beside.is_file():
        return {}
    try:
        database = _snapshot(beside)
        try:
            return {
                item_key: citation_key
                for item_key, citation_key in database.execute(
                    "SELECT itemKey, citationKey FROM citationkey"
                )
                if item_key and citation_key
            }
        finally:
            database.close()
    except (InputError, sqlite3.Error) as error:
        warnings.warn(
            f"{beside}: Better BibTeX's citation keys cannot be read ({error}): items keep"
            " Zotero's own",
            InputWarning,
            stacklevel=3,
        )
        return {}
