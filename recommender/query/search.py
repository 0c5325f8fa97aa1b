"""Papers about a free text: `search`."""

from __future__ import annotations

from collections.abc import Sequence

from ..corpus.papers import Paper
from ..errors import InputError
from .lookups import IndexLookups, printable
from .opened import check_text
from .pooling import Query, Recommendation, rank_candidates
from .ranking import RankingRequest


class TextSearch(IndexLookups):
    """Papers about a free text, over an opened index (a part of `PaperIndex`)."""

    def search(
        self,
        text: str,
        exclude: Sequence[str] = (),
        *,
        ranking: RankingRequest | None = None,
        **options,
    ) -> list[Recommendation]:
        """Papers about a free text, never those of `exclude`, ranked as `ranking` says, else as the
        keywords `options` say (query.ranking.RankingRequest: k=10, mode="hybrid", min_score,
        diverse, why)."""
        if not text or not text.strip():
            raise InputError("empty search text: give some words to search for")
        check_text(text, "search text")
        ranking = RankingRequest.of(ranking, **options)
        mode, why = ranking.mode, ranking.why
        dense_query = self.encode_query(text) if mode != "lexical" else None
        lexical_query = self.lexical.transform(text) if (mode != "dense" or why) else None
        if mode == "lexical" and lexical_query is not None and len(lexical_query.indices) == 0:
            raise InputError(self._nothing_to_match(text))
        queries = [Query(dense_query, lexical_query)]
        results = rank_candidates(self, queries, ranking, set(), self.excluded_rows(exclude))
        if not why or not results:
            return results
        return self.with_reasons(results, [(None, Paper("", "", text))])

    def _nothing_to_match(self, text: str) -> str:
        """Why a text has no TF-IDF terms: stop words only (`the of and`), or words no paper has."""
        from ..index.lexical import analyse

        shown = printable(text.strip())
        if not analyse(text, self.lexical.stop_words):
            return (
                f"no words are left to match in '{shown}' once common words (the, of, and, ...) and"
                " single letters are dropped: give words that say what the papers are about, or"
                " use mode hybrid"
            )
        return (
            f"no paper of the index has any of the words of '{shown}': try other words, or mode"
            " hybrid (which also ranks by meaning)"
        )
