"""``dead_units``: ReLU-like units that output zero for every sample, capture after capture.

A ReLU unit whose pre-activation is negative for every input passes no
gradient, so nothing can revive it: a "dead" unit. One batch is not enough to
tell: in a healthy run up to ~11% of a ReLU layer's units are zero on a whole
64-sample batch (rarely active features). So a unit counts as dead only when it
was zero on every sample of each of the last :data:`WINDOW` captures (640
samples at batch 64: a unit active on 1% of inputs stays silent that long with
probability 0.99**640, about 0.2%). A run with fewer captures reads all but the
first (at least :data:`MIN_CAPTURES`): units killed after the first capture
still count.

Thresholds, on the fraction of a layer's units that are dead: any is ``info``
(a healthy digits CNN keeps ~20% of its small fully connected ReLU layer
silent); :data:`WARN_FRACTION` (half the layer) or more is a ``warning``; the
whole layer is an ``error``: it passes neither signal nor gradient.

Units dead from the first capture point at the initialisation or the input
(``architecture``: a bias far below zero, a badly scaled input); units that
were alive and died during training were pushed there by a step too large
(``learning_rate``). The finding follows the majority of its units.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, pct
from nbviz.analysis.checks.model import layout, unit_values
from nbviz.analysis.checks.robust import trailing_run_start

CHECK = "dead_units"
#: Captures a unit must be zero on every sample for to count as dead.
WINDOW = 10
#: Fewer captures than this say nothing about units (one batch is noise).
MIN_CAPTURES = 3
#: Fraction of a layer's units dead from which it is a warning.
WARN_FRACTION = 0.5
#: Module types whose outputs are exactly zero over a range of inputs.
RELU_LIKE = frozenset({"ReLU", "ReLU6", "Threshold", "Hardsigmoid", "Hardswish"})
#: A unit's zero fraction at or above this is "zero on every sample" (float32 noise).
ALL_ZERO = 1.0 - 1e-6


def check(run: Any) -> list[Finding]:
    """Dead units per ReLU-like layer, from the per-unit zero fractions of each capture."""
    lay = layout(run)
    if lay is None:
        return []
    findings = []
    layers = run.recorded_layers("zero_frac", table="unit_stats")
    for layer in sorted(layers, key=lay.depth):
        if lay.kind_of(layer) not in RELU_LIKE:
            continue
        steps, zero = unit_values(run, layer, "zero_frac")
        if len(steps) < MIN_CAPTURES or zero.shape[1] == 0:
            continue
        # a short run: every capture but the first (the units may have died after it)
        window = min(WINDOW, max(MIN_CAPTURES, len(steps) - 1))
        dead_now = (zero[-window:] >= ALL_ZERO).all(axis=0)
        n_dead, n_units = int(dead_now.sum()), int(zero.shape[1])
        if n_dead == 0:
            continue
        # since when: each dead unit's final stretch of all-zero captures
        starts = [trailing_run_start(zero[:, u] >= ALL_ZERO) for u in np.flatnonzero(dead_now)]
        died = np.array([int(steps[s]) for s in starts if s is not None], dtype=np.int64)
        onset, first = int(died.max()), int(died.min())
        from_start = int((died == int(steps[0])).sum())
        killed = n_dead - from_start
        at_init = from_start >= killed
        frac = n_dead / n_units
        if n_dead == n_units:
            severity = "error"
        elif frac >= WARN_FRACTION:
            severity = "warning"
        else:
            severity = "info"
        since = f"since step {onset}" if onset > int(steps[0]) else "from the first capture"
        what = (
            f"all {n_units} units of {lay.label(layer)} are dead"
            if n_dead == n_units
            else f"{n_dead} of {n_units} units ({pct(frac)}) of {lay.label(layer)} are dead"
        )
        message = f"{what}: zero on every sample of the last {window} captures, {since}."
        if killed and from_start:
            message += f" {from_start} were dead from the first capture, {killed} died later."
        elif killed:
            died_at = int(np.median(died))
            message += (
                f" They were alive at first and died during training (half by step {died_at})."
            )
        if severity != "info":
            message += " Dead ReLUs pass no gradient, so they never recover."
        if at_init:
            advice = (
                "check the preceding layer's bias and initialisation (Kaiming, zero biases), "
                "the scale of its input, LeakyReLU/GELU, or normalisation before the activation"
            )
            summary = f"{pct(frac)} of the units of '{layer}' are dead from the start"
        else:
            advice = (
                "a lower learning rate or a warm-up (a large step pushes the units' inputs "
                "negative for every sample), gradient clipping, LeakyReLU/GELU, or "
                "normalisation before the activation"
            )
            summary = f"{pct(frac)} of the units of '{layer}' died during training"
        findings.append(
            Finding(
                check=CHECK,
                severity=severity,
                layer=layer,
                step=onset,
                cause="architecture" if at_init else "learning_rate",
                message=message,
                advice=advice if severity != "info" else "",
                summary=summary,
                evidence={
                    "dead": n_dead,
                    "units": n_units,
                    "fraction": frac,
                    "window_captures": window,
                    "window_steps": [int(steps[-window]), int(steps[-1])],
                    "first_dead_step": first,
                    "median_dead_step": int(np.median(died)),
                    "dead_from_first_capture": from_start,
                    "died_later": killed,
                    "at_init": at_init,
                    "dead_units": np.flatnonzero(dead_now)[:64],
                },
            )
        )
    return findings
