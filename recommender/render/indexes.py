"""`papers indexes`: the indexes in the home folder, as a table, JSON, CSV or Markdown."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .tables import human_size, render

TABLE_COLUMNS = ("name", "papers", "model", "size", "built_at", "problem")
# The machine formats: the size in bytes and the index's full path.
DATA_COLUMNS = ("name", "path", "papers", "model", "bytes", "built_at", "problem")


def render_indexes(summaries: Sequence, home: str, fmt: str) -> str:
    if fmt in ("json", "jsonl"):
        rows = [summary.to_dict() for summary in summaries]
        if fmt == "jsonl":
            return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return render([summary.to_dict() for summary in summaries], DATA_COLUMNS, "csv")
    if not summaries and fmt == "table":
        return f"no indexes in {home}: build one with `papers build my-papers.bib`\n"
    rows = []
    for summary in summaries:
        row = summary.to_dict()
        row["size"] = human_size(summary.bytes)
        row["papers"] = "" if summary.papers is None else summary.papers
        rows.append(row)
    columns = [c for c in TABLE_COLUMNS if c != "problem" or any(s.problem for s in summaries)]
    text = render(rows, columns, fmt, {c: 0 for c in columns})
    return f"indexes in {home}\n{text}" if fmt == "table" else text


def render_cache(summary: dict, fmt: str) -> str:
    """`papers cache info`: the embedding cache's path, size and entries, and what else the cache
    folder keeps (JSON: the same object)."""
    if fmt == "json":
        return json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    lines = [
        f"embedding cache: {summary['path']}",
        f"size:    {human_size(summary['bytes'])} ({summary['bytes']:,} bytes)",
        f"entries: {summary['entries']:,} vectors",
        f"also kept in {summary['folder']} (each made again when needed):",
    ]
    width = max(len(kind["folder"]) for kind in summary["kept"]) + 1
    for kind in summary["kept"]:
        lines.append(
            f"  {kind['folder'] + '/':<{width}}  {kind['entries']:>3,}  "
            f"{human_size(kind['bytes']):>9}  {kind['holds']}"
        )
    return "\n".join(lines) + "\n"


def render_cache_cleared(summary: dict) -> str:
    if summary.get("damaged"):
        return (
            f"the embedding cache {summary['path']} was damaged ({summary['damaged']}): "
            f"started it afresh, empty ({human_size(summary['bytes_before'])} -> "
            f"{human_size(summary['bytes'])})\n"
        )
    return (
        f"removed {summary['removed']:,} vectors from the embedding cache {summary['path']} "
        f"({human_size(summary['bytes_before'])} -> {human_size(summary['bytes'])})\n"
    )


def render_build_summary(report) -> str:
    """A build's one line (index.build.BuildReport): what it indexed, encoded and reused, and, for a
    rebuild that changed any, how many papers it added, changed and removed (a rebuild of the same
    papers says nothing more)."""
    line = (
        f"indexed {report.papers} papers in {report.index_dir}: "
        f"encoded {report.encoded}, reused {report.reused} from the cache "
        f"({report.index_kind} search)"
    )
    kinds = dict(report.text_from)
    if set(kinds) - {"abstract"}:  # only where some text is not an abstract
        words = {
            "abstract": "with abstracts",
            "full text": "from full texts",
            "pdf": "from PDFs",
            "title only": "title only",
        }
        line += "; " + ", ".join(f"{count} {words[kind]}" for kind, count in kinds.items())
    changes = report.changes
    if changes is not None and (changes.added or changes.changed or changes.removed):
        line += (
            f"; since the last build {len(changes.added)} added, "
            f"{len(changes.changed)} changed, {len(changes.removed)} removed"
        )
    return line + "\n"


def render_build_changes(report) -> str:
    """A rebuild's changes paper by paper: one line each for the IDs added, changed and removed, the
    first SHOWN_CHANGES of each and how many more (a whole new corpus is not listed)."""
    changes = report.changes
    if changes is None:
        return ""
    lines = []
    kinds = (("added", changes.added), ("changed", changes.changed), ("removed", changes.removed))
    for kind, ids in kinds:
        if ids:
            more = f" and {len(ids) - SHOWN_CHANGES:,} more" if len(ids) > SHOWN_CHANGES else ""
            lines.append(f"{kind}: {', '.join(ids[:SHOWN_CHANGES])}{more}\n")
    return "".join(lines)


SHOWN_CHANGES = 10  # IDs of each kind a rebuild's report names
