"""The files of a Zotero library's items: for each item, the full texts Zotero extracted from its
attachments (`storage/<attachment key>/.zotero-ft-cache`) and its PDFs (stored in that folder,
or linked by an absolute path), and the PDFs kept alone, with no parent item.

Only read: nothing in the data folder is written, and no file is opened here (fulltext.py reads
them when an item has no abstract)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FULL_TEXT_CACHE = ".zotero-ft-cache"
PDF_TYPE = "application/pdf"


@dataclass
class ItemFiles:
    full_texts: list[Path] = field(default_factory=list)
    pdfs: list[Path] = field(default_factory=list)


def attachments(
    query: Callable[[str], list], tables: set[str], data_dir: Path
) -> tuple[dict[int, ItemFiles], set[int]]:
    """Each item's files by item ID (a PDF kept alone is its own item), and the IDs of the PDFs
    kept alone (attachments with no parent: papers of the library). `query` runs a query on the
    database and gives its rows (none when the table's shape is not known)."""
    if not {"itemAttachments", "items"} <= tables:
        return {}, set()
    out: dict[int, ItemFiles] = {}
    alone: set[int] = set()
    rows = query(
        "SELECT a.itemID, a.parentItemID, a.linkMode, a.contentType, a.path, i.key FROM"
        " itemAttachments a JOIN items i ON i.itemID = a.itemID ORDER BY a.itemID"
    )
    for item_id, parent, _mode, content_type, stored, key in rows:
        owner = parent if parent is not None else item_id
        if not isinstance(key, str) or "/" in key or key in ("", ".", ".."):
            continue  # not a key Zotero makes: no folder of the data folder is named by it
        folder = data_dir / "storage" / key
        files = out.setdefault(owner, ItemFiles())
        files.full_texts.append(folder / FULL_TEXT_CACHE)
        if content_type != PDF_TYPE or not isinstance(stored, str):
            continue
        if parent is None:
            alone.add(item_id)
        if stored.startswith("storage:"):
            files.pdfs.append(folder / stored[len("storage:") :])
        elif Path(stored).is_absolute():  # a linked file; "attachments:" paths need Zotero's base
            files.pdfs.append(Path(stored))
    for files in out.values():
        files.full_texts = [path for path in files.full_texts if path.is_file()]
        files.pdfs = [path for path in files.pdfs if path.is_file()]
    return out, alone
