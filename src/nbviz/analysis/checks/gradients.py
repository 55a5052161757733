"""``vanishing_gradients`` and ``exploding_gradients``: gradient size by depth and over time.

Both read the parameter gradients of weight matrices and kernels (rank >= 2)
at each capture, scaled by the weights they update: ``||g|| / ||w||``, the
fraction by which a plain SGD step of learning rate 1 would move the layer.
That ratio is what tells whether a layer learns, and it is comparable between
layers of different sizes. No absolute threshold is used: gradients of a
well-converged run are small everywhere, and this does not trip on that.

- Vanishing (by depth): a layer whose ratio is below :data:`VANISH_RATIO`
  (1/1000) of the largest ratio among the layers after it, over the last
  :data:`WINDOW` captures (median), learns a thousand times slower than the
  layers above it. A healthy CNN or MLP keeps its layers within ~10x of each
  other; a 16-layer sigmoid MLP, whose gradient shrinks by the sigmoid's slope
  (at most 1/4) at every layer, falls below 1e-6.
- Exploding (by depth): a layer whose ratio is over :data:`EXPLODE_DEPTH_RATIO`
  (1000) times the largest of the layers after it: the gradient grows on its
  way back to the input.
- Exploding (over time): a layer's gradient norm that rises above
  :data:`EXPLODE_GROWTH` (100) times its median over all the earlier captures
  (at least :data:`MIN_BASELINE` of them), that median taken no lower than
  :data:`BASELINE_FLOOR` (3%) of the weights' norm over the same captures. In healthy runs gradient
  norms fall, or stay within ~10x of their early level, and the ratio stays
  around 0.06-0.09 (the digits CNN). A deep network leaving its initial plateau
  grows its gradients by thousands from an abnormally small start (5e-4 to 2
  in an 8-layer ReLU MLP with default initialisation under Adam, ratio 1e-4 at
  first): the floor keeps that recovery from counting (it stays under 100x
  of 3% of the weights). A diverging run (a learning rate past the stable
  limit) multiplies the gradient by a constant factor every step and crosses
  100x within a few.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.checks.finding import Finding, fmt, names
from nbviz.analysis.checks.model import ModelLayout, layout, param_stats
from nbviz.analysis.checks.robust import nanmedian, trailing_run_start

VANISH_RATIO = 1e-3
EXPLODE_DEPTH_RATIO = 1e3
EXPLODE_GROWTH = 100.0
#: Baseline gradient never taken below this fraction of the weights' norm.
BASELINE_FLOOR = 0.03
#: Captures summarised (median) for the depth comparisons.
WINDOW = 10
#: Earlier captures needed before a growth over time can be judged.
MIN_BASELINE = 3


def _matrix(run: Any, signal: str, names: list[str]) -> pd.DataFrame:
    """Norms as steps x parameters (NaN where not recorded or not finite)."""
    frame = param_stats(run, signal, names)
    if frame.empty:
        return pd.DataFrame(columns=names, dtype=np.float64)
    table = frame.pivot_table(index="step", columns="layer", values="norm", aggfunc="last")
    table = table.reindex(columns=[n for n in names if n in table.columns])
    return table.where(np.isfinite(table))


def _relative(
    run: Any, lay: ModelLayout
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None, list[str]]:
    """Gradient norms, gradient/weight ratios, weight norms (None if not recorded), names.

    Frames are steps x parameters, parameters in depth order.
    """
    params = [p.name for p in lay.params_by_depth(matrices_only=True) if p.requires_grad]
    if len(params) == 0 or "gradients" not in lay.signals:
        return pd.DataFrame(), pd.DataFrame(), None, []
    grads = _matrix(run, "gradient", params)
    if grads.empty:
        return grads, grads, None, []
    params = [p for p in params if p in grads.columns]
    grads = grads[params]
    weights = _matrix(run, "weight", params) if "weights" in lay.signals else pd.DataFrame()
    if weights.empty:
        rel = grads.copy()  # no weights recorded: compare raw norms
        weights = None
    else:
        weights = weights.reindex(index=grads.index, columns=params)
        rel = grads / weights.where(weights > 0)
    # a zero gradient is "no gradient" (stuck_weights / dead_units say why), not a scale
    rel = rel.where(grads > 0)
    return grads, rel, weights, params


def _after_max(rel: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    """For each column, the largest value among the columns after it (NaN for the last).

    ``groups``: per column, the model it belongs to; columns are compared only with
    later ones of their own model (a GAN's generator is not "before" its
    discriminator). Each group's columns must be in depth order.
    """
    out = np.full_like(rel, np.nan)
    for group in dict.fromkeys(groups):
        cols = [j for j, g in enumerate(groups) if g == group]
        part = rel[:, cols]
        flipped = np.fmax.accumulate(part[:, ::-1], axis=1)[:, ::-1]
        after = np.full_like(part, np.nan)
        after[:, :-1] = flipped[:, 1:]
        out[:, cols] = after
    return out


def check_vanishing(run: Any) -> list[Finding]:
    """Layers whose gradient (relative to their weights) is a tiny fraction of later layers'."""
    lay = layout(run)
    if lay is None:
        return []
    _, rel, _, params = _relative(run, lay)
    if len(params) < 2 or rel.empty:
        return []
    values = rel.to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = values / _after_max(values, [lay.model_of(p) for p in params])
    steps = rel.index.to_numpy(dtype=np.int64)
    window = min(WINDOW, len(steps))
    median = nanmedian(ratio[-window:], axis=0)
    bad = [i for i in range(len(params)) if np.isfinite(median[i]) and median[i] < VANISH_RATIO]
    if not bad:
        return []
    worst = min(bad, key=lambda i: median[i])
    run_start = trailing_run_start(np.nan_to_num(ratio[:, worst], nan=1.0) < VANISH_RATIO)
    onset = int(steps[run_start if run_start is not None else len(steps) - window])
    top = int(np.nanargmax(values[-1])) if np.isfinite(values[-1]).any() else len(params) - 1
    modules = [lay.param(params[i]).module for i in bad]
    name = params[worst]
    module = lay.param(name).module
    since = f"since step {onset}" if onset > int(steps[0]) else "from the first capture"
    message = (
        f"Gradients vanish toward the input: at {lay.label(module)} the gradient, relative to "
        f"its weights, is {fmt(float(median[worst]))} times that of the layers after it "
        f"(median of the last {window} captures, {since}); {len(bad)} of {len(params)} layers "
        f"are below 1/{int(1 / VANISH_RATIO)}: {names(modules)}. Those layers barely learn. "
        "Try: ReLU-family activations instead of sigmoid/tanh, normalisation (BatchNorm, "
        "LayerNorm), residual connections, or Kaiming/Xavier initialisation."
    )
    return [
        Finding(
            check="vanishing_gradients",
            severity="warning",
            layer=module,
            step=onset,
            message=message,
            evidence={
                "parameter": name,
                "ratio_to_later_layers": float(median[worst]),
                "threshold": VANISH_RATIO,
                "grad_to_weight": float(nanmedian(values[-window:, worst])),
                "largest_layer": lay.param(params[top]).module,
                "largest_grad_to_weight": float(nanmedian(values[-window:, top])),
                "layers": modules,
                "ratios": {params[i]: float(median[i]) for i in bad},
                "window_captures": window,
            },
        )
    ]


def check_exploding(run: Any) -> list[Finding]:
    """Gradients that grow toward the input, or grow far above their own earlier size."""
    lay = layout(run)
    if lay is None:
        return []
    grads, rel, weights, params = _relative(run, lay)
    if not params or rel.empty:
        return []
    steps = grads.index.to_numpy(dtype=np.int64)
    g = grads.to_numpy(dtype=np.float64)
    r = rel.to_numpy(dtype=np.float64)
    candidates: list[tuple[float, Finding]] = []

    # over time: each capture against the median of the captures before it
    for j, name in enumerate(params):
        col = g[:, j]
        base = pd.Series(col).expanding(min_periods=MIN_BASELINE).median().shift(1).to_numpy()
        if weights is not None:  # growth out of an abnormally small start does not count
            earlier_w = weights[name].expanding(min_periods=1).median().shift(1)
            floor = BASELINE_FLOOR * earlier_w.to_numpy(dtype=np.float64)
            base = np.fmax(base, np.where(np.isfinite(base), floor, np.nan))
        with np.errstate(invalid="ignore", divide="ignore"):
            growth = col / np.where(base > 0, base, np.nan)
        hit = np.flatnonzero(np.nan_to_num(growth, nan=0.0) >= EXPLODE_GROWTH)
        if len(hit):
            i = int(hit[0])
            module = lay.param(name).module
            finding = _over_time(
                lay, module, name, int(steps[i]), growth[i], base[i], col[i], r[i, j]
            )
            candidates.append((float(growth[i]), finding))

    # by depth: a layer far above every layer after it
    if len(params) >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = r / _after_max(r, [lay.model_of(p) for p in params])
        window = min(WINDOW, len(steps))
        if np.isfinite(ratio[-window:]).any():
            median = nanmedian(ratio[-window:], axis=0)
            for j, name in enumerate(params):
                if np.isfinite(median[j]) and median[j] >= EXPLODE_DEPTH_RATIO:
                    start = trailing_run_start(
                        np.nan_to_num(ratio[:, j], nan=0.0) >= EXPLODE_DEPTH_RATIO
                    )
                    onset = int(steps[start if start is not None else len(steps) - window])
                    module = lay.param(name).module
                    message = (
                        f"Gradients grow toward the input: at {lay.label(module)} the gradient, "
                        f"relative to its weights, is {fmt(float(median[j]))} times that of every "
                        f"layer after it (median of the last {window} captures, since step "
                        f"{onset}). Try: smaller initial weights, normalisation layers, "
                        "gradient clipping (torch.nn.utils.clip_grad_norm_)."
                    )
                    candidates.append(
                        (
                            float(median[j]),
                            Finding(
                                check="exploding_gradients",
                                severity="warning",
                                layer=module,
                                step=onset,
                                message=message,
                                evidence={
                                    "parameter": name,
                                    "kind": "depth",
                                    "ratio_to_later_layers": float(median[j]),
                                    "threshold": EXPLODE_DEPTH_RATIO,
                                    "window_captures": window,
                                },
                            ),
                        )
                    )
    if not candidates:
        return []
    # one finding: the layer where it is worst, naming the others
    candidates.sort(key=lambda c: -c[0])
    best = candidates[0][1]
    others = sorted({c[1].layer for c in candidates[1:]} - {best.layer})
    evidence = dict(best.evidence, layers=[best.layer, *others])
    message = best.message
    if others:
        message += f" Also affected: {names(others)}."
    return [
        Finding(
            check=best.check,
            severity=best.severity,
            layer=best.layer,
            step=min([best.step] + [c[1].step for c in candidates if c[1].layer == best.layer]),
            message=message,
            evidence=evidence,
        )
    ]


def _over_time(
    lay: ModelLayout,
    module: str,
    name: str,
    step: int,
    growth: float,
    base: float,
    value: float,
    rel: float,
) -> Finding:
    message = (
        f"Gradients explode in {lay.label(module)}: at step {step} the gradient norm of "
        f"'{name}' is {fmt(value)}, {fmt(growth)} times its median of {fmt(base)} over the "
        f"earlier captures ({fmt(rel)} times the weights' norm). Try: a lower learning rate, "
        "gradient clipping (torch.nn.utils.clip_grad_norm_), learning-rate warmup."
    )
    return Finding(
        check="exploding_gradients",
        severity="warning",
        layer=module,
        step=step,
        message=message,
        evidence={
            "parameter": name,
            "kind": "growth",
            "grad_norm": value,
            "baseline_median": base,
            "growth": growth,
            "grad_to_weight": rel,
            "threshold_growth": EXPLODE_GROWTH,
            "baseline_floor_grad_to_weight": BASELINE_FLOOR,
        },
    )
