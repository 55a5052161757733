"""The x axis of a chart over a run's history: by step, by wall clock, or by time since start.

``"step"`` is the training step; ``"wall"`` the wall-clock time each value was
logged at (seconds since the epoch, drawn as a time of day); ``"relative"`` the
seconds since the run's first record, which puts runs started at different
times side by side. Times are made non-decreasing per series (a clock stepped
back by NTP must not fold a line onto itself).
"""

from __future__ import annotations

import numpy as np

__all__ = ["X_AXES", "X_LABELS", "times_x"]

X_AXES = ("step", "wall", "relative")
X_LABELS = {"step": "step", "wall": "wall-clock time", "relative": "time since start (s)"}


def times_x(times: np.ndarray, axis: str, origin: float) -> np.ndarray:
    """Points' x on a time ``axis`` from the wall-clock times they were logged at:
    non-decreasing (a missing or stepped-back time takes the time before it), and
    less ``origin`` (the run's first time) on the ``"relative"`` axis."""
    t = np.asarray(times, dtype=np.float64)
    if len(t) == 0:
        return t
    filled = np.where(np.isfinite(t), t, -np.inf)
    x = np.maximum.accumulate(filled)
    first = t[np.isfinite(t)]
    x[~np.isfinite(x)] = first[0] if len(first) else 0.0
    return x - origin if axis == "relative" and np.isfinite(origin) else x
