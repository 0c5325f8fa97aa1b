#!/usr/bin/env python
"""Follow `papers build --model` through the code: how often the build crosses between index/ and
embed/.

What: one real `papers build SEEDS --model MODEL` (in-process, a scratch folder and user cache)
under `sys.setprofile`; every Python call whose caller is in one of `recommender.index` and
`recommender.embed` and whose callee is in the other is a crossing: down (index calls embed) or up
(embed calls back into index). Printed: the distinct crossings (caller function -> callee function)
each way, and the number of calls behind them. Not a timing: the counts are the same on any machine.

How: python scripts/walk_build.py [--model all-MiniLM-L6-v2] [--code /path/to/checkout]
(`--code` measures another checkout's package, e.g. main before a change; the first run exports the
model to ONNX in the scratch cache, a few seconds.)

Quoted in: docs/architecture.md ("Choosing the encoder").
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def layer(module: str | None) -> str | None:
    parts = (module or "").split(".")
    return (
        parts[1]
        if len(parts) > 2 and parts[0] == "recommender" and parts[1] in ("index", "embed")
        else None
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument(
        "--code", type=Path, default=REPO, help="the checkout whose package is measured"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    scratch = Path(tempfile.mkdtemp(prefix="walk-build-"))
    os.environ["PAPERS_CACHE"] = str(scratch / "cache")
    os.environ["PAPERS_HOME"] = str(scratch / "indexes")
    from recommender.cli import main as papers

    crossings: collections.Counter = collections.Counter()

    def profile(frame, event, _arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = frame.f_globals.get("__name__"), frame.f_back.f_globals.get("__name__")
        inner, outer = layer(callee), layer(caller)
        if inner and outer and inner != outer:
            direction = "down" if outer == "index" else "up"
            crossings[
                (
                    direction,
                    f"{caller}.{frame.f_back.f_code.co_name}",
                    f"{callee}.{frame.f_code.co_name}",
                )
            ] += 1

    sys.setprofile(profile)
    try:
        papers(
            ["build", str(REPO / "seeds"), "--index", "walk", "--model", args.model, "--quiet"],
            standalone_mode=False,
        )
    finally:
        sys.setprofile(None)
    import recommender

    print(f"package: {Path(recommender.__file__).parent}  model: {args.model}")
    for direction in ("down", "up"):
        edges = sorted(
            (edge[1:], count) for edge, count in crossings.items() if edge[0] == direction
        )
        calls = sum(count for _, count in edges)
        print(f"{direction}: {len(edges)} distinct crossings, {calls} calls")
        for (caller, callee), count in edges:
            print(f"  {caller} -> {callee}  x{count}")


if __name__ == "__main__":
    main()
