"""``bad_init``: activations that grow or shrink geometrically with depth at the first capture.

At initialisation every layer multiplies the scale of its input by its weight
gain (see :mod:`nbviz.analysis.checks.depth`) and by what its activation keeps
(a ReLU halves the second moment). An initialisation meant for the activation
keeps the root mean square of the main layers' outputs level with depth; one
that is too large or too small for it multiplies the signal by the same factor
at every layer, and depth turns that into orders of magnitude: weights drawn
with standard deviation 0.01 in 64-wide layers shrink the signal about 15x per
layer, weights of standard deviation ``sqrt(6 / fan_in)`` before ReLUs grow it
about 2x per layer. Gradients follow the same factor backward, so the layers
at one end barely learn while those at the other take steps far too large.

The check reads the first capture (the initialisation when the probe was
attached before training) and flags a model whose main layers' output scale
changes by :data:`SCALE` (100x) or more from the first main layer to the last.
Healthy stacks stay within a few times: a default-initialised eight-layer ReLU
MLP shrinks 3x, the digits CNN 3x, a sixteen-layer sigmoid MLP not at all. The
layer named is where the change starts: the first main layer when the whole
stack scales (most layers move the same way), or the one layer whose step
carries most of the change. Layers followed by a normalisation layer are left
out: the normalisation resets the scale they give the signal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.depth import (
    activation_rms,
    feeds_normalisation,
    main_layers,
    trend,
    weight_gains,
)
from nbviz.analysis.checks.finding import Finding, fmt
from nbviz.analysis.checks.model import layout

CHECK = "bad_init"
SCALE = 100.0


def check(run: Any) -> list[Finding]:
    """A warning per model whose activation scale changes by orders with depth at the start."""
    lay = layout(run)
    if lay is None or "activations" not in lay.signals:
        return []
    findings = []
    for modules in main_layers(lay).values():
        # a normalised output's scale is not the signal's: the layer after it resets it
        modules = [m for m in modules if not feeds_normalisation(lay, m)]
        if len(modules) < 3:
            continue
        rms = activation_rms(run, modules)
        if rms.empty:
            continue
        first = rms.iloc[0]
        present = [m for m in modules if np.isfinite(first[m]) and first[m] > 0]
        t = trend(first[present].to_numpy())
        if t is None or 1 / SCALE < t.total < SCALE:
            continue
        step = int(rms.index[0])
        whole = t.geometric or t.jump_share < 0.5
        culprit = present[0] if whole else present[t.jump + 1]
        gains = weight_gains(run, lay, present, step)
        grows = t.total > 1
        factor = t.total if grows else 1 / t.total
        per = t.per_layer if grows else 1 / t.per_layer
        way = "grows" if grows else "shrinks"
        if whole:
            where = (
                f"{way} {fmt(factor)}x from {lay.label(present[0])} to {lay.label(present[-1])}, "
                f"about {fmt(per)}x at every layer"
            )
            summary = (
                f"the initial weights make the signal {way[:-1]} about {fmt(per)}x per layer "
                f"({fmt(factor)}x over {len(present)} layers)"
            )
        else:
            where = (
                f"{way} {fmt(factor)}x from {lay.label(present[0])} to {lay.label(present[-1])}, "
                f"most of it at {lay.label(culprit)}"
            )
            summary = (
                f"the initial weights of '{culprit}' make the signal {way[:-1]} {fmt(factor)}x"
            )
        gain_text = ""
        if gains:
            shown = ", ".join(f"{m}: {fmt(g)}" for m, g in list(gains.items())[:6])
            gain_text = f" Weight gains rms(W)*sqrt(fan_in): {shown}."
        message = (
            f"At the first capture (step {step}) the scale of the activations {where}.{gain_text} "
            f"The gradients scale the same way backward: layers at one end barely learn while "
            "the others take steps far too large."
        )
        advice = (
            "initialise for the activation: Kaiming (nn.init.kaiming_normal_(w, "
            "nonlinearity='relu'), gain sqrt(2)) before ReLUs, Xavier (gain 1) before tanh, "
            "and zero biases; or add normalisation (BatchNorm, LayerNorm) between the layers"
            if whole
            else f"initialise '{culprit}' on the same scale as the other layers (its weight "
            "gain should be near 1 to 1.4), or normalise its output"
        )
        findings.append(
            Finding(
                check=CHECK,
                severity="warning",
                layer=culprit,
                step=step,
                cause="architecture",
                message=message,
                advice=advice,
                summary=summary,
                evidence={
                    "kind": "whole stack" if whole else "one layer",
                    "activation_rms": {m: float(first[m]) for m in present},
                    "total_change": t.total,
                    "per_layer": t.per_layer,
                    "consistency": t.consistency,
                    "weight_gains": gains,
                    "layers": present,
                    "threshold": SCALE,
                },
            )
        )
    return findings
