"""``loss_spikes``: steps where the training loss jumps far above its local trend.

Minibatch losses are noisy and right-skewed: in a healthy run a batch's loss
reaches a robust z-score of 5-6 against its neighbours. The trend at a step is
the median of the :data:`WINDOW` losses before it and the noise their median
absolute deviation (scaled to a standard deviation). A step is a spike when

- its robust z-score is at least :data:`MIN_Z` (10, well above the 5-6 of
  ordinary batches), and
- it is at least :data:`MIN_RATIO` (2x) the trend, and
- the jump undoes at least :data:`MIN_UNDONE` (half) of the progress made so
  far: ``(loss - trend) >= 0.5 * (start - trend)``, where ``start`` is the
  median of the first ten losses.

The last two matter near convergence, where the noise is tiny and skewed: a
digits MLP at batch 64 whose loss sits at 0.005 logs single batches of 0.03
(robust z over 10, 5x the trend), which undo 1% of the progress and mean
nothing. Measured on digits MLPs trained 1,500 steps: batch 64 (SGD) undoes
at most 5%, batch 16 (Adam) 24%. At batches of 8 or fewer one confidently
wrong sample can undo it all; such a step is reported, and the batch is worth
a look.

On a long run the middle of the loss is read as the peaks of the store's
buckets (:mod:`~nbviz.analysis.checks.losses`): a spike is its bucket's peak,
and stands out against the peaks of the buckets before it as a step does
against its neighbours.

Consecutive spiking steps form one spike (reported at its first step, with its
peak). Each spike is a ``warning``; at most :data:`MAX_FINDINGS` are listed,
largest first. Where the probe recorded parameter gradients, each spike names
the layer whose gradient norm jumped first around it (evidence ``origin_*``;
see :mod:`nbviz.analysis.checks.spike_origin`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, fmt
from nbviz.analysis.checks.losses import train_loss
from nbviz.analysis.checks.robust import MAD_TO_STD, trailing_median_mad
from nbviz.analysis.checks.spike_origin import spike_origins

CHECK = "loss_spikes"
WINDOW = 20
MIN_Z = 10.0
MIN_RATIO = 2.0
MIN_UNDONE = 0.5
#: Losses whose median is the starting level.
START = 10
MAX_FINDINGS = 5
#: Noise floor relative to the trend: a flat loss is not infinitely sensitive.
NOISE_FLOOR = 1e-3


def check(run: Any) -> list[Finding]:
    """A warning per spike of the training loss, largest first."""
    series = train_loss(run, peaks=True)  # a long run's buckets by their peaks
    if series is None:
        return []
    name, steps, values = series
    if len(values) <= WINDOW:
        return []
    trend, mad = trailing_median_mad(values, WINDOW)
    noise = np.maximum(MAD_TO_STD * mad, NOISE_FLOOR * np.abs(trend))
    noise = np.where(noise > 0, noise, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (values - trend) / noise
        ratio = values / trend
    start = float(np.median(values[:START]))
    progress = np.maximum(start - trend, 0.0)
    undone = np.nan_to_num(values - trend) >= MIN_UNDONE * progress
    spike = (np.nan_to_num(z) >= MIN_Z) & (np.nan_to_num(ratio) >= MIN_RATIO) & (trend > 0)
    spike &= undone
    idx = np.flatnonzero(spike)
    if len(idx) == 0:
        return []
    # group consecutive steps into one spike
    groups = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
    spikes = []
    for g in groups:
        peak = int(g[np.argmax(values[g])])
        spikes.append((float(z[peak]), g, peak))
    spikes.sort(key=lambda s: -s[0])
    shown = spikes[:MAX_FINDINGS]
    origins = spike_origins(
        run, [([int(s) for s in steps[g]], int(steps[peak])) for _, g, peak in shown]
    )
    findings = []
    for (zpeak, g, peak), origin in zip(shown, origins):
        first = int(g[0])
        # on a long run the values are its buckets' peaks: the span in steps, not the count
        span = int(steps[g[-1]]) - int(steps[first]) + 1
        length = f" for {span} steps" if len(g) > 1 else ""
        message = (
            f"{name} spiked at step {int(steps[first])}{length}: {fmt(float(values[peak]))} "
            f"against a local trend of {fmt(float(trend[peak]))} ({fmt(float(ratio[peak]))}x, "
            f"robust z-score {fmt(zpeak)}; ordinary minibatch noise stays under ~6)."
        )
        if origin is not None:
            message += " " + _origin_text(origin)
        findings.append(
            Finding(
                check=CHECK,
                severity="warning",
                step=int(steps[first]),
                cause="learning_rate",
                message=message,
                advice=(
                    "a lower learning rate or warm-up, gradient clipping "
                    "(torch.nn.utils.clip_grad_norm_), and a look at that step's batch for bad "
                    "samples or labels"
                ),
                summary=(
                    f"the loss spiked {fmt(float(ratio[peak]))}x above its trend at step "
                    f"{int(steps[first])}"
                ),
                evidence={
                    "scalar": name,
                    "peak_step": int(steps[peak]),
                    "peak_value": float(values[peak]),
                    "trend": float(trend[peak]),
                    "ratio": float(ratio[peak]),
                    "robust_z": zpeak,
                    "steps": [int(s) for s in steps[g][:50]],
                    "spikes_total": len(spikes),
                    "threshold_z": MIN_Z,
                    "start": start,
                    "progress_undone": float((values[peak] - trend[peak]) / progress[peak])
                    if progress[peak] > 0
                    else None,
                    "threshold_ratio": MIN_RATIO,
                    "threshold_undone": MIN_UNDONE,
                    "window": WINDOW,
                    **_origin_evidence(origin),
                },
            )
        )
    return findings


def _origin_evidence(origin: dict[str, Any] | None) -> dict[str, Any]:
    """The spike's origin as ``origin_*`` evidence keys (None where nothing jumped)."""
    keys = (
        "layer",
        "step",
        "jump",
        "layers_jumped",
        "layers",
        "backward_rank",
        "before_loss",
        "together",
    )
    if origin is None:
        return {f"origin_{k}": None for k in keys}
    return {f"origin_{k}": origin[k] for k in keys}


def _origin_text(origin: dict[str, Any]) -> str:
    """The sentence naming where the spike began."""
    when = "before the loss did" if origin["before_loss"] else "with the loss"
    jumped = f"{fmt(origin['jump'])}x its baseline at step {origin['step']}, {when}"
    if origin["together"]:
        return (
            f"The gradient norms of {origin['layers_jumped']} of {origin['layers']} layers "
            f"jumped together at step {origin['step']} (most: '{origin['layer']}', {jumped}): "
            "the jump came in through the loss (the batch or the step size), not from one layer."
        )
    return (
        f"The gradient norm jumped first at '{origin['layer']}': {jumped} "
        f"({origin['layers_jumped']} of {origin['layers']} layers jumped "
        f"{fmt(origin['threshold_jump'])}x or more at that capture)."
    )
