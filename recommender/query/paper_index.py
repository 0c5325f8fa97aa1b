"""An opened index: look papers up, find papers like them, search by text.

`PaperIndex` is one class made of parts, each in its own module: the stored data and the hooks
an index with segments overrides (`opened.py`), lookups by reference (`lookups.py`), the
similarity queries (`similarity.py`) and text search (`search.py`), both ranked by
`pooling.py`.
"""

from __future__ import annotations

from ..embed.windows import Encoder
from ..index.layout import QUERY_ENCODER
from ..index.stored import StoredIndex, corrupt
from .lookups import Explanation
from .opened import check_text
from .pooling import Recommendation
from .ranking import check_options
from .search import TextSearch
from .similarity import SimilarQueries

__all__ = [
    "Explanation",
    "PaperIndex",
    "Recommendation",
    "check_options",
    "check_text",
    "load_query_encoder",
]


def load_query_encoder(stored: StoredIndex, model: str) -> Encoder:
    """The encoder the index's papers were encoded with, light where it can be: its ONNX export (at
    the index's precision) or static embeddings when there are, else the full model (fp32 only)."""
    from ..embed import loading
    from ..embed.models import export_required
    from ..embed.static_encoder import CONFIG_FILE as STATIC_CONFIG

    if stored.has(f"{QUERY_ENCODER}/model.onnx") or stored.has(f"{QUERY_ENCODER}/{STATIC_CONFIG}"):
        return loading.load_exported_encoder(stored.file(QUERY_ENCODER), model)
    if export_required(
        stored.manifest.get("query_encoder"), stored.manifest.get("precision", "fp32")
    ):
        raise corrupt(
            stored,
            QUERY_ENCODER,
            "is missing (its queries need the encoder its papers were encoded with)",
        )
    return loading.load_encoder(model)


class PaperIndex(SimilarQueries, TextSearch):
    """An opened index: look papers up, find papers like them, search by text."""

    def new_query_encoder(self) -> Encoder:
        """The index's query encoder (`load_query_encoder`), loaded on the first free text."""
        return load_query_encoder(self.stored, self.manifest["model"])
