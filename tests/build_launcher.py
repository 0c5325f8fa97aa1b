"""Test-only `papers` launcher: a real process, with hooks at chosen points of a build.

    python tests/build_launcher.py build in --index x     (same arguments as `papers`)

Environment:
    PAPERS_TEST_POINT   where to act: after-encoding, after-files (all files written, no
                        manifest yet), before-rename (manifest written, folder still .tmp-*),
                        before-current (v-* folder in place, CURRENT not yet replaced),
                        after-current (CURRENT replaced, old versions not yet removed),
                        before-publish (`papers add`: the segment built, its list not yet replaced;
                        a compaction: its new base moved in, the list not yet replaced),
                        before-swap (a compaction: the list names the new base and keeps the
                        old one's, CURRENT not yet swapped)
    PAPERS_TEST_ACTION  kill (SIGKILL itself there, the default) or hold (touch
                        $PAPERS_TEST_SYNC/ready, then wait for $PAPERS_TEST_SYNC/release)
    PAPERS_TEST_CHILD_POINT    where a background compaction started by `add` acts
    PAPERS_TEST_SYNC    folder for the hold handshake; a build about to wait for the
                        index lock also touches waiting-for-lock there
    PAPERS_TEST_REAL_MODEL=1   keep the real model (default: tests/fakes.py's FakeEncoder, also on Ray workers)
    PAPERS_TEST_ENCODE_SECONDS the fake encoder sleeps this long in every call (a slow model)
    PAPERS_TEST_NO_NETWORK=1   every socket connection raises
"""

import fcntl
import os
import signal
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recommender import cli  # noqa: E402
from recommender.embed import export_cache, loading  # noqa: E402
from recommender.index import build as core, segments, writer as index_writer  # noqa: E402
from recommender.query import paper_index as query  # noqa: E402


def reach(point: str) -> None:
    if os.environ.get("PAPERS_TEST_POINT") != point:
        return
    if os.environ.get("PAPERS_TEST_ACTION", "kill") == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sync = Path(os.environ["PAPERS_TEST_SYNC"])
    (sync / "ready").touch()
    deadline = time.monotonic() + 300
    while not (sync / "release").exists():
        if time.monotonic() > deadline:
            sys.exit("build_launcher: never released")
        time.sleep(0.02)


def after(function, point, when=lambda *args: True):
    def wrapper(*args, **kwargs):
        result = function(*args, **kwargs)
        if when(*args):
            reach(point)
        return result

    return wrapper


def before(function, point):
    def wrapper(*args, **kwargs):
        reach(point)
        return function(*args, **kwargs)

    return wrapper


def install_hooks() -> None:
    core.embed_texts = after(core.embed_texts, "after-encoding")
    index_writer.IndexWriter.commit = before(index_writer.IndexWriter.commit, "after-files")
    index_writer._fsync_tree = after(index_writer._fsync_tree, "before-rename")
    index_writer._pointer_written = after(index_writer._pointer_written, "before-current")
    index_writer._remove_old_versions = before(index_writer._remove_old_versions, "after-current")
    segments._publish = before(segments._publish, "before-publish")
    segments._listed_both = after(segments._listed_both, "before-swap")
    # A background compaction runs this launcher too, acting at PAPERS_TEST_CHILD_POINT.
    segments.compaction_command = lambda index_dir: [
        "env", f"PAPERS_TEST_POINT={os.environ.get('PAPERS_TEST_CHILD_POINT', '')}",
        sys.executable, str(Path(__file__).resolve()), "build", "--compact", "--quiet",
        "--index", str(index_dir)]
    flock = fcntl.flock

    def announced_flock(handle, operation):
        if operation == fcntl.LOCK_EX and os.environ.get("PAPERS_TEST_SYNC"):
            (Path(os.environ["PAPERS_TEST_SYNC"]) / "waiting-for-lock").touch()
        return flock(handle, operation)

    fcntl.flock = announced_flock


def use_fake_model() -> None:
    from fakes import FakeEncoder

    encoder = FakeEncoder()
    delay = float(os.environ.get("PAPERS_TEST_ENCODE_SECONDS") or 0)
    if delay:
        encode = encoder.encode

        def slow_encode(texts):
            time.sleep(delay)
            return encode(texts)

        encoder.encode = slow_encode
    loading.load_encoder = lambda model: encoder
    query.load_query_encoder = lambda stored, model: encoder
    core.prepare_query_encoder = lambda model, writer, previous, on_phase=None, precision="fp32": None
    export_cache.model_identity = lambda model: f"fake:{model}"
    if "--engine" in sys.argv:  # Ray workers build the fake encoder from a spec, its module sent by value
        import fakes
        from ray import cloudpickle

        cloudpickle.register_pickle_by_value(fakes)
        loading.encoder_spec = lambda model, onnx_folder=None, device="auto", threads=None, exported_only=False: (
            fakes.FakeSpec(model, device))


def block_network() -> None:
    def refuse(*args, **kwargs):
        raise OSError("network access attempted during an offline test")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse


if __name__ == "__main__":
    install_hooks()
    if os.environ.get("PAPERS_TEST_REAL_MODEL") != "1":
        use_fake_model()
    if os.environ.get("PAPERS_TEST_NO_NETWORK") == "1":
        block_network()
    cli.main(prog_name="papers")
