"""``overfitting``: validation loss rising while the training loss keeps falling.

The onset is the evaluation with the lowest validation loss: the model was
best there, and an early stop or checkpoint belongs at that step. It is a
``warning`` when, after that evaluation,

- at least :data:`MIN_AFTER` more evaluations were made, each above the best,
  and the median of the last three (or fewer) is at least :data:`RISE`
  (10%) above it: a sustained rise, not one noisy evaluation; and
- the training loss fell over the same span by at least :data:`TRAIN_FALL`
  (5%; medians over windows as long as the gap between evaluations, which
  smooth out minibatch noise).

A validation loss that rises while the training loss rises too is a different
problem (the learning rate, or the data) and is not reported here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, fmt, pct
from nbviz.analysis.checks.losses import train_loss, val_loss

CHECK = "overfitting"
MIN_AFTER = 2
RISE = 0.10
TRAIN_FALL = 0.05


def _median_near(steps: np.ndarray, values: np.ndarray, lo: int, hi: int) -> float | None:
    keep = (steps >= lo) & (steps <= hi)
    return float(np.median(values[keep])) if keep.any() else None


def check(run: Any) -> list[Finding]:
    """One warning with the onset step when validation loss turns up as training loss falls."""
    val, train = val_loss(run), train_loss(run)
    if val is None or train is None:
        return []
    val_name, vs, vv = val
    train_name, ts, tv = train
    if len(vv) < MIN_AFTER + 2 or len(tv) < 2:
        return []
    best = int(np.argmin(vv))
    after = vv[best + 1 :]
    if len(after) < MIN_AFTER or not (after > vv[best]).all():
        return []
    best_val = float(vv[best])
    tail = float(np.median(after[-3:]))
    scale = abs(best_val) if best_val != 0 else 1.0
    rise = (tail - best_val) / scale
    if rise < RISE:
        return []
    gap = max(int(np.median(np.diff(vs))), 1)
    onset, last = int(vs[best]), int(vs[-1])
    train_then = _median_near(ts, tv, onset - gap // 2, onset + gap // 2)
    train_now = _median_near(ts, tv, last - gap + 1, last)
    if train_then is None or train_now is None:
        return []
    fall = (train_then - train_now) / (abs(train_then) or 1.0)
    if fall < TRAIN_FALL:
        return []
    message = (
        f"Overfitting since step {onset}: {val_name} was lowest there ({fmt(best_val)}) and has "
        f"risen to {fmt(float(vv[-1]))} at step {last} (+{pct(rise)}, median of the last "
        f"evaluations), while {train_name} fell from {fmt(train_then)} to {fmt(train_now)} "
        f"(-{pct(fall)})."
    )
    return [
        Finding(
            check=CHECK,
            severity="warning",
            step=onset,
            cause="data",
            message=message,
            advice=(
                f"keep the checkpoint from step {onset} (early stopping), more data or "
                "augmentation, weight decay or dropout, or a smaller model"
            ),
            summary=f"the model memorises its training set from step {onset}",
            evidence={
                "best_step": onset,
                "best_val_loss": best_val,
                "last_step": last,
                "last_val_loss": float(vv[-1]),
                "val_rise": rise,
                "train_loss_at_best": train_then,
                "train_loss_last": train_now,
                "train_fall": fall,
                "evaluations_after_best": len(after),
                "threshold_rise": RISE,
                "threshold_train_fall": TRAIN_FALL,
            },
        )
    ]
