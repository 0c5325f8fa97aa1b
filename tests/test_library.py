"""The Python library on the six-paper corpus: build, open, resolve references, like, search."""

import json

import numpy as np
import pytest

from corpus import PAPERS, long_id_papers, write_corpus
from recommender import build_index
from recommender.embed.windows import Chunking, embed_texts, split_windows
from recommender.errors import IndexMismatchError, IndexMissingError, PaperNotFoundError
from recommender.index.layout import FORMAT_VERSION, MANIFEST
from recommender.query import lookups


@pytest.fixture
def index(open_index, workdir, fake_model):
    build_index([write_corpus(workdir / "in")])
    return open_index()


def test_build_reports_encoded_then_reused(workdir, fake_model):
    corpus = write_corpus(workdir / "in")
    first = build_index([corpus])
    assert (first.papers, first.encoded, first.reused) == (6, 6, 0)
    fake_model.encoded_texts.clear()
    second = build_index([corpus])
    assert (second.papers, second.encoded, second.reused) == (6, 0, 6)
    assert fake_model.encoded_texts == []


def test_adding_a_file_encodes_only_the_new_papers(workdir, fake_model):
    corpus = write_corpus(workdir / "in")
    build_index([corpus])
    extra = write_corpus(workdir / "in", [{"id": "new", "abstract": "Graph sparsification with spectral bounds."}], "extra.jsonl")
    report = build_index([corpus, extra])
    assert (report.papers, report.encoded, report.reused) == (7, 1, 6)


def test_a_duplicate_paper_warning_names_the_callers_line(workdir, fake_model):
    """A Python caller sees the warning at its own call (build_index, read_papers, add_papers), not
    at a line of the package's stages that it never wrote."""
    import warnings

    from recommender import read_papers
    from recommender.corpus.papers import DuplicatePaperWarning
    from recommender.index.segments import add_papers

    twice = [dict(PAPERS[0], id="first"), dict(PAPERS[0], id="again")]
    corpus = write_corpus(workdir / "in", twice)
    later = write_corpus(workdir / "in", [dict(PAPERS[0], id="later")], "later.jsonl")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        build_index([corpus])
        read_papers([corpus])
        add_papers([later])
    shown = [(w.filename, w.lineno) for w in seen if issubclass(w.category, DuplicatePaperWarning)]
    assert len(shown) == 3, [str(w.message) for w in seen]
    assert {filename for filename, _ in shown} == {__file__}, shown


def test_index_round_trip(index):
    assert len(index) == 6
    assert index.ids == [p["id"] for p in PAPERS]
    assert index.handles == ["FlashDP", "Private Fine-Tuning", "VADB", "Video Quality Models", "TFLA", "Gated Linear RNNs"]
    assert index.vectors.shape == (6, 256)
    np.testing.assert_allclose(np.linalg.norm(index.vectors, axis=1), 1.0, rtol=1e-5)
    paper = index.show("dp1")
    assert paper.title == "FlashDP: Fast Private Training"
    assert paper.code_links == ("https://github.com/lab/flashdp",)
    assert [p.id for p in index.papers()] == index.ids


def test_manifest_describes_the_build(index):
    info = index.info()
    assert info["model"] == "all-MiniLM-L6-v2"
    assert info["dimension"] == 256
    assert info["paper_count"] == 6
    assert info["format_version"] == FORMAT_VERSION
    assert info["chunking"] == {"strategy": "sentences", "overlap": 32, "max_tokens": 40}
    assert info["index"]["kind"] == "flat"
    assert set(index.manifest["files"]) >= {"vectors.npy", "faiss.index", "papers.jsonl", "keys/ids_bytes.npy", "keys/id_rank.npy"}


def test_index_from_another_model_is_refused(open_index, index):
    with pytest.raises(IndexMismatchError) as caught:
        open_index(model="other-model")
    assert str(caught.value) == (
        "index indexes/default was built with model 'all-MiniLM-L6-v2', not 'other-model': "
        "run `papers build --model other-model` to rebuild it"
    )


def test_newer_format_version_is_refused(open_index, index):
    manifest_path = index.stored.path(MANIFEST)
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match=r"format version 99.*newer papers.*papers build"):
        open_index()


def test_no_index_says_what_to_run(open_index, workdir):
    with pytest.raises(IndexMissingError) as caught:
        open_index()
    assert str(caught.value) == "no index at indexes/default (names resolve under $PAPERS_HOME): run `papers build` first"


@pytest.mark.parametrize("reference, row", [("dp1", 0), ("FLASHDP", 0), ("flashdp", 0), ("vid2", 3), ("TFLA", 4)])
def test_resolve_by_id_or_handle(index, reference, row):
    assert index.resolve(reference) == row


@pytest.mark.parametrize("reference, row", [
    ("arXiv.2401.00117", 0), ("arXiv.2401.001", 0), ("ARXIV.2401.002", 1), ("arxiv.2402.1", 3), ("arXiv.2403.0005", 4),
    ("tfla", 4),  # a handle still wins
])
def test_resolve_by_unique_id_prefix(open_index, workdir, fake_model, reference, row):
    build_index([write_corpus(workdir / "in", long_id_papers())])
    assert open_index().resolve(reference) == row


@pytest.mark.parametrize("reference, message", [
    ("FlashDB", "no paper 'FlashDB' in the index: closest matches: FlashDP"),
    ("vid", "'vid' matches 2 papers: vid1 (VADB), vid2 (Video Quality Models): give more of the ID"),
    ("dp1x", "no paper 'dp1x' in the index: closest matches: dp1"),  # longer than an ID is not a prefix
])
def test_unknown_or_ambiguous_reference(index, reference, message):
    with pytest.raises(PaperNotFoundError) as caught:
        index.resolve(reference)
    assert str(caught.value) == message


@pytest.mark.parametrize("reference, message", [
    ("FlashDB", "no paper 'FlashDB' in the index: closest matches: FlashDP, FlashDP-13, FlashDP-12"),
    ("dp1x", "no paper 'dp1x' in the index: closest matches: dp1"),
    ("Gated linear RNS", "no paper 'Gated linear RNS' in the index: closest matches: Gated Linear RNNs, "
                         "Gated Linear RNNs 95, Gated Linear RNNs 89"),
    ("Gaited Linear RNNs", "no paper 'Gaited Linear RNNs' in the index: closest matches: Gated Linear RNNs, "
                           "Gated Linear RNNs 11, Gated Linear RNNs 113"),  # sorts next to it
    ("Xated Linear RNNs", "no paper 'Xated Linear RNNs' in the index: see `papers list`"),  # sorts far: none
])
def test_a_large_index_suggests_names_near_the_reference_without_reading_them_all(
        workdir, fake_model, open_index, monkeypatch, reference, message):
    # Past CLOSEST_SCAN papers, the names sorted next to the reference (and to its first half).
    build_index([write_corpus(workdir / "in", [dict(PAPERS[i % 6], id=f"p{i:03d}", title=f"{PAPERS[i % 6]['title']} {i}",
                                                   abstract=f"{PAPERS[i % 6]['abstract']} Copy {i}.") for i in range(300)]
                              + PAPERS)])
    index = open_index()
    monkeypatch.setattr(lookups, "CLOSEST_SCAN", 100)
    monkeypatch.setattr(lookups, "CLOSEST_NEAR", 5)
    monkeypatch.setattr(index.keys, "all_ids", lambda: pytest.fail("read every ID"))
    monkeypatch.setattr(index.keys, "all_handles", lambda: pytest.fail("read every handle"))
    with pytest.raises(PaperNotFoundError) as caught:
        index.resolve(reference)
    if " " in reference:  # words: the message also says what ranks papers by text
        message += f"; to rank papers by this text, run `papers search '{reference}'`"
    assert str(caught.value) == message


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_like_never_returns_the_query_and_finds_the_topic_twin(index, mode):
    for paper_id, twin in [("dp1", "dp2"), ("vid1", "vid2"), ("rnn1", "rnn2")]:
        results = index.like(paper_id, k=5, mode=mode)
        ids = [r.id for r in results]
        assert paper_id not in ids
        assert ids[0] == twin
        assert [r.rank for r in results] == list(range(1, len(results) + 1))
        assert all(a.score >= b.score for a, b in zip(results, results[1:]))


def test_like_k_larger_than_index_returns_every_other_paper(index):
    assert len(index.like("dp1", k=50)) == 5


def test_like_several_papers_excludes_every_seed(index):
    results = index.like("dp1", "vid1", k=10, not_=["rnn1"])
    ids = [r.id for r in results]
    assert not {"dp1", "vid1", "rnn1"} & set(ids)
    assert ids[-1] == "rnn2"  # the negative's twin sinks to the bottom


def test_exclude_and_min_score(index):
    assert "dp2" not in [r.id for r in index.like("dp1", exclude=["dp2"])]
    results = index.like("dp1", min_score=0.2)
    assert results and all(r.score >= 0.2 for r in results)


def test_why_gives_shared_terms(index):
    (first,) = index.like("dp1", k=1, why=True)
    assert first.id == "dp2"
    assert "differentially private" in first.why or "private" in first.why
    assert first.to_dict()["why"] == list(first.why)


def test_search_free_text(index):
    results = index.search("video aesthetic assessment", k=2)
    assert {r.id for r in results} == {"vid1", "vid2"}


def test_results_to_dict_has_the_json_fields(index):
    data = index.like("dp1", k=1)[0].to_dict()
    assert set(data) >= {"id", "score", "title", "handle", "rank", "snippet", "code_links"}


def test_split_windows_cover_long_text_without_loss(fake_model):
    text = " ".join(f"w{i}" for i in range(100))
    windows = split_windows(text, fake_model.token_spans(text), max_tokens=40, overlap=10)
    assert [count for _, count in windows] == [40, 40, 40]
    assert windows[0][0].startswith("w0 ") and windows[-1][0].endswith("w99")
    words = set(" ".join(piece for piece, _ in windows).split())
    assert words == set(text.split())


def test_long_text_is_pooled_from_windows_not_truncated(fake_model):
    head = " ".join(["alpha"] * 40)
    tail = " ".join(["omega"] * 200)
    windowed = embed_texts(fake_model, [head + " " + tail], Chunking("windows")).vectors[0]
    truncated = embed_texts(fake_model, [head + " " + tail], Chunking("truncate")).vectors[0]
    only_tail = embed_texts(fake_model, [tail], Chunking("truncate")).vectors[0]
    assert windowed @ only_tail > 0.9  # most of the text is "omega"
    assert truncated @ only_tail < 0.5  # the fake model, like the real one, sees only the first window


def test_lookups_read_no_stored_header_again(index, monkeypatch):
    """A lookup reads the rows it needs, not the files' headers again (numpy parses each with `ast`):
    after the first lookup of a version, no stored array is opened for its header."""
    from recommender.index.stored import StoredIndex

    first = index.like("dp1", k=3)
    opened = []
    original = StoredIndex.load_array
    monkeypatch.setattr(StoredIndex, "load_array",
                        lambda self, name, mmap=False: opened.append(name) or original(self, name, mmap))
    for _ in range(3):
        assert [item.id for item in index.like("dp1", k=3)] == [item.id for item in first]
        index.search("differential privacy", k=3)
    assert opened == []
