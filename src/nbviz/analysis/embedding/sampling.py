"""Large N: the rows a method is fitted on, and the rest it places into the fitted map.

Above ``fit_size`` points a method is fitted on a sample of ``fit_size`` points
(chosen by ``seed``, so the same data gives the same sample) and the other
points are placed into that map, in batches.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["batches", "fit_note", "rest", "sample_indices"]


def sample_indices(n: int, fit_size: int, seed: int) -> np.ndarray:
    """Sorted indices of the rows a method is fitted on: all of them up to ``fit_size``."""
    if n <= fit_size:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=fit_size, replace=False))


def rest(n: int, fit: np.ndarray) -> np.ndarray:
    """Sorted indices of the rows not in ``fit``: those placed into the fitted map."""
    mask = np.ones(n, dtype=bool)
    mask[fit] = False
    return np.flatnonzero(mask)


def batches(idx: np.ndarray, size: int) -> Iterator[np.ndarray]:
    """``idx`` in consecutive slices of ``size``."""
    for start in range(0, len(idx), size):
        yield idx[start : start + size]


def fit_note(fitted_on: int, n: int) -> str:
    """The sentence a view shows when a layout was fitted on a sample."""
    return "" if fitted_on >= n else f"fitted on {fitted_on:,} of {n:,} points"
