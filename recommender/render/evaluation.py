"""Evaluation figures as a table, Markdown or JSON."""

from __future__ import annotations

import json

from ..evaluation import metrics
from ..evaluation.evaluate import Evaluation
from .tables import render

HEADINGS = {
    "map": "MAP",
    "ndcg_at_10": "NDCG@10",
    "ndcg_pct_20": "NDCG%20",
    "recall_at_20": "Recall@20",
    "mrr": "MRR",
}


def _figures(scores: dict[str, float]) -> dict[str, float]:
    """Metrics as CSFCube reports them: x100, one decimal."""
    return {name: round(100.0 * scores[name], 1) for name in metrics.METRIC_NAMES}


def describe(settings: dict) -> str:
    """One line saying what was measured."""
    ranking = settings["mode"]
    if settings["mode"] == "hybrid":
        ranking += f" (dense weight {settings['dense_weight']:.2f})"
    extras = "".join(
        f", {name.replace('_', ' ')} {settings[name]:g}"
        for name in ("min_score", "diverse")
        if settings[name] is not None
    )
    return (
        f"{ranking}, {settings['pool']} pool, relevant at grade >="
        f" {settings['relevant_at']}{extras}; {settings['index']}: {settings['papers']} papers,"
        f" {settings['model']}, {settings['chunking']}"
    )


def render_evaluation(evaluation: Evaluation, fmt: str = "table", per_query: bool = False) -> str:
    """The figures as a table (or Markdown), or everything as JSON."""
    summary = (
        [
            {
                "facet": facet,
                "queries": sum(1 for q in evaluation.queries if q.facet == facet),
                **_figures(scores),
            }
            for facet, scores in evaluation.by_facet.items()
        ]
        if len(evaluation.by_facet) > 1
        else []
    )
    summary.append(
        {"facet": "all", "queries": len(evaluation.queries), **_figures(evaluation.overall)}
    )
    queries = [
        {
            "query": q.query_id,
            "paper": q.paper_id,
            "facet": q.facet,
            "candidates": q.candidates,
            **_figures(vars(q.scores)),
        }
        for q in evaluation.queries
    ]
    profiles = [
        {"protocol": protocol, "profiles": count, **_figures(scores)}
        for protocol, (count, scores) in evaluation.profiles.items()
    ]
    if fmt == "json":
        data = {
            "settings": evaluation.settings,
            "overall": summary[-1],
            "facets": summary[:-1],
            "profiles": profiles,
        }
        if per_query:
            data["per_query"] = queries
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    metric_columns = {HEADINGS[m]: 0 for m in metrics.METRIC_NAMES}
    text = describe(evaluation.settings) + "\n\n"
    if per_query:
        text += render(_shown(queries), [], fmt, {"query": 0, "facet": 0, **metric_columns}) + "\n"
    text += render(_shown(summary), [], fmt, {"facet": 0, "queries": 0, **metric_columns})
    if (
        profiles
    ):  # several seeds as one profile, ranked as `like` ranks them (evaluation/profiles.py)
        text += "\nseveral seeds as one profile, ranked as `like` ranks them:\n" + render(
            _shown(profiles), [], fmt, {"protocol": 0, "profiles": 0, **metric_columns}
        )
    return text


def _shown(rows: list[dict]) -> list[dict]:
    """Rows under the table's headings, figures with one decimal."""
    return [{**row, **{HEADINGS[m]: f"{row[m]:.1f}" for m in metrics.METRIC_NAMES}} for row in rows]


def render_reviewers(evaluation, fmt: str = "table") -> str:
    """The loss of a reviewer-format evaluation (`evaluation.reviewers.evaluate_reviewers`), with
    its spread."""
    data = evaluation.to_dict()
    if fmt == "json":
        return json.dumps({"profiles_loss": data}, indent=2, ensure_ascii=False) + "\n"
    settings = evaluation.settings
    ranking = settings["mode"] + (
        f" (dense weight {settings['dense_weight']:.2f})" if settings["mode"] == "hybrid" else ""
    )
    row = {
        "researchers": data["researchers"],
        "samples": data["samples"],
        "profiles": data["profiles"],
        "loss": f"{data['loss']:.3f}",
        "sd": f"{data['sd']:.3f}",
        "95% interval": f"{data['interval'][0]:.3f}-{data['interval'][1]:.3f}",
    }
    return (
        f"researchers' own papers as profiles, ranked as `like` ranks them: {ranking};"
        f" {settings['index']}: {settings['papers']} papers, {settings['model']}\nloss: weighted"
        " share of rated pairs ordered against the expertise (lower is better); spread: bootstrap"
        " over researchers\n\n" + render([row], [], fmt, {name: 0 for name in row})
    )


def render_evaluations(
    evaluation: Evaluation | None, reviewed, fmt: str = "table", per_query: bool = False
) -> str:
    """What `papers evaluate` shows: the collection's figures (`evaluation`), the profiles' loss
    (`reviewed`), or both (in JSON, one document)."""
    if evaluation is None:
        return render_reviewers(reviewed, fmt)
    shown = render_evaluation(evaluation, fmt, per_query)
    if reviewed is not None and fmt == "json":
        return (
            json.dumps(
                {**json.loads(shown), **json.loads(render_reviewers(reviewed, fmt))},
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )
    if reviewed is not None:
        shown += "\n" + render_reviewers(reviewed, fmt)
    return shown
