"""The options of `like`, `search`, `build` and `info`, each checked for its effect.

Expected rankings are computed here from first principles (the stored vectors, scikit-learn's
TF-IDF, a greedy MMR), not pinned from an earlier run: a change to the ranking code that changes
what users get fails these tests.
"""

import json
import re

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
    # The embedding cache is the user's, shared by every index: the second index encodes nothing.
    assert built.stdout == f"indexed 6 papers in indexes/default: encoded 0, reused 6 from the cache ({kind} search)\n"
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
    from corpus import synthetic_papers
    from corpus import write_papers_jsonl as write

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
        "keeping this index's chunking 'windows': the chunking sentences (the default for new indexes) "
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
    assert re.search(rf"\nsize:       [0-9.]+ KB\nverified: {files} files match their checksums\n$", table.stdout)
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

    def half_map_then_fail(corpus_map, path, handle):
        handle.write(b"half a map")
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
    out = args[args.index("--out") + 1]  # a full disk names the file it could not write
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {out}: No space left on device\n")
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
    stale = workdir / f".papers-partial-{dead}-0badcafe"
    running = workdir / f".papers-partial-{os.getppid()}-0badcafe"  # a live process's unfinished file
    foreign = workdir / f".papers-partial-{dead}-0000cafe"  # another user's: never ours to remove
    linked = workdir / f".papers-partial-{dead}-1111cafe"  # a link: never followed nor removed
    for path in (stale, running, foreign):
        path.write_text("half a file")
    os.chown(foreign, 65534, 65534)
    linked.symlink_to(workdir / "elsewhere")
    assert built("related-work", "--all", "--out", "out.md").exit_code == 0
    assert sorted(p.name for p in workdir.iterdir() if "partial" in p.name) == sorted(
        [running.name, foreign.name, linked.name])


def test_sessions_out_is_absent_when_planning_fails(built, workdir):
    result = built("sessions", "--n", "9", "--out", "plan.md")
    assert (result.exit_code, result.stderr) == (2, "Error: Invalid value for '--n': cannot split 6 papers into 9 sessions: n must be 6 or fewer\n")
    assert not (workdir / "plan.md").exists()
    assert not [p.name for p in workdir.iterdir() if "partial" in p.name]


# ---------------------------------------------------------------- bad option values are bad usage (exit 2)
# Issue 23 item 12, issue 22 item 15.

# (case, arguments, exact stderr): exit 2, as click's own usage errors (`-k abc`)
USAGE_CASES = [
    ("-k -1", ["like", "dp1", "-k", "-1"], "Error: Invalid value for '-k': k must be at least 1, got -1"),
    ("search -k 0", ["search", "video", "-k", "0"], "Error: Invalid value for '-k': k must be at least 1, got 0"),
    ("related-work -k 0", ["related-work", "dp1", "-k", "0"], "Error: Invalid value for '-k': k must be at least 1, got 0"),
    ("--diverse 2", ["like", "dp1", "--diverse", "2"], "Error: Invalid value for '--diverse': diverse must be between 0 and 1 (1 = relevance only), got 2"),
    ("sessions --n 0", ["sessions", "--n", "0"], "Error: Invalid value for '--n': n (the number of sessions) must be at least 1, got 0"),
    ("sessions --n above the papers", ["sessions", "--n", "7"],
     "Error: Invalid value for '--n': cannot split 6 papers into 7 sessions: n must be 6 or fewer"),
    ("sessions --seed 2**31", ["sessions", "--n", "2", "--seed", str(2**31)],
     "Error: Invalid value for '--seed': seed must be between 0 and 2147483647 (FAISS takes a 32-bit seed), got 2147483648"),
    ("sessions --seed 2**64", ["sessions", "--n", "2", "--seed", str(2**64)],
     "Error: Invalid value for '--seed': seed must be between 0 and 2147483647 (FAISS takes a 32-bit seed), got 18446744073709551616"),
    ("sessions --seed -1", ["sessions", "--n", "2", "--seed", "-1"],
     "Error: Invalid value for '--seed': seed must be between 0 and 2147483647 (FAISS takes a 32-bit seed), got -1"),
    ("map --seed 2**32", ["map", "--out", "m.html", "--seed", str(2**32)],
     "Error: Invalid value for '--seed': seed must be between 0 and 2147483647 (FAISS takes a 32-bit seed), got 4294967296"),
    ("related-work IDs and --all", ["related-work", "dp1", "--all"],
     "Error: Invalid value for '--all': give paper IDs or all papers, not both"),
    ("list --limit 0", ["list", "--limit", "0"], "Error: Invalid value for '--limit': limit must be at least 1, got 0"),
    ("serve --port 70000", ["serve", "--port", "70000"],
     "Error: Invalid value for '--port': port must be 0..65535, got 70000"),
    ("list --where unknown field", ["list", "--where", "colour=red"],
     "Error: Invalid value for '--where': condition 'colour=red': unknown field 'colour': use FIELD=VALUE with FIELD one of category, year, venue "
     "(e.g. category=cs.LG, year>=2020)"),
    ("build --where that cannot be read", ["build", "in", "--where", "year"],
     "Error: Invalid value for '--where': condition 'year' cannot be read: use FIELD=VALUE with FIELD one of category, year, venue "
     "(e.g. category=cs.LG, year>=2020)"),
]


@pytest.mark.parametrize("args, message", [row[1:] for row in USAGE_CASES], ids=[row[0] for row in USAGE_CASES])
def test_bad_option_values_exit_2(built, workdir, args, message):
    result = built(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message + "\n")
    assert not (workdir / "m.html").exists()


def test_the_seed_range_ends_where_faiss_does(built):
    assert built("sessions", "--n", "2", "--seed", str(2**31 - 1), "--format", "json").exit_code == 0
    assert built("sessions", "--n", "2", "--seed", str(2**31), "--format", "json").exit_code == 2


# ---------------------------------------------------------------- messages that say what to do
# Issue 23 items 11-13.


def test_a_search_of_stop_words_says_no_words_are_left(built):
    result = built("search", "the of and a", "--mode", "lexical")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", (
        "Error: no words are left to match in 'the of and a' once common words (the, of, and, ...) and single letters "
        "are dropped: give words that say what the papers are about, or use mode hybrid\n"))
    result = built("search", "zebra quokka", "--mode", "lexical")
    assert (result.exit_code, result.stderr) == (1, (
        "Error: no paper of the index has any of the words of 'zebra quokka': try other words, or mode hybrid "
        "(which also ranks by meaning)\n"))
    assert built("search", "the of and", "--mode", "hybrid").exit_code == 0  # the meaning still ranks


def test_like_with_words_points_to_search(built):
    result = built("like", "graph neural networks")
    assert (result.exit_code, result.stderr) == (1, (
        "Error: no paper 'graph neural networks' in the index: see `papers list`; to rank papers by this text, "
        "run `papers search 'graph neural networks'`\n"))
    assert built("like", "FlashDB").stderr == "Error: no paper 'FlashDB' in the index: closest matches: FlashDP\n"


def test_a_missing_default_index_lists_the_others(papers_cli, workdir, monkeypatch):
    write_corpus(workdir / "in")
    assert papers_cli("build", "in", "--index", "iclr").exit_code == 0
    assert papers_cli("build", "in", "--index", "arxiv").exit_code == 0
    result = papers_cli("like", "dp1")
    assert (result.exit_code, result.stderr) == (1, (
        "Error: no index at indexes/default (names resolve under $PAPERS_HOME); the indexes there: arxiv, iclr: "
        "pick one by its name (or set PAPERS_INDEX=NAME), or run `papers build` to make 'default'\n"))
    monkeypatch.setenv("PAPERS_INDEX", "iclr")
    assert papers_cli("like", "dp1").exit_code == 0


def test_papers_home_names_a_user_data_folder_that_has_the_index(papers_cli, workdir, monkeypatch):
    data = workdir / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    write_corpus(workdir / "in")
    user_index = data / "papers" / "indexes" / "mine"
    assert papers_cli("build", "in", "--index", str(user_index)).exit_code == 0
    monkeypatch.setenv("PAPERS_HOME", str(workdir / "shared"))
    result = papers_cli("like", "dp1", "--index", "mine")
    assert (result.exit_code, result.stderr) == (1, (
        f"Error: no index at {workdir}/shared/mine (names resolve under $PAPERS_HOME); the user data folder has an "
        f"index 'mine' ({user_index}): unset $PAPERS_HOME or give the index by its path, {user_index}\n"))


# ---------------------------------------------------------------- indexes rm / mv, list --limit / --where
# Issue 23 item 14.


def test_indexes_rm_removes_an_index(built, workdir):
    write_corpus(workdir / "in")
    assert built("build", "in", "--index", "old").exit_code == 0
    result = built("indexes", "rm", "old")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "removed index old (indexes/old)\n")
    assert not (workdir / "indexes" / "old").exists()
    assert [row["name"] for row in json.loads(built("indexes", "--format", "json").stdout)] == ["default"]


def test_indexes_rm_keeps_what_papers_did_not_make(built, workdir):
    (workdir / "indexes" / "default" / "notes.txt").write_text("mine")
    (workdir / "indexes" / "default" / "v-final").mkdir()
    (workdir / "indexes" / "default" / "v-final" / "thesis.tex").write_text("mine")
    result = built("indexes", "rm", "default")
    assert (result.exit_code, result.stderr) == (
        0, "removed index default (indexes/default); kept what papers did not make there: notes.txt, v-final\n")
    assert sorted(p.name for p in (workdir / "indexes" / "default").iterdir()) == ["notes.txt", "v-final"]
    assert (workdir / "indexes" / "default" / "v-final" / "thesis.tex").read_text() == "mine"


# (case, what the folder holds, arguments, exact stderr)
NOT_AN_INDEX = [
    ("rm a folder of the user's", {"docs/thesis.tex": "mine", "docs/v-1/a.txt": "mine"}, ["rm", "./docs"],
     "Error: docs is not an index (no CURRENT naming a build with a manifest): nothing removed; give the name of an "
     "index (see `papers indexes`)"),
    ("rm a name that is not there", {}, ["rm", "nope"],
     "Error: no index at indexes/nope (names resolve under $PAPERS_HOME): run `papers build --index nope` first"),
    ("mv a folder of the user's", {"indexes/notes/a.txt": "mine"}, ["mv", "notes", "other"],
     "Error: indexes/notes is not an index (no CURRENT naming a build with a manifest): nothing renamed; give the "
     "name of an index (see `papers indexes`)"),
    ("mv onto an existing name", {"indexes/taken/a.txt": "mine"}, ["mv", "default", "taken"],
     "Error: indexes/taken already exists: choose another name, or remove it first"),
]


@pytest.mark.parametrize("files, args, message", [row[1:] for row in NOT_AN_INDEX], ids=[row[0] for row in NOT_AN_INDEX])
def test_indexes_rm_and_mv_refuse_what_is_not_an_index(built, workdir, files, args, message):
    for name, text in files.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text)
    before = sorted(str(p) for p in workdir.rglob("*"))
    result = built("indexes", *args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message + "\n")
    assert sorted(str(p) for p in workdir.rglob("*")) == before


def test_indexes_mv_renames_an_index(built, workdir):
    before = built("like", "dp1", "--format", "json").stdout
    result = built("indexes", "mv", "default", "iclr2020")
    assert (result.exit_code, result.stderr) == (0, "renamed index indexes/default to indexes/iclr2020\n")
    assert not (workdir / "indexes" / "default").exists()
    assert built("like", "dp1", "--format", "json", "--index", "iclr2020").stdout == before
    assert built("info", "--verify", "--index", "iclr2020").exit_code == 0


def test_list_limit_and_where(papers_cli, workdir):
    papers = [{"id": f"p{i}", "title": f"Paper {i}", "abstract": f"Words about topic {i}.", "year": 2018 + i % 4,
               "categories": ["cs.LG"] if i % 2 else ["cs.CL"]} for i in range(10)]
    write_corpus(workdir / "in", papers)
    assert papers_cli("build", "in").exit_code == 0

    def listed(*args):
        result = papers_cli("list", *args, "--format", "json")
        assert result.exit_code == 0, result.output
        return [row["id"] for row in json.loads(result.stdout)]

    assert listed("--limit", "3") == ["p0", "p1", "p2"]
    assert listed("--where", "category=cs.LG") == ["p1", "p3", "p5", "p7", "p9"]
    assert listed("--where", "category=cs.LG", "--where", "year>=2020") == ["p3", "p7"]
    assert listed("--where", "year=2021", "--limit", "1") == ["p3"]
    assert listed("--where", "category!=cs.*") == []


# ---------------------------------------------------------------- help and version to a full device; phases


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["indexes", "--help"], ["build", "--help"]])
def test_help_and_version_to_a_full_device_are_one_line(args):
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "recommender", *args], stdout=full, stderr=subprocess.PIPE,
                                text=True)
    assert (result.returncode, result.stderr) == (
        1, "Error: cannot write to standard output: No space left on device\n")


def test_a_slow_phase_of_a_small_build_is_logged(papers_cli, workdir, monkeypatch):
    """Under 100 papers a build is silent, unless a phase runs past a few seconds (a first model export)."""
    import time

    from recommender.cli import common
    from recommender.index import build

    monkeypatch.setenv("PAPERS_SLOW_PHASE_SECONDS", "0.2")

    def slow_export(model, writer, previous, on_phase=None, precision="fp32"):
        on_phase("exporting the model to ONNX (once per model)", None)
        time.sleep(1.0)

    monkeypatch.setattr(build, "prepare_query_encoder", slow_export)
    write_corpus(workdir / "in")
    result = papers_cli("build", "in")
    assert result.exit_code == 0, result.output
    phases = [line.split(":")[0].rstrip(".") for line in result.stderr.splitlines()]
    assert phases[:2] == ["exporting the model to ONNX (once per model)"] * 2
    assert result.stderr.splitlines()[1].startswith("exporting the model to ONNX (once per model): 1s")
    assert "encoding" in phases and "TF-IDF" in phases and "checksums" in phases
    monkeypatch.setattr(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None)
    monkeypatch.delenv("PAPERS_SLOW_PHASE_SECONDS")  # the default, 3 s
    assert common._slow_phase_seconds() == common.SLOW_PHASE_SECONDS == 3.0
    assert papers_cli("build", "in").stderr == ""  # quick: silent, as before
