"""``massive_activations``: a few features orders of magnitude above the rest of their layer.

Read from each sequence output's per-feature peaks (``unit_stats`` signal
``max_abs``: the largest ``|x|`` of each feature over the batch and tokens at a
capture, recorded for outputs shaped ``(batch, tokens, features)``). Per layer,
each feature's peak is summarised by its median over the last :data:`WINDOW`
captures (one odd batch is not a property of the model); a feature is massive
when that is at least :data:`MIN_RATIO` (100) times the median feature's. In
healthy small GPT-style models the largest feature peaks at 1.2-5x the median
one (measured on every watched layer); the massive activations of large
language models (Sun et al. 2024, "Massive activations in large language
models") sit 10^3-10^4 x above the median magnitude, in a handful of fixed
features. At most :data:`MAX_FEATURES` features (or 2% of the layer) may be
massive: more than that is the layer's scale, not a few features.

What the feature does across tokens tells two cases apart, from its per-unit
mean next to its peak (``spread`` = |mean| / peak):

- at a few tokens, or with signs that cancel across tokens (``spread`` <
  :data:`SPREAD`): the pattern of the attention
  sinks of trained LLMs, where a huge value at the first token or a delimiter
  acts as a fixed bias for attention. Usually benign (``info``): it matters
  for int8/float16 quantisation (a per-tensor scale set by the peak rounds
  every other feature to zero) and where the peaks keep growing;
- at most tokens: one feature direction is amplified everywhere, so it
  dominates the layer's norm and a normalisation after it divides every other
  feature by its scale (``warning``, ``architecture``: a gain or an embedding
  dimension built or initialised far off scale, or learned so).

Where the means were not recorded the finding says so and stays ``info``.
Either becomes a ``warning`` pointing at ``numerics`` where the peak is within
:data:`FLOAT16_MARGIN` (16x) of float16's largest value, 65504: one more
product by a weight above that margin overflows in half precision.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import SEVERITY_RANK, Finding, fmt, names, pct
from nbviz.analysis.checks.model import layout, unit_values
from nbviz.analysis.checks.robust import nanmedian, onset

CHECK = "massive_activations"
SIGNAL = "max_abs"
#: A feature whose peak is at least this many times the median feature's peak is massive.
MIN_RATIO = 100.0
#: Captures whose per-feature peaks are summarised (median) for the finding.
WINDOW = 5
MIN_CAPTURES = 2
#: At most this many features (or :data:`MAX_SHARE` of them) are "a few".
MAX_FEATURES = 8
MAX_SHARE = 0.02
#: |mean| / peak at or above which a feature is large at most tokens.
SPREAD = 0.3
FLOAT16_MAX = 65504.0
FLOAT16_MARGIN = 16.0
#: Indices of massive features listed in a message.
SHOWN = 4


def check(run: Any) -> list[Finding]:
    """A finding per massive feature, at the first layer (in forward order) that shows it.

    A residual stream carries a massive feature from the layer that writes it
    through every block after it: the layers that show the same top feature at
    the same width are one finding, named at the first and listed in
    ``evidence["layers"]``. It takes the worst severity and cause among them, and
    the float16 margin of the largest peak (``evidence["peak_layer"]``).
    """
    lay = layout(run)
    if lay is None:
        return []
    layers = run.recorded_layers(SIGNAL, table="unit_stats")
    groups: dict[tuple[int, int], list[Finding]] = {}
    for layer in sorted(layers, key=lay.depth):
        found = _layer_finding(run, layer, lay.label(layer))
        if found is not None:
            key = (found.evidence["features"][0], found.evidence["features_total"])
            groups.setdefault(key, []).append(found)
    return [_merged(group) for group in groups.values()]


def _merged(group: list[Finding]) -> Finding:
    """The layers showing one feature as one finding: named at the first layer, with the
    worst severity and cause among them, and the float16 margin of the largest peak."""
    first, later = group[0], [f.layer for f in group[1:]]
    worst = min(group, key=lambda f: (SEVERITY_RANK[f.severity], f.cause != "numerics"))
    highest = max(group, key=lambda f: f.evidence["peak"])
    message = first.message
    if later:
        message += (
            f" The same feature is massive in {len(later)} later layer"
            f"{'s' if len(later) > 1 else ''} ({names(later, 4)}): the residual stream "
            "carries it on."
        )
    peak = highest.evidence["peak"]
    if peak * FLOAT16_MARGIN >= FLOAT16_MAX:
        where = "" if highest is first else f" in '{highest.layer}'"
        message += (
            f" The peak{where} ({fmt(peak)}) is within {fmt(FLOAT16_MAX / peak)}x of "
            f"float16's largest value ({fmt(FLOAT16_MAX)})."
        )
    evidence = {
        **first.evidence,
        "layers": [first.layer, *later],
        "peak_layer": highest.layer,
        "largest_peak": peak,
        "float16_margin": highest.evidence["float16_margin"],
    }
    return replace(
        first,
        severity=worst.severity,
        cause=worst.cause,
        advice=worst.advice,
        message=message,
        evidence=evidence,
    )


def _layer_finding(run: Any, layer: str, label: str) -> Finding | None:
    steps, peaks = unit_values(run, layer, SIGNAL)
    peaks = np.abs(peaks.astype(np.float64))
    if len(steps) < MIN_CAPTURES or peaks.shape[1] < 8:
        return None
    window = min(WINDOW, len(steps))
    level = nanmedian(peaks[-window:], axis=0)  # per feature
    typical = float(np.nanmedian(level)) if np.isfinite(level).any() else float("nan")
    if not (np.isfinite(typical) and typical > 0):
        return None  # a layer that is mostly zero: the dead-units check speaks of it
    ratio = level / typical
    massive = np.flatnonzero(np.nan_to_num(ratio) >= MIN_RATIO)
    n_units = peaks.shape[1]
    if len(massive) == 0 or len(massive) > max(MAX_FEATURES, int(MAX_SHARE * n_units)):
        return None
    massive = massive[np.argsort(-ratio[massive])]
    top = int(massive[0])
    # since when: the captures at which the top feature was massive against that capture
    per_capture_typical = nanmedian(peaks, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        top_ratio = peaks[:, top] / per_capture_typical
    began = onset(steps, np.nan_to_num(top_ratio) >= MIN_RATIO, window)
    since = began.since()
    spread = _spread(run, layer, steps[-window:], massive, level)
    peak = float(level[top])
    near_overflow = peak * FLOAT16_MARGIN >= FLOAT16_MAX
    everywhere = spread is not None and spread >= SPREAD
    known = spread is not None
    shown = ", ".join(str(int(u)) for u in massive[:SHOWN])
    more = f" and {len(massive) - SHOWN} more" if len(massive) > SHOWN else ""
    plural = "s" if len(massive) > 1 else ""
    if spread is None:
        where = (
            "whether at a few tokens or at most of them is not known (its mean over the "
            "tokens was not recorded)"
        )
    elif everywhere:
        where = (
            f"at most tokens (its mean is {pct(spread)} of its peak): one feature direction "
            "is amplified everywhere"
        )
    else:
        where = (
            f"at a few tokens (or with signs that cancel across tokens: its mean is "
            f"{pct(spread)} of its peak), like the attention-sink activations of large "
            "language models, which act as a fixed bias"
        )
    message = (
        f"{label} has {len(massive)} massive feature{plural} {since}: feature{plural} {shown}"
        f"{more} peak at {fmt(float(ratio[top]))}x the median feature's peak "
        f"({fmt(peak)} against {fmt(typical)}; healthy layers stay within ~5x), {where}."
    )
    if near_overflow:
        severity, cause = "warning", "numerics"
        advice = (
            "keep this layer in float32 or bfloat16 (not float16), clip or normalise the "
            "residual stream, and find which module writes the feature (its weights' scale)"
        )
    elif everywhere:
        severity, cause = "warning", "architecture"
        advice = (
            f"look for what scales feature {top} of {layer!r} at every token (an "
            "initialisation, a gain or an embedding dimension far off scale); a normalisation "
            "after it divides every other feature by that scale"
        )
    elif not known:
        severity, cause = "info", "architecture"
        advice = (
            f"record the per-feature means of {layer!r} to tell a few tokens (benign, an "
            "attention sink) from every token (a scale far off); either matters when "
            "quantising or training in float16"
        )
    else:
        severity, cause = "info", "architecture"
        advice = (
            "nothing to fix for training: such peaks let attention park on a token; they "
            "matter when quantising (per-channel or outlier-aware int8) or training in "
            "float16, and an explicit attention bias or sink token removes the need for them"
        )
    return Finding(
        check=CHECK,
        severity=severity,
        layer=layer,
        step=began.step,
        cause=cause,
        message=message,
        advice=advice,
        summary=(
            f"{len(massive)} feature{plural} of '{layer}' peak {fmt(float(ratio[top]))}x "
            "above the rest"
        ),
        evidence={
            "features": [int(u) for u in massive],
            "ratios": [float(ratio[u]) for u in massive],
            "peak": peak,
            "median_peak": typical,
            "spread": spread,
            "at_most_tokens": everywhere if known else None,
            "from_first_capture": began.from_start,
            "peak_at_first_capture": float(peaks[0, top]),
            "float16_margin": FLOAT16_MAX / peak if peak > 0 else None,
            "threshold_ratio": MIN_RATIO,
            "window_captures": window,
            "features_total": int(n_units),
        },
    )


def _spread(
    run: Any, layer: str, steps: np.ndarray, massive: np.ndarray, level: np.ndarray
) -> float | None:
    """|mean| / peak of the top massive feature over the window (None where unrecorded)."""
    try:
        msteps, means = run.unit_stats(layer, "mean", steps=[int(s) for s in steps])
    except ValueError:
        return None
    if len(msteps) == 0 or means.shape[1] != len(level):
        return None
    top = int(massive[0])
    mean = float(np.nanmedian(np.abs(means[:, top].astype(np.float64))))
    if not (np.isfinite(mean) and level[top] > 0):
        return None
    return min(mean / float(level[top]), 1.0)
