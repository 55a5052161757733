"""Noise-robust statistics for the checks: medians, MADs and trailing runs."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

#: Scales a median absolute deviation to a standard deviation for Gaussian noise.
MAD_TO_STD = 1.4826


def trailing_run_start(mask: np.ndarray) -> int | None:
    """Index where the final stretch of True values in ``mask`` begins (None if it ends False)."""
    mask = np.asarray(mask, dtype=bool)
    if len(mask) == 0 or not mask[-1]:
        return None
    false = np.flatnonzero(~mask)
    return int(false[-1]) + 1 if len(false) else 0


@dataclass(frozen=True)
class Onset:
    """When a condition that holds over a layer's recent captures set in."""

    step: int
    #: It held from the first capture (the model started that way).
    from_start: bool

    def since(self) -> str:
        """The words for a message: "from the first capture" or "since step N"."""
        return "from the first capture" if self.from_start else f"since step {self.step}"


def onset(steps: np.ndarray, holds: np.ndarray, window: int) -> Onset:
    """The step where the final stretch of captures on which ``holds`` is True begins.

    When the last capture does not hold (the condition is judged on a median of the last
    ``window`` captures, not on each), the first of those ``window`` captures.
    """
    start = trailing_run_start(holds)
    step = int(steps[start if start is not None else len(steps) - window])
    return Onset(step=step, from_start=step == int(steps[0]))


def nanmedian(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Median ignoring NaN; NaN (and no warning) where a slice is all NaN."""
    values = np.asarray(values, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(values, axis=axis)


def trailing_median_mad(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD of the ``window`` values before each position (NaN where fewer).

    Position ``i`` is summarised by ``values[i - window : i]``: the value itself is
    left out, so a spike cannot hide in its own baseline.
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    med = np.full(n, np.nan)
    mad = np.full(n, np.nan)
    if n <= window:
        return med, mad
    windows = np.lib.stride_tricks.sliding_window_view(values, window)[:-1]
    m = np.median(windows, axis=1)
    med[window:] = m
    mad[window:] = np.median(np.abs(windows - m[:, None]), axis=1)
    return med, mad
