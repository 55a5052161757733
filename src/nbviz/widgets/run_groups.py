"""Runs grouped by a configuration value: one mean line and a min/max band per group.

A hundred overlaid runs are a tangle; grouped by ``optimizer`` (or ``lr``) they
are three lines with their spread. Each member series is first averaged into
the same buckets of x (at most ``buckets`` of them over the group's range, so
the cost is bounded whatever the runs' length), then the group's mean, min and
max are taken across members per bucket, ignoring members with no finite value
there (NaN/Inf never become a band edge).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "Band",
    "bucket_means",
    "flat_configs",
    "flatten_config",
    "group_band",
    "group_label",
    "group_runs",
]


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys (``{"opt": {"lr": 1}}`` -> ``{"opt.lr": 1}``).

    Values that are not a number, string, bool or None are shown as JSON text.
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_config(value, name + "."))
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value, default=str)
    return out


def flat_configs(runs: Sequence[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Each run's configuration flattened (:func:`flatten_config`), and every key any of
    them has, sorted."""
    configs = [flatten_config(run.config) for run in runs]
    return configs, sorted({k for c in configs for k in c})


def group_label(key: str, value: Any) -> str:
    """How a group is named in the legend: ``"optimizer=adam"``; a missing value says so."""
    if value is None:
        return f"{key} not set"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return f"{key}={text}"


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (2, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value))
    return (1, str(value))


def group_runs(configs: Sequence[dict[str, Any]], key: str) -> list[tuple[str, list[int]]]:
    """``[(label, run indices)]`` of the runs by their value of ``key`` (flattened config),
    numbers in numeric order, runs without the key last."""
    by_value: dict[str, tuple[Any, list[int]]] = {}
    for i, config in enumerate(configs):
        value = config.get(key)
        label = group_label(key, value)
        by_value.setdefault(label, (value, []))[1].append(i)
    ordered = sorted(by_value.items(), key=lambda kv: _sort_key(kv[1][0]))
    return [(label, members) for label, (_value, members) in ordered]


class Band:
    """A group's series per bucket: its mean x and step, and the mean, min and max
    across its members."""

    def __init__(
        self, x: np.ndarray, steps: np.ndarray, mean: np.ndarray, lo: np.ndarray, hi: np.ndarray
    ) -> None:
        self.x, self.steps, self.mean, self.lo, self.hi = x, steps, mean, lo, hi

    def __len__(self) -> int:
        return len(self.x)


def group_band(members: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], buckets: int) -> Band:
    """The band of member series ``(x, values, steps)`` over at most ``buckets`` buckets of x."""
    parts = [
        (np.asarray(x, np.float64), np.asarray(v, np.float64), np.asarray(s, np.float64))
        for x, v, s in members
    ]
    parts = [p for p in parts if len(p[0])]
    empty = np.zeros(0)
    if not parts:
        return Band(empty, empty.astype(np.int64), empty, empty, empty)
    x0 = min(float(p[0][0]) for p in parts)
    x1 = max(float(p[0][-1]) for p in parts)
    n = max(1, int(buckets))
    width = (x1 - x0) / n if x1 > x0 else 1.0
    means = np.full((len(parts), n), np.nan)
    x_sum = np.zeros(n)
    step_sum = np.zeros(n)
    x_count = np.zeros(n)
    for row, (x, v, s) in enumerate(parts):
        b = np.clip(((x - x0) / width).astype(np.int64), 0, n - 1)
        ok = np.isfinite(v)
        total = np.bincount(b[ok], weights=v[ok], minlength=n)
        count = np.bincount(b[ok], minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            means[row] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        x_sum += np.bincount(b, weights=x, minlength=n)
        step_sum += np.bincount(b, weights=s, minlength=n)
        x_count += np.bincount(b, minlength=n)
    keep = np.isfinite(means).any(axis=0) & (x_count > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(means[:, keep], axis=0)
        lo = np.nanmin(means[:, keep], axis=0)
        hi = np.nanmax(means[:, keep], axis=0)
    x = x_sum[keep] / x_count[keep]
    steps = np.rint(step_sum[keep] / x_count[keep]).astype(np.int64)
    return Band(x, steps, mean, lo, hi)


def bucket_means(summary: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of a scalar summary as one value per point: the rows as they
    are, or each bucket's mean of its finite values at the bucket's last step (NaN
    where a bucket held none)."""
    f = summary.frame
    if summary.width == 0:
        steps = f["step"].to_numpy(dtype=np.int64)
        return steps, f["value"].to_numpy(dtype=np.float64, na_value=np.nan)
    steps = f["last_step"].to_numpy(dtype=np.int64)
    total = f["total"].to_numpy(dtype=np.float64, na_value=np.nan)
    n = f["n_finite"].to_numpy(dtype=np.float64, na_value=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    return steps, means
