"""Samples on the wire: what a logged sample, its class and its captured activations send.

The gallery's cards, the projector's hover card and the LayerBrowser's unit
cards show the same things the same way: a sample as it was logged with
``run.log_samples`` (PNG thumbnail, text, or an array row's first values), its
class by name, and the per-unit values and feature maps ``run.capture`` kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbviz.store import StoredValueError, from_blob
from nbviz.store.predictions import NONFINITE_PRED
from nbviz.widgets.wire import array_trait_payload

__all__ = [
    "ARRAY_VALUES",
    "NO_TOKENS_COUNTED",
    "capture_arrays",
    "class_name",
    "label_fields",
    "prediction_fields",
    "sample_payload",
]

ARRAY_VALUES = 16
"""Values of an array sample shown on its card (the rest are counted)."""


def sample_payload(row: pd.Series, n_values: int = ARRAY_VALUES) -> dict[str, Any]:
    """A row of ``run.samples()`` as a card shows it: image PNG, text, or the first values
    (``kind`` "damaged" with the reason, for an array payload that does not decode)."""
    kind = str(row["kind"])
    if kind == "image":
        return {"kind": "image", "png": bytes(row["payload"])}
    if kind == "text":
        return {"kind": "text", "text": str(row["text"] or "")}
    try:
        values = np.asarray(from_blob(row["payload"], row["dtype"], row["shape"])).ravel()
    except StoredValueError as exc:  # a damaged or crafted payload: said on its card
        return {"kind": "damaged", "text": f"stored sample does not decode: {exc}"}
    shown = values[:n_values].astype(np.float64)
    return {
        "kind": "array",
        "values": array_trait_payload(shown),
        "size": int(values.size),
    }


def class_name(names: Sequence[str] | None, cls: Any) -> str:
    """The name of class ``cls`` (its number where ``names`` has none; '' for no class;
    "non-finite" for the prediction of NaN/inf logits)."""
    if cls is None or pd.isna(cls):
        return ""
    c = int(cls)
    if c == NONFINITE_PRED:
        return "non-finite"
    if names is not None and 0 <= c < len(names):
        return str(names[c])
    return str(c)


def label_fields(label: Any, names: Sequence[str] | None) -> dict[str, Any]:
    """A card's ``label`` and ``label_name`` (nothing for a sample without a label)."""
    if label is None or pd.isna(label):
        return {}
    return {"label": int(label), "label_name": class_name(names, label)}


NO_TOKENS_COUNTED = "no tokens counted"
"""A language model's sample whose every position was padding: it has no mean loss."""


def prediction_fields(
    pred: pd.Series, names: Sequence[str] | None, counted: int | None = None
) -> dict[str, Any]:
    """What a card shows of an evaluated sample (a row of ``run.predictions()``); only
    the loss for a model that is not a classifier (no predicted class).

    ``counted``: a language model's sample's counted positions, where known. With
    none counted its stored loss (a mean of nothing, kept as NULL) is no loss at
    all, not a NaN one: ``loss_note`` says so in place of a non-finite flag.
    """
    if pd.isna(pred["pred"]):
        out: dict[str, Any] = {"evaluated": True, "loss": _finite(pred["loss"])}
        if counted == 0 and pd.isna(pred["loss"]):
            out["loss_note"] = NO_TOKENS_COUNTED
            return out
        bad = _nonfinite_names(pred, ("loss",), null_is_nan=True)
    else:
        out = {
            "evaluated": True,
            "pred": int(pred["pred"]),
            "pred_name": class_name(names, pred["pred"]),
            # None (JSON null) where unknown or non-finite: NaN is not JSON
            "loss": _finite(pred["loss"]),
            "confidence": _finite(pred["confidence"]),
        }
        # a class from non-finite logits: its loss and confidence were NaN (else a null
        # is a class logged without logits: no loss or confidence recorded)
        nan = int(pred["pred"]) == NONFINITE_PRED
        bad = _nonfinite_names(pred, ("loss", "confidence"), null_is_nan=nan)
    if bad:
        out["nonfinite"] = bad
    return out


def _nonfinite_names(
    pred: pd.Series, keys: tuple[str, ...], *, null_is_nan: bool
) -> dict[str, str]:
    """``{key: "NaN" | "+Inf" | "-Inf"}`` for each of ``keys`` evaluated as non-finite.

    The store keeps a NaN as NULL: ``null_is_nan`` where the value was computed for
    certain (a loss-only evaluation's loss; a prediction from non-finite logits).
    """
    out = {}
    for key in keys:
        value = pred[key]
        if value is None or pd.isna(value):
            if null_is_nan:
                out[key] = "NaN"
        elif not np.isfinite(float(value)):
            out[key] = "+Inf" if float(value) > 0 else "-Inf"
    return out


def _finite(value: Any) -> float | None:
    if value is None or pd.isna(value):  # NULL (a NaN stored) reads back as NA
        return None
    v = float(value)
    return v if np.isfinite(v) else None


def capture_arrays(row: Any) -> dict[str, Any]:
    """A ``run.captures()`` row's ``units`` and ``maps`` (where kept) as float32 payloads."""
    return {
        key: array_trait_payload(row[key], dtype="<f4")
        for key in ("units", "maps")
        if row[key] is not None
    }
