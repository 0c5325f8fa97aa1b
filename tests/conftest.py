import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from fakes import FakeEncoder
from system import why_permissions_cannot_be_tested

from recommender.embed.openvino_encoding import COMPILED_FOLDER

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds"
CSFCUBE = REPO.parent / "shared" / "eval" / "csfcube-dev"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# An index name resolves under ./indexes of the folder a test runs in, as in a
# checkout, and subprocesses inherit this: no test touches the user data folder.
# (tests/test_index_home.py unsets it to test the resolution itself.)
os.environ["PAPERS_HOME"] = "indexes"
# And should a test drop PAPERS_HOME outside a checkout, the user data folder is a scratch one of
# this run's (`scratch_user_data`).
# The shared ONNX exports (one per model) go to a scratch cache for this test session: exported once,
# by the first test that builds with the real model, and reused by the others, as for a user.
SESSION_CACHE = os.environ["PAPERS_CACHE"] = tempfile.mkdtemp(prefix="papers-tests-cache-")
atexit.register(shutil.rmtree, SESSION_CACHE, True)
# A short build logs its phases once one runs past a few seconds, which on a loaded machine any phase
# may: tests that compare stderr would depend on the load. tests/test_options.py sets it where tested.
os.environ["PAPERS_SLOW_PHASE_SECONDS"] = "off"
os.environ.pop("PAPERS_PRECISION", None)  # a user's default precision would change what tests build


def require_csfcube() -> Path:
    """The CSFCube dev collection (../shared/eval/csfcube-dev), which holds the only test of the headline
    relevance figure. In CI (`CI` set) it must be there: a missing copy fails; elsewhere the test is skipped
    with the reason shown (`pytest -rs`)."""
    import os

    if not CSFCUBE.is_dir():
        message = f"{CSFCUBE} is missing: the CSFCube dev collection is needed for the relevance tests"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so it must be there)", pytrace=False)
        pytest.skip(message)
    return CSFCUBE


def real_parts_or_skip():
    """Skip (fail in CI) unless the all-mpnet-base-v2 parts are installed."""
    from recommender.embed import model_parts

    missing = [p.distribution for p, path in zip(model_parts.MPNET.parts, model_parts.installed_parts(model_parts.MPNET))
               if path is None]
    if missing:
        message = f"the all-mpnet-base-v2 parts are not installed ({', '.join(missing)}): {model_parts.INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so the test command must install them)", pytrace=False)
        pytest.skip(message)


@pytest.fixture
def fake_model(monkeypatch):
    """Every model load gives the same fake encoder; no ONNX export."""
    return patch_fake_model(monkeypatch)


def patch_fake_model(monkeypatch: pytest.MonkeyPatch) -> FakeEncoder:
    """What `fake_model` does, for a fixture of wider scope (through `pytest.MonkeyPatch.context()`)."""
    from recommender.embed import export_cache, loading
    from recommender.index import build
    from recommender.query import paper_index

    encoder = FakeEncoder()

    def load_encoder(model, device="auto"):
        encoder.name = model  # the index records the model that was asked for
        return encoder

    monkeypatch.setattr(loading, "load_encoder", load_encoder)
    monkeypatch.setattr(paper_index, "load_query_encoder", lambda stored, model: encoder)
    monkeypatch.setattr(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None)
    # The fake's vectors are keyed apart from the real model's (and no model folder is hashed).
    monkeypatch.setattr(export_cache, "model_identity", lambda model: f"fake:{model}", raising=False)
    return encoder


@contextlib.contextmanager
def opened_fake_index(folder: Path, papers: list[dict]):
    """An index of these papers built in `folder` with the fake encoder (its own embedding cache, not
    the session's), opened: for a module-scoped fixture whose tests only read the index."""
    from corpus import write_corpus
    from recommender import PaperIndex, build_index

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PAPERS_CACHE", str(folder / "cache"))
        patch_fake_model(patch)
        build_index([write_corpus(folder / "in", papers)], index=folder / "index")
        with PaperIndex.open(folder / "index") as opened:
            yield opened


@pytest.fixture(scope="session", autouse=True)
def scratch_user_data(tmp_path_factory):
    """The user data folder ($XDG_DATA_HOME, which subprocesses inherit) a folder of this test
    run's own: two runs on one machine (two CI clones side by side) never share one."""
    folder = tmp_path_factory.mktemp("user-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(folder))
        yield folder


@pytest.fixture(autouse=True)
def own_embedding_cache(tmp_path_factory, monkeypatch):
    """Each test its own user cache folder (so its own embedding cache, as a new user has), sharing
    the session's ONNX exports and the models OpenVINO compiled: the real model is exported once
    for the whole run."""
    folder = tmp_path_factory.mktemp("user-cache")
    for shared in ("onnx", COMPILED_FOLDER):
        (Path(SESSION_CACHE) / shared).mkdir(exist_ok=True)
        (folder / shared).symlink_to(Path(SESSION_CACHE) / shared)
    monkeypatch.setenv("PAPERS_CACHE", str(folder))
    return folder


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Run in an empty folder (indexes/ is relative to it), with no PAPERS_INDEX set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PAPERS_INDEX", raising=False)
    return tmp_path


@pytest.fixture
def papers_cli(workdir, fake_model):
    """`papers ARGS...` through click's CliRunner, in the work folder, with the fake model."""
    from click.testing import CliRunner

    from recommender.cli import main

    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, list(args), catch_exceptions=False)

    return invoke


@pytest.fixture
def run(papers_cli):
    return papers_cli


@pytest.fixture
def built(papers_cli, workdir):
    """The CLI over an index of the tiny six-paper corpus (tests/corpus.py)."""
    from corpus import write_corpus

    write_corpus(workdir / "in")
    assert papers_cli("build", "in").exit_code == 0
    return papers_cli


@pytest.fixture
def open_index():
    """`PaperIndex.open`, with every index it opened closed when the test ends."""
    from recommender import PaperIndex

    opened = []

    def open_(*args, **kwargs):
        recommender = PaperIndex.open(*args, **kwargs)
        opened.append(recommender)
        return recommender

    yield open_
    for recommender in opened:
        recommender.close()


@pytest.fixture(autouse=True)
def collect_leaks():
    """Collect garbage as each test ends, so a file it left open warns (and fails) in that test.

    What survives is then frozen (`gc.freeze`), so the next test's collection looks only at what
    that test made: a full collection over every library the suite has imported by then (torch,
    Ray, FastAPI, ...) took 0.6-0.9 s, after each of some 1,500 tests."""
    yield
    import gc

    gc.collect()
    gc.freeze()


def pytest_addoption(parser):
    parser.addoption(
        "--leak-census", action="store_true",
        help="after each test, list the files, sockets, processes and SQLite connections it left "
             "open and still referenced (they warn later, in whichever test's garbage collection "
             "frees them)")


def open_resources() -> dict[int, str]:
    """Python objects holding an OS resource that is still open: files on a descriptor, sockets,
    running `Popen`s, SQLite connections (by id)."""
    import gc
    import io
    import socket
    import sqlite3

    found = {}
    for thing in gc.get_objects():
        try:
            if isinstance(thing, io.FileIO) and not thing.closed:
                found[id(thing)] = repr(thing)
            elif isinstance(thing, socket.socket) and thing.fileno() >= 0:
                found[id(thing)] = repr(thing)
            elif isinstance(thing, subprocess.Popen) and thing.returncode is None:
                found[id(thing)] = f"{thing!r} {thing.args!r:.100}"
            elif isinstance(thing, sqlite3.Connection):
                thing.total_changes  # raises on a closed connection
                found[id(thing)] = repr(thing)
        except Exception:  # a half-made or closed object holds nothing open
            continue
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With --leak-census: what a test (with its fixtures) left open and still referenced. A module
    or session fixture's own resources and a library's caches show up here too: read, don't
    assert."""
    if not item.config.getoption("--leak-census"):
        yield
        return
    import gc

    gc.collect()
    before = open_resources()
    yield
    gc.collect()
    left = sorted(text for key, text in open_resources().items() if key not in before)
    if left:
        item.config.get_terminal_writer().line(f"\nleft open by {item.nodeid}: " + "; ".join(left))


@pytest.fixture
def no_overrides():
    """Skip unless a `papers` process can run without root's permission overrides (tests/system.py)."""
    reason = why_permissions_cannot_be_tested()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def small_disk(monkeypatch):
    """A 64 MB tmpfs as the work folder; `fill()` (tests/system.py) uses up all its space."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    # A model export runs in a child process (export_cache.apart); the resource tracker that
    # multiprocessing starts with the first child lives as long as this process, in the folder it
    # was started from: started here, it cannot hold the tmpfs busy when the test unmounts it.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    mount = Path(tempfile.mkdtemp(prefix="papers-disk-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    monkeypatch.chdir(mount)
    monkeypatch.delenv("PAPERS_INDEX", raising=False)
    try:
        yield mount
    finally:
        os.chdir("/")
        subprocess.run(["umount", str(mount)], check=True)
        mount.rmdir()


# No first-run pages, no update or sync traffic: the only requests left would be the page's own.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium through Playwright, one a test module. Skipped with the reason when chromium is
    missing, except on CI (CI=true), where a missing browser fails."""
    from playwright.sync_api import sync_playwright

    path = chromium()
    if path is None:
        reason = "no chromium on PATH: install it (Debian: apt-get install chromium) to run the browser tests"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def assert_built_and_queried_at(precision: str, name: str) -> None:
    """Build the seeds at `precision` into index `name`: its manifest and `papers info` name the
    precision, and `search` encodes the query with that precision's export."""
    from click.testing import CliRunner

    from recommender import build_index
    from recommender.cli import main
    from recommender.index.home import resolve_index_dir
    from recommender.index.stored import open_stored
    from recommender.query import paper_index

    build_index([SEEDS], name, precision=precision)
    with open_stored(resolve_index_dir(name), verify=True) as stored:
        assert stored.manifest["precision"] == precision
    from recommender.embed.models import DEFAULT_MODEL, model_facts

    info = CliRunner().invoke(main, ["info", "--index", name])
    words = model_facts(DEFAULT_MODEL).precision_words(precision)  # "fast (int8-smooth)", "bf16"
    assert info.exit_code == 0 and f"dimensions, {words})" in info.output
    with paper_index.PaperIndex.open(name) as index:
        results = index.search("differentially private training of language models", k=3)
        assert index._query_encoder.variant == precision and results[0].paper.label == "FlashDP"


def assert_batched_and_each_vector_its_own(precision: str, texts: list[str], tokens: int) -> None:
    """The default model's export at `precision` (one OpenVINO runs) encodes `texts` in batches of
    `tokens` tokens, of lengths padded to multiples of 16 (few shapes for OpenVINO to compile
    kernels for), and a text's vector in a batch is its vector alone."""
    import numpy as np

    from recommender.embed import export_cache, loading
    from recommender.embed.models import DEFAULT_MODEL

    encoder = loading.load_onnx_encoder(
        export_cache.shared_export(DEFAULT_MODEL, precision=precision), DEFAULT_MODEL
    )
    assert not encoder.one_text_a_run and encoder.tokens_per_batch == tokens
    shapes = []
    run = encoder._session.run

    def recording(names, feeds):
        shapes.append(feeds["input_ids"].shape)
        return run(names, feeds)

    encoder._session.run = recording
    together = encoder.encode(texts)
    assert any(rows > 1 for rows, _ in shapes)
    assert all(n % 16 == 0 or n == encoder.max_seq_length for _, n in shapes)
    alone = np.vstack([encoder.encode([text]) for text in texts])
    assert (together * alone).sum(axis=1).min() > 0.99999
