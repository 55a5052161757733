"""``class_imbalance`` and ``unlearned_classes``: what the labels give each class to learn from.

- ``class_imbalance`` reads the labels of the training split's latest
  evaluation (splits named ``train...``): the largest class against the
  smallest. At :data:`IMBALANCE` (10x) or more it is ``info``, and a
  ``warning`` when the small classes are also the badly learned ones (their
  recall at the latest evaluation of any split at least :data:`RECALL_GAP`
  (25 points) below the rest's), since then the imbalance is what the model
  shows. A class that another split has (at least :data:`MIN_SUPPORT`
  samples) and the training labels lack is a ``warning`` too: the model can
  never predict it. Labels that hold one class alone, in every split evaluated (at
  least :data:`MIN_SUPPORT` samples), are a ``warning`` whatever the split's name:
  the model learns to answer that class and nothing else, so a loss near zero and
  full accuracy say nothing (labels read from the wrong column, or built as a constant).
- ``unlearned_classes``: a class with at least :data:`MIN_SUPPORT` samples in a
  split whose recall stayed at or below :data:`NEVER` (10%) at every one of at
  least two evaluations, while the other classes reach :data:`LEARNED` (50%) on
  average: a ``warning``.

Both point at the data; diagnose() folds an unlearned class under the imbalance
or the wrong labels that explain it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.checks.finding import Finding, fmt, pct
from nbviz.analysis.checks.mislabeled import training_splits

IMBALANCE_CHECK = "class_imbalance"
UNLEARNED_CHECK = "unlearned_classes"
IMBALANCE = 10.0
RECALL_GAP = 0.25
MIN_SUPPORT = 10
NEVER = 0.1
LEARNED = 0.5


def _name(names: list[str] | None, c: int) -> str:
    return names[c] if names and 0 <= c < len(names) else str(c)


def _recalls(run: Any, split: str, step: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-class recall (NaN where absent) and support at one evaluation."""
    preds = run.predictions(step, split=split)
    y = preds["label"].to_numpy(dtype=np.int64)
    p = preds["pred"].to_numpy(dtype=np.int64)
    support = np.bincount(y, minlength=n)[:n]
    correct = np.bincount(y[y == p], minlength=n)[:n]
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = correct / np.where(support > 0, support, np.nan)
    return recall, support


def _n_classes(run: Any) -> int:
    names = run.class_names
    top = 0
    for split in run.class_splits():
        preds = run.predictions(split=split)
        if len(preds):
            top = max(top, int(preds["label"].max()) + 1, int(preds["pred"].max()) + 1)
    return max(len(names) if names else 0, top)


def _one_class(run: Any) -> Finding | None:
    """A warning where the latest evaluation of every class split has one label alone."""
    counts: dict[str, int] = {}
    labels: set[int] = set()
    first = None
    for split in run.class_splits():
        steps = run.prediction_steps(split)
        if not len(steps):
            continue
        y = run.predictions(int(steps[-1]), split=split)["label"].to_numpy(dtype=np.int64)
        labels.update(np.unique(y).tolist())
        counts[split] = len(y)
        first = int(steps[0]) if first is None else min(first, int(steps[0]))
    if len(labels) != 1 or sum(counts.values()) < MIN_SUPPORT or first is None:
        return None
    (label,) = labels
    name = _name(run.class_names, label)
    where = " and ".join(f"the {n} {s} samples" for s, n in counts.items())
    return Finding(
        check=IMBALANCE_CHECK,
        severity="warning",
        step=first,
        cause="data",
        message=(
            f"Class balance: every label is '{name}' ({where}): the model can only learn "
            "to answer that class, so its loss and accuracy say nothing about the task."
        ),
        advice=(
            "check where the labels come from: the right column or field, a label built "
            "as a constant, a filter or collate function that keeps one class"
        ),
        summary=f"every label is '{name}'",
        evidence={
            "split": next(iter(counts)),
            "splits": counts,
            "class": label,
            "name": name,
            "counts": np.asarray([counts[s] for s in counts]),
            "classes": [label],
        },
    )


def check_imbalance(run: Any) -> list[Finding]:
    """Classes far rarer in the training labels than others, or missing from them; labels
    of one class alone."""
    one = _one_class(run)
    if one is not None:
        return [one]  # beside one class, no ratio or missing class means anything
    train = [s for s in training_splits(run) if len(run.prediction_steps(s))]
    if not train:
        return []
    n = _n_classes(run)
    names = run.class_names
    findings = []
    others = [s for s in run.class_splits() if s not in train]
    for split in train:
        steps = run.prediction_steps(split)
        preds = run.predictions(int(steps[-1]), split=split)
        counts = np.bincount(preds["label"].to_numpy(dtype=np.int64), minlength=n)[:n]
        elsewhere = np.zeros(n, dtype=np.int64)
        for other in others:
            theirs = run.predictions(split=other)
            elsewhere += np.bincount(theirs["label"].to_numpy(dtype=np.int64), minlength=n)[:n]
        missing = [c for c in range(n) if counts[c] == 0 and elsewhere[c] >= MIN_SUPPORT]
        present = counts[counts > 0]
        ratio = float(present.max() / present.min()) if len(present) else 1.0
        if not missing and ratio < IMBALANCE:
            continue
        small = [c for c in range(n) if counts[c] > 0 and counts[c] * IMBALANCE <= counts.max()]
        gap = _minority_gap(run, small, n)
        warn = bool(missing) or (gap is not None and gap >= RECALL_GAP)
        parts = []
        if missing:
            parts.append(
                f"{', '.join(repr(_name(names, c)) for c in missing)} "
                f"{'has' if len(missing) == 1 else 'have'} no {split} samples although other "
                "splits have them, so the model can never predict "
                f"{'it' if len(missing) == 1 else 'them'}"
            )
        if ratio >= IMBALANCE:
            big = int(np.argmax(counts))
            least = int(np.flatnonzero(counts == present.min())[0])
            parts.append(
                f"the largest class '{_name(names, big)}' has {fmt(ratio)}x the {split} samples "
                f"of the smallest, '{_name(names, least)}' ({int(counts[big])} against "
                f"{int(counts[least])})"
                + (
                    f"; the small classes' recall is {pct(gap)} below the others'"
                    if gap is not None and gap > 0
                    else ""
                )
            )
        findings.append(
            Finding(
                check=IMBALANCE_CHECK,
                severity="warning" if warn else "info",
                step=int(steps[0]),
                cause="data",
                message="Class balance: " + "; ".join(parts) + ".",
                advice=(
                    "collect or add examples of the small or missing classes, resample them "
                    "(torch.utils.data.WeightedRandomSampler) or weight the loss "
                    "(cross_entropy(weight=...))"
                    if warn
                    else ""
                ),
                summary=(
                    f"{len(missing)} class(es) missing from the {split} labels"
                    if missing
                    else f"the {split} classes are {fmt(ratio)}x imbalanced"
                ),
                evidence={
                    "split": split,
                    "counts": counts,
                    "ratio": ratio,
                    "missing": missing,
                    "small": small,
                    "classes": sorted(set(missing) | set(small)),
                    "minority_recall_gap": gap,
                    "threshold": IMBALANCE,
                },
            )
        )
    return findings


def _minority_gap(run: Any, small: list[int], n: int) -> float | None:
    """How far the small classes' mean recall falls below the others', at the latest evaluation."""
    if not small:
        return None
    gaps = []
    for split in run.class_splits():
        steps = run.prediction_steps(split)
        if not len(steps):
            continue
        recall, _ = _recalls(run, split, int(steps[-1]), n)
        is_small = np.zeros(n, dtype=bool)
        is_small[small] = True
        rest = np.flatnonzero(~is_small & np.isfinite(recall))
        mine = np.flatnonzero(is_small & np.isfinite(recall))
        if len(rest) and len(mine):
            gaps.append(float(np.mean(recall[rest]) - np.mean(recall[mine])))
    return max(gaps) if gaps else None


def check_unlearned(run: Any) -> list[Finding]:
    """Classes whose recall never rose above chance level while the others were learned."""
    findings = []
    names = run.class_names
    n = None
    for split in run.class_splits():
        steps = run.prediction_steps(split)
        if len(steps) < 2:
            continue
        n = n or _n_classes(run)
        history = [_recalls(run, split, int(s), n) for s in steps]
        recall_last, support = history[-1]
        best = np.max([np.nan_to_num(r, nan=0.0) for r, _ in history], axis=0)
        finite = np.isfinite(recall_last)
        finite_sum, finite_count = float(recall_last[finite].sum()), int(finite.sum())
        for c in np.flatnonzero(support >= MIN_SUPPORT).tolist():
            ever = float(best[c])
            # the mean recall of the other classes (those evaluated)
            rest = finite_count - int(finite[c])
            rest_sum = finite_sum - (float(recall_last[c]) if finite[c] else 0.0)
            learned = rest_sum / rest if rest else 0.0
            if ever > NEVER or learned < LEARNED:
                continue
            findings.append(
                Finding(
                    check=UNLEARNED_CHECK,
                    severity="warning",
                    step=int(steps[0]),
                    cause="data",
                    message=(
                        f"Class '{_name(names, c)}' is never learned on the {split} split: its "
                        f"recall stayed at or below {pct(ever)} over {len(steps)} evaluations "
                        f"(to step {int(steps[-1])}), while the other classes reach "
                        f"{pct(learned)} on average."
                    ),
                    advice=(
                        "check that the training labels contain this class and that its "
                        "samples are labelled right; collect more of it or weight it"
                    ),
                    summary=f"class '{_name(names, c)}' is never learned ({split})",
                    evidence={
                        "split": split,
                        "class": c,
                        "name": _name(names, c),
                        "best_recall": ever,
                        "others_recall": learned,
                        "support": int(support[c]),
                        "evaluations": len(steps),
                    },
                )
            )
    return findings
