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
                "" if model["papers_per_minute"] is None else f"{model['papers_per_minute']:,.0f}"
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
    measured_on = next((model["measured_on"] for model in models if model["measured_on"]), None)
    if measured_on:
        text += (
            f"papers/min: encoding at each model's default precision on {measured_on};"
            " the build times are projections from it\n"
        )
    hints = [
        f"to {'reinstall' if model['status'] == 'damaged' else 'install'} {model['name']}: "
        f"{model['install']}"
        for model in models
        if model["status"] in ("not installed", "damaged")
    ]
    return text + "".join(f"{hint}\n" for hint in hints)
