"""``input_scale``: inputs far larger than unit scale reach the first layer.

The probe does not see the inputs, but the first main layer tells their scale:
at initialisation its output's root mean square is its weight gain
(``rms(W) * sqrt(fan_in)``, see :mod:`nbviz.analysis.checks.depth`) times the
root mean square of its input, whatever the input's structure (the weights are
random), the bias adding its own mean square. So
``sqrt(rms(first output)^2 - rms(bias)^2) / gain`` estimates the input's scale: the
digits scaled to [0, 1] read 0.49 (true 0.48), raw pixel values 0..255 read
123 (true 124).

Networks are initialised for inputs of about unit scale (standardised
features, images in [0, 1] or normalised per channel). Larger inputs make the
first layer's outputs and its gradient as much larger: its steps are out of
scale with the rest, tanh and sigmoid units saturate, and a learning rate that
suits the others is too high for it. Read at the first capture; an input
estimated at :data:`INFO_RMS` (5) or more is ``info`` (what follows from it,
such as a blown-up loss, makes it the verdict), at :data:`WARN_RMS` (20) or more
a ``warning``. Small inputs are not flagged: the first layer's biases hide
their scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.depth import (
    activation_rms,
    feeds_normalisation,
    main_layers,
    weight_capture_near,
    weight_gains,
)
from nbviz.analysis.checks.finding import Finding, fmt
from nbviz.analysis.checks.model import layout

CHECK = "input_scale"
INFO_RMS = 5.0
WARN_RMS = 20.0


def check(run: Any) -> list[Finding]:
    """A finding per model whose first main layer receives inputs far above unit scale."""
    lay = layout(run)
    if lay is None or "activations" not in lay.signals or "weights" not in lay.signals:
        return []
    findings = []
    for modules in main_layers(lay).values():
        first = modules[0]
        kind = lay.kind_of(first)
        if not (kind.endswith("Linear") or kind.startswith("Conv")):
            continue  # the estimate holds for a product with the input (W x + b)
        if feeds_normalisation(lay, first):
            continue  # normalised right after: the input's scale is undone
        rms = activation_rms(run, [first])
        if rms.empty or not np.isfinite(rms.iloc[0][first]):
            continue
        step = int(rms.index[0])
        gains = weight_gains(run, lay, [first], step)
        gain = gains.get(first)
        if not gain:
            continue
        # the bias adds its own square (a bias of -10 alone makes the output 10)
        out = float(rms.iloc[0][first])
        bias = _bias_rms(run, first, step)
        estimate = float(np.sqrt(max(out**2 - bias**2, 0.0))) / gain
        if estimate < INFO_RMS:
            continue
        severity = "warning" if estimate >= WARN_RMS else "info"
        message = (
            f"The inputs of {lay.label(first)} have a root mean square of about {fmt(estimate)} "
            f"(its output's {fmt(float(rms.iloc[0][first]))} at step {step} over its weight gain "
            f"{fmt(gain)}), where networks are initialised for about 1: its outputs and "
            "gradients are that much larger than the other layers', so steps that suit them are "
            "too large for it, and tanh or sigmoid units after it saturate."
        )
        findings.append(
            Finding(
                check=CHECK,
                severity=severity,
                layer=first,
                step=step,
                cause="data",
                message=message,
                advice=(
                    "normalise the inputs: standardise features (subtract the mean, divide by "
                    "the standard deviation, from the training set), scale images to [0, 1] or "
                    "normalise them per channel"
                ),
                summary=f"the inputs have a scale of about {fmt(estimate)}, not about 1",
                evidence={
                    "input_rms": estimate,
                    "output_rms": out,
                    "bias_rms": bias,
                    "weight_gain": gain,
                    "threshold_info": INFO_RMS,
                    "threshold_warning": WARN_RMS,
                },
            )
        )
    return findings


def _bias_rms(run: Any, module: str, step: int) -> float:
    """Root mean square of ``module``'s bias at ``step`` (0 without one; the weight capture
    nearest it, see :func:`~nbviz.analysis.checks.depth.weight_capture_near`)."""
    name = f"{module}.bias"
    at = weight_capture_near(run, step)
    if at is None or name not in run.recorded_layers("weight"):
        return 0.0
    rows = run.stats("weight", layer=name, steps=[at])
    if rows.empty or not rows["count"].iloc[0]:
        return 0.0
    return float(rows["norm"].iloc[0]) / float(np.sqrt(rows["count"].iloc[0]))
