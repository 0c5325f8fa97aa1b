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


def compute_map(index_dir: str) -> tuple[str, Any]:
    """("page", the map's parts: render.map.MapParts) or ("refused", why): the map of every live
    paper, as `papers map --out map.html` draws it."""
    from ..query.segmented import open_index
    from ..reading.layout import build_map, live_rows
    from ..render.map import map_parts
    from .links import address

    with open_index(Path(index_dir)) as recommender:  # the base and what `papers add` added since
        rows = live_rows(recommender)
        if len(rows) > MAP_PAPERS:
            return (
                "refused",
                (
                    f"a map of {len(rows):,} papers takes too long to draw on request (at"
                    f" most {MAP_PAPERS:,}): write it once with `papers map --out map.html`"
                ),
            )
        return "page", map_parts(
            build_map(recommender, rows),
            paper_link=lambda paper_id: address("/paper", paper_id, "id"),
        )


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


class Jobs:
    """The background process of one server process, and what it computed (KEPT results, least
    recently used dropped first)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: OrderedDict[tuple, Any] = OrderedDict()
        self.pending: dict[tuple, Future] = {}
        self.pool = None

    def result(self, key: tuple, function: Callable, *args) -> Future:
        """The future result of `function(*args)`, known by `key` (its index version among the
        rest)."""
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
            future = self._pool().submit(function, *args)
            self.pending[key] = future
        future.add_done_callback(lambda finished: self._finished(key, finished))
        return future

    def _finished(self, key: tuple, future: Future) -> None:
        from concurrent.futures.process import BrokenProcessPool

        with self.lock:
            self.pending.pop(key, None)
            if future.cancelled():
                return
            error = future.exception()
            if error is None:
                self.results[key] = future.result()
                while len(self.results) > KEPT:
                    self.results.popitem(last=False)
            elif isinstance(error, BrokenProcessPool):
                # the process died (killed, out of memory): the next request starts another
                self.pool = None

    def _pool(self):
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

    def stop(self) -> None:
        with self.lock:
            pool, self.pool = self.pool, None
            for future in self.pending.values():
                future.cancel()
        if pool is not None:
            processes = list(getattr(pool, "_processes", {}).values())
            for process in processes:  # a map half drawn is of no use to anyone: do not wait for it
                process.terminate()
            # Then wait for the pool's own thread to see them gone: a pool left running to the
            # interpreter's exit prints a traceback from its exit handler.
            pool.shutdown(wait=True, cancel_futures=True)


JOBS = Jobs()


def stop_jobs() -> None:
    JOBS.stop()
