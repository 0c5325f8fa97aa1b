"""A build's settings as one value (index/request.py) and its stages, each on its own
(index/stages.py, build.encode_papers), with the fake encoder and a real index folder."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
from corpus import PAPERS, write_corpus

from recommender.embed.choice import EncoderRequest, choose_encoder
from recommender.embed.windows import Chunking
from recommender.errors import InputError, OptionError
from recommender.index import build, stages
from recommender.index.keys import ALIASES
from recommender.index.layout import FAISS, VOCABULARY
from recommender.index.lexical import TfidfBuilder
from recommender.index.request import (
    BuildHooks,
    BuildRequest,
    check_build_request,
    kept_from_index,
)
from recommender.index.spool import PaperSpool
from recommender.index.writer import writing


def test_keyword_arguments_become_one_request():
    request = BuildRequest.of(["a.bib"], "mine", model="static", precision="fp32",
                              chunking=Chunking("truncate"), where=["year>=2020"], wait=True)
    assert request.inputs == ("a.bib",) and request.index == "mine" and request.wait
    assert request.encoder == EncoderRequest("static", "fp32", chunking=Chunking("truncate"))
    assert request.where == ("year>=2020",)
    with pytest.raises(dataclasses_frozen()):
        request.wait = False  # type: ignore[misc]
    with pytest.raises(TypeError, match="colour"):
        BuildRequest.of([], colour="red")


def dataclasses_frozen():
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_a_request_is_checked_before_anything_is_read(workdir):
    with pytest.raises(InputError, match="chunk size must be a positive whole number"):
        check_build_request(BuildRequest.of([], "x", chunk_size=0))
    with pytest.raises(OptionError, match="unknown engine"):
        check_build_request(BuildRequest.of([], "x", engine="mainframe"))
    assert check_build_request(BuildRequest.of([], workdir / "new")) == workdir / "new"
    assert not (workdir / "new").exists()


def test_unset_settings_are_the_index_own(fake_model):
    record = {"model": "static", "precision": "int8", "chunking": {"strategy": "truncate"},
              "map_layout": "umap"}
    notices: list[str] = []
    filled, encoding = kept_from_index(BuildRequest(), record, notices.append, "idx")
    assert filled.map_layout is True
    assert (filled.encoder.model, filled.encoder.chunking) == ("static", Chunking("truncate"))
    assert filled.encoder.precision == encoding.precision
    assert any("keeping this index's model static" in line for line in notices)
    given = BuildRequest.of([], map_layout=False, chunking=Chunking("windows"))
    filled, _ = kept_from_index(given, record, None, "idx")
    assert filled.map_layout is False and filled.encoder.chunking == Chunking("windows")
    new, _ = kept_from_index(BuildRequest(), None)  # a new index: the defaults
    assert new.map_layout is False and new.encoder.chunking == Chunking()


@contextlib.contextmanager
def a_build(folder):
    """A real build folder of an index (locked), its files and a spool of its papers."""
    with writing(folder) as writer, contextlib.ExitStack() as files:
        spool = PaperSpool(files.enter_context(writer.scratch_file("papers.jsonl")), 2)
        yield writer, files, spool


def read(workdir, papers, **settings):
    """The read and merge stages on a corpus of `papers`."""
    request = BuildRequest.of([write_corpus(workdir / "in", papers)], workdir / "i", **settings)
    return request


def test_read_keeps_what_the_request_picks_and_merge_names_the_duplicates(workdir):
    twice = [*PAPERS, {**PAPERS[0], "id": "dp1-again"}]
    tagged = [dict(paper, categories=["cs.CV" if "vid" in paper["id"] else "cs.LG"])
              for paper in twice]
    request = read(workdir, tagged, where=["category=cs.CV"])
    with a_build(workdir / "i") as (_, _, spool):
        chosen, left_out = stages.read_inputs(request, workdir / "i", spool)
        assert chosen.ids == ["vid1", "vid2"] and len(spool) == 2 and left_out == {}
    request = read(workdir, twice)
    with a_build(workdir / "i") as (_, _, spool), pytest.warns(UserWarning, match="kept once"):
        chosen, _ = stages.read_inputs(request, workdir / "i", spool)
        kept = stages.merge_duplicates(chosen, {"old-id": "rnn1"})
    assert kept.ids == [paper["id"] for paper in PAPERS]
    assert kept.aliases == {"dp1-again": "dp1", "old-id": "rnn1"}
    assert len(kept.handles) == len(kept.ids)


def test_own_papers_replace_the_inputs(workdir):
    from recommender.corpus.papers import Paper

    paper = Paper.from_dict({**PAPERS[2], "source": "s"})
    request = BuildRequest(own_papers=lambda: (each for each in [paper]))
    with a_build(workdir / "i") as (_, _, spool):
        chosen, _ = stages.read_inputs(request, workdir / "i", spool)
    assert chosen.ids == ["vid1"]


def encoded(workdir, fake_model):
    """The stages up to encoding, on the small corpus: what the later stages are given."""
    request = read(workdir, PAPERS)
    encoding = choose_encoder(request.encoder, None)
    return request, encoding


def test_encode_gives_every_paper_a_vector_and_reuses_the_cache(workdir, fake_model):
    request, encoding = encoded(workdir, fake_model)
    phases: list = []
    for expected in (len(PAPERS), 0):  # the second time every vector is in the cache
        with a_build(workdir / "i") as (writer, files, spool):
            chosen, _ = stages.read_inputs(request, workdir / "i", spool)
            hooks = BuildHooks(on_phase=lambda name, total: phases.append((name, total)))
            _, embedded = build.encode_papers(encoding, spool.texts(), None, writer, files, hooks)
            vectors = embedded.vectors.read(0, len(PAPERS))
        assert vectors.shape == (len(PAPERS), fake_model.dimension)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
        assert (embedded.encoded, embedded.reused) == (expected, len(PAPERS) - expected)
    assert phases == [("encoding", len(PAPERS))]


def test_search_lexical_and_map_stages_write_their_files(workdir, fake_model):
    request, encoding = encoded(workdir, fake_model)
    with a_build(workdir / "i") as (writer, files, spool):
        chosen, left_out = stages.read_inputs(request, workdir / "i", spool)
        kept = stages.merge_duplicates(chosen, {"other": "dp1"})
        tfidf = files.enter_context(TfidfBuilder(writer.scratch_file, None))
        stages.write_paper_files(writer, spool, kept, tfidf, left_out)
        _, embedded = build.encode_papers(encoding, spool.texts(), None, writer, files,
                                          BuildHooks())
        search = stages.build_search_index(writer, embedded.vectors, "flat", None, BuildHooks())
        terms = stages.write_lexical(writer, tfidf, files, kept.aliases)
        notices: list[str] = []
        assert stages.write_map_layout(writer, embedded.vectors, False,
                                       BuildHooks(notice=notices.append)) is None
        assert (search.kind, search.trained_on) == ("flat", len(PAPERS))
        assert writer.path(FAISS).stat().st_size > 0
        vocabulary = json.loads(writer.path(VOCABULARY).read_text())
        assert terms == len(vocabulary) and "private" in vocabulary
        assert json.loads(writer.path(ALIASES).read_text()) == {"other": "dp1"}
        assert writer.path("papers.jsonl").read_text().count("\n") == len(PAPERS)


def test_the_manifest_describes_what_the_stages_built():
    search = stages.SearchIndex("flat", {}, "small", "IndexFlatIP", 6)
    built = stages.Built({"model": "m", "model_identity": "fake:m", "precision": "fp32",
                          "chunking": {"strategy": "sentences"}}, 256, 6, "abc", search, 40, None,
                         4, 2, None, {"abstract": 6})
    manifest = stages.manifest_of(BuildRequest(built_by="evaluate"), built, "2026-01-01")
    assert (manifest["built_by"], manifest["paper_count"], manifest["dimension"]) == (
        "evaluate", 6, 256)
    assert manifest["index"]["description"] == "IndexFlatIP"
    assert (manifest["encoded"], manifest["reused"], manifest["lexical"]["terms"]) == (4, 2, 40)
    assert "map_layout" not in manifest and manifest["text_from"] == {"abstract": 6}


def test_build_index_takes_a_request_or_its_keywords_alike(workdir, fake_model):
    corpus = write_corpus(workdir / "in", PAPERS)
    by_keywords = build.build_index([corpus], workdir / "a", index_type="flat")
    by_request = build.build_index(request=BuildRequest((corpus,), workdir / "b",
                                                        index_type="flat"))
    assert (by_keywords.papers, by_keywords.index_kind) == (by_request.papers, "flat")
    assert by_request.reused == len(PAPERS)  # the same vectors, from the shared cache
