"""A build's papers on their way to the index: spooled to a scratch file as read (a build never
holds them all), written to papers.jsonl a chunk at a time, and fingerprinted."""

from __future__ import annotations

import array
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..corpus.citation import citation_key
from ..corpus.fulltext import TextKinds
from ..corpus.identifiers import work_identifier
from ..corpus.papers import Paper, text_key
from .checks import PaperSet, run_checks
from .keys import digest_records
from .layout import OFFSETS, PAPERS
from .writer import IndexWriter

# Papers read back from the build's spool at a time (texts for the encoder, rows of papers.jsonl).
STREAM_PAPERS = 4096


class PaperSpool:
    """The papers read, one JSON line each in a scratch file of the build, read back in order or by
    rows: a build never holds them all. Holds 8 bytes a paper (where its line starts)."""

    def __init__(self, stream, chunk: int):
        self.stream, self.chunk = stream, chunk
        self.offsets = array.array("q", [0])
        self._block: tuple[int, list[str]] = (-1, [])
        self.kinds = TextKinds()  # how many papers kept have texts of each kind

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def read(self, papers: Iterable[Paper], index_dir: Path) -> PaperSet:
        """Spool the papers as read (`scan_papers`: read_papers' choice of papers, warnings and
        errors) that pass the checks of an index's inputs (checks.CHECKS); returns the papers kept
        (their IDs, and those of the papers read twice)."""
        accept, chosen = run_checks(index_dir, self.source_of)
        for paper in papers:
            if accept(paper):
                self.kinds.add(paper.text_from)
                line = (json.dumps(paper.to_dict(stored=True), ensure_ascii=False) + "\n").encode(
                    "utf-8"
                )
                self.stream.write(line)
                self.offsets.append(self.offsets[-1] + len(line))
        self.stream.flush()
        return chosen

    def source_of(self, row: int) -> str:
        self.stream.flush()
        return self.papers(row, row + 1)[0].source

    def papers(self, start: int, stop: int) -> list[Paper]:
        """Papers start..stop-1 (without their handles)."""
        stop = min(stop, len(self))
        if start >= stop:
            return []
        data = os.pread(
            self.stream.fileno(), self.offsets[stop] - self.offsets[start], self.offsets[start]
        )
        return [Paper.from_dict(json.loads(line)) for line in data.decode("utf-8").splitlines()]

    def each(self) -> Iterator[Paper]:
        for start in range(0, len(self), self.chunk):
            yield from self.papers(start, start + self.chunk)

    def texts(self) -> Sequence[str]:
        return SpooledTexts(self)

    def text_block(self, block: int) -> list[str]:
        """The texts of the block-th `chunk` papers (the last block asked for is kept)."""
        if self._block[0] != block:
            self._block = (
                block,
                [paper.text for paper in self.papers(block * self.chunk, (block + 1) * self.chunk)],
            )
        return self._block[1]


class SpooledTexts(Sequence[str]):
    """Every paper's text, read back from the spool when asked for (a block of them at a time)."""

    def __init__(self, spool: PaperSpool):
        self._spool = spool

    def __len__(self) -> int:
        return len(self._spool)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return [self[i] for i in range(*item.indices(len(self)))]
        if not -len(self) <= item < len(self):
            raise IndexError(item)
        item %= len(self)
        return self._spool.text_block(item // self._spool.chunk)[item % self._spool.chunk]


@dataclass
class Written:
    """What a build keeps of each paper once papers.jsonl is written."""

    heads: np.ndarray  # how many characters of the text the title takes
    citation_keys: list[str]
    text_digests: np.ndarray  # keys.digest_records of the text keys
    identifier_digests: np.ndarray  # ... of the arXiv IDs or DOIs
    fingerprint: str
    collections: dict[str, list[str]]  # each collection path with its papers' IDs


def write_papers(writer: IndexWriter, spool: PaperSpool, handles: Sequence[str], tfidf) -> Written:
    """papers.jsonl and its offsets, from the spool a chunk at a time; each text goes to the TF-IDF
    builder, and what the key tables need of each paper is kept."""
    heads = array.array("i")
    citation_keys: list[str] = []
    text_keys, identifiers = [], []
    text_digests, identifier_digests = [], []
    fingerprint = InputsFingerprint()
    collections: dict[str, list[str]] = {}

    def rows() -> Iterator[dict]:
        for row, paper in enumerate(spool.each()):
            paper = replace(paper, handle=handles[row])
            fingerprint.add(paper)
            heads.append(paper.head)
            citation_keys.append(citation_key(paper))
            text_keys.append(text_key(paper.title, paper.abstract))
            identifiers.append(work_identifier(paper.url, paper.id))
            if len(text_keys) >= spool.chunk:
                text_digests.append(digest_records(text_keys))
                identifier_digests.append(digest_records(identifiers))
                text_keys.clear()
                identifiers.clear()
            tfidf.add(paper.text)
            for collection in paper.collections:
                collections.setdefault(collection, []).append(paper.id)
            yield paper.to_dict(stored=True)

    offsets = writer.save_jsonl(PAPERS, rows())
    writer.save_array(OFFSETS, offsets)
    del offsets
    text_digests.append(digest_records(text_keys))
    identifier_digests.append(digest_records(identifiers))
    return Written(
        np.frombuffer(heads, dtype=np.int32).copy(),
        citation_keys,
        np.concatenate(text_digests),
        np.concatenate(identifier_digests),
        fingerprint.hexdigest(),
        collections,
    )


def inputs_fingerprint(papers: Iterable[Paper]) -> str:
    """A short hash of every paper's ID and text, in order: tells whether an index was built from
    these papers."""
    fingerprint = InputsFingerprint()
    for paper in papers:
        fingerprint.add(paper)
    return fingerprint.hexdigest()


class InputsFingerprint:
    """`inputs_fingerprint`, a paper at a time."""

    def __init__(self):
        self._digest = hashlib.sha256()

    def add(self, paper: Paper) -> None:
        self._digest.update(hashlib.sha256(paper.text.encode("utf-8")).digest())
        self._digest.update(paper.id.encode("utf-8") + b"\0")

    def hexdigest(self) -> str:
        return self._digest.hexdigest()[:16]
