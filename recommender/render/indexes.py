"""`papers indexes`: the indexes in the home folder, as a table or JSON."""

from __future__ import annotations

import json
from typing import Sequence

from .tables import render

COLUMNS = ("name", "papers", "model", "size", "built_at", "problem")


def render_indexes(summaries: Sequence, home: str, fmt: str) -> str:
    if fmt in ("json", "jsonl"):
        rows = [summary.to_dict() for summary in summaries]
        if fmt == "jsonl":
            return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    if not summaries and fmt == "table":
        return f"no indexes in {home}: build one with `papers build my-papers.bib`\n"
    rows = []
    for summary in summaries:
        row = summary.to_dict()
        row["size"] = _size(summary.bytes)
        row["papers"] = "" if summary.papers is None else summary.papers
        rows.append(row)
    columns = [c for c in COLUMNS if c != "problem" or any(s.problem for s in summaries)]
    text = render(rows, columns, fmt, {c: 0 for c in columns})
    return f"indexes in {home}\n{text}" if fmt == "table" else text


def _size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def render_cache(summary: dict, fmt: str) -> str:
    """`papers cache info`: the embedding cache's path, size and entries (JSON: the same object)."""
    if fmt == "json":
        return json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    return (f"embedding cache: {summary['path']}\n"
            f"size:    {_size(summary['bytes'])} ({summary['bytes']:,} bytes)\n"
            f"entries: {summary['entries']:,} vectors\n")


def render_cache_cleared(summary: dict) -> str:
    return (f"removed {summary['removed']:,} vectors from the embedding cache {summary['path']} "
            f"({_size(summary['bytes_before'])} -> {_size(summary['bytes'])})\n")
