"""Which logged scalars are the training and validation losses.

``train_loss`` is the training loss (``loss`` alone counts as one too) and
``val_loss`` the validation loss, as ``run.log`` and ``run.evaluate`` write them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TRAIN_NAMES = ("train_loss", "loss")
VAL_NAMES = ("val_loss",)


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
