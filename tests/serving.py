"""A real `papers serve` on a free port of 127.0.0.1 for the server's tests, over an index built with
tests/fakes.py's FakeEncoder (tests/serve_launcher.py gives the server the same encoder)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LAUNCHER = Path(__file__).resolve().parent / "serve_launcher.py"
START_SECONDS = 60
URL = re.compile(r" at (http://\S+/) ")


def build_fake_index(index_dir: Path, papers: list[dict], **options) -> Path:
    """An index of these papers built in this process with the FakeEncoder (no model, no ONNX export);
    `options` go to build_index (map_layout=True, say)."""
    from corpus import write_corpus
    from fakes import FakeEncoder

    with pytest.MonkeyPatch.context() as patch:
        from recommender import build_index
        from recommender.embed import loading
        from recommender.index import build

        encoder = FakeEncoder()
        patch.setattr(loading, "load_encoder", lambda model, device="auto": encoder)
        patch.setattr(build, "prepare_query_encoder", lambda model, writer, previous, on_phase=None, precision="fp32": None)
        patch.setitem(sys.modules, "umap", None)  # the map's projection: PCA, no numba compile
        patch.setitem(sys.modules, "openTSNE", None)
        folder = index_dir.parent / f"{index_dir.name}-input"
        build_index([write_corpus(folder, papers)], index=index_dir, **options)
    return index_dir


@dataclass
class Server:
    """A running `papers serve`: its address, process and what it printed."""

    process: subprocess.Popen
    url: str
    lines: list[str]
    errors: list[str] = field(default_factory=list)

    def get(self, path: str, headers: dict | None = None, method: str = "GET", data: bytes | None = None):
        """(status, headers, body bytes) of one request; never raises for an HTTP error status."""
        request = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.headers, error.read()

    def json(self, path: str, **options):
        status, headers, body = self.get(path, **options)
        return status, json.loads(body)

    def stop(self, signal_number: int = signal.SIGTERM, seconds: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal_number)
        try:
            code = self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        self.threads_join()
        return code

    def threads_join(self):
        for thread in getattr(self, "_threads", ()):
            thread.join(10)


def start_server(index_dir: Path, *args: str, env: dict | None = None, cwd: Path | None = None,
                 open_files: int | None = None) -> Server:
    """`papers serve --index DIR --port 0 ARGS` in a subprocess, once it printed its address (bounded wait);
    `open_files`: its limit of open files, soft and hard (`ulimit -n`; many systems' default is 1024)."""
    environment = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))

    def limit_open_files():
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    process = subprocess.Popen(
        [sys.executable, str(LAUNCHER), "serve", "--index", str(index_dir), "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, cwd=cwd,
        preexec_fn=limit_open_files if open_files else None,
    )
    lines: list[str] = []
    errors: list[str] = []
    found: queue.Queue = queue.Queue()

    def read(stream, into, announce):
        for line in stream:
            into.append(line.rstrip("\n"))
            match = URL.search(line) if announce else None
            if match:
                found.put(match.group(1))
        if announce:
            found.put(None)

    threads = [threading.Thread(target=read, args=(process.stdout, lines, True), daemon=True),
               threading.Thread(target=read, args=(process.stderr, errors, False), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        url = found.get(timeout=START_SECONDS)
    except queue.Empty:
        url = None
    if url is None:
        process.kill()
        process.wait(10)
        for thread in threads:
            thread.join(10)
        process.stdout.close()
        process.stderr.close()
        raise AssertionError(f"papers serve printed no address: {lines} {errors}")
    server = Server(process, url, lines, errors)
    server._threads = threads
    return server


def wait_until(condition, seconds: float = 30, step: float = 0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"not within {seconds} s: {condition}")
