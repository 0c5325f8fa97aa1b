"""A paper in one sentence: the sentence of its abstract that says what it does."""

from __future__ import annotations

import functools
import re

from .handles import plain_text
from .latex import latex_text
from .papers import Paper
from .text import first_sentence, split_sentences

_CUE = re.compile(
    r"\b(we"
    r" (propose|present|introduce|develop|study|show|design|describe|investigate|analy[sz]e"
    r"|address|tackle)"
    r"|this (paper|work|study)|in this (paper|work)|here,? we|our"
    r" (method|approach|framework|model))\b",
    re.IGNORECASE,
)


def summary(paper: Paper) -> str:
    """The sentence that says what the paper does: the first naming its handle or saying
    "we propose", "this paper" and the like, else the first sentence."""
    return _summary_of(paper.abstract, paper.handle)


# Every result list shows its papers' summaries: a server's lookups would otherwise spend a fifth
# of their time finding the same sentences again.
@functools.lru_cache(maxsize=4096)
def _summary_of(abstract: str, handle: str) -> str:
    sentences = split_sentences(abstract)
    handle = handle if handle and not abstract.startswith(handle) else ""
    chosen = first_sentence(abstract)
    for sentence in sentences[:6]:
        if (handle and _names(sentence, handle)) or _CUE.search(sentence):
            chosen = _standalone(sentence)
            break
    # Plain prose: LaTeX read as every document reads it (corpus.latex: `BERT~\\citep{x}` is
    # "BERT [x]", a citation plain_text then drops), markup gone, and no space left where it was
    # before ")" or punctuation.
    return re.sub(r"\(\s+", "(", re.sub(r"\s+([).,;:!?])", r"\1", plain_text(latex_text(chosen))))


# Openings that point back to sentences the summary leaves out ("To address this, ...").
_LEAD_IN = re.compile(
    r"^(?:(?:to|in order to)"
    r" (?:address|tackle|solve|overcome|bridge|fill|close|mitigate|remedy|fix|alleviate|"
    r"resolve|handle|meet)\b[^,]{0,90}|in (?:this|the present)"
    r" (?:paper|work|study|article)|here|then|next|"
    r"furthermore|moreover|additionally|specifically|finally|however|therefore|thus|consequently|instead|"
    r"in response|motivated by (?:this|these)[^,]{0,40}|building on (?:this|these)[^,]{0,40}|"
    r"to this end|for this purpose),\s+"
    r"|^in (?:this|the present) (?:paper|work|study|article)\s+(?=we\b)",
    re.IGNORECASE,
)


def _standalone(sentence: str) -> str:
    """The sentence without a lead-in that only makes sense after the previous one."""
    rest = sentence
    for _ in range(3):  # "To solve this problem, in this paper, we ..."
        rest = _LEAD_IN.sub("", rest, count=1)
    return rest[:1].upper() + rest[1:] if rest else sentence


def _names(sentence: str, name: str) -> bool:
    """Whether `name` occurs in `sentence` as a whole word."""
    start = sentence.find(name)
    while start >= 0:
        end = start + len(name)
        if (start == 0 or not sentence[start - 1].isalnum()) and (
            end == len(sentence) or not sentence[end].isalnum()
        ):
            return True
        start = sentence.find(name, start + 1)
    return False


def paper_brief(paper: Paper) -> dict:
    """A paper as every list shows it: id, handle, title (the handle when there is none),
    authors, year, venue, snippet (its summary sentence), url and code links."""
    return {
        "id": paper.id,
        "handle": paper.handle,
        "title": paper.title or paper.handle,
        "authors": list(paper.authors),
        "year": paper.year,
        "venue": paper.venue,
        "snippet": summary(paper),
        "url": paper.url,
        "code_links": list(paper.code_links),
        "text_from": paper.text_from,
    }
