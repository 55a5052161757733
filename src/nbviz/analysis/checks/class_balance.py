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


def _recalls(run: Any, split: str, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(classes, recall, support)`` at one evaluation, over the classes among its labels.

    Counted over the classes that occur, never over ``0..largest index``: a label
    set of 2**31 classes costs what its samples cost."""
    preds = run.predictions(step, split=split)
    y = preds["label"].to_numpy(dtype=np.int64)
    p = preds["pred"].to_numpy(dtype=np.int64)
    classes, support = np.unique(y, return_counts=True)
    correct = np.bincount(np.searchsorted(classes, y[y == p]), minlength=len(classes))
    return classes, correct / np.maximum(support, 1), support


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
    names = run.class_names
    findings = []
    others = [s for s in run.class_splits() if s not in train]
    for split in train:
        steps = run.prediction_steps(split)
        preds = run.predictions(int(steps[-1]), split=split)
        # the classes that occur and their counts: sparse, whatever the largest class index
        classes, counts = np.unique(preds["label"].to_numpy(dtype=np.int64), return_counts=True)
        theirs = [run.predictions(split=o)["label"].to_numpy(dtype=np.int64) for o in others]
        elsewhere, support = np.unique(
            np.concatenate([np.zeros(0, np.int64), *theirs]), return_counts=True
        )
        missing = elsewhere[~np.isin(elsewhere, classes) & (support >= MIN_SUPPORT)].tolist()
        ratio = float(counts.max() / counts.min()) if len(counts) else 1.0
        if not missing and ratio < IMBALANCE:
            continue
        small = classes[counts * IMBALANCE <= counts.max()].tolist()
        gap = _minority_gap(run, small)
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
            big, least = int(np.argmax(counts)), int(np.argmin(counts))
            parts.append(
                f"the largest class '{_name(names, int(classes[big]))}' has {fmt(ratio)}x the "
                f"{split} samples of the smallest, '{_name(names, int(classes[least]))}' "
                f"({int(counts[big])} against {int(counts[least])})"
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
                    "counts": {int(c): int(k) for c, k in zip(classes, counts)},
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


def _minority_gap(run: Any, small: list[int]) -> float | None:
    """How far the small classes' mean recall falls below the others', at the latest evaluation."""
    if not small:
        return None
    gaps = []
    for split in run.class_splits():
        steps = run.prediction_steps(split)
        if not len(steps):
            continue
        classes, recall, _ = _recalls(run, split, int(steps[-1]))
        is_small = np.isin(classes, small)
        if is_small.any() and not is_small.all():
            gaps.append(float(np.mean(recall[~is_small]) - np.mean(recall[is_small])))
    return max(gaps) if gaps else None


def check_unlearned(run: Any) -> list[Finding]:
    """Classes whose recall never rose above chance level while the others were learned."""
    findings = []
    names = run.class_names
    for split in run.class_splits():
        steps = run.prediction_steps(split)
        if len(steps) < 2:
            continue
        history = [_recalls(run, split, int(s)) for s in steps]
        # each class's best recall over the evaluations that had it
        seen = np.concatenate([c for c, _, _ in history])
        order = np.argsort(seen, kind="stable")
        ever_classes, first = np.unique(seen[order], return_index=True)
        best = np.maximum.reduceat(np.concatenate([r for _, r, _ in history])[order], first)
        classes, recall_last, support = history[-1]
        total = float(recall_last.sum())
        for i in np.flatnonzero(support >= MIN_SUPPORT).tolist():
            c = int(classes[i])
            ever = float(best[np.searchsorted(ever_classes, c)])
            # the mean recall of the other classes (those with samples at the last evaluation)
            rest = len(classes) - 1
            learned = (total - float(recall_last[i])) / rest if rest else 0.0
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
                        "support": int(support[i]),
                        "evaluations": len(steps),
                    },
                )
            )
    return findings
