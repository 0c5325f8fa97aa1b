"""Encoding on Ray Data, for builds that use a cluster's cores or GPUs (`papers build --engine
ray`).

:class:`RayEncoder` is an Encoder (see windows.py): the windows, the pooling and the embedding
cache stay the code of a local build, so the index is the same; only the model calls go to Ray.
Each call of ``encode`` runs one Ray Data pipeline: the texts as a dataset, ``map_batches`` over a
pool of actors, each holding the model loaded from the same EncoderSpec a local build uses (the
ONNX export on CPUs, the full model on GPUs), and the vectors back in order.

:class:`RaySession` joins the cluster at ``RAY_ADDRESS``, else starts a local one with this
machine's cores, keeps Ray's own logging out of the terminal, and on close disconnects (stopping
the local cluster it started). Ray is an optional extra, imported only by this module.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import math
import os
import re
import signal
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EngineError, install_command
from ..files import write_bytes
from .windows import Encoder

RAY_EXTRA = install_command("ray")
# : Texts windowed and encoded per Ray Data run: the actor pool (and its model loads) starts once a
# run.
GROUP_SIZE = 16384
#: Windows per call of an actor.
BATCH_SIZE = 256
_QUIET_LOGGERS = ("ray", "ray.data", "ray.train", "ray.tune", "ray.serve")


def require_ray() -> None:
    """A one-line EngineError saying what to install when Ray is missing (Ray is not imported)."""
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.data") is None:
        raise EngineError(f"the ray engine needs Ray, which is not installed: run `{RAY_EXTRA}`")


def _import_ray():
    require_ray()
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as error:
        raise EngineError(
            f"the ray engine cannot import Ray ({_one_line(error)}): run `{RAY_EXTRA}`"
        ) from None
    return ray


def _one_line(error: BaseException) -> str:
    """`Type: first line` of an error; for Ray's task errors, of the error that caused it."""
    cause = getattr(error, "cause", None)
    while isinstance(cause, BaseException) and cause is not error:
        error, cause = cause, getattr(cause, "cause", None)
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


class RaySession:
    """A connection to Ray for the length of a build; use as a context manager."""

    def __init__(self, address: str | None = None):
        self.address = address if address is not None else os.environ.get("RAY_ADDRESS") or None
        self.ray: Any = None  # the ray module once started (untyped)
        self.started = False  # we called ray.init, so we call ray.shutdown
        self.remote = False  # joined a cluster (its workers may not see this machine's files)
        self._levels: dict[str, int] = {}
        self._context: dict[str, object] = {}
        self._printer = None
        # signal handlers ray.init replaces, put back at the end
        self._handlers: dict[int, Any] = {}

    def __enter__(self) -> RaySession:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # Ray's deprecation notices are not the user's to act on
            return self._open()

    def _open(self) -> RaySession:
        ray = _import_ray()
        self.ray = ray
        self._quiet()
        if threading.current_thread() is threading.main_thread():
            self._handlers = {
                number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)
            }
        try:
            if ray.is_initialized():  # a program that set up Ray itself keeps it
                self.remote = self.address is not None
            elif self.address:
                self.remote = True
                # The workers run this very package (the cluster needs its dependencies, not this
                # version).
                package = str(Path(__file__).resolve().parents[1])
                ray.init(
                    address=self.address,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                    runtime_env={"py_modules": [package]},
                )
                self.started = True
            else:
                ray.init(
                    address="local",
                    num_cpus=os.cpu_count(),
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
                self.started = True
        except BaseException as error:
            self._close()
            if not isinstance(error, Exception):
                raise  # Ctrl-C: stopped what was started, then stop
            where = (
                f"the Ray cluster at RAY_ADDRESS={self.address}"
                if self.address
                else "a local Ray cluster"
            )
            hint = (
                "check the address, that the cluster runs, and for a cluster with token"
                " authentication RAY_AUTH_MODE=token"
                if self.address
                else "see /tmp/ray/session_latest/logs"
            )
            raise EngineError(f"cannot start {where} ({_one_line(error)}): {hint}") from None
        self._quiet()  # ray.init may have set up Ray's loggers again
        # ray.init installs its own SIGTERM handler (an exit) for its start. Once Ray runs, the
        # program's own handlers are back, so a stop during the work is the program's to handle
        # (`papers` unwinds with 143, and delivers again a stop that lands where Python ignores it).
        for number, handler in self._handlers.items():
            if handler is not None:
                signal.signal(number, handler)
        return self

    def __exit__(self, *exc) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._close()

    def _close(self) -> None:
        try:
            if self.started:
                self.ray.shutdown()
                self.started = False
        finally:
            # ray.init installs its own SIGTERM handler; a library user's program gets its own back.
            for number, handler in self._handlers.items():
                if handler is not None:
                    signal.signal(number, handler)
            self._handlers.clear()
            for name, level in self._levels.items():
                logging.getLogger(name).setLevel(level)
            self._levels.clear()
            if self._printer is not None:
                _driver_module().print_to_stdstream = self._printer
                self._printer = None
            if self.ray is not None and self._context:
                context = self.ray.data.DataContext.get_current()
                for key, value in self._context.items():
                    setattr(context, key, value)
                self._context.clear()

    def _quiet(self) -> None:
        """Ray's logs, progress bars and execution summaries stay out of the user's terminal."""
        for name in _QUIET_LOGGERS:
            logger = logging.getLogger(name)
            self._levels.setdefault(name, logger.level)
            logger.setLevel(logging.CRITICAL + 1)
        # The driver prints the raylet's messages (a worker died, ...) to stdout, even with
        # log_to_driver=False: they go to Ray's (silenced) logger instead, and the build's error
        # says what failed.
        driver = _driver_module()
        if (
            driver is not None
            and self._printer is None
            and callable(getattr(driver, "print_to_stdstream", None))
        ):
            self._printer = driver.print_to_stdstream
            driver.print_to_stdstream = _log_instead
        context = self.ray.data.DataContext.get_current()
        for key, value in (("enable_progress_bars", False), ("enable_auto_log_stats", False)):
            if hasattr(context, key):
                self._context.setdefault(key, getattr(context, key))
                setattr(context, key, value)

    def resources(self) -> tuple[int, int]:
        """(CPUs, GPUs) of the cluster."""
        total = self.ray.cluster_resources()
        return int(total.get("CPU", 0)), int(total.get("GPU", 0))


def _driver_module():
    """Ray's driver module, where it prints messages from the cluster (None if a Ray version moved
    it)."""
    try:
        import ray._private.worker as driver
    except ImportError:
        return None
    return driver


def _log_instead(data: dict, ignore_prefix: bool = False) -> None:
    for line in data.get("lines", []):
        logging.getLogger("ray").info("(%s) %s", data.get("pid", "ray"), line)


class _EncodeWorker:
    """A Ray actor holding the model; a failure travels back as a message, not an exception,
    so the build can stop with one clear line."""

    def __init__(self, spec, dimension: int, shipped=None):
        self.dimension = dimension
        self.error = ""
        self.folder = None
        try:
            if shipped is not None:  # the model's files, sent through Ray's object store
                import tempfile

                import ray

                self.folder = tempfile.TemporaryDirectory(prefix="papers-model-")
                for name, data in ray.get(shipped).items():
                    write_bytes(Path(self.folder.name) / name, data, durable=False)
                spec = dataclasses.replace(spec, onnx_folder=self.folder.name)
            self.encoder = spec()
        except Exception as error:  # noqa: BLE001 - reported back to the driver
            self.encoder = None
            self.error = f"cannot load the model on a worker: {_one_line(error)}"

    def __call__(self, batch: dict) -> dict:
        texts = [str(text) for text in batch["text"]]
        error = self.error
        vectors = None
        if not error:
            try:
                vectors = np.asarray(self.encoder.encode(texts), dtype=np.float32)
            except Exception as failure:  # noqa: BLE001
                error = _one_line(failure)
            else:
                if vectors.shape != (len(texts), self.dimension):
                    error = (
                        f"the model gave vectors of shape {vectors.shape}, expected"
                        f" {(len(texts), self.dimension)}"
                    )
        if error:
            vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        return {
            "row": np.asarray(batch["row"]),
            "vector": vectors,
            "error": np.array([error] * len(texts)),
        }


class RayEncoder:
    """An Encoder whose ``encode`` runs on a pool of Ray actors; the rest comes from `local`.

    `spec` is a picklable frozen dataclass with ``device`` and ``threads`` fields whose call loads
    the encoder (loading.EncoderSpec); every actor loads it. `local` is the same model on this
    machine's CPU, for the tokenizer (windows) and the dimension. `device` "auto" uses the cluster's
    GPUs when it has any (one actor a GPU), else its CPUs (one actor a CPU, one thread each).
    """

    def __init__(
        self,
        session: RaySession,
        spec,
        local: Encoder,
        device: str = "auto",
        actors: int | None = None,
        group_size: int = GROUP_SIZE,
        batch_size: int = BATCH_SIZE,
    ):
        self.session = session
        self.local = local
        self.name = local.name
        self.dimension = local.dimension
        self.max_tokens = local.max_tokens
        self.group_size = group_size
        self.batch_size = batch_size
        cpus, gpus = session.resources()
        if device == "cuda" and not gpus:
            raise EngineError("device cuda: the Ray cluster has no GPUs: use device cpu or auto")
        use_gpus = device in ("auto", "cuda") and gpus > 0
        self.device = "cuda" if use_gpus else "cpu"
        self.actors = actors or max(1, gpus if use_gpus else cpus)
        self.gpus_per_actor = 1 if use_gpus else 0
        self.spec = dataclasses.replace(spec, device=self.device, threads=None if use_gpus else 1)
        self.shipped = None
        folder = getattr(self.spec, "onnx_folder", None)
        if session.remote and folder is not None and not use_gpus:
            # The cluster's workers cannot read this machine's index folder: the export travels with
            # the job.
            files = {
                path.name: path.read_bytes() for path in Path(folder).iterdir() if path.is_file()
            }
            self.shipped = session.ray.put(files)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self.local.token_spans(text)

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        data = self.session.ray.data
        # At least one block a worker, at most BATCH_SIZE windows a block (one actor call each).
        blocks = min(len(texts), max(self.actors, math.ceil(len(texts) / self.batch_size)))
        seen = 0
        try:
            with warnings.catch_warnings():
                warnings.simplefilter(
                    "ignore"
                )  # Ray's advice on tuning and deprecations is not the user's
                for batch in self._run(data, texts, blocks):
                    failures = [str(error) for error in batch["error"] if error]
                    if failures:
                        raise _WorkerFailed(failures[0])
                    out[np.asarray(batch["row"], dtype=np.int64)] = batch["vector"]
                    seen += len(batch["row"])
        except _WorkerFailed as failure:
            raise EngineError(
                f"a Ray worker failed while encoding ({failure}): the index is unchanged; "
                "fix that, or build with the local engine"
            ) from None
        except Exception as error:  # Ray's own failures: a worker died, the cluster went away, ...
            raise EngineError(
                f"the Ray build failed ({_one_line(error)}): the index is unchanged; build again,"
                " or with the local engine"
            ) from None
        if seen != len(texts):
            raise EngineError(
                f"Ray returned {seen} vectors for {len(texts)} texts: the index is unchanged; build"
                " again"
            )
        return out

    def _run(self, data, texts: list[str], blocks: int):
        """The vectors of `texts` from the actor pool, as batches with their row numbers."""
        dataset = data.from_items(
            [{"row": i, "text": text} for i, text in enumerate(texts)], override_num_blocks=blocks
        )
        dataset = dataset.map_batches(
            _EncodeWorker,
            fn_constructor_args=(self.spec, self.dimension, self.shipped),
            batch_size=math.ceil(len(texts) / blocks),
            batch_format="numpy",
            compute=data.ActorPoolStrategy(size=min(self.actors, blocks)),
            num_cpus=1,
            num_gpus=self.gpus_per_actor,
            udf_modifying_row_count=False,
            max_restarts=0,  # a worker that failed once fails again: stop the build
        )
        return dataset.iter_batches(batch_size=None, batch_format="numpy")


class _WorkerFailed(Exception):
    pass
