"""The 2-D layout of an index's map: every paper's vector projected to a point (UMAP on cosine
distance if umap-learn is installed, else PCA, both seeded), computed from the vectors alone.

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
MANIFEST_KEY = "map_layout"  # the projection's name ("UMAP" or "PCA") in the manifest


def project_2d(
    vectors: np.ndarray,
    seed: int = 0,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, str]:
    """(n, 2) coordinates and the method: UMAP on cosine distance if umap-learn is installed, else
    PCA. `on_phase(UMAP_PHASE)` is called before UMAP starts: however few the papers, it may take a
    while.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if len(vectors) >= 10:
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
    """The projection of the layout the version stores ("UMAP" or "PCA"), or None (none stored)."""
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
