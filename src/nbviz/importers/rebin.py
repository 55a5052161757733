"""A tag's TensorBoard histograms as rows of nbviz's histograms table.

nbviz stores a histogram as n uniform bins over ``[lo, hi]`` with one bin count
for every step of a layer (the ridge view stacks the rows). TensorBoard's bins
are kept exactly when they fit that: uniform edges with the same bucket count at
every step of the tag (``add_histogram(..., bins=30)``, TF2's
``tf.summary.histogram``). Otherwise (PyTorch's default exponential
``bins="tensorflow"``, or ``bins="auto"`` whose count changes from step to
step) each step is re-binned onto uniform bins over its own ``[min, max]``,
with its mass spread evenly inside each source bucket: the rule TensorBoard's
own histogram dashboard and nbviz's Histograms view use to draw unequal bins.
The counts stay integers whose total is the source's total.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Bins of a re-binned tag: its largest bucket count, within these bounds.
MIN_BINS, MAX_BINS = 16, 256
_UNIFORM_RTOL = 1e-6


def is_uniform(edges: np.ndarray) -> bool:
    """Whether the edges are equally spaced (to float precision)."""
    widths = np.diff(edges)
    span = float(edges[-1] - edges[0])
    return bool(np.all(np.abs(widths - span / len(widths)) <= _UNIFORM_RTOL * max(span, 1e-300)))


def exact(histograms: Sequence[tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether every ``(edges, counts)`` can be stored as it is (see the module docstring)."""
    sizes = {len(c) for _, c in histograms}
    return len(sizes) == 1 and all(is_uniform(e) for e, _ in histograms)


def bin_count(histograms: Sequence[tuple[np.ndarray, np.ndarray]]) -> int:
    largest = max(len(c) for _, c in histograms)
    return int(min(MAX_BINS, max(MIN_BINS, largest)))


def uniform(edges: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    """``counts`` over ``edges`` re-binned onto n uniform bins over ``[edges[0], edges[-1]]``."""
    cdf = np.concatenate([[0.0], np.cumsum(counts)])
    lo, hi = float(edges[0]), float(edges[-1])
    if hi <= lo:  # every value the same: one spike
        out = np.zeros(n + 1)
        out[1:] = cdf[-1]
        return integer_counts(out)
    # a zero-width bucket (a repeated edge) holds its mass at that edge: interp takes the
    # cumulative count after the last of the repeated edges
    last = np.concatenate([np.diff(edges) > 0, [True]])
    grid = np.linspace(lo, hi, n + 1)
    return integer_counts(np.interp(grid, edges[last], cdf[last]))


def integer_counts(cdf: np.ndarray) -> np.ndarray:
    """Integer counts from cumulative counts (n + 1 values from 0 to the total).

    The cumulative counts are rounded, so every partial sum of the result is
    within one half of the source's and the total is the rounded total.
    """
    return np.diff(np.rint(np.maximum.accumulate(cdf))).astype(np.int64)
