"""`papers add`, `papers remove` and `papers build --compact`: segments beside a live index."""

import json

import pytest

from corpus import PAPERS, write_corpus

NEW = [
    {
        "id": "dp3",
        "title": "Private Language Model Training at Scale",
        "abstract": "Differentially private training of language models with gradient clipping "
        "on many machines.",
    },
    {
        "id": "vid3",
        "title": "Aesthetic Video Assessment",
        "abstract": "Video aesthetic assessment with annotations of professional videos "
        "and quality models.",
    },
]


def _ids(result) -> list[str]:
    return [row["id"] for row in json.loads(result.output)]


@pytest.fixture
def added(built, workdir):
    write_corpus(workdir / "new", NEW)
    result = built("add", "new", "--no-compact")
    assert result.exit_code == 0, result.output
    return built


def test_add_encodes_only_the_new_papers_and_they_are_found(built, workdir, fake_model):
    write_corpus(workdir / "new", NEW)
    fake_model.encoded_texts.clear()
    result = built("add", "new", "--no-compact")
    assert result.exit_code == 0, result.output
    assert "added 2 papers" in result.output
    encoded = " ".join(fake_model.encoded_texts)
    assert (
        "Aesthetic Video Assessment" in encoded and "FlashDP" not in encoded
    )  # the base is not re-encoded
    assert (workdir / "indexes/default/SEGMENTS").is_file()
    assert "dp3" in _ids(built("like", "dp1", "--format", "json", "-k", "3"))
    assert _ids(built("search", "video aesthetic assessment", "--format", "json", "-k", "3"))[
        :1
    ] in (["vid3"], ["vid1"])
    assert "vid3" in _ids(
        built("search", "video aesthetic assessment", "--format", "json", "-k", "3")
    )
    assert json.loads(built("show", "dp3", "--format", "json").output)["id"] == "dp3"
    # A seed in the segment finds papers of the base.
    assert set(_ids(built("like", "dp3", "--format", "json", "-k", "2"))) == {"dp1", "dp2"}


def test_adding_the_same_file_again_adds_nothing(added):
    again = added("add", "new", "--no-compact")
    assert (
        again.exit_code == 0
        and "added 0 papers" in again.output
        and "2 already in the index" in again.output
    )
    assert _ids(added("like", "dp1", "--format", "json", "-k", "10")).count("dp3") == 1


def test_remove_leaves_tombstones_in_base_and_segment(added):
    result = added("remove", "dp2", "dp3")
    assert (result.exit_code, result.output) == (0, "removed 2 papers from default\n")
    found = _ids(added("like", "dp1", "--format", "json", "-k", "10"))
    assert "dp2" not in found and "dp3" not in found and found
    listed = [row["id"] for row in json.loads(added("list", "--format", "json").output)]
    assert sorted(listed) == ["dp1", "rnn1", "rnn2", "vid1", "vid2", "vid3"]
    facts = json.loads(added("info", "--format", "json").output)
    assert (facts["paper_count"], facts["segments"], facts["removed_papers"]) == (6, 1, 2)
    assert "papers:     6 (6 built, 2 added in 1 segments, 2 removed" in added("info").output
    assert "dp2" not in _ids(added("search", "private fine-tuning", "--format", "json", "-k", "10"))
    missing = added("show", "dp2")
    assert missing.exit_code != 0 and "removed" in missing.output
    again = added("add", "new", "--no-compact")  # a removed paper added again is found again
    assert again.exit_code == 0 and "added 1 paper " in again.output
    assert json.loads(added("show", "dp3", "--format", "json").output)["id"] == "dp3"
    assert added("remove", "dp3").exit_code == 0
    unknown = added("remove", "nope")
    assert unknown.exit_code != 0 and "nothing was removed" in unknown.output


def test_compact_gives_the_ranking_of_a_full_rebuild(added, workdir):
    assert added("remove", "rnn2").exit_code == 0
    before = {
        seed: _ids(added("like", seed, "--format", "json", "-k", "5"))
        for seed in ("dp1", "vid1", "dp3")
    }
    result = added("build", "--compact")
    assert result.exit_code == 0, result.output
    assert "encoded 0" in result.output  # every vector from the cache
    assert not (workdir / "indexes/default/SEGMENTS").exists()
    assert not (workdir / "indexes/default/segments").exists()
    compacted = {seed: _ids(added("like", seed, "--format", "json", "-k", "5")) for seed in before}
    assert "rnn2" not in sum(compacted.values(), [])
    # The same as a build of the same papers from scratch.
    write_corpus(workdir / "all", [paper for paper in PAPERS + NEW if paper["id"] != "rnn2"])
    assert added("build", "all", "--index", "fresh").exit_code == 0
    fresh = {
        seed: _ids(added("like", seed, "--format", "json", "-k", "5", "--index", "fresh"))
        for seed in before
    }
    assert compacted == fresh
    assert before == fresh  # dense and lexical statistics of six papers: the merge already agreed


def test_add_past_the_share_compacts(built, workdir):
    from recommender.index.segments import add_papers

    # 2 papers on a base of 6: past a tenth (the CLI compacts in the background:
    # tests/test_segments_crash.py)
    report = add_papers([write_corpus(workdir / "new", NEW)])
    assert report.compacted and report.added == 2
    assert not (workdir / "indexes/default/SEGMENTS").exists()
    assert json.loads(built("info", "--format", "json").output)["paper_count"] == 8


def test_add_to_a_missing_index_builds_it_and_says_so(papers_cli, workdir):
    write_corpus(workdir / "new", NEW)
    result = papers_cli("add", "new", "--index", "nothing-here")
    assert result.exit_code == 0, result.output
    assert result.stdout == "added 2 papers to nothing-here, a new index (encoded 2)\n"
    assert papers_cli("add", "new", "--index", "nothing-here").stdout.startswith(
        "added 0 papers to nothing-here (encoded 0; 2 already in the index)"
    )


def test_serve_picks_up_an_add_and_a_remove_without_a_failed_request(tmp_path, fake_model):
    import threading

    from serving import build_fake_index, start_server, wait_until

    from recommender.index.segments import add_papers, remove_papers

    index_dir = build_fake_index(tmp_path / "index", PAPERS)
    server = start_server(index_dir)
    failures, done = [], threading.Event()

    def hammer():
        while not done.is_set():
            for path in ("/api/like?id=dp1&k=8", "/api/search?q=video+aesthetic"):
                status, _, body = server.get(path)
                if status != 200:
                    failures.append((path, status, body[:200]))

    def listed() -> list[str]:
        return [row["id"] for row in server.json("/api/papers?limit=50")[1]]

    def liked() -> list[str]:
        return [row["id"] for row in server.json("/api/like?id=dp1&k=8")[1]]

    clients = [threading.Thread(target=hammer) for _ in range(2)]
    try:
        for client in clients:
            client.start()
        add_papers([write_corpus(tmp_path / "new", NEW)], index=index_dir, compact_share=None)
        wait_until(lambda: "dp3" in liked())
        remove_papers(["dp2"], index=index_dir)
        wait_until(lambda: "dp2" not in liked())
        assert sorted(listed()) == sorted({paper["id"] for paper in PAPERS + NEW} - {"dp2"})
    finally:
        done.set()
        for client in clients:
            client.join(60)
        server.stop()
    assert failures == []


def test_segments_rank_as_a_rebuild_of_the_same_papers(workdir, fake_model):
    """Three adds and a removal on 300 papers: every `like` and `search` in every mode lists the
    top 10
    of a build of the live papers from scratch."""
    import random

    from recommender import build_index
    from recommender.index.segments import add_papers, remove_papers
    from recommender.query.segmented import SegmentedIndex, open_index

    rng = random.Random(5)
    words = (
        "private gradient clipping language model video quality aesthetic annotation "
        "recurrent linear attention kernel graph spectral sparse solver retrieval dense "
        "embedding ranking fusion noise"
    ).split()
    papers = [
        {
            "id": f"p{i:03d}",
            "title": f"Study {i} of {rng.choice(words)} {rng.choice(words)}",
            "abstract": " ".join(rng.choice(words) for _ in range(rng.randint(8, 30))),
        }
        for i in range(330)
    ]
    build_index([write_corpus(workdir / "base", papers[:300])], index="segmented")
    for number in range(3):
        chunk = papers[300 + 10 * number : 310 + 10 * number]
        add_papers(
            [write_corpus(workdir / f"add{number}", chunk)], index="segmented", compact_share=None
        )
    remove_papers(["p007", "p305"], index="segmented")
    live = [paper for paper in papers if paper["id"] not in ("p007", "p305")]
    build_index([write_corpus(workdir / "all", live)], index="rebuilt")
    with open_index("segmented") as segmented, open_index("rebuilt") as rebuilt:
        assert isinstance(segmented, SegmentedIndex) and len(segmented.parts) == 4
        for mode in ("hybrid", "dense", "lexical"):
            for seed in ("p001", "p150", "p302", "p329"):
                found = [item.id for item in segmented.like(seed, k=10, mode=mode)]
                assert found == [item.id for item in rebuilt.like(seed, k=10, mode=mode)], (
                    mode,
                    seed,
                )
                assert "p007" not in found and "p305" not in found
            for text in (
                "gradient clipping noise",
                "video aesthetic annotation",
                "spectral graph solver",
            ):
                found, expected = segmented.search(text, k=10, mode=mode), rebuilt.search(
                    text, k=10, mode=mode
                )
                assert [item.id for item in found] == [item.id for item in expected], (mode, text)
                assert [item.score for item in found] == pytest.approx(
                    [item.score for item in expected], abs=1e-4
                )
        assert [item.id for item in segmented.like("p001", "p302", k=10)] == [
            item.id for item in rebuilt.like("p001", "p302", k=10)
        ]


def test_add_reads_json_lines_from_standard_input(built, workdir):
    from click.testing import CliRunner

    from recommender.cli import main

    lines = "".join(json.dumps(paper) + "\n" for paper in NEW)
    result = CliRunner().invoke(
        main, ["add", "-", "--no-compact"], input=lines, catch_exceptions=False
    )
    assert result.exit_code == 0 and "added 2 papers" in result.output
    assert "vid3" in _ids(
        built("search", "video aesthetic assessment", "--format", "json", "-k", "4")
    )


def test_add_sync_removes_the_papers_gone_from_their_source(built, workdir):
    """A source read again with --sync: the index's papers from it are exactly its papers now,
    for a file added earlier (a segment) as for the one the index was built from (its base)."""
    library = write_corpus(workdir / "library", NEW)
    assert built("add", str(library), "--no-compact").exit_code == 0
    third = {"id": "gnn3", "title": "Graph networks", "abstract": "Message passing on graphs."}
    write_corpus(workdir / "library", [NEW[0], third])  # vid3 deleted from the library
    result = built("add", str(library), "--sync", "--no-compact")
    assert result.exit_code == 0, result.output
    assert "added 1 paper " in result.output and "removed 1 gone from it" in result.output
    listed = {row["id"] for row in json.loads(built("list", "--format", "json").output)}
    assert listed == {paper["id"] for paper in PAPERS} | {"dp3", "gnn3"}
    # The base's own source, rebuilt without rnn2: synced through its recorded path.
    write_corpus(workdir / "in", [paper for paper in PAPERS if paper["id"] != "rnn2"])
    result = built("add", "in", "--sync", "--no-compact")
    assert result.exit_code == 0 and "added 0 papers" in result.output
    assert "removed 1 gone from it" in result.output
    assert "rnn2" not in _ids(built("like", "rnn1", "--format", "json", "-k", "10"))
    again = built("add", "in", "--sync", "--no-compact")  # idempotent: nothing more to do
    assert "added 0 papers" in again.output and "removed 0 gone from it" in again.output
    # Without --sync, nothing is removed; with standard input, --sync is refused.
    write_corpus(workdir / "library", [third])
    assert built("add", str(library), "--no-compact").exit_code == 0
    assert "dp3" in {row["id"] for row in json.loads(built("list", "--format", "json").output)}
    refused = built("add", "-", "--sync")
    assert refused.exit_code == 2 and "standard input" in refused.output


def test_a_segment_paper_with_words_the_base_lacks_scores_as_after_a_rebuild(workdir, fake_model):
    """An added paper's TF-IDF row counts the words only it uses in its norm, as a rebuild does:
    its lexical score for a query of shared words is the rebuild's."""
    from recommender import build_index
    from recommender.index.segments import add_papers
    from recommender.query.segmented import open_index

    words = "gradient clipping noise private model training video quality".split()
    base = [
        {"id": f"b{i:02d}", "title": f"Study {i}", "abstract": " ".join(words[i % 5 : i % 5 + 4])}
        for i in range(40)
    ]
    new = [
        {
            "id": f"n{i}",
            "title": f"Uniqueterm{i}",
            "abstract": f"gradient clipping noise unheardof{i} neverseen{i} rareword{i}",
        }
        for i in range(3)
    ]
    build_index([write_corpus(workdir / "base", base)], index="segmented")
    add_papers([write_corpus(workdir / "new", new)], index="segmented", compact_share=None)
    build_index([write_corpus(workdir / "all", base + new)], index="rebuilt")
    with open_index("segmented") as segmented, open_index("rebuilt") as rebuilt:
        found = {
            item.id: item.score
            for item in segmented.search("gradient clipping noise", k=43, mode="lexical")
        }
        expected = {
            item.id: item.score
            for item in rebuilt.search("gradient clipping noise", k=43, mode="lexical")
        }
    assert found.keys() == expected.keys()
    for paper_id in ("n0", "n1", "n2", "b00"):
        assert found[paper_id] == pytest.approx(expected[paper_id], rel=1e-4), paper_id


def test_an_add_runs_no_full_garbage_collection_a_rebuild_still_does(built, workdir, monkeypatch):
    """A full collection walks every object of the process (a third of a second in an add that
    loaded the model): it is for readers in reference cycles pinning an old version, and a
    segment has none; a rebuild, which has one to remove, still collects."""
    from recommender.index import writer

    collections = []
    monkeypatch.setattr(writer.gc, "collect", lambda *args: collections.append(args) or 0)
    write_corpus(workdir / "new", NEW)
    assert built("add", "new", "--no-compact").exit_code == 0
    assert collections == []
    assert built("build", "in").exit_code == 0
    assert len(collections) == 1


def test_a_paper_with_no_search_terms_is_added_with_an_empty_tfidf_row(built, workdir):
    """A paper whose text has no search term at all (only stop words) is added by a real `papers
    add` process, as a build would take it: found, shown, its TF-IDF row empty; lexical search and
    a compaction go on working."""
    from launching import finish, launch

    from recommender.errors import InputError
    from recommender.query.segmented import open_index

    write_corpus(workdir / "new", [{"id": "n1", "title": "Of the", "abstract": "And of the."}])
    code, out, err = finish(launch(workdir, "add", "new", "--no-compact"))
    assert code == 0 and "Traceback" not in err, err
    assert "added 1 paper" in out + err
    with open_index() as index:
        assert "n1" in {paper.id for paper in index.papers()}
        with pytest.raises(InputError, match="no words are left to match"):
            index.search("of the and", k=10, mode="lexical")
        assert [item.id for item in index.search("private language", k=2, mode="lexical")]
    code, out, err = finish(launch(workdir, "show", "n1"))
    assert code == 0 and "And of the." in out, err
    code, out, err = finish(launch(workdir, "build", "--compact"))
    assert code == 0 and "Traceback" not in err, err
    with open_index() as index:
        assert "n1" in {paper.id for paper in index.papers()}


def test_words_only_added_papers_use_rank_as_after_a_rebuild(workdir, fake_model):
    """Adds in three segments whose papers share words the base never uses: a search for those
    words, and a `like` of an added paper, list the top 10 of a build of every paper from
    scratch, and its scores in lexical mode: the words are weighed with the document frequencies
    and IDF a rebuild gives them."""
    import random

    from recommender import build_index
    from recommender.index.segments import add_papers
    from recommender.query.segmented import open_index

    rng = random.Random(11)
    old = (
        "gradient clipping language model video quality aesthetic annotation recurrent "
        "linear attention kernel graph spectral sparse solver retrieval dense"
    ).split()
    new = "diffusion quantum photonic enzyme glacier protein lattice".split()

    def paper(number: int, words: list[str], count: int) -> dict:
        return {
            "id": f"p{number:03d}",
            "title": f"Study {number}",
            "abstract": " ".join(rng.choice(words) for _ in range(count)),
        }

    papers = [paper(i, old, rng.randint(8, 20)) for i in range(200)]
    papers += [paper(200 + i, old + new * (1 + i % 3), rng.randint(8, 20)) for i in range(30)]
    build_index([write_corpus(workdir / "base", papers[:200])], index="segmented")
    for number in range(3):
        chunk = papers[200 + 10 * number : 210 + 10 * number]
        add_papers(
            [write_corpus(workdir / f"add{number}", chunk)], index="segmented", compact_share=None
        )
    build_index([write_corpus(workdir / "all", papers)], index="rebuilt")
    with open_index("segmented") as segmented, open_index("rebuilt") as rebuilt:
        for mode in ("lexical", "hybrid"):
            for seed in ("p201", "p215", "p229", "p010"):
                found = segmented.like(seed, k=10, mode=mode)
                expected = rebuilt.like(seed, k=10, mode=mode)
                assert [item.id for item in found] == [item.id for item in expected], (mode, seed)
                assert [item.score for item in found] == pytest.approx(
                    [item.score for item in expected], abs=1e-4
                ), (mode, seed)
            for text in ("diffusion quantum", "photonic enzyme glacier", "protein graph kernel"):
                found, expected = (
                    segmented.search(text, k=10, mode=mode),
                    rebuilt.search(text, k=10, mode=mode),
                )
                assert [item.id for item in found] == [item.id for item in expected], (mode, text)
                if mode == "lexical":  # hybrid's pool statistics differ by rounding
                    assert [item.score for item in found] == pytest.approx(
                        [item.score for item in expected], abs=1e-4
                    ), text
        counts, total = segmented.lexical.document_counts(["diffusion", "graph", "unknown"])
        assert (counts, total) == rebuilt.lexical.document_counts(["diffusion", "graph", "unknown"])
