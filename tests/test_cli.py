"""The `papers` command's everyday use: build, like, search, show, list, info, errors, help."""

import csv
import io
import json
import os
import re
import subprocess
import sys

import pytest

from corpus import write_corpus


def test_build_then_rebuild_encodes_nothing(run, workdir):
    write_corpus(workdir / "in")
    first = run("build", "in")
    assert (first.exit_code, first.output) == (
        0, "indexed 6 papers in indexes/default: encoded 6, reused 0 from the cache (flat search)\n")
    second = run("build", "in")
    assert second.output == "indexed 6 papers in indexes/default: encoded 0, reused 6 from the cache (flat search)\n"


def test_source_date_epoch_sets_the_recorded_build_time(run, workdir, monkeypatch):
    """As reproducible builds do: the documentation's examples show `papers info` of a fixed time."""
    write_corpus(workdir / "in")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    assert run("build", "in").exit_code == 0
    assert "built:      2025-12-01T00:00:00+0000 by papers" in run("info").stdout
    assert json.loads(run("indexes", "--format", "json").stdout)[0]["built_at"] == "2025-12-01T00:00:00+0000"


def test_version_names_the_distribution(run):
    assert run("--version").stdout == "papers 0.1.0 (the papers-like distribution)\n"


def test_build_defaults_to_seeds_folder(run, workdir):
    write_corpus(workdir / "seeds")
    assert run("build").output.startswith("indexed 6 papers in indexes/default")


def test_index_option_and_environment(run, workdir, monkeypatch):
    write_corpus(workdir / "in")
    assert run("build", "in", "--index", "mine").output.startswith("indexed 6 papers in indexes/mine:")
    monkeypatch.setenv("PAPERS_INDEX", "mine")
    assert run("like", "dp1", "-k", "1", "--format", "jsonl").exit_code == 0
    assert run("build", "in", "--index", str(workdir / "elsewhere")).output.startswith(
        f"indexed 6 papers in {workdir / 'elsewhere'}:")


def test_like_table(built):
    # The table layout; the ranking itself is checked against independently computed cosines in test_options.py.
    result = built("like", "dp1", "-k", "3")
    assert result.exit_code == 0
    assert result.output == (
        # not a terminal: whole lines, as `ls` and `git` give a pipe (tests/test_table_output.py)
        "rank  score  id    title                               snippet\n"
        "   1  0.473  dp2   Private Fine-Tuning                 Differentially private fine-tuning of language models with low memory gradient clipping.\n"
        "   2  0.217  rnn1  TFLA: Tiled Flash Linear Attention  Linear recurrent networks with gating and fast kernels for long sequence language modeling.\n"
        "   3  0.193  rnn2  Gated Linear RNNs                   Gated linear recurrent networks compete with transformers for sequence modeling with fast kernels.\n"
    )


def test_like_wide_cuts_nothing(built):
    result = built("like", "dp1", "-k", "2", "--wide")
    assert result.output == (
        "rank  score  id    title                               snippet\n"
        "   1  0.473  dp2   Private Fine-Tuning                 Differentially private fine-tuning of language models with low memory gradient clipping.\n"
        "   2  0.217  rnn1  TFLA: Tiled Flash Linear Attention  Linear recurrent networks with gating and fast kernels for long sequence language modeling.\n"
    )


def test_tables_fit_the_terminal_width():
    from recommender.render.tables import render

    rows = [{"id": "x1", "title": "T" * 50, "snippet": "S" * 100}]
    widths = {"id": 0, "title": 28, "snippet": 60}
    for width in (60, 80, 120):
        lines = render(rows, list(widths), "table", widths, width).splitlines()
        assert max(len(line) for line in lines) <= width
    assert render(rows, list(widths), "table", widths, 0).splitlines()[1].endswith("S" * 100)  # --wide


def test_like_by_id_or_handle_in_any_case_gives_the_same_list(built):
    # Lookup by unique ID prefix: tests/test_options.py (these IDs have no unique prefix shorter than themselves).
    outputs = {built("like", ref, "-k", "3").output for ref in ("dp1", "FLASHDP", "flashdp")}
    assert len(outputs) == 1


def test_like_jsonl_is_json_a_line(built):
    result = built("like", "dp1", "-k", "2", "--format", "jsonl")
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert rows[0] == {
        "rank": 1, "id": "dp2", "score": 0.4735, "handle": "Private Fine-Tuning", "title": "Private Fine-Tuning",
        "authors": [], "year": None, "venue": "", "snippet": "Differentially private fine-tuning of language models with low memory gradient clipping.",
        "url": "", "code_links": [], "text_from": "abstract", "why": [], "because": [], "phrases": [],
        "sentences": [],
    }
    assert [row["id"] for row in rows] == ["dp2", "rnn1"]


def test_like_json_csv_markdown(built):
    rows = json.loads(built("like", "dp1", "-k", "2", "--format", "json").output)
    assert [row["id"] for row in rows] == ["dp2", "rnn1"]
    table = list(csv.DictReader(io.StringIO(built("like", "dp1", "-k", "2", "--format", "csv").output)))
    assert [(row["rank"], row["id"], row["score"]) for row in table] == [("1", "dp2", "0.473"), ("2", "rnn1", "0.217")]
    assert built("like", "dp1", "-k", "1", "--format", "markdown").output == (
        "| rank | score | title | authors | year | venue | id | snippet | code_links |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        "| 1 | 0.473 | Private Fine-Tuning |  |  |  | dp2 | Differentially private fine-tuning of language models with low "
        "memory gradient clipping. |  |\n"
    )


def test_like_why(built):
    lines = built("like", "dp1", "-k", "2", "--why").output.splitlines()
    assert lines[0] == "rank  score  id    title                               why"
    assert lines[1].startswith(
        "   1  0.473  dp2   Private Fine-Tuning                 "
        "shares: differentially private, gradient clipping, language models; "
    )
    assert lines[2].startswith("   2  0.217  rnn1  TFLA: Tiled Flash Linear Attention  shares: fast, language; ")
    assert len(lines) == 3  # a pipe gets whole lines: one a result


def test_like_several_with_not_and_exclude(built, workdir):
    (workdir / "read.txt").write_text("vid2\n", encoding="utf-8")
    result = built("like", "dp1", "vid1", "--not", "rnn1", "--exclude", "read.txt", "--format", "jsonl")
    ids = [json.loads(line)["id"] for line in result.output.splitlines()]
    assert ids == ["dp2", "rnn2"]


def test_search_table(built):
    assert built("search", "video aesthetic", "-k", "2").output == (
        "rank  score  id    title                   snippet\n"
        "   1  0.542  vid1  VADB: Video Aesthetics  A video aesthetic assessment database with professional annotations and a dual-modal network.\n"
        "   2  0.506  vid2  Video Quality Models    Video quality assessment models trained on aesthetic annotations of short videos.\n"
    )


def test_show(built):
    assert built("show", "FlashDP").output == (
        "id:      dp1\n"
        "handle:  FlashDP\n"
        "title:   FlashDP: Fast Private Training\n"
        "code:    https://github.com/lab/flashdp\n"
        "source:  in/papers.jsonl:1\n"
        "\n"
        "Differentially private training of large language models with fused per-sample gradient clipping. "
        "Code at https://github.com/lab/flashdp.\n"
    )


def test_list(built):
    assert built("list").output == (
        "id    handle                summary\n"
        "dp1   FlashDP               FlashDP: Fast Private Training\n"
        "dp2   Private Fine-Tuning   Private Fine-Tuning\n"
        "vid1  VADB                  VADB: Video Aesthetics\n"
        "vid2  Video Quality Models  Video Quality Models\n"
        "rnn1  TFLA                  TFLA: Tiled Flash Linear Attention\n"
        "rnn2  Gated Linear RNNs     Gated Linear RNNs\n"
    )
    rows = [json.loads(line) for line in built("list", "--format", "jsonl").output.splitlines()]
    assert [row["id"] for row in rows] == ["dp1", "dp2", "vid1", "vid2", "rnn1", "rnn2"]


def test_info(built):
    from recommender.embed.models import DEFAULT_MODEL, model_facts

    facts = model_facts(DEFAULT_MODEL)
    precision = facts.precision_words(facts.cpu_precision())  # bf16 with AMX, else fast (int8-smooth)
    output = built("info").output
    assert re.sub(r"built:.*\n", "built: X\n", re.sub(r"fingerprint \w+", "fingerprint X", output)) == (
        "index:      indexes/default\n"
        "papers:     6\n"
        f"model:      all-MiniLM-L6-v2 (256 dimensions, {precision})\n"
        "long texts: windows of 40 tokens, each starting with the title and ending at a sentence end, mean-pooled\n"
        "search:     flat: exact inner-product search: 6 papers <= 50,000\n"
        "lexical:    TF-IDF, 52 terms (single words, sublinear tf)\n"
        "queries:    full model\n"
        "built: X\n"
        "inputs:     fingerprint X\n"
        "size:       24.7 KB\n"
    )
    data = json.loads(built("info", "--format", "json").output)
    assert data["paper_count"] == 6 and data["model"] == "all-MiniLM-L6-v2"
    verified = built("info", "--verify")
    assert verified.exit_code == 0 and verified.output.endswith("files match their checksums\n")


@pytest.mark.parametrize("args, message", [
    (["like", "nope"], "Error: no paper 'nope' in the index: see `papers list`\n"),
    (["like", "FlashDB"], "Error: no paper 'FlashDB' in the index: closest matches: FlashDP\n"),
    (["like", "vid"], "Error: 'vid' matches 2 papers: vid1 (VADB), vid2 (Video Quality Models): give more of the ID\n"),
    (["like", "dp1", "-k", "0"], "Error: Invalid value for '-k': k must be at least 1, got 0\n"),
    (["like", "dp1", "--min-score", "-2"],
     "Error: Invalid value for '--min-score': min_score must be between -1 and 1 (scores are cosine similarities), got -2\n"),
    (["like", "dp1", "--diverse", "1.5"], "Error: Invalid value for '--diverse': diverse must be between 0 and 1 (1 = relevance only), got 1.5\n"),
    (["like", "dp1", "--exclude", "missing.txt"],
     "Error: missing.txt: no such file (--exclude takes a file of paper IDs or handles, one a line)\n"),
    (["like", "dp1", "--model", "other"],
     "Error: index indexes/default was built with model 'all-MiniLM-L6-v2', not 'other': "
     "run `papers build --model other` to rebuild it\n"),
    (["search", "  "], "Error: empty search text: give some words to search for\n"),
    (["show", "nope"], "Error: no paper 'nope' in the index: see `papers list`\n"),
])
def test_errors_are_one_line_with_nonzero_exit(built, args, message):
    result = built(*args)
    usage = any(option in args for option in ("-k", "--min-score", "--diverse"))  # out of range: exit 2
    assert (result.exit_code, result.output) == (2 if usage else 1, message)


def test_query_before_any_index(run):
    result = run("like", "FlashDP")
    assert (result.exit_code, result.output) == (
        1, "Error: no index at indexes/default (names resolve under $PAPERS_HOME): run `papers build` first\n")


def test_module_entry_point_runs():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "recommender", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "papers build" in result.stdout


def test_every_command_help_shows_examples(run):
    from recommender.cli import main

    for name in main.list_commands(None):
        result = run(name, "--help")
        assert result.exit_code == 0
        assert "Examples:\n\n      papers " + name in result.output, name


#: Every module of the package a cold `papers like` needs: the command, its options and rendering,
#: and the query, index and model-table modules an opened index reads. A module outside this list
#: costs every cold lookup its import (cold `like` <= 1.5x `import numpy, faiss`, measured by
#: scripts/bench_cold_start.py): import it where it is used, or add it here with the reason.
LIKE_MODULES = {
    "recommender", "recommender.arrays", "recommender.digests", "recommender.errors", "recommender.files",
    "recommender.cli", "recommender.cli.common", "recommender.cli.errors", "recommender.cli.lookups",
    "recommender.corpus", "recommender.corpus.handles", "recommender.corpus.latex", "recommender.corpus.papers",
    "recommender.corpus.readers", "recommender.corpus.readers.base", "recommender.corpus.summary",
    "recommender.corpus.text",
    # the model table (a model's dense weight), with the parts the quality tier's row names
    "recommender.embed", "recommender.embed.models", "recommender.embed.model_parts",
    "recommender.embed.user_cache", "recommender.embed.windows",
    "recommender.index", "recommender.index.ann", "recommender.index.catalogue", "recommender.index.home",
    "recommender.index.keys", "recommender.index.layout", "recommender.index.lexical",
    "recommender.index.segments", "recommender.index.stored",
    "recommender.query", "recommender.query.lookups", "recommender.query.opened", "recommender.query.paper_index",
    "recommender.query.pooling", "recommender.query.profiles", "recommender.query.ranking",
    "recommender.query.reasons",  # the sentence pairs the candidates carry for --why
    "recommender.query.search", "recommender.query.segmented", "recommender.query.similarity",
    "recommender.render", "recommender.render.markdown", "recommender.render.tables",
}
#: The standard library a cold `like` needs beyond what `import numpy, faiss, click` loads (and their
#: C parts): the index's files (json, mmap, hashlib, shutil with its compressors), the output (csv), the
#: user cache's folder (tempfile, random, shlex) and the papers (unicodedata, dataclasses, bisect, copy).
LIKE_STANDARD_LIBRARY = {
    "bisect", "_bisect", "bz2", "_bz2", "_compression", "copy", "csv", "_csv", "dataclasses", "hashlib",
    "_hashlib", "_blake2", "_sha512", "json", "_json", "lzma", "_lzma", "mmap", "random", "_random", "shlex",
    "shutil", "tempfile", "unicodedata", "zlib",
}
#: The libraries a cold `like` uses (any of their modules): the command line, the vectors, the search.
LIKE_PACKAGES = {"click", "numpy", "faiss"}


def test_a_cold_like_imports_nothing_outside_the_modules_it_needs(built, workdir, tmp_path):
    """What a cold `like` imports beyond `import numpy, faiss, click` (measured here, in a fresh
    interpreter as the command's) is in LIKE_MODULES, LIKE_STANDARD_LIBRARY and LIKE_PACKAGES: no
    other command's module, no library a lookup does not use."""
    index = workdir / "indexes" / "default"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    loaded = "print('MODULES', ' '.join(sorted(sys.modules)))\n"
    like = (
        "import sys; from recommender.cli import main\n"
        f"sys.argv = ['papers', 'like', 'FlashDP', '--index', {str(index)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n" + loaded
    )
    environment = {name: value for name, value in os.environ.items() if name not in ("PAPERS_HOME", "PAPERS_INDEX")}

    def modules(code: str) -> set[str]:
        result = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=environment, capture_output=True,
                                text=True)
        (line,) = [line for line in result.stdout.splitlines() if line.startswith("MODULES ")]
        return set(line.split()[1:])

    baseline = modules("import sys, numpy, faiss, click\n" + loaded)
    extra = modules(like) - baseline
    outside = sorted(name for name in extra if not (name in LIKE_MODULES or (
        name.split(".")[0] in LIKE_STANDARD_LIBRARY | LIKE_PACKAGES)))
    assert outside == []
    assert "recommender.query.segmented" in extra and "recommender.cli.lookups" in extra  # the lookup ran


def test_like_imports_only_what_it_uses(built, workdir, tmp_path):
    """A cold `like` given an index folder imports no file reader, no SQLite, no platformdirs and
    nothing only `--from-file` or BibTeX output needs:
    each costs every cold lookup milliseconds it does not use (docs/performance.md)."""
    index = workdir / "indexes" / "default"
    elsewhere = tmp_path / "elsewhere"  # no indexes/ here: the folder of indexes would be the user's
    elsewhere.mkdir()
    unused = ("recommender.corpus.readers.bibtex", "recommender.corpus.readers.arxiv", "recommender.corpus.where",
              "sqlite3", "platformdirs", "secrets", "recommender.corpus.identifiers", "recommender.corpus.citation")
    code = (
        "import sys; from recommender.cli import main\n"
        f"sys.argv = ['papers', 'like', 'FlashDP', '--index', {str(index)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"print('UNUSED', [m for m in {unused!r} if m in sys.modules])\n"
    )
    environment = {name: value for name, value in os.environ.items() if name not in ("PAPERS_HOME", "PAPERS_INDEX")}
    result = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=environment, capture_output=True,
                            text=True)
    assert "Private Fine-Tuning" in result.stdout and "UNUSED []" in result.stdout, result.stdout + result.stderr
