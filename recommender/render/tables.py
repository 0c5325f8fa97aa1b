"""Rendering records as a table, JSON, JSON lines, CSV or Markdown."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from ..corpus.text import shorten
from .markdown import md, md_latex, md_link, reference

FORMATS = ("table", "json", "jsonl", "csv", "markdown")
# Display widths of the table; JSON and CSV carry the full text.
LABEL_WIDTH = 28
SNIPPET_WIDTH = 60


def plural(count: int, noun: str) -> str:
    """ "1 paper", "2 papers"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


LIST_SEPARATOR = "; "
"""Joins a list (authors, code links, why terms) in every flat format: table, CSV, Markdown."""

# OWASP's CSV injection rule: a cell a spreadsheet would read as a formula or a command.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def spreadsheet_safe(value) -> str:
    """A CSV cell that no spreadsheet runs (OWASP, "CSV Injection"): a cell starting with `=`, `+`,
    `-`, `@`, a tab or a carriage return gets a leading `'`, which spreadsheets read as "text"
    and do not show; a plain number ("-0.125") is left as it is, since it runs nothing."""
    text = _flat(value)
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_writer(out: TextIO) -> Callable[[Sequence], None]:
    """Writes one CSV row to `out` as every command writes CSV: each cell spreadsheet-safe,
    lists joined with LIST_SEPARATOR."""
    writer = csv.writer(out, lineterminator="\n")
    return lambda row: writer.writerow([spreadsheet_safe(cell) for cell in row])


def write_csv(out: TextIO, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    """A header, then the rows, as `csv_writer` writes them."""
    write = csv_writer(out)
    write(header)
    for row in rows:
        write(row)


def render(
    rows: Sequence[dict],
    columns: Sequence[str],
    fmt: str,
    table_columns: dict[str, int] | None = None,
    width: int | None = None,
) -> str:
    """Rows of plain values in the chosen format. `table_columns` maps column -> display width
    (0: never cut). `width`: the terminal's width, which the table's cut columns then share
    (0: cut nothing, as `--wide`; None: the widths as given)."""
    if fmt == "json":
        return json.dumps(list(rows), indent=2, ensure_ascii=False) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if fmt == "csv":
        buffer = io.StringIO()
        write_csv(buffer, list(columns), ([row.get(key) for key in columns] for row in rows))
        return buffer.getvalue()
    widths = table_columns or {column: 0 for column in columns}
    if fmt == "markdown":
        return markdown_table(rows, list(widths))
    return _table(rows, _fit(rows, widths, width))


def markdown_table(rows: Sequence[dict], columns: Sequence[str], cells: dict | None = None) -> str:
    """A Markdown table; every cell escaped (render.markdown.md), or made by
    `cells[column](row)`."""
    cells = cells or {}
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(cells[c](row) if c in cells else md(_flat(row.get(c))) for c in columns)
            + " |"
        )
    return "\n".join(lines) + "\n"


# A column that is cut to fit the terminal keeps at least this many characters.
MIN_CUT_WIDTH = 12


def _fit(rows: Sequence[dict], widths: dict[str, int], width: int | None) -> dict[str, int]:
    """Widths of the cut columns so that a table line fits `width` characters."""
    if width is None:
        return widths
    if width == 0:
        return {column: 0 for column in widths}
    natural = {c: max([len(c)] + [len(_flat(row.get(c))) for row in rows]) for c in widths}
    cut = [c for c, w in widths.items() if w]
    fixed = sum(natural[c] for c in widths if c not in cut) + 2 * (len(widths) - 1)
    room = width - fixed
    if sum(natural[c] for c in cut) <= room:
        return {column: 0 for column in widths}
    # Share the room in proportion to the default widths, never below the minimum.
    weights = sum(widths[c] for c in cut)
    fitted = dict(widths)
    for column in cut:
        fitted[column] = max(MIN_CUT_WIDTH, min(natural[column], room * widths[column] // weights))
    return fitted


def _flat(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return LIST_SEPARATOR.join(str(item) for item in value)
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(rows: Sequence[dict], widths: dict[str, int]) -> str:
    cells = [
        [shorten(_flat(row.get(c)), w) if w else _flat(row.get(c)) for c, w in widths.items()]
        for row in rows
    ]
    sizes = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(widths)]
    numeric = [
        bool(cells) and all(_is_number(line[i]) for line in cells) for i in range(len(widths))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(s) if num else v.ljust(s) for v, s, num in zip(values, sizes, numeric)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(widths))] + [line(values) for values in cells]) + "\n"


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


RESULT_COLUMNS = (
    "rank",
    "id",
    "score",
    "handle",
    "title",
    "authors",
    "year",
    "venue",
    "snippet",
    "url",
    "code_links",
    "why",
)


def _md_title(row: dict) -> str:
    """A title cell: the title (LaTeX read as every document reads it), linked to the paper's web
    page."""
    return (
        md_link(row["url"], md_latex(row["title"]), escaped=True)
        if row.get("url")
        else md_latex(row["title"])
    )


def _md_links(row: dict) -> str:
    return ", ".join(md_link(link) for link in row.get("code_links") or ())


def _md_list(row: dict, column: str) -> str:
    return md_latex(LIST_SEPARATOR.join(row.get(column) or ()))


_MARKDOWN_CELLS = {
    "title": _md_title,
    "snippet": lambda row: md_latex(row["snippet"]),
    "code_links": _md_links,
    "authors": lambda row: _md_list(row, "authors"),
    "why": lambda row: md(LIST_SEPARATOR.join(row.get("why") or ())),
    "venue": lambda row: md_latex(row.get("venue") or ""),
}


def result_records(results: Sequence) -> list[dict]:
    """Recommendations as the JSON objects `--format json` prints and `papers serve`'s API
    returns."""
    return [result.to_dict() for result in results]


SCORE_DECIMALS = 3  # a score's decimals in a table, more where fewer would show a false tie
MOST_SCORE_DECIMALS = 6


def score_texts(scores: Sequence[float]) -> list[str]:
    """Scores as a table shows them: 3 decimals, or as many more (up to 6) as it takes for
    different scores to read differently and a score below 1 never reads as 1, so that two
    equal scores shown are a tie, not a rounding (two papers at 1.000 read as duplicates)."""
    values = [float(score) for score in scores]
    for decimals in range(SCORE_DECIMALS, MOST_SCORE_DECIMALS + 1):
        texts = [f"{value:.{decimals}f}" for value in values]
        if len(set(texts)) == len(set(values)) and not any(
            value < 1 and float(text) >= 1 for value, text in zip(values, texts)
        ):
            break
    return texts


def render_results(results: Sequence, fmt: str, why: bool = False, width: int | None = None) -> str:
    """Recommendations as a readable table or a machine format."""
    rows = result_records(results)
    columns = [c for c in RESULT_COLUMNS if why or c != "why"]
    table = {"rank": 0, "score": 0, "id": 0, "title": LABEL_WIDTH, "snippet": SNIPPET_WIDTH}
    if why:
        table = {"rank": 0, "score": 0, "id": 0, "title": LABEL_WIDTH, "why": 40}
    shown = score_texts([row["score"] for row in rows])
    for row, text in zip(rows, shown):
        row["score"] = text if fmt in ("table", "markdown") else row["score"]
        if (
            why and row.get("because") and fmt in ("table", "markdown")
        ):  # the seeds first, then the terms
            seeds = ", ".join(f"{seed['handle']} ({seed['cosine']:.2f})" for seed in row["because"])
            row["why"] = [f"because of {seeds}", *row["why"]]
        if why and fmt in ("table", "markdown"):
            row["why"] = reason_lines(row)
    if fmt == "table" and not rows:
        return "no papers found\n"
    if fmt == "markdown":
        shown = [
            "rank",
            "score",
            "title",
            "authors",
            "year",
            "venue",
            "id",
            "snippet",
            "code_links",
        ]
        return markdown_table(rows, shown + (["why"] if why else []), _MARKDOWN_CELLS)
    return render(rows, columns, fmt, table, width)


REASON_SENTENCE_WIDTH = 90  # a sentence of a reason longer than this is cut, with "…"


def reason_lines(row: dict) -> list[str]:
    """A result's reasons as the table and Markdown show them: the seeds it is there because of,
    the phrases it shares with them (its shared terms when it shares no phrase), and the closest
    pair of sentences."""
    lines = [line for line in row["why"] if line.startswith("because of ")]
    terms = [line for line in row["why"] if not line.startswith("because of ")]
    phrases = row.get("phrases") or terms
    if phrases:
        lines.append("shares: " + ", ".join(phrases))
    for pair in row.get("sentences") or ():
        lines.append(
            f"“{shorten(pair['seed_sentence'], REASON_SENTENCE_WIDTH)}” ~"
            f" “{shorten(pair['paper_sentence'], REASON_SENTENCE_WIDTH)}” ({pair['cosine']:.2f})"
        )
    return lines


def paper_record(paper) -> dict:
    """A paper's fields as every output format shows them: `title` falls back to the handle."""
    return dict(paper.to_dict(), title=paper.title or paper.handle)


PAPER_COLUMNS = ("id", "handle", "title", "authors", "year", "venue", "url", "code_links", "source")


def paper_list_records(papers: Sequence) -> list[dict]:
    """Papers as the JSON objects `papers list --format json` prints and `papers serve`'s API
    returns."""
    return [
        dict(paper_record(paper), summary=paper.title or paper.first_sentence) for paper in papers
    ]


def render_papers(papers: Sequence, fmt: str, width: int | None = None) -> str:
    """A list of papers (for `papers list`)."""
    rows = paper_list_records(papers)
    columns = [*PAPER_COLUMNS, "abstract"]
    if fmt == "markdown":
        return markdown_table(
            rows,
            ["id", "handle", "title", "authors", "year", "venue", "code_links"],
            _MARKDOWN_CELLS,
        )
    return render(rows, columns, fmt, {"id": 0, "handle": 24, "summary": 70}, width)


def render_paper(paper, fmt: str) -> str:
    """One paper in full (for `papers show`)."""
    data = paper_record(paper)
    if fmt in ("json", "jsonl"):
        return json.dumps(data, ensure_ascii=False, indent=2 if fmt == "json" else None) + "\n"
    if fmt == "csv":
        return render([data], list(data), "csv")
    if fmt == "markdown":
        return _paper_markdown(paper)
    lines = []
    fields = [
        ("id", paper.id),
        ("handle", paper.handle),
        ("title", paper.title),
        ("authors", LIST_SEPARATOR.join(paper.authors)),
        ("year", paper.year),
        ("venue", paper.venue),
        ("url", paper.url),
        ("code", LIST_SEPARATOR.join(paper.code_links)),
        ("source", paper.source),
        ("text", "" if paper.text_from == "abstract" else paper.text_from),
    ]
    for name, value in fields:
        if value not in ("", None):
            lines.append(f"{name + ':':9}{value}")
    lines.append("")
    lines.append(paper.abstract)
    return "\n".join(lines) + "\n"


def _paper_markdown(paper) -> str:
    lines = [f"## {md_latex(paper.label)}", ""]
    if reference(paper):
        lines += [reference(paper), ""]
    fields = [
        ("id", md(paper.id)),
        ("handle", md(paper.handle)),
        ("code", ", ".join(md_link(link) for link in paper.code_links)),
        ("source", md(paper.source)),
        ("text", "" if paper.text_from == "abstract" else md(paper.text_from)),
    ]
    lines += [f"- **{name}**: {value}" for name, value in fields if value]
    return "\n".join(lines + ["", md_latex(paper.abstract)]) + "\n"


def render_info(info: dict, fmt: str) -> str:
    """The manifest of an index, readable."""
    if fmt in ("json", "jsonl"):
        return (
            json.dumps(
                info, ensure_ascii=False, indent=2 if fmt == "json" else None, sort_keys=True
            )
            + "\n"
        )
    from ..embed.models import model_facts

    precision = model_facts(info["model"]).precision_words(info.get("precision", "fp32"))
    index = info.get("index", {})
    lines = [
        ("index", info["path"]),
        ("papers", _info_papers(info)),
        (
            "model",
            f"{info['model']} ({info['dimension']} dimensions, {precision})",
        ),
        ("long texts", _info_windows(info)),
        ("search", f"{index.get('kind')}: {index.get('reason')}"),
        (
            "lexical",
            (
                f"TF-IDF, {info.get('lexical', {}).get('terms', 0)} terms ({_grams(info)},"
                " sublinear tf)"
            ),
        ),
        (
            "queries",
            {
                "onnx": "ONNX export (no torch at query time)",
                "static": "static embeddings (no torch, no ONNX Runtime at query time)",
            }.get(info.get("query_encoder") or "", "full model"),
        ),
        (
            "built",
            (
                f"{info['built_at']} by papers {info['package_version']} (format"
                f" {info['format_version']})"
            ),
        ),
        ("inputs", f"fingerprint {info['inputs_fingerprint']}"),
        ("size", human_size(info["bytes"])),
    ]
    return "".join(f"{name + ':':12}{value}\n" for name, value in lines)


def _info_papers(info: dict) -> int | str:
    """The index's paper count, with its segments' adds and removals when it has any."""
    if "segments" not in info:
        return info["paper_count"]
    return (
        f"{info['paper_count']} ({info['base_paper_count']} built,"
        f" {info['added_papers']} added in {info['segments']} segments,"
        f" {info['removed_papers']} removed: `papers build --compact` merges them)"
    )


def _info_windows(info: dict) -> str:
    """How the index read texts longer than the model's window."""
    chunking = info.get("chunking", {})
    size = chunking.get("max_tokens") or "model-max"
    return {
        "sentences": (
            f"windows of {size} tokens, each starting with the title and ending at a sentence end,"
            " mean-pooled"
        ),
        "windows": f"windows of {size} tokens, {chunking.get('overlap')} overlap, mean-pooled",
    }.get(chunking.get("strategy"), "truncated at the model's window")


def human_size(size: float) -> str:
    """Bytes as `info` and `indexes` show them: "512 B", "3.4 KB", "12.0 MB" (powers of 1000)."""
    for unit in ("B", "KB", "MB"):
        if size < (1000 if unit == "B" else 999.95):  # 999,999 B is "1.0 MB", not "1000.0 KB"
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def _grams(info: dict) -> str:
    low, high = info.get("lexical", {}).get("ngram_range", [1, 2])
    return "single words" if (low, high) == (1, 1) else f"{low}-{high} grams"
