"""Every output of `papers`, compared byte for byte between this tree and a base revision.

    python scripts/compare_outputs.py --base main [--keep] [--only WORD]

The base revision is checked out with `git worktree add` into a temporary folder. In each
checkout the same small corpus (tests/corpus.py's papers under arXiv-like IDs, the arXiv
snapshot and BibTeX fixtures, a tiny evaluation set) is built with the fake encoder
(tests/build_launcher.py: a real `papers` process, tests/fakes.py's encoder) in the same work
folder, with the same environment and $SOURCE_DATE_EPOCH, and the same list of commands is run:
builds, add, remove, compaction, every lookup, search, show, list, info, related-work, sessions,
map points, tags, feed and evaluate format variant, and a few failures (help texts left out).
For each command its exit status, stdout, stderr and every file it wrote (the files of an index
included) are compared; the differences are printed, and the last line says how many commands
gave identical outputs ("54 of 54 identical"). Exit status 1 when any differ.

Quoted in: docs/architecture.md ("Settings as values").
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

EXTRA = [
    {"id": "arXiv.2404.00001", "title": "Private Language Models at Scale",
     "abstract": "Scaling differentially private training of language models with gradient"
                 " clipping.",
     "year": 2024, "categories": ["cs.LG", "cs.CR"]},
    {"id": "arXiv.2404.00002", "title": "Aesthetic Video Ranking",
     "abstract": "Ranking short videos by aesthetic quality with annotations from professionals.",
     "year": 2024, "categories": ["cs.CV"]},
]
QUERIES = ("query_id\tpaper_id\tfacet\nq_dp\tarXiv.2401.00117\tmethod\n"
           "q_vid\tarXiv.2402.00031\tresult\n")
QRELS = ("q_dp 0 arXiv.2401.00254 3\nq_dp 0 arXiv.2402.00031 0\nq_dp 0 arXiv.2403.00051 1\n"
         "q_vid 0 arXiv.2402.10042 3\nq_vid 0 arXiv.2401.00117 0\nq_vid 0 arXiv.2403.00066 1\n")

DP1, DP2, VID1, VID2, RNN1 = ("arXiv.2401.00117", "arXiv.2401.00254", "arXiv.2402.00031",
                              "arXiv.2402.10042", "arXiv.2403.00051")
EVAL = ["evaluate", "--corpus", "eval/corpus.jsonl", "--queries", "eval/queries.tsv",
        "--qrels", "eval/qrels.txt", "--index", "eval-index"]
FORMATS = ["table", "json", "jsonl", "csv", "markdown"]

# Each command: its arguments to `papers`; files it writes go to out/ (and index folders are
# compared after the commands that change them).
COMMANDS: list[list[str]] = [
    ["build", "corpus", "--index", "main"],
    ["build", "corpus", "--index", "main"],
    ["build", "corpus/papers.jsonl", "--index", "small", "--chunking", "truncate",
     "--index-type", "flat"],
    ["build", "corpus", "--index", "lg", "--where", "category=cs.LG"],
    ["build", "corpus/papers.jsonl", "--index", "grow", "--quiet"],
    ["add", "extra.jsonl", "--index", "grow", "--no-compact"],
    ["remove", DP2, "--index", "grow"],
    ["like", DP1, "--index", "grow"],
    ["build", "--compact", "--index", "grow"],
    ["build", "missing.bib", "--index", "broken"],
    *[["like", DP1, "--index", "main", "--format", f] for f in FORMATS],
    ["like", DP1, VID1, "--index", "main", "-k", "3", "--mode", "dense"],
    ["like", DP1, "--index", "main", "--mode", "lexical", "--why"],
    ["like", DP1, "--index", "main", "--diverse", "0.5", "--min-score", "0.05", "--wide"],
    ["like", DP1, "--not", VID1, "--exclude", "exclude.txt", "--index", "main"],
    ["like", "--from-file", "extra.jsonl", "--index", "main", "--format", "json"],
    ["like", "no-such-paper", "--index", "main"],
    *[["search", "private training of language models", "--index", "main", "--format", f]
      for f in FORMATS],
    ["search", "video aesthetics", "--index", "main", "--mode", "lexical", "--why", "-k", "3"],
    ["search", "linear attention", "--index", "main", "--diverse", "0.3", "--mode", "dense"],
    *[["show", RNN1, "--index", "main", "--format", f] for f in ("table", "json", "markdown")],
    *[["list", "--index", "main", "--format", f] for f in FORMATS],
    ["list", "--index", "main", "--where", "year>=2020", "--limit", "3"],
    ["info", "--index", "main"],
    ["info", "--index", "main", "--format", "json", "--verify"],
    ["info", "--index", "grow"],
    ["indexes"],
    *[["related-work", "--all", "-k", "2", "--index", "main", "--format", f]
      for f in ("markdown", "json", "jsonl", "csv", "bibtex", "miniconf")],
    ["related-work", DP1, VID1, "--why", "--index", "main", "--out", "out/related.md", "--quiet"],
    *[["sessions", "--all", "--n", "2", "--index", "main", "--format", f]
      for f in ("markdown", "json", "csv")],
    ["sessions", "--all", "--n", "3", "--index", "main", "--out", "out/sessions.md", "--quiet"],
    ["map", "--all", "--n", "2", "--index", "small", "--out", "out/points.csv", "--quiet"],
    ["map", "--all", "--n", "2", "--index", "small", "--out", "out/points.json", "--quiet"],
    ["tags", "add", "to-read", DP1, VID1, "--index", "main"],
    ["tags", "seen", "to-read", DP2, "--index", "main"],
    ["tags", "not", "to-read", RNN1, "--index", "main"],
    *[["tags", "--index", "main", "--format", f] for f in ("table", "json", "markdown")],
    ["like", "--tag", "to-read", "--exclude-seen", "to-read", "--index", "main"],
    *[["feed", "--tag", "to-read", "--since", "2000-01-01", "--index", "main", "--format", f]
      for f in ("table", "json", "markdown")],
    ["feed", "--tag", "to-read", "--since", "2000-01-01", "--index", "main", "--format", "html",
     "--out", "out/feed.html", "--quiet"],
    [*EVAL, "--quiet"],
    [*EVAL, "--quiet", "--format", "json", "--per-query"],
    [*EVAL, "--quiet", "--format", "markdown", "--mode", "lexical", "--pool", "all"],
    [*EVAL, "--quiet", "--mode", "dense", "--relevant-at", "1", "--diverse", "0.5"],
]


def checkout(base: str, folder: Path) -> Path:
    """The base revision in a git worktree of its own (removed at the end)."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), base],
                   check=True, capture_output=True)
    return folder


def prepare(work: Path, tree: Path) -> None:
    """The corpus, the evaluation set and the other inputs, the same for every checkout."""
    sys.path.insert(0, str(REPO / "tests"))
    from corpus import long_id_papers, write_corpus

    if work.exists():
        shutil.rmtree(work)
    (work / "out").mkdir(parents=True)
    papers = [dict(paper, year=2023 + i % 2, categories=["cs.LG"] if i % 2 else ["cs.CV"])
              for i, paper in enumerate(long_id_papers())]
    write_corpus(work / "corpus", papers)
    for fixture in ("arxiv-metadata-oai-snapshot.json", "library.bib"):
        shutil.copy(REPO / "tests" / "fixtures" / fixture, work / "corpus" / fixture)
    write_corpus(work, EXTRA, "extra.jsonl")
    write_corpus(work / "eval", long_id_papers() + EXTRA, "corpus.jsonl")
    (work / "eval" / "queries.tsv").write_text(QUERIES, encoding="utf-8")
    (work / "eval" / "qrels.txt").write_text(QRELS, encoding="utf-8")
    (work / "exclude.txt").write_text(f"{VID2}\n", encoding="utf-8")


# An index's version and segment folders are named by the time, the process and a random tail.
FOLDER_NAME = re.compile(rb"\b([vs])-\d{8}T\d{6}-\d+-[0-9a-f]+")
# Times a tags database records: seconds since the epoch or a Julian day, as SQL dumps floats.
EPOCH_TIME = re.compile(r"\b\d\.\d+e\+0[69]\b|\b(?:1[6-9]\d{8}|24\d{5})\.\d+")


def normalised(data: bytes) -> bytes:
    return FOLDER_NAME.sub(rb"\1-NAME", data)


def contents(path: Path) -> bytes:
    """A file's bytes; an SQLite database as its SQL dump, its times masked."""
    if path.suffix != ".sqlite":
        return normalised(path.read_bytes())
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as database:
        dump = "\n".join(database.iterdump())
    return normalised(EPOCH_TIME.sub("TIME", dump).encode("utf-8"))


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (not followed through links), its version folders renamed."""
    return {normalised(str(path.relative_to(folder)).encode()).decode(): contents(path)
            for path in sorted(folder.rglob("*")) if path.is_file() and not path.is_symlink()}


def run_all(tree: Path, work: Path, commands: list[list[str]]) -> list[dict]:
    """Run every command in `tree`'s code inside `work`: what each printed and wrote."""
    prepare(work, tree)
    home = work / "home"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local/share"),
        "PAPERS_HOME": str(work / "indexes"), "PYTHONPATH": str(tree), "COLUMNS": "120",
        "TZ": "UTC", "SOURCE_DATE_EPOCH": "1767225600", "PYTHONHASHSEED": "0",
        "PAPERS_TEST_NO_NETWORK": "1",
    }
    launcher = tree / "tests" / "build_launcher.py"
    results = []
    for arguments in commands:
        before = snapshot(work / "indexes") if (work / "indexes").exists() else {}
        done = subprocess.run([sys.executable, str(launcher), *arguments], cwd=work, env=env,
                              capture_output=True, timeout=600)
        after = snapshot(work / "indexes") if (work / "indexes").exists() else {}
        written = {f"indexes/{name}": data for name, data in after.items()
                   if before.get(name) != data}
        for name, data in snapshot(work / "out").items():
            written[f"out/{name}"] = data
        shutil.rmtree(work / "out")
        (work / "out").mkdir()
        results.append({"command": arguments, "status": done.returncode,
                        "stdout": normalised(done.stdout), "stderr": normalised(done.stderr),
                        "files": written})
    return results


def differences(base: dict, current: dict) -> list[str]:
    """What differs between two runs of one command, as unified diffs (bytes shown as text)."""
    lines = []
    if base["status"] != current["status"]:
        lines.append(f"  exit status {base['status']} -> {current['status']}")
    for part in ("stdout", "stderr"):
        if base[part] != current[part]:
            lines += diff(part, base[part], current[part])
    for name in sorted(set(base["files"]) | set(current["files"])):
        old, new = base["files"].get(name), current["files"].get(name)
        if old == new:
            continue
        if old is None or new is None:
            lines.append(f"  {name}: written by {'current' if old is None else 'base'} only")
        else:
            lines += diff(name, old, new)
    return lines


def diff(name: str, old: bytes, new: bytes) -> list[str]:
    try:
        old_text, new_text = old.decode("utf-8"), new.decode("utf-8")
    except UnicodeDecodeError:
        return [f"  {name}: binary, {len(old)} bytes -> {len(new)} bytes, different"]
    body = difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), f"base/{name}",
                                f"current/{name}", lineterm="", n=1)
    return ["  " + line for line in list(body)[:40]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare with (e.g. main)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--only", help="run only the commands containing this word")
    parser.add_argument("--json", type=Path, help="also write every result here")
    options = parser.parse_args()
    commands = [c for c in COMMANDS if options.only is None or options.only in c]
    scratch = Path(tempfile.mkdtemp(prefix="papers-compare-"))
    base_tree = scratch / "base"
    try:
        checkout(options.base, base_tree)
        base = run_all(base_tree, scratch / "work", commands)
        current = run_all(REPO, scratch / "work", commands)
    finally:
        if not options.keep:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(base_tree)], capture_output=True)
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"kept {scratch}", file=sys.stderr)
    same = 0
    for old, new in zip(base, current):
        found = differences(old, new)
        if found:
            print(f"DIFFERENT: papers {' '.join(old['command'])}")
            print("\n".join(found))
        else:
            same += 1
    if options.json:
        options.json.write_text(json.dumps(
            [{"command": old["command"], "identical": not differences(old, new),
              "status": new["status"], "files": sorted(new["files"])}
             for old, new in zip(base, current)], indent=1), encoding="utf-8")
    print(f"{same} of {len(commands)} identical (base {options.base}, {len(commands)} commands)")
    return 0 if same == len(commands) else 1


if __name__ == "__main__":
    sys.exit(main())
