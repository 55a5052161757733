"""``class_error_imbalance``: classes a classifier gets wrong far more often than the rest.

At each logged evaluation a class's error rate (1 - recall) is set against the
pooled error rate of all other classes. A class is flagged when

- it has at least :data:`MIN_SUPPORT` (10) samples,
- its error rate is at least :data:`MIN_GAP` (25 points) above the others' and
  at least :data:`MIN_FACTOR` (2x) theirs, and
- the gap is not chance: a one-sided binomial z-score of at least
  :data:`MIN_Z` (3) under the others' rate.

Early in training classes are learned at different speeds: the digits CNN
after three epochs misreads one digit 43% of the time against 14% for the
rest (an odds ratio of 4.6), and that gap closes with more training; a
BatchNorm CNN at 90% accuracy misreads one digit 43% of the time against 7%.
So a flagged class is a ``warning`` only when it is mostly wrong (error rate
at least :data:`WARN_ERROR_RATE`, 50%) and the odds of an error on it are at
least :data:`WARN_ODDS_RATIO` (10) times the others' (e.g. 50% against 9%, or
80% against 28%); otherwise it is ``info``. It is ``info`` too while the model as a
whole is no better than always answering the most common class (its accuracy less
than :data:`LEARNED_MARGIN` above that class's share): an untrained model answers a
few classes, and which ones says nothing about the data yet. Each is dated from the first of the
consecutive evaluations where it was flagged, and names the classes it is
mistaken for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis import metrics
from nbviz.analysis.checks.finding import Finding, pct

CHECK = "class_error_imbalance"
MIN_SUPPORT = 10
MIN_GAP = 0.25
MIN_FACTOR = 2.0
MIN_Z = 3.0
WARN_ODDS_RATIO = 10.0
WARN_ERROR_RATE = 0.5
#: How far above the most common class's share the accuracy must be to count as learned.
LEARNED_MARGIN = 0.05
#: Classes named as "confused with" per flagged class.
TOP_CONFUSED = 3


def _flagged(counts: pd.DataFrame) -> dict[int, dict[str, Any]]:
    """Flagged classes of one evaluation (its :func:`metrics.class_counts`), with their
    numbers."""
    classes = counts["class"].to_numpy()
    support = counts["support"].to_numpy()
    errors = support - counts["correct"].to_numpy()
    total, total_err = int(support.sum()), int(errors.sum())
    accuracy = 1 - total_err / total if total else 0.0
    majority = float(support.max() / total) if total else 0.0
    unlearned = accuracy < majority + LEARNED_MARGIN
    out = {}
    for i in np.flatnonzero(support >= MIN_SUPPORT):
        c = int(classes[i])
        n_c, e_c = int(support[i]), int(errors[i])
        n_o, e_o = total - n_c, total_err - e_c
        if n_o <= 0:
            continue
        p, q = e_c / n_c, e_o / n_o
        q_floor = min(max(q, 0.5 / n_o), 1 - 0.5 / n_o)
        z = (p - q) / np.sqrt(q_floor * (1 - q_floor) / n_c)
        if p - q >= MIN_GAP and p >= MIN_FACTOR * q and z >= MIN_Z:
            p_c = min(p, 1 - 0.5 / n_c)  # keep the odds finite
            odds_ratio = (p_c / (1 - p_c)) / (q_floor / (1 - q_floor))
            out[int(c)] = {
                "odds_ratio": float(odds_ratio),
                "warn": bool(
                    p >= WARN_ERROR_RATE and odds_ratio >= WARN_ODDS_RATIO and not unlearned
                ),
                "accuracy": float(accuracy),
                "majority_share": majority,
                "unlearned": bool(unlearned),
                "error_rate": p,
                "others_error_rate": q,
                "support": n_c,
                "errors": e_c,
                "z": float(z),
            }
    return out


def check(run: Any) -> list[Finding]:
    """A warning per class whose error rate stands far above the others' at the last evaluation."""
    findings = []
    class_names = run.class_names
    for split in run.class_splits():
        steps = run.prediction_steps(split)
        if len(steps) == 0:
            continue
        history = []
        for step in steps:
            preds = run.predictions(int(step), split=split)
            if len(preds) == 0:
                history.append(({}, None))
                continue
            metrics.class_count(preds, class_names)  # refuses classes past the names
            history.append((_flagged(metrics.class_counts(preds)), preds))
        last, preds = history[-1]
        for c, numbers in sorted(last.items(), key=lambda kv: -kv[1]["error_rate"]):
            first = len(history) - 1
            while first > 0 and c in history[first - 1][0]:
                first -= 1
            onset = int(steps[first])
            name = class_names[c] if class_names and c < len(class_names) else str(c)
            confused = metrics.top_confusions(preds, k=len(preds))
            confused = confused[confused["true"] == c].head(TOP_CONFUSED)
            with_ = [
                {
                    "class": int(row["pred"]),
                    "name": class_names[int(row["pred"])] if class_names else str(int(row["pred"])),
                    "count": int(row["count"]),
                    "rate": float(row["rate"]),
                }
                for row in confused.to_dict("records")
            ]
            mistaken = ", ".join(
                f"'{w['name']}' ({w['count']} of {numbers['support']})" for w in with_
            )
            since = f", since step {onset}" if first < len(history) - 1 else ""
            message = (
                f"Class '{name}' is misclassified {pct(numbers['error_rate'])} of the time on "
                f"the {split} split at step {int(steps[-1])}{since}, against "
                f"{pct(numbers['others_error_rate'])} for the other classes"
                + (f"; mostly predicted as {mistaken}" if mistaken else "")
                + (
                    "."
                    if numbers["warn"]
                    else (
                        f" (the model as a whole is at {pct(numbers['accuracy'])} accuracy, "
                        f"within {round(LEARNED_MARGIN * 100)} points of always answering the "
                        f"most common class ({pct(numbers['majority_share'])}): it has not "
                        "learned the task yet)."
                    )
                    if numbers["unlearned"]
                    else " (a gap that often closes with more training)."
                )
            )
            findings.append(
                Finding(
                    check=CHECK,
                    severity="warning" if numbers["warn"] else "info",
                    step=onset,
                    cause="data",
                    message=message,
                    advice=(
                        "look at these samples (ConfusionMatrix, SampleGallery) for label "
                        "errors, collect more examples of the class, or weight or resample it"
                        if numbers["warn"]
                        else ""
                    ),
                    summary=(
                        f"class '{name}' is misclassified {pct(numbers['error_rate'])} of the "
                        f"time on the {split} split"
                    ),
                    evidence={
                        "split": split,
                        "class": c,
                        "name": name,
                        **numbers,
                        "last_step": int(steps[-1]),
                        "confused_with": with_,
                        "threshold_gap": MIN_GAP,
                        "threshold_factor": MIN_FACTOR,
                        "threshold_z": MIN_Z,
                        "threshold_warn_odds_ratio": WARN_ODDS_RATIO,
                        "threshold_warn_error_rate": WARN_ERROR_RATE,
                    },
                )
            )
    return findings
