"""``saturated_units``: sigmoid and tanh layers whose outputs sit on the flat ends.

A sigmoid or tanh passes back its slope: at an output within 2% of either end
of its range (``|z| >= 0.96`` with ``z`` the output mapped onto ``[-1, 1]``) the
slope is under 8% of its largest, so a layer whose outputs mostly sit there
passes little gradient to the layers before it, much as dead ReLUs pass none.

The saturated fraction of a capture is the larger of two readings:

- from the layer's mean and standard deviation: with ``E[z^2]`` the second
  moment of the mapped outputs, at least ``1 - (1 - E[z^2]) / (1 - 0.96^2)`` of
  them lie beyond 0.96 (outputs are bounded by 1, so a second moment near 1
  forces most of them to the ends);
- from the per-unit means: the fraction of units whose mean over the batch lies
  beyond 0.96 (such a unit is saturated on nearly every sample).

A layer is flagged when the median over its last :data:`WINDOW` captures is at
least :data:`WARN_FRACTION` (half): a ``warning``. From the first capture it
points at the initialisation or the input scale (``architecture``); saturation
that set in during training at weights grown by too large steps
(``learning_rate``).

Whether it was there from the start is also read from the first capture's
histogram, where one was recorded: weights too large for the activation put
each unit on +1 for some samples and on -1 for others, so the layer's mean
sits near the middle (the moments' bound reads nothing) and no unit's mean is
near an end, while many outputs are. The histogram counts them (a bin across
the edge counts in proportion to its overlap, which reads low: tanh outputs
pile up at the very end). A flagged layer with at least
:data:`FROM_START_FRACTION` of its outputs on the flat ends at the first capture
was saturated by its initial weights or inputs, and training only deepened it;
an activation at a sensible initialisation has almost none there. Only the
first capture is read this way: its histogram's range was fixed from that
capture's own values, so nothing it holds falls outside the bins.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, onset_warning, pct
from nbviz.analysis.checks.model import layer_stats, layout, unit_values
from nbviz.analysis.checks.robust import Onset, onset

CHECK = "saturated_units"
#: Module types with flat ends, and the (low, high) of their output range.
SATURATING = {
    "Sigmoid": (0.0, 1.0),
    "Hardsigmoid": (0.0, 1.0),
    "Tanh": (-1.0, 1.0),
    "Hardtanh": (-1.0, 1.0),
    "Softsign": (-1.0, 1.0),
}
#: |z| beyond this is on the flat end (slope under 1 - EDGE**2 of the largest for tanh).
EDGE = 0.96
WARN_FRACTION = 0.5
#: Saturated at the first capture by at least this much: the start put it there.
FROM_START_FRACTION = 0.25
WINDOW = 10
MIN_CAPTURES = 2
#: What to try for a layer saturated from the first capture, and for one saturated later.
ADVICE = (
    "smaller initial weights (Xavier: nn.init.xavier_uniform_) or inputs scaled to "
    "unit variance, normalisation before the activation, or a ReLU-family activation",
    "a lower learning rate or warm-up (the weights grew until the units saturated), "
    "normalisation before the activation, or a ReLU-family activation",
)


def saturated_fraction(mean: np.ndarray, std: np.ndarray, low: float, high: float) -> np.ndarray:
    """Least fraction of outputs beyond :data:`EDGE`, from their moments in ``[low, high]``."""
    half = (high - low) / 2
    centre = (high + low) / 2
    zm = (np.asarray(mean, dtype=np.float64) - centre) / half
    zs = np.asarray(std, dtype=np.float64) / half
    second = zs**2 + zm**2
    return np.clip(1 - (1 - second) / (1 - EDGE**2), 0.0, 1.0)


def histogram_fraction(run: Any, layer: str, step: int, low: float, high: float) -> float:
    """Fraction of ``layer``'s outputs beyond :data:`EDGE` in its histogram at ``step``.

    0.0 where no histogram was recorded there (histograms off, or another period).
    """
    if step not in set(run.histogram_steps(layer, "activation").tolist()):
        return 0.0
    edges, counts = run.histogram(layer, "activation", step)
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if not total > 0:
        return 0.0
    z = (np.asarray(edges, dtype=np.float64) - (high + low) / 2) / ((high - low) / 2)
    left, right = z[:-1], z[1:]
    width = np.where(right > left, right - left, 1.0)
    beyond = np.clip(right - np.maximum(left, EDGE), 0, None)  # the part above +EDGE
    beyond += np.clip(np.minimum(right, -EDGE) - left, 0, None)  # the part below -EDGE
    return float((counts * np.minimum(beyond / width, 1.0)).sum() / total)


def check(run: Any) -> list[Finding]:
    """A warning per sigmoid/tanh layer whose outputs mostly sit on the flat ends."""
    lay = layout(run)
    if lay is None or "activations" not in lay.signals:
        return []
    findings = []
    units_recorded = set(run.recorded_layers("mean", table="unit_stats"))
    for layer in sorted(run.recorded_layers("activation"), key=lay.depth):
        kind = lay.kind_of(layer)
        if kind not in SATURATING:
            continue
        low, high = SATURATING[kind]
        stats = layer_stats(run, "activation", layer)
        if len(stats) < MIN_CAPTURES:
            continue
        steps = stats["step"].to_numpy(dtype=np.int64)
        frac = saturated_fraction(stats["mean"].to_numpy(), stats["std"].to_numpy(), low, high)
        frac = np.nan_to_num(frac, nan=0.0)
        if layer in units_recorded:
            usteps, means = unit_values(run, layer, "mean")
            if means.shape[1]:
                z = np.abs((means.astype(np.float64) - (high + low) / 2) / ((high - low) / 2))
                by_unit = dict(zip(usteps.tolist(), (z >= EDGE).mean(axis=1), strict=True))
                frac = np.maximum(frac, [by_unit.get(int(s), 0.0) for s in steps])
        window = min(WINDOW, len(steps))
        level = float(np.median(frac[-window:]))
        if level < WARN_FRACTION:
            continue
        when = onset(steps, frac >= WARN_FRACTION, window)
        first = max(float(frac[0]), histogram_fraction(run, layer, int(steps[0]), low, high))
        if not when.from_start and first >= FROM_START_FRACTION:
            when = Onset(step=int(steps[0]), from_start=True)  # saturated by the first weights
        message = (
            f"{pct(level)} of the outputs of {lay.label(layer)} sit on its flat ends (within 2% "
            f"of {low:g} or {high:g}; median of the last {window} captures, {when.since()}), "
            "where its slope is under 8% of the largest: little gradient passes back through it."
        )
        summary = (
            f"{pct(level)} of '{layer}' is saturated from the start",
            f"{pct(level)} of '{layer}' saturated from step {when.step}",
        )
        evidence = {
            "saturated_fraction": level,
            "at_first_capture": first,
            "from_first_capture": when.from_start,
            "window_captures": window,
            "edge": EDGE,
            "threshold": WARN_FRACTION,
        }
        findings.append(onset_warning(CHECK, layer, when, message, ADVICE, summary, evidence))
    return findings
