"""What the optimizer did: its learning rate and the size of the steps it took.

- The learning rate: a scalar the loop logged (``run.log(step, lr=...)``; also
  ``learning_rate`` as Hugging Face's Trainer writes it, and names such as
  ``lr-Adam`` or ``train/lr``), else the parameter groups a probe read from
  ``watch(..., optimizer=)`` (run meta ``optimizer``: one entry per watched
  optimizer, ``{"type", "groups": [{"lr", "momentum", "betas", ...}]}``, and
  scalars ``optimizer/lr`` per capture).
- The step size: per weight matrix, the update/weight ratio ``||dw|| / ||w||``
  of a captured step (the probe's ``update`` signal). About 1e-3 is the usual
  rule of thumb (1e-4 to 1e-2 in healthy runs of SGD and Adam alike).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.checks.losses import outline
from nbviz.analysis.checks.model import ModelLayout, param_stats

#: Scalar names read as the learning rate, most specific first.
LR_NAMES = ("lr", "learning_rate", "optimizer/lr")
_LR_PATTERN = re.compile(r"(^|[/.])(lr|learning_rate)([-_/.]\w*)?$", re.IGNORECASE)


def lr_series(run: Any) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``(name, steps, values)`` of the learning rate over the run, or None when unknown.

    A long series comes as its outline (its ends as logged, bucket means between
    them: see :mod:`~nbviz.analysis.checks.losses`): a schedule's value at a step
    is its mean over the few steps around it.
    """
    names = run.scalar_names()
    chosen = next((n for n in LR_NAMES if n in names), None)
    if chosen is None:
        chosen = next((n for n in sorted(names) if _LR_PATTERN.search(n)), None)
    if chosen is None:
        return None
    frame = outline(run, chosen) if hasattr(run, "scalar_outline") else run.scalars(chosen)
    values = frame["value"].to_numpy(dtype=np.float64)
    keep = np.isfinite(values)
    if not keep.any():
        return None
    return chosen, frame["step"].to_numpy(dtype=np.int64)[keep], values[keep]


def optimizer_groups(run: Any) -> list[dict[str, Any]]:
    """The parameter groups the probes read from their optimizers (empty when none was given)."""
    info = run.meta("optimizer") or {}
    entries = info if isinstance(info, list) else [info]
    groups = []
    for entry in entries:
        for group in (entry or {}).get("groups", []):
            groups.append({"type": entry.get("type", ""), **group})
    return groups


def lr_at(run: Any, step: int | None = None) -> float | None:
    """The learning rate in force at ``step`` (the last one known when None)."""
    series = lr_series(run)
    if series is not None:
        _, steps, values = series
        if step is None:
            return float(values[-1])
        before = np.flatnonzero(steps <= step)
        return float(values[before[-1]] if len(before) else values[0])
    groups = optimizer_groups(run)
    lrs = [g["lr"] for g in groups if isinstance(g.get("lr"), (int, float))]
    return float(max(lrs)) if lrs else None


def update_ratios(run: Any, lay: ModelLayout) -> pd.DataFrame:
    """Steps x trainable weight matrices: the update/weight ratio at each capture."""
    if "weights" not in lay.signals:
        return pd.DataFrame()
    names = [p.name for p in lay.params_by_depth(matrices_only=True) if p.requires_grad]
    frame = param_stats(run, "update", names)
    if frame.empty:
        return pd.DataFrame()
    table = frame.pivot_table(index="step", columns="layer", values="rel", aggfunc="last")
    table = table.reindex(columns=[n for n in names if n in table.columns]).astype(np.float64)
    return table.where(np.isfinite(table))
