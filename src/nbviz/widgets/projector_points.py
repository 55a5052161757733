"""The projector's points on the wire: positions, and what colours them, ~12 bytes a point.

A layout's finite points travel as float32 positions scaled into [-1, 1] and
one byte (two past 254 classes, four past 65,534) each for label, prediction,
confidence, loss and target (a regression's one target value per sample, scaled to its range),
the values of the predictions logged at the layout's step (or the latest
evaluation before it), matched by id; ``missing`` (or 255) marks what is unknown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nbviz.widgets.view_data import scatter_figure
from nbviz.widgets.wire import array_trait_payload

__all__ = [
    "color_values",
    "indices_of",
    "normalized",
    "point_arrays",
    "points_figure",
    "prediction_frame",
]


def normalized(coords: np.ndarray) -> np.ndarray:
    """``coords`` shifted and scaled into [-1, 1] around the centre, aspect kept."""
    if not len(coords):
        return coords.astype(np.float32)
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    centre = (lo + hi) / 2.0
    half = float(np.max(hi - lo)) / 2.0 or 1.0
    return ((coords - centre) / (half * 1.05)).astype(np.float32)


def prediction_frame(run: Any, split: str, ids: np.ndarray, step: int) -> pd.DataFrame:
    """label, pred, confidence, loss and target per id (NaN where unknown), from the
    evaluation at or before ``step`` (else the first), labels from the logged samples
    where none; ``target`` where the evaluation kept one target value per sample."""
    frame = pd.DataFrame({"id": ids})
    evals = run.prediction_steps(split)
    at = [int(s) for s in evals if s <= step]
    if at or len(evals):
        chosen = at[-1] if at else int(evals[0])
        preds = run.predictions(chosen, split)
        frame = frame.merge(preds.drop(columns=["step"]), on="id", how="left")
        kept = run.outputs(chosen, split)
        if kept is not None and kept.targets is not None and kept.targets[:1].size == 1:
            n = len(kept.targets)
            targets = pd.DataFrame({"id": kept.ids[:n], "target": kept.targets.reshape(-1)})
            frame = frame.merge(targets, on="id", how="left")
    if "label" not in frame or frame["label"].isna().all():
        stored = run.samples(None, split)[["id", "label"]]
        frame = frame.drop(columns=["label"], errors="ignore").merge(stored, on="id", how="left")
    for col in ("label", "pred", "loss", "confidence", "target"):
        if col not in frame:
            frame[col] = np.nan
    return frame


def _n_classes(frame: pd.DataFrame) -> int:
    """Classes among the labels and predictions (0: the samples have no classes)."""
    top = -1.0
    for col in ("label", "pred"):
        values = frame[col].to_numpy(dtype=np.float64, na_value=np.nan)
        if np.isfinite(values).any():
            top = max(top, float(np.nanmax(values)))
    return int(top) + 1


def point_arrays(xy: np.ndarray, ids: np.ndarray, frame: pd.DataFrame) -> dict[str, Any]:
    """The ``points`` payload of finite positions ``xy`` of ``ids``, coloured by ``frame``."""
    n_classes = _n_classes(frame)
    # the narrowest codes that hold every class and the "missing" mark above them
    # (class indices reach 2**31 - 1: uint32 past uint16's 65,534 classes)
    small = np.uint8 if n_classes < 255 else np.uint16 if n_classes < 65535 else np.uint32
    missing = np.iinfo(small).max
    label = frame["label"].to_numpy(dtype=np.float64, na_value=np.nan)
    pred = frame["pred"].to_numpy(dtype=np.float64, na_value=np.nan)
    conf = frame["confidence"].to_numpy(dtype=np.float64, na_value=np.nan)
    loss = frame["loss"].to_numpy(dtype=np.float64, na_value=np.nan)
    # the scale's top over the finite losses: an infinite one would take the percentile
    # to inf - inf (and a warning), and every other loss to the bottom of the scale
    finite_loss = loss[np.isfinite(loss)]
    loss_hi = float(np.percentile(finite_loss, 99)) if finite_loss.size else 0.0
    loss_hi = loss_hi if loss_hi > 0 else 1.0
    target = frame["target"].to_numpy(dtype=np.float64, na_value=np.nan)
    finite_target = target[np.isfinite(target)]
    t_lo = float(finite_target.min()) if finite_target.size else 0.0
    t_hi = float(finite_target.max()) if finite_target.size else 1.0

    def codes(values: np.ndarray) -> np.ndarray:
        out = np.full(len(values), missing, dtype=small)
        ok = np.isfinite(values)
        out[ok] = values[ok].astype(small)
        return out

    def byte(values: np.ndarray) -> np.ndarray:
        out = np.full(len(values), 255, dtype=np.uint8)  # 255: unknown
        ok = np.isfinite(values)
        out[ok] = np.clip(np.round(values[ok] * 254), 0, 254).astype(np.uint8)
        return out

    # a target byte only where there are targets: a classifier's points stay 12 bytes each
    if finite_target.size:
        scaled = byte((target - t_lo) / ((t_hi - t_lo) or 1.0))
        extra: dict[str, Any] = {"target": array_trait_payload(scaled)}
    else:
        extra = {}
    return {
        **extra,
        "n": int(len(ids)),
        "xy": array_trait_payload(normalized(xy), "<f4"),
        "label": array_trait_payload(codes(label)),
        "pred": array_trait_payload(codes(pred)),
        "confidence": array_trait_payload(byte(conf)),
        "loss": array_trait_payload(byte(np.log1p(np.maximum(loss, 0)) / np.log1p(loss_hi))),
        "loss_max": loss_hi,
        "target_range": [t_lo, t_hi],
        "n_classes": n_classes,
        "missing": int(missing),
        "has_predictions": bool(np.isfinite(pred).any()),
        "has_labels": bool(np.isfinite(label).any()),
        "has_loss": bool(np.isfinite(loss).any()),
        "has_target": bool(finite_target.size),
        "ids_min": int(ids.min()) if len(ids) else 0,
    }


def indices_of(shown: np.ndarray, order: np.ndarray, ids: list[int]) -> np.ndarray:
    """Point indices of ``ids`` among the points ``shown`` (``order`` is their argsort);
    ids not on screen are skipped."""
    if not len(shown) or not ids:
        return np.zeros(0, dtype=np.uint32)
    wanted = np.asarray(ids, dtype=np.int64)
    pos = np.searchsorted(shown[order], wanted)
    pos = np.clip(pos, 0, len(shown) - 1)
    hit = shown[order][pos] == wanted
    return np.sort(order[pos[hit]]).astype(np.uint32)


def color_values(frame: pd.DataFrame, color_by: str) -> np.ndarray:
    """The value each point of ``frame`` is coloured by under ``color_by`` (a projector's
    ``COLOR_BY``), as float64: class codes, 1/0 for correct, the number itself; NaN
    where unknown (and everywhere for ``"none"``)."""
    column = {"label": "label", "prediction": "pred", "confidence": "confidence"}
    column.update({"loss": "loss", "target": "target"})
    if color_by in column and column[color_by] in frame:
        return frame[column[color_by]].to_numpy(dtype=np.float64, na_value=np.nan)
    if color_by == "correct":
        label = frame["label"].to_numpy(dtype=np.float64, na_value=np.nan)
        pred = frame["pred"].to_numpy(dtype=np.float64, na_value=np.nan)
        ok = np.isfinite(label) & np.isfinite(pred)
        return np.where(ok, (label == pred).astype(np.float64), np.nan)
    return np.full(len(frame), np.nan)


def points_figure(table: pd.DataFrame, view: Any) -> Any:
    """``table`` (a projector's ``data()``) as a bqplot ``Scatter`` coloured as ``view`` is."""
    if not len(table):
        raise ValueError(f"EmbeddingProjector.figure: no points on screen ({view.status})")
    return scatter_figure(
        table["x"],
        table["y"],
        title=f"{view.layer or 'embedding'} at step {view.shown_step} ({view.shown_method})",
        x_label="x",
        y_label="y",
        color=None if view.color_by == "none" else table["color"],
        color_label=view.color_by,
    )
