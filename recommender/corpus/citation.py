"""Citation keys as reference managers make them ("lovelace1843notes"), unique among many papers.

The disambiguation rule is a function of who shares a key, not of a list of every
paper, so that an index can answer it from a stored sorted table (a few binary
searches a key, whatever the corpus)."""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence

from .papers import Paper

__all__ = ["citation_key", "unique_citation_key", "unique_citation_keys"]

# Words a reference manager skips when it picks the title word of a key.
_KEY_SKIP = frozenset(
    "a an the on of in for and to with towards toward via from by is are at as do does".split()
)

# Papers whose citation key, casefolded, is the one given, in a fixed order (index order, say).
Sharers = Callable[[str], Sequence[Hashable]]


def _ascii_word(text: str) -> str:
    return "".join(
        re.findall(
            r"[a-z0-9]+",
            unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower(),
        )
    )


def _family_name(author: str) -> str:
    """ "Ada Lovelace" -> "lovelace"; "Lovelace, Ada" -> "lovelace"."""
    name = author.split(",")[0] if "," in author else (author.split() or [""])[-1]
    return _ascii_word(name)


def citation_key(paper: Paper) -> str:
    """The key the input gave (a .bib entry's, a Zotero item's); else a citation key as
    reference managers make them, author-year-word ("lovelace1843notes"), else the paper's ID
    (its characters outside BibTeX's key set replaced by "-")."""
    if paper.citation_key:
        return paper.citation_key
    family = _family_name(paper.authors[0]) if paper.authors else ""
    year = str(paper.year or "").strip()
    if family and year.isdigit():
        words = (_ascii_word(word) for word in (paper.title or paper.handle).split())
        word = next((w for w in words if w and w not in _KEY_SKIP), "")
        return f"{family}{year}{word}"
    return re.sub(r"[^A-Za-z0-9_:.+/-]", "-", paper.id)


def _suffixes() -> Iterator[str]:
    """ "a" ... "z", "aa", "ab", ..."""
    for length in itertools.count(1):
        for letters in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=length):
            yield "".join(letters)


def unique_citation_key(key: str, member: Hashable, sharers: Sharers, own_key: bool = False) -> str:
    """The key of the paper `member`, whose citation key is `key`: the key itself when no other
    paper has it; else the key with the n-th usable suffix ("a", "b", ...) for the n-th of the
    papers sharing it (`sharers(key.casefold())`, in their order). A suffix is not usable when
    the key with it is another paper's own key, or could be made by a shorter shared key with a
    suffix of its own: so no two papers ever get the same key, and each key depends only on the
    papers sharing it. A key the input gave (`own_key`) is the user's and is kept as it is:
    a generated key it equals takes the suffix."""
    folded = key.casefold()
    sharing = sharers(folded)
    if len(sharing) <= 1 or own_key:
        return key
    position = list(sharing).index(member)
    usable = (
        suffix
        for suffix in _suffixes()
        if not sharers(folded + suffix)
        and not any(len(sharers(folded + suffix[:cut])) > 1 for cut in range(1, len(suffix)))
    )
    return key + next(itertools.islice(usable, position, None))


def unique_citation_keys(papers: Sequence[Paper]) -> dict[str, str]:
    """Every paper's unique key (by paper ID), the papers' order deciding the suffixes."""
    keys = [citation_key(paper) for paper in papers]
    by_key: dict[str, list[int]] = defaultdict(list)
    for position, key in enumerate(keys):
        by_key[key.casefold()].append(position)
    return {
        paper.id: unique_citation_key(
            key, position, lambda folded: by_key.get(folded, ()), own_key=bool(paper.citation_key)
        )
        for position, (paper, key) in enumerate(zip(papers, keys))
    }
