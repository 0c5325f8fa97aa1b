"""A ranking's options as one value (query.ranking.RankingRequest), taken by `like`, `like_rows`
and `search` alike, or made from their keywords as before."""

from __future__ import annotations

import pytest
from conftest import opened_fake_index
from corpus import PAPERS

from recommender import RankingRequest
from recommender.errors import OptionError


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    with opened_fake_index(tmp_path_factory.mktemp("ranking"), PAPERS) as opened:
        yield opened


def listed(results):
    return [(r.paper.id, round(r.score, 6), r.why, r.because) for r in results]


def test_a_request_ranks_as_its_keywords_do(index):
    ranking = RankingRequest(k=3, mode="lexical", why=True)
    assert listed(index.like("dp1", ranking=ranking)) == listed(
        index.like("dp1", k=3, mode="lexical", why=True))
    assert listed(index.like_rows([0, 2], ranking=ranking)) == listed(
        index.like_rows([0, 2], k=3, mode="lexical", why=True))
    assert len(index.like("dp1", ranking=ranking)) == 3


def test_a_request_is_checked_where_it_is_made(index):
    with pytest.raises(OptionError, match="k must be at least 1"):
        RankingRequest.of(k=0)
    with pytest.raises(OptionError, match="unknown mode"):
        index.like("dp1", ranking=RankingRequest(mode="psychic"))
    with pytest.raises(TypeError, match="not both"):
        index.like("dp1", ranking=RankingRequest(), k=3)
    with pytest.raises(TypeError):
        index.like("dp1", colour="red")
