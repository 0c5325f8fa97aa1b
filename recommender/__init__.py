"""Find related research papers: sentence-transformer vectors in FAISS, fused with TF-IDF.

    from recommender import PaperIndex
    with PaperIndex.open("default") as index:
        index.like("FlashDP", k=5)

Layers, each importing only from those before it:
corpus (papers, readers) -> embed -> index -> query -> reading (related work,
sessions, map layout) and evaluation -> render -> cli.
"""

__version__ = "0.1.0"
#: The name to `pip install` (the import package is `recommender`, the command `papers`).
DISTRIBUTION = "papers-like"

# Public name -> the module that defines it. Loaded lazily: `papers like` must not
# pay for modules it does not use.
_EXPORTS = {
    "Paper": "corpus.papers",
    "read_papers": "corpus.papers",
    "Chunking": "embed.windows",
    "build_index": "index.build",
    "BuildReport": "index.build",
    "BuildRequest": "index.request",  # a build's settings, as one value
    "PaperIndex": "query.paper_index",
    "Recommendation": "query.paper_index",
    "RankingRequest": "query.ranking",  # k, mode, min_score, diverse, why, as one value
    "related_work": "reading.related",
    "select_rows": "reading.related",
    "plan_sessions": "reading.sessions",
    "build_map": "reading.layout",
    "write_map": "render.map",
    "evaluate": "evaluation.evaluate",
    "embedding_cache_info": "embed.embedding_cache",  # papers cache info
    "clear_embedding_cache": "embed.embedding_cache",  # papers cache clear
    "replacing": "files",  # write a file whole, exclusively, never through a link
}

__all__ = [*_EXPORTS, "__version__", "DISTRIBUTION"]


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(name)
