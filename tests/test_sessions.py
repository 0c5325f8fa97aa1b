"""sessions: groups of similar papers, sizes, labels, order, output and errors."""

import csv
import io
import json
import re

import numpy as np
import pytest

from conftest import opened_fake_index
from corpus import TOPICS, synthetic_papers, topic_papers, write_corpus
from recommender.errors import InputError
from recommender.reading.sessions import assign_with_capacity, chain_order, plan_sessions, session_labels, word_key

@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """The three-topic index, built once: the tests that use it only read it."""
    with opened_fake_index(tmp_path_factory.mktemp("sessions"), topic_papers()) as opened:
        yield opened


def test_sessions_group_papers_by_topic(index):
    plan = plan_sessions(index, range(len(index)), n=3)
    assert len(plan.sessions) == 3
    for session in plan.sessions:
        topics = {item.paper.id.split("-")[0] for item in session.papers}
        assert len(topics) == 1
        assert len(session.papers) == 8
        (topic,) = topics
        assert set(" ".join(session.label).split()) & set(TOPICS[topic].split()) | {topic}
        assert len(session.label) == 3
        fits = [item.similarity for item in session.papers]
        assert fits == sorted(fits, reverse=True)  # most typical first
    assert sorted(plan.assignment) == sorted([1] * 8 + [2] * 8 + [3] * 8)


def test_background_reading_comes_from_outside_the_session(index):
    plan = plan_sessions(index, range(len(index)), n=3)
    for session in plan.sessions:
        inside = {item.paper.id for item in session.papers}
        assert len(session.background) == 3
        assert not inside & {item.paper.id for item in session.background}
        assert all(item.session not in (None, session.number) for item in session.background)


@pytest.mark.parametrize("rows, n", [(None, 3), (None, 5), (["privacy-0", "privacy-1", "video-0", "video-1", "graphs-2"], 2)])
def test_background_reading_is_the_closest_papers_outside_the_session(index, rows, n):
    rows = list(range(len(index))) if rows is None else [index.resolve(ref) for ref in rows]
    plan = plan_sessions(index, rows, n=n)
    vectors = np.asarray(index.vectors, dtype=np.float64)
    for session in plan.sessions:
        members = [index.resolve(item.paper.id) for item in session.papers]
        centre = vectors[members].sum(axis=0)
        centre /= np.linalg.norm(centre)
        similarity = vectors @ centre
        outside = sorted((row for row in range(len(index)) if row not in members), key=lambda row: -similarity[row])
        background = [index.resolve(item.paper.id) for item in session.background]
        # The three best similarities outside the session (papers that tie may come in either order).
        assert not set(background) & set(members) and len(set(background)) == 3
        assert [similarity[row] for row in background] == pytest.approx([similarity[row] for row in outside[:3]], abs=1e-5)
        assert [item.similarity for item in session.background] == pytest.approx(
            [similarity[row] for row in background], abs=1e-5)


def test_max_per_session_is_respected(index):
    plan = plan_sessions(index, range(len(index)), n=2, max_per_session=12)
    assert [len(session.papers) for session in plan.sessions] == [12, 12]
    default = plan_sessions(index, range(len(index)), n=2)
    assert max(len(session.papers) for session in default.sessions) <= 15  # ceil(1.25 * 24 / 2)


def test_a_subset_of_papers(index):
    rows = [index.resolve(ref) for ref in ("privacy-0", "privacy-1", "video-0", "video-1")]
    plan = plan_sessions(index, rows, n=2)
    assert sorted(sorted(item.paper.id for item in s.papers) for s in plan.sessions) == [
        ["privacy-0", "privacy-1"], ["video-0", "video-1"]]
    # Background reading may name papers that were not chosen.
    assert any(item.session is None for s in plan.sessions for item in s.background)


def test_assign_with_capacity_moves_overflow_to_the_next_nearest():
    similarity = np.array([[0.9, 0.1, 0.0], [0.8, 0.7, 0.0], [0.7, 0.1, 0.6], [0.1, 0.9, 0.0]])
    # Paper 2's nearest session (0) is full by the time its turn comes: it joins session 2, its next nearest.
    assert assign_with_capacity(similarity, 2).tolist() == [0, 0, 2, 1]
    assert assign_with_capacity(similarity, 4).tolist() == [0, 0, 0, 1]
    with pytest.raises(InputError, match="3 sessions of at most 1 papers cannot hold 4 papers"):
        assign_with_capacity(similarity, 1)


def test_chain_order_starts_central_and_walks_to_neighbours():
    centroids = np.array([[1, 0, 0], [0.8, 0.6, 0], [0, 1, 0], [0.6, 0, 0.8]], dtype=np.float32)
    assert chain_order(centroids, np.ones(4, dtype=np.float32)) == [1, 0, 3, 2]


STOP = frozenset({"the", "of", "and", "we", "with", "a", "in", "for", "on"})


def test_labels_never_share_a_word_between_sessions():
    # "neural networks" is everywhere, most of all in the first group: it may name that one, no other.
    texts = (["neural networks for graph spanner trees neural networks"] * 4
             + ["neural networks for video aesthetic frames"] * 4
             + ["neural networks with differential privacy budget"] * 4)
    labels = session_labels(texts, [0] * 4 + [1] * 4 + [2] * 4, STOP)
    keys = [{word_key(word) for term in label for word in term.split()} for label in labels.values()]
    assert all(not a & b for i, a in enumerate(keys) for b in keys[i + 1:]), labels
    assert {"video", "privacy"} & set(" ".join(labels[1] + labels[2]).split())


def test_labels_are_what_sets_a_session_apart_not_the_commonest_words():
    texts = ["network network network neural neural video clips"] * 3 + ["network network network neural neural privacy noise"] * 3
    labels = session_labels(texts, [5] * 3 + [7] * 3, STOP, count=2)
    assert set(labels) == {5, 7}
    assert labels[5][0] in ("video", "clips", "video clips") and labels[7][0] in ("privacy", "noise", "privacy noise")


def test_a_phrase_names_a_session_when_its_word_is_mostly_used_in_it():
    texts = ["machine translation of speech with attention", "machine translation for rare words",
             "low resource machine translation", "image style transfer", "style transfer of paintings", "image style"]
    labels = session_labels(texts, [0, 0, 0, 1, 1, 1], STOP)
    assert "machine translation" in labels[0]
    assert not {"machine", "translation"} & set(labels[0])  # the phrase, not its words again


@pytest.mark.parametrize("words", [("image", "images"), ("emotion", "emotional"), ("class", "classes"),
                                   ("morphology", "morphological"), ("study", "studies"),
                                   ("parsing", "parser"), ("trained", "training")])
def test_inflections_are_one_label_word(words):
    assert word_key(words[0]) == word_key(words[1])


def test_labels_skip_filler_and_markup():
    texts = ["we propose a novel model textbf graph spanners"] * 3 + ["we propose a novel model video frames"] * 3
    labels = session_labels(texts, [0] * 3 + [1] * 3, STOP)
    assert not {"propose", "novel", "model", "textbf"} & {w for label in labels.values() for t in label for w in t.split()}


@pytest.mark.model  # UMAP's first run compiles
def test_plan_and_map_share_the_labels(index):
    from recommender.reading.layout import build_map

    plan = plan_sessions(index, range(len(index)), n=3)
    corpus_map = build_map(index, n=3)
    assert [group.label for group in corpus_map.groups] == [f"{s.number}. {s.title}" for s in plan.sessions]


# ---------------------------------------------------------------- the command


@pytest.fixture
def run(workdir, papers_cli):
    write_corpus(workdir / "in", topic_papers())
    assert papers_cli("build", "in").exit_code == 0
    return papers_cli


def test_markdown_plan(run):
    text = run("sessions", "--n", "3").stdout
    assert text.startswith("# Reading-group plan: 24 papers in 3 sessions\n\nHow the sessions were formed: ")
    headings = re.findall(r"^## Session (\d): (.+) \((\d+) papers\)$", text, re.M)
    assert [(number, size) for number, _, size in headings] == [("1", "8"), ("2", "8"), ("3", "8")]
    assert len(re.findall(r"^\d+\. \*\*", text, re.M)) == 24
    assert len(re.findall(r"^Background reading: ", text, re.M)) == 3


def test_json_plan_and_determinism(run):
    first = run("sessions", "--n", "3", "--format", "json", "--seed", "4").stdout_bytes
    assert run("sessions", "--n", "3", "--format", "json", "--seed", "4").stdout_bytes == first
    plan = json.loads(first)
    assert plan["papers"] == 24
    assert [s["session"] for s in plan["sessions"]] == [1, 2, 3]
    assert sum(s["size"] for s in plan["sessions"]) == 24
    assert set(plan["sessions"][0]["papers"][0]) == {"id", "handle", "title", "authors", "year", "venue", "snippet", "url",
                                                     "code_links", "similarity", "text_from"}
    assert set(plan["sessions"][0]["background"][0]) == {
        "id", "handle", "title", "authors", "year", "venue", "snippet", "url", "code_links", "similarity", "session",
        "text_from"}


def test_chosen_papers_and_out_file(run, workdir):
    result = run("sessions", "privacy-0", "privacy-1", "graphs-0", "graphs-1", "--n", "2", "--out", "plan.md")
    assert (result.exit_code, result.stdout) == (0, "")
    assert (workdir / "plan.md").read_text().startswith("# Reading-group plan: 4 papers in 2 sessions")


@pytest.mark.parametrize("args,message", [
    (("--n", "30"), "Error: Invalid value for '--n': cannot split 24 papers into 30 sessions: n must be 24 or fewer"),
    (("--n", "0"), "Error: Invalid value for '--n': n (the number of sessions) must be at least 1, got 0"),
    (("--n", "3", "--max-per-session", "5"),
     "Error: 3 sessions of at most 5 papers cannot hold 24 papers: raise max_per_session or n"),
    (("nope",), "Error: no paper 'nope' in the index: see `papers list`"),
])
def test_errors(run, args, message):
    result = run("sessions", *args)
    assert result.exit_code == (1 if "nope" in args else 2)  # --n and --max-per-session out of range: bad usage
    assert result.output.strip() == message


def test_a_word_joins_the_word_it_is_a_phrase_with():
    # "translation" is used alone too, so it is chosen on its own first; "machine", nearly always before it,
    # then makes the phrase with it instead of standing as a word of its own.
    texts = ["machine translation translation quality", "machine translation translation rare",
             "machine translation translation speech", "image style transfer", "style transfer paintings", "image style"]
    labels = session_labels(texts, [0, 0, 0, 1, 1, 1], STOP)
    assert "machine translation" in labels[0] and "machine" not in labels[0] and "translation" not in labels[0]


# ---------------------------------------------------------------- a paper whose session is full


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """120 papers of random words: sessions that fill up, so some papers overflow."""
    with opened_fake_index(tmp_path_factory.mktemp("mixed"), synthetic_papers(0, 120)) as opened:
        yield opened


@pytest.mark.parametrize("iterations", [0, 1, None], ids=["k-means centres", "one step", "default"])
@pytest.mark.parametrize("n, capacity, seed", [(4, 31, 0), (5, 25, 2), (6, 21, 0), (8, 16, 2)])
def test_a_paper_whose_session_is_full_joins_the_next_nearest_with_room_and_the_plan_says_so(
        mixed, monkeypatch, iterations, n, capacity, seed):
    """By its cosine to the sessions' centres, each paper is in its nearest session or, that one
    full, in the nearest that had room: every session nearer than its own is full. The plan names
    exactly the papers not in their nearest session, with that session, however many capacity steps
    were taken before."""
    from recommender.reading import sessions

    if iterations is not None:
        monkeypatch.setattr(sessions, "CAPACITY_ITERATIONS", iterations)
    rows = list(range(len(mixed)))
    groups, centres = sessions.group_papers(mixed, rows, n, capacity, seed)
    similarity = mixed.vectors_at(rows) @ centres.T
    sizes = np.bincount(groups, minlength=len(centres))
    for paper, group in enumerate(groups):
        nearer = np.flatnonzero(similarity[paper] > similarity[paper, group] + 1e-6)
        assert all(sizes[other] == capacity for other in nearer), (paper, group, nearer, sizes)
    plan = plan_sessions(mixed, rows, n=n, max_per_session=capacity, seed=seed)
    overflowed = {
        mixed.papers_at([row])[0].id: int(np.argmax(similarity[row])) + 1
        for row in rows if similarity[row].max() > similarity[row, groups[row]] + 1e-6
    }
    assert overflowed  # the case is one with overflow
    assert {item.paper.id: item.overflowed_from for s in plan.sessions for item in s.overflow} == overflowed
    for session in plan.sessions:
        assert all(plan.session(item.overflowed_from).number != session.number for item in session.overflow)


def test_the_overflow_line_in_markdown_json_and_the_web_page(workdir, papers_cli):
    """Sixteen papers on privacy, four on video, four on graphs, in four sessions of at most eight:
    the privacy papers that do not fit are named under the session they joined, with the full one
    nearest to them, in the Markdown plan, its JSON and the web app's /sessions page."""
    uneven = [paper for paper in topic_papers(16)
              if paper["id"].startswith("privacy") or int(paper["id"].split("-")[1]) < 4]
    write_corpus(workdir / "in", uneven)
    assert papers_cli("build", "in").exit_code == 0
    plan = json.loads(papers_cli("sessions", "--n", "4", "--format", "json").stdout)
    moved = {item["id"]: (session["session"], item["nearest_session"])
             for session in plan["sessions"] for item in session["overflow"]}
    assert moved and all(paper.startswith("privacy") for paper in moved)
    for session in plan["sessions"]:
        flagged = {paper["id"] for paper in session["papers"] if "nearest_session" in paper}
        assert flagged == {item["id"] for item in session["overflow"]}
    capacity = 8  # 1.25 times the average, rounded up
    assert all(plan["sessions"][nearest - 1]["size"] == capacity for _, nearest in moved.values())
    rows = list(csv.DictReader(io.StringIO(papers_cli("sessions", "--n", "4", "--format", "csv").stdout)))
    assert {row["id"]: (int(row["session"]), int(row["nearest_session"]))
            for row in rows if row["role"] == "paper" and row["nearest_session"]} == moved
    titles = {paper["id"]: paper["title"] for paper in uneven}
    text = papers_cli("sessions", "--n", "4").stdout
    line = re.compile(r"^Here because (?:its|their) nearest session was full "
                      rf"\(at most {capacity} papers a session\): (.+)\.$", re.M)
    assert len(line.findall(text)) == len({number for number, _ in moved.values()})
    for paper, (number, nearest) in moved.items():  # each under the papers of its own session
        section = text.split(f"## Session {number}: ")[1].split("## Session")[0]
        nearest_title = plan["sessions"][nearest - 1]["label"]
        assert f"{titles[paper]} (nearest: session {nearest}, {', '.join(nearest_title)})" in \
            " ".join(line.findall(section))
    pytest.importorskip("fastapi", reason="papers serve needs the serve extra")
    from serving import start_server, wait_until

    server = start_server(workdir / "indexes" / "default")
    try:
        status, _, body = wait_until(
            lambda: (lambda got: got if got[0] == 200 else None)(server.get("/sessions?n=4")), 120)
    finally:
        assert server.stop() == 0
    shown = re.findall(r'<p class="overflow">Here because (?:its|their) nearest session was full'
                       rf' \(at most {capacity} papers a session\): (.+?)\.</p>', body.decode())
    assert shown, body.decode()[-3000:]
    links = re.findall(r'<a href="/paper/([\w-]+)">([^<]+)</a> \(nearest: session (\d)', " ".join(shown))
    assert {paper: (title, int(nearest)) for paper, title, nearest in links} == {
        paper: (titles[paper], nearest) for paper, (_, nearest) in moved.items()}


def test_the_overflow_line_escapes_titles_and_labels_for_its_reader(workdir, papers_cli):
    """Titles that try to run a script or break the Markdown are written as text in the line under
    the session, in the Markdown plan and in the web app's plan."""
    pytest.importorskip("jinja2", reason="the web app's pages need the serve extra")
    from corpus import ATTACK
    from recommender.serve.pages import compute_sessions_page

    uneven = [dict(paper, title=f"{ATTACK} *{paper['title']}*") for paper in topic_papers(16)
              if paper["id"].startswith("privacy") or int(paper["id"].split("-")[1]) < 4]
    write_corpus(workdir / "in", uneven)
    assert papers_cli("build", "in").exit_code == 0
    text = papers_cli("sessions", "--n", "4").stdout
    line = " ".join(re.findall(r"^Here because .+$", text, re.M))
    assert "\\*Gradient" in line or "\\*Budget" in line
    assert not re.search(r"(?<!\\)[*<>]", line)  # every star and bracket escaped
    page = compute_sessions_page(str(workdir / "indexes" / "default"), 4)
    paragraph = " ".join(re.findall(r'<p class="overflow">.*?</p>', page))
    assert "<script>" not in paragraph and "&lt;/script&gt;&lt;script&gt;" in paragraph
