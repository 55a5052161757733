"""``dead_heads``: attention heads whose output is ~0, capture after capture.

Read from the per-head output statistics of the training forward (the
``<module>/heads`` pseudo-layers, on by default wherever the module structure shows
heads). A head is dead at a capture by the rule every view applies
(:func:`nbviz.analysis.dead_heads.dead_heads`: its output RMS below 1e-3 of its
layer's largest head and below an absolute floor, or 0); the finding names the heads
dead at each of the last :data:`WINDOW` captures (at least :data:`MIN_CAPTURES`). The
rule is exact, not a sample's noise: a live head's output is a weighted mean of its values over the
tokens, which is ~0 only when its value projection (or its input) is.

A dead head adds nothing to the residual stream, and where what reads it (the output
projection's columns for it) is zero too, no gradient reaches it: it never recovers.
Dead from the first capture, it points at how the weights were made or loaded
(``architecture``: a head pruned, rows left empty by a checkpoint); killed later,
at steps too large for it (``learning_rate``): heads of one layer dead from the start
and heads killed later are two findings, each with its cause and onset. A layer whose
heads are all dead is an ``error``: its attention passes nothing on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding
from nbviz.analysis.checks.model import unit_values
from nbviz.analysis.checks.robust import trailing_run_start
from nbviz.analysis.dead_heads import DEAD, FLOOR, dead_heads

CHECK = "dead_heads"
#: Captures a head must be dead at, each, to be named (fewer on a shorter run).
WINDOW = 5
#: Fewer captures than this say nothing: one capture is one batch.
MIN_CAPTURES = 2
#: What to try, for heads dead from the first capture and for heads killed later.
ADVICE = (
    "check how the attention's value and output projections are made or loaded: rows of "
    "the value projection (or columns of the output projection) that are zero for a head "
    "leave it dead, and with both zero it gets no gradient and never recovers",
    "a lower learning rate or a longer warm-up, less weight decay on the value and output "
    "projections (a head whose values shrank to zero passes nothing on)",
)


def _head_layers(run: Any) -> dict[str, dict[str, Any]]:
    """The ``<module>/heads`` pseudo-layers the run recorded, with what the meta says."""
    meta = run.meta("heads") or {}
    layers = meta.get("layers") if isinstance(meta, dict) else None
    return layers if isinstance(layers, dict) else {}


def check(run: Any) -> list[Finding]:
    """A finding per attention module with heads dead at each of its recent captures."""
    layers = _head_layers(run)
    if not layers:
        return []
    recorded = set(run.recorded_layers("head_rms", table="unit_stats"))
    findings = []
    for name, info in layers.items():
        if name not in recorded:
            continue
        steps, rms = unit_values(run, name, "head_rms")
        if len(steps) < MIN_CAPTURES or rms.shape[1] == 0:
            continue
        window = min(WINDOW, len(steps))
        dead = dead_heads(rms)
        dead_now = dead[-window:].all(axis=0)
        if not dead_now.any():
            continue
        heads = [int(h) for h in np.flatnonzero(dead_now)]
        starts = {h: trailing_run_start(dead[:, h]) or 0 for h in heads}
        module = str(info.get("module", name.removesuffix("/heads")))
        everyone = len(heads) == rms.shape[1]
        # dead from the first capture (how the weights were made) and killed later (the
        # steps) are two findings, each with its own cause and onset
        for later in (False, True):
            group = [h for h in heads if (starts[h] > 0) == later]
            if not group:
                continue
            onset = int(steps[max(starts[h] for h in group)])
            findings.append(
                _finding(module, name, group, rms, steps, window, onset, not later, everyone)
            )
    return findings


def _finding(
    module: str,
    name: str,
    heads: list[int],
    rms: np.ndarray,
    steps: np.ndarray,
    window: int,
    onset: int,
    from_start: bool,
    all_dead: bool = False,
) -> Finding:
    """One finding for ``heads``, all dead from the start or all killed later;
    ``all_dead``: every head of the layer is dead (in this finding or the other)."""
    n_heads = int(rms.shape[1])
    everyone = len(heads) == n_heads
    listed = ", ".join(str(h) for h in heads)
    plural = len(heads) > 1
    since = "from the first capture" if from_start else f"since step {onset}"
    recent = rms[-window:]
    if everyone:
        which = f"all {n_heads} heads of '{module}'"
        level = "every head's output RMS is 0 or below 1e-3 of the largest"
    else:
        which = f"head{'s' if plural else ''} {listed} of the {n_heads} of '{module}'"
        top = float(np.max(np.where(np.isfinite(recent), recent, 0.0)))
        level = (
            f"the output RMS is 0 or below {DEAD:g} of the largest head's ({top:.3g}) and {FLOOR:g}"
        )
    message = (
        f"{which[0].upper()}{which[1:]} {'are' if everyone or plural else 'is'} dead {since}: "
        f"{level} at each of the last {window} captures. A dead head adds nothing to what the "
        "layer passes on, and gets no gradient through its values once what reads it is zero."
    )
    summary = f"{'all heads' if everyone else 'head' + ('s' if plural else '') + ' ' + listed}"
    summary += f" of '{module}' dead " + ("from the start" if from_start else f"from step {onset}")
    later = not from_start
    return Finding(
        check=CHECK,
        severity="error" if everyone or all_dead else "warning",
        layer=module,
        step=int(steps[0]) if from_start else onset,
        cause="learning_rate" if later else "architecture",
        message=message,
        advice=ADVICE[later],
        summary=summary,
        evidence={
            "heads": heads,
            "of_heads": n_heads,
            "pseudo_layer": name,
            "head_rms": [float(v) for v in recent[-1]],
            "window_captures": window,
            "window_steps": [int(steps[-window]), int(steps[-1])],
            "from_first_capture": from_start,
            "threshold": DEAD,
            "floor": FLOOR,
        },
    )
