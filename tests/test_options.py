"""The options of `like`, `search`, `build` and `info`, each checked for its effect.

Expected rankings are computed here from first principles (the stored vectors, scikit-learn's
TF-IDF, a greedy MMR), not pinned from an earlier run: a change to the ranking code that changes
what users get fails these tests.
"""

import json

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from corpus import PAPERS, long_id_papers, write_corpus
from recommender.query.ranking import DENSE_WEIGHT, POOL


def jsonl(result):
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def corpus_texts(index):
    return [paper.text for paper in index.papers()]


def tfidf(index):
    """scikit-learn's TF-IDF over the corpus, with the settings the index records (docs/ranking.md)."""
    vectorizer = TfidfVectorizer(strip_accents="unicode", lowercase=True, stop_words="english",
                                 token_pattern=r"(?u)\b[^\W\d_][^\W_]+\b", sublinear_tf=True)
    matrix = vectorizer.fit_transform(corpus_texts(index)).toarray()
    return vectorizer, matrix


def hybrid(dense, lexical, pool):
    """The hybrid score from first principles (docs/ranking.md): the window cosine and TF-IDF
    z-normalised over the candidate pool (every paper but the seeds here: fewer than POOL), mixed with
    DENSE_WEIGHT, then put on the window cosine's scale over the pool."""
    assert len(pool) < POOL
    z = lambda x: (x - x[pool].mean()) / x[pool].std()  # noqa: E731
    mixed = DENSE_WEIGHT * z(dense) + (1 - DENSE_WEIGHT) * z(lexical)
    return np.clip(dense[pool].mean() + z(mixed) * dense[pool].std(), -1, 1)


def expected_order(scores, ids, exclude=()):
    """(id, score) best first; ties by ID order in the index, as documented."""
    rows = [row for row in range(len(ids)) if ids[row] not in exclude]
    rows.sort(key=lambda row: (-round(float(scores[row]), 6), row))
    return [(ids[row], round(float(scores[row]), 4)) for row in rows]


# ---------------------------------------------------------------- lookup by unique ID prefix


@pytest.fixture
def long_ids(papers_cli, workdir):
    write_corpus(workdir / "in", long_id_papers())
    assert papers_cli("build", "in").exit_code == 0
    return papers_cli


@pytest.mark.parametrize("prefix, paper", [
    ("arXiv.2401.001", "arXiv.2401.00117"),
    ("ARXIV.2401.002", "arXiv.2401.00254"),  # any case
    ("arXiv.2402.1", "arXiv.2402.10042"),
    ("arxiv.2403.00066", "arXiv.2403.00066"),  # a whole ID in another case is a prefix of itself
])
def test_like_by_unique_id_prefix_is_like_by_id(long_ids, prefix, paper):
    by_prefix = long_ids("like", prefix, "-k", "3", "--format", "jsonl")
    assert by_prefix.output == long_ids("like", paper, "-k", "3", "--format", "jsonl").output
    assert paper not in [row["id"] for row in jsonl(by_prefix)]
    assert json.loads(long_ids("show", prefix, "--format", "json").stdout)["id"] == paper


def test_a_prefix_shared_by_several_papers_is_refused(long_ids):
    result = long_ids("like", "arXiv.2403")
    assert (result.exit_code, result.stderr) == (
        1, "Error: 'arXiv.2403' matches 2 papers: arXiv.2403.00051 (TFLA), arXiv.2403.00066 (Gated Linear RNNs): "
           "give more of the ID\n")


# ---------------------------------------------------------------- --mode, for like and search


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_search_mode_ranks_by_that_cosine(built, open_index, fake_model, mode):
    query = "video aesthetic quality of language models"
    index = open_index()
    dense = index.vectors @ fake_model.encode([query])[0]
    vectorizer, matrix = tfidf(index)
    lexical = matrix @ vectorizer.transform([query]).toarray()[0]
    scores = {"dense": dense, "lexical": lexical, "hybrid": hybrid(dense, lexical, np.arange(len(dense)))}[mode]
    rows = jsonl(built("search", query, "--mode", mode, "-k", "6", "--format", "jsonl"))
    assert [(row["id"], row["score"]) for row in rows] == expected_order(scores, index.ids)


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_like_mode_ranks_by_that_cosine(built, open_index, mode):
    index = open_index()
    dense = index.vectors @ index.vectors[0]
    _, matrix = tfidf(index)
    lexical = matrix @ matrix[0]
    scores = {"dense": dense, "lexical": lexical, "hybrid": hybrid(dense, lexical, np.arange(1, len(dense)))}[mode]
    rows = jsonl(built("like", "dp1", "--mode", mode, "-k", "5", "--format", "jsonl"))
    assert [(row["id"], row["score"]) for row in rows] == expected_order(scores, index.ids, exclude={"dp1"})


def test_the_modes_give_different_scores(built):
    scores = {mode: [row["score"] for row in jsonl(built("like", "dp1", "--mode", mode, "--format", "jsonl"))]
              for mode in ("dense", "lexical", "hybrid")}
    assert len({tuple(s) for s in scores.values()}) == 3


# ---------------------------------------------------------------- --diverse


def greedy_mmr(candidates, relevance, vectors, lambda_, k):
    """Carbonell & Goldstein's MMR, written out: each pick maximises
    lambda * relevance - (1 - lambda) * (highest cosine to a paper already picked)."""
    picked = []
    while len(picked) < min(k, len(candidates)):
        def value(c):
            redundancy = max((float(vectors[c] @ vectors[p]) for p in picked), default=0.0)
            return lambda_ * relevance[c] - (1 - lambda_) * redundancy
        picked.append(max((c for c in candidates if c not in picked), key=value))
    return picked


@pytest.mark.parametrize("lambda_", [0.1, 0.5, 0.8])
def test_diverse_reorders_by_maximal_marginal_relevance(built, open_index, lambda_):
    index = open_index()
    plain = jsonl(built("like", "dp1", "-k", "5", "--format", "jsonl"))
    relevance = {index.ids.index(row["id"]): row["score"] for row in plain}
    expected = greedy_mmr(list(relevance), relevance, index.vectors, lambda_, 5)
    diverse = jsonl(built("like", "dp1", "-k", "5", "--diverse", str(lambda_), "--format", "jsonl"))
    assert [row["id"] for row in diverse] == [index.ids[row] for row in expected]
    assert {row["id"]: row["score"] for row in diverse} == {row["id"]: row["score"] for row in plain}


def test_diverse_changes_the_list_and_1_changes_nothing(built):
    plain = built("like", "dp1", "-k", "5", "--format", "jsonl").output
    assert built("like", "dp1", "-k", "5", "--diverse", "1", "--format", "jsonl").output == plain
    ids = [row["id"] for row in jsonl(built("like", "dp1", "-k", "5", "--diverse", "0.5", "--format", "jsonl"))]
    assert ids[0] == "dp2"  # the most relevant paper still comes first
    assert ids != [row["id"] for row in jsonl(built("like", "dp1", "-k", "5", "--format", "jsonl"))]
    # vid2 is far from dp2, so it rises above the RNN papers, which resemble dp2 more
    assert ids.index("vid2") < ids.index("rnn1")


# ---------------------------------------------------------------- --exclude by handle


@pytest.mark.parametrize("lines", ["Private Fine-Tuning\n", "private fine-tuning\n", "dp2\n",
                                   "# already read\n  Private Fine-Tuning  \n\nnot-in-this-index\n"])
def test_exclude_by_id_or_handle(built, workdir, lines):
    (workdir / "read.txt").write_text(lines, encoding="utf-8")
    excluded = jsonl(built("like", "dp1", "--exclude", "read.txt", "--format", "jsonl"))
    everything = jsonl(built("like", "dp1", "--format", "jsonl"))
    assert [row["id"] for row in excluded] == [row["id"] for row in everything if row["id"] != "dp2"]
    searched = jsonl(built("search", "private fine-tuning", "--exclude", "read.txt", "--format", "jsonl"))
    assert "dp2" not in [row["id"] for row in searched] and len(searched) == 5


# ---------------------------------------------------------------- build --index-type, --chunking


@pytest.mark.parametrize("kind, search", [
    ("flat", "flat: exact inner-product search: 6 papers (requested)"),
    ("hnsw", "hnsw: approximate HNSW32 graph search, efSearch tuned for recall@10 >= 0.97: 6 papers (requested)"),
    ("ivf", "ivf: approximate IVF search (1 lists, float16 vectors), nprobe tuned for recall@10 >= 0.97: "
            "6 papers (requested)"),
])
def test_index_type_from_the_command_line(run, workdir, open_index, kind, search):
    write_corpus(workdir / "in")
    assert run("build", "in", "--index", "exact").exit_code == 0
    built = run("build", "in", "--index-type", kind)
    assert built.stdout == f"indexed 6 papers in indexes/default: encoded 6, reused 0 from the cache ({kind} search)\n"
    assert f"search:     {search}\n" in run("info").stdout
    import faiss

    stored = open_index().faiss_index
    assert type(stored) is {"flat": faiss.IndexFlatIP, "hnsw": faiss.IndexHNSWFlat,
                            "ivf": faiss.IndexIVFScalarQuantizer}[kind]
    # Six papers: the approximate indexes find the same lists as exact search.
    for args in (["like", "dp1", "-k", "5"], ["search", "video aesthetic", "-k", "5", "--mode", "dense"]):
        assert run(*args).output == run(*args, "--index", "exact").output


def test_hnsw_build_of_a_larger_corpus_tunes_and_finds_every_paper(workdir, open_index, fake_model):
    from recommender import build_index
    from test_incremental import synthetic_papers, write

    report = build_index([write(workdir / "p.jsonl", synthetic_papers(0, 300))], index_type="hnsw")
    assert report.index_kind == "hnsw"
    index = open_index()
    assert index.manifest["index"]["params"] == {"M": 32, "ef_construction": 80}
    assert index.faiss_index.hnsw.efSearch >= 16 and index.faiss_index.ntotal == 300
    for row in range(0, 300, 7):  # every paper's own text finds it first
        assert index.search(index.papers_at([row])[0].text, k=1, mode="dense")[0].id == index.ids[row]


def test_a_rebuild_keeps_the_index_chunking_unless_given(run, workdir, open_index):
    write_corpus(workdir / "in")
    assert run("build", "in", "--chunking", "windows").exit_code == 0  # as the previous default made it
    kept = run("build", "in")
    assert (kept.exit_code, kept.stdout, kept.stderr) == (
        0, "indexed 6 papers in indexes/default: encoded 0, reused 6 from the cache (flat search)\n",
        "keeping this index's chunking 'windows': --chunking sentences (the default for new indexes) "
        "would encode every paper again\n")
    assert open_index().manifest["chunking"]["strategy"] == "windows"
    changed = run("build", "in", "--chunking", "sentences")
    assert (changed.stdout, changed.stderr) == (
        "indexed 6 papers in indexes/default: encoded 6, reused 0 from the cache (flat search)\n", "")
    again = run("build", "in")  # the default's own chunking: kept without a word
    assert (again.stdout, again.stderr) == (
        "indexed 6 papers in indexes/default: encoded 0, reused 6 from the cache (flat search)\n", "")
    assert run("build", "in", "--index", "fresh").exit_code == 0
    assert open_index("fresh").manifest["chunking"]["strategy"] == "sentences"  # a new index: the default


def test_chunking_truncate_embeds_only_the_first_window(run, workdir, open_index, fake_model):
    abstract = " ".join(["privacy"] * 45 + ["sparsification"] * 200)  # the first window is all "privacy"
    papers = PAPERS + [{"id": "long", "title": "Private training", "abstract": abstract}]
    write_corpus(workdir / "in", papers)
    assert run("build", "in", "--index", "windows").exit_code == 0
    assert run("build", "in", "--chunking", "truncate").exit_code == 0
    assert "long texts: truncated at the model's window\n" in run("info").stdout
    truncated, windows = open_index(), open_index("windows")
    assert truncated.manifest["chunking"]["strategy"] == "truncate"
    row = truncated.ids.index("long")
    text = truncated.papers_at([row])[0].text
    np.testing.assert_allclose(truncated.vectors[row], fake_model.encode([text])[0], atol=1e-6)
    # Windows see the long tail too: that paper's vector differs; short papers' vectors do not.
    assert float(windows.vectors[row] @ truncated.vectors[row]) < 0.5
    np.testing.assert_allclose(windows.vectors[1], truncated.vectors[1], atol=1e-6)
    # The query is cut like the papers were.
    query = " ".join(["sparsification"] * 40 + ["privacy"] * 80)  # cut, the query is all "sparsification"
    cut = fake_model.encode([query])[0]  # the fake encoder reads the first 40 words only
    for found in truncated.search(query, k=7, mode="dense"):
        assert found.score == pytest.approx(float(truncated.vectors[truncated.ids.index(found.id)] @ cut), abs=1e-5)
    assert windows.search(query, k=1, mode="dense")[0].id == "long"  # its windows share the query's "privacy"


# ---------------------------------------------------------------- info --verify --format json


def test_info_verify_json_is_pure_json(built, open_index):
    files = len(open_index().manifest["files"])
    result = built("info", "--verify", "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["paper_count"] == 6
    assert result.stderr == f"verified: {files} files match their checksums\n"
    table = built("info", "--verify")
    assert table.stdout.endswith(f"size:       0.0 MB\nverified: {files} files match their checksums\n")
    assert table.stderr == ""


# ---------------------------------------------------------------- --out is written whole or not at all


@pytest.fixture
def failing_writer(monkeypatch):
    """Renderers that write half their output, then fail as a full disk would."""
    from recommender.render import map as map_render, related

    def half_then_fail(*args, **kwargs):
        handle = next((a for a in args if hasattr(a, "write")), None)
        if handle is not None:
            handle.write("half a file")
        raise OSError(28, "No space left on device")

    def half_map_then_fail(corpus_map, path):
        path.write_text("half a map")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(related, "write_related", half_then_fail)
    monkeypatch.setattr(map_render, "write_map", half_map_then_fail)


@pytest.mark.parametrize("args", [
    ["related-work", "--all", "--out", "out.md"],
    ["map", "--out", "out.html", "--n", "2"],
])
def test_out_is_absent_after_a_failure(built, workdir, failing_writer, args):
    before = sorted(p.name for p in workdir.iterdir())
    result = built(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "Error: No space left on device\n")
    assert sorted(p.name for p in workdir.iterdir()) == before


@pytest.mark.parametrize("args", [
    ["related-work", "--all", "--out", "out.md"],
    ["map", "--n", "2", "--out", "out.html"],
])
def test_out_keeps_its_old_content_after_a_failure(built, workdir, failing_writer, args):
    out = workdir / args[-1]
    out.write_text("yesterday's version")
    result = built(*args)
    assert result.exit_code == 1
    assert out.read_text() == "yesterday's version"
    assert not [p.name for p in workdir.iterdir() if "partial" in p.name]


def test_out_removes_what_a_killed_run_left_and_spares_a_running_ones(built, workdir):
    import os
    import subprocess
    import sys

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)  # a process that has exited: its PID names no process now (the test's own
    # children are reaped, and PIDs are not reused this quickly)
    stale = workdir / f".out.partial-{dead}.md"
    running = workdir / f".out.partial-{os.getppid()}.md"  # a live process's unfinished file
    other = workdir / f".other.partial-{dead}.md"  # another output's: not this run's business
    for path in (stale, running, other):
        path.write_text("half a file")
    assert built("related-work", "--all", "--out", "out.md").exit_code == 0
    assert sorted(p.name for p in workdir.iterdir() if "partial" in p.name) == sorted([running.name, other.name])


def test_sessions_out_is_absent_when_planning_fails(built, workdir):
    result = built("sessions", "--n", "9", "--out", "plan.md")
    assert (result.exit_code, result.stderr) == (2, "Error: cannot split 6 papers into 9 sessions: use --n 6 or fewer\n")
    assert not (workdir / "plan.md").exists()
    assert not [p.name for p in workdir.iterdir() if "partial" in p.name]
