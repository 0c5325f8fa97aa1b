"""related-work: its lists equal `like`'s, every output format, determinism, errors."""

import csv
import io
import json
import random
import re

import pytest

from conftest import opened_fake_index
from corpus import write_corpus
from recommender import build_index
from recommender.corpus.papers import Paper
from recommender.corpus.summary import summary
from recommender.query import pooling, similarity
from recommender.reading.related import related_work, select_rows
from recommender.reading.sessions import plan_sessions
from recommender.corpus.citation import citation_key, unique_citation_key, unique_citation_keys
from recommender.render.bibtex import bibtex_entry, bibtex_escape
from recommender.render.related import BibtexKeys

TOPICS = {
    "privacy": "differential privacy private gradient clipping noise budget membership attack federated",
    "video": "video aesthetic frames temporal quality annotation clips motion camera scene",
    "rnn": "linear recurrent gating kernel sequence chunk state attention throughput tiling",
    "graphs": "graph spanner shortest path tree vertex edge decomposition planar matching",
    "speech": "speech speaker audio waveform enrollment separation acoustic noise spectrogram voice",
    "proteins": "protein folding residue structure binding ligand sequence docking molecular energy",
}
COMMON = "method results show propose model approach learning data performance experiments benchmark novel"


def topic_papers(count=300, seed=1):
    """Papers on six topics, mixed with common words and a few cross-topic words: more papers
    than `like`'s candidate pool from either side (ranking.POOL)."""
    rng = random.Random(seed)
    names = sorted(TOPICS)
    papers = []
    for number in range(count):
        topic = names[number % len(names)]
        other = names[rng.randrange(len(names))]
        words = (rng.choices(TOPICS[topic].split(), k=14) + rng.choices(COMMON.split(), k=8)
                 + rng.choices(TOPICS[other].split(), k=3))
        rng.shuffle(words)
        title = f"{topic.title()} study {number}: " + " ".join(words[:3])
        papers.append({"id": f"p{number:03d}", "title": title, "abstract": " ".join(words) + "."})
    return papers


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The 300-paper index, built once: the tests that use it only read it."""
    with opened_fake_index(tmp_path_factory.mktemp("big"), topic_papers()) as opened:
        yield opened


@pytest.fixture
def small(open_index, workdir, fake_model):
    build_index([write_corpus(workdir / "in")])
    return open_index()


def as_tuples(results):
    return [(r.rank, r.id, r.score, r.why) for r in results]


@pytest.mark.parametrize("k,why,pruned", [(5, True, False), (1, False, False), (12, False, False), (5, True, True)])
def test_lists_are_like_one_by_one(big, k, why, pruned, monkeypatch):
    if pruned:  # `like` takes its TF-IDF candidates through the column-max bound; related-work scores every row
        from recommender.index import lexical as lexical_module

        for name, value in (("PRUNE_MIN_POSTINGS", 0), ("ROW_COST", 1), ("GIVE_UP", 1.0)):
            monkeypatch.setattr(lexical_module, name, value)
    for module in (pooling, similarity):  # fewer candidates than papers from each side
        monkeypatch.setattr(module, "POOL", 100)
    monkeypatch.setattr(similarity, "LEXICAL_CELLS", 3 * len(big))  # TF-IDF of 3 papers at a time
    rows = range(0, len(big), 7)
    lists = list(related_work(big, rows, k=k, why=why, chunk=16))
    assert [item.paper.id for item in lists] == [big.ids[row] for row in rows]
    for item in lists:
        assert as_tuples(item.related) == as_tuples(big.like(item.paper.id, k=k, why=why))
        assert item.paper.id not in {r.id for r in item.related}


def test_small_index_scores_every_paper(small):
    lists = list(related_work(small, range(len(small)), k=10, why=True))
    for item in lists:
        assert as_tuples(item.related) == as_tuples(small.like(item.paper.id, k=10, why=True))
        assert len(item.related) == len(small) - 1


def test_chunk_size_changes_nothing(big):
    rows = list(range(0, len(big), 3))
    one = [as_tuples(item.related) for item in related_work(big, rows, k=4, chunk=1)]
    many = [as_tuples(item.related) for item in related_work(big, rows, k=4, chunk=1024)]
    assert one == many


def test_progress_is_reported_per_chunk(big):
    counts = []
    list(related_work(big, range(250), k=2, chunk=100, progress=counts.append))
    assert counts == [100, 100, 50]


def test_select_rows(small):
    assert select_rows(small, ["vid1", "dp1", "VADB"]) == [2, 0]
    assert select_rows(small, [], all_papers=True) == list(range(6))


# ---------------------------------------------------------------- the command


def test_markdown_handout(open_index, built):
    result = built("related-work", "dp1", "vid1", "-k", "2", "--why")
    assert result.exit_code == 0
    index = open_index()

    def listed(paper_id):  # scores and shared terms as `like` gives them: the weights may be retuned
        lines = []
        for r in index.like(paper_id, k=2, why=True):
            lines.append(f"{r.rank}. **{r.paper.title}** ({r.score:.2f}): {r.paper.abstract}")
            if r.phrases or r.why:
                lines.append("   Shares: " + ", ".join(r.phrases or r.why))
            for pair in r.sentences:
                lines.append(f"   “{pair.seed_sentence}” ~ “{pair.paper_sentence}” ({pair.cosine:.2f})")
        return "\n".join(lines)

    assert [r.id for r in index.like("dp1", k=2)] == ["dp2", "rnn1"]
    assert result.stdout == f"""\
# Related work

For each paper, the papers most like it in the collection, best first. The score (-1 to 1, higher is closer) \
combines the cosine of the two papers' embeddings and the cosine of their TF-IDF word vectors, each measured \
against the paper's other candidates, and reads like an embedding cosine.

## FlashDP: Fast Private Training

Differentially private training of large language models with fused per-sample gradient clipping.

Code: <https://github.com/lab/flashdp>

{listed("dp1")}

## VADB: Video Aesthetics

A video aesthetic assessment database with professional annotations and a dual-modal network.

{listed("vid1")}
"""


def test_all_formats_parse_back(open_index, built, workdir):
    lists = json.loads(built("related-work", "--all", "-k", "3", "--format", "json").stdout)
    assert [item["id"] for item in lists] == ["dp1", "dp2", "vid1", "vid2", "rnn1", "rnn2"]
    assert [r["id"] for r in lists[0]["related"]] == [r.id for r in open_index().like("dp1", k=3)]
    assert [r["rank"] for r in lists[0]["related"]] == [1, 2, 3]
    assert set(lists[0]["related"][0]) == {"rank", "id", "score", "handle", "title", "authors", "year", "venue",
                                             "snippet", "url", "code_links", "text_from", "because"}

    lines = built("related-work", "--all", "-k", "3", "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == lists

    rows = list(csv.DictReader(io.StringIO(built("related-work", "--all", "-k", "3", "--format", "csv", "--why").stdout)))
    assert len(rows) == 18
    assert (rows[0]["paper_id"], rows[0]["rank"], rows[0]["id"]) == ("dp1", "1", "dp2")
    assert float(rows[0]["score"]) == pytest.approx(lists[0]["related"][0]["score"], abs=1e-4)
    assert rows[0]["why"] == "; ".join(open_index().like("dp1", k=1, why=True)[0].why)

    markdown = built("related-work", "--all", "-k", "3").stdout
    assert len(re.findall(r"^## ", markdown, re.M)) == 6
    assert len(re.findall(r"^[123]\. \*\*", markdown, re.M)) == 18


def parse_bibtex(text):
    """A minimal BibTeX reader: entries with brace-balanced field values."""
    entries = {}
    for match in re.finditer(r"@(\w+)\{([^,\s]+),\n", text):
        position, depth, fields = match.end(), 1, {}
        body_start = position
        while depth:
            char = text[position]
            depth += {"{": 1, "}": -1}.get(char, 0)
            position += 1
        body = text[body_start: position - 1]
        for field in re.finditer(r"^  (\w+) = \{", body, re.M):
            start, depth, end = field.end(), 1, field.end()
            while depth:
                depth += {"{": 1, "}": -1}.get(body[end], 0)
                end += 1
            fields[field.group(1)] = body[start: end - 1]
        assert match.group(2) not in entries
        entries[match.group(2)] = (match.group(1), fields)
    return entries


def test_bibtex_lists_every_paper_mentioned_once(built):
    text = built("related-work", "dp1", "-k", "2", "--format", "bibtex").stdout
    entries = parse_bibtex(text)
    assert list(entries) == ["dp1", "dp2", "rnn1"]  # the paper, then its list; no authors or year: keys are IDs
    kind, fields = entries["dp1"]
    assert kind == "misc"
    assert fields == {
        "title": "{FlashDP: Fast Private Training}",
        "note": r"Code: \url{https://github.com/lab/flashdp}",
        "abstract": "Differentially private training of large language models with fused per-sample gradient "
                    "clipping. Code at https://github.com/lab/flashdp.",
    }


def test_output_is_byte_identical_run_to_run(built, workdir):
    for fmt in ("markdown", "json", "jsonl", "csv", "bibtex"):
        first = built("related-work", "--all", "--format", fmt, "--why").stdout_bytes
        assert built("related-work", "--all", "--format", fmt, "--why").stdout_bytes == first


def test_out_file_and_from_file(built, workdir):
    (workdir / "ids.txt").write_text("# papers for Friday\nvid1\n\nrnn2\n", encoding="utf-8")
    result = built("related-work", "--from", "ids.txt", "--format", "jsonl", "--out", "out.jsonl")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "wrote related work for 2 papers to out.jsonl" in result.output
    assert [json.loads(line)["id"] for line in (workdir / "out.jsonl").read_text().splitlines()] == ["vid1", "rnn2"]
    assert sorted(p.name for p in workdir.iterdir() if "partial" in p.name) == []


@pytest.mark.parametrize("args,message", [
    ((), "Error: no paper chosen: give paper IDs or handles, --from FILE, or --all"),
    (("dp1", "--all"), "Error: Invalid value for '--all': give paper IDs or all papers, not both"),
    (("nope",), "Error: no paper 'nope' in the index: see `papers list`"),
    (("--from", "missing.txt"), "Error: missing.txt: no such file (--from takes a file of paper IDs or handles, one a line)"),
    (("dp1", "-k", "0"), "Error: Invalid value for '-k': k must be at least 1, got 0"),
])
def test_errors(built, args, message):
    result = built("related-work", *args)
    usage = "nope" not in args and "--from" not in args  # no choice, both, -k out of range: bad usage
    assert (result.exit_code, result.stdout, result.stderr) == (2 if usage else 1, "", message + "\n")  # one line


# ---------------------------------------------------------------- pieces


@pytest.mark.parametrize("text,escaped", [
    ("memory down by 50\\% and 20%", "memory down by 50\\% and 20\\%"),
    ("sets {a, b} and }", "sets \\textbraceleft{}a, b\\textbraceright{} and \\textbraceright{}"),
    ("x_1 & y#2 $z$", "x\\_1 \\& y\\#2 $z$"),  # inline maths kept as written
    ("cost $O(n^{2})$ or 5\\$", "cost $O(n^{2})$ or 5\\$"),
    ("unbalanced $a{$ maths", "unbalanced \\$a\\textbraceleft{}\\$ maths"),
    ("\\emph{new} ~ a^b", "new a\\textasciicircum{}b"),  # formatting read, ~ a tie (corpus.latex)
    ("\\foo{x} \\~a", "\\textbackslash{}foo\\textbraceleft{}x\\textbraceright{} \\textbackslash{}\\textasciitilde{}a"),
    ("line\nbreak", "line break"),
])
def test_bibtex_escape(text, escaped):
    assert bibtex_escape(text) == escaped


@pytest.mark.parametrize("authors,year,title,paper_id,key", [
    (("Ada Lovelace",), 1843, "Notes on the Analytical Engine", "x", "lovelace1843notes"),
    (("Lovelace, Ada", "C. Babbage"), "1843", "On the Engine", "x", "lovelace1843engine"),
    (("Émile Ñúñez",), 2020, "The Étude", "x", "nunez2020etude"),
    (("Ada Lovelace",), None, "Notes", "abc", "abc"),  # no year: the ID
    ((), 2020, "Notes", "arXiv 2101/1", "arXiv-2101/1"),  # no author: the ID, made a valid key
])
def test_bibtex_key(authors, year, title, paper_id, key):
    assert citation_key(Paper(id=paper_id, title=title, abstract="A.", authors=authors, year=year)) == key


def test_bibtex_keys_are_unique_and_stable():
    papers = [Paper(id=i, title=title, abstract=i, authors=("Ada Lovelace",), year=1843)
              for i, title in (("a", "Notes"), ("b", "Notes again"), ("c", "Engine"), ("d", "Notes"))]
    assert unique_citation_keys(papers) == {"a": "lovelace1843notesa", "b": "lovelace1843notesb",
                                            "c": "lovelace1843engine", "d": "lovelace1843notesc"}


def test_citation_keys_are_never_shared():
    # Titles from a few letters: keys that are other keys with a suffix, shared and not, by the dozen.
    rng = random.Random(0)
    for _ in range(20):
        titles = [rng.choice(["n"] * 6 + ["na", "nb", "naa", "nab", "nb", "nz", "nza"]) for _ in range(rng.randint(2, 90))]
        papers = [Paper(id=f"p{i}", title=title, abstract="A.", authors=("Ada Lovelace",), year=1843)
                  for i, title in enumerate(titles)]
        keys = list(unique_citation_keys(papers).values())
        assert len({key.casefold() for key in keys}) == len(papers)


@pytest.mark.parametrize("key, member, sharing, expected", [
    ("k", 0, {"k": (0,)}, "k"),  # nobody else has it
    ("k", 1, {"k": (0, 1, 2)}, "kb"),
    ("k", 0, {"k": (0, 1), "ka": (7,)}, "kb"),  # "ka" is another paper's own key
    ("k", 1, {"k": (0, 1), "kb": (7, 8)}, "kc"),  # and so is "kb", though shared ("kba", "kbb")
    # The 27th of "k" would be "kaa": "ka" is shared, so its papers may take "kaa"; "kab" too.
    ("k", 26, {"k": tuple(range(30)), "ka": (40, 41)}, "kbb"),
])
def test_unique_citation_key(key, member, sharing, expected):
    assert unique_citation_key(key, member, lambda folded: sharing.get(folded, ())) == expected


# Titles whose papers (Ada Lovelace, 1843) share "lovelace1843notes" but for the third and fourth.
KEYED_TITLES = ["Notes", "Notes again", "Notesa", "Engine", "Notes", "The notes"]


@pytest.mark.parametrize("with_table", [True, False])
def test_bibtex_keys_of_an_index_are_looked_up(workdir, fake_model, open_index, monkeypatch, with_table):
    from recommender.index import stages
    from recommender.index.layout import KEY_ARRAYS

    if not with_table:  # an index built before the table of citation keys: scanned, same keys
        monkeypatch.setattr(stages, "KEY_ARRAYS", tuple(n for n in KEY_ARRAYS if not n.startswith("citation")))
    (workdir / "in.jsonl").write_text("".join(json.dumps({
        "id": f"p{i}", "title": title, "abstract": f"Paper {i} is about {title.lower()} {i * 'and more '}.",
        "authors": ["Ada Lovelace"], "year": 1843}) + "\n" for i, title in enumerate(KEYED_TITLES)))
    build_index(["in.jsonl"])
    index = open_index()
    stored = list(index.papers())
    outside = [Paper("o1", "Notes", "An outside paper.", authors=("Ada Lovelace",), year=1843),
               Paper("mine", stored[3].title, stored[3].abstract)]  # the index holds it (same text)
    if with_table:
        monkeypatch.setattr(index, "papers", lambda: pytest.fail("read every paper"))
    keys = BibtexKeys(index, outside)
    assert [keys(paper) for paper in stored + outside[:1]] == [
        "lovelace1843notesb", "lovelace1843notesc", "lovelace1843notesa", "lovelace1843engine",
        "lovelace1843notesd", "lovelace1843notese", "lovelace1843notesf"]
    assert dict(zip([p.id for p in stored + outside[:1]], map(keys, stored + outside[:1]))) == \
        unique_citation_keys(stored + outside[:1])


def test_bibtex_entry_always_has_a_title():
    entry = bibtex_entry(Paper(id="s1", title="", abstract="We present Tiny.", handle="Tiny"), "s1")
    assert "  title = {{Tiny}},\n" in entry


def test_a_bad_out_path_names_the_path_given(built, workdir):
    result = built("related-work", "dp1", "--out", "no/such/dir/out.md")
    assert (result.exit_code, result.output) == (1, "Error: no/such/dir/out.md: No such file or directory\n")
    assert not (workdir / "no").exists()


def test_bibtex_entry_has_only_the_metadata_given():
    paper = Paper(id="x1", title="On {Braces}", abstract="A.", authors=("Ada Lovelace", "C. Babbage"), year=1843,
                  venue="Notes", url="https://example.org/a%20b")
    assert bibtex_entry(paper, "OnBraces") == """\
@misc{OnBraces,
  title = {{On \\textbraceleft{}Braces\\textbraceright{}}},
  author = {Ada Lovelace and C. Babbage},
  howpublished = {Notes},
  year = {1843},
  url = {https://example.org/a%20b},
  abstract = {A.}
}

"""


@pytest.mark.parametrize("abstract,expected", [
    ("Models are big. We propose Tiny, a small one. It works.", "We propose Tiny, a small one."),
    ("Models are big. Tiny is small. It works.", "Tiny is small."),
    ("Models are big. Nothing else.", "Models are big."),
    ("Models are big. To solve this problem, in this paper, we propose Tiny.", "We propose Tiny."),
    ("In this paper we present Tiny.", "We present Tiny."),
    ("Models are big. Here, we present **Tiny** (\\textbf{T}iny $O(1)$).", "We present Tiny (Tiny)."),  # math is dropped
])
def test_summary_is_the_sentence_that_says_what_the_paper_does(abstract, expected):
    assert summary(Paper(id="x", title="", abstract=abstract, handle="Tiny")) == expected


def test_recommender_methods(small):
    assert [item.paper.id for item in related_work(small, select_rows(small, all_papers=True), k=2)] == small.ids
    (item,) = related_work(small, select_rows(small, ["VADB"]), k=1)
    assert as_tuples(item.related) == as_tuples(small.like("vid1", k=1))
    assert len(plan_sessions(small, select_rows(small, ["dp1", "dp2", "vid1", "vid2"]), n=2).sessions) == 2


def test_bibtex_entries_without_a_year_or_author_are_named_once_on_stderr(workdir, fake_model):
    """A real `papers related-work --format bibtex` process over papers some of which lack a year
    and authors: every entry is written, and each missing field is named once on stderr, with how
    many entries lack it and a few of their keys."""
    import subprocess
    import sys
    from pathlib import Path

    papers = [
        {"id": f"p{number}", "title": f"Private training {number}",
         "abstract": f"Differentially private training with gradient clipping, variant {number}.",
         **({"year": 2020, "authors": ["Ada Lovelace"]} if number < 2 else {}),
         **({"year": 2021} if number == 2 else {})}
        for number in range(6)
    ]
    build_index([write_corpus(workdir / "in", papers)])
    done = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "build_launcher.py"), "related-work", "--all",
         "-k", "2", "--format", "bibtex"], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    entries = parse_bibtex(done.stdout)
    assert len(entries) == 6  # nothing dropped
    without_year = sorted(key for key, (_, fields) in entries.items() if "year" not in fields)
    without_author = sorted(key for key, (_, fields) in entries.items() if "author" not in fields)
    assert (len(without_year), len(without_author)) == (3, 4)
    lines = done.stderr.splitlines()
    year = [line for line in lines if "no year" in line]
    author = [line for line in lines if "no author" in line]
    assert year == [f"warning: 3 of 6 BibTeX entries have no year ({', '.join(_in_order(done.stdout, without_year))}):"
                    " BibTeX styles print them without one"]
    assert len(author) == 1 and author[0].startswith("warning: 4 of 6 BibTeX entries have no author (")
    assert author[0].endswith(", ...): BibTeX styles print them without one and sort them by title")
    for fmt in ("markdown", "json"):  # only BibTeX has these fields to miss
        other = subprocess.run(
            [sys.executable, str(Path(__file__).parent / "build_launcher.py"), "related-work", "--all",
             "--format", fmt], cwd=workdir, capture_output=True, text=True, timeout=300)
        assert (other.returncode, other.stderr) == (0, "")


def _in_order(text: str, keys: list[str]) -> list[str]:
    return sorted(keys, key=lambda key: text.index("{" + key + ",\n"))
