"""``mislabeled_samples``: training samples the model confidently learns as another class.

Read from the training dynamics of each training split (splits named
``train...``; see :mod:`nbviz.analysis.dynamics`), once it has at least
:data:`MIN_EVALUATIONS` evaluations. A sample is *suspect* when, over the later
half of the evaluations, the model gave another class at least
:data:`OTHER_CONFIDENCE` (half) of the probability on average and predicted its
label at most :data:`LATE_CORRECT` (20%) of the time, and its area under the
margin is negative: its label contradicts what every other sample taught the
model. Hard but correctly labelled samples are learned eventually or stay
ambiguous (variable), so they rarely meet all three.

It is a ``warning`` when the suspects are at least :data:`MIN_COUNT` (5) and
:data:`WARN_FRACTION` (2%) of the split while the model fits the rest (late
accuracy on the other samples at least 50%: a model that fits nothing is not
evidence about labels). Measured: healthy digits models flag under 1% of their
training samples; with 15% of the labels flipped, 10-14%. The evidence names
the suspects, highest ``mislabel_score`` first, and the (label, predicted)
pairs they form.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, pct
from nbviz.analysis.dynamics import sample_dynamics

CHECK = "mislabeled_samples"
MIN_EVALUATIONS = 3
OTHER_CONFIDENCE = 0.5
LATE_CORRECT = 0.2
MIN_COUNT = 5
WARN_FRACTION = 0.02
#: Least late accuracy on the other samples for the suspects to say anything about labels.
FITS_REST = 0.5
#: Ids listed in the evidence.
MAX_IDS = 200


def training_splits(run: Any) -> list[str]:
    """Splits whose predictions describe samples the model trains on."""
    return [s for s in run.class_splits() if s.lower().startswith("train")]


def suspects(dynamics: Any) -> np.ndarray:
    """Boolean mask of the samples confidently learned as another class."""
    return (
        (dynamics["late_other"].to_numpy() >= OTHER_CONFIDENCE)
        & (dynamics["late_correctness"].to_numpy() <= LATE_CORRECT)
        & (np.nan_to_num(dynamics["aum"].to_numpy(), nan=0.0) < 0)
    )


def check(run: Any) -> list[Finding]:
    """A warning per training split with a share of samples learned as another class."""
    findings = []
    names = run.class_names
    for split in training_splits(run):
        steps = run.prediction_steps(split)
        if len(steps) < MIN_EVALUATIONS:
            continue
        dyn = sample_dynamics(run, split)
        if dyn.empty:
            continue
        flagged = suspects(dyn)
        count, total = int(flagged.sum()), len(dyn)
        rest = dyn[~flagged]
        fits = float(rest["late_correctness"].mean()) if len(rest) else 0.0
        frac = count / total
        if count < MIN_COUNT or fits < FITS_REST:
            continue
        severity = "warning" if frac >= WARN_FRACTION else "info"
        chosen = dyn[flagged].sort_values("mislabel_score", ascending=False, kind="stable")
        pairs = chosen.groupby(["label", "predicted"]).size().sort_values(ascending=False).head(10)

        def name(c: int) -> str:
            return names[c] if names and 0 <= c < len(names) else str(c)

        pair_text = ", ".join(f"'{name(a)}' as '{name(b)}' ({n})" for (a, b), n in pairs.items())
        first = int(steps[0])
        message = (
            f"{count} of {total} {split} samples ({pct(frac)}) are confidently learned as another "
            f"class: over the later evaluations the model predicts their label at most "
            f"{pct(LATE_CORRECT)} of the time and gives another class at least half the "
            f"probability, while it fits {pct(fits)} of the other samples. Their labels are "
            f"likely wrong. Most common: {pair_text}."
        )
        findings.append(
            Finding(
                check=CHECK,
                severity=severity,
                step=first,
                cause="data",
                message=message,
                advice=(
                    "look at them, highest mislabel_score first (run.sample_dynamics(split="
                    f"{split!r}), the data map, SampleGallery), fix or drop wrong labels, or "
                    "train with a noise-robust loss (label smoothing, bootstrapping)"
                    if severity == "warning"
                    else ""
                ),
                summary=f"{pct(frac)} of the {split} samples look mislabelled",
                evidence={
                    "split": split,
                    "suspects": count,
                    "samples": total,
                    "fraction": frac,
                    "fits_rest": fits,
                    "ids": chosen["id"].to_numpy()[:MAX_IDS],
                    "pairs": [
                        {"label": int(a), "predicted": int(b), "count": int(n)}
                        for (a, b), n in pairs.items()
                    ],
                    "evaluations": len(steps),
                    "threshold_fraction": WARN_FRACTION,
                },
            )
        )
    return findings
