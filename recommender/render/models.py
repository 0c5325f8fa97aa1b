"""`papers models`: the models `--model` knows by name, as a table or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .tables import human_size, render

COLUMNS = ("name", "tier", "status", "download", "dimensions", "window", "measured")


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
            "measured": "; ".join(f"{key}: {value}" for key, value in model["costs"].items()),
        }
        for model in models
    ]
    text = render(rows, COLUMNS, fmt, {c: 0 for c in COLUMNS})
    if fmt != "table":
        return text
    hints = [
        f"to {'reinstall' if model['status'] == 'damaged' else 'install'} {model['name']}: "
        f"{model['install']}"
        for model in models
        if model["status"] in ("not installed", "damaged")
    ]
    return text + "".join(f"{hint}\n" for hint in hints)
