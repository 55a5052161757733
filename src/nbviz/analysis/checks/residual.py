"""``residual_growth``: a residual stream whose scale grows block after block.

Read from the outputs of a model's repeated blocks: a stack of modules named
``<stack>.0``, ``<stack>.1``, ... (at least :data:`~nbviz.stacks.MIN_BLOCKS`,
of one type: :func:`nbviz.stacks.stacks`) whose outputs share one
``(tokens, features)`` shape and whose activations were recorded (the probe
watches a stack's blocks by default, activations only: see
:mod:`nbviz.probes.select`). A block's output is the residual
stream after it; its scale is the root mean square ``norm / sqrt(count)``,
summarised per block by the median of the last :data:`WINDOW` captures and
taken in forward order.

In a pre-norm transformer each block adds its branches to the stream, so the
stream grows by accumulation: with branches of similar size, as the square
root of the number of blocks (block ``L``'s rms over block 1's at most about
``sqrt(L)``; a healthy 6-block GPT-style model: 4.4x after 200 steps). Growth
that compounds (each block scaling the stream, or later blocks writing ever
larger outputs to be heard over it) makes the deep blocks' contributions a
vanishing fraction of the stream, so they act close to the identity
(the "curse of depth" of pre-norm models). A finding needs

- growth at most steps of depth (:func:`~nbviz.analysis.checks.depth.trend`'s
  consistency, 0.6: not one block's jump), and
- a total that exceeds the square-root accumulation by :data:`MIN_EXCESS`
  (4x) and reaches :data:`MIN_TOTAL` (8x).

It is a ``warning`` pointing at ``architecture``: the residual branches' scale
by depth is set by the initialisation and the block's design.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbviz.analysis.checks.depth import activation_rms, trend
from nbviz.analysis.checks.finding import Finding, fmt
from nbviz.analysis.checks.model import ModelLayout, layout
from nbviz.analysis.checks.robust import nanmedian, onset
from nbviz.stacks import stacks

CHECK = "residual_growth"
WINDOW = 5
MIN_EXCESS = 4.0
MIN_TOTAL = 8.0
CONSISTENT = 0.6


def block_stacks(lay: ModelLayout, recorded: set[str]) -> list[list[str]]:
    """Each stack of repeated blocks with recorded activations, blocks in forward order.

    A stack (:func:`nbviz.stacks.stacks`) whose recorded output shapes (where
    known) are one ``(tokens, features)`` shape.
    """
    found = []
    for names in stacks((n, lay.type_of(n)) for n in lay.forward_order if n in recorded):
        shapes = {lay.shapes.get(n) for n in names} - {None}
        if len(shapes) > 1:
            continue
        if shapes and len(next(iter(shapes))) != 2:
            continue  # not (tokens, features) per sample
        found.append(sorted(names, key=lay.depth))
    return found


def check(run: Any) -> list[Finding]:
    """A warning per stack of blocks whose output scale compounds with depth."""
    lay = layout(run)
    if lay is None or "activations" not in lay.signals:
        return []
    recorded = set(run.recorded_layers("activation"))
    findings = []
    for blocks in block_stacks(lay, recorded):
        found = _stack_finding(run, blocks)
        if found is not None:
            findings.append(found)
    return findings


def _stack_finding(run: Any, blocks: list[str]) -> Finding | None:
    table = activation_rms(run, blocks).dropna(how="all")
    if len(table) == 0:
        return None
    window = min(WINDOW, len(table))
    profile = nanmedian(table.to_numpy()[-window:], axis=0)
    shape = trend(profile)
    if shape is None or shape.total < 1:
        return None
    keep = np.isfinite(profile) & (profile > 0)  # the blocks trend() read
    kept = [b for b, k in zip(blocks, keep) if k]
    rms = profile[keep]
    n = len(kept)
    excess = shape.total / math.sqrt(n)  # over the square-root accumulation
    if shape.consistency < CONSISTENT or excess < MIN_EXCESS or shape.total < MIN_TOTAL:
        return None
    rows = table.to_numpy()
    totals = np.array([_total(row) for row in rows])
    began = onset(table.index.to_numpy(), np.nan_to_num(totals) >= MIN_TOTAL, window)
    stack = blocks[0].rsplit(".", 1)[0]
    since = began.since()
    if not began.from_start and np.isfinite(totals[0]):
        since += f" (x{fmt(float(totals[0]))} at the first capture)"
    message = (
        f"The residual stream grows block after block in '{stack}' {since}: the rms of the "
        f"block outputs rises {fmt(shape.total)}x from '{kept[0]}' ({fmt(float(rms[0]))}) "
        f"to '{kept[-1]}' ({fmt(float(rms[-1]))}), {fmt(shape.per_layer)}x per block; "
        f"adding {n} similar branches grows it about {fmt(math.sqrt(n))}x. Deep blocks then "
        "add a vanishing fraction to the stream and act close to the identity."
    )
    return Finding(
        check=CHECK,
        severity="warning",
        layer=blocks[-1],  # a module of the model; the stack is in the evidence
        step=began.step,
        cause="architecture",
        message=message,
        advice=(
            "scale the residual branches' output projections by 1/sqrt(2 x blocks) at "
            "initialisation (GPT-2), scale each block's normalisation output by "
            "1/sqrt(depth), or look for a gain on the stream inside the blocks"
        ),
        summary=f"the residual stream of '{stack}' grows {fmt(shape.total)}x over {n} blocks",
        evidence={
            "stack": stack,
            "blocks": blocks,
            "blocks_read": kept,
            "rms": [float(v) if np.isfinite(v) else None for v in profile],
            "total": shape.total,
            "per_block": shape.per_layer,
            "sqrt_growth": math.sqrt(n),
            "excess": excess,
            "consistency": shape.consistency,
            "total_at_first_capture": float(totals[0]) if np.isfinite(totals[0]) else None,
            "from_first_capture": began.from_start,
            "window_captures": window,
            "threshold_excess": MIN_EXCESS,
            "threshold_total": MIN_TOTAL,
        },
    )


def _total(row: np.ndarray) -> float:
    """A capture's growth from the first block to the last (NaN where unknown)."""
    shape = trend(row)
    return shape.total if shape is not None else float("nan")
