"""How well session labels tell the sessions of a plan apart: label words shared between sessions.

    python scripts/measure_session_labels.py [--data ../shared/eval/csfcube-dev] [--scratch .scratch]

Plans `papers sessions --n N` on the seeds (the repository's seeds/ folder) and on CSFCube's dev corpus
(2,734 papers) for several N, with the real packaged model (indexes built once under --scratch, then
reused), and counts, across the sessions of each plan, the label words (a plural and an ending cut,
then the first six letters) that are in the labels of two sessions or more. Prints every plan's labels.
Run before and after a change to the labeller.

Quoted in: docs/reading-groups-notes.md (the table of "Session labels").
"""

from __future__ import annotations

import argparse
import warnings
from collections import Counter
from pathlib import Path

from recommender.index.build import build_index
from recommender.query.paper_index import PaperIndex
from recommender.reading import sessions

ROOT = Path(__file__).resolve().parents[1]


def word_key(word: str) -> str:
    """One word however it is inflected: a plural and an ending ("ing", "er", "ed", "al") cut, then the
    first six letters ("emotions", "emotional"; "parsing", "parser").
    The measure's own, so that labels made before and after a change are counted alike."""
    if len(word) > 5 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 5 and word.endswith(("ses", "xes", "ches", "shes")):
        word = word[:-2]
    elif len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for ending in ("ing", "ers", "er", "ed", "al"):
        if word.endswith(ending) and len(word) - len(ending) >= 4:
            word = word[: -len(ending)]
            break
    return word[:6]


def label_words(label) -> set[str]:
    """The words of a session's label (a word in two of its terms counts once)."""
    return {word_key(word) for term in label for word in term.split()}


def shared(plan) -> tuple[int, int, int, int]:
    """(label words, words in two or more sessions' labels, sessions whose label shares a word,
    words repeated within a label: "image, images")."""
    per_session = [label_words(session.label) for session in plan.sessions]
    counts = Counter(word for words in per_session for word in words)
    repeated = {word for word, count in counts.items() if count > 1}
    within = sum(sum(len(term.split()) for term in session.label) - len(words)
                 for session, words in zip(plan.sessions, per_session))
    return (sum(len(words) for words in per_session), len(repeated),
            sum(1 for words in per_session if words & repeated), within)


def measure(name: str, index: Path, sizes) -> tuple[int, int]:
    total_words = total_shared = 0
    with PaperIndex.open(index) as recommender:
        rows = list(range(len(recommender)))
        for n in sizes:
            plan = sessions.plan_sessions(recommender, rows, n=n)
            words, repeated, touched, within = shared(plan)
            total_words, total_shared = total_words + words, total_shared + repeated
            print(f"{name}, --n {n}: {words} label words, {repeated} in two or more sessions' labels; "
                  f"{touched} of {len(plan.sessions)} sessions share a word; {within} repeated within a label")
            for session in plan.sessions:
                print(f"    {session.number}. {session.title} ({len(session.papers)})")
    return total_words, total_shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/eval/csfcube-dev"))
    parser.add_argument("--scratch", type=Path, default=ROOT / ".scratch",
                        help="where the indexes are built once (CSFCube's: as scripts/tune_profiles.py builds it)")
    args = parser.parse_args()
    seeds_index, csfcube_index = args.scratch / "seeds", args.scratch / "eval-csfcube-dev"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate papers kept once
        if not (seeds_index / "CURRENT").exists():
            build_index([ROOT / "seeds"], index=seeds_index)
        if not (csfcube_index / "CURRENT").exists():
            build_index([args.data / "corpus.jsonl"], index=csfcube_index)
    totals = [measure("seeds", seeds_index, (3, 4, 6)), measure("CSFCube dev", csfcube_index, (6, 10, 20))]
    words, repeated = map(sum, zip(*totals))
    print(f"all plans: {words} label words, {repeated} shared between sessions ({100 * repeated / words:.0f}%)")


if __name__ == "__main__":
    main()
