"""``not_learning``: a classifier's loss that stays at chance while its weights move.

An untrained classifier over ``C`` outputs gives each about 1/C: its
cross-entropy starts near ``ln C``, the chance level. A run whose training loss
starts there (within :data:`AT_START`, 15%: the evidence that the loss is such a
cross-entropy over the model's outputs) and, after :data:`MIN_STEPS` (100) steps
and :data:`MIN_CAPTURES` captures, still sits within :data:`STILL` (5%) of it has
learned nothing, though its weights moved at the usual rates (a median
update/weight ratio at or above the 1e-4 below which ``learning_rate_too_low``
speaks instead) and its loss never blew up (``learning_rate_too_high``'s). The
steps go somewhere, only not toward a lower loss: most often the labels do not
follow from the inputs (shuffled apart from them, another column), the inputs do
not vary (all zero, one sample repeated), or the loop takes the loss of
something other than the model's output for those inputs. Healthy runs leave
chance within tens of steps: the reference models by far more than 5% in their
first 50, a language model at once by learning which tokens are frequent.

``C`` is the width of the last module the forward pass reached (its last
dimension: the classes, or a language model's vocabulary). Where the loss did
not start near ``ln C``, or several models were watched, or a learning-rate
warm-up is still rising at the end, nothing is said. A ``warning``, cause
``data`` as a root; a finding that stalls the model (dead or saturated units, a
gradient that vanishes, weights that do not move) explains it instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, fmt
from nbviz.analysis.checks.learning_rate import LOW_UPDATE, instability
from nbviz.analysis.checks.losses import tail_level, train_loss
from nbviz.analysis.checks.model import ModelLayout, layout
from nbviz.analysis.checks.optimizer import lr_series, update_ratios

CHECK = "not_learning"
#: The first losses within this fraction of ln C: the loss is a cross-entropy at chance.
AT_START = 0.15
#: The last losses within this fraction of ln C: still at chance.
STILL = 0.05
#: Steps the run must span before staying at chance says anything.
MIN_STEPS = 100
MIN_CAPTURES = 3
#: A learning rate whose last value is this much above its value halfway through is
#: still warming up: too early to say.
WARMING = 1.2
ADVICE = (
    "look at a batch's inputs beside its labels (do the labels follow from the inputs? "
    "do the inputs vary from sample to sample?), and check that the loss is taken of the "
    "model's output for those inputs; then train on one small batch alone: a model that "
    "cannot drive its loss near 0 there has a bug in the loop or the model, one that can "
    "points at the data"
)


def _outputs(lay: ModelLayout) -> tuple[str, int] | None:
    """The last module the forward pass reached and the width of its output."""
    for module in reversed(lay.forward_order):
        shape = lay.shapes.get(module)
        if shape:
            return module, int(shape[-1])
    return None


def _warming_up(run: Any, last_step: int) -> bool:
    series = lr_series(run)
    if series is None:
        return False
    _, steps, values = series
    half = np.flatnonzero(steps <= last_step // 2)
    mid = float(values[half[-1]]) if len(half) else float(values[0])
    return mid > 0 and float(values[-1]) > WARMING * mid


def check(run: Any) -> list[Finding]:
    """A warning when a classifier's loss stays at chance while its weights move."""
    series = train_loss(run)
    lay = layout(run)
    if series is None or lay is None or len([m for m in lay.models if m]) > 1:
        return []
    name, steps, values = series
    if len(values) < 10 or steps[-1] - steps[0] < MIN_STEPS or not np.isfinite(values).all():
        return []
    out = _outputs(lay)
    if out is None or out[1] < 2:
        return []
    module, classes = out
    chance = math.log(classes)
    start = float(np.median(values[:5]))
    end = tail_level(values)
    if abs(start - chance) > AT_START * chance or end < (1 - STILL) * chance:
        return []
    if instability(steps, values) or _warming_up(run, int(steps[-1])):
        return []
    ratios = update_ratios(run, lay)
    per_capture = ratios.median(axis=1, skipna=True).dropna() if not ratios.empty else ratios
    if len(per_capture) < MIN_CAPTURES:
        return []
    moved = float(per_capture.median())
    if not moved >= LOW_UPDATE:
        return []  # the weights barely move: learning_rate_too_low or stuck_weights say why
    message = (
        f"The model learns nothing: {name} stayed at chance for {classes} outputs "
        f"(ln {classes} = {fmt(chance)}, the width of {lay.label(module)}), from "
        f"{fmt(start)} to {fmt(end)} over {int(steps[-1] - steps[0])} steps, while the weights "
        f"moved {fmt(moved)} of their norm per step (median over {len(per_capture)} captures; "
        "usual ~1e-3). The steps go somewhere, but not toward a lower loss: the labels may not "
        "follow from the inputs, the inputs may not vary, or the loss may not be of the "
        "model's output for them."
    )
    return [
        Finding(
            check=CHECK,
            severity="warning",
            layer="",
            step=int(steps[0]),
            cause="data",
            message=message,
            advice=ADVICE,
            summary=f"{name} stayed at chance ({fmt(end)}, ln {classes} = {fmt(chance)})",
            evidence={
                "loss_start": start,
                "loss_end": end,
                "chance": chance,
                "outputs": classes,
                "output_layer": module,
                "fall": (start - end) / start if start > 0 else None,
                "update_to_weight": moved,
                "captures": len(per_capture),
                "threshold_still": STILL,
                "threshold_start": AT_START,
                "min_steps": MIN_STEPS,
            },
        )
    ]
