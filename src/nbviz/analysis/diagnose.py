"""Diagnosis: say what is broken in a run, where, and since when.

:func:`diagnose` runs every check in :data:`CHECKS` on a run (anything with the
run read API: ``nbviz.open_run`` or a live ``nbviz.Run``) and returns one row
per finding, worst first. Each check lives in :mod:`nbviz.analysis.checks` with
its thresholds and the reasoning behind them; a check with nothing to read (no
probe, no validation loss, no predictions) finds nothing.

Columns: ``check``, ``layer`` (a module's qualified name, ``""`` for the run),
``step`` (since when: an int, or None where a finding has no time),
``severity`` (``error`` | ``warning`` | ``info``), ``message`` (what, where,
since when, what to try) and ``evidence`` (a JSON-serialisable dict of the
numbers behind it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from nbviz.analysis.checks import (
    class_errors,
    dead_units,
    gradients,
    loss_spikes,
    nonfinite,
    overfitting,
    rank_divergence,
    stuck_weights,
)
from nbviz.analysis.checks.finding import SEVERITIES, SEVERITY_RANK, Finding

__all__ = ["CHECKS", "COLUMNS", "Finding", "diagnose", "format_findings", "to_frame"]

COLUMNS = ("check", "layer", "step", "severity", "message", "evidence")

#: Every check by name, in the order findings of equal severity are listed.
CHECKS: dict[str, Callable[[Any], list[Finding]]] = {
    "nonfinite": nonfinite.check,
    "dead_units": dead_units.check,
    "vanishing_gradients": gradients.check_vanishing,
    "exploding_gradients": gradients.check_exploding,
    "stuck_weights": stuck_weights.check,
    "loss_spikes": loss_spikes.check,
    "overfitting": overfitting.check,
    "class_error_imbalance": class_errors.check,
    "rank_divergence": rank_divergence.check,
}


def diagnose(run: Any, checks: Sequence[str] | None = None) -> pd.DataFrame:
    """Findings about ``run``, worst first (see the module docstring for the columns).

    ``checks``: names from :data:`CHECKS` to run (default: all).
    """
    if checks is None:
        chosen = list(CHECKS)
    else:
        chosen = [checks] if isinstance(checks, str) else list(checks)
        unknown = [c for c in chosen if c not in CHECKS]
        if unknown:
            raise ValueError(
                f"diagnose: unknown check(s) {unknown}; choose from {', '.join(CHECKS)}"
            )
    findings: list[Finding] = []
    for name in chosen:
        findings.extend(CHECKS[name](run))
    frame = to_frame(findings)
    frame.attrs["checks"] = chosen
    return frame


def to_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """Findings as the diagnosis frame, worst first.

    Order: severity, then the check's place in :data:`CHECKS`, then step
    (findings without a step last) and layer.
    """
    order = {name: i for i, name in enumerate(CHECKS)}
    ranked = sorted(
        findings,
        key=lambda f: (
            SEVERITY_RANK[f.severity],
            order.get(f.check, len(order)),
            f.step is None,
            f.step if f.step is not None else 0,
            f.layer,
        ),
    )
    frame = pd.DataFrame(
        {
            "check": [f.check for f in ranked],
            "layer": [f.layer for f in ranked],
            # Python ints, None where a finding has no step (object dtype keeps both exact)
            "step": pd.Series([f.step for f in ranked], dtype=object),
            "severity": [f.severity for f in ranked],
            "message": [f.message for f in ranked],
            "evidence": [f.evidence for f in ranked],
        },
        columns=list(COLUMNS),
    )
    return frame


def format_findings(findings: pd.DataFrame) -> str:
    """The findings as plain-text lines, worst first (what ``nbviz info RUN`` prints)."""
    missing = [c for c in ("check", "severity", "message") if c not in findings.columns]
    if missing:
        raise ValueError(
            f"format_findings: expected the frame run.diagnose() returns; it lacks {missing}"
        )
    if len(findings) == 0:
        return "findings: none (no check found a problem)"
    rank = findings["severity"].map(SEVERITY_RANK).fillna(len(SEVERITIES))
    ordered = findings.assign(_rank=rank).sort_values("_rank", kind="stable")
    counts = ordered["severity"].value_counts()
    parts = []
    for severity in SEVERITIES:
        n = int(counts.get(severity, 0))
        if n:
            plural = "s" if n != 1 and severity != "info" else ""
            parts.append(f"{n} {severity}{plural}")
    lines = [f"findings ({', '.join(parts)}):"]
    for row in ordered.to_dict("records"):
        where = []
        if row.get("layer"):
            where.append(f"layer {row['layer']}")
        step = row.get("step")
        if step is not None and not pd.isna(step):
            where.append(f"step {int(step)}")
        place = f" [{', '.join(where)}]" if where else ""
        lines.append(f"  {row['severity'].upper():<7} {row['check']}{place}")
        lines.append(f"          {row['message']}")
    return "\n".join(lines)
