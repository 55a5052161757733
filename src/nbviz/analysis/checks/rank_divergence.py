"""``rank_divergence``: replicas of a DDP model that no longer hold the same tensors.

Under DistributedDataParallel every rank starts from rank 0's parameters and
applies the same averaged gradients, so the parameters stay bitwise equal on
every rank. The probe compares a checksum of every parameter and floating-point
buffer (its sum and sum of squares) with rank 0's at each capture step and
records an event of kind ``rank_divergence`` for each tensor that differs: the
first step, the latest, the ranks that differ and by how much (run meta
``distributed`` says what was checked). What makes a parameter diverge is a
bug: a change made on one rank only (a rank-dependent seed or edit after
wrapping), an optimizer that steps on a gradient DDP did not synchronise (the
last micro-batch left inside ``no_sync``), or parameters kept out of DDP.

Parameters that differ are an ``error``: the ranks train different models.
Buffers (BatchNorm running statistics) differ after every forward unless
SyncBatchNorm computes them over the global batch; with DDP's default
``broadcast_buffers=True`` rank 0's are copied to every rank at the next
forward, so that is ``info``; without it the ranks keep different statistics
for good, a ``warning``. A difference at the level of rounding (ranks on
different hardware summing in another order) is ``info``.
"""

from __future__ import annotations

import math
from typing import Any

from nbviz.analysis.checks.finding import Finding, fmt, names
from nbviz.analysis.checks.model import module_of

CHECK = "rank_divergence"
#: A checksum gap below this fraction of the tensor's scale is rounding, not divergence.
ROUNDING = 1e-6


def _scale(detail: dict[str, Any]) -> float:
    """The size a rounding error is measured against: |sum| can reach sqrt(n * sumsq)."""
    n = float(detail.get("numel") or 1)
    sumsq = abs(float(detail.get("rank0_sumsq") or 0.0))
    return math.sqrt(n * sumsq) + sumsq


def check(run: Any) -> list[Finding]:
    """One finding per tensor whose checksum differed from rank 0's."""
    info = run.meta("distributed")
    if not info:
        return []
    events = run.events(CHECK)
    if not len(events):
        return []
    ddp = info.get("ddp") or {}
    broadcast = bool(ddp.get("broadcast_buffers", False))
    findings = []
    for row in events.itertuples(index=False):
        detail = row.detail or {}
        module = module_of(row.layer)
        ranks = detail.get("ranks")
        who = (
            f"rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in ranks)}"
            if ranks
            else f"{detail.get('ranks_differing', '?')} rank(s)"
        )
        gap = float(detail.get("abs_diff") or 0.0)
        rel = gap / _scale(detail) if _scale(detail) > 0 else math.inf
        last = detail.get("last_step")
        since = f"from step {row.step}" + (
            f" to step {last}" if last not in (None, row.step) else ""
        )
        evidence = {"tensor": row.layer, "kind": row.signal, "relative_gap": rel, **detail}
        advice = ""
        if rel < ROUNDING:
            severity, cause = "info", "numerics"
            message = (
                f"'{row.layer}' differs across ranks only at rounding level ({who} vs rank 0, "
                f"relative gap {fmt(rel)}) {since}: ranks on different hardware sum in another "
                "order; nothing to fix unless it grows."
            )
        elif row.signal == "buffer":
            severity, cause = ("info" if broadcast else "warning"), "architecture"
            tail = (
                "DDP copies rank 0's buffers to every rank at the next forward "
                "(broadcast_buffers=True), so the other ranks' are discarded"
                if broadcast
                else "nothing copies them back (not broadcast), so the ranks evaluate "
                "with different statistics"
            )
            message = (
                f"Buffer '{row.layer}' differs on {who} from rank 0 {since}: each rank "
                f"updates it from its own part of the batch; {tail}."
            )
            advice = (
                "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) before wrapping in "
                "DDP, to compute it over the global batch"
            )
        else:
            severity, cause = "error", "optimizer"
            message = (
                f"Parameter '{row.layer}' differs on {who} from rank 0 {since} (checksum gap "
                f"{fmt(gap)}, relative {fmt(rel)}): the replicas no longer train the same "
                "model."
            )
            advice = (
                "look for a change made on one rank only (a rank-dependent seed or edit after "
                "wrapping in DDP), an optimizer.step() after a backward left inside no_sync(), "
                "or parameters DDP does not synchronise; DDP broadcasts rank 0's parameters "
                "only when it is constructed"
            )
        findings.append(
            Finding(
                check=CHECK,
                severity=severity,
                layer=module,
                step=int(row.step) if row.step is not None else None,
                cause=cause,
                message=message,
                advice=advice,
                summary=f"'{row.layer}' differs across ranks {since}",
                evidence=evidence,
            )
        )
    params = [f for f in findings if f.severity == "error"]
    if len(params) > 1:
        # one parameter drags the others along: say which came first
        first = min(params, key=lambda f: (f.step, f.layer))
        others = [f.evidence["tensor"] for f in params if f is not first]
        findings[findings.index(first)] = Finding(
            check=CHECK,
            severity=first.severity,
            layer=first.layer,
            step=first.step,
            cause=first.cause,
            message=first.message + f" Also diverged: {names(others)}.",
            advice=first.advice,
            summary=first.summary,
            evidence=first.evidence,
        )
    return findings
