"""A ConfusionMatrix's data for people: the cells (or, in list mode, the pairs) as a frame.

One tidy table in both modes, so that code reading it does not care which the
view shows: a row per ``(true, predicted)`` pair with both class names, the count
and the rate (the count over the true class's samples). In matrix mode every
cell is a row, the zeros included; in list mode the most-confused pairs the view
lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.widgets.view_data import frame, heatmap_figure
from nbviz.widgets.wire import array_from_payload

__all__ = ["COLUMNS", "confusion_figure", "confusion_frame"]

COLUMNS = ["step", "true", "predicted", "true_name", "predicted_name", "count", "rate"]


def _counts(view: Any) -> np.ndarray | None:
    if view.mode != "matrix" or not view.matrix:
        return None
    return np.asarray(array_from_payload(view.matrix["counts"]), dtype=np.int64)


def confusion_frame(view: Any) -> Any:
    """The table of ``view`` (a ConfusionMatrix) at its evaluation: :data:`COLUMNS`."""
    step = int(view.eval_step)
    counts = _counts(view)
    if counts is None:
        rows = [
            {
                "step": step,
                "true": r["true"],
                "predicted": r["pred"],
                "true_name": r["true_name"],
                "predicted_name": r["pred_name"],
                "count": r["count"],
                "rate": r["rate"],
            }
            for r in view.confused
        ]
        return frame(rows, COLUMNS)
    n = counts.shape[0]
    names = list(view.class_names)
    name = [names[c] if c < len(names) else str(c) for c in range(n)]
    support = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(support > 0, counts / np.maximum(support, 1), np.nan)
    true, pred = np.divmod(np.arange(n * n), n)
    return frame(
        {
            "step": np.full(n * n, step, dtype=np.int64),
            "true": true,
            "predicted": pred,
            "true_name": [name[t] for t in true],
            "predicted_name": [name[p] for p in pred],
            "count": counts.reshape(-1),
            "rate": rate.reshape(-1),
        },
        COLUMNS,
    )


def confusion_figure(view: Any) -> Any:
    """The matrix of ``view`` as a bqplot ``GridHeatMap`` (rows: true class), normalised
    as the view is; list mode has no matrix to draw."""
    counts = _counts(view)
    if counts is None:
        raise ValueError(
            "ConfusionMatrix.figure: "
            + (
                "the view lists confused pairs (too many classes for a matrix); "
                "data() gives them as a table"
                if view.mode != "matrix"
                else f"no evaluation of {view.split!r} at or before step {view.step}"
            )
        )
    values = counts.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if view.normalize == "row":
            values = values / values.sum(axis=1, keepdims=True)
        elif view.normalize == "column":
            values = values / values.sum(axis=0, keepdims=True)
    return heatmap_figure(
        values,
        title=f"{view.split} confusion at step {view.eval_step} ({view.normalize})",
        row_label="true class",
        column_label="predicted class",
    )
