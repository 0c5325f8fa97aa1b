"""Find related research papers: sentence-transformer vectors in FAISS, fused with TF-IDF.

    from recommender import Recommender
    Recommender.open("default").like("FlashDP", k=5)
"""

__version__ = "0.1.0"

__all__ = ["Recommender", "Recommendation", "Paper", "build_index", "read_papers", "__version__"]


def __getattr__(name):
    # Lazy: `papers like` must not pay for modules it does not use.
    if name in ("Recommender", "Recommendation", "build_index", "BuildReport"):
        from . import core

        return getattr(core, name)
    if name in ("Paper", "read_papers"):
        from . import papers

        return getattr(papers, name)
    raise AttributeError(name)
