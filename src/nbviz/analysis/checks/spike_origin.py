"""Where a loss spike began: the layer whose gradient norm jumped first.

For a spike of the training loss (``loss_spikes``), the parameter gradients
recorded around it say which layer moved first. Per module (its parameters'
gradient norms combined), the baseline is the median of up to :data:`BASELINE`
captures before the spike's look-back window; a module *jumped* at a capture
when its gradient norm there is at least :data:`JUMP` (3x) its baseline.
Healthy gradient norms wander within about 2x of their recent median from
capture to capture, so 3x is a jump, not noise.

The window runs from :data:`LOOKBACK` captures before the spike's first step
to one capture period after its peak (a spike between two captures shows at
the next one). The origin is the earliest capture in it at which any module
jumped, and at that capture the module with the largest relative jump; a tie
goes to the module the backward pass reaches first (the one nearest the
loss). Seen a capture or more before the loss jumped, it is a precursor: the
layer destabilised first. Where at least :data:`TOGETHER` (80%) of the modules
jumped at that capture, no layer is the origin: a jump of the loss itself (a
bad batch, a step too large everywhere) reaches every gradient at once, and
the finding says so, naming the largest jump only as the largest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nbviz.analysis.checks.model import layout, param_stats

#: Captures before the window whose median is a module's baseline (at least MIN_BASELINE).
BASELINE = 10
MIN_BASELINE = 3
#: Captures before the spike's first step searched for a precursor.
LOOKBACK = 3
#: A gradient norm this many times its baseline has jumped.
JUMP = 3.0
#: At least this fraction of the modules jumping at one capture is a jump of them all.
TOGETHER = 0.8


def spike_origin(run: Any, spike_steps: Sequence[int], peak_step: int) -> dict[str, Any] | None:
    """The layer whose gradient norm jumped first around a spike, or None.

    Returns ``{"layer", "step", "jump", "baseline", "norm", "layers_jumped",
    "layers", "backward_rank", "before_loss", "together"}``: the module, the
    capture where it jumped, its norm over its baseline, how many of the modules
    jumped at that capture out of how many, its place in the backward pass (0:
    reached first), whether the jump came before the loss's, and whether
    (nearly) every module jumped at once.
    """
    lay = layout(run)
    if lay is None or "gradients" not in lay.signals or not spike_steps:
        return None
    params = [p for p in lay.params_by_depth() if p.requires_grad]
    frame = param_stats(run, "gradient", [p.name for p in params])
    if frame.empty:
        return None
    module_of = {p.name: p.module for p in params}
    frame = frame.assign(module=frame["layer"].map(module_of), sq=frame["norm"] ** 2)
    table = frame.pivot_table(index="step", columns="module", values="sq", aggfunc="sum")
    norms = np.sqrt(table.to_numpy(dtype=np.float64))
    steps = table.index.to_numpy(dtype=np.int64)
    modules = list(table.columns)
    every = int(lay.every or 1)
    first = int(min(spike_steps))
    before = np.flatnonzero(steps < first)
    start = (
        int(before[-LOOKBACK])
        if len(before) >= LOOKBACK
        else (int(before[0]) if len(before) else 0)
    )
    stop = int(np.searchsorted(steps, int(peak_step) + every, side="right"))
    base_rows = norms[max(0, start - BASELINE) : start]
    if len(base_rows) < MIN_BASELINE or stop <= start:
        return None
    with np.errstate(invalid="ignore"):
        baseline = np.nanmedian(base_rows, axis=0)
    ok = np.isfinite(baseline) & (baseline > 0)
    if not ok.any():
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(ok[None, :], norms[start:stop] / baseline[None, :], np.nan)
    jumped = np.nan_to_num(ratio, nan=0.0) >= JUMP
    rows = np.flatnonzero(jumped.any(axis=1))
    if len(rows) == 0:
        return None
    row = int(rows[0])
    order = sorted(modules, key=lay.depth, reverse=True)  # the backward pass's order
    rank = {m: i for i, m in enumerate(order)}
    candidates = np.flatnonzero(jumped[row])
    best = max(candidates, key=lambda j: (ratio[row, j], -rank[modules[j]]))
    step = int(steps[start + row])
    return {
        "layer": modules[best],
        "step": step,
        "jump": float(ratio[row, best]),
        "baseline": float(baseline[best]),
        "norm": float(norms[start + row, best]),
        "layers_jumped": int(len(candidates)),
        "layers": int(ok.sum()),
        "backward_rank": rank[modules[best]],
        "before_loss": step < first,
        "together": len(candidates) >= TOGETHER * int(ok.sum()),
        "threshold_jump": JUMP,
    }
