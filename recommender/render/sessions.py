"""A reading-group plan written as a Markdown handout, JSON or CSV."""

from __future__ import annotations

import io
import json

from ..errors import OptionError
from ..reading.sessions import Session, SessionPlan
from .markdown import code_links, md, md_latex, reference, snippet
from .tables import LIST_SEPARATOR, plural, write_csv

SESSION_FORMATS = ("markdown", "json", "csv")
CSV_COLUMNS = (
    "session",
    "label",
    "role",
    "rank",
    "id",
    "handle",
    "title",
    "authors",
    "year",
    "venue",
    "similarity",
    "url",
    "code_links",
    "in_session",
    "nearest_session",
)


def render_plan(plan: SessionPlan, fmt: str) -> str:
    """The plan as a Markdown handout, JSON, or CSV (one row per paper of a session, then its
    background reading, `role` telling which)."""
    if fmt not in SESSION_FORMATS:
        raise OptionError(f"unknown format '{fmt}': use one of {', '.join(SESSION_FORMATS)}", "fmt")
    if fmt == "json":
        return json.dumps(plan.to_dict(), ensure_ascii=False, indent=2) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        write_csv(buffer, CSV_COLUMNS, _csv_rows(plan))
        return buffer.getvalue()
    lines = [
        (
            f"# Reading-group plan: {plural(len(plan.rows), 'paper')} in"
            f" {plural(len(plan.sessions), 'session')}"
        ),
        "",
        plan.method,
    ]
    for session in plan.sessions:
        count = len(session.papers)
        lines += [
            "",
            f"## Session {session.number}: {md(session.title)} ({plural(count, 'paper')})",
            "",
        ]
        for rank, item in enumerate(session.papers, start=1):
            paper = item.paper
            line = f"{rank}. **{md_latex(paper.label)}**: {md_latex(snippet(paper))}"
            if reference(paper):
                line += f" {reference(paper)}"
            if paper.code_links:
                line += f" Code: {code_links(paper)}"
            lines.append(line)
        if session.overflow:
            lines += ["", overflow_line(plan, session, md, lambda paper: md_latex(paper.label))]
        if session.background:
            names = [
                f"{md_latex(item.paper.label)}"
                f" ({'session ' + str(item.session) if item.session else 'not in the plan'})"
                for item in session.background
            ]
            lines += ["", "Background reading: " + "; ".join(names) + "."]
    return "\n".join(lines) + "\n"


def overflow_line(plan: SessionPlan, session: Session, escape=str, name=None) -> str:
    """The sentence under a session naming the papers that are in it because their nearest session
    was full: `escape` escapes a session's label for the reader, `name` writes a paper (its label,
    escaped, by default)."""
    name = name or (lambda paper: escape(paper.label))
    names = "; ".join(
        f"{name(item.paper)} (nearest: session {full}, {escape(plan.session(full).title)})"
        for item in session.overflow
        if (full := item.overflowed_from) is not None
    )
    capacity = f" (at most {plural(plan.capacity, 'paper')} a session)" if plan.capacity else ""
    whose = "its" if len(session.overflow) == 1 else "their"
    return f"Here because {whose} nearest session was full{capacity}: {names}."


def _csv_rows(plan: SessionPlan):
    for session in plan.sessions:
        for role, items in (("paper", session.papers), ("background", session.background)):
            for rank, item in enumerate(items, start=1):
                paper = item.paper
                yield (
                    session.number,
                    session.title,
                    role,
                    rank,
                    paper.id,
                    paper.handle,
                    paper.label,
                    LIST_SEPARATOR.join(paper.authors),
                    paper.year,
                    paper.venue,
                    f"{item.similarity:.4f}",
                    paper.url,
                    LIST_SEPARATOR.join(paper.code_links),
                    item.session if role == "background" else session.number,
                    item.overflowed_from if role == "paper" else None,
                )
