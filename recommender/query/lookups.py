"""Papers looked up by reference: by ID, handle or prefix, by a record read from a file, by
citation key; a paper shown, listed, paged through or explained."""

from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..corpus.papers import InputWarning, Paper, text_key
from ..corpus.summary import paper_brief
from ..errors import InputError, OptionError, PaperNotFoundError, caller_stacklevel
from ..index.stored import StoredIndex
from .opened import OpenedIndex, check_text
from .reasons import (
    SentencePair,
    best_pair,
    merge_phrases,
    reason_text,
    sentences_of,
    shared_phrases,
)

# The seeds a recommendation's phrases are given against when it names none (`with_reasons`).
REASON_SEEDS = 3
# Sentence vectors an opened index keeps (`closest_sentences`): 3 MB of 384 dimensions.
SENTENCES_KEPT = 2048


class IndexLookups(OpenedIndex):
    """An opened index's papers by reference (a part of `PaperIndex`)."""

    def __init__(self, stored: StoredIndex):
        super().__init__(stored)
        self._rows_by_key: dict[str, dict[str, int]] = {}  # indexes without digest tables
        self._rows_by_citation_key: dict[str, list[int]] | None = None  # nor citation keys
        self._aliases: dict[str, str] | None = (
            None  # nor the other IDs of papers (read on first use)
        )
        # sentence -> its vector (`closest_sentences`): a seed's sentences are encoded once for
        # every page of its results, up to SENTENCES_KEPT sentences
        self._sentence_vectors: dict[str, np.ndarray] = {}

    def close(self) -> None:
        """Release the index files, and the lookups' tables; safe to call twice."""
        self._rows_by_key = {}
        self._rows_by_citation_key = None
        self._sentence_vectors = {}
        super().close()

    def list_papers(self, where: Sequence[str] = (), limit: int | None = None) -> list[Paper]:
        """The papers, in index order, that meet every `--where` condition (`["year>=2020"]`, as
        `papers build` takes them), the first `limit` of them. Stops reading once `limit` are found.
        """
        from ..corpus.where import parse_where

        if limit is not None and limit < 1:
            raise OptionError(f"limit must be at least 1, got {limit}", "limit")
        condition = parse_where(where)
        found = []
        present: set[str] = set()  # the fields of the conditions some paper has a value for
        for paper in self.papers():
            if condition is None or condition.matches(paper):
                found.append(paper)
                if limit is not None and len(found) >= limit:
                    break
            elif not found:
                present |= condition.fields_present(paper)
        if (
            condition is not None
            and not found
            and len(self)
            and present != condition.fields_present_all()
        ):
            # Nothing matched because no paper has the field at all: say so, not an empty list.
            raise InputError(
                f"no paper matches the condition {condition}:"
                f" {condition.no_match_reason(present, len(self))}"
            )
        return found

    def resolve(self, reference: str) -> int:
        """The row of a paper given by ID, handle (any case) or unique ID prefix."""
        reference = reference.strip()
        if not reference:
            raise PaperNotFoundError(
                "empty paper reference: give an ID or handle (see `papers list`)"
            )
        matches = self.keys.matching_rows(reference)
        if len(matches) == 1:
            return matches[0]
        if not matches:
            kept = self._alias_of(reference)
            if kept is not None:
                return kept
            if len(self) <= CLOSEST_SCAN:
                close = _closest(reference, self.ids, self.handles)
            else:  # a scan of every name takes seconds at 1M papers (difflib)
                close = _closest(reference, *self.keys.names_near(reference, CLOSEST_NEAR))
            hint = f": closest matches: {', '.join(close)}" if close else ": see `papers list`"
            if " " in reference:  # words, not a name: the user may want a text search
                import shlex

                hint += (
                    "; to rank papers by this text, run `papers search"
                    f" {shlex.quote(printable(reference))}`"
                )
            raise PaperNotFoundError(f"no paper '{printable(reference)}' in the index{hint}")
        shown = ", ".join(
            f"{self.keys.id_of(row)} ({self.keys.handle_of(row)})" for row in matches[:5]
        )
        more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
        raise PaperNotFoundError(
            f"'{printable(reference)}' matches {len(matches)} papers: {shown}{more}: give more of"
            " the ID"
        )

    def _alias_of(self, reference: str) -> int | None:
        """The row of the paper another ID of it names: "arXiv:2401.00001" for the paper
        2401.00001, or an ID of a record the build kept as the same paper (index/keys.py)."""
        from ..corpus.identifiers import bare_arxiv_id
        from ..index.keys import ALIASES

        bare = bare_arxiv_id(reference)
        if bare != reference:
            row = self.keys.row_of_id(bare)
            if row is not None:
                return row
        if self._aliases is None:
            stored = self.stored.load_json(ALIASES) if self.stored.has(ALIASES) else {}
            self._aliases = {alias.casefold(): kept for alias, kept in stored.items()}
        kept = self._aliases.get(reference.casefold()) or self._aliases.get(bare.casefold())
        return None if kept is None else self.keys.row_of_id(kept)

    def find_papers(self, papers: Sequence[Paper]) -> list[int | None]:
        """For each paper (read from a file, say), its row in the index, or None when the
        index does not hold it: the same ID, else the same arXiv ID or DOI (from its URL or
        ID), else the same text (title and abstract, ignoring case and spacing); the first
        such row. Looked up on disk: reads only the papers whose digest matches."""
        found: list[int | None] = [self.keys.row_of_id(paper.id) for paper in papers]
        for i, paper in enumerate(papers):
            for table, key_of in PAPER_KEYS.items():
                if found[i] is not None:
                    break
                key = key_of(paper)
                if key:
                    found[i] = self._row_with(table, key)
        return found

    def read_papers(self, path: str | Path) -> list[Paper]:
        """The papers of a file in any input format, to give as `papers=` (`--from-file`).

        An entry without an abstract (a reading list of keys and titles) is kept when the
        index holds it (`find_papers`: its ID, arXiv ID or DOI); one that matches nothing
        cannot be embedded, so it is skipped, with one warning for the file."""
        from ..corpus.papers import read_papers

        lacking: list[tuple[Paper, str]] = []
        papers = read_papers([path], without_abstract=lacking)
        found = self.find_papers([paper for paper, _ in lacking]) if lacking else []
        skipped = [where for (_, where), row in zip(lacking, found) if row is None]
        if skipped and not papers and len(skipped) == len(lacking):
            raise InputError(
                f"{path}: none of its {len(lacking)} records has an abstract or names a paper of"
                " the index (by key, DOI or arXiv ID): give their abstracts"
            )
        if skipped:
            records = "record" if len(skipped) == 1 else "records"
            warnings.warn(
                f"{path}: {len(skipped)} {records} without an abstract and not in the index skipped"
                f" (the first: {skipped[0]})",
                InputWarning,
                stacklevel=caller_stacklevel(),
            )
        # Those with abstracts, then those without that the index holds.
        kept = {id(paper) for (paper, _), row in zip(lacking, found) if row is not None}
        return papers + [paper for paper, _ in lacking if id(paper) in kept]

    def _row_with(self, table: str, key: str) -> int | None:
        candidates = self.keys.rows_with(table, key)
        if (
            candidates is None
        ):  # an index built before the digest tables: one pass, kept for later calls
            if not self._rows_by_key:
                self._rows_by_key = {name: {} for name in PAPER_KEYS}
                for row, stored in enumerate(self.papers()):
                    for name, key_of in PAPER_KEYS.items():
                        self._rows_by_key[name].setdefault(key_of(stored), row)
            return self._rows_by_key[table].get(key)
        for row, stored in zip(
            candidates, self.papers_at(candidates)
        ):  # a 64-bit digest may collide
            if PAPER_KEYS[table](stored) == key:
                return row
        return None

    def citation_key_rows(self, folded: str) -> list[int]:
        """Rows whose casefolded citation key (`corpus.citation.citation_key`) is `folded`, in row
        order."""
        rows = self.keys.rows_with_citation_key(folded)
        if rows is not None:
            return rows
        if self._rows_by_citation_key is None:  # an index built before the table: one pass, kept
            from ..corpus.citation import citation_key

            self._rows_by_citation_key = defaultdict(list)
            for row, stored in enumerate(self.papers()):
                self._rows_by_citation_key[citation_key(stored).casefold()].append(row)
        return self._rows_by_citation_key.get(folded, [])

    def show(self, reference: str) -> Paper:
        """The stored record of one paper."""
        return self.papers_at([self.resolve(reference)])[0]

    def papers_page(
        self, offset: int = 0, limit: int = 50, where: Sequence[str] = ()
    ) -> tuple[list[Paper], int | None]:
        """Papers in index order: `limit` of them after the first `offset` (of those matching
        `where`, `year>=2020`, `venue=*ICML*` or `category=cs.LG` as for `papers build --where`),
        and the offset of the next page (None after the last). Without `where` it reads only the
        page's papers."""
        from ..corpus.where import parse_where

        if offset < 0:
            raise InputError(f"offset must be at least 0, got {offset}")
        if limit < 1:
            raise InputError(f"limit must be at least 1, got {limit}")
        condition = parse_where(list(where))
        if condition is None:
            rows = range(min(offset, len(self)), min(offset + limit, len(self)))
            return self.papers_at(rows), offset + limit if offset + limit < len(self) else None
        found: list[Paper] = []
        matched = 0
        for paper in self.papers():
            if not condition.matches(
                _PaperFields({"year": paper.year, "venue": paper.venue}, paper.categories)
            ):
                continue
            matched += 1
            if matched > offset + limit:
                return found, offset + limit
            if matched > offset:
                found.append(paper)
        return found, None

    def explain(
        self, reference: str, seed: str | None = None, text: str | None = None, limit: int = 10
    ) -> Explanation:
        """Why a paper is listed for a seed paper or a search text: the terms they share most and
        the two cosines the hybrid score fuses (embeddings, TF-IDF); without either, the paper's own
        top terms.
        """
        if seed is not None and text is not None:
            raise InputError("give a seed paper or a search text to explain against, not both")
        row = self.resolve(reference)
        own = self.lexical.row(row)
        order = np.lexsort((own.indices, -own.values))[:limit]
        top = tuple(self.lexical.vocabulary[int(own.indices[i])] for i in order)
        if seed is None and text is None:
            return Explanation(self.papers_at([row])[0], None, None, None, None, (), top)
        if seed is not None:
            seed_row = self.resolve(seed)
            dense, lexical = self.vectors_at([seed_row])[0], self.lexical.row(seed_row)
            against = self.papers_at([seed_row])[0]
        else:
            assert text is not None  # not both None: returned above
            if not text.strip():
                raise InputError("empty search text: give some words to search for")
            check_text(text, "search text")
            dense, lexical, against = self.encode_query(text), self.lexical.transform(text), None
        dense_cosine = float(self.cosines(np.array([row]), dense)[0])
        lexical_cosine = float(self.lexical.scores_at(lexical, np.array([row]))[0])
        shared = tuple(self.lexical.shared_terms(lexical, row, limit))
        paper = self.papers_at([row])[0]
        seed_paper = against if against is not None else Paper("", "", text or "")
        (reasoned,) = self.with_reasons(
            [_Reasoned(paper)], [(None if against is None else against.id, seed_paper)]
        )
        return Explanation(
            paper,
            against,
            text,
            round(dense_cosine, 4),
            round(lexical_cosine, 4),
            shared,
            top,
            reasoned.phrases,
            reasoned.sentences,
        )

    def shared_phrases(self, first: str, second: str) -> list[tuple[str, float]]:
        """The phrases two texts share that are specific to them, heaviest first, with their
        weights (`reasons.shared_phrases`, weighed by this index's document counts)."""
        lexical = self.lexical
        return shared_phrases(first, second, lexical.stop_words, lexical.document_counts)

    def closest_sentences(
        self, pairs: Sequence[tuple[str | None, str, str]]
    ) -> list[SentencePair | None]:
        """For each (seed ID, seed's text, paper's text), the pair of their sentences closest by
        the model (`reasons.best_pair`), every sentence encoded once in one batch; None where a
        text has no sentence. Loads the query encoder."""
        split = {text: sentences_of(text) for _, *texts in pairs for text in texts}
        known = self._sentence_vectors
        missing = list(
            dict.fromkeys(s for sentences in split.values() for s in sentences if s not in known)
        )
        if missing:
            known.update(zip(missing, [row.copy() for row in self.encode_sentences(missing)]))
        found: list[SentencePair | None] = []
        for seed, first_text, second_text in pairs:
            first, second = split[first_text], split[second_text]
            if not first or not second:
                found.append(None)
                continue
            i, j, cosine = best_pair(
                np.stack([known[s] for s in first]), np.stack([known[s] for s in second])
            )
            found.append(SentencePair(seed, first[i], second[j], cosine))
        while len(known) > SENTENCES_KEPT:  # the oldest first
            known.pop(next(iter(known)))
        return found

    def with_reasons(self, results: Sequence, seeds: Sequence[tuple[str | None, Paper]]) -> list:
        """Recommendations with their reasons: the phrases they share with the seeds each is there
        because of (the first REASON_SEEDS seeds when it names none), and the closest pair of
        sentences with the first of those (the closest seed). `seeds`: (ID, paper) of each seed; a
        search text is one seed of ID None, its paper the text as an abstract."""
        by_id = {seed_id: paper for seed_id, paper in seeds}
        chosen = [
            [(seed_id, by_id[seed_id]) for seed_id, _, _ in result.because if seed_id in by_id]
            or list(seeds)[:REASON_SEEDS]
            for result in results
        ]
        pairs = [
            (against[0][0], reason_text(against[0][1]), reason_text(result.paper))
            for result, against in zip(results, chosen)
        ]
        explained = []
        for result, against, pair in zip(results, chosen, self.closest_sentences(pairs)):
            phrases = merge_phrases(
                [self.shared_phrases(seed.text, result.paper.text) for _, seed in against]
            )
            explained.append(
                dataclasses.replace(
                    result, phrases=tuple(phrases), sentences=() if pair is None else (pair,)
                )
            )
        return explained

    def excluded_rows(self, exclude: Sequence[str]) -> set[int]:
        """Hook: the rows a query leaves out for these IDs (`exclude=`); an index with segments
        adds the papers `papers remove` removed."""
        # IDs already read may include papers outside this index: those need no excluding.
        wanted = {value.strip() for value in exclude if value.strip()}
        if not wanted:
            return set()
        return self.keys.rows_named(sorted(wanted))


@dataclass(frozen=True)
class Explanation:
    """Why a paper is listed (`PaperIndex.explain`): against a seed paper or a search text, the
    terms they share most and the cosines of their embeddings and of their TF-IDF vectors."""

    paper: Paper
    seed: Paper | None
    text: str | None
    dense_cosine: float | None
    lexical_cosine: float | None
    shared_terms: tuple[str, ...]
    top_terms: tuple[str, ...]  # the paper's own highest TF-IDF terms
    # the phrases the two share and their closest pair of sentences (`with_reasons`)
    phrases: tuple[str, ...] = ()
    sentences: tuple[SentencePair, ...] = ()

    def to_dict(self) -> dict:
        return {
            **paper_brief(self.paper),
            "seed": None if self.seed is None else self.seed.id,
            "text": self.text,
            "dense_cosine": self.dense_cosine,
            "lexical_cosine": self.lexical_cosine,
            "shared_terms": list(self.shared_terms),
            "top_terms": list(self.top_terms),
            "phrases": list(self.phrases),
            "sentences": [pair.to_dict() for pair in self.sentences],
        }


@dataclass(frozen=True)
class _Reasoned:
    """A paper to give reasons for outside a result list (`explain`)."""

    paper: Paper
    because: tuple = ()
    phrases: tuple[str, ...] = ()
    sentences: tuple[SentencePair, ...] = ()


@dataclass(frozen=True)
class _PaperFields:
    """A stored paper as `--where` conditions read a record (an index built before categories were
    kept has none)."""

    fields: dict
    categories: tuple = ()


def _identifier(paper: Paper) -> str:
    from ..corpus.identifiers import (
        work_identifier,
    )  # imported on use: a cold `like` never needs it

    return work_identifier(paper.url, paper.id)


# What else makes a paper read from a file one the index holds, in the order tried after its ID
# (`find_papers`): the same arXiv ID or DOI, else the same title and abstract.
PAPER_KEYS = {
    "identifier": _identifier,
    "text": lambda paper: text_key(paper.title, paper.abstract),
}
# A reference that names no paper: up to this many papers, every name is compared with it for the
# "closest matches" of the error (difflib: about 0.5 s at 50k papers, 10 s at 1M); past it, the
# CLOSEST_NEAR names on each side of it and of its first half in sorted order (a typo that leaves
# the name sorting far from it, early in the name, then finds no suggestion).
CLOSEST_SCAN = 50_000
CLOSEST_NEAR = 50


def printable(text: str) -> str:
    """A reference as it can be shown on one line (a newline in it shows as \\n)."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _closest(
    reference: str, ids: Sequence[str], handles: Sequence[str], limit: int = 3
) -> list[str]:
    """Names close to a reference that matched nothing (the error path only)."""
    import difflib

    folded = {handle.casefold(): handle for handle in handles}
    folded.update({paper_id.casefold(): paper_id for paper_id in ids})
    names = difflib.get_close_matches(reference.casefold(), list(folded), n=limit, cutoff=0.6)
    return [folded[name] for name in names]
