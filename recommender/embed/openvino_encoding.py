"""Exports run by OpenVINO: bf16 (the fp32 graph with its matrix products in bf16) and int8-static.

ONNX Runtime has no bf16 CPU kernels. OpenVINO compiles the same export with oneDNN, fuses its
layer norms, GELUs and attention, and multiplies in bf16 on the CPU's AMX tiles, keeping fp32's
exponent range: on 2 cores of an AMX Xeon, MiniLM encoded at 1.45x the CPU speed of int8-smooth
(one text a run) with vectors at cosine 0.99998 of fp32's, against int8-smooth's 0.9975
(docs/performance.md, scripts/bench_export_rewrite.py). The bf16 "export" is the fp32 one
with its config's variant set to bf16 (made by export_cache); :class:`OpenVinoSession` runs it where
:class:`~recommender.embed.onnx_encoder.OnnxEncoder` would run an ONNX Runtime session.

A build chooses bf16 on its own only where the CPU has AMX bf16 (:func:`by_default`), where it was
measured faster than int8-smooth. With AVX-512 BF16 but no AMX (AMD Zen 4) it encodes level with
int8-smooth (1.02-1.04x its CPU speed, 2 cores of an AMD EPYC), so it runs there when asked for
(:func:`runs_here`) but is not the default. A bf16 index queried on a CPU without bf16
instructions runs the same graph at fp32, so its query vectors are fp32's (cosine 0.99998 to the
bf16 ones).

int8-static (:data:`INT8_STATIC`) is a graph whose weights and activations were quantised once,
with scales calibrated on the shipped abstracts (quantisation.py): OpenVINO runs its products on
int8 (VNNI where the CPU has it) and the rest at fp32, on every CPU alike.

What OpenVINO compiles is kept in the user cache (:data:`COMPILED_FOLDER`), keyed by the model
file's bytes, the settings, OpenVINO's version and the CPU: a cold query or build loads it in about
a third of the time compiling takes (:class:`OpenVinoSession`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from .. import files
from ..digests import file_digest
from ..errors import ModelError

BF16 = "bf16"
#: int8 with activation scales calibrated once (quantisation.py), run here: its vectors do not
#: depend on the texts batched with them, so it runs in batches, like bf16.
INT8_STATIC = "int8-static"
#: Tokens a batch: OpenVINO's bf16 graph gains from batches larger than ONNX Runtime's 512 (MiniLM
#: 3.40x the fp32 export as torch gives it at 2,048 against 2.82x at 512; 1,024 to 4,096 level):
#: scripts/bench_export_rewrite.py --bf16-budgets, docs/performance.md.
TOKENS_PER_BATCH = 2048
#: int8-static's: 1,024 tokens a batch ran MiniLM at 1.45x and 1.50x int8-smooth's CPU speed
#: against 1.37x and 1.40x at 2,048 in a first comparison, level with 2,048 in another (2.44x and
#: 2.46x fp32's, scripts/bench_export_rewrite.py --int8-static); it holds half the activations.
INT8_STATIC_TOKENS_PER_BATCH = 1024


@dataclass(frozen=True)
class OpenVinoRuns:
    """How OpenVINO runs one precision's export."""

    tokens_per_batch: int
    # Of the operators that are not int8: "bf16" or "f32"; None: bf16 where the CPU has bf16
    # instructions, else f32.
    inference_precision: str | None


#: Every precision OpenVINO encodes, and how. int8-static's other operators run at fp32, so its
#: vectors are the same on every CPU.
RUNS = {
    BF16: OpenVinoRuns(TOKENS_PER_BATCH, None),
    INT8_STATIC: OpenVinoRuns(INT8_STATIC_TOKENS_PER_BATCH, "f32"),
}
#: A batch's length is padded up to a multiple of this: OpenVINO compiles and keeps kernels for
#: each input shape it meets, so fewer shapes keep its memory flat and save the compiling (2,700
#: CSFCube papers: 1.10x the CPU speed, 489 MB against 565 MB and growing; vectors within cosine
#: 0.999992 of the exact lengths': docs/performance.md).
LENGTH_MULTIPLE = 16
#: The Linux CPU flag of AMX bf16 tiles.
AMX_FLAG = "amx_bf16"
#: The Linux CPU flag of AVX-512 BF16, bf16 dot products in vector registers.
AVX512_BF16_FLAG = "avx512_bf16"
INSTALL_HINT = "pip install openvino"
CPUINFO = Path("/proc/cpuinfo")
#: The user cache's folder of compiled models (<cache>/openvino/<key>.blob). Loading one took
#: 0.21-0.23 s where compiling took 0.72-0.80 s (MiniLM int8-static, cold processes), 1.06 s
#: against 1.88 s for the quality tier's: docs/performance.md. OpenVINO's own CACHE_DIR made a
#: cold search slower here, and writes its files in place; these appear by rename, whole.
COMPILED_FOLDER = "openvino"
#: The compiled models kept at most, the least recently used removed first: enough for two models at
#: two precisions and two thread counts; each is 59-183 MB, and an OpenVINO upgrade or a new CPU
#: makes new ones.
MOST_COMPILED_MODELS_KEPT = 8


def _cpu_flags(cpuinfo: Path) -> set[str]:
    """The flags Linux reports for the first CPU in `cpuinfo` (none where it cannot be read)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return set(value.split())
    return set()


def amx_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU multiplies bf16 matrices on AMX tiles."""
    return AMX_FLAG in _cpu_flags(cpuinfo)


def bf16_instructions(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU has bf16 instructions: AVX-512 BF16 or AMX bf16."""
    return bool({AMX_FLAG, AVX512_BF16_FLAG} & _cpu_flags(cpuinfo))


def installed() -> bool:
    """Whether OpenVINO can be imported (found, not imported: it is heavy)."""
    return importlib.util.find_spec("openvino") is not None


def static_unavailable() -> str | None:
    """Why an int8-static export cannot be made and run here, in a few words (OpenVINO fails to
    load, or NNCF, which calibrates it, is not installed); None where it can. OpenVINO is
    imported (a build at int8-static loads it anyway); NNCF only looked for (it takes seconds)."""
    try:
        import openvino  # noqa: F401
    except Exception as exc:  # not installed, or its libraries fail to load
        first = (str(exc).splitlines() or [""])[0]
        return f"OpenVINO fails to load ({type(exc).__name__}: {first})"
    if importlib.util.find_spec("nncf") is None:
        return "NNCF is not installed"
    return None


def runs_here() -> bool:
    """Whether `--precision bf16` runs here at bf16: bf16 instructions and OpenVINO installed."""
    return bf16_instructions() and installed()


def by_default() -> bool:
    """Whether builds here encode at bf16 by default: AMX bf16 in the CPU and OpenVINO installed."""
    return amx_bf16() and installed()


class _Input:
    def __init__(self, name: str):
        self.name = name


class OpenVinoSession:
    """The export in `path` compiled by OpenVINO for this CPU, for `runs` runs at once on one
    thread each; runs like an ONNX Runtime session (one call a thread). Its operators that are not
    int8 run at `inference_precision` ("bf16" or "f32"; None: bf16 where the CPU has bf16
    instructions, else f32).

    With `compiled_models` (a folder) the compiled model is loaded from there when it was kept
    before, else compiled and kept there; `compiled_from` says which ("cache" or "model")."""

    def __init__(
        self,
        path: Path,
        runs: int,
        inference_precision: str | None = None,
        compiled_models: Path | None = None,
    ):
        import numpy as np

        try:
            import openvino
        except ImportError as exc:
            raise ModelError(
                f"this export encodes with OpenVINO, which is not installed: {INSTALL_HINT}"
            ) from exc
        core = openvino.Core()
        if inference_precision is None:
            capabilities = core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
            inference_precision = "bf16" if "BF16" in capabilities else "f32"
        self.inference_precision = inference_precision
        # One stream a run, one thread a stream: two batches at once beat one batch on two
        # threads by 1.06x in CPU time, and more on a loaded machine, where a thread waiting on
        # the other idles (measured by hand: docs/performance.md, "bf16 on AMX").
        settings = {
            "PERFORMANCE_HINT": "THROUGHPUT",
            "NUM_STREAMS": str(runs),
            "INFERENCE_NUM_THREADS": str(runs),
            "INFERENCE_PRECISION_HINT": self.inference_precision,
        }
        kept = compiled_path(core, Path(path), settings, compiled_models)
        compiled = _load_compiled(core, kept, settings) if kept is not None else None
        self.compiled_from = "cache" if compiled is not None else "model"
        if compiled is None:
            compiled = core.compile_model(str(path), "CPU", settings)
            if kept is not None:
                _keep_compiled(compiled, kept)
        self._compiled = compiled
        self._output = self._compiled.outputs[0]
        self._requests = threading.local()  # an infer request serves one thread at a time
        # OpenVINO's Python binding sets up its numpy bridge on the first tensor it converts, and
        # two threads doing that at once can deadlock (a C++ static's guard against the GIL: 1 of
        # 12 processes hung for good). One run here, on this thread, does it before any other.
        self.run(
            None,
            {port.name: np.zeros((1, LENGTH_MULTIPLE), np.int64) for port in self.get_inputs()},
        )

    def get_inputs(self) -> list[_Input]:
        return [_Input(port.get_any_name()) for port in self._compiled.inputs]

    def run(self, output_names: object, feeds: dict) -> list:
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self._requests.request = self._compiled.create_infer_request()
        return [request.infer(feeds)[self._output]]


def compiled_path(core, model: Path, settings: dict, folder: Path | None) -> Path | None:
    """Where `model` compiled with `settings` on this CPU is kept in `folder`: named by the sha256
    of the model file's bytes, the settings, OpenVINO's version and the CPU (its name and flags),
    since a compiled model is valid for those only. None without a folder, or where the model
    file cannot be read as itself (a link is never followed)."""
    if folder is None:
        return None
    import openvino

    try:
        model_sha256 = file_digest(model)
    except OSError:
        return None
    identity = {
        "model": model_sha256,
        "settings": settings,
        "openvino": openvino.get_version(),
        "cpu": core.get_property("CPU", "FULL_DEVICE_NAME"),
        "flags": sorted(_cpu_flags(CPUINFO)),
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()
    return folder / f"{key[:40]}.blob"


def _load_compiled(core, kept: Path, settings: dict):
    """The compiled model kept at `kept`, or None: not there, not a plain file of this user (a
    link is never followed), or not one this OpenVINO can load (damaged: compiled afresh and
    replaced)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # never waits on a FIFO
    try:
        with open(os.open(kept, flags), "rb") as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
                return None
            blob = stream.read()
            os.utime(stream.fileno())  # used now: the last to go when the folder is full
    except OSError:
        return None
    try:
        return core.import_model(blob, "CPU", settings)
    except Exception:  # noqa: BLE001 - OpenVINO raises a bare Exception for a blob it cannot load
        return None


def _keep_compiled(compiled, kept: Path) -> None:
    """Write the compiled model to `kept`, whole or not at all. A cache that cannot be written
    (read-only, full) is no error of the query or build: the next one compiles again."""
    try:
        kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        files.remove_stale_partials(kept.parent)
        files.write_bytes(kept, compiled.export_model().getvalue(), durable=False)
    except OSError:
        return
    _remove_least_used(kept.parent, MOST_COMPILED_MODELS_KEPT)


def _remove_least_used(folder: Path, most: int) -> None:
    """Remove all but the `most` compiled models in `folder` used last (this user's plain files
    only; a file that cannot be removed stays)."""
    found = []
    with contextlib.suppress(OSError):  # another process may be removing them too
        for entry in os.scandir(folder):
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.name.endswith(".blob") and stat.S_ISREG(status.st_mode):
                if status.st_uid == os.getuid():
                    found.append((status.st_mtime_ns, entry.path))
    for _, path in sorted(found, reverse=True)[most:]:
        with contextlib.suppress(OSError):
            os.unlink(path)
