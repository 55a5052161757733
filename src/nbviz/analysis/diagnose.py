"""Diagnosis: say what is broken in a run, where, since when, and what caused what.

:func:`diagnose` runs every check in :data:`CHECKS` on a run (anything with the
run read API: ``nbviz.open_run`` or a live ``nbviz.Run``) and returns one row
per finding, worst first. Each check lives in :mod:`nbviz.analysis.checks` with
its thresholds and the reasoning behind them; a check with nothing to read (no
probe, no validation loss, no predictions) finds nothing. Then
:mod:`nbviz.analysis.causes` links the findings: which one follows from which.

Columns: ``check``, ``layer`` (a module's qualified name, ``""`` for the run),
``step`` (since when: an int, or None where a finding has no time),
``severity`` (``error`` | ``warning`` | ``info``), ``message`` (what, where,
since when; for a root cause what to try, for a consequence what it follows
from), ``evidence`` (a JSON-serialisable dict of the numbers behind it),
``id`` (``check:layer@step``, unique in the frame), ``cause`` (one of
``architecture``, ``data``, ``learning_rate``, ``optimizer``, ``numerics``: its
root's), ``root`` (the id of the root cause it follows from, ``""`` for a root),
``summary`` (a short clause for the verdict) and ``advice`` (what to try; empty
for a consequence, whose fix is its root's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from nbviz.analysis.causes import Context, link
from nbviz.analysis.checks import (
    attention,
    class_balance,
    class_errors,
    dead_heads,
    dead_units,
    gradients,
    init_scale,
    input_scale,
    learning_rate,
    loss_spikes,
    massive,
    mislabeled,
    no_progress,
    nonfinite,
    overfitting,
    rank_divergence,
    residual,
    saturation,
    stuck_weights,
)
from nbviz.analysis.checks.finding import CAUSES, SEVERITIES, SEVERITY_RANK, Finding
from nbviz.analysis.checks.losses import outlines_shared
from nbviz.analysis.checks.model import layout

__all__ = ["CAUSES", "CHECKS", "COLUMNS", "Finding", "diagnose", "format_findings", "to_frame"]

COLUMNS = (
    "check",
    "layer",
    "step",
    "severity",
    "message",
    "evidence",
    "id",
    "cause",
    "root",
    "summary",
    "advice",
)

#: Every check by name, in the order findings of equal severity are listed.
CHECKS: dict[str, Callable[[Any], list[Finding]]] = {
    "nonfinite": nonfinite.check,
    "learning_rate_too_high": learning_rate.check_too_high,
    "input_scale": input_scale.check,
    "bad_init": init_scale.check,
    "dead_units": dead_units.check,
    "saturated_units": saturation.check,
    "attention_collapse": attention.check,
    "dead_heads": dead_heads.check,
    "massive_activations": massive.check,
    "residual_growth": residual.check,
    "vanishing_gradients": gradients.check_vanishing,
    "exploding_gradients": gradients.check_exploding,
    "learning_rate_too_low": learning_rate.check_too_low,
    "stuck_weights": stuck_weights.check,
    "not_learning": no_progress.check,
    "loss_spikes": loss_spikes.check,
    "mislabeled_samples": mislabeled.check,
    "class_imbalance": class_balance.check_imbalance,
    "unlearned_classes": class_balance.check_unlearned,
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
    with outlines_shared():  # the checks read each loss once between them
        for name in chosen:
            findings.extend(CHECKS[name](run))
    frame = to_frame(findings, context(run))
    frame.attrs["checks"] = chosen
    return frame


def context(run: Any) -> Context:
    """What linking the findings needs to know about the run: its layout and captures."""
    lay = layout(run)
    first = None
    if lay is not None:
        steps = run.steps("weight") if "weights" in lay.signals else run.steps("gradient")
        first = int(steps[0]) if len(steps) else None
    return Context(layout=lay, every=int(lay.every or 1) if lay else 1, first_capture=first)


def finding_id(f: Finding) -> str:
    """``check``, ``check:layer``, ``check@step`` or ``check:layer@step``."""
    out = f.check
    if f.layer:
        out += f":{f.layer}"
    if f.step is not None:
        out += f"@{f.step}"
    return out


def to_frame(findings: Sequence[Finding], ctx: Context | None = None) -> pd.DataFrame:
    """Findings as the diagnosis frame, linked to their causes, worst first.

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
    ids: list[str] = []
    taken: dict[str, int] = {}
    for f in ranked:
        base = finding_id(f)
        taken[base] = taken.get(base, 0) + 1
        ids.append(base if taken[base] == 1 else f"{base}#{taken[base]}")
    links = link(ranked, ctx or Context(layout=None, every=1, first_capture=None))
    rows = []
    for i, f in enumerate(ranked):
        parent, root = links.parent[i], links.root[i]
        if root is None:
            message = f.message + (f" Try: {f.advice}." if f.advice else "")
            cause, advice = f.cause, f.advice
        else:
            p = ranked[parent]
            where = f" at '{p.layer}'" if p.layer else ""
            when = f" (step {p.step})" if p.step is not None else ""
            message = (
                f"{f.message} This follows from {p.check.replace('_', ' ')}{where}{when} "
                f"[{ids[parent]}]."
            )
            cause, advice = ranked[root].cause, ""
            if parent != root:
                f = replace(f, evidence={**f.evidence, "follows_from": ids[parent]})
        rows.append(
            {
                "check": f.check,
                "layer": f.layer,
                "step": f.step,
                "severity": f.severity,
                "message": message,
                "evidence": f.evidence,
                "id": ids[i],
                "cause": cause,
                "root": "" if root is None else ids[root],
                "summary": f.summary,
                "advice": advice,
            }
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    # Python ints, None where a finding has no step (object dtype keeps both exact)
    frame["step"] = pd.Series([r["step"] for r in rows], dtype=object)
    return frame


def format_findings(findings: pd.DataFrame) -> str:
    """The findings as plain-text lines, worst first (what ``nbviz info RUN`` prints).

    A finding that follows from another is listed under its root, indented.
    """
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
    rows = ordered.to_dict("records")
    linked = "root" in ordered.columns and "id" in ordered.columns
    under: dict[str, list[dict[str, Any]]] = {}
    if linked:
        ids = {r["id"] for r in rows}
        for r in rows:
            if r["root"] and r["root"] in ids:
                under.setdefault(r["root"], []).append(r)
        rows = [r for r in rows if not (r["root"] and r["root"] in ids)]
        # a root goes where its worst consequence would
        rows.sort(key=lambda r: min([r["_rank"]] + [f["_rank"] for f in under.get(r["id"], [])]))
    for row in rows:
        lines.extend(_finding_lines(row, ""))
        for follower in under.get(row.get("id", ""), []):
            lines.extend(_finding_lines(follower, "    ↳ "))
    return "\n".join(lines)


def _finding_lines(row: dict[str, Any], indent: str) -> list[str]:
    where = []
    if row.get("layer"):
        where.append(f"layer {row['layer']}")
    step = row.get("step")
    if step is not None and not pd.isna(step):
        where.append(f"step {int(step)}")
    place = f" [{', '.join(where)}]" if where else ""
    pad = " " * len(indent)
    return [
        f"  {indent}{row['severity'].upper():<7} {row['check']}{place}",
        f"          {pad}{row['message']}",
    ]
