"""Readers of paper files, one module a format; `read_records` picks one by the
file's extension and, for .json and .jsonl, by what the records hold.

    .txt    seed text (a heading, then one abstract a paragraph)   seed_text
    .csv    our columns (id, title, abstract, ...) or the names
            conference and library tools write (UID, keywords)    tabular
    .bib    BibTeX                                                 bibtex
    .sqlite a Zotero database (named, never found in a folder)     zotero
    .pdf    one paper, its text from its first pages               pdf
    .jsonl  JSON lines; .json a JSON document or JSON lines:
            our own records                                        own_json
            the arXiv metadata snapshot                            arxiv
            OpenAlex works                                         openalex
            Semantic Scholar papers                                semantic_scholar
            CSL-JSON (Zotero)                                      csl_json
            OpenReview notes (API v1 and v2, a venue's notes by ID) openreview
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ...errors import InputError
from .base import InputWarning, Record, decode, iter_lines, parse_json_line

__all__ = ["InputWarning", "Record", "SUPPORTED_SUFFIXES", "read_records"]

SUPPORTED_SUFFIXES = (".txt", ".jsonl", ".csv", ".json", ".bib", ".pdf")

# The format modules are imported on the first read, not with this package: every
# command imports it (through corpus.papers), and `papers like` reads no file.


def _json_formats() -> tuple:
    """The JSON formats' modules, in the order they are tried: our own takes what the others do not
    claim."""
    from . import arxiv, csl_json, openalex, openreview, own_json, semantic_scholar

    return (openreview, semantic_scholar, openalex, arxiv, csl_json, own_json)


def read_records(path: Path) -> Iterator[Record]:
    """Every record of one file (raises InputError naming the file and record)."""
    suffix = path.suffix.lower()
    if suffix == ".sqlite":
        from . import zotero

        yield from zotero.read(path)
        return
    if suffix == ".pdf":
        from . import pdf

        yield from pdf.read(path)
        return
    if suffix in (".jsonl", ".json"):
        yield from _read_json(path, lines=suffix == ".jsonl")
        return
    from . import bibtex, seed_text, tabular

    text = decode(path)
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    if suffix == ".txt":
        yield from seed_text.read(path, text)
    elif suffix == ".bib":
        yield from bibtex.read(path, text)
    else:
        yield from tabular.read(path, text)


def json_format(data: dict):
    return next(module for module in _json_formats() if module.looks_like(data))


def _read_json(path: Path, lines: bool) -> Iterator[Record]:
    numbered = iter_lines(path)
    first = next(numbered, None)
    if first is None:
        raise InputError(f"{path}: file is empty")
    if not lines:
        # A .json file is one document, unless its first line is a whole object
        # (the arXiv snapshot is JSON lines named .json).
        try:
            lines = isinstance(json.loads(first[1]), dict) and next(numbered, None) is not None
        except (ValueError, RecursionError):
            lines = False
        numbered.close()
        if lines:
            numbered = iter_lines(path)
            first = next(numbered)
    if lines:
        yield from _json_lines(path, first, numbered)
    else:
        yield from _json_document(path)


def _json_lines(
    path: Path, first: tuple[int, str], numbered: Iterator[tuple[int, str]]
) -> Iterator[Record]:
    from . import own_json

    fmt = reader = None
    for number, line in _chain(first, numbered):
        data = parse_json_line(path, number, line)
        if fmt is None:
            fmt = json_format(data) if isinstance(data, dict) else own_json
            reader = own_json.Reader() if fmt is own_json else fmt
        if not isinstance(data, dict):
            raise InputError(
                f"{path} line {number}: expected {fmt.DESCRIPTION}, got {type(data).__name__}"
            )
        assert reader is not None  # set with fmt, on the first line
        yield reader.record(data, f"{path}:{number}")
    if isinstance(reader, own_json.Reader):
        reader.finish(path)


def _chain(first, rest):
    yield first
    yield from rest


def _json_document(path: Path) -> Iterator[Record]:
    from . import own_json

    text = decode(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path} line {error.lineno}: not valid JSON ({error.msg}): fix the file"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    if isinstance(data, dict):
        from . import openreview

        # An OpenAlex page; a Semantic Scholar search page; an OpenReview API answer.
        for key in ("results", "data", "notes"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            data = list(data.values()) if openreview.looks_like_notes_by_id(data) else [data]
    if not isinstance(data, list):
        raise InputError(
            f"{path}: expected a JSON array of papers (or an object holding them), got"
            f" {type(data).__name__}"
        )
    fmt = next((json_format(item) for item in data if isinstance(item, dict)), own_json)
    reader = own_json.Reader() if fmt is own_json else fmt
    for number, item in enumerate(data, start=1):
        source = f"{path} item {number}"
        if item is None and fmt is not own_json:  # the batch APIs answer null for an unknown paper
            yield Record({}, source, bulk=True)
            continue
        if not isinstance(item, dict):
            raise InputError(f"{source}: expected {fmt.DESCRIPTION}, got {type(item).__name__}")
        yield reader.record(item, source)
    if isinstance(reader, own_json.Reader):
        reader.finish(path)
