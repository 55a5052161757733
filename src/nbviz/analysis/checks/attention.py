"""``attention_collapse``: attention heads that look at a single token whatever the input.

Read from the attention maps of the probe batch (``run.watch(model,
attention=probe_batch)``): per head and capture, the normalised entropy of each
query's weights over the keys it may see, averaged over the queries and the
probe samples (0: all weight on one key; 1: spread evenly). A head is collapsed
when the median of its last :data:`WINDOW` captures is below
:data:`COLLAPSED` (0.15, the value the attention view marks): it passes on one
token's value and nothing else, so it has stopped mixing information, and its
softmax passes back almost no gradient to its queries and keys.

From the first capture the collapse points at the attention logits' scale at
initialisation (``architecture``: large query/key weights, a missing
``1/sqrt(d)``); set in during training, at logits grown by large steps
(``learning_rate``), the known entropy-collapse instability of transformers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, fmt, onset_warning
from nbviz.analysis.checks.robust import onset

CHECK = "attention_collapse"
COLLAPSED = 0.15
WINDOW = 5
MIN_CAPTURES = 2
#: What to try for a head collapsed from the first capture, and for one collapsed later.
ADVICE = (
    "check the attention logits' scale at initialisation: queries and keys "
    "scaled by 1/sqrt(head size), smaller initial weights of the query and key "
    "projections, or normalising queries and keys (QK-norm)",
    "a lower learning rate or a longer warm-up (the attention logits grew until "
    "the softmax saturated), normalising queries and keys (QK-norm), or weight "
    "decay on the query and key projections",
)


def check(run: Any) -> list[Finding]:
    """A warning per attention head whose recent captures are collapsed."""
    layers = run.attention_layers() if hasattr(run, "attention_layers") else []
    if not layers:
        return []
    stats = run.attention_stats()
    findings = []
    per_head = stats.groupby(["layer", "head", "step"], sort=True).agg(
        entropy=("entropy", "mean"), max_weight=("max_weight", "mean")
    )
    order = {name: i for i, name in enumerate(layers)}
    heads = sorted(
        {(layer, int(h)) for layer, h, _ in per_head.index}, key=lambda k: (order[k[0]], k[1])
    )
    for layer, head in heads:
        rows = per_head.loc[(layer, head)]
        entropy = rows["entropy"].to_numpy(dtype=np.float64)
        steps = rows.index.to_numpy(dtype=np.int64)
        ok = np.isfinite(entropy)
        entropy, steps = entropy[ok], steps[ok]
        weight = rows["max_weight"].to_numpy(dtype=np.float64)[ok]
        if len(entropy) < MIN_CAPTURES:
            continue
        window = min(WINDOW, len(entropy))
        level = float(np.median(entropy[-window:]))
        if level >= COLLAPSED:
            continue
        when = onset(steps, entropy < COLLAPSED, window)
        message = (
            f"Head {head} of {layer} has collapsed {when.since()}: its attention entropy is "
            f"{fmt(level)} of uniform (median of the last {window} captures), each query puts "
            f"{fmt(float(np.median(weight[-window:])))} of its weight on a single token on "
            "average, so the head passes on one token and little gradient reaches its "
            "queries and keys."
        )
        summary = (
            f"head {head} of '{layer}' collapsed from the start",
            f"head {head} of '{layer}' collapsed from step {when.step}",
        )
        evidence = {
            "head": head,
            "entropy": level,
            "entropy_at_first_capture": float(entropy[0]),
            "max_weight": float(np.median(weight[-window:])),
            "from_first_capture": when.from_start,
            "window_captures": window,
            "threshold": COLLAPSED,
            "captures": len(entropy),
        }
        findings.append(onset_warning(CHECK, layer, when, message, ADVICE, summary, evidence))
    return findings
