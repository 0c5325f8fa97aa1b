"""Which encoder a build uses: its model, tier, precision, device and engine, decided in one place
from what was asked (:class:`EncoderRequest`) and what the index being rebuilt records (its
manifest).

A rebuild keeps what its index was built with unless told otherwise, so that adding one paper never
encodes every other one again: the model (a `static` or model-folder index stays so) and the
precision, each with a notice when it differs from what a new index would get. Every per-model fact
comes from the table in :mod:`recommender.embed.models`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError, OptionError
from . import openvino_encoding
from .models import DEFAULT_MODEL, MODELS, PRECISION_CHOICES, ModelFacts, model_facts
from .quantisation import PRECISIONS
from .windows import Chunking, Encoder

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EncoderRequest:
    """What a build was asked for; None keeps the index's own (else takes the default)."""

    model: str | None = None
    precision: str | None = None
    device: str = "auto"  # "auto", "cpu" or "cuda"
    engine: str = "local"  # "local" or "ray"
    upgrade: bool = False  # rebuild a fast-tier index with a full model
    chunking: Chunking | None = None


@dataclass(frozen=True)
class EncoderChoice:
    """The encoder a build uses, and the facts a build needs of it."""

    model: str
    precision: str
    device: str
    engine: str
    chunking: Chunking
    identity: str  # export_cache.model_identity: the model's part of every embedding cache key
    known_max_tokens: int | None = None  # the model's window, as the index being rebuilt records it

    @property
    def facts(self) -> ModelFacts:
        return model_facts(self.model)

    @property
    def exported_only(self) -> bool:
        """Whether the build's export is the only encoder that gives its vectors (int8, static)."""
        return exported_only(self.model, self.precision)

    @property
    def export(self) -> str:
        """What the build exports for its queries: "onnx" or "static" (the manifest's
        query_encoder)."""
        return self.facts.export

    def record(self, encoder: LazyEncoder) -> dict:
        """What an index built with this choice records of its encoder (its manifest's fields)."""
        max_tokens = (
            encoder.max_tokens_if_known or encoder.remembered_max_tokens or self.known_max_tokens
        )
        return {
            "model": self.model,
            "model_identity": self.identity,
            "precision": self.precision,
            "chunking": dict(self.chunking.to_dict(), max_tokens=max_tokens),
        }

    def encoder(self, export: Path | None, resources: contextlib.ExitStack) -> LazyEncoder:
        """The build's encoder, loaded when a text has to be encoded: the build's `export` (its ONNX
        export or static table) where there is one, on this choice's device and engine. A Ray
        session joins `resources`, so it stops when they close."""
        return LazyEncoder(self.model, lambda: _load_encoder(self, export, resources))

    def same_vectors(self, record: Mapping | None) -> bool:
        """Whether an index with this manifest was encoded as this choice encodes (so its work is
        reused)."""
        return (
            record is not None
            and record.get("model") == self.model
            and record.get("precision", "fp32") == self.precision
        )


def exported_only(model: str, precision: str) -> bool:
    """Whether `model` at `precision` is encoded by its export alone (int8 weights, a static
    table)."""
    return model_facts(model).exported_only or precision != "fp32"


def check_request(request: EncoderRequest) -> None:
    """What can be refused before any paper is read or any index opened: one line saying what to
    change."""
    from .sentence_transformer import DEVICES

    if (
        request.upgrade
        and request.model is not None
        and model_facts(request.model).distilled_from is not None
    ):
        raise OptionError(
            f"an upgrade builds with a full model, not '{request.model}': give none (the default) "
            "or another",
            "model",
        )
    if request.engine not in ENGINES:
        raise OptionError(
            f"unknown engine {request.engine!r}: use one of {', '.join(ENGINES)}", "engine"
        )
    if request.device not in DEVICES:
        raise OptionError(
            f"unknown device {request.device!r}: use one of {', '.join(DEVICES)}", "device"
        )
    if request.precision is not None and request.precision not in PRECISION_CHOICES + PRECISIONS:
        raise OptionError(
            f"unknown precision {request.precision!r}: use one of {', '.join(PRECISION_CHOICES)}",
            "precision",
        )
    _check_available(request.precision)
    if request.model is not None:
        facts = model_facts(request.model)
        _check_fits(facts, facts.resolve_precision(request.precision), request.device)
    elif request.device == "cuda":
        facts = model_facts(DEFAULT_MODEL)
        _check_fits(facts, facts.resolve_precision(request.precision), request.device)


def _check_available(precision: str | None) -> None:
    """A recipe that runs on this machine, or one line saying what to give instead."""
    if precision == openvino_encoding.BF16 and not openvino_encoding.runs_here():
        raise OptionError(
            f"precision {openvino_encoding.BF16} "
            + (
                f"encodes with OpenVINO, which is not installed: {openvino_encoding.INSTALL_HINT}"
                if openvino_encoding.bf16_instructions()
                else "encodes on CPUs with bf16 instructions (AVX-512 BF16 or AMX), and this one"
                " has none: give fast or full"
            ),
            "precision",
        )
    if precision == openvino_encoding.INT8_STATIC and not openvino_encoding.installed():
        raise OptionError(
            f"precision {openvino_encoding.INT8_STATIC} encodes with OpenVINO, which is not"
            f" installed: {openvino_encoding.INSTALL_HINT}",
            "precision",
        )


def _check_fits(facts: ModelFacts, precision: str | None, device: str) -> None:
    """A precision, model and device that go together, or one line saying what to change."""
    if precision is not None and precision not in facts.precisions:
        if len(facts.precisions) == 1:
            raise OptionError(
                f"the model '{facts.name}' has one precision, {facts.precisions[0]} (table "
                f"lookups): give none, not {precision}",
                "precision",
            )
        raise OptionError(
            f"the model '{facts.name}' encodes at {', '.join(facts.precisions[:-1])} or "
            f"{facts.precisions[-1]}, not "
            f"{precision}: give one of those, or none",
            "precision",
        )
    if device == "cuda":
        from .sentence_transformer import resolve_device

        resolve_device("cuda")  # no GPU: one line, before any paper is read
        if not facts.gpu:
            raise OptionError(
                f"the model '{facts.name}' encodes on the CPU (a table lookup, thousands of "
                "papers a second): give no GPU device",
                "device",
            )
        if precision is not None and precision != "fp32":
            raise OptionError(
                f"precision {precision} encodes on the CPU (ONNX Runtime or OpenVINO): on a GPU"
                " give precision full",
                "device",
            )


def check_upgradable(record: Mapping, index: object) -> None:
    """An index (`record` its manifest) built with the fast tier, or one line saying why not."""
    built_with = record.get("model")
    if built_with is None or model_facts(built_with).distilled_from is None:
        fast = next(facts.name for facts in MODELS if facts.tier == "fast")
        raise InputError(
            f"index {index} was built with '{built_with}', not the fast tier "
            f"('{fast}'): there is nothing to upgrade"
        )


def choose_encoder(
    request: EncoderRequest,
    record: Mapping | None,
    notice: Callable[[str], None] | None = None,
    index: object = "",
    papers: int | None = None,
) -> EncoderChoice:
    """The encoder a build of the index `index` of `papers` papers (None: not known) uses, given
    its live manifest `record` (None for a new index).

    The model: the one asked for; else, for an upgrade, the default; else the index's own (with a
    notice where a new index would get another); else the default. The precision: the one the model
    has if only one; else the one asked for; else fp32 on a GPU; else the index's own when its model
    is kept (with a notice where a new index would get another); else the model's default on a CPU
    (fp32 where a GPU is found, as int8 encodes on CPUs only). `auto` and `fast` follow the
    model's size rule (ModelFacts.large_corpus_precision: int8-static from some corpus size), with
    a notice saying so, and its smaller-corpus recipe with a notice where the larger one cannot
    load here."""
    check_request(request)
    built_with = record.get("model") if record is not None else None
    model = _chosen_model(request, built_with, notice)
    facts = model_facts(model)
    asked = facts.resolve_precision(request.precision)
    if request.model is None:
        _check_fits(facts, asked, request.device)
    if asked != request.precision:
        _check_available(asked)
    if request.precision == "fast" and asked is not None:
        asked = _by_size(facts, asked, papers, notice)
    same = record if record is not None and built_with == model else None
    chunking = request.chunking if request.chunking is not None else _kept_chunking(same, notice)
    kept = same.get("precision", "fp32") if same is not None else None
    precision = _chosen_precision(request, facts, asked, kept, notice, index, papers)
    from . import export_cache

    known_max_tokens = same.get("chunking", {}).get("max_tokens") if same is not None else None
    return EncoderChoice(
        model,
        precision,
        request.device,
        request.engine,
        chunking,
        export_cache.model_identity(model),
        known_max_tokens,
    )


def _chosen_model(
    request: EncoderRequest, built_with: str | None, notice: Callable[[str], None] | None
) -> str:
    """The model asked for; else, for an upgrade or a new index, the default; else the index's own
    (`built_with`), with a notice where a new index would get another."""
    if request.model is not None:
        return request.model
    if request.upgrade or built_with is None:
        return DEFAULT_MODEL
    if built_with != DEFAULT_MODEL and notice is not None:
        notice(
            f"keeping this index's model {built_with}: the model {DEFAULT_MODEL} (the default for "
            "new indexes) would encode every paper again"
        )
    return built_with


def _chosen_precision(
    request: EncoderRequest,
    facts: ModelFacts,
    asked: str | None,
    kept: str | None,
    notice: Callable[[str], None] | None,
    index: object,
    papers: int | None,
) -> str:
    """The precision the model has if only one; else the one `asked` for; else fp32 on a GPU; else
    the index's own (`kept`, None for a new index or another model) with a notice where a new index
    of `papers` papers would get another; else the model's default on a CPU for `papers` papers
    (fp32 where a GPU is found)."""
    if len(facts.precisions) == 1:
        return facts.precisions[0]
    if asked is not None:
        return asked
    if request.device == "cuda":
        if kept is not None and kept != "fp32":
            raise OptionError(
                f"index {index} is {kept}, which encodes on the CPU: encode on the CPU, "
                "or give precision full to encode every paper again on the GPU",
                "device",
            )
        return "fp32"
    if kept is not None:
        default = facts.cpu_precision(papers)
        if kept != default and notice is not None:
            sized = default != facts.cpu_precision()
            notice(
                f"keeping this index's precision {kept}: the precision "
                f"{default} (the default for new indexes"
                + (f" of {papers:,} papers" if sized and papers is not None else "")
                + ") would encode every paper again"
            )
        return kept
    precision = facts.cpu_precision()
    if precision != "fp32" and request.device == "auto":
        from .sentence_transformer import cuda_available

        precision = (
            "fp32" if cuda_available() else precision
        )  # int8 encodes on CPUs only: a GPU build is fp32
    return _by_size(facts, precision, papers, notice)


def _by_size(
    facts: ModelFacts, precision: str, papers: int | None, notice: Callable[[str], None] | None
) -> str:
    """`precision`, or the recipe the model's size rule gives a new index of `papers` papers instead
    (ModelFacts.by_size), with a notice saying which and why; `precision` with a notice where that
    recipe cannot load here (OpenVINO or NNCF)."""
    chosen = facts.by_size(precision, papers)
    if chosen == precision or papers is None:
        return precision
    rule = facts.size_rule()
    missing = openvino_encoding.static_unavailable()
    if missing is not None:
        if notice is not None:
            notice(f"precision {precision}: {chosen} ({rule}) cannot run here: {missing}")
        return precision
    if notice is not None:
        notice(f"precision {chosen} for {papers:,} papers ({rule}, whole builds measured)")
    return chosen


def _kept_chunking(record: Mapping | None, notice: Callable[[str], None] | None) -> Chunking:
    """The chunking of the index being rebuilt with the same model, else the default; a notice when
    an older default is kept."""
    if record is None or "chunking" not in record:
        return Chunking()
    kept = Chunking.from_dict(
        {key: value for key, value in record["chunking"].items() if key != "max_tokens"}
    )
    if kept != Chunking() and notice is not None:
        notice(
            f"keeping this index's chunking '{kept.strategy}': the chunking {Chunking().strategy} "
            "(the default for new indexes) would encode every paper again"
        )
    return kept


def _load_encoder(
    choice: EncoderChoice, export: Path | None, resources: contextlib.ExitStack
) -> Encoder:
    from . import loading

    device, exported_only = choice.device, choice.exported_only
    if choice.engine == "ray":
        from .ray_engine import RayEncoder, RaySession

        session = resources.enter_context(RaySession())
        # The windows are cut here, with the model's tokenizer on this machine's CPU.
        local = loading.encoder_spec(choice.model, export, "cpu", exported_only=exported_only)()
        device = "cpu" if exported_only else device  # int8 and static encode on CPUs only
        return RayEncoder(
            session,
            loading.encoder_spec(choice.model, export, device, exported_only=exported_only),
            local,
            device,
        )
    return loading.encoder_spec(choice.model, export, device, exported_only=exported_only)()


class LazyEncoder:
    """Loads the model only when something has to be encoded, so a rebuild from cache is quick."""

    def __init__(self, model: str, load: Callable[[], Encoder]):
        self.name = model
        self._load_encoder = load
        self._encoder: Encoder | None = None
        self.remembered_max_tokens: int | None = (
            None  # the model's window, as the cache remembers it
        )

    def _load(self) -> Encoder:
        if self._encoder is None:
            self._encoder = self._load_encoder()
        return self._encoder

    @property
    def dimension(self) -> int:
        return self._load().dimension

    @property
    def max_tokens(self) -> int:
        return self._load().max_tokens

    @property
    def group_size(self) -> int | None:
        return getattr(self._load(), "group_size", None)

    @property
    def max_tokens_if_known(self) -> int | None:
        return self._encoder.max_tokens if self._encoder is not None else None

    def token_spans(self, text: str):
        return self._load().token_spans(text)

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._load().encode(texts)


def new_index_precision(
    model: str | None, precision: str | None, papers: int | None = None
) -> tuple[str, str]:
    """The model and precision a new index of `model` at `precision` (None: the defaults) of
    `papers` papers (None: not known) is built with on a CPU (as choose_encoder decides it)."""
    facts = model_facts(model or DEFAULT_MODEL)
    name = facts.name if model is None else model
    if len(facts.precisions) == 1:
        return name, facts.precisions[0]
    asked = facts.resolve_precision(precision)
    if asked is None or precision == "fast":
        asked = _by_size(facts, asked or facts.cpu_precision(), papers, None)
    return name, asked
