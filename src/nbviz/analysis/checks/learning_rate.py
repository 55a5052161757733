"""``learning_rate_too_high`` and ``learning_rate_too_low``: the step size, read from its effects.

Too high. Gradient descent on a loss of curvature (top Hessian eigenvalue)
``s`` is stable only for ``lr < 2 / s``; past it each step overshoots, and the
loss rises instead of falling. Read from the training loss (every logged step):

- it *blows up*: the median of three consecutive losses at least
  :data:`BLOWUP_SMOOTH` (1.3x) the loss at the first logged step, or one loss
  :data:`BLOWUP_RAW` (2x) of it. Healthy runs never come back above their
  starting loss once training has begun (measured: at most 1.2x, in the first
  steps of Adam), because the starting loss is that of an untrained model.
  Where minibatch losses are very noisy (an untrained model's logits in the
  hundreds), it must also stand :data:`NOISE_Z` (6) noise levels above the
  start (twice that for a single loss), the noise being the robust spread of
  the step-to-step changes, or hold: the median of :data:`LEVEL_WINDOW` (11)
  consecutive losses above 1.3x the start (a loss that rose and stays up,
  however noisy). The blow-up is dated from the first step over the plain
  thresholds;
- it *resets*: after at least :data:`MIN_PROGRESS` (20%) of the starting loss
  was gained, the median of five consecutive losses climbs back by
  :data:`RESET` (80%) of that progress (healthy runs: at most 15-45%).

A loss that rises to :data:`BLOWUP_RAW` times its start, higher at each logged step,
and then turns non-finite blew up too, however few steps it took (too few for
the noise tests above): a learning rate far too high overflows within a handful.

Either is a ``warning`` (an ``error`` when the loss ends no lower than it
started: the run learned nothing). Supporting evidence, named in the message:
the largest update/weight ratio of a capture (:data:`BIG_UPDATE`, 0.1: a
tenth of the weights' norm in one step, a hundred times the usual 1e-3), and
the curvature test where the probe ran it (scalars ``sharpness`` and
``stability_limit``: the top eigenvalue of the training loss's Hessian on one
batch against 2/lr, ``2 (1 + momentum) / lr`` with momentum, or Adam's
preconditioned version; see :mod:`nbviz.probes.curvature`). Large updates alone
are no finding: Adam's first steps at lr=0.03 move small weights by a third of
their norm and train well. Sharpness at or above the limit with a loss that
behaves is ``info``: training at the "edge of stability" (Cohen et al. 2021)
is common and often harmless.

Too low: the median update/weight ratio over the weight matrices and the
captures is under :data:`LOW_UPDATE` (1e-4, ten times below the usual) while
the loss moved by less than :data:`LOW_FALL` (10%) of its start and never
blew up. A ``warning``;
the advice scales the learning rate toward ratios of 1e-3.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, fmt, pct
from nbviz.analysis.checks.losses import running_median, tail_level, train_loss
from nbviz.analysis.checks.model import layout
from nbviz.analysis.checks.nonfinite import first_nonfinite
from nbviz.analysis.checks.optimizer import lr_at, update_ratios
from nbviz.analysis.checks.robust import MAD_TO_STD

TOO_HIGH = "learning_rate_too_high"
TOO_LOW = "learning_rate_too_low"
BLOWUP_SMOOTH = 1.3
BLOWUP_RAW = 2.0
RESET = 0.8
MIN_PROGRESS = 0.2
#: A blow-up must also stand this many noise levels above the start (twice for one loss)...
NOISE_Z = 6.0
#: ... or hold: the median of this many consecutive losses above the plain threshold.
LEVEL_WINDOW = 11
BIG_UPDATE = 0.1
LOW_UPDATE = 1e-4
LOW_FALL = 0.1
#: The update/weight ratio of a healthy step, the target of the advice.
USUAL_UPDATE = 1e-3
#: Fewer logged losses than this say nothing about the loss's shape.
MIN_LOSSES = 10
MIN_CAPTURES = 3


def step_noise(values: np.ndarray) -> float:
    """The minibatch noise of a loss series: a robust spread of its step-to-step changes."""
    diffs = np.abs(np.diff(np.asarray(values, dtype=np.float64)))
    return float(MAD_TO_STD * np.median(diffs) / math.sqrt(2)) if len(diffs) else 0.0


def instability(steps: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    """The first blow-up or reset of a positive loss series (see the module docstring)."""
    if len(values) < MIN_LOSSES or not values[0] > 0:
        return None
    start = float(values[0])
    noise = step_noise(values)
    s3 = running_median(values, 3)
    s5 = running_median(values, 5)
    events = []
    plain = (s3 >= BLOWUP_SMOOTH * start) | (values >= BLOWUP_RAW * start)
    clear = (s3 >= start + NOISE_Z * noise) | (values >= start + 2 * NOISE_Z * noise)
    level = running_median(values, LEVEL_WINDOW) >= BLOWUP_SMOOTH * start  # stays up
    confirmed = np.flatnonzero(plain & (clear | level))
    if len(confirmed):
        i = int(np.flatnonzero(plain)[0])  # the run-up to it counts from its first step
        end = min(len(values), int(confirmed[0]) + 10)
        peak = i + int(np.argmax(values[i:end]))
        events.append({"kind": "blow_up", "index": i, "peak_index": peak})
    best = np.minimum.accumulate(s5)
    progress = start - best
    with np.errstate(invalid="ignore", divide="ignore"):
        undone = np.where(progress >= MIN_PROGRESS * start, (s5 - best) / progress, 0.0)
    reset = np.flatnonzero(undone >= RESET)
    if len(reset):
        i = int(reset[0])
        # the step where the climb began: back to the last step at the best level
        j = i
        while j > 0 and s5[j - 1] > best[i] + 0.1 * progress[i]:
            j -= 1
        end = min(len(values), i + 10)
        events.append(
            {
                "kind": "reset",
                "index": j,
                "peak_index": j + int(np.argmax(values[j:end])) if end > j else j,
                "undone": float(undone[i]),
                "progress": float(progress[i]),
            }
        )
    if not events:
        return None
    first = min(events, key=lambda e: e["index"])
    end_level = tail_level(values)
    return {
        "kind": first["kind"],
        "kinds": [e["kind"] for e in events],
        "step": int(steps[first["index"]]),
        "peak_step": int(steps[first["peak_index"]]),
        "peak": float(values[first["peak_index"]]),
        "start": start,
        "end": end_level,
        "undone": first.get("undone"),
        "learned_nothing": bool(end_level >= 0.95 * start),
    }


def runup_to_nonfinite(
    run: Any, name: str, steps: np.ndarray, values: np.ndarray
) -> dict[str, Any] | None:
    """A loss that rose steadily to over :data:`BLOWUP_RAW` times its start, then turned
    non-finite: a blow-up, from the step it first passed that threshold."""
    if not len(values) or not values[0] > 0:
        return None
    bad = first_nonfinite(run, name)
    if bad is None:
        return None
    before = steps < bad[0]
    s, v = steps[before], values[before]
    if len(v) < 2 or not (np.diff(v) > 0).all() or v[-1] < BLOWUP_RAW * v[0]:
        return None
    i = int(np.flatnonzero(v >= BLOWUP_RAW * v[0])[0])
    return {
        "kind": "blow_up",
        "kinds": ["blow_up"],
        "step": int(s[i]),
        "peak_step": int(s[-1]),
        "peak": float(v[-1]),
        "start": float(v[0]),
        "end": bad[1],
        "undone": None,
        "learned_nothing": True,
        "nonfinite_step": bad[0],
    }


def _sharpness(run: Any) -> dict[str, Any] | None:
    """Captures where the curvature test found the loss sharper than the optimizer's limit."""
    names = set(run.scalar_names())
    if not {"sharpness", "stability_limit"} <= names:
        return None
    s = run.scalars("sharpness").set_index("step")["value"]
    lim = run.scalars("stability_limit").set_index("step")["value"]
    both = s.to_frame("s").join(lim.to_frame("limit"), how="inner").dropna()
    if both.empty:
        return None
    over = both[both["s"] >= both["limit"]]
    ratio = (both["s"] / both["limit"]).to_numpy()
    return {
        "tests": len(both),
        "over": len(over),
        "first_over": int(over.index[0]) if len(over) else None,
        "largest_ratio": float(np.max(ratio)),
        "sharpness": float(both["s"].iloc[int(np.argmax(ratio))]),
        "limit": float(both["limit"].iloc[int(np.argmax(ratio))]),
    }


def _peak_update(run: Any) -> tuple[float, int] | None:
    lay = layout(run)
    if lay is None:
        return None
    ratios = update_ratios(run, lay)
    if ratios.empty:
        return None
    med = ratios.median(axis=1, skipna=True).dropna()
    if med.empty:
        return None
    return float(med.max()), int(med.idxmax())


def _lower_to(lr: float | None, sharp: dict[str, Any] | None) -> str:
    if sharp is not None and sharp["sharpness"] > 0 and lr is not None:
        safe = lr * sharp["limit"] / sharp["sharpness"]
        return (
            f"lower the learning rate below {fmt(safe)} (now {fmt(lr)}; the curvature test "
            f"puts the stable limit there), e.g. {fmt(safe / 3)} to {fmt(safe / 1.5)}"
        )
    if lr is not None:
        return (
            f"lower the learning rate 3 to 10 times, to {fmt(lr / 10)} to {fmt(lr / 3)} "
            f"(now {fmt(lr)})"
        )
    return "lower the learning rate 3 to 10 times"


def check_too_high(run: Any) -> list[Finding]:
    """A finding when the training loss blows up or resets: steps past the stable size."""
    series = train_loss(run)
    sharp = _sharpness(run)
    found = None
    if series is not None:
        name, steps, values = series
        found = instability(steps, values) or runup_to_nonfinite(run, name, steps, values)
    if found is None:
        if sharp is None or not sharp["over"]:
            return []
        lr = lr_at(run, sharp["first_over"])
        return [
            Finding(
                check=TOO_HIGH,
                severity="info",
                step=sharp["first_over"],
                cause="learning_rate",
                message=(
                    f"The training loss's sharpness reached {fmt(sharp['sharpness'])} against "
                    f"the optimizer's stability limit of {fmt(sharp['limit'])} (at "
                    f"{sharp['over']} of {sharp['tests']} curvature tests, first at step "
                    f"{sharp['first_over']}), but the loss did not blow up: training at the edge "
                    "of stability, where the learning rate caps the curvature the model can "
                    "settle in. Worth knowing if the loss stalls."
                ),
                advice=_lower_to(lr, sharp),
                summary=f"the loss is as sharp as the learning rate allows (from step "
                f"{sharp['first_over']})",
                evidence={"sharpness": sharp},
            )
        ]
    lr = lr_at(run, found["step"])
    peak_update = _peak_update(run)
    start, peak, step = found["start"], found["peak"], found["step"]
    if found["kind"] == "blow_up":
        what = (
            f"{name} rose to {fmt(peak)} at step {found['peak_step']}, {fmt(peak / start)}x its "
            f"starting {fmt(start)} (from step {step})"
        )
        summary = f"the loss rose to {fmt(peak / start)}x its starting value at step {step}"
        if found["peak_step"] != step:
            summary = (
                f"the loss rose from step {step}, to {fmt(peak / start)}x its starting value "
                f"at step {found['peak_step']}"
            )
    else:
        what = (
            f"{name} climbed back from step {step} to {fmt(peak)} at step {found['peak_step']}, "
            f"undoing {pct(min(found['undone'], 1.0))} of the progress made"
        )
        summary = f"the loss jumped back at step {step}, undoing the progress made"
    if found.get("nonfinite_step") is not None:
        what += f", then {fmt(found['end'])} at step {found['nonfinite_step']}"
        summary += " and overflowed"
    elif found["learned_nothing"]:
        what += f", and ends at {fmt(found['end'])}, no lower than it started"
        summary += " and never recovered"
    parts = [what]
    if peak_update is not None and peak_update[0] >= BIG_UPDATE:
        parts.append(
            f"a captured step moved the weights by {fmt(peak_update[0])} of their norm (median "
            f"over the layers, step {peak_update[1]}; usual ~1e-3)"
        )
    if sharp is not None and sharp["over"]:
        parts.append(
            f"the curvature test found the loss sharper than the optimizer's stability limit "
            f"({fmt(sharp['sharpness'])} against {fmt(sharp['limit'])}, at {sharp['over']} of "
            f"{sharp['tests']} tests)"
        )
    message = (
        "The learning rate is too high: "
        + "; ".join(parts)
        + ". Steps past the stable size overshoot, so the loss rises instead of falling"
        + (" (lr " + fmt(lr) + ")." if lr is not None else ".")
    )
    advice = (
        _lower_to(lr, sharp)
        + ", with a warm-up over the first few hundred steps; gradient clipping "
        "(torch.nn.utils.clip_grad_norm_) keeps single steps bounded"
    )
    return [
        Finding(
            check=TOO_HIGH,
            severity="error" if found["learned_nothing"] else "warning",
            step=step,
            cause="learning_rate",
            message=message,
            advice=advice,
            summary=summary,
            evidence={
                **found,
                "scalar": name,
                "lr": lr,
                "peak_update_to_weight": peak_update[0] if peak_update else None,
                "peak_update_step": peak_update[1] if peak_update else None,
                "sharpness": sharp,
                "threshold_blowup": BLOWUP_SMOOTH,
                "threshold_reset": RESET,
            },
        )
    ]


def check_too_low(run: Any) -> list[Finding]:
    """A warning when every layer moves far less than usual and the loss barely falls."""
    series = train_loss(run)
    lay = layout(run)
    if series is None or lay is None:
        return []
    name, steps, values = series
    if len(values) < MIN_LOSSES or not values[0] > 0:
        return []
    ratios = update_ratios(run, lay)
    if len(ratios) < MIN_CAPTURES:
        return []
    per_capture = ratios.median(axis=1, skipna=True).dropna()
    if len(per_capture) < MIN_CAPTURES:
        return []
    ratio = float(per_capture.median())
    start, end = float(values[0]), tail_level(values)
    fall = (start - end) / start
    if not (ratio < LOW_UPDATE and abs(fall) < LOW_FALL) or instability(steps, values):
        return []  # a loss that rose or blew up is no sign of steps too small
    lr = lr_at(run)
    factor = USUAL_UPDATE / ratio if ratio > 0 else math.inf
    if not math.isfinite(factor):
        return []  # nothing moves at all: stuck_weights says why
    if lr is not None:
        advice = (
            f"raise the learning rate about {fmt(factor)}x, to {fmt(lr * factor / 3)} to "
            f"{fmt(lr * factor)} (now {fmt(lr)}), for update/weight ratios near 1e-3; a "
            "learning-rate range test (raise it step by step until the loss turns up) finds "
            "the best"
        )
    else:
        advice = (
            f"raise the learning rate about {fmt(factor)}x, for update/weight ratios near "
            "1e-3; a learning-rate range test finds the best"
        )
    message = (
        f"The learning rate is too low: the weights move {fmt(ratio)} of their norm per step "
        f"(median over the layers and {len(per_capture)} captures; usual ~1e-3) and {name} fell "
        f"only {pct(max(fall, 0.0))}, from {fmt(start)} to {fmt(end)}"
        + (f" (lr {fmt(lr)})." if lr is not None else ".")
    )
    return [
        Finding(
            check=TOO_LOW,
            severity="warning",
            step=int(per_capture.index[0]),
            cause="learning_rate",
            message=message,
            advice=advice,
            summary=(
                f"the weights move {fmt(ratio)} of their norm per step and the loss fell "
                f"only {pct(max(fall, 0.0))}"
            ),
            evidence={
                "update_to_weight": ratio,
                "captures": len(per_capture),
                "loss_start": start,
                "loss_end": end,
                "loss_fall": fall,
                "lr": lr,
                "suggested_factor": factor,
                "threshold_update_to_weight": LOW_UPDATE,
                "threshold_fall": LOW_FALL,
            },
        )
    ]
