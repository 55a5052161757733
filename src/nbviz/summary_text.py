"""A readable plain-text summary of a run, for ``nbviz info`` and a terminal."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import numpy as np

from nbviz.run import RunView
from nbviz.store.predictions import NONFINITE_PRED

if TYPE_CHECKING:
    import pandas as pd


def _fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    if abs(value) >= 1e4 or (value != 0 and abs(value) < 1e-3):
        return f"{value:.3e}"
    return f"{value:.4g}"


def _nonfinite(steps: np.ndarray, values: np.ndarray) -> str:
    """ ", 12 NaN/Inf from step 8" for a series holding some; "" for a finite one."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return ""
    return f", {int(bad.sum()):,} NaN/Inf from step {int(steps[np.argmax(bad)])}"


def run_summary(run: RunView, findings: bool | pd.DataFrame = True) -> str:
    """What the run holds: model, config, scalars, probe captures, evaluations, findings.

    ``findings``: True to diagnose the run here, a frame from ``run.diagnose()`` to
    print (a caller that diagnosed already), or False for none.
    """
    lines = [f"nbviz run: {run.name}  ({run.path})"]
    created = run.meta("created")
    if created:
        when = datetime.fromtimestamp(float(created), tz=timezone.utc)
        lines.append(f"created: {when:%Y-%m-%d %H:%M:%S} UTC")
    config = run.config
    if config:
        lines.append("config: " + ", ".join(f"{k}={v}" for k, v in config.items()))
    model = run.meta("model") or {}
    if model:
        watched = sum(1 for m in model.get("modules", []) if m.get("watched"))
        lines.append(
            f"model: {model.get('type', '?')}, {model.get('params', 0):,} parameters "
            f"({model.get('trainable', 0):,} trainable), {watched} modules watched"
        )
    probe = run.meta("probe") or {}
    for note in probe.get("notes", []):
        lines.append(f"  note: {note}")
    scalars = run.scalars()
    if len(scalars):
        lines.append("scalars (last / min / max of the finite values over steps):")
        for name, group in scalars.groupby("name", sort=True):
            v = group["value"].to_numpy(dtype=np.float64, na_value=np.nan)
            finite = v[np.isfinite(v)]
            lo, hi = (finite.min(), finite.max()) if len(finite) else (math.nan, math.nan)
            lines.append(
                f"  {name:<20} {len(group):>7} steps  last {_fmt(v[-1])}  "
                f"min {_fmt(lo)}  max {_fmt(hi)}  (steps {group['step'].min()}.."
                f"{group['step'].max()}){_nonfinite(group['step'].to_numpy(), v)}"
            )
    else:
        lines.append("scalars: none logged")
    for signal in ("activation", "gradient", "weight"):
        steps = run.steps(signal)
        if len(steps):
            lines.append(
                f"{signal} captures: {len(steps)} (steps {steps[0]}..{steps[-1]}), "
                f"{len(run.recorded_layers(signal))} layers"
            )
    for split in run.splits():
        steps = run.prediction_steps(split)
        last = run.predictions(split=split)
        if run.predicts_classes(split):
            has_class = last[last["pred"] != NONFINITE_PRED]
            acc = (
                float((has_class["label"] == has_class["pred"]).mean())
                if len(has_class)
                else float("nan")
            )
            n_bad = len(last) - len(has_class)
            how = f"accuracy {_fmt(acc)}"
            if n_bad:
                how += f" over the {len(has_class)} with finite logits ({n_bad} NaN/inf)"
        else:  # a model evaluated by its loss alone
            how = f"mean loss {_fmt(float(last['loss'].mean()) if len(last) else float('nan'))}"
        lines.append(
            f"evaluations ({split}): {len(steps)}, last at step {steps[-1]} on {len(last)} "
            f"samples, {how}"
        )
    if findings is not False:
        from nbviz.analysis.diagnose import format_findings

        lines.append("")
        lines.append(format_findings(run.diagnose() if findings is True else findings))
    return "\n".join(lines)
