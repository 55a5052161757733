"""PCA: the first two principal components, in numpy alone (the first thing on screen).

Importing scikit-learn costs ~2 s in a fresh kernel, more than the fit: the
eigenvectors of the covariance serve up to ``EXACT_DIMS`` features, a seeded
randomized range finder (Halko et al.) above. Signs are fixed (largest loading
positive), so the same data gives the same layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["EXACT_DIMS", "pca"]

EXACT_DIMS = 1_024
"""Up to this many features the covariance is decomposed exactly."""


def pca(X: np.ndarray, fit: np.ndarray, p: Mapping[str, Any]) -> np.ndarray:
    """The first two principal components of every row, fitted on the rows ``fit``.

    Returns float64 ``(n, 2)``; a second column of zeros where there is only one
    component. ``p["seed"]`` seeds the randomized range finder.
    """
    n, d = X.shape
    k = min(2, d, len(fit))
    out = np.zeros((n, 2))
    if k == 0 or len(fit) < 2:
        return out
    sample = X[fit].astype(np.float64)
    mean = sample.mean(axis=0)
    centred = sample - mean
    if d <= EXACT_DIMS:
        _, vectors = np.linalg.eigh(centred.T @ centred)
        components = vectors[:, ::-1][:, :k]
    else:
        rng = np.random.default_rng(p["seed"])
        basis = centred @ rng.standard_normal((d, k + 10))
        for _ in range(4):  # power iterations sharpen the top of the spectrum
            basis, _ = np.linalg.qr(centred @ (centred.T @ basis))
        small = basis.T @ centred
        _, _, vt = np.linalg.svd(small, full_matrices=False)
        components = vt[:k].T
    biggest = np.argmax(np.abs(components), axis=0)
    components = components * np.sign(components[biggest, np.arange(k)])
    for lo in range(0, n, 100_000):  # float64 in slices: bounded memory at 1M rows
        rows = X[lo : lo + 100_000].astype(np.float64) - mean
        out[lo : lo + 100_000, :k] = rows @ components
    return out
