"""`papers models`: the models `--model` knows by name, as a table or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .tables import human_size, render

COLUMNS = (
    "name",
    "tier",
    "status",
    "download",
    "dimensions",
    "window",
    "papers/min",
    "5,000 papers",
    "1M papers",
    "measured MAP/NDCG%20",
)


def duration(minutes: float | None) -> str:
    """A projected build time in the unit a reader plans with: "~40 s", "~7 min", "~22 h"."""
    if minutes is None:
        return ""
    if minutes < 1:
        return f"~{max(1, round(minutes * 60))} s"
    if minutes < 90:
        return f"~{round(minutes)} min"
    return f"~{round(minutes / 60)} h"


def render_models(models: Sequence[dict], fmt: str) -> str:
    if fmt in ("json", "jsonl"):
        if fmt == "jsonl":
            return "".join(json.dumps(model, ensure_ascii=False) + "\n" for model in models)
        return json.dumps(list(models), indent=2, ensure_ascii=False) + "\n"
    rows = [
        {
            **model,
            "download": human_size(model["download_bytes"]),
            "window": f"{model['window_tokens']} tokens",
            "papers/min": (
                ""
                if model["papers_per_minute"] is None
                else f"{model['papers_per_minute']:,.0f}"
                + ("*" if model["measured_papers"] else "")
            ),
            **{
                column: duration((model["projected_minutes"] or {}).get(str(papers)))
                for column, papers in (("5,000 papers", 5_000), ("1M papers", 1_000_000))
            },
            "measured MAP/NDCG%20": "; ".join(
                f"{key.replace(' MAP/NDCG%20', '')} {value}"
                for key, value in model["costs"].items()
            ),
        }
        for model in models
    ]
    text = render(rows, COLUMNS, fmt, {c: 0 for c in COLUMNS})
    if fmt != "table":
        return text
    benched = [m for m in models if m["measured_on"] and not m["measured_papers"]]
    built = [m for m in models if m["measured_on"] and m["measured_papers"]]
    notes = []
    if benched:
        notes.append(
            f"papers/min: encoding at each model's default precision on {benched[0]['measured_on']}"
        )
    notes += [
        f"* measured building {model['measured_papers']:,} papers with {model['name']} on"
        f" {model['measured_on']}"
        for model in built
    ]
    if notes:
        text += "; ".join(notes) + "; the build times are projections from it\n"
    hints = [
        f"to {'reinstall' if model['status'] == 'damaged' else 'install'} {model['name']}: "
        f"{model['install']}"
        for model in models
        if model["status"] in ("not installed", "damaged")
    ]
    return text + "".join(f"{hint}\n" for hint in hints)
