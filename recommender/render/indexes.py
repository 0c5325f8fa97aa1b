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
        row["size"] = size_text(summary.bytes)
        row["papers"] = "" if summary.papers is None else summary.papers
        rows.append(row)
    columns = [c for c in COLUMNS if c != "problem" or any(s.problem for s in summaries)]
    text = render(rows, columns, fmt, {c: 0 for c in columns})
    return f"indexes in {home}\n{text}" if fmt == "table" else text


def size_text(size: int) -> str:
    """A byte count as people read it (1.2 MB, 436.9 MB)."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
