"""Exact nearest neighbours of a point set, for UMAP fits of every point.

umap-learn finds neighbours with pynndescent, whose numba functions take the
distance as an argument or use global arrays: numba cannot cache them, so every
kernel compiles them again (most of a minute). For the sizes nbviz fits whole
(up to ``fit_size``, 20,000 points by default) scikit-learn's brute-force search
is exact, compiles nothing, and takes about a second; its result goes to UMAP as
``precomputed_knn``. Each point's first neighbour is itself, at distance 0, as
in umap-learn's own search.
"""

from __future__ import annotations

import numpy as np

__all__ = ["exact_neighbours"]

_SKLEARN_METRIC = {
    "euclidean": "euclidean",
    "cosine": "cosine",
    "manhattan": "manhattan",
    "correlation": "correlation",
}


def exact_neighbours(X: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``(indices int32 (n, k), distances float32 (n, k))`` of each row's k nearest rows
    (itself first) under ``metric``."""
    from sklearn.neighbors import NearestNeighbors

    if metric not in _SKLEARN_METRIC:
        raise ValueError(
            f"exact_neighbours: metric must be one of {', '.join(_SKLEARN_METRIC)}, got {metric!r}"
        )
    search = NearestNeighbors(n_neighbors=k, metric=_SKLEARN_METRIC[metric], algorithm="brute")
    dists, indices = search.fit(X).kneighbors(X)
    return indices.astype(np.int32), dists.astype(np.float32)
