"""A Zotero library read in place: its `zotero.sqlite` (`papers build zotero:` finds the default
profile's, as Zotero does on Linux, macOS and Windows).

Each regular item is a paper: title, abstract, creators (authors, else editors), date, DOI or
URL, item type and citation key (Zotero 7's `citationKey` field, else Better BibTeX's key from
its `better-bibtex.sqlite` beside the database, else none). Notes, attachments, annotations
and items in the trash are not papers. The item's collections (as paths, `Thesis/Related
work`) and tags are its categories.

Items of the user's own library are read; items of group libraries are read as the collections
`Groups/NAME/...` (IDs `group<groupID>-<key>`, which no item of the user's can have); the items
of RSS feeds are not papers.

The database is never opened with SQLite, so it is never written, locked or waited for: it is
copied with its journal or write-ahead log into a private folder and read there as SQLite
recovers it, a committed state (see `snapshot`). A text value that is not UTF-8 is read with
U+FFFD for its bad bytes; a table or column a newer Zotero changed is left out with one warning
naming it, the rest read. A 3,000-item library of 22 MB is read in 0.08 to 0.10 s of CPU,
against 0.08 to 0.09 s when the database was opened in place (the copy takes 0.01 s, where
SQLite's backup into memory took 0.03 s; a shared machine, the best of 21 reads)."""

from __future__ import annotations

import itertools
import os
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError, caller_stacklevel
from .base import InputWarning, Record
from .snapshot import committed_copy
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
MAX_TAG = 200  # characters of a collection path (reading.tags.MAX_TAG: what a tag may be)


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
            return Path(_js_string(found.group(1))) / "zotero.sqlite"
    return home / "Zotero" / "zotero.sqlite"


def _js_string(body: str) -> str:
    """The text of a JavaScript string literal's body as prefs.js holds it (UTF-8, with escapes
    such as \\uXXXX, surrogate pairs included, \\xXX, \\n and \\\\)."""
    simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}

    def one(found: re.Match) -> str:
        escape = found.group(1)
        if escape[0] in "ux" and len(escape) > 1:
            return chr(int(escape[1:], 16))
        return simple.get(escape, escape)

    text = re.sub(r"\\(u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|.)", one, body, flags=re.S)
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def read(path: Path) -> list[Record]:
    """Every paper of the library, as records."""
    import sqlite3

    if not path.is_file():
        raise InputError(f"{path}: no such Zotero database: give the path of zotero.sqlite")
    with committed_copy(path, NAME) as database:
        try:
            tables = {
                row[0]
                for row in _query(database, "SELECT name FROM sqlite_master WHERE type='table'")
            }
            needed = {"items", "itemData", "itemDataValues"}
            if not needed <= tables:
                raise InputError(
                    f"{path}: not a Zotero database (no {', '.join(sorted(needed - tables))}"
                    " table): give zotero.sqlite"
                )
            version = _schema_version(database, tables)
            if version not in KNOWN_SCHEMA:
                warnings.warn(
                    f"{path}: from a Zotero version whose database schema ({version}) is not"
                    f" known to papers (it knows {KNOWN_SCHEMA.start} to"
                    f" {KNOWN_SCHEMA.stop - 1}): read as far as it goes",
                    InputWarning,
                    stacklevel=caller_stacklevel(),
                )
            return _records(path, database, tables)
        except sqlite3.Error as error:
            raise InputError(
                f"{path}: cannot be read as a Zotero database ({error}): give zotero.sqlite"
            ) from None


def _schema_version(database, tables: set[str]) -> int | None:
    if "version" not in tables:
        return None
    rows = _rows(database, [], "version", "SELECT version FROM version WHERE schema = 'userdata'")
    try:
        return int(rows[0][0]) if rows else None
    except (TypeError, ValueError):
        return None


def _rows(database, skipped: list[str], what: str, sql: str, parameters=()) -> list:
    """The rows of a query on one table, or none when a newer Zotero changed its shape (`what`
    and the reason added to `skipped`, named in one warning)."""
    import sqlite3

    try:
        return _query(database, sql, parameters)
    except sqlite3.Error as error:
        skipped.append(f"{what} ({error})")
        return []


def _query(database, sql: str, parameters=()) -> list:
    """The rows of a query; read again with U+FFFD for bytes that are not UTF-8 when some text
    is not (per value: the rest of the text is kept)."""
    import sqlite3

    try:
        return database.execute(sql, parameters).fetchall()
    except sqlite3.OperationalError as error:
        if not str(error).startswith("Could not decode to UTF-8"):
            raise
    database.text_factory = _text
    try:
        return database.execute(sql, parameters).fetchall()
    finally:
        database.text_factory = str


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _records(path: Path, database, tables: set[str]) -> list[Record]:
    skipped: list[str] = []
    libraries = _libraries(database, tables, skipped)
    items = _items(database, tables, libraries)
    files, alone = attachments(
        lambda sql: _rows(database, skipped, "attachments", sql), tables, path.parent
    )
    items = sorted(items + _pdfs_alone(database, tables, libraries, alone, skipped))
    values = _values(database, tables, skipped)
    creators = _creators(database, tables, skipped)
    collections = _collections(path, database, tables, libraries, items, skipped)
    tags = _tags(database, tables, skipped)
    if skipped:
        warnings.warn(
            f"{path}: from a Zotero whose database papers cannot read whole; left out: "
            + "; ".join(skipped),
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
    data = _ItemData(
        libraries, files, values, creators, collections, tags, _better_bibtex_keys(path)
    )
    records = [_record(path, item, data) for item in items]
    _unique_citation_keys(path, records)
    return records


@dataclass(frozen=True)
class _ItemData:
    """What the database says of its items, by item ID (libraries by library ID; Better BibTeX's
    citation keys by (library ID, item key) and by item key alone)."""

    libraries: dict[int, _Library]
    files: dict  # the attachments' files (`zotero_attachments.attachments`)
    values: dict[int, dict[str, str]]
    creators: dict[int, list[tuple]]
    collections: dict[int, tuple[str, ...]]
    tags: dict[int, list[str]]
    better_bibtex: dict[tuple, str]


def _tags(database, tables: set[str], skipped: list[str]) -> dict[int, list[str]]:
    """Each item's tags, by name."""
    tags: dict[int, list[str]] = {}
    if {"itemTags", "tags"} <= tables:
        for item_id, name in _rows(
            database,
            skipped,
            "tags",
            "SELECT it.itemID, t.name FROM itemTags it JOIN tags t "
            "ON t.tagID = it.tagID ORDER BY it.itemID, t.name",
        ):
            tags.setdefault(item_id, []).append(_text(name))
    return tags


def _record(path: Path, item: tuple, data: _ItemData) -> Record:
    """One item (as `_items` gives it) as a record: its fields, what a BibTeX entry of it needs,
    its collections and tags as categories, and its text filled in from its files."""
    item_id, key, type_name, library_id = item
    values = data.values.get(item_id, {})
    paper_id = data.libraries.get(library_id, _USER).prefix + key
    fields_of = _fields(paper_id, values, data.creators.get(item_id, []))
    citation_key = values.get("citationKey", "").strip() or data.better_bibtex.get(
        (library_id, key), data.better_bibtex.get((None, key), "")
    )
    extra: dict[str, object] = {
        "entry_type": ENTRY_TYPES.get(type_name, "misc"),
        "citation_key": citation_key,
        "collections": data.collections.get(item_id, ()),
        "bibtex_fields": tuple(
            (BIBTEX_FIELDS[name], value)
            for name, value in values.items()
            if name in BIBTEX_FIELDS and value.strip()
        ),
    }
    label = f"{path} item {paper_id}"
    extra["text_from"] = _text_from(fields_of, data.files.get(item_id), label)
    return Record(
        fields_of,
        f"{path}:{paper_id}",
        label,
        bulk=True,
        categories=tuple(data.collections.get(item_id, ()) + tuple(data.tags.get(item_id, ()))),
        extra=extra,
    )


def _fields(paper_id: str, values: dict[str, str], people: list[tuple]) -> dict:
    """An item's fields as a record has them: its authors (else its editors), the year of its
    date, its venue, and its URL (else its DOI's)."""
    authors = [name for kind, name in people if kind == "author"] or [
        name for kind, name in people if kind == "editor"
    ]
    doi = values.get("DOI", "").strip()
    url = values.get("url", "").strip() or (f"https://doi.org/{doi}" if doi else "")
    found = re.search(r"(?<!\d)(\d{4})(?!\d)", values.get("date", ""))
    return {
        "id": paper_id,
        "title": values.get("title"),
        "abstract": values.get("abstractNote"),
        "authors": authors,
        "year": found.group(1) if found else None,
        "venue": next((values[name] for name in VENUE_FIELDS if values.get(name, "").strip()), ""),
        "url": url,
    }


def _pdfs_alone(database, tables: set[str], libraries, alone: set[int], skipped) -> list[tuple]:
    """The PDFs kept with no parent item (papers of the library), as `_items` gives items: those
    in the trash or a feed left out."""
    if not alone:
        return []
    trashed = set()
    if "deletedItems" in tables:
        trashed = {
            row[0] for row in _rows(database, skipped, "trash", "SELECT itemID FROM deletedItems")
        }
    library = "libraryID" if "libraries" in tables else "NULL"
    rows = _rows(database, skipped, "attachments", f"SELECT itemID, key, {library} FROM items")
    return [
        (item_id, _text(key), "attachment", library_id)
        for item_id, key, library_id in rows
        if item_id in alone
        and item_id not in trashed
        and libraries.get(library_id, _USER).kind != "feed"
    ]


def _text_from(fields_of: dict, files, label: str) -> str | None:
    """What the item's text is; its abstract filled in from its files where it has none
    (corpus/fulltext.py)."""
    from ..fulltext import complete

    return complete(
        fields_of, files.full_texts if files else [], files.pdfs if files else [], label
    )


@dataclass(frozen=True)
class _Library:
    kind: str  # "user", "group" or "feed" (libraries.type)
    collection: str = ""  # a group's: "Groups/NAME", the collection all its items are in
    prefix: str = ""  # of its items' IDs: "group<groupID>-"


_USER = _Library("user")


def _libraries(database, tables: set[str], skipped: list[str]) -> dict[int, _Library]:
    """The libraries by ID: the user's, groups (with their names) and feeds."""
    if "libraries" not in tables:
        return {}
    groups = {}
    if "groups" in tables:
        query = "SELECT libraryID, groupID, name FROM groups"
        for library_id, group_id, name in _rows(database, skipped, "group names", query):
            groups[library_id] = (group_id, _text(name))
    out = {}
    query = "SELECT libraryID, type FROM libraries"
    for library_id, kind in _rows(database, skipped, "libraries", query):
        if kind == "group":
            group_id, name = groups.get(library_id, (None, ""))
            number = f"group{group_id}" if isinstance(group_id, int) else f"library{library_id}"
            out[library_id] = _Library("group", f"Groups/{name or number}", f"{number}-")
        else:
            out[library_id] = _Library(_text(kind))
    return out


def _items(database, tables: set[str], libraries: dict[int, _Library]) -> list[tuple]:
    """(itemID, key, type name, libraryID) of every regular item: notes, attachments,
    annotations, the trash and feed items left out."""
    types = "itemTypesCombined" if "itemTypesCombined" in tables else "itemTypes"
    trash = "LEFT JOIN deletedItems d ON d.itemID = i.itemID" if "deletedItems" in tables else ""
    not_trashed = "AND d.itemID IS NULL" if trash else ""
    if "feedItems" in tables:
        not_trashed += " AND i.itemID NOT IN (SELECT itemID FROM feedItems)"
    library = "i.libraryID" if "libraries" in tables else "NULL"
    rows = _query(
        database,
        f"SELECT i.itemID, i.key, t.typeName, {library} FROM items i JOIN {types} t ON"
        f" t.itemTypeID = i.itemTypeID {trash} WHERE t.typeName NOT IN"
        f" ({', '.join('?' * len(NOT_PAPERS))}) {not_trashed} ORDER BY i.itemID",
        NOT_PAPERS,
    )
    return [
        (item_id, _text(key), _text(kind), library)
        for item_id, key, kind, library in rows
        if libraries.get(library, _USER).kind != "feed"
    ]


def _values(database, tables: set[str], skipped: list[str]) -> dict[int, dict[str, str]]:
    fields = "fieldsCombined" if "fieldsCombined" in tables else "fields"
    values: dict[int, dict[str, str]] = {}
    for item_id, name, value in _rows(
        database,
        skipped,
        "fields",
        f"SELECT d.itemID, f.fieldName, v.value FROM itemData d JOIN {fields} f ON f.fieldID ="
        " d.fieldID JOIN itemDataValues v ON v.valueID = d.valueID",
    ):
        values.setdefault(item_id, {})[name] = value if isinstance(value, str) else _text(value)
    return values


def _creators(database, tables: set[str], skipped: list[str]) -> dict[int, list[tuple]]:
    creators: dict[int, list[tuple[str, str]]] = {}
    if not {"creators", "itemCreators", "creatorTypes"} <= tables:
        skipped.append("creators (no creators, itemCreators or creatorTypes table)")
        return creators
    for item_id, kind, first, last, mode in _rows(
        database,
        skipped,
        "creators",
        "SELECT ic.itemID, ct.creatorType, c.firstName, c.lastName, c.fieldMode FROM itemCreators"
        " ic JOIN creators c ON c.creatorID = ic.creatorID JOIN creatorTypes ct ON ct.creatorTypeID"
        " = ic.creatorTypeID ORDER BY ic.itemID, ic.orderIndex",
    ):
        name = (last or "") if mode == 1 else " ".join(part for part in (first, last) if part)
        if isinstance(name, str) and name.strip():
            creators.setdefault(item_id, []).append((kind, name.strip()))
    return creators


def _collections(
    path: Path, database, tables: set[str], libraries: dict[int, _Library], items, skipped
) -> dict[int, tuple[str, ...]]:
    """Each item's collections as paths ("Thesis/Related work"; a group's items are all in
    "Groups/NAME", its collections under it), collections in the trash left out; each path made
    a tag name (`_tag_names`)."""
    out: dict[int, list[tuple[str, ...]]] = {}
    for item_id, _, _, library_id in items:
        group = libraries.get(library_id, _USER).collection
        if group:
            out[item_id] = [tuple(group.split("/", 1))]
    if {"collections", "collectionItems"} <= tables:
        folders = _collection_folders(database, tables, libraries, skipped)
        query = "SELECT collectionID, itemID FROM collectionItems ORDER BY collectionID"
        for cid, item_id in _rows(database, skipped, "collections' items", query):
            folder = folders.get(cid)
            if folder:
                out.setdefault(item_id, []).append(folder)
    names = _tag_names({folders for paths in out.values() for folders in paths}, path)
    return {item_id: tuple(sorted({names[one] for one in paths})) for item_id, paths in out.items()}


def _collection_folders(database, tables, libraries, skipped) -> dict[int, tuple[str, ...] | None]:
    """Each collection's folders, from the top ("Thesis", "Related work"), by collection ID;
    None for one in the trash or under one."""
    deleted = set()
    if "deletedCollections" in tables:
        query = "SELECT collectionID FROM deletedCollections"
        deleted = {row[0] for row in _rows(database, skipped, "trashed collections", query)}
    library = "libraryID" if "libraries" in tables else "NULL"
    query = f"SELECT collectionID, collectionName, parentCollectionID, {library} FROM collections"
    rows = {
        cid: (_text(name), parent, library)
        for cid, name, parent, library in _rows(database, skipped, "collections", query)
    }

    def folders_of(cid: int) -> tuple[str, ...] | None:
        names, seen, library = [], set(), None
        while cid is not None and cid not in seen:
            if cid in deleted or cid not in rows:
                return None
            seen.add(cid)
            name, cid, library = rows[cid]
            names.append(name)
        group = libraries.get(library, _USER).collection
        return tuple((group.split("/", 1) if group else []) + names[::-1])

    return {cid: folders_of(cid) for cid in rows}


def _tag_names(paths: set[tuple[str, ...]], path: Path) -> dict[tuple[str, ...], str]:
    """Each collection path (its folders) as a tag name: "Thesis/Related work", a `/` inside a
    name made `∕`, white space made one space, what is not printable (controls, text-direction
    overrides) left out; a path over MAX_TAG characters shortened visibly ("…") and kept apart
    from others by a digest of the whole. What was cleaned is named in one warning."""
    import hashlib

    names, cleaned, shortened = {}, 0, []
    for folders in paths:
        clean = tuple(_folder(name) for name in folders)
        cleaned += any(not c.isprintable() for c in re.sub(r"\s", " ", "".join(folders)))
        name = "/".join(clean)
        if len(name) > MAX_TAG:
            digest = hashlib.blake2b(name.encode(), digest_size=3).hexdigest()
            name = f"{name[: MAX_TAG - 10].rstrip(' /')}… ({digest})"
            shortened.append(name)
        names[folders] = name
    if cleaned or shortened:
        warnings.warn(
            f"{path}: collection names made tag names: {cleaned} with control, text-direction or"
            f" other invisible characters (left out), {len(shortened)} over {MAX_TAG} characters"
            + (f" (shortened, e.g. '{min(shortened)}')" if shortened else ""),
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
    return names


def _folder(name: str) -> str:
    printable = "".join(c for c in re.sub(r"\s+", " ", name) if c.isprintable())
    return " ".join(printable.split()).replace("/", "∕") or "(unnamed)"


def _better_bibtex_keys(path: Path) -> dict[tuple, str]:
    """Better BibTeX's citation keys by (library ID, item key) and by item key alone, from
    `better-bibtex.sqlite` beside the database."""
    import sqlite3

    beside = path.with_name("better-bibtex.sqlite")
    if not beside.is_file():
        return {}
    try:
        with committed_copy(beside, NAME) as database:
            keys = {}
            for library, item_key, citation_key in database.execute(
                "SELECT libraryID, itemKey, citationKey FROM citationkey ORDER BY libraryID DESC"
            ):
                if item_key and citation_key:
                    keys[(library, item_key)] = keys[(None, item_key)] = citation_key
            return keys
    except (InputError, sqlite3.Error) as error:
        warnings.warn(
            f"{beside}: Better BibTeX's citation keys cannot be read ({error}): items keep"
            " Zotero's own",
            InputWarning,
            stacklevel=caller_stacklevel(),
        )
        return {}


def _unique_citation_keys(path: Path, records: list[Record]) -> None:
    """Citation keys the items share made unique as BibTeX tools do: the first item (the user's
    library before groups) keeps the key, the next ones get "a", "b", ... (never another item's
    key); named in one warning."""
    # A group item's ID holds a "-", which no Zotero item key has: the user's items come first.
    order = sorted(records, key=lambda record: "-" in record.fields["id"])
    taken = {record.extra["citation_key"].casefold() for record in records}
    seen: set[str] = set()
    shared = []
    for record in order:
        key = record.extra["citation_key"]
        if not key:
            continue
        if key.casefold() in seen:
            suffix = next(s for s in _suffixes() if (key + s).casefold() not in taken)
            shared.append(f"{key}{suffix} ({record.fields['id']})")
            key += suffix
            taken.add(key.casefold())
            record.extra["citation_key"] = key
        seen.add(key.casefold())
    if shared:
        warnings.warn(
            f"{path}: {len(shared)} item(s) share a citation key with another item and were"
            f" given a letter after it: {', '.join(shared[:5])}"
            + (f" and {len(shared) - 5} more" if len(shared) > 5 else ""),
            InputWarning,
            stacklevel=caller_stacklevel(),
        )


def _suffixes() -> Iterator[str]:
    """ "a" ... "z", "aa", "ab", ... (as `corpus.citation` gives them)"""
    for length in itertools.count(1):
        for letters in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=length):
            yield "".join(letters)
