"""What ``log_predictions``, ``log_embeddings`` and ``log_samples`` are given, made into rows.

Each function checks its arguments (naming the call, the argument and the
value) and returns the rows for the store, in the table's column order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbviz import records as rec
from nbviz.store import to_blob

__all__ = ["MAX_STORED_CLASSES", "embeddings", "predictions", "replace_evaluation", "samples"]

#: Largest class count whose full probability rows are kept (for top-k views).
MAX_STORED_CLASSES = 1000


def predictions(
    step: Any,
    logits_or_preds: Any,
    labels: Any,
    ids: Any,
    split: Any,
    *,
    loss: Any,
    n_classes: int | None,
) -> tuple[list[tuple], list[tuple]]:
    """Rows of ``predictions`` and of ``probabilities`` (none past MAX_STORED_CLASSES)."""
    what = "log_predictions"
    step = rec.check_step(step, what)
    split = rec.check_split(split, what)
    arr = rec.to_numpy(logits_or_preds, f"{what}: logits_or_preds")
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise ValueError(
            f"{what}: logits_or_preds holds no samples (shape {tuple(arr.shape)}); "
            "log predictions once there are some"
        )
    n = arr.shape[0]
    y = rec.to_numpy(labels, f"{what}: labels").reshape(-1)
    if y.shape[0] != n:
        raise ValueError(f"{what}: labels has {y.shape[0]} items but logits has {n} rows")
    y = rec.check_labels(y, n, n_classes, what)
    pred, per_loss, confidence, probs = rec.predictions_from(arr, y, what, n_classes)
    if probs is not None and n_classes is not None and probs.shape[1] != n_classes:
        raise ValueError(
            f"{what}: logits have {probs.shape[1]} classes but the run has {n_classes} class names"
        )
    if loss is not None:
        per_loss = rec.to_numpy(loss, f"{what}: loss").reshape(-1)
        if per_loss.dtype.kind not in "biuf":
            raise TypeError(f"{what}: loss must be numbers, got dtype {per_loss.dtype}")
        per_loss = per_loss.astype(np.float64)
        if per_loss.shape[0] != n:
            raise ValueError(f"{what}: loss has {per_loss.shape[0]} items but there are {n}")
    ids_arr = rec.check_ids(ids, n, what)
    rows = [
        (split, step, int(i), int(t), int(p), float(lo), float(c))
        for i, t, p, lo, c in zip(ids_arr, y, pred, per_loss, confidence, strict=True)
    ]
    if probs is None or probs.shape[1] > MAX_STORED_CLASSES:
        return rows, []
    pblob, pdtype, pshape = to_blob(probs.astype(np.float16))
    return rows, [(split, step, ids_arr.astype("<i8").tobytes(), pblob, pdtype, pshape)]


def embeddings(
    step: Any, features: Any, ids: Any, split: Any, layer: str | None, kind: str
) -> list[tuple]:
    """The ``embeddings`` row of an ``(N, D)`` matrix (1-d is one column, more is flattened)."""
    what = "log_embeddings"
    step = rec.check_step(step, what)
    split = rec.check_split(split, what)
    if layer is not None:
        rec.check_text(layer, what, "layer")
    mat = rec.to_numpy(features, f"{what}: features")
    if mat.ndim == 0:
        raise ValueError(f"{what}: features must be (N, D) per-sample values, got a scalar")
    if mat.ndim == 1:
        mat = mat.reshape(-1, 1)
    if mat.ndim > 2:
        mat = mat.reshape(mat.shape[0], math.prod(mat.shape[1:]))
    if mat.dtype.kind not in "fiub":
        raise TypeError(f"{what}: features must be numeric, got dtype {mat.dtype}")
    if 0 in mat.shape:
        raise ValueError(
            f"{what}: features of shape {tuple(rec.to_numpy(features, what).shape)} are empty: "
            "give at least one sample with at least one value"
        )
    if mat.dtype.kind == "f" and mat.dtype.itemsize > 4:
        finite = np.abs(mat[np.isfinite(mat)])
        if finite.size and finite.max() > np.finfo(np.float32).max:
            raise ValueError(
                f"{what}: features hold {finite.max():g}, beyond float32's range (they are "
                "stored as float32); rescale them"
            )
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    ids_arr = rec.check_ids(ids, mat.shape[0], what)
    if kind not in ("embedding", "units"):
        raise ValueError(f"{what}: kind must be 'embedding' or 'units', got {kind!r}")
    blob, dtype, shape = to_blob(mat)
    layer = layer or "embedding"
    return [(split, layer, kind, step, ids_arr.astype("<i8").tobytes(), blob, dtype, shape)]


def samples(
    data: Any,
    labels: Any,
    ids: Any,
    split: str,
    kind: str | None,
    n_classes: int | None,
) -> list[tuple]:
    """The ``samples`` rows of images (PNG thumbnails), text, numeric rows or a table.

    ``split`` is checked by the caller, before it sets the class names that
    ``n_classes`` counts.
    """
    what = "log_samples"
    rows, n = rec.sample_rows(data, None, kind, what)
    y = rec.check_labels(labels, n, n_classes, what) if labels is not None else None
    ids_arr = rec.check_ids(ids, n, what)
    out = []
    for i, (k, payload, dtype, shape, text) in enumerate(rows):
        label = int(y[i]) if y is not None else None
        out.append((split, int(ids_arr[i]), label, k, payload, dtype, shape, text))
    return out


def replace_evaluation(run: Any, what: str, step: int, split: str, overwrite: bool) -> None:
    """Refuse a second evaluation of ``run`` at ``step`` and ``split``, or with ``overwrite``
    delete the first whole (predictions, class probabilities, outputs)."""
    if run._dist is not None and not run._dist.writes:
        return
    if not run._one(
        "SELECT 1 FROM predictions WHERE split = ? AND step = ? LIMIT 1", (split, step)
    ):
        return
    if not overwrite:
        raise ValueError(
            f"{what}: {split!r} predictions are already recorded at step "
            f"{step}; pass overwrite=True to replace them (predictions, class "
            "probabilities and outputs together), or log this evaluation at another step"
        )
    for table in ("predictions", "probabilities", "outputs"):
        run._writer.execute(f"DELETE FROM {table} WHERE split = ? AND step = ?", (split, step))
