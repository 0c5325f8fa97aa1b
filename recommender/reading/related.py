"""Related-work lists for many papers at once.

Each list is the one `PaperIndex.like(paper, k=k)` returns: the dense
candidates of a chunk of papers come from one batched FAISS search and their
TF-IDF scores from batched postings reads (`PaperIndex.like_each`); then every
paper is ranked by `like`'s own code over its own candidate pool, so the lists
are the same by construction. (Before the hybrid score was normalised per
query, a bound on a fixed convex mix of the two cosines let most papers skip
most postings; it does not hold for scores normalised over each query's pool.)
Lists are produced chunk by chunk (a generator), so a large corpus never holds
all of them in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..corpus.papers import Paper
from ..corpus.summary import paper_brief
from ..errors import OptionError
from ..query.paper_index import PaperIndex, Recommendation, check_options

CHUNK = 1024
"""Papers per chunk: the unit of progress reports and of paper records held at once."""


@dataclass(frozen=True)
class RelatedList:
    """One chosen paper and the papers most related to it."""

    paper: Paper
    related: tuple[Recommendation, ...]

    def to_dict(self) -> dict:
        return {**paper_brief(self.paper), "related": [item.to_dict() for item in self.related]}


def select_rows(
    recommender: PaperIndex, references: Sequence[str] = (), all_papers: bool = False
) -> list[int]:
    """Rows of the chosen papers in the order given (duplicates once), or every row in index
    order."""
    if all_papers:
        if references:
            raise OptionError("give paper IDs or all papers, not both", "all_papers")
        return list(range(len(recommender)))
    if not references:
        raise OptionError("no paper chosen: give paper IDs or handles, or all papers")
    return list(dict.fromkeys(recommender.resolve(reference) for reference in references))


def related_work(
    recommender: PaperIndex,
    rows: Sequence[int | Paper],
    k: int = 5,
    why: bool = False,
    chunk: int = CHUNK,
    progress: Callable[[int], None] | None = None,
) -> Iterator[RelatedList]:
    """For each row, its k most related papers (the list `like` gives), in order.

    A `Paper` among `rows` (read from a file, say) stands for the stored paper
    when the index holds it (`PaperIndex.find_papers`); otherwise its list is
    `like(papers=[paper])`'s, the paper embedded now. `progress(count)` is called
    after each chunk."""
    check_options(k, None, None, "hybrid")  # now, not when the first list is asked for
    if not any(isinstance(item, Paper) for item in rows):
        stored_rows = [int(row) for row in rows if not isinstance(row, Paper)]  # all of them
        return _related_lists(recommender, stored_rows, k, why, chunk, progress)
    items = _stored_where_possible(recommender, rows)
    stored = [item for item in items if not isinstance(item, Paper)]
    return _mixed_lists(
        recommender,
        items,
        _related_lists(recommender, stored, k, why, chunk, progress),
        k,
        why,
        progress,
    )


def _stored_where_possible(
    recommender: PaperIndex, rows: Sequence[int | Paper]
) -> list[int | Paper]:
    """Rows as ints, papers the index holds as their rows, each paper once (first place kept)."""
    papers = [item for item in rows if isinstance(item, Paper)]
    found = iter(recommender.find_papers(papers) if papers else [])
    items: list[int | Paper] = []
    for item in rows:
        if isinstance(item, Paper):
            row = next(found)
            items.append(item if row is None else row)
        else:
            items.append(int(item))
    seen: set = set()
    unique = []
    for item in items:
        key = item.id if isinstance(item, Paper) else item
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def _mixed_lists(recommender, items, stored_lists, k, why, progress) -> Iterator[RelatedList]:
    for item in items:
        if isinstance(item, Paper):
            yield RelatedList(item, tuple(recommender.like(papers=[item], k=k, why=why)))
            if progress is not None:
                progress(1)
        else:
            yield next(stored_lists)


def _related_lists(recommender, rows, k, why, chunk, progress) -> Iterator[RelatedList]:
    for start in range(0, len(rows), chunk):
        block = [int(row) for row in rows[start : start + chunk]]
        ranked = recommender.like_each(block, k=k, why=why)
        for paper, related in zip(recommender.papers_at(block), ranked):
            yield RelatedList(paper, tuple(related))
        if progress is not None:
            progress(len(block))
