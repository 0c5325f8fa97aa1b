"""Reasons a reader can use for a recommendation: the phrases two texts share that are specific to
them, and the pair of sentences, one from each, that the model finds closest.

Functions over words and arrays only: the index supplies document counts and sentence vectors
(`query/explaining.py`), so none of this loads a model.

The rules (docs/ranking.md, "Reasons"):
- A phrase is 1 to PHRASE_WORDS consecutive words of both texts (the TF-IDF tokens: accents
  stripped, lowercased, words of 2+ letters), neither its first nor its last word a stop word or a
  common word. A word is common when more than COMMON_SHARE of the index's papers use it (and more
  than COMMON_FLOOR papers, so that a small index does not call every shared word common). A phrase
  weighs the sum of its uncommon words' IDF (the index's own, ln((1 + n) / (1 + df)) + 1): longer
  and rarer is heavier. The heaviest PHRASES_SHOWN are shown, a phrase inside one already shown
  left out.
- Sentences: each text's sentences (corpus.text.split_sentences) of MIN_SENTENCE_WORDS words or
  more, the first SENTENCES_READ of them; the shown pair is the one of highest cosine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..corpus.text import split_sentences
from ..index.lexical import words

PHRASE_WORDS = 3
COMMON_SHARE = 0.05
COMMON_FLOOR = 10
PHRASES_SHOWN = 4
MIN_SENTENCE_WORDS = 5
SENTENCES_READ = 30


@dataclass(frozen=True)
class SentencePair:
    """The closest pair of sentences of a seed (its ID; None for a search text) and a paper."""

    seed: str | None
    seed_sentence: str
    paper_sentence: str
    cosine: float

    def to_dict(self) -> dict:
        return {
            "seed": self.seed,
            "seed_sentence": self.seed_sentence,
            "paper_sentence": self.paper_sentence,
            "cosine": round(self.cosine, 4),
        }


def common_ceiling(papers: int) -> float:
    """The document count above which a word is common in an index of `papers` papers."""
    return max(COMMON_SHARE * papers, COMMON_FLOOR)


def phrases_of(tokens: Sequence[str], stop_words: frozenset[str], common: frozenset[str]) -> set:
    """The phrases (tuples of words) of a text's tokens: 1 to PHRASE_WORDS words, no stop word nor
    common word at either end."""
    edge = stop_words | common
    found = set()
    for start, first in enumerate(tokens):
        if first in edge:
            continue
        for length in range(1, PHRASE_WORDS + 1):
            end = start + length
            if end > len(tokens):
                break
            if tokens[end - 1] not in edge:
                found.add(tuple(tokens[start:end]))
    return found


def shared_phrases(
    first: str,
    second: str,
    stop_words: frozenset[str],
    counts: Callable[[Sequence[str]], tuple[Mapping[str, int], int]],
    limit: int = PHRASES_SHOWN,
) -> list[tuple[str, float]]:
    """The phrases both texts hold, heaviest first, with their weights (see the module's rules).
    `counts(words)`: each word's document count in the index and the index's paper count."""
    first_tokens, second_tokens = words(first), words(second)
    candidates = set(first_tokens) & set(second_tokens) - stop_words
    if not candidates:
        return []
    frequency, papers = counts(sorted(candidates))
    ceiling = common_ceiling(papers)
    common = frozenset(word for word in candidates if frequency.get(word, 0) > ceiling)
    shared = phrases_of(first_tokens, stop_words, common) & phrases_of(
        second_tokens, stop_words, common
    )
    idf = {
        word: math.log((1 + papers) / (1 + frequency.get(word, 0))) + 1
        for word in candidates - common
    }
    weighed = sorted(
        ((phrase, sum(idf.get(word, 0.0) for word in phrase)) for phrase in shared),
        key=lambda item: (-item[1], -len(item[0]), item[0]),
    )
    chosen: list[tuple[tuple[str, ...], float]] = []
    for phrase, weight in weighed:
        if len(chosen) == limit:
            break
        if not any(_inside(phrase, shown) for shown, _ in chosen):
            chosen.append((phrase, weight))
    return [(" ".join(phrase), round(weight, 3)) for phrase, weight in chosen]


def merge_phrases(
    found: Sequence[Sequence[tuple[str, float]]], limit: int = PHRASES_SHOWN
) -> list[str]:
    """Phrases shared with several seeds (`shared_phrases` of each), heaviest first, each once and
    none inside one already kept."""
    chosen: list[tuple[str, ...]] = []
    for phrase, _ in sorted(
        (item for items in found for item in items), key=lambda item: (-item[1], item[0])
    ):
        words_of = tuple(phrase.split())
        if len(chosen) < limit and not any(_inside(words_of, shown) for shown in chosen):
            chosen.append(words_of)
    return [" ".join(phrase) for phrase in chosen]


def _inside(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    return any(whole[i : i + len(part)] == part for i in range(len(whole) - len(part) + 1))


def reason_text(paper) -> str:
    """The text whose sentences a paper's pair is chosen from: its abstract, else its title."""
    return paper.abstract or paper.title


def sentences_of(text: str) -> list[str]:
    """The sentences of a text that a pair may show (the module's rules)."""
    kept = [s for s in split_sentences(text) if len(s.split()) >= MIN_SENTENCE_WORDS]
    return kept[:SENTENCES_READ] or [" ".join(text.split())][: 1 if text.strip() else 0]


def best_pair(first: np.ndarray, second: np.ndarray) -> tuple[int, int, float]:
    """(i, j, cosine): the rows of the two arrays of sentence vectors whose cosine is highest (the
    first such pair in row order)."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    cosines = a @ b.T
    i, j = np.unravel_index(int(np.argmax(cosines)), cosines.shape)
    return int(i), int(j), float(cosines[i, j])
