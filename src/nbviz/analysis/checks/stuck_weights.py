"""``stuck_weights``: parameters that do not move, and why.

Per step, a healthy layer moves by about 1e-3 of its norm (the update/weight
ratio ``||dw|| / ||w||``; 1e-4 to 1e-2 is usual). A parameter is stuck when

- its distance from its initial value, ``||w - w0|| / ||w0||``, is still below
  :data:`DISTANCE` (1e-6, a few float32 rounding steps) at the last capture, or
- its update/weight ratio stayed below :data:`UPDATE_RATIO` (1e-7, four orders
  of magnitude under the usual) on each of the last :data:`WINDOW` captures.

Why it is stuck decides what the finding says, so that it never blames the
optimizer for what the gradient did. Over the captures since it stopped:

- ``optimizer``: it receives a gradient but its step per unit of gradient
  (``||dw|| / ||g||``) is under :data:`OPTIMIZER_GAP` (1/1000) of the other
  parameters' (or exactly zero), as with a parameter group whose learning rate
  is zero or a parameter the optimizer was never given. A ``warning`` that
  points at the optimizer. Not when the step the others' rate would take on
  its gradient is itself under :data:`ROUNDING` (1e-6) of the weights: float32
  cannot add so small a step, whatever the optimizer.
- ``no_gradient``: its gradient is zero since it stopped (units after it died,
  for example). The update follows the gradient: nothing to blame on the
  optimizer. A ``warning`` for a weight matrix (the layer no longer learns);
  diagnose() folds it under the finding that stopped the gradient.
- ``small_gradient``: its gradient, relative to its weights, is so small that
  its steps are too (vanishing gradients, saturated units). The same.

Where a single capture holds the updates and no parameter moved in it, the step
itself took no optimizer step (a learning rate warmed up from 0, gradient
accumulation counted pass by pass): one ``info`` row for the run says so rather
than blaming the optimizer for each layer.

A module whose weight learns while only a bias or scale is stuck (the bias of
a layer followed by BatchNorm, which cancels it) is ``info``. Parameters with
``requires_grad=False`` are frozen on purpose and get an ``info`` row; so do
trainable parameters that never received a gradient (unused in the loss, or
behind units dead from the start).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.checks.finding import Finding, fmt, names
from nbviz.analysis.checks.model import layout, param_stats
from nbviz.analysis.checks.robust import trailing_run_start

CHECK = "stuck_weights"
DISTANCE = 1e-6
UPDATE_RATIO = 1e-7
WINDOW = 10
MIN_WINDOW = 3
#: A step per unit of gradient this far below the learning parameters' is the optimizer's doing.
OPTIMIZER_GAP = 1e-3
#: An update/weight ratio below this vanishes in float32 rounding (2**-23 per element, with room).
ROUNDING = 1e-6
#: Frozen modules listed one row each up to this many; beyond, one row for all.
MAX_FROZEN_ROWS = 10


def _by_param(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {name: group for name, group in frame.groupby("layer", sort=False)}


def check(run: Any) -> list[Finding]:
    """Stuck, frozen and gradient-less parameters, one row per module."""
    lay = layout(run)
    if lay is None:
        return []
    findings: list[Finding] = []

    frozen: dict[str, list[str]] = defaultdict(list)
    for p in lay.params:
        if not p.requires_grad:
            frozen[p.module].append(p.name)
    if frozen:
        modules = sorted(frozen, key=lay.depth)
        if len(modules) <= MAX_FROZEN_ROWS:
            for module in modules:
                findings.append(
                    Finding(
                        check=CHECK,
                        severity="info",
                        layer=module,
                        message=(
                            f"{lay.label(module)} is frozen: {names(frozen[module])} "
                            "ha{} requires_grad=False, so training leaves it as it is.".format(
                                "s" if len(frozen[module]) == 1 else "ve"
                            )
                        ),
                        evidence={"frozen": frozen[module]},
                    )
                )
        else:
            count = sum(len(v) for v in frozen.values())
            findings.append(
                Finding(
                    check=CHECK,
                    severity="info",
                    message=(
                        f"{count} parameters in {len(modules)} modules are frozen "
                        f"(requires_grad=False): {names(modules)}."
                    ),
                    evidence={"frozen_modules": modules, "frozen": count},
                )
            )

    trainable = [p for p in lay.params if p.requires_grad]
    if not trainable or "gradients" not in lay.signals:
        return findings
    wanted = [p.name for p in trainable]
    grads = _by_param(param_stats(run, "gradient", wanted))
    if not grads:
        return findings  # no parameter gradient captured yet
    weights = updates = {}
    if "weights" in lay.signals:
        weights = _by_param(param_stats(run, "weight", wanted))
        updates = _by_param(param_stats(run, "update", wanted))

    moving: list[float] = []  # step per unit of gradient of the parameters that learn
    candidates: list[dict[str, Any]] = []
    no_grad: dict[str, list[str]] = defaultdict(list)
    for p in trainable:
        g = grads.get(p.name)
        if g is None or not (np.nan_to_num(g["norm"].to_numpy(), nan=0.0) > 0).any():
            no_grad[p.module].append(p.name)
            continue
        w, u = weights.get(p.name), updates.get(p.name)
        if w is None or u is None or w.empty:
            continue
        joined = u[["step", "norm", "rel"]].merge(
            g[["step", "norm"]].rename(columns={"norm": "grad"}), on="step", how="left"
        )
        steps = joined["step"].to_numpy(dtype=np.int64)
        unorm = joined["norm"].to_numpy(dtype=np.float64)
        gnorm = np.nan_to_num(joined["grad"].to_numpy(dtype=np.float64), nan=0.0)
        ratio = joined["rel"].to_numpy(dtype=np.float64)
        # a zero-norm weight has no ratio: it is stuck when its update is exactly zero
        ratio = np.where(np.isfinite(ratio), ratio, np.where(unorm == 0, 0.0, np.inf))
        dist = float(w["rel"].iloc[-1]) if np.isfinite(w["rel"].iloc[-1]) else None
        # a short run: every capture but the first (it may have stopped after it)
        window = min(WINDOW, max(MIN_WINDOW, len(ratio) - 1))
        still = ratio < UPDATE_RATIO
        if not ((dist is not None and dist < DISTANCE) or bool(still[-window:].all())):
            with np.errstate(invalid="ignore", divide="ignore"):
                per_grad = unorm / np.where(gnorm > 0, gnorm, np.nan)
            if np.isfinite(per_grad).any():
                moving.append(float(np.nanmedian(per_grad)))
            continue
        start = trailing_run_start(still)
        since = start if start is not None else 0
        # each capture's latest weight norm (the weights come every hist_every steps)
        wnorm = w.set_index("step")["norm"].reindex(steps, method="ffill").to_numpy(np.float64)
        candidates.append(
            {
                "param": p,
                "parameter": p.name,
                "distance_from_init": dist,
                "update_to_weight": float(np.median(ratio[-window:])),
                "grad_norm": float(np.median(gnorm[since:])),
                "grad_to_weight": _median_ratio(gnorm[since:], wnorm[since:]),
                "step_per_grad": _median_ratio(unorm[since:], gnorm[since:]),
                "since": int(steps[since]),
                "had_gradient_before": bool(since > 0 and (gnorm[:since] > 0).any()),
                "captures": len(ratio),
            }
        )

    reference = float(np.median(moving)) if moving else None
    if (
        candidates
        and reference is None
        and all(r["captures"] == 1 and r["grad_norm"] > 0 for r in candidates)
    ):
        # one capture where nothing moved: that step took no optimizer step at all
        findings.append(_no_step_finding(candidates))
        candidates = []
    stuck: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in candidates:
        # the step the others' optimizer would take on this gradient, relative to the weights
        rel_grad = row["grad_to_weight"]
        expected = reference * rel_grad if reference is not None and rel_grad else None
        row["expected_update_to_weight"] = expected
        per = row["step_per_grad"]
        if row["grad_norm"] == 0:
            row["why"] = "no_gradient"
        elif expected is not None and expected < ROUNDING:
            row["why"] = "small_gradient"  # such a step is lost to float32 rounding anyway
        elif per is None or per == 0:
            row["why"] = "optimizer"
        elif reference is not None and per < OPTIMIZER_GAP * reference:
            row["why"] = "optimizer"
        else:
            row["why"] = "small_gradient"
        stuck[row["param"].module].append(row)

    for module in sorted(stuck, key=lay.depth):
        findings.append(_stuck_finding(lay, module, stuck[module], reference))
    for module in sorted(no_grad, key=lay.depth):
        findings.append(
            Finding(
                check=CHECK,
                severity="info",
                layer=module,
                message=(
                    f"{lay.label(module)} receives no gradient: {names(no_grad[module])} "
                    "had a zero or missing gradient at every capture (unused in the loss, or "
                    "behind dead units; see dead_units)."
                ),
                evidence={"parameters": no_grad[module], "why": "no_gradient"},
            )
        )
    return findings


def _median_ratio(num: np.ndarray, den: np.ndarray) -> float | None:
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.asarray(num, dtype=np.float64) / np.where(den > 0, den, np.nan)
    r = r[np.isfinite(r)]
    return float(np.median(r)) if len(r) else None


def _no_step_finding(rows: list[dict[str, Any]]) -> Finding:
    """Every parameter that had a gradient unchanged at the one capture: not a parameter
    the optimizer leaves out, but a step it did not take (a learning rate warmed up from
    0, several passes per optimizer step). ``info``: more captures tell which."""
    step = rows[0]["since"]
    return Finding(
        check=CHECK,
        severity="info",
        step=step,
        cause="optimizer",
        message=(
            f"No parameter changed at step {step}, the only step captured, although "
            f"{len(rows)} received gradients: that step took no optimizer step (a learning "
            "rate warmed up from 0, gradient accumulation with run.watch not given the "
            "optimizer, or optimizer.step() never called). Captures of later steps tell which."
        ),
        advice="capture more steps (a smaller every=) or pass run.watch(model, optimizer=opt)",
        summary=f"no parameter changed at step {step}, the only step captured",
        evidence={
            "parameters": [{k: v for k, v in r.items() if k != "param"} for r in rows],
            "why": "no_step",
        },
    )


def _stuck_finding(
    lay: Any, module: str, rows: list[dict[str, Any]], reference: float | None
) -> Finding:
    """One module's stuck parameters as a finding worded for why they are stuck."""
    onset = min(r["since"] for r in rows)
    params = [r["parameter"] for r in rows]
    evidence_rows = [{k: v for k, v in r.items() if k != "param"} for r in rows]
    evidence = {
        "parameters": evidence_rows,
        "reference_step_per_grad": reference,
        "threshold_distance": DISTANCE,
        "threshold_update_to_weight": UPDATE_RATIO,
    }
    blamed = [r for r in rows if r["why"] == "optimizer"]
    if blamed:
        worst = max(blamed, key=lambda r: r["update_to_weight"])
        dist = worst["distance_from_init"]
        moved = f"; has moved {fmt(dist)} of its norm from its start" if dist is not None else ""
        per = worst["step_per_grad"]
        compare = (
            f", {fmt(per / reference)} times the step per unit of gradient of the layers that learn"
            if per and reference
            else ""
        )
        return Finding(
            check=CHECK,
            severity="warning",
            layer=module,
            step=onset,
            cause="optimizer",
            message=(
                f"{lay.label(module)} is not learning: {names([r['parameter'] for r in blamed])} "
                f"receive gradients (median norm {fmt(worst['grad_norm'])}) but do not change "
                f"(update/weight ratio {fmt(worst['update_to_weight'])}, usual ~1e-3{compare}"
                f"{moved}) since step {onset}."
            ),
            advice=(
                "check that the optimizer was given these parameters and that their parameter "
                "group's learning rate is not zero"
            ),
            summary=f"the optimizer does not update '{module}'",
            evidence={**evidence, "why": "optimizer"},
        )
    matrix = any(len(r["param"].shape) >= 2 for r in rows)
    silent = all(r["why"] == "no_gradient" for r in rows)
    if silent:
        lost = any(r["had_gradient_before"] for r in rows)
        what = (
            f"its gradient has been zero since step {onset}"
            if lost
            else "its gradient is zero at every capture since it stopped"
        )
    else:
        rel = [r["grad_to_weight"] for r in rows if r["grad_to_weight"] is not None]
        what = (
            f"its gradient is {fmt(min(rel))} of its weights' norm"
            if rel
            else "its gradient is tiny"
        )
    if matrix:
        message = (
            f"{lay.label(module)} stopped learning at step {onset}: {names(params)} do not move "
            f"because {what}. Its steps follow its gradient, so the optimizer is not at fault: "
            "what stops the gradient before it reaches this layer is."
        )
        severity = "warning"
        summary = f"'{module}' stopped learning at step {onset}"
    else:
        message = (
            f"{names(params)} of {lay.label(module)} do not move: {what}, while the layer's "
            "weight learns (a bias followed by a normalisation layer, which cancels it, gets "
            "no gradient); nothing to fix."
        )
        severity = "info"
        summary = f"{names(params)} do not move"
    return Finding(
        check=CHECK,
        severity=severity,
        layer=module,
        step=onset,
        cause="architecture",
        message=message,
        advice=(
            "find what stops the gradient before this layer: dead or saturated units, "
            "vanishing gradients, a detach() or a non-differentiable operation"
            if matrix
            else ""
        ),
        summary=summary,
        evidence={**evidence, "why": "no_gradient" if silent else "small_gradient"},
    )
