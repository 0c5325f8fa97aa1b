"""Long work of the server (the map, the reading-group plans) off the request path: in one
background process per worker, so that neither a lock nor the interpreter that lookups need is held
by it; the results kept in a bounded cache, the same work asked for twice done once."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

KEPT = 8  # results kept (a session plan of 3,000 papers is some megabytes; each n is one)
PENDING = 8  # different computations waiting at once; past it a request is told to come back
MAP_PAPERS = 20_000  # /map lays out every paper with its related-work list: minutes past this many


class Busy(Exception):
    """Too much long work is already waiting."""


def _start_child(parent: int) -> None:
    """In the background process: stop when the server process is gone."""
    from .supervision import follow_supervisor

    follow_supervisor(parent)
    # Long work yields the processor to lookups: on a machine with few cores it would otherwise
    # take one from the server's requests for its whole run.
    os.nice(10)


def compute_map(index_dir: str) -> tuple[str, str]:
    """("page", the map's HTML) or ("refused", why), as `papers map --out map.html` writes it."""
    from ..query.paper_index import PaperIndex
    from ..reading.layout import build_map
    from ..render.map import render_html

    with PaperIndex.open(Path(index_dir)) as recommender:
        if len(recommender) > MAP_PAPERS:
            return (
                "refused",
                (
                    f"a map of {len(recommender):,} papers takes too long to draw on request (at"
                    f" most {MAP_PAPERS:,}): write it once with `papers map --out map.html`"
                ),
            )
        return "page", render_html(build_map(recommender), script_url="/map.js")


def compute_sessions(index_dir: str, n: int):
    """The plan of every paper in `n` sessions (`papers sessions --n`)."""
    from ..query.paper_index import PaperIndex
    from ..reading.sessions import plan_sessions

    with PaperIndex.open(Path(index_dir)) as recommender:
        return plan_sessions(recommender, range(len(recommender)), n=n)


def compute_sessions_json(index_dir: str, n: int) -> bytes:
    """`compute_sessions` as the body /api/sessions answers (the JSON `papers sessions --format
    json` prints), encoded here: turning thousands of papers into JSON in the server process would
    hold its interpreter, and so every lookup, for as long."""
    import json

    plan = compute_sessions(index_dir, n)
    return json.dumps(
        plan.to_dict(), ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


class BackgroundDied(Exception):
    """The background process died doing a piece of work, and again when it was given it again."""


def _alive(pool) -> bool:
    """Whether a pool can take work: not marked broken, and none of its processes gone (a process
    killed while idle is seen only when work is next handed to it)."""
    if getattr(pool, "_broken", False) or getattr(pool, "_shutdown_thread", False):
        return False
    processes = getattr(pool, "_processes", None) or {}
    return all(process.is_alive() for process in processes.values())


class Jobs:
    """The background process of one server process, and what it computed (KEPT results, least
    recently used dropped first)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: OrderedDict[tuple, Any] = OrderedDict()
        self.pending: dict[tuple, Future] = {}
        self.pool = None
        self.running: dict[tuple, tuple] = {}  # what each pending key computes
        self.stopping = False

    def result(self, key: tuple, function: Callable, *args) -> Future:
        """The future result of `function(*args)`, known by `key` (its index version among the
        rest). A background process that died (killed, out of memory), idle or at work, is
        replaced and the work submitted again, once: a request never meets a broken pool."""
        with self.lock:
            if key in self.results:
                self.results.move_to_end(key)
                done: Future = Future()
                done.set_result(self.results[key])
                return done
            if key in self.pending:
                return self.pending[key]
            if len(self.pending) >= PENDING:
                raise Busy(f"{len(self.pending)} long computations are waiting")
            future: Future = Future()
            self.pending[key] = future
            self.running[key] = (function, args)
            self._submit(key, future, function, args, retries=1)
        return future

    def _submit(self, key: tuple, future: Future, function: Callable, args: tuple, retries: int):
        """Under the lock: run `function(*args)` in the background process, its outcome given to
        `future`."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            work = self._pool().submit(function, *args)
        except (BrokenProcessPool, RuntimeError):  # broken since the check, or shut down
            self._discard_pool()
            work = self._pool().submit(function, *args)
        work.add_done_callback(
            lambda finished: self._finished(key, future, finished, function, args, retries)
        )

    def _finished(
        self, key: tuple, future: Future, work: Future, function: Callable, args: tuple, retries
    ) -> None:
        from concurrent.futures.process import BrokenProcessPool

        with self.lock:
            if work.cancelled():
                self.pending.pop(key, None)
                self.running.pop(key, None)
                future.cancel()
                return
            if future.done():  # cut by a stop
                return
            error = work.exception()
            if isinstance(error, BrokenProcessPool) and not self.stopping:
                # the process died (killed, out of memory): another one does the work, once
                self._discard_pool()
                if retries > 0:
                    self._submit(key, future, function, args, retries - 1)
                    return
                error = BackgroundDied(
                    "the background process died twice doing this work (out of memory?): try"
                    " again later or on a smaller index"
                )
            self.pending.pop(key, None)
            self.running.pop(key, None)
            if error is None:
                self.results[key] = work.result()
                while len(self.results) > KEPT:
                    self.results.popitem(last=False)
        if error is None:
            future.set_result(work.result())
        else:
            future.set_exception(error)

    def _pool(self):
        """The background pool, a new one if there is none or its process is gone."""
        if self.pool is not None and not _alive(self.pool):
            self._discard_pool()
        if self.pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_child,
                initargs=(os.getpid(),),
            )
        return self.pool

    def _discard_pool(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=False)

    def stop(self) -> list[str]:
        """Stop the background process at once (a map half drawn is of no use to anyone) and
        return what it was doing or had waiting, cut."""
        with self.lock:
            self.stopping = True
            pool, self.pool = self.pool, None
            cut = [describe(key) for key in self.pending]
            pending = list(self.pending.values())
        for future in pending:
            future.cancel()
        if pool is not None:
            processes = list(getattr(pool, "_processes", {}).values())
            for process in processes:
                process.kill()  # SIGKILL: work in numpy or faiss does not see a SIGTERM soon
            for process in processes:
                process.join(5)
            # Then wait for the pool's own thread to see them gone: a pool left running to the
            # interpreter's exit prints a traceback from its exit handler.
            pool.shutdown(wait=True, cancel_futures=True)
        return cut


def describe(key: tuple) -> str:
    """A piece of long work as the stop's note names it: "the map", "the plan in 6 sessions"."""
    kind, args = key[1], key[2:]
    if kind == "map":
        return "the map"
    if kind.startswith("sessions"):
        return f"the plan in {args[0]} sessions" if args else "a session plan"
    return kind


JOBS = Jobs()


def stop_jobs() -> list[str]:
    """Stop the background work; what was cut."""
    return JOBS.stop()
