"""An index with segments (`papers add`): the base and each segment searched, the results merged.

Each part ranks its own papers as `Recommender` does, deep enough that its tombstoned papers
(`papers remove`) can be dropped and `k` remain; the lists are merged by score. Seeds held by
another part are given to each part as papers from outside (embedded with the index's query
encoder, as `--from-file` papers are). Dense scores are exact across parts; hybrid and lexical
scores use each part's own TF-IDF statistics and candidate pool, so a segment's papers may rank
a little differently than after a rebuild (measured by scripts/bench_segments.py,
docs/performance.md) until `papers build --compact` merges them into the base.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..corpus.papers import Paper
from ..errors import IndexMissingError, PaperNotFoundError
from ..index import segments as segment_store
from ..index import store
from . import recommender as single
from .recommender import Recommendation, Recommender, check_options


def open_index(index: str | Path | None = None, model: str | None = None, verify: bool = False) -> Recommender:
    """The index as a reader sees it: a `Recommender` of its base, or, with segments, a
    `SegmentedRecommender` over the base and every segment of the published list."""
    index_dir = store.resolve_index_dir(index)
    for _ in range(5):
        listed = segment_store.read_segments(index_dir) if index_dir.is_dir() else None
        base = Recommender.open(index, model=model, verify=verify)
        if listed is None or not listed.segments and not listed.tombstones:
            return base
        if base.stored.folder.name != listed.base:  # a compaction swapped the base meanwhile: read again
            base.close()
            continue
        parts = []
        try:
            for name in listed.segments:
                parts.append(Recommender.open(segment_store.segment_dir(index_dir, name), verify=verify))
        except IndexMissingError:  # removed by a compaction since the list was read: read again
            for part in parts:
                part.close()
            base.close()
            continue
        except BaseException:
            for part in parts:
                part.close()
            base.close()
            raise
        return SegmentedRecommender(base, listed, parts)
    raise store.IndexBusyError(f"index {index_dir} keeps changing under us (adds in a loop?): try again")


class SegmentedRecommender(Recommender):
    """The base (this Recommender's own rows) and the segments, each a Recommender of its own."""

    def __init__(self, base: Recommender, listed: segment_store.SegmentSet, parts: Sequence[Recommender]):
        super().__init__(base.stored)
        self.listed = listed
        self.segments = list(parts)
        self._names = [segment_store.BASE, *listed.segments]
        # One query encoder for every part, each text encoded once for them all.
        shared = _SharedEncoder(lambda: single.load_query_encoder(base.stored, base.manifest["model"]))
        for part in [self, *self.segments]:
            part.use_query_encoder(shared)

    @property
    def version(self) -> tuple[str, ...]:
        """What a long-running reader compares to see an add, a remove or a rebuild."""
        return (self.stored.folder.name, *self.listed.segments,
                *(f"{part}:{len(ids)}" for part, ids in sorted(self.listed.tombstones.items())))

    def close(self) -> None:
        for part in self.segments:
            part.close()
        super().close()

    def _parts(self) -> list[tuple[str, Recommender, frozenset[str]]]:
        base: Recommender = self
        return [(name, part, self.listed.removed(name))
                for name, part in zip(self._names, [base, *self.segments])]

    def _own(self, part: Recommender):
        """A part's own (unsegmented) methods: the base's are those of Recommender itself."""
        return super() if part is self else part

    def paper_count(self) -> int:
        """Live papers: the base's and the segments', tombstones left out."""
        removed = sum(len(ids) for ids in self.listed.tombstones.values())
        return len(self) + self.listed.added - removed

    def info(self) -> dict:
        """The base's facts, with the live paper count and what the segments add and remove."""
        facts = super().info()
        facts["base_paper_count"] = facts["paper_count"]
        facts["paper_count"] = self.paper_count()
        facts["segments"] = len(self.segments)
        facts["added_papers"] = self.listed.added
        facts["removed_papers"] = sum(len(ids) for ids in self.listed.tombstones.values())
        return facts

    def list_papers(self, where: Sequence[str] = (), limit: int | None = None) -> list[Paper]:
        """The base's papers in index order, then each segment's, removed papers left out."""
        found: list[Paper] = []
        for _, part, removed in self._parts():
            wanted = None if limit is None else limit - len(found) + len(removed)
            if wanted is not None and wanted < 1:
                break
            found.extend(paper for paper in self._own(part).list_papers(where, wanted) if paper.id not in removed)
        return found if limit is None else found[:limit]

    def _holder(self, reference: str) -> tuple[str, Recommender, int]:
        """The part holding a reference, and its row there; a removed paper is not found."""
        for name, part, removed in self._parts():
            try:
                row = Recommender.resolve(part, reference)
            except PaperNotFoundError:
                continue
            if part.keys.id_of(row) not in removed:
                return name, part, row
        Recommender.resolve(self, reference)  # the base's message, with the names nearest
        raise PaperNotFoundError(f"paper '{reference}' was removed from the index (`papers remove`)")

    def show(self, reference: str) -> Paper:
        _, part, row = self._holder(reference)
        return Recommender.papers_at(part, [row])[0]

    def like(self, *references: str, k: int = 10, not_: Sequence[str] = (), exclude: Sequence[str] = (),
             min_score: float | None = None, diverse: float | None = None, why: bool = False,
             mode: str = "hybrid", papers: Sequence[Paper] = ()) -> list[Recommendation]:
        """`Recommender.like` over the base and every segment, merged by score."""
        if not references and not papers:
            raise PaperNotFoundError("no paper given: name at least one paper ID or handle, or give papers from a file")
        check_options(k, min_score, diverse, mode)
        seeds = [(reference, *self._holder(reference)) for reference in references]
        negatives = [(reference, *self._holder(reference)) for reference in not_]
        seed_papers = {name: [] for name in self._names}
        for _, name, part, row in seeds:
            seed_papers[name].append(Recommender.papers_at(part, [row])[0])
        seed_ids = {paper.id for held in seed_papers.values() for paper in held}
        results = []
        for name, part, removed in self._parts():
            own = [reference for reference, holder, _, _ in seeds if holder == name]
            outside = [paper for other, held in seed_papers.items() if other != name for paper in held]
            against = [reference for reference, holder, _, _ in negatives if holder == name]
            found = self._own(part).like(
                *own, k=k + len(removed), not_=against, exclude=[*exclude, *seed_ids], min_score=min_score,
                diverse=diverse, why=why, mode=mode, papers=[*outside, *papers])
            results.extend(item for item in found if item.id not in removed)
        return _merged(results, k)

    def search(self, text: str, k: int = 10, exclude: Sequence[str] = (), min_score: float | None = None,
               diverse: float | None = None, why: bool = False, mode: str = "hybrid") -> list[Recommendation]:
        """`Recommender.search` over the base and every segment, merged by score."""
        results = []
        for _, part, removed in self._parts():
            found = self._own(part).search(text, k=k + len(removed), exclude=exclude, min_score=min_score,
                                           diverse=diverse, why=why, mode=mode)
            results.extend(item for item in found if item.id not in removed)
        return _merged(results, k)


def _merged(results: list[Recommendation], k: int) -> list[Recommendation]:
    """The best `k` of several parts' lists: by score (rounded as `ranking.order_by_score` does), then ID."""
    best: dict[str, Recommendation] = {}
    for item in results:
        if item.id not in best or item.score > best[item.id].score:
            best[item.id] = item
    ordered = sorted(best.values(), key=lambda item: (-round(float(item.score), 6), item.id))[:k]
    return [Recommendation(rank, item.score, item.paper, item.why) for rank, item in enumerate(ordered, start=1)]


class _SharedEncoder:
    """The index's query encoder, loaded on first use, remembering the last texts it encoded: the
    base and every segment encode a search text (or a seed from another part) once between them."""

    REMEMBERED = 64

    def __init__(self, load):
        self._load, self._encoder = load, None
        self._known: dict[tuple[str, ...], object] = {}

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = self._load()
        return self._encoder

    @property
    def max_tokens(self) -> int:
        return self.encoder.max_tokens

    @property
    def dimension(self) -> int:
        return self.encoder.dimension

    def token_spans(self, text: str):
        return self.encoder.token_spans(text)

    def encode(self, texts: list[str]):
        key = tuple(texts)
        if key not in self._known:
            if len(self._known) >= self.REMEMBERED:
                self._known.pop(next(iter(self._known)))
            self._known[key] = self.encoder.encode(list(texts))
        return self._known[key]
