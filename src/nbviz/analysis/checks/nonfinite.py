"""``nonfinite``: where a NaN or Inf first appeared, and where it spread to.

The probe's sentinel checks every watched module's output and every parameter
gradient on every training step and records the first step each one turned
non-finite (events of kind ``nonfinite``); logged losses are read too. Once a
value is NaN it spreads: forward into every later layer, into the loss, back
through every gradient, and through the optimizer step into all weights. So the
origin is the earliest step, and within it the first thing computed: module
outputs in forward order, then the loss, then gradients from the output back
(the parameter gradient closest to the output). Everything else is named as
downstream. Any non-finite value is an ``error``.

The weights are not checked on every step, but each capture of their statistics counts
their non-finite values. Weights that held NaN/Inf a step or more before any forward
read them (rows of a table no batch looks up: the loss stays finite) are the origin
then, and since every gradient was finite up to there, an update made them: the advice
points at the optimizer (an ``eps`` of 0 divides 0 by 0 where a gradient is 0), not at
the forward, nor at clipping gradients.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, names
from nbviz.analysis.checks.model import ModelLayout, layout, module_of

CHECK = "nonfinite"
#: Scalars read as losses (the training loss names first).
LOSS_NAMES = ("train_loss", "loss", "val_loss")


def _rank(lay: ModelLayout | None, item: dict[str, Any]) -> tuple:
    """Order of computation within one step: activations, loss, then gradients."""
    depth = lay.depth(item["module"]) if lay is not None else item.get("order", 0)
    if item["signal"] == "activation":
        return (item["step"], 0, depth)
    if item["signal"] == "loss":
        return (item["step"], 1, 0)
    return (item["step"], 2, -depth)  # backward runs from the output


def first_nonfinite(run: Any, name: str) -> tuple[int, float] | None:
    """The first non-finite value of a scalar: by index seeks where the run has them."""
    if hasattr(run, "first_nonfinite"):
        return run.first_nonfinite(name)
    frame = run.scalars(name)
    bad = frame[~np.isfinite(frame["value"].to_numpy(dtype=np.float64))]
    return (int(bad["step"].iloc[0]), float(bad["value"].iloc[0])) if len(bad) else None


def _bad_parameters(run: Any, names_: list[str], step: int) -> str:
    """A sentence where some of ``names_`` (parameters) held NaN/Inf at the last capture
    before ``step`` that tells (the weights' statistics, or the update's count of the
    non-finite values it left: both taken after that step's update); '' where none did or
    none was captured. One read of one step."""
    if not names_:
        return ""
    last, signal = -1, ""
    for sig in ("weight", "update"):
        steps = np.asarray(run.steps(sig), dtype=np.int64)
        i = int(np.searchsorted(steps, step)) - 1
        if i >= 0 and int(steps[i]) > last:
            last, signal = int(steps[i]), sig
    if not signal:
        return ""
    rows = run.stats(signal, steps=[last])
    rows = rows[rows["layer"].isin(names_) & (rows["nonfinite"] > 0)]
    if rows.empty:
        return ""
    bad = sorted(rows["layer"])
    return (
        f"Its {'parameter' if len(bad) == 1 else 'parameters'} {names(bad)} already held "
        f"non-finite values at step {last}, after that step's update, while its input "
        "was finite."
    )


def _weights_origin(run: Any, lay: ModelLayout | None) -> dict[str, Any] | None:
    """The first weight capture whose weights held NaN/Inf, where the last one still does
    (the sentinel checks outputs and gradients, not weights: a value the forward never
    reads, a row of a table never looked up, shows nowhere else). Found by halving over
    the captures, one step's read each."""
    steps = np.asarray(run.steps("weight"), dtype=np.int64)
    if not len(steps):
        return None

    def bad_at(i: int) -> Any:
        rows = run.stats("weight", steps=[int(steps[i])])
        return rows[rows["nonfinite"] > 0]

    last = bad_at(len(steps) - 1)
    if last.empty:
        return None
    lo, hi, rows = 0, len(steps) - 1, last
    while lo < hi:
        mid = (lo + hi) // 2
        found = bad_at(mid)
        if found.empty:
            lo = mid + 1
        else:
            hi, rows = mid, found
    held = [
        (r.layer, int(r.nonfinite), int(r.count))
        for r in rows.itertuples(index=False)
        if lay is None or lay.param(r.layer) is not None
    ] or [(r.layer, int(r.nonfinite), int(r.count)) for r in rows.itertuples(index=False)]
    if lay is not None:
        held.sort(key=lambda h: lay.depth(module_of(h[0])))
    name, bad, count = held[0]
    return {
        "module": module_of(name),
        "name": name,
        "signal": "weight",
        "step": int(steps[hi]),
        "bad": bad,
        "count": count,
        "others": [h[0] for h in held[1:]],
    }


def _zero_eps(run: Any) -> bool:
    """Whether the recorded optimizer divides by ``sqrt(v) + eps`` with ``eps`` 0."""
    meta = run.meta("optimizer")
    described = meta if isinstance(meta, list) else [meta]
    for opt in described:
        groups = opt.get("groups") if isinstance(opt, dict) else None
        for group in groups if isinstance(groups, list) else []:
            if isinstance(group, dict) and group.get("eps") == 0:
                return True
    return False


def _weights_message(run: Any, origin: dict[str, Any], alone: bool) -> tuple[str, str]:
    """The sentence on weights that turned non-finite with every gradient finite, and the
    hint that follows from it (the update made them, not the forward nor the backward)."""
    held = (
        f"{origin['bad']:,} of {origin['count']:,} values of '{origin['name']}' are NaN/Inf"
        + (f", and {names(origin['others'])} hold some too" if origin["others"] else "")
        + "."
    )
    if alone:
        held += (
            " Every output and gradient checked on every step stayed finite and so did the "
            "loss: the forward never reads those values (rows of a table never looked up, "
            "units never used), so training looks healthy while the model holds them."
        )
    hint = (
        f"the gradients were finite through step {origin['step']}, so an update made these values: "
    )
    if _zero_eps(run):
        hint += (
            "the optimizer's eps is 0, and Adam, RMSprop or Adagrad then divide 0 by 0 "
            "wherever a gradient is exactly 0; give eps a positive value (1e-8); "
        )
    else:
        hint += (
            "look at the optimizer (an eps of 0 divides 0 by 0 where a gradient is 0; a "
            "non-finite learning rate or weight decay) and at code writing into the weights; "
        )
    return held, hint


def check(run: Any) -> list[Finding]:
    """One error naming the first non-finite value (step, layer) and what it reached."""
    lay = layout(run)
    items: list[dict[str, Any]] = []
    events = run.events("nonfinite")
    for row in events.itertuples(index=False):
        if row.step is None or (isinstance(row.step, float) and math.isnan(row.step)):
            continue
        module = row.layer if row.signal == "activation" else module_of(row.layer)
        if lay is not None and row.signal != "activation" and lay.param(row.layer) is None:
            module = row.layer  # an output gradient: already a module name
        detail = row.detail or {}
        items.append(
            {
                "module": module,
                "name": row.layer,
                "signal": row.signal,
                "step": int(row.step),
                "order": detail.get("order", 0),
                # several ranks: the rank whose sentinel saw it first
                "rank": detail.get("rank") if detail.get("world_size", 1) > 1 else None,
            }
        )
    known = set(run.scalar_names())
    for name in LOSS_NAMES:
        if name not in known:
            continue
        bad = first_nonfinite(run, name)
        if bad is not None:
            items.append(
                {
                    "module": "",
                    "name": name,
                    "signal": "loss",
                    "step": bad[0],
                    "value": str(bad[1]),
                }
            )
    weights = _weights_origin(run, lay)
    items.sort(key=lambda it: _rank(lay, it))
    if weights is not None and (not items or weights["step"] + 1 < items[0]["step"]):
        # held before any forward read them (the next step's forward reading them is told
        # from its output, with the parameters that already held them: _bad_parameters)
        items.insert(0, weights)
    if not items:
        return []
    origin, rest = items[0], items[1:]
    label = lay.label if lay is not None else (lambda m: f"'{m}'")
    held = ""
    tail = ""
    if origin["signal"] == "weight":
        where = f"in the weights of {label(origin['module'])} after that step's update"
        held, hint = _weights_message(run, origin, alone=not rest)
        tail = "check torch.isfinite(p).all() over the parameters after each optimizer.step()"
    elif origin["signal"] == "activation":
        where = f"in the output of {label(origin['module'])}"
        own = [p.name for p in lay.params if p.module == origin["module"]] if lay else []
        held = _bad_parameters(run, own, origin["step"])
        if held:
            hint = (
                "its parameters turned non-finite before its forward did: look at what "
                "changed them last (an optimizer step with a huge update, a write into "
                "them); "
            )
        else:
            hint = "look for log/sqrt/division by zero or overflow in that layer's forward; "
        hint += (
            "it is the first layer, so check the input data for NaN/Inf; "
            if lay is not None and lay.depth(origin["module"]) == 0 and not held
            else ""
        )
    elif origin["signal"] == "loss":
        where = f"in the logged {origin['name']} ({origin['value']}) with every layer finite"
        hint = "check the loss function's inputs (log of 0, targets out of range); "
    else:
        where = f"in the gradient of '{origin['name']}' of {label(origin['module'])}"
        hint = (
            "its forward was finite, so look at that layer's backward (sqrt or pow at 0, "
            "division by a tiny value); "
        )
    same = [it for it in rest if it["step"] == origin["step"] and it["module"]]
    later = [it for it in rest if it["step"] > origin["step"] and it["module"]]
    on_rank = f" on rank {origin['rank']}" if origin.get("rank") is not None else ""
    message = f"First non-finite value (NaN/Inf) at step {origin['step']}{on_rank}, {where}."
    if held:
        message += f" {held}"
    spread = _spread(same, origin)
    if spread:
        message += f" It spread within that step to {spread}."
    spread_later = _spread(later, origin, exclude=same)
    if spread_later:
        message += f" From later steps: {spread_later}."
    losses = [it for it in rest if it["signal"] == "loss"]
    if losses and origin["signal"] != "loss":
        message += f" The logged {losses[0]['name']} is non-finite from step {losses[0]['step']}."
    return [
        Finding(
            check=CHECK,
            severity="error",
            layer=origin["module"],
            step=origin["step"],
            cause="numerics",
            advice=hint
            + (
                tail
                or "a lower learning rate, gradient clipping, or "
                f"torch.autograd.set_detect_anomaly(True) around step {origin['step']}"
            ),
            summary=f"the first NaN/Inf appeared at step {origin['step']} {where}",
            message=message,
            evidence={
                "origin": {
                    k: origin[k]
                    for k in ("name", "signal", "step", "rank")
                    if origin.get(k) is not None
                },
                "downstream": [
                    {k: it[k] for k in ("module", "name", "signal", "step")} for it in rest[:200]
                ],
                "downstream_count": len(rest),
            },
        )
    ]


def _spread(
    items: list[dict[str, Any]], origin: dict[str, Any], exclude: list[dict[str, Any]] = ()
) -> str:
    """Where a non-finite value reached: later modules' outputs, then gradients, named apart.

    Forward, it reaches the outputs of the modules after its origin; backward, the
    gradients of every module (including those before it in forward order).
    """
    seen = {(it["signal"] == "activation", it["module"]) for it in exclude}
    outputs = list(
        dict.fromkeys(
            it["module"]
            for it in items
            if it["signal"] == "activation"
            and (it["module"] != origin["module"] or origin["signal"] != "activation")
            and (True, it["module"]) not in seen
        )
    )
    grads = list(
        dict.fromkeys(
            it["name"]
            for it in items
            if it["signal"] not in ("activation", "loss") and (False, it["module"]) not in seen
        )
    )
    parts = []
    if outputs:
        parts.append(f"the outputs of {names(outputs)}")
    if grads:
        parts.append(f"the gradients of {names(grads)}")
    return " and ".join(parts)
