"""A scalar's summary (``Reader.scalar_summary``) as the points and breaks a chart draws.

A summary of rows is drawn as it is. A summary of buckets becomes each
bucket's minimum and maximum at the steps they were reached (so spikes
survive), a NaN point where a bucket held a non-finite value (the line breaks
there), and one break ``[first, last, kind]`` per such bucket.
:func:`minmax_downsample` keeps the same extremes of a series already in memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["minmax_downsample", "nonfinite_breaks", "summary_points", "window_points"]


def nonfinite_breaks(steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Stretches of NaN/Inf as rows ``[first_step, last_step, kind]`` (kind 0 NaN, 1 +Inf, -1 -Inf).

    A stretch is a run of consecutive points of the same kind.
    """
    bad = ~np.isfinite(values)
    if not bad.any():
        return np.zeros((0, 3), dtype=np.float64)
    kind = np.where(np.isnan(values), 0.0, np.sign(np.nan_to_num(values, nan=0.0)))
    idx = np.flatnonzero(bad)
    # a new stretch starts where the previous point was finite or of another kind
    starts = np.ones(len(idx), dtype=bool)
    starts[1:] = (np.diff(idx) != 1) | (kind[idx[1:]] != kind[idx[:-1]])
    first = idx[starts]
    ends = np.append(np.flatnonzero(starts)[1:] - 1, len(idx) - 1)
    last = idx[ends]
    return np.column_stack([steps[first], steps[last], kind[first]]).astype(np.float64)


def _column(frame: Any, name: str, dtype: Any, fill: float) -> np.ndarray:
    return frame[name].to_numpy(dtype=dtype, na_value=fill)


def summary_points(summary: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(steps int64, values float64, breaks [n, 3] float64)`` of a ``SeriesSummary``.

    The reference of ``nbviz.store.window_sql.BUCKET_POINTS``, which makes the same
    steps and values in SQL for ``Reader.scalar_points`` (a zoom's read): a change to
    one is a change to both (tests/test_zoom_reads.py compares them).
    """
    f = summary.frame
    if summary.width == 0:
        steps = _column(f, "step", np.int64, 0)
        values = _column(f, "value", np.float64, np.nan)
        return steps, values, nonfinite_breaks(steps, values)
    mins = _column(f, "min", np.float64, np.nan)
    maxs = _column(f, "max", np.float64, np.nan)
    min_steps = _column(f, "min_step", np.int64, -1)
    max_steps = _column(f, "max_step", np.int64, -1)
    bad = _column(f, "bad_first", np.int64, -1)
    parts_s = [min_steps[~np.isnan(mins)], max_steps[(~np.isnan(maxs)) & (max_steps != min_steps)]]
    parts_v = [mins[~np.isnan(mins)], maxs[(~np.isnan(maxs)) & (max_steps != min_steps)]]
    parts_s.append(bad[bad >= 0])
    parts_v.append(np.full(int((bad >= 0).sum()), np.nan))
    steps = np.concatenate(parts_s).astype(np.int64)
    values = np.concatenate(parts_v)
    order = np.argsort(steps, kind="stable")
    has_bad = bad >= 0
    breaks = np.column_stack(
        [
            bad[has_bad],
            _column(f, "bad_last", np.int64, -1)[has_bad],
            _column(f, "bad_kind", np.int64, 0)[has_bad],
        ]
    ).astype(np.float64)
    return steps[order], values[order], breaks.reshape(-1, 3)


def window_points(
    run: Any, name: str, max_points: int, lo: float, hi: float
) -> tuple[int, np.ndarray, np.ndarray]:
    """What a zoom into steps ``lo..hi`` reads of one scalar: ``(rows in the window, steps,
    values)``, every row when at most ``max_points`` fall in it (with the one before
    and the one after, so the line runs to the window's borders), else the extremes of
    the finest buckets that fit."""
    points = run.scalar_points(
        name,
        max_points,
        step_range=(max(int(np.floor(lo)), 0), max(int(np.ceil(hi)), 0)),
        edges=True,
    )
    return points.total, points.steps, points.values


def minmax_downsample(
    steps: np.ndarray, values: np.ndarray, max_points: int
) -> tuple[np.ndarray, np.ndarray]:
    """At most ~``max_points`` points of a series, keeping each bucket's min and max.

    Buckets are equal runs of points; the first non-finite point of each
    bucket is kept as NaN so the line breaks where the series broke. The
    first and last points are always kept.
    """
    n = len(steps)
    if n <= max_points:
        return steps, values
    n_buckets = max(1, max_points // 2 - 1)
    bounds = (np.arange(n_buckets) * n) // n_buckets
    finite = np.isfinite(values)
    lo = np.where(finite, values, np.inf)
    hi = np.where(finite, values, -np.inf)
    # argmin/argmax per bucket: reduce values, then find the first index reaching it
    mins = np.minimum.reduceat(lo, bounds)
    maxs = np.maximum.reduceat(hi, bounds)
    bucket = np.repeat(np.arange(n_buckets), np.diff(np.append(bounds, n)))
    keep = np.zeros(n, dtype=bool)
    for target, col in ((mins, lo), (maxs, hi)):
        hit = np.flatnonzero(col == target[bucket])
        first = np.unique(bucket[hit], return_index=True)[1]
        keep[hit[first]] = True
    bad = np.flatnonzero(~finite)
    if len(bad):
        keep[bad[np.unique(bucket[bad], return_index=True)[1]]] = True
    keep[0] = keep[-1] = True
    out = values[keep].copy()
    out[~np.isfinite(out)] = np.nan
    return steps[keep], out
