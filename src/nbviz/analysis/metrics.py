"""Where a classifier errs: confusion matrices, per-class metrics, cells, flips.

One module at ~500 lines because every function here counts the same (true,
predicted) pairs; the next addition should move the per-class scores to their own module.

Counting is sparse: :func:`confusion_pairs` and :func:`class_counts` cost what the
number of samples costs, whatever the largest class index (a vocabulary of 100,000
tokens); only :func:`confusion_matrix` is dense, for the small label sets a matrix
can show.

Everything here works on a predictions frame as ``run.predictions(step, split)``
returns it (columns ``id``, ``label``, ``pred``, ``loss``, ``confidence``; one row
per sample). Rows of a confusion matrix are the true class, columns the
predicted one. Sample ids come back in one stable order wherever a list of
them is asked for: highest loss first, ties (and NaN losses, which come last)
by ascending id, so the samples a model gets most wrong lead.

A sample whose logits were non-finite has ``pred == NONFINITE_PRED`` (-1): it
has no predicted class. Matrices, per-class metrics and scores are over the
samples with a class (:func:`finite_rows`); :func:`nonfinite_count` counts the
others, and ``Summary.nonfinite`` carries that count beside the scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nbviz.store.predictions import NONFINITE_PRED

__all__ = [
    "ANY_OTHER",
    "Flips",
    "Summary",
    "cell_ids",
    "class_count",
    "class_counts",
    "class_errors",
    "class_metrics",
    "confusion_matrix",
    "confusion_pairs",
    "evaluation_at",
    "finite_rows",
    "flips",
    "most_confused",
    "nonfinite_count",
    "normalize_confusion",
    "order_ids",
    "present_summary",
    "summary",
    "top_confusions",
    "top_samples_for_unit",
    "unit_values",
]

_NEEDED = ("id", "label", "pred")


def _check_frame(preds: pd.DataFrame, what: str) -> None:
    if not isinstance(preds, pd.DataFrame):
        raise TypeError(
            f"{what}: expected a predictions DataFrame (run.predictions(step)), "
            f"got {type(preds).__name__}"
        )
    missing = [c for c in _NEEDED if c not in preds.columns]
    if missing:
        raise ValueError(
            f"{what}: the predictions frame lacks columns {missing}; it has {list(preds.columns)}"
        )


def nonfinite_count(preds: pd.DataFrame) -> int:
    """How many samples had non-finite logits (``pred == NONFINITE_PRED``): no class."""
    return int((preds["pred"].to_numpy() == NONFINITE_PRED).sum()) if len(preds) else 0


def finite_rows(preds: pd.DataFrame) -> pd.DataFrame:
    """The rows of samples that have a predicted class (their logits were finite)."""
    if not len(preds):
        return preds
    bad = preds["pred"].to_numpy() == NONFINITE_PRED
    return preds[~bad] if bad.any() else preds


def class_count(preds: pd.DataFrame, class_names: Sequence[str] | None = None) -> int:
    """Number of classes: the class names' count, or one more than the largest class seen."""
    if class_names is not None:
        n = len(class_names)
        if len(preds):
            top = int(max(preds["label"].max(), preds["pred"].max()))
            if top >= n:
                raise ValueError(
                    f"class_count: class {top} appears in the predictions but only {n} class "
                    "names are known"
                )
        return n
    if len(preds) == 0:
        return 0
    return int(max(preds["label"].max(), preds["pred"].max())) + 1


def _classes_of(preds: pd.DataFrame, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, preds)`` as int64 of the samples with a predicted class, refusing
    negative classes (samples with non-finite logits are left out: :func:`nonfinite_count`)."""
    _check_frame(preds, what)
    preds = finite_rows(preds)
    y = preds["label"].to_numpy(dtype=np.int64)
    p = preds["pred"].to_numpy(dtype=np.int64)
    if len(y) and min(y.min(), p.min()) < 0:
        raise ValueError(f"{what}: class {int(min(y.min(), p.min()))} is negative")
    return y, p


def confusion_pairs(preds: pd.DataFrame) -> pd.DataFrame:
    """The ``(true, pred)`` pairs that occur and their counts: ``[true, pred, count]``.

    Sorted by true then predicted class. Costs what sorting the samples costs,
    never the square of the largest class index.
    """
    y, p = _classes_of(preds, "confusion_pairs")
    if not len(y):
        empty = np.zeros(0, dtype=np.int64)
        return pd.DataFrame({"true": empty, "pred": empty, "count": empty})
    order = np.lexsort((p, y))
    y, p = y[order], p[order]
    start = np.flatnonzero(np.r_[True, (y[1:] != y[:-1]) | (p[1:] != p[:-1])])
    counts = np.diff(np.r_[start, len(y)])
    return pd.DataFrame({"true": y[start], "pred": p[start], "count": counts.astype(np.int64)})


def confusion_matrix(preds: pd.DataFrame, n_classes: int | None = None) -> np.ndarray:
    """``(n_classes, n_classes)`` int64 counts: ``[true, predicted]``.

    Dense, for label sets small enough to show as a matrix; the counting itself
    is :func:`confusion_pairs`.
    """
    _check_frame(preds, "confusion_matrix")
    n = class_count(preds) if n_classes is None else int(n_classes)
    pairs = confusion_pairs(preds)
    t, p = pairs["true"].to_numpy(), pairs["pred"].to_numpy()
    if len(t) and max(t.max(), p.max()) >= n:
        raise ValueError(
            f"confusion_matrix: class {int(max(t.max(), p.max()))} is outside 0..{n - 1}"
        )
    m = np.zeros((n, n), dtype=np.int64)
    m[t, p] = pairs["count"].to_numpy()
    return m


def class_counts(preds: pd.DataFrame) -> pd.DataFrame:
    """Per class that occurs as a label or a prediction: ``[class, support, predicted,
    correct]`` (support: samples of the class; predicted: samples predicted as it)."""
    y, p = _classes_of(preds, "class_counts")
    classes = np.union1d(y, p)
    k = len(classes)
    support = np.bincount(np.searchsorted(classes, y), minlength=k)
    predicted = np.bincount(np.searchsorted(classes, p), minlength=k)
    correct = np.bincount(np.searchsorted(classes, y[y == p]), minlength=k)
    return pd.DataFrame(
        {
            "class": classes.astype(np.int64),
            "support": support.astype(np.int64),
            "predicted": predicted.astype(np.int64),
            "correct": correct.astype(np.int64),
        }
    )


def _name_of(class_names: Sequence[str] | None, c: Any) -> list[str]:
    names = list(class_names) if class_names is not None else []
    return [str(names[i]) if 0 <= i < len(names) else str(i) for i in np.asarray(c).tolist()]


def class_errors(
    preds: pd.DataFrame, k: int | None = None, class_names: Sequence[str] | None = None
) -> pd.DataFrame:
    """Classes ranked by their errors: ``[class, name, support, errors, error_rate,
    top_pred, top_pred_name, top_count]``.

    One row per class with samples; most errors first, then the highest error
    rate, then the class index; ``top_pred`` is the class it is most often
    mistaken for (-1 when never wrong) and ``top_count`` how often. ``k`` keeps the
    first ``k`` rows.
    """
    counts = class_counts(preds)
    counts = counts[counts["support"] > 0]
    c = counts["class"].to_numpy()
    support = counts["support"].to_numpy()
    errors = support - counts["correct"].to_numpy()
    rate = errors / np.maximum(support, 1)
    order = np.lexsort((c, -rate, -errors))
    if k is not None:
        order = order[: max(int(k), 0)]
    c, support, errors, rate = c[order], support[order], errors[order], rate[order]
    wrong = confusion_pairs(preds)
    wrong = wrong[wrong["true"] != wrong["pred"]]
    wrong = wrong.sort_values(["true", "count", "pred"], ascending=[True, False, True])
    top = wrong.drop_duplicates("true").set_index("true")
    top_pred = top["pred"].reindex(c).fillna(-1).to_numpy(dtype=np.int64)
    top_count = top["count"].reindex(c).fillna(0).to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "class": c.astype(np.int64),
            "name": _name_of(class_names, c),
            "support": support.astype(np.int64),
            "errors": errors.astype(np.int64),
            "error_rate": rate.astype(np.float64),
            "top_pred": top_pred,
            "top_pred_name": [
                n if t >= 0 else "" for n, t in zip(_name_of(class_names, top_pred), top_pred)
            ],
            "top_count": top_count,
        }
    )


def top_confusions(
    preds: pd.DataFrame, k: int = 10, class_names: Sequence[str] | None = None
) -> pd.DataFrame:
    """The ``k`` most frequent errors ``[true, pred, count, rate, true_name, pred_name]``,
    counted sparsely: what :func:`most_confused` gives for the dense matrix, at any
    number of classes. ``rate`` is the count as a fraction of the true class's support."""
    pairs = confusion_pairs(preds)
    support = pairs.groupby("true")["count"].sum()
    wrong = pairs[pairs["true"] != pairs["pred"]]
    t, p, n = (wrong[c].to_numpy() for c in ("true", "pred", "count"))
    order = np.lexsort((p, t, -n))[: max(int(k), 0)]
    t, p, n = t[order], p[order], n[order]
    rate = n / np.maximum(support.reindex(t).to_numpy(), 1) if len(t) else np.zeros(0)
    return pd.DataFrame(
        {
            "true": t.astype(np.int64),
            "pred": p.astype(np.int64),
            "count": n.astype(np.int64),
            "rate": np.asarray(rate, dtype=np.float64),
            "true_name": _name_of(class_names, t),
            "pred_name": _name_of(class_names, p),
        }
    )


def normalize_confusion(matrix: np.ndarray, by: str = "counts") -> np.ndarray:
    """The matrix as counts, or as fractions of each row (``"row"``: recall) or column.

    ``"row"`` divides each row by its true-class support (the diagonal is then
    each class's recall), ``"column"`` each column by the times a class was
    predicted (the diagonal is its precision). Empty rows/columns give 0.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if by == "counts":
        return m
    if by == "row":
        total = m.sum(axis=1, keepdims=True)
    elif by == "column":
        total = m.sum(axis=0, keepdims=True)
    else:
        raise ValueError(f"normalize_confusion: by must be 'counts', 'row' or 'column', got {by!r}")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, m / np.where(total > 0, total, 1), 0.0)


def class_metrics(
    preds: pd.DataFrame, n_classes: int | None = None, class_names: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per-class ``[class, name, precision, recall, f1, support]``.

    scikit-learn's ``precision_recall_fscore_support``; a score with nothing to
    divide by is NaN, not 0 (precision of a class never predicted, recall of a
    class never present): a view shows it as undefined rather than as a failure.
    """
    from sklearn.metrics import precision_recall_fscore_support

    _check_frame(preds, "class_metrics")
    preds = finite_rows(preds)
    n = class_count(preds, class_names) if n_classes is None else int(n_classes)
    labels = np.arange(n)
    if len(preds):
        p, r, f, s = precision_recall_fscore_support(
            preds["label"].to_numpy(dtype=np.int64),
            preds["pred"].to_numpy(dtype=np.int64),
            labels=labels,
            zero_division=np.nan,
        )
    else:
        p = r = f = np.full(n, np.nan)
        s = np.zeros(n, dtype=np.int64)
    names = [str(c) for c in class_names] if class_names is not None else []
    names += [str(i) for i in range(len(names), n)]  # classes beyond the names known
    return pd.DataFrame(
        {
            "class": labels,
            "name": names[:n],
            "precision": np.asarray(p, dtype=np.float64),
            "recall": np.asarray(r, dtype=np.float64),
            "f1": np.asarray(f, dtype=np.float64),
            "support": np.asarray(s, dtype=np.int64),
        }
    )


@dataclass(frozen=True)
class Summary:
    """Overall scores of one evaluation."""

    n: int
    accuracy: float
    macro_f1: float
    weighted_f1: float
    nonfinite: int = 0
    """Samples left out of the scores: their logits were non-finite (no class)."""


def summary(preds: pd.DataFrame, n_classes: int | None = None) -> Summary:
    """Accuracy and macro/weighted F1 over the classes ``0..n_classes-1`` (NaN when empty).

    The scores are over the samples with finite logits (``n`` of them); the
    others are counted in ``nonfinite``. A class neither present nor predicted
    has no F1 (as in :func:`class_metrics`): the macro average leaves it out
    rather than counting it as 0.
    """
    from sklearn.metrics import accuracy_score, f1_score

    _check_frame(preds, "summary")
    bad = nonfinite_count(preds)
    preds = finite_rows(preds)
    if len(preds) == 0:
        return Summary(0, float("nan"), float("nan"), float("nan"), bad)
    n = class_count(preds) if n_classes is None else int(n_classes)
    y = preds["label"].to_numpy(dtype=np.int64)
    p = preds["pred"].to_numpy(dtype=np.int64)
    labels = np.arange(n)
    return Summary(
        n=len(y),
        accuracy=float(accuracy_score(y, p)),
        macro_f1=float(f1_score(y, p, labels=labels, average="macro", zero_division=np.nan)),
        weighted_f1=float(f1_score(y, p, labels=labels, average="weighted", zero_division=np.nan)),
        nonfinite=bad,
    )


def present_summary(preds: pd.DataFrame) -> Summary:
    """Accuracy and macro/weighted F1 over the classes that occur (as a label or a
    prediction): scikit-learn's default label set, counted sparsely; samples with
    non-finite logits are left out and counted in ``nonfinite``."""
    bad = nonfinite_count(preds)
    preds = finite_rows(preds)
    counts = class_counts(preds)
    if not len(preds):
        return Summary(0, float("nan"), float("nan"), float("nan"), bad)
    support = counts["support"].to_numpy(dtype=np.float64)
    predicted = counts["predicted"].to_numpy(dtype=np.float64)
    correct = counts["correct"].to_numpy(dtype=np.float64)
    precision = correct / np.where(predicted > 0, predicted, 1)
    recall = correct / np.where(support > 0, support, 1)
    total = precision + recall
    f1 = np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1), 0.0)
    return Summary(
        n=len(preds),
        accuracy=float(correct.sum() / len(preds)),
        macro_f1=float(f1.mean()),
        weighted_f1=float((f1 * support).sum() / support.sum()),
        nonfinite=bad,
    )


def most_confused(matrix: np.ndarray, k: int = 10) -> pd.DataFrame:
    """The ``k`` largest off-diagonal cells ``[true, pred, count, rate]``.

    ``rate`` is the count as a fraction of the true class's support. Sorted by
    count (descending), then true and predicted class; zero cells are left out.
    """
    m = np.asarray(matrix, dtype=np.int64)
    n = m.shape[0]
    support = m.sum(axis=1)
    t, p = np.nonzero(m)
    off = t != p
    t, p = t[off], p[off]
    counts = m[t, p]
    order = np.lexsort((p, t, -counts))[: max(int(k), 0)]
    t, p, counts = t[order], p[order], counts[order]
    rate = counts / np.maximum(support[t], 1) if n else np.zeros(0)
    return pd.DataFrame(
        {"true": t.astype(np.int64), "pred": p.astype(np.int64), "count": counts, "rate": rate}
    )


def order_ids(ids: Any, loss: Any) -> np.ndarray:
    """``ids`` sorted by loss (highest first; NaN last), ties by ascending id (int64)."""
    ids = np.asarray(ids, dtype=np.int64)
    loss = np.asarray(loss, dtype=np.float64)
    key = np.where(np.isnan(loss), np.inf, -loss)
    return ids[np.lexsort((ids, key))]


ANY_OTHER = -1
"""``pred`` of a cell that stands for every wrong prediction of its true class."""


def cell_ids(preds: pd.DataFrame, true: int, pred: int) -> np.ndarray:
    """Ids of the samples of class ``true`` predicted as ``pred``, highest loss first.

    ``pred == ANY_OTHER`` (-1): the class's errors, whatever they were predicted as.
    """
    _check_frame(preds, "cell_ids")
    label, guess = preds["label"].to_numpy(), preds["pred"].to_numpy()
    if int(pred) == ANY_OTHER:
        hit = (label == int(true)) & (guess != int(true))
    else:
        hit = (label == int(true)) & (guess == int(pred))
    rows = preds[hit]
    loss = rows["loss"].to_numpy(dtype=np.float64) if "loss" in rows else np.full(len(rows), np.nan)
    return order_ids(rows["id"].to_numpy(dtype=np.int64), loss)


@dataclass(frozen=True)
class Flips:
    """Samples whose correctness changed between two evaluations (ids in the stable order,
    by their loss at the later one)."""

    to_wrong: np.ndarray
    """Right at ``before``, wrong at ``after``."""
    to_right: np.ndarray
    """Wrong at ``before``, right at ``after``."""
    common: int
    """Samples evaluated at both steps."""


def flips(before: pd.DataFrame, after: pd.DataFrame) -> Flips:
    """Compare two evaluations of the same samples (matched by id)."""
    _check_frame(before, "flips")
    _check_frame(after, "flips")
    a = before[["id", "label", "pred"]]
    b = after[["id", "label", "pred"]].assign(
        loss=after["loss"].to_numpy(dtype=np.float64) if "loss" in after else np.nan
    )
    both = a.merge(b, on="id", suffixes=("_a", "_b"))
    right_a = both["label_a"].to_numpy() == both["pred_a"].to_numpy()
    right_b = both["label_b"].to_numpy() == both["pred_b"].to_numpy()
    ids = both["id"].to_numpy(dtype=np.int64)
    loss = both["loss"].to_numpy(dtype=np.float64)
    down = right_a & ~right_b
    up = ~right_a & right_b
    return Flips(
        to_wrong=order_ids(ids[down], loss[down]),
        to_right=order_ids(ids[up], loss[up]),
        common=len(both),
    )


def evaluation_at(steps: Any, step: int) -> int | None:
    """The latest of the sorted evaluation ``steps`` at or before ``step`` (None: before all)."""
    steps = np.asarray(steps, dtype=np.int64)
    i = int(np.searchsorted(steps, int(step), side="right")) - 1
    return int(steps[i]) if i >= 0 else None


def unit_values(
    run: Any, layer: str, unit: int, step: int | None = None, split: str = "val"
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(ids, values, step)``: one unit's per-sample summary at an evaluation.

    Reads what ``run.evaluate(..., units_layer=layer)`` stored (kind ``"units"``:
    the unit's mean activation over positions, per sample). ``step`` None takes
    the latest evaluation, otherwise the latest at or before ``step``; the step
    read is returned.
    """
    layers = run.embedding_layers(split, kind="units")
    if layer not in layers:
        known = ", ".join(layers) if layers else "none"
        raise ValueError(
            f"no per-unit summaries of layer {layer!r} for split {split!r} (recorded: {known}); "
            f"record them with run.evaluate(step, model, loader, units_layer={layer!r})"
        )
    recorded = run.embedding_steps(split, layer, kind="units")
    at = int(recorded[-1]) if step is None else evaluation_at(recorded, step)
    if at is None:
        raise ValueError(
            f"no units of {layer!r} recorded at or before step {step}; "
            f"the first is at step {int(recorded[0])}"
        )
    ids, matrix = run.embeddings(at, split=split, layer=layer, kind="units")
    n_units = matrix.shape[1] if matrix.ndim == 2 else 0
    if isinstance(unit, bool) or not isinstance(unit, (int, np.integer)):
        raise TypeError(f"unit must be an int index, got {unit!r}")
    if not 0 <= int(unit) < n_units:
        raise ValueError(f"unit {unit} is outside 0..{n_units - 1} for layer {layer!r}")
    values = np.asarray(matrix[:, int(unit)], dtype=np.float64)
    return np.asarray(ids, dtype=np.int64), values, at


def top_samples_for_unit(
    run: Any,
    layer: str,
    unit: int,
    step: int | None = None,
    k: int = 16,
    split: str = "val",
) -> tuple[np.ndarray, np.ndarray]:
    """``(most_ids, least_ids)``: the ``k`` samples on which a unit was most / least active.

    See :func:`unit_values` for what is read and which step. ``most_ids`` are in
    descending order of the unit's value, ``least_ids`` in ascending order; ties
    by id; non-finite values are left out.
    """
    ids, values, _ = unit_values(run, layer, unit, step, split)
    k = max(int(k), 0)
    finite = np.isfinite(values)
    ids_f, vals_f = ids[finite], values[finite]
    most = ids_f[np.lexsort((ids_f, -vals_f))][:k]
    least = ids_f[np.lexsort((ids_f, vals_f))][:k]
    return most, least
