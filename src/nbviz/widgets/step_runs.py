"""Sorted steps as arithmetic runs ``(first, count, stride)``: a bounded payload for the scrubber.

A run logged every step (or every k steps) is one run, whatever its length, so
the scrubber's positions cost a few bytes at a million steps; the browser
indexes the runs (``js/lib/steps.js``, ``stepRuns``) without expanding them.
Irregular steps need up to a run per step or two; past :data:`MAX_RUNS` runs
the positions are thinned to every k-th one (the last always kept) so that the
payload stays bounded; the kernel keeps every step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbviz.widgets.wire import steps_payload

__all__ = ["MAX_RUNS", "expand_runs", "runs_payload", "step_runs"]

#: Most runs sent: a bound on the payload (int32 x 3 each) for irregular steps.
MAX_RUNS = 2048


def step_runs(steps: np.ndarray) -> np.ndarray:
    """``steps`` (sorted, distinct) as rows ``[first, count, stride]`` (int64), greedily
    from the start: each run is as long as one stride lasts."""
    steps = np.asarray(steps, dtype=np.int64)
    n = len(steps)
    if n == 0:
        return np.zeros((0, 3), dtype=np.int64)
    if n == 1:
        return np.array([[steps[0], 1, 1]], dtype=np.int64)
    gaps = np.diff(steps)
    # positions i where the gap after i differs from the gap before it: a run may end there
    turns = np.flatnonzero(gaps[1:] != gaps[:-1]) + 1
    runs: list[tuple[int, int, int]] = []
    i = 0
    while i < n:
        if i == n - 1:
            runs.append((int(steps[i]), 1, 1))
            break
        k = int(np.searchsorted(turns, i, "right"))
        end = int(turns[k]) if k < len(turns) else n - 1
        runs.append((int(steps[i]), end - i + 1, int(gaps[i])))
        i = end + 1
    return np.array(runs, dtype=np.int64)


def expand_runs(runs: np.ndarray) -> np.ndarray:
    """The steps of rows ``[first, count, stride]`` (the inverse of :func:`step_runs`)."""
    runs = np.asarray(runs, dtype=np.int64).reshape(-1, 3)
    if len(runs) == 0:
        return np.zeros(0, dtype=np.int64)
    first, count, stride = runs[:, 0], runs[:, 1], runs[:, 2]
    offsets = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(count) - count, count
    )
    return np.repeat(first, count) + np.repeat(stride, count) * offsets


def runs_payload(steps: np.ndarray, max_runs: int = MAX_RUNS) -> dict[str, Any]:
    """The scrubber's ``positions``: ``{"runs": [k, 3] array, "total": steps recorded,
    "every": 1, or k when every k-th step is sent}`` with at most ``max_runs`` runs
    (at least 2: thinned positions keep the first step and the last)."""
    if isinstance(max_runs, bool) or not isinstance(max_runs, (int, np.integer)):
        raise TypeError(f"runs_payload: max_runs must be an integer >= 2, got {max_runs!r}")
    if max_runs < 2:
        raise ValueError(f"runs_payload: max_runs must be an integer >= 2, got {max_runs!r}")
    steps = np.asarray(steps, dtype=np.int64)
    n = len(steps)
    if n > 1 and int(steps[-1]) - int(steps[0]) == n - 1:  # distinct: every step between
        runs = np.array([[steps[0], n, 1]], dtype=np.int64)
        return {"runs": steps_payload(runs.reshape(-1)), "total": n, "every": 1}
    gaps = np.diff(steps)
    # each run but the last ends at a turn (where the gap changes): few turns, few runs
    turns = int(np.count_nonzero(gaps[1:] != gaps[:-1])) if n > 2 else 0
    runs = step_runs(steps) if turns < 2 * max_runs else None
    every = 1
    if runs is None or len(runs) > max_runs:
        # every k-th step: at most max_runs steps, so at most as many runs
        every = math.ceil(n / (max_runs - 1))
        runs = step_runs(_thinned(steps, every))
    return {"runs": steps_payload(runs.reshape(-1)), "total": n, "every": every}


def _thinned(steps: np.ndarray, every: int) -> np.ndarray:
    """Every ``every``-th step and the last one."""
    kept = steps[::every]
    return kept if kept[-1] == steps[-1] else np.append(kept, steps[-1])
