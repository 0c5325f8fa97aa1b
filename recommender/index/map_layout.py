"""The 2-D layout of an index's map: every paper's vector projected to a point, computed from the
vectors alone, seeded: t-SNE (openTSNE) on cosine distance, else UMAP if only umap-learn is
installed, else PCA. t-SNE with a PCA start and few iterations keeps more of each paper's nearest
papers near it on the map than UMAP did, in a fraction of UMAP's time (docs/performance.md, "Reading
groups and the map"; scripts/bench_map_layout.py).

`papers build --map-layout` stores the layout of all the index's papers in the version
(MAP_LAYOUT, and the projection's name in the manifest), so that the whole index's map
(`papers map --all`, the server's /map) reads it instead of projecting again; reading/layout.py
draws the map around it. A build keeps the setting of the index it rebuilds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from .layout import MAP_LAYOUT
from .stored import StoredIndex, corrupt

UMAP_PHASE = "projecting with UMAP (its first run compiles it: 20-45 s)"
MANIFEST_KEY = "map_layout"  # the projection's name ("t-SNE", "UMAP" or "PCA") in the manifest
# t-SNE's settings, chosen by scripts/bench_map_layout.py: a perplexity of 15 (45 neighbours a
# paper), PCA start, 50 early-exaggeration and 100 further iterations (openTSNE's defaults: 30,
# 250 and 500 keep no more neighbours and take several times as long).
TSNE_PERPLEXITY = 15.0
TSNE_ITERATIONS = (50, 100)


def project_2d(
    vectors: np.ndarray,
    seed: int = 0,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, str]:
    """(n, 2) coordinates and the method: t-SNE on cosine distance if openTSNE is installed, else
    UMAP if umap-learn is, else PCA. `on_phase(UMAP_PHASE)` is called before UMAP starts: however
    few the papers, it may take a while.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if len(vectors) >= 10:
        try:
            import openTSNE
        except ImportError:
            openTSNE = None
        if openTSNE is not None:
            return tsne_2d(vectors, seed), "t-SNE"
        try:
            import umap
        except ImportError:
            umap = None
        if umap is not None:
            if on_phase is not None:
                on_phase(UMAP_PHASE)
            with warnings.catch_warnings():
                warnings.simplefilter(
                    "ignore"
                )  # "n_jobs overridden by random_state", spectral init on tiny data
                reducer = umap.UMAP(
                    n_neighbors=min(15, len(vectors) - 1),
                    min_dist=0.25,
                    metric="cosine",
                    random_state=seed,
                )
                return np.asarray(reducer.fit_transform(vectors), dtype=np.float64), "UMAP"
    return pca_2d(vectors), "PCA"


def tsne_2d(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """openTSNE's t-SNE on cosine distance, from the PCA start, with the settings above; one
    thread (the server's background process leaves the other cores to lookups)."""
    from openTSNE import TSNE

    tsne = TSNE(
        perplexity=min(TSNE_PERPLEXITY, (len(vectors) - 1) / 3),
        metric="cosine",
        initialization="pca",
        early_exaggeration_iter=TSNE_ITERATIONS[0],
        n_iter=TSNE_ITERATIONS[1],
        n_jobs=1,
        random_state=seed,
        verbose=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(tsne.fit(np.asarray(vectors, dtype=np.float64)), dtype=np.float64)


def pca_2d(vectors: np.ndarray) -> np.ndarray:
    """The first two principal components (signs fixed so reruns agree)."""
    centred = np.asarray(vectors, dtype=np.float64) - np.mean(vectors, axis=0)
    if len(centred) < 2:
        return np.zeros((len(centred), 2))
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    axes = axes[:2]
    signs = np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])
    coordinates = centred @ (axes * signs[:, None]).T
    if coordinates.shape[1] < 2:
        coordinates = np.hstack(
            [coordinates, np.zeros((len(coordinates), 2 - coordinates.shape[1]))]
        )
    return coordinates


def stored_projection(stored: StoredIndex) -> str | None:
    """The projection of the layout the version stores ("t-SNE", "UMAP" or "PCA"), or None (none
    stored)."""
    projection = stored.manifest.get(MANIFEST_KEY)
    return str(projection) if projection and stored.has(MAP_LAYOUT) else None


def stored_layout(stored: StoredIndex) -> tuple[np.ndarray, str] | None:
    """The layout the version stores ((paper count, 2) coordinates, the projection's name), or
    None when it was built without one."""
    projection = stored_projection(stored)
    if projection is None:
        return None
    coordinates = stored.load_array(MAP_LAYOUT)
    if (
        coordinates.shape != (stored.manifest["paper_count"], 2)
        or not np.isfinite(coordinates).all()
    ):
        raise corrupt(stored, MAP_LAYOUT, "does not hold a point for every paper")
    return np.asarray(coordinates, dtype=np.float64), projection
