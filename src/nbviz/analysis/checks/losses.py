"""The training and validation losses a run logged, and how to read their shape.

``train_loss`` is the training loss (``loss`` alone counts as one too) and
``val_loss`` the validation loss, as ``run.log`` and ``run.evaluate`` write them.
The names other trainers give the validation loss count too: ``eval_loss``
(Hugging Face's Trainer), ``valid_loss`` (fastai), ``validation_loss``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TRAIN_NAMES = ("train_loss", "loss")
VAL_NAMES = ("val_loss", "eval_loss", "valid_loss", "validation_loss")


def loss_series(run: Any, candidates: tuple[str, ...]) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``(name, steps, values)`` of the first scalar in ``candidates`` that was logged.

    Non-finite values are left out (the ``nonfinite`` check reports them).
    """
    known = set(run.scalar_names())
    for name in candidates:
        if name in known:
            frame = run.scalars(name)
            steps = frame["step"].to_numpy(dtype=np.int64)
            values = frame["value"].to_numpy(dtype=np.float64)
            keep = np.isfinite(values)
            return name, steps[keep], values[keep]
    return None


def train_loss(run: Any) -> tuple[str, np.ndarray, np.ndarray] | None:
    return loss_series(run, TRAIN_NAMES)


def val_loss(run: Any) -> tuple[str, np.ndarray, np.ndarray] | None:
    return loss_series(run, VAL_NAMES)


def running_median(values: np.ndarray, width: int) -> np.ndarray:
    """Centred median over ``width`` values (fewer at the ends): single-batch outliers removed."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0 or width <= 1:
        return values.copy()
    half = width // 2
    padded = np.concatenate([np.full(half, values[0]), values, np.full(half, values[-1])])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return np.median(windows, axis=1)[:n]


def tail_level(values: np.ndarray, fraction: float = 0.1, least: int = 5) -> float:
    """Median of the last ``fraction`` of the values (at least ``least`` of them)."""
    values = np.asarray(values, dtype=np.float64)
    k = min(len(values), max(least, int(len(values) * fraction)))
    return float(np.median(values[-k:]))
