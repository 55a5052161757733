"""``stuck_weights``: parameters that get gradients but do not move, and frozen ones.

Per step, a healthy layer moves by about 1e-3 of its norm (the update/weight
ratio ``||dw|| / ||w||``; 1e-4 to 1e-2 is usual). A parameter is stuck when it
receives non-zero gradients yet

- its distance from its initial value, ``||w - w0|| / ||w0||``, is still below
  :data:`DISTANCE` (1e-6, a few float32 rounding steps) at the last capture, or
- its update/weight ratio stayed below :data:`UPDATE_RATIO` (1e-7, four orders
  of magnitude under the usual) on each of the last :data:`WINDOW` captures,

as a parameter group with a zero learning rate, or one the optimizer was never
given, does. That is a ``warning``. Parameters with ``requires_grad=False`` are
frozen on purpose and get an ``info`` row; so do trainable parameters that
never receive a gradient (unused in the loss, or behind dead units).
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

    stuck: dict[str, list[dict[str, Any]]] = defaultdict(list)
    no_grad: dict[str, list[str]] = defaultdict(list)
    for p in trainable:
        g = grads.get(p.name)
        if g is None or not (np.nan_to_num(g["norm"].to_numpy(), nan=0.0) > 0).any():
            no_grad[p.module].append(p.name)
            continue
        w, u = weights.get(p.name), updates.get(p.name)
        if w is None or u is None or w.empty:
            continue
        dist = float(w["rel"].iloc[-1]) if np.isfinite(w["rel"].iloc[-1]) else None
        ratio = u["rel"].to_numpy(dtype=np.float64)
        unorm = u["norm"].to_numpy(dtype=np.float64)
        # a zero-norm weight has no ratio: it is stuck when its update is exactly zero
        ratio = np.where(np.isfinite(ratio), ratio, np.where(unorm == 0, 0.0, np.inf))
        window = min(WINDOW, len(ratio))
        still = ratio < UPDATE_RATIO
        recent_still = bool(still[-window:].all())
        if (dist is not None and dist < DISTANCE) or recent_still:
            start = trailing_run_start(still)
            steps = u["step"].to_numpy(dtype=np.int64)
            onset = int(steps[start]) if start is not None else int(w["step"].iloc[0])
            stuck[p.module].append(
                {
                    "parameter": p.name,
                    "distance_from_init": dist,
                    "update_to_weight": float(np.median(ratio[-window:])),
                    "grad_norm": float(np.nanmedian(g["norm"].to_numpy(dtype=np.float64))),
                    "since": onset,
                }
            )

    for module in sorted(stuck, key=lay.depth):
        rows = stuck[module]
        onset = min(r["since"] for r in rows)
        params = [r["parameter"] for r in rows]
        worst = max(rows, key=lambda r: r["update_to_weight"])
        dist = worst["distance_from_init"]
        moved = f"has moved {fmt(dist)} of its norm from its start" if dist is not None else ""
        message = (
            f"{lay.label(module)} is not learning: {names(params)} receive gradients (median norm "
            f"{fmt(worst['grad_norm'])}) but do not change (update/weight ratio "
            f"{fmt(worst['update_to_weight'])}, usual ~1e-3"
            + (f"; {moved}" if moved else "")
            + f") since step {onset}. Try: check that the optimizer was given these "
            "parameters and that their parameter group's learning rate is not zero."
        )
        findings.append(
            Finding(
                check=CHECK,
                severity="warning",
                layer=module,
                step=onset,
                message=message,
                evidence={
                    "parameters": rows,
                    "threshold_distance": DISTANCE,
                    "threshold_update_to_weight": UPDATE_RATIO,
                },
            )
        )
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
                evidence={"parameters": no_grad[module]},
            )
        )
    return findings
