"""Today's shared terms and the reasons beside them (phrases, the closest pair of sentences), for
pairs the tool recommends: each of `--pairs` papers spread evenly over the index, with its first
`papers like` result. Prints a Markdown table (docs/measured-ranking.md, "Reasons").

    python scripts/compare_reasons.py INDEX [--pairs 20] [--label NAME]

Quoted in: docs/measured-ranking.md ("Reasons": the side-by-side tables).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender import PaperIndex  # noqa: E402
from recommender.corpus.text import shorten  # noqa: E402


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--width", type=int, default=110, help="characters of a sentence shown")
    args = parser.parse_args()
    with PaperIndex.open(args.index) as index:
        size = len(index)
        rows = sorted({round(i * (size - 1) / max(args.pairs - 1, 1)) for i in range(args.pairs)})
        print("| # | seed | recommended | today's terms | phrases | closest sentences (cosine) |")
        print("|---:|---|---|---|---|---|")
        for number, row in enumerate(rows, start=1):
            seed = index.papers_at([row])[0]
            (result,) = index.like(seed.id, k=1, why=True)
            pair = result.sentences[0] if result.sentences else None
            sentences = (
                f"“{shorten(pair.seed_sentence, args.width)}” ~ "
                f"“{shorten(pair.paper_sentence, args.width)}” ({pair.cosine:.2f})"
                if pair
                else ""
            )
            print(
                f"| {number} | {cell(shorten(seed.label, 50))} | "
                f"{cell(shorten(result.paper.label, 50))} | {cell('; '.join(result.why))} | "
                f"{cell('; '.join(result.phrases))} | {cell(sentences)} |"
            )


if __name__ == "__main__":
    main()
