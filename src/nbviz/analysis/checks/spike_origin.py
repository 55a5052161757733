"""Where a loss spike began: the layer whose gradient norm jumped first.

For a spike of the training loss (``loss_spikes``), the parameter gradients
recorded around it say which layer moved first. Per module (its parameters'
gradient norms combined), the baseline is the median of up to :data:`BASELINE`
captures before the spike's look-back window; a module *jumped* at a capture
when its gradient norm there is at least :data:`JUMP` (3x) its baseline.
Healthy gradient norms wander within about 2x of their recent median from
capture to capture, so 3x is a jump, not noise.

The window runs from :data:`LOOKBACK` captures (at most as many capture
periods) before the spike's first step to one capture period after its peak
(a spike between two captures shows at the next one); its exact captures are
read at any run length. The origin is the earliest capture in it at which any module
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
import pandas as pd

from nbviz.analysis.checks.model import layout
from nbviz.analysis.checks.robust import nanmedian

#: Captures before the window whose median is a module's baseline (at least MIN_BASELINE).
BASELINE = 10
MIN_BASELINE = 3
#: Captures before the spike's first step searched for a precursor.
LOOKBACK = 3
#: A gradient norm this many times its baseline has jumped.
JUMP = 3.0
#: At least this fraction of the modules jumping at one capture is a jump of them all.
TOGETHER = 0.8

#: A spike: the steps it spans and its peak step.
Spike = tuple[Sequence[int], int]


def spike_origin(run: Any, spike_steps: Sequence[int], peak_step: int) -> dict[str, Any] | None:
    """The layer whose gradient norm jumped first around one spike, or None
    (see :func:`spike_origins`)."""
    return spike_origins(run, [(spike_steps, peak_step)])[0]


def spike_origins(run: Any, spikes: Sequence[Spike]) -> list[dict[str, Any] | None]:
    """For each spike, the layer whose gradient norm jumped first around it, or None.

    Each is ``{"layer", "step", "jump", "baseline", "norm", "layers_jumped",
    "layers", "backward_rank", "before_loss", "together"}``: the module, the
    capture where it jumped, its norm over its baseline, how many of the modules
    jumped at that capture out of how many, its place in the backward pass (0:
    reached first), whether the jump came before the loss's, and whether
    (nearly) every module jumped at once.

    The exact captures of each spike's step window are read (at any run length;
    not the sampled captures of a long run), all spikes' at once: at most
    ``BASELINE + LOOKBACK`` captures before the first step, within that many
    capture periods of it, to one period after the peak.
    """
    none: list[dict[str, Any] | None] = [None] * len(spikes)
    lay = layout(run)
    if lay is None or "gradients" not in lay.signals or not spikes:
        return none
    captures = np.asarray(run.steps("gradient"), dtype=np.int64)
    # the capture period: the probe's, else the usual spacing of the captures
    spacing = int(np.median(np.diff(captures))) if len(captures) > 1 else 1
    every = int(lay.every or max(spacing, 1))
    windows = [
        _window(captures, every, steps, peak) if len(steps) else None for steps, peak in spikes
    ]
    wanted = sorted({int(s) for w in windows if w is not None for s in captures[w[0] : w[2]]})
    if not wanted:
        return none
    params = [p for p in lay.params_by_depth() if p.requires_grad]
    recorded = set(run.recorded_layers("gradient"))
    frames = [
        run.stats("gradient", layer=p.name, steps=wanted) for p in params if p.name in recorded
    ]
    frames = [f for f in frames if len(f)]
    if not frames:
        return none
    frame = pd.concat(frames, ignore_index=True)
    module_of = {p.name: p.module for p in params}
    frame = frame.assign(module=frame["layer"].map(module_of), sq=frame["norm"] ** 2)
    table = frame.pivot_table(index="step", columns="module", values="sq", aggfunc="sum")
    norms = np.sqrt(table.to_numpy(dtype=np.float64))
    modules = list(table.columns)
    order = sorted(modules, key=lay.depth, reverse=True)  # the backward pass's order
    rank = {m: i for i, m in enumerate(order)}
    row_of = {int(s): i for i, s in enumerate(table.index)}
    out = list(none)
    for i, ((steps, _), window) in enumerate(zip(spikes, windows)):
        if window is None:
            continue
        base_steps, look_steps = captures[window[0] : window[1]], captures[window[1] : window[2]]
        base = norms[[row_of[int(s)] for s in base_steps if int(s) in row_of]]
        look_rows = [row_of[int(s)] for s in look_steps if int(s) in row_of]
        out[i] = _origin(norms[look_rows], table.index[look_rows], base, modules, rank, min(steps))
    return out


def _window(
    captures: np.ndarray, every: int, steps: Sequence[int], peak: int
) -> tuple[int, int, int] | None:
    """Indices into ``captures``: the baseline's start, the look-back's start, the window's end.

    The look-back is up to :data:`LOOKBACK` captures within as many capture periods
    before the first step; the baseline up to :data:`BASELINE` captures before it,
    within ``BASELINE + LOOKBACK`` periods of the first step (a gap in the captures
    is not bridged).
    """
    first = int(min(steps))
    at = int(np.searchsorted(captures, first, side="left"))
    look = int(np.searchsorted(captures, first - LOOKBACK * every, side="left"))
    look = max(look, at - LOOKBACK)
    floor = int(np.searchsorted(captures, first - (LOOKBACK + BASELINE) * every, side="left"))
    base = max(floor, look - BASELINE)
    stop = int(np.searchsorted(captures, int(peak) + every, side="right"))
    if look - base < MIN_BASELINE or stop <= look:
        return None
    return base, look, stop


def _origin(
    norms: np.ndarray,
    steps: Any,
    base_rows: np.ndarray,
    modules: list[str],
    rank: dict[str, int],
    first: int,
) -> dict[str, Any] | None:
    """The first jump in the window's rows ``norms`` against the baseline's rows."""
    if len(base_rows) < MIN_BASELINE or len(norms) == 0:
        return None
    with np.errstate(invalid="ignore"):
        baseline = nanmedian(base_rows, axis=0)
    ok = np.isfinite(baseline) & (baseline > 0)
    if not ok.any():
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(ok[None, :], norms / baseline[None, :], np.nan)
    jumped = np.nan_to_num(ratio, nan=0.0) >= JUMP
    rows = np.flatnonzero(jumped.any(axis=1))
    if len(rows) == 0:
        return None
    row = int(rows[0])
    candidates = np.flatnonzero(jumped[row])
    best = max(candidates, key=lambda j: (ratio[row, j], -rank[modules[j]]))
    step = int(steps[row])
    return {
        "layer": modules[best],
        "step": step,
        "jump": float(ratio[row, best]),
        "baseline": float(baseline[best]),
        "norm": float(norms[row, best]),
        "layers_jumped": int(len(candidates)),
        "layers": int(ok.sum()),
        "backward_rank": rank[modules[best]],
        "before_loss": step < int(first),
        "together": len(candidates) >= TOGETHER * int(ok.sum()),
        "threshold_jump": JUMP,
    }
