"""The training and validation losses a run logged, and how to read their shape.

``train_loss`` is the training loss (``loss`` alone counts as one too) and
``val_loss`` the validation loss, as ``run.log`` and ``run.evaluate`` write them.
The names other trainers give the validation loss count too: ``eval_loss``
(Hugging Face's Trainer), ``valid_loss`` (fastai), ``validation_loss``.

A loss of at most :data:`WHOLE` rows is read whole. A longer one is read as its
outline (``run.scalar_outline``): its first and last :data:`ENDS` losses as
logged and, between them, the means (or, for spikes, the peaks) of the buckets
the store keeps, so that the checks read about as much of a run of a million
steps as of one of a few thousand. The shape the checks look for (where the loss
starts and ends, whether it rises and stays up, a spike) survives the
bucketing; a date read from a bucket is its last step (its peak's step for a
spike).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd

TRAIN_NAMES = ("train_loss", "loss")
VAL_NAMES = ("val_loss", "eval_loss", "valid_loss", "validation_loss")
#: Rows of a loss read whole; beyond them, buckets between exact ends.
WHOLE = 2048
#: Losses read as logged at each end of a longer series.
ENDS = 512


_SHARED: ContextVar[dict[tuple[int, str], pd.DataFrame] | None] = ContextVar(
    "nbviz_shared_outlines", default=None
)


@contextmanager
def outlines_shared() -> Iterator[None]:
    """Within it, each scalar's outline is read once per run: the checks of one
    diagnosis read the training loss once between them."""
    if _SHARED.get() is not None:
        yield
        return
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def outline(run: Any, name: str) -> pd.DataFrame:
    """``run.scalar_outline(name)`` at the checks' sizes (shared in :func:`outlines_shared`)."""
    shared = _SHARED.get()
    key = (id(run), name)
    if shared is not None and key in shared:
        return shared[key]
    out = run.scalar_outline(name, WHOLE, ENDS)
    if shared is not None:
        shared[key] = out
    return out


def loss_series(
    run: Any, candidates: tuple[str, ...], *, peaks: bool = False
) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``(name, steps, values)`` of the first scalar in ``candidates`` that was logged.

    Non-finite values are left out (the ``nonfinite`` check reports them). A long
    series comes as its outline (see the module docstring): bucket means, or with
    ``peaks`` each bucket's largest value at its step.
    """
    known = set(run.scalar_names())
    for name in candidates:
        if name in known:
            if not hasattr(run, "scalar_outline"):  # a run without the store's bounded reads
                frame = run.scalars(name)
                steps = frame["step"].to_numpy(dtype=np.int64)
                values = frame["value"].to_numpy(dtype=np.float64)
            else:
                frame = outline(run, name)
                steps = frame["peak_step" if peaks else "step"].to_numpy(dtype=np.int64)
                values = frame["peak" if peaks else "value"].to_numpy(dtype=np.float64)
            keep = np.isfinite(values)
            return name, steps[keep], values[keep]
    return None


def train_loss(run: Any, *, peaks: bool = False) -> tuple[str, np.ndarray, np.ndarray] | None:
    return loss_series(run, TRAIN_NAMES, peaks=peaks)


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
