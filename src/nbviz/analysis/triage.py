"""Triage: the verdict on a run, one row per cause, most likely first.

:func:`triage` groups the findings of :func:`nbviz.analysis.diagnose.diagnose`
by their root cause (see :mod:`nbviz.analysis.causes`) and scores each cause:

- a root and the findings that follow from it form a group; its weight comes
  from its worst severity (error 0.9, warning 0.7) and grows with each warning
  or error folded under it (the cause explains more of what went wrong):
  ``1 - (1 - base) * 0.8 ** consequences``;
- a cause's score combines its groups as independent evidence,
  ``1 - prod(1 - group)``: in 0..1, higher for more likely.

Groups whose findings are all ``info`` point at nothing to fix. A run with no
warning or error anywhere gets exactly one row, ``healthy``, listing the info
findings it has.

Columns: ``cause`` (``architecture`` | ``data`` | ``learning_rate`` |
``optimizer`` | ``numerics`` | ``healthy``), ``score``, ``summary`` (one plain
sentence), ``evidence`` (a list of short lines: each finding behind it, root
first, with its layer and step), ``advice`` (what to try) and ``findings``
(their ids in ``run.diagnose()``, roots first).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.checks.finding import fmt, pct
from nbviz.analysis.checks.losses import tail_level, train_loss

__all__ = ["COLUMNS", "triage", "verdict_text"]

COLUMNS = ("cause", "score", "summary", "evidence", "advice", "findings")
SEVERITY_WEIGHT = {"error": 0.9, "warning": 0.7, "info": 0.0}
#: How much each serious consequence adds to its root's weight.
CONSEQUENCE_FACTOR = 0.8
#: The opening of a verdict sentence per cause.
LEAD = {
    "learning_rate": "The learning rate",
    "architecture": "The architecture or its initialisation",
    "data": "The data",
    "optimizer": "The optimizer's setup",
    "numerics": "A numerical failure",
}


def _line(row: dict[str, Any]) -> str:
    where = []
    if row["layer"]:
        where.append(f"'{row['layer']}'")
    if row["step"] is not None and row["step"] == row["step"]:
        where.append(f"step {int(row['step'])}")
    place = f" ({', '.join(where)})" if where else ""
    first = str(row["message"]).split(". ")[0].rstrip(".")
    return f"{row['check'].replace('_', ' ')}{place}: {first}"


def _group_weight(rows: list[dict[str, Any]]) -> float:
    worst = max(SEVERITY_WEIGHT[r["severity"]] for r in rows)
    serious = sum(1 for r in rows[1:] if r["severity"] in ("error", "warning"))
    return 1 - (1 - worst) * CONSEQUENCE_FACTOR**serious


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return (text[:1].upper() + text[1:] + ".") if text else ""


def _healthy(run: Any, frame: pd.DataFrame) -> dict[str, Any]:
    series = train_loss(run) if run is not None else None
    how = ""
    if series is not None and len(series[2]) >= 2:
        name, _, values = series
        start, end = float(values[0]), tail_level(values)
        if start > 0 and end < start:
            how = f": {name} fell from {fmt(start)} to {fmt(end)} (-{pct((start - end) / start)})"
    infos = frame[frame["severity"] == "info"] if len(frame) else frame
    summary = f"No problem found{how}, and no check found anything to act on"
    if len(infos):
        summary += f" ({len(infos)} finding{'s' if len(infos) != 1 else ''} worth knowing)"
    return {
        "cause": "healthy",
        "score": float(max(0.5, 1 - 0.05 * len(infos))),
        "summary": _sentence(summary),
        "evidence": [_line(r) for r in infos.to_dict("records")],
        "advice": "",
        "findings": list(infos["id"]) if len(infos) else [],
    }


def triage(run: Any, findings: pd.DataFrame | None = None) -> pd.DataFrame:
    """The verdict on ``run``: one row per cause, most likely first (see the module docstring).

    ``findings``: a frame from ``diagnose(run)`` to reuse (default: diagnosed now).
    """
    if findings is None:
        from nbviz.analysis.diagnose import diagnose

        findings = diagnose(run)
    rows = findings.to_dict("records")
    by_root: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if not r["root"]:
            by_root.setdefault(r["id"], []).insert(0, r)
    for r in rows:
        if r["root"] and r["root"] in by_root:
            by_root[r["root"]].append(r)
    causes: dict[str, list[tuple[float, list[dict[str, Any]]]]] = {}
    for group in by_root.values():
        if all(r["severity"] == "info" for r in group):
            continue
        causes.setdefault(group[0]["cause"], []).append((_group_weight(group), group))
    if not causes:
        out = [_healthy(run, findings)]
    else:
        out = []
        for cause, groups in causes.items():
            groups.sort(key=lambda g: (-g[0], _step_key(g[1][0])))
            score = 1 - float(np.prod([1 - w for w, _ in groups]))
            top = groups[0][1]
            root = top[0]
            followers = [r for r in top[1:] if r["severity"] != "info"]
            summary = root["summary"] or str(root["message"]).split(". ")[0]
            lead = f"{LEAD.get(cause, cause)}: {summary}"
            if followers:
                kinds = list(dict.fromkeys(r["check"].replace("_", " ") for r in followers))
                lead += (
                    f", and {len(followers)} other finding{'s' if len(followers) != 1 else ''} "
                    f"follow{'s' if len(followers) == 1 else ''} from it ({', '.join(kinds)})"
                )
            if len(groups) > 1:
                lead += f"; {len(groups) - 1} more root finding{'s' if len(groups) > 2 else ''}"
            advice = list(dict.fromkeys(g[1][0]["advice"] for g in groups if g[1][0]["advice"]))
            out.append(
                {
                    "cause": cause,
                    "score": score,
                    "summary": _sentence(lead),
                    "evidence": [_line(r) for _, g in groups for r in g],
                    "advice": "; ".join(_sentence(a).rstrip(".") for a in advice) + "."
                    if advice
                    else "",
                    "findings": [r["id"] for _, g in groups for r in g],
                    "_first": min(_step_key(g[0]) for _, g in groups),
                }
            )
        out.sort(key=lambda r: (-r["score"], r["_first"]))
        for r in out:
            del r["_first"]
    return pd.DataFrame(out, columns=list(COLUMNS))


def _step_key(row: dict[str, Any]) -> float:
    step = row.get("step")
    return float(step) if step is not None and step == step else float("inf")


def verdict_text(verdict: pd.DataFrame) -> str:
    """The verdict as plain-text lines, most likely cause first (``nbviz info`` prints it)."""
    if len(verdict) == 0:
        return "verdict: nothing to say"
    lines = ["verdict:"]
    for r in verdict.to_dict("records"):
        lines.append(f"  {r['cause'].upper().replace('_', ' ')} ({r['score']:.2f})  {r['summary']}")
        if r["advice"]:
            lines.append(f"      Try: {r['advice']}")
        for e in r["evidence"][:8]:
            lines.append(f"      - {e}")
        if len(r["evidence"]) > 8:
            lines.append(f"      - ... and {len(r['evidence']) - 8} more (run.diagnose())")
    return "\n".join(lines)
