"""``vanishing_gradients`` and ``exploding_gradients``: gradient size by depth and over time.

About 690 lines because the two checks read the same gradient matrices, the
same backpropagated profile and the same update ratios (whether a layer keeps
pace), and a layer's candidates of both kinds are ranked together; the per-layer
signals by depth are already apart (:mod:`.depth`).

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
  A layer that low while a layer before it (nearer the input) gets
  :data:`UPSTREAM_LEARNS` (1/100) or more of its later layers' is not counted: the
  gradient reached the input side, and that layer's is small on its own, where the
  layer is a projection inside an attention module whose heads were recorded (a
  ``<module>/heads`` layer; elsewhere, a deep sigmoid stack beside a wide layer that
  learns is still a vanishing gradient). The query and key projections of attention
  whose logits are small (a transformer at initialisation, BERT or BART with their 0.02
  weights: 1e-7 to 5e-5 of the later layers' while their embeddings get 0.1-1.6) are
  such layers: the softmax passes them little gradient until its logits grow.
  Embedding tables are compared but are no layer's reference: a row moves only with
  its own token and no gradient goes through them to the input, so their ratio (a
  position table's near 1 where a matrix's is 0.01) is on another scale. Where the
  run recorded the updates, the finding says what they show: a layer whose update
  (relative to its weights) keeps up with :data:`KEEPS_PACE` of the largest of the
  later layers' learns whatever its gradient (an optimizer that scales each
  parameter's step, Adam's, made up for it); only when every such layer keeps pace
  is the finding ``info``, without advice, for then nothing is slowed.
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

They also read the gradient backpropagated to the main layers' outputs
(:mod:`nbviz.analysis.checks.depth`; the largest set of them with one output
shape, whose norms compare directly, leaving out those followed by a
normalisation layer, whose gradient only mirrors their scale, and the projections
inside attention modules whose heads were recorded, which branch off the path to
the input), which
parameter gradients can hide: a
layer's parameter gradient is its output gradient times its input, so a stack
whose activations grow forward while its output gradients grow backward keeps
parameter gradients level by depth. When the first main layer's output-gradient
norm is :data:`EXPLODE_BACKPROP` (100) times the last one's (median of the last
captures), or :data:`EXPLODE_BACKPROP_TREND` (10) times with most of
:data:`TREND_LAYERS` (4) or more layers multiplying it (a geometric growth), the
gradient explodes toward the input; at :data:`VANISH_BACKPROP`
(1e-4) or less it vanishes (reported when the parameter gradients say nothing
already). Healthy stacks: the digits CNN 1/13, a default-initialised eight-layer
ReLU MLP 1/500 at its first capture and closer to level after.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.checks.depth import (
    feeds_normalisation,
    is_lookup,
    main_layers,
    normalises,
    output_grad_norm,
    same_shape,
    trend,
)
from nbviz.analysis.checks.finding import Finding, fmt, names
from nbviz.analysis.checks.model import ModelLayout, layout, param_stats
from nbviz.analysis.checks.optimizer import update_ratios
from nbviz.analysis.checks.robust import nanmedian, onset

VANISH_RATIO = 1e-3
#: A layer nearer the input at this fraction of its later layers' gradient or more learns:
#: the gradient reached it, so a small one after it has not vanished on the way back.
UPSTREAM_LEARNS = 1e-2
#: A layer whose update (relative to its weights) is at least this fraction of the largest
#: of the later layers' keeps pace with them whatever its gradient: an optimizer that
#: scales each parameter's step (Adam, RMSprop, Adagrad) made up for it.
KEEPS_PACE = 0.1
EXPLODE_DEPTH_RATIO = 1e3
EXPLODE_GROWTH = 100.0
#: Output-gradient norm of the first main layer over the last one's, beyond which
#: the backpropagated gradient explodes (or, under its inverse, vanishes).
EXPLODE_BACKPROP = 100.0
VANISH_BACKPROP = 1e-4
#: A smaller growth counts when it is geometric: most layers multiply the gradient.
EXPLODE_BACKPROP_TREND = 10.0
#: Main layers needed before a growth can be called geometric.
TREND_LAYERS = 4
VANISH_ADVICE = (
    "ReLU-family activations instead of sigmoid/tanh, normalisation (BatchNorm, LayerNorm), "
    "residual connections, or Kaiming/Xavier initialisation"
)
#: The same, for a model that normalises already (it would contradict the layout).
VANISH_ADVICE_NORMALISED = (
    "ReLU-family activations instead of sigmoid/tanh, residual connections, or Kaiming/Xavier "
    "initialisation"
)


def _vanish_advice(lay: ModelLayout) -> str:
    """What to try, less normalisation where the model has normalisation layers."""
    if any(normalises(lay, m) for m in lay.forward_order):
        return VANISH_ADVICE_NORMALISED
    return VANISH_ADVICE


EXPLODE_DEPTH_ADVICE = (
    "smaller initial weights (Kaiming for ReLU, Xavier for tanh), normalisation layers, or "
    "gradient clipping (torch.nn.utils.clip_grad_norm_)"
)
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
        # each step's latest weight capture: the weights' statistics come with the
        # distributions (every hist_every steps), the gradients at every capture
        weights = weights.reindex(index=grads.index, columns=params, method="ffill")
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


def _learns_upstream(median: np.ndarray, groups: Sequence[str], i: int) -> bool:
    """Whether a layer before layer ``i`` (nearer the input, same model) gets
    :data:`UPSTREAM_LEARNS` or more of the gradient of the layers after it: then ``i``'s
    small gradient is its own (a query or key projection while the attention logits are
    small: the softmax passes them little), not a gradient vanishing on its way back."""
    return any(
        groups[j] == groups[i] and np.isfinite(median[j]) and median[j] >= UPSTREAM_LEARNS
        for j in range(i)
    )


def _attention_modules(run: Any) -> list[str]:
    """The attention modules whose heads the run recorded (``<module>/heads`` layers)."""
    meta = run.meta("heads") or {}
    layers = meta.get("layers") if isinstance(meta, dict) else None
    if not isinstance(layers, dict):
        return []
    return [
        str(info.get("module", name.removesuffix("/heads")) if isinstance(info, dict) else name)
        for name, info in layers.items()
    ]


def _in_attention(module: str, attention: Sequence[str]) -> bool:
    """Whether ``module`` is a projection inside one of the ``attention`` modules."""
    return any(a and (module == a or module.startswith(a + ".")) for a in attention)


def _reference(values: np.ndarray, lay: ModelLayout, params: Sequence[str]) -> np.ndarray:
    """``values`` with the embedding tables' columns blanked: what later layers are compared
    with (a table's ratio is on another scale, and no gradient goes through it)."""
    lookup = [is_lookup(lay, lay.param(p).module) for p in params]
    return np.where(np.array(lookup, dtype=bool), np.nan, values)


def _keeping_pace(
    run: Any, lay: ModelLayout, params: Sequence[str], bad: Sequence[int], window: int
) -> dict[int, float]:
    """The ``bad`` layers whose updates keep pace with the later layers': ``{index: update
    / the largest later layer's update}`` (each relative to its weights; median of the last
    ``window`` captures) where that is :data:`KEEPS_PACE` or more. Empty where the updates
    were not recorded."""
    ups = update_ratios(run, lay)
    if ups.empty:
        return {}
    ups = ups.reindex(columns=list(params)).iloc[-window:]
    median = nanmedian(ups.to_numpy(dtype=np.float64), axis=0)
    groups = [lay.model_of(p) for p in params]
    pace: dict[int, float] = {}
    for i in bad:
        later = [
            median[j]
            for j in range(i + 1, len(params))
            if groups[j] == groups[i]
            and np.isfinite(median[j])
            and not is_lookup(lay, lay.param(params[j]).module)
        ]
        if not later or not np.isfinite(median[i]):
            continue
        top = float(max(later))
        if top > 0 and median[i] >= KEEPS_PACE * top:
            pace[i] = float(median[i] / top)
    return pace


def _modules_of(of_module: Sequence[str], chosen: Sequence[int]) -> list[str]:
    """The modules holding the weight matrices ``chosen`` (indices), each once, in order."""
    return list(dict.fromkeys(of_module[i] for i in chosen))


def _names_with_parts(of_module: Sequence[str], chosen: Sequence[int], limit: int = 6) -> str:
    """``'emb', 'gru' (2 of its 4 weight matrices)``: the modules of the ``chosen`` matrices,
    with how many of its own a module that holds several (a recurrent layer) has among them."""
    held = Counter(of_module)
    hit = Counter(of_module[i] for i in chosen)
    shown = [
        f"'{m}'" + (f" ({hit[m]} of its {held[m]} weight matrices)" if held[m] > 1 else "")
        for m in _modules_of(of_module, chosen)
    ]
    more = len(shown) - limit
    return ", ".join(shown[:limit]) + (f" and {more} more" if more > 0 else "")


def check_vanishing(run: Any) -> list[Finding]:
    """Layers whose gradient (relative to their weights) is a tiny fraction of later layers'."""
    lay = layout(run)
    if lay is None:
        return []
    backprop = backprop_profiles(run, lay)
    _, rel, _, params = _relative(run, lay)
    if len(params) < 2 or rel.empty:
        return [_vanishing_backprop(run, lay, b) for b in backprop if b.total <= VANISH_BACKPROP]
    values = rel.to_numpy(dtype=np.float64)
    groups = [lay.model_of(p) for p in params]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = values / _after_max(_reference(values, lay, params), groups)
    steps = rel.index.to_numpy(dtype=np.int64)
    window = min(WINDOW, len(steps))
    median = nanmedian(ratio[-window:], axis=0)
    attention = _attention_modules(run)
    bad = [
        i
        for i in range(len(params))
        if np.isfinite(median[i])
        and median[i] < VANISH_RATIO
        and not (
            _in_attention(lay.param(params[i]).module, attention)
            and _learns_upstream(median, groups, i)
        )
    ]
    if not bad:
        return [_vanishing_backprop(run, lay, b) for b in backprop if b.total <= VANISH_BACKPROP]
    pace = _keeping_pace(run, lay, params, bad, window)
    slowed = [i for i in bad if i not in pace]
    worst = min(slowed or bad, key=lambda i: median[i])
    when = onset(steps, np.nan_to_num(ratio[:, worst], nan=1.0) < VANISH_RATIO, window)
    top = int(np.nanargmax(values[-1])) if np.isfinite(values[-1]).any() else len(params) - 1
    of_module = [lay.param(p).module for p in params]
    name = params[worst]
    module = lay.param(name).module
    below = _modules_of(of_module, bad)
    message = (
        f"Gradients vanish toward the input: at {lay.label(module)} the gradient, relative to "
        f"its weights, is {fmt(float(median[worst]))} times that of the layers after it "
        f"(median of the last {window} captures, {when.since()}); {len(below)} of "
        f"{len(set(of_module))} layers are below 1/{int(1 / VANISH_RATIO)}: "
        f"{_names_with_parts(of_module, bad)}."
    )
    kept = _modules_of(of_module, [i for i in bad if i in pace])
    if slowed and kept:
        slow = _modules_of(of_module, slowed)
        message += (
            f" {names(slow)} barely "
            f"{'learns' if len(slow) == 1 else 'learn'}; the optimizer's steps keep "
            f"{names(kept)} up with the later layers all the same (their updates, "
            "relative to their weights, are within "
            f"{fmt(1 / KEEPS_PACE)}x of the largest of the later layers')."
        )
    elif slowed:
        message += " Those layers barely learn."
    else:
        message += (
            " The optimizer's steps make up for it: the updates of those layers, relative to "
            f"their weights, are {fmt(min(pace.values()))} to {fmt(max(pace.values()))} times "
            "the largest of the later layers', so they learn at the pace of the rest (an "
            "optimizer that scales each parameter's step, as Adam does, or a larger learning "
            "rate for them; under plain SGD they would barely move)."
        )
    profile = next((b for b in backprop if module in b.modules), None)
    if profile is not None and profile.total < 1:
        message += (
            f" The gradient backpropagated to the layers' outputs shrinks {fmt(1 / profile.total)}"
            f"x from {lay.label(profile.modules[-1])} back to {lay.label(profile.modules[0])}."
        )
    return [
        Finding(
            check="vanishing_gradients",
            severity="warning" if slowed else "info",
            layer=module,
            step=when.step,
            cause="architecture",
            message=message,
            advice=_vanish_advice(lay) if slowed else "",
            summary=(
                f"gradients vanish toward the input: '{module}' gets "
                f"{fmt(float(median[worst]))} of the later layers' gradient"
                + ("" if slowed else "; the optimizer's steps make up for it")
            ),
            evidence={
                "backprop_ratio": profile.total if profile is not None else None,
                "parameter": name,
                "ratio_to_later_layers": float(median[worst]),
                "threshold": VANISH_RATIO,
                "grad_to_weight": float(nanmedian(values[-window:, worst])),
                "largest_layer": lay.param(params[top]).module,
                "largest_grad_to_weight": float(nanmedian(values[-window:, top])),
                "layers": below,
                "ratios": {params[i]: float(median[i]) for i in bad},
                "keeping_pace": {params[i]: v for i, v in pace.items()},
                "keeps_pace": KEEPS_PACE,
                "window_captures": window,
            },
        )
    ]


def check_exploding(run: Any) -> list[Finding]:
    """Gradients that grow toward the input, or grow far above their own earlier size."""
    lay = layout(run)
    if lay is None:
        return []
    candidates: list[tuple[float, Finding]] = []
    for b in backprop_profiles(run, lay):
        if b.exploding:
            candidates.append((b.total, _exploding_backprop(lay, b)))
    grads, rel, weights, params = _relative(run, lay)
    if not params or rel.empty:
        return _worst(candidates)
    steps = grads.index.to_numpy(dtype=np.int64)
    g = grads.to_numpy(dtype=np.float64)
    r = rel.to_numpy(dtype=np.float64)

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
        matrices = _reference(r, lay, params)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = matrices / _after_max(matrices, [lay.model_of(p) for p in params])
        window = min(WINDOW, len(steps))
        if np.isfinite(ratio[-window:]).any():
            median = nanmedian(ratio[-window:], axis=0)
            for j, name in enumerate(params):
                if np.isfinite(median[j]) and median[j] >= EXPLODE_DEPTH_RATIO:
                    began = onset(
                        steps, np.nan_to_num(ratio[:, j], nan=0.0) >= EXPLODE_DEPTH_RATIO, window
                    ).step
                    module = lay.param(name).module
                    message = (
                        f"Gradients grow toward the input: at {lay.label(module)} the gradient, "
                        f"relative to its weights, is {fmt(float(median[j]))} times that of every "
                        f"layer after it (median of the last {window} captures, since step "
                        f"{began})."
                    )
                    candidates.append(
                        (
                            float(median[j]),
                            Finding(
                                check="exploding_gradients",
                                severity="warning",
                                layer=module,
                                step=began,
                                message=message,
                                advice=EXPLODE_DEPTH_ADVICE,
                                summary=f"gradients grow toward the input, most at '{module}'",
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
    return _worst(candidates)


def _worst(candidates: list[tuple[float, Finding]]) -> list[Finding]:
    """One finding: the candidate where it is worst, naming the other layers affected."""
    if not candidates:
        return []
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
            cause=best.cause,
            message=message,
            advice=best.advice,
            summary=best.summary,
            evidence=evidence,
        )
    ]


@dataclass(frozen=True)
class Backprop:
    """How the gradient of the loss with respect to the main layers' outputs scales by depth.

    ``total``: first layer's output-gradient norm / last layer's (median over the
    last captures): above 1 it grows on its way back to the input.
    """

    modules: list[str]
    total: float
    per_layer: float
    consistency: float
    exploding: bool
    onset: int
    window: int
    profile: dict[str, float]


def backprop_profiles(run: Any, lay: ModelLayout) -> list[Backprop]:
    """Each model's output-gradient profile by depth (models with three or more main layers)."""
    if "gradients" not in lay.signals:
        return []
    out = []
    attention = _attention_modules(run)
    for modules in main_layers(lay).values():
        # projections inside attention branch off the residual path: a query's or key's
        # gradient is the softmax's to give (small while the logits are), not the depth's
        modules = [
            m
            for m in modules
            if not feeds_normalisation(lay, m) and not _in_attention(m, attention)
        ]
        modules = same_shape(lay, modules)
        if len(modules) < 3:
            continue
        norms = output_grad_norm(run, modules)
        # a zero gradient is "no gradient" (dead units say why), not a scale
        norms = norms.where(norms > 0).dropna(axis=1, how="all").dropna(axis=0)
        if norms.empty or norms.shape[1] < 3:
            continue
        values = norms.to_numpy(dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            totals = values[:, 0] / np.where(values[:, -1] > 0, values[:, -1], np.nan)
        window = min(WINDOW, len(totals))
        profile = nanmedian(values[-window:], axis=0)
        t = trend(profile[::-1])  # from the output back to the input
        if t is None:
            continue
        total = float(nanmedian(totals[-window:]))
        steps = norms.index.to_numpy(dtype=np.int64)
        geometric = t.geometric and norms.shape[1] >= TREND_LAYERS
        limit = EXPLODE_BACKPROP_TREND if geometric else EXPLODE_BACKPROP
        far = (totals >= limit) if total >= 1 else (totals <= VANISH_BACKPROP)
        out.append(
            Backprop(
                modules=list(norms.columns),
                total=total,
                per_layer=t.per_layer,
                consistency=t.consistency,
                exploding=total >= limit,
                onset=onset(steps, np.nan_to_num(far, nan=False), window).step,
                window=window,
                profile={m: float(v) for m, v in zip(norms.columns, profile, strict=True)},
            )
        )
    return out


def _backprop_finding(
    b: Backprop, check: str, message: str, advice: str, summary: str, **evidence: Any
) -> Finding:
    """A finding on the backpropagated gradient's profile ``b``, at its first layer.

    ``evidence``: what the finding adds to the numbers every such finding carries.
    """
    return Finding(
        check=check,
        severity="warning",
        layer=b.modules[0],
        step=b.onset,
        cause="architecture",
        message=message,
        advice=advice,
        summary=summary,
        evidence={
            "kind": "backprop",
            "backprop_ratio": b.total,
            "per_layer": b.per_layer,
            **evidence,
        },
    )


def _exploding_backprop(lay: ModelLayout, b: Backprop) -> Finding:
    first, last = b.modules[0], b.modules[-1]
    message = (
        f"Gradients grow toward the input: the gradient backpropagated to the outputs of the "
        f"main layers grows {fmt(b.total)}x from {lay.label(last)} back to {lay.label(first)} "
        f"(about {fmt(b.per_layer)}x per layer; median of the last {b.window} captures, since "
        f"step {b.onset}). Parameter gradients can stay level by depth meanwhile (they are this "
        "gradient times each layer's input, which shrinks the other way), but the early layers' "
        "steps are out of scale with the late ones'."
    )
    return _backprop_finding(
        b,
        "exploding_gradients",
        message,
        EXPLODE_DEPTH_ADVICE,
        f"the backpropagated gradient grows {fmt(b.total)}x toward the input",
        consistency=b.consistency,
        output_gradient_norms=b.profile,
        threshold=EXPLODE_BACKPROP,
        threshold_geometric=EXPLODE_BACKPROP_TREND,
        window_captures=b.window,
    )


def _vanishing_backprop(run: Any, lay: ModelLayout, b: Backprop) -> Finding:
    first, last = b.modules[0], b.modules[-1]
    message = (
        f"Gradients vanish toward the input: the gradient backpropagated to the outputs of the "
        f"main layers shrinks {fmt(1 / b.total)}x from {lay.label(last)} back to "
        f"{lay.label(first)} (about {fmt(1 / b.per_layer)}x per layer; median of the last "
        f"{b.window} captures, since step {b.onset})."
    )
    params = [p.name for p in lay.params_by_depth(matrices_only=True) if p.requires_grad]
    early = [i for i, p in enumerate(params) if lay.param(p).module in b.modules[:-1]]
    pace = _keeping_pace(run, lay, params, early, b.window) if early else {}
    rescaled = bool(early) and len(pace) == len(early)
    if rescaled:
        message += (
            " Yet the early layers' updates, relative to their weights, are "
            f"{fmt(min(pace.values()))} to {fmt(max(pace.values()))} times the largest of the "
            "later layers', so they learn at the pace of the rest."
        )
    else:
        message += " The early layers barely learn."
    finding = _backprop_finding(
        b,
        "vanishing_gradients",
        message,
        "" if rescaled else _vanish_advice(lay),
        f"the backpropagated gradient shrinks {fmt(1 / b.total)}x toward the input"
        + ("; the optimizer's steps make up for it" if rescaled else ""),
        output_gradient_norms=b.profile,
        threshold=VANISH_BACKPROP,
        window_captures=b.window,
        layers=b.modules[:-1],
        keeping_pace={params[i]: v for i, v in pace.items()},
        keeps_pace=KEEPS_PACE,
    )
    return dataclasses.replace(finding, severity="info") if rescaled else finding


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
        f"earlier captures ({fmt(rel)} times the weights' norm)."
    )
    return Finding(
        check="exploding_gradients",
        severity="warning",
        layer=module,
        step=step,
        cause="learning_rate",
        message=message,
        advice=(
            "a lower learning rate, gradient clipping (torch.nn.utils.clip_grad_norm_), "
            "learning-rate warm-up"
        ),
        summary=f"the gradient of '{module}' grew {fmt(growth)}x at step {step}",
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
