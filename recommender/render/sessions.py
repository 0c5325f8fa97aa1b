"""A reading-group plan written as a Markdown handout or as JSON."""

from __future__ import annotations

import json

from ..errors import InputError
from ..reading.sessions import SessionPlan
from .markdown import code_links, md, snippet
from .tables import plural

SESSION_FORMATS = ("markdown", "json")


def render_plan(plan: SessionPlan, fmt: str) -> str:
    """The plan as a Markdown handout or as JSON."""
    if fmt not in SESSION_FORMATS:
        raise InputError(f"unknown format '{fmt}': use one of {', '.join(SESSION_FORMATS)}")
    if fmt == "json":
        return json.dumps(plan.to_dict(), ensure_ascii=False, indent=2) + "\n"
    lines = [f"# Reading-group plan: {plural(len(plan.rows), 'paper')} in {plural(len(plan.sessions), 'session')}", "", plan.method]
    for session in plan.sessions:
        count = len(session.papers)
        lines += ["", f"## Session {session.number}: {md(session.title)} ({plural(count, 'paper')})", ""]
        for rank, item in enumerate(session.papers, start=1):
            paper = item.paper
            line = f"{rank}. **{md(paper.label)}**: {md(snippet(paper))}"
            if paper.code_links:
                line += f" Code: {code_links(paper)}"
            lines.append(line)
        if session.background:
            names = [
                f"{md(item.paper.label)} ({'session ' + str(item.session) if item.session else 'not in the plan'})"
                for item in session.background
            ]
            lines += ["", "Background reading: " + "; ".join(names) + "."]
    return "\n".join(lines) + "\n"
