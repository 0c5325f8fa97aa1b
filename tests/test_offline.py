"""With the real model: everything works with the network blocked, and a build prints
only what a user can act on."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SEEDS, SESSION_CACHE
from recommender.cli import main
from recommender.corpus.papers import read_papers

LAUNCHER = Path(__file__).resolve().parent / "build_launcher.py"
pytestmark = pytest.mark.model


def refuse(*args, **kwargs):
    raise OSError("network access attempted during an offline test")


@pytest.fixture
def no_network(monkeypatch):
    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture(scope="module")
def seed_build(tmp_path_factory):
    """A real `papers build` process over the seeds plus one repeated abstract, network blocked."""
    root = tmp_path_factory.mktemp("offline")
    shutil.copytree(SEEDS, root / "seeds")
    (root / "indexes").mkdir()  # a checkout: the index goes there, not to the user data folder
    seeds = read_papers([root / "seeds"])
    (root / "extra").mkdir()
    (root / "extra/dup.txt").write_text(f"Copied\n\n{seeds[0].abstract}\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("HF_", "TRANSFORMERS_", "PAPERS_", "SENTENCE_TRANSFORMERS_"))}
    # A new user's cache folder (never the real one of whoever runs the tests), sharing the session's exports.
    cache = root / "user-cache"
    cache.mkdir()
    (Path(SESSION_CACHE) / "onnx").mkdir(exist_ok=True)
    (cache / "onnx").symlink_to(Path(SESSION_CACHE) / "onnx")
    env.update(PAPERS_TEST_REAL_MODEL="1", PAPERS_TEST_NO_NETWORK="1", PAPERS_CACHE=str(cache),
               PAPERS_SLOW_PHASE_SECONDS="off")  # phases of a slow first export are logged: tested in test_options
    process = subprocess.run([sys.executable, str(LAUNCHER), "build", "seeds", "extra"], cwd=root, env=env,
                             capture_output=True, text=True, timeout=900)
    first_source = seeds[0].source.replace(f"{root}/", "")
    return root, len(seeds), first_source, process


def test_a_real_build_is_offline_and_quiet_apart_from_actionable_warnings(seed_build):
    root, count, first_source, process = seed_build
    assert process.returncode == 0, process.stderr
    assert process.stdout == f"indexed {count} papers in indexes/default: encoded {count}, reused 0 from the cache (flat search)\n"
    # No tokenizer length notices, deprecation chatter or download bars: only the duplicate.
    assert process.stderr == f"warning: extra/dup.txt:3: same paper as {first_source}; kept once\n"


def test_like_and_search_with_the_real_model_offline(seed_build, no_network, monkeypatch):
    root, count, _, process = seed_build
    assert process.returncode == 0, process.stderr
    monkeypatch.chdir(root)
    monkeypatch.delenv("PAPERS_INDEX", raising=False)
    runner = CliRunner()
    info = json.loads(runner.invoke(main, ["info", "--format", "json"]).stdout)
    assert (info["model"], info["query_encoder"]) == ("all-MiniLM-L6-v2", "onnx")
    like = runner.invoke(main, ["like", "FlashDP", "-k", "5", "--format", "json"])
    assert (like.exit_code, like.stderr) == (0, ""), like.output
    assert len(json.loads(like.stdout)) == 5
    search = runner.invoke(main, ["search", "differential privacy for training language models", "--format", "json"])
    assert (search.exit_code, search.stderr) == (0, ""), search.output
    assert json.loads(search.stdout)[0]["handle"] == "FlashDP"


def test_an_in_process_build_with_sockets_blocked(workdir, no_network):
    (workdir / "in.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "abstract": text}) + "\n" for i, text in enumerate([
            "Differentially private training of language models with gradient clipping.",
            "Video aesthetic assessment with a dual-modal network.",
            "Linear recurrent networks with gating for language modeling.",
        ])), encoding="utf-8")
    runner = CliRunner()
    build = runner.invoke(main, ["build", "in.jsonl", "--index", "tiny"])
    assert (build.exit_code, build.stderr) == (0, ""), build.output
    like = runner.invoke(main, ["like", "p0", "--index", "tiny", "--format", "json", "--mode", "dense"])
    assert (like.exit_code, like.stderr) == (0, ""), like.output
    assert sorted(row["id"] for row in json.loads(like.stdout)) == ["p1", "p2"]
    search = runner.invoke(main, ["search", "private gradient clipping", "--index", "tiny", "--format", "json"])
    assert json.loads(search.stdout)[0]["id"] == "p0"
