"""What a ConfusionMatrix shows for a label set too large for a matrix.

Past :data:`nbviz.widgets.confusion.MAX_MATRIX_CLASSES` classes the view lists
the :data:`LIST_ROWS` most confused ``(true, predicted)`` pairs and the
:data:`LIST_ROWS` classes with the most errors, each row with its class names, and
scores over the classes that occur. Everything is counted sparsely
(:mod:`nbviz.analysis.metrics`): the cost follows the samples, not the square of
the largest class index.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from nbviz.analysis import metrics

__all__ = ["LIST_ROWS", "class_error_rows", "list_scores", "pair_rows"]

LIST_ROWS = 50
"""Rows of the most-confused pairs and of the ranked classes in the list mode."""


def list_scores(preds: pd.DataFrame) -> dict[str, Any]:
    """Accuracy and F1 over the classes that occur, and how many classes and pairs err."""
    s = metrics.present_summary(preds)
    counts = metrics.class_counts(preds)
    wrong = counts["support"].to_numpy() - counts["correct"].to_numpy()
    pairs = metrics.confusion_pairs(preds)
    return {
        "n": s.n,
        # None (JSON null) where there is no score: no sample had finite logits
        "accuracy": s.accuracy if math.isfinite(s.accuracy) else None,
        "macro_f1": s.macro_f1 if math.isfinite(s.macro_f1) else None,
        "weighted_f1": s.weighted_f1 if math.isfinite(s.weighted_f1) else None,
        "nonfinite": s.nonfinite,
        "classes": len(counts),
        "classes_with_errors": int((wrong > 0).sum()),
        "errors": int(wrong.sum()),
        "error_pairs": int((pairs["true"] != pairs["pred"]).sum()),
    }


def pair_rows(top: pd.DataFrame, names: Any) -> list[dict[str, Any]]:
    """Rows of a most-confused list (``[true, pred, count, rate]`` frame): both names added."""
    known = [str(c) for c in names] if names is not None else []

    def name(c: int) -> str:
        return known[c] if 0 <= c < len(known) else str(c)

    return [
        {
            "true": int(r["true"]),
            "pred": int(r["pred"]),
            "count": int(r["count"]),
            "rate": float(r["rate"]),
            "true_name": name(int(r["true"])),
            "pred_name": name(int(r["pred"])),
        }
        for r in top.to_dict("records")
    ]


def class_error_rows(preds: pd.DataFrame, names: Any, k: int = LIST_ROWS) -> list[dict[str, Any]]:
    """The ``k`` classes with the most errors (:func:`nbviz.analysis.metrics.class_errors`)."""
    return [
        {
            "class": int(r["class"]),
            "name": str(r["name"]),
            "support": int(r["support"]),
            "errors": int(r["errors"]),
            "error_rate": float(r["error_rate"]),
            "top_pred": int(r["top_pred"]),
            "top_pred_name": str(r["top_pred_name"]),
            "top_count": int(r["top_count"]),
        }
        for r in metrics.class_errors(preds, k, names).to_dict("records")
    ]
