"""What a build checks about an index and the papers read into it: CHECKS, the one list that
`papers build` (build.build_index) and `papers add` (segments.add_papers) both run, and the rule
by which `papers add` then compares the papers kept with the index's own (`plan_add`).

A check is a function of the `Inputs` being read (the index folder; how to name a paper kept, for
messages) that checks what it can at once and returns the test each paper read must then pass:
True to go on, False to leave the paper out (having warned), an InputError (one line) to refuse the
whole input. The papers stream through (a build never holds them all): a check keeps a few short
strings a paper at most. The readers' own checks (corpus.papers.scan_papers) come before. In order:

    index_folder      the index folder holds an index or nothing (layout.check_index_folder): a
                      folder of the user's is refused before anything in it is touched
    one_paper_one_id  the same paper twice (the same text, arXiv ID or DOI) is kept once, the
                      other record's ID an alias of it; one ID for two different papers refuses
                      the input (corpus.papers.same_paper, PaperSet). Last: it records the
                      papers kept.

`plan_add` applies `same_paper` again between each paper kept and the index's live papers (base
and segments, tombstones left out): a paper the index holds is skipped, the same paper under
another ID is left out with its ID an alias of the index's, and an ID the index holds for a
different paper of another source refuses the input; with `--sync`, a paper of a synced source
whose text changed replaces the index's.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import files
from ..corpus.papers import (
    DuplicatePaperWarning,
    Paper,
    PaperSet,
    duplicate_message,
    id_conflict,
    same_paper,
    text_key,
)
from ..corpus.readers.base import source_file
from ..errors import InputError, caller_stacklevel
from .keys import Keys, stored_keys
from .layout import OFFSETS, PAPERS, check_index_folder
from .stored import open_stored

PaperTest = Callable[[Paper], bool]


@dataclass
class Inputs:
    """What the checks are given: the index folder, the source of the row-th paper kept (for
    messages), and the papers kept so far (set by `one_paper_one_id`)."""

    index_dir: Path
    source_of: Callable[[int], str]
    kept: PaperSet | None = None


def _every(paper: Paper) -> bool:
    return True


def index_folder(inputs: Inputs) -> PaperTest:
    """The index folder holds an index or nothing: a folder of the user's is refused."""
    check_index_folder(inputs.index_dir)
    return _every


def one_paper_one_id(inputs: Inputs) -> PaperTest:
    """The same paper twice is kept once (its other ID an alias); one ID for two papers refuses."""
    inputs.kept = PaperSet(inputs.source_of)
    return inputs.kept.add


CHECKS: tuple[Callable[[Inputs], PaperTest], ...] = (index_folder, one_paper_one_id)


def run_checks(index_dir: Path, source_of: Callable[[int], str]) -> tuple[PaperTest, PaperSet]:
    """Start every check of CHECKS on the inputs of an index: the test each paper read must pass
    (False: left out), and the papers kept (their IDs, handles and aliases)."""
    inputs = Inputs(Path(index_dir), source_of)
    tests = [check(inputs) for check in CHECKS]
    if inputs.kept is None:
        raise RuntimeError("CHECKS lacks one_paper_one_id, which records the papers kept")

    def accept(paper: Paper) -> bool:
        return all(test(paper) for test in tests)

    return accept, inputs.kept


@dataclass(frozen=True)
class Held:
    """A live paper of the index: the part holding it (segments.BASE or a segment's name)."""

    part: str
    paper: Paper

    @property
    def id(self) -> str:
        return self.paper.id

    @property
    def source(self) -> str:
        return self.paper.source


def _work(paper: Paper) -> str:
    from ..corpus.identifiers import work_identifier

    return work_identifier(paper.url, paper.id)


_KEY_OF: dict[str, Callable[[Paper], str]] = {
    "text": lambda paper: text_key(paper.title, paper.abstract),
    "identifier": _work,
}


class IndexPapers:
    """The index's live papers as `same_paper` compares with (corpus.papers.HeldPapers): found by
    binary search in each part's key tables (keys/), each match confirmed on the stored paper; a
    part built before the digest tables is read once instead."""

    def __init__(
        self, parts: Iterable[tuple[str, Path, frozenset[str]]], stack: contextlib.ExitStack
    ):
        self._parts = []
        for name, folder, removed in parts:
            stored = stack.enter_context(open_stored(folder))
            keys = stored_keys(stored)
            self._parts.append(_Part(name, stored, keys, removed))

    def by_text(self, key: str) -> Held | None:
        return self._find("text", key)

    def by_work(self, work: str) -> Held | None:
        return self._find("identifier", work)

    def by_id(self, paper_id: str) -> Held | None:
        for part in self._parts:
            row = part.keys.row_of_id(paper_id)
            if row is not None and paper_id not in part.removed:
                return Held(part.name, part.papers([row])[0])
        return None

    def _find(self, table: str, key: str) -> Held | None:
        for part in self._parts:
            rows = part.keys.rows_with(table, key)
            if rows is None:
                rows = part.scanned(table).get(key, [])
            for paper in part.papers(rows):
                if paper.id not in part.removed and _KEY_OF[table](paper) == key:
                    return Held(part.name, paper)
        return None


@dataclass
class _Part:
    name: str
    stored: object
    keys: Keys
    removed: frozenset[str]
    _scanned: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def papers(self, rows: Sequence[int]) -> list[Paper]:
        if not rows:
            return []
        offsets = self.stored.load_array(OFFSETS, mmap=True)  # type: ignore[attr-defined]
        return [
            Paper.from_dict(row)
            for row in self.stored.read_jsonl_rows(PAPERS, offsets, rows)  # type: ignore[attr-defined]
        ]

    def scanned(self, table: str) -> dict[str, list[int]]:
        """An index without the digest tables: each key's rows, from one read of its papers."""
        if not self._scanned:
            self._scanned = {name: {} for name in _KEY_OF}
            for row, data in enumerate(self.stored.iter_jsonl(PAPERS)):  # type: ignore[attr-defined]
                paper = Paper.from_dict(data)
                for name, key_of in _KEY_OF.items():
                    self._scanned[name].setdefault(key_of(paper), []).append(row)
        return self._scanned[table]


def synced_sources(inputs: Sequence[str]) -> Callable[[str], bool]:
    """Whether a paper's recorded source is one of `inputs`: its file (readers.source_file) is one
    of these files, or lies in one of these folders, compared as whole absolute paths (syncing
    `refs` is never about `refs old.jsonl`)."""
    named, folders = set(), []
    for given in inputs:
        if not files.is_plain_file(given) and not Path(given).is_dir():
            raise InputError(
                f"{given} is not a file or folder: a sync compares the papers of a named source"
            )
        if Path(given).is_dir():
            folders.append(os.path.abspath(given).rstrip(os.sep) + os.sep)
        else:
            named.add(os.path.abspath(given))

    def ours(source: str) -> bool:
        path = source_file(source)
        if not path:
            return False
        full = os.path.abspath(path)
        return full in named or full.startswith(tuple(folders))

    return ours


def gone_from_sources(
    parts: Sequence[tuple[str, Path, frozenset[str]]],
    ours: Callable[[str], bool],
    papers: Sequence[Paper],
) -> dict[str, set[str]]:
    """For each part of the index (its name, folder and removed IDs, as IndexPapers takes them), the
    IDs of its live papers read from a sync's inputs (`ours` of their recorded source) that `papers`
    no longer hold."""
    kept = {paper.id for paper in papers}
    gone: dict[str, set[str]] = {}
    for part, folder, removed in parts:
        with open_stored(folder) as stored, open(stored.path(PAPERS), encoding="utf-8") as rows:
            for line in rows:
                record = json.loads(line)
                source, paper_id = str(record.get("source", "")), str(record["id"])
                if paper_id in kept or paper_id in removed:
                    continue
                if ours(source):
                    gone.setdefault(part, set()).add(paper_id)
    return gone


@dataclass
class AddPlan:
    """What an add does: the papers new to the index, those skipped (held already, or the same
    paper as one held), the (part, ID) of papers a changed text replaces, the aliases to keep."""

    new: list[Paper]
    skipped: int
    replaced: list[tuple[str, str]]
    aliases: dict[str, str]


def plan_add(
    index_dir: Path,
    papers: Sequence[Paper],
    held: IndexPapers,
    ours: Callable[[str], bool] | None,
) -> AddPlan:
    """Run CHECKS on the papers read, then `same_paper` between each paper kept and the index's
    (see the module's docstring). `ours` (a sync): whether a recorded source is one synced."""
    rows: list[Paper] = []
    accept, chosen = run_checks(index_dir, lambda row: rows[row].source)
    for paper in papers:
        if accept(paper):
            rows.append(paper)
    chosen.handles()  # drops the aliases that a paper kept has as its own ID
    aliases = dict(chosen.aliases)
    new: list[Paper] = []
    replaced: list[tuple[str, str]] = []
    skipped = len(papers) - len(rows)
    for paper in rows:
        holder = held.by_id(paper.id)
        if holder is not None:
            same_text = text_key(holder.paper.title, holder.paper.abstract) == text_key(
                paper.title, paper.abstract
            )
            if same_text or ours is None:
                skipped += 1  # held already (a changed text is taken by a sync or a rebuild)
                continue
            if ours(holder.source):
                replaced.append((holder.part, paper.id))
                new.append(paper)
                continue
        found = same_paper(paper, held)
        if found is None:
            new.append(paper)
            continue
        if found.kind == "id":
            raise id_conflict(paper, found.kept.source)
        warnings.warn(
            duplicate_message(paper, found, found.kept.source, found.kept.id),
            DuplicatePaperWarning,
            stacklevel=caller_stacklevel(),
        )
        if paper.id != found.kept.id:
            aliases[paper.id] = found.kept.id
        skipped += 1
    # An alias of a paper left out as the index's names the index's paper.
    aliases = {alias: aliases.get(kept, kept) for alias, kept in aliases.items()}
    return AddPlan(new, skipped, replaced, aliases)
