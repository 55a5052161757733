"""Turning what a user logs into store rows: numbers, predictions, thumbnails, text.

The checks of what enters (steps, text, ids, class indices) are in
:mod:`nbviz.arguments`; every conversion here names the argument, what was
expected and what came: bad input is refused at logging time, where the user
can still fix it, not later in a view.
"""

from __future__ import annotations

import io
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nbviz.arguments import (  # noqa: F401 - the checks, where the conversions were first
    check_class_index,
    check_class_names,
    check_ids,
    check_labels,
    check_split,
    check_step,
    check_text,
    jsonable,
    to_numpy,
)
from nbviz.store.predictions import NONFINITE_PRED

#: Largest side of a stored image thumbnail, in pixels.
THUMBNAIL_SIZE = 96


def _int_as_float(name: str, value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ValueError(
            f"log: {name} is an integer of {value.bit_length()} bits, too large for a "
            "float64 (values are stored as float64)"
        ) from None


def scalar_value(name: str, value: Any) -> float:
    """A float from a Python/numpy number or a 0-d tensor; NaN and inf are kept."""
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        return _int_as_float(name, value)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item") and kind is not np.bool_:
        item = value.item()  # a 0-d tensor or array, a numpy number
        if type(item) is float:
            return item
        if type(item) is int:
            return _int_as_float(name, item)
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"log: {name}={value!r} is too large for a float64") from None
    if hasattr(value, "numel") and hasattr(value, "item"):
        if value.numel() != 1:
            raise ValueError(
                f"log: {name} is a tensor with {value.numel()} elements; log a number or a 0-d "
                f"tensor (e.g. {name}=loss.mean())"
            )
        item = value.item()
        if isinstance(item, numbers.Real):
            return float(item)
    elif isinstance(value, np.ndarray) and value.size == 1:
        item = value.reshape(()).item()
        if isinstance(item, numbers.Real):
            return float(item)
    raise TypeError(f"log: {name}={value!r} is a {type(value).__name__}, not a number")


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def predictions_from(
    logits_or_preds: Any, labels: np.ndarray | None, what: str, n_classes: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """``(pred, loss, confidence, probs)`` from logits ``(N, C)`` or predicted classes ``(N,)``.

    From logits: softmax probabilities, cross-entropy per sample, confidence = top
    probability. A row of non-finite logits (NaN, +inf, or every class -inf) has
    no class: its pred is ``NONFINITE_PRED`` (-1), its loss, confidence and
    probabilities NaN (no warning: the views count such rows and say so).
    ``(N, 1)`` logits are a binary model's single logit, read as
    :func:`two_class_logits`. From classes alone: loss and confidence are NaN,
    and the classes are checked as class indices (below ``n_classes`` if known).
    """
    arr = to_numpy(logits_or_preds, f"{what}: logits_or_preds")
    if arr.ndim == 2:
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"{what}: logits must be numeric, got dtype {arr.dtype}")
        if arr.shape[1] == 0:
            raise ValueError(
                f"{what}: logits of shape {tuple(arr.shape)} have no classes; give "
                "(N, classes) logits, (N, 1) for a binary model, or (N,) predicted classes"
            )
        single = arr.shape[1] == 1
        logits = two_class_logits(arr.astype(np.float64))
        with np.errstate(invalid="ignore", over="ignore"):
            probs = softmax(logits.copy())
        # NaN, +inf or all -inf in a row: no class can be read from it
        bad = ~np.isfinite(probs).all(axis=1)
        if bad.any():
            probs[bad] = np.nan
            pred = np.where(bad, NONFINITE_PRED, np.nan_to_num(probs).argmax(axis=1))
            confidence = np.where(bad, np.nan, np.nan_to_num(probs).max(axis=1))
        else:
            pred = probs.argmax(axis=1)
            confidence = probs.max(axis=1)
        pred = pred.astype(np.int64)
        if labels is not None:
            if labels.shape[0] and labels.max() >= probs.shape[1]:
                if single:
                    raise ValueError(
                        f"{what}: label {int(labels.max())} with one logit per sample: a "
                        "single logit is read as a binary model's (labels 0 and 1); give "
                        "one logit per class for more classes"
                    )
                raise ValueError(
                    f"{what}: label {int(labels.max())} is out of range for logits with "
                    f"{probs.shape[1]} classes"
                )
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                shifted = logits - logits.max(axis=1, keepdims=True)
                log_z = np.log(np.exp(shifted).sum(axis=1))
                loss = log_z - shifted[np.arange(len(labels)), labels]
            loss[bad] = np.nan
        else:
            loss = np.full(len(pred), np.nan)
        return pred, loss, confidence, probs.astype(np.float32)
    if arr.ndim == 1:
        if arr.dtype.kind not in "iuf":
            raise TypeError(
                f"{what}: a 1-d logits_or_preds must hold predicted class indices, got dtype "
                f"{arr.dtype}; for a binary model's single logit per sample, pass shape (N, 1)"
            )
        if arr.dtype.kind == "f" and np.isfinite(arr).all() and np.any(arr != np.round(arr)):
            raise TypeError(
                f"{what}: a 1-d logits_or_preds must hold predicted class indices, got "
                f"{arr[arr != np.round(arr)][0]}; for a binary model's single logit per "
                "sample, pass shape (N, 1)"
            )
        pred = check_class_index(arr, len(arr), n_classes, what, "predicted classes")
        nan = np.full(len(pred), np.nan)
        return pred, nan, nan.copy(), None
    raise ValueError(
        f"{what}: logits_or_preds must be (N, classes) logits or (N,) predicted classes, got "
        f"shape {tuple(arr.shape)}"
    )


def two_class_logits(logits: np.ndarray) -> np.ndarray:
    """``(N, 1)`` logits of a binary model as the two classes' logits ``[0, z]``.

    Their softmax is ``[1 - sigmoid(z), sigmoid(z)]`` and their cross-entropy the
    binary one (``BCEWithLogitsLoss``'s). Other logits are returned as they are.
    """
    if logits.ndim == 2 and logits.shape[1] == 1:
        return np.concatenate([np.zeros_like(logits), logits], axis=1)
    return logits


def png_thumbnail(image: np.ndarray) -> tuple[bytes, list[int]]:
    """Encode one image (HxW, HxWxC or CxHxW; any numeric range) as a PNG thumbnail.

    Values are scaled per image to 0..255 unless they already are uint8; images
    larger than ``THUMBNAIL_SIZE`` are shrunk (aspect kept).
    """
    from PIL import Image

    img = np.asarray(image)
    if img.ndim == 3 and img.shape[0] in (1, 3, 4) and img.shape[-1] not in (1, 3, 4):
        img = np.moveaxis(img, 0, -1)
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[-1] not in (3, 4)):
        raise ValueError(f"log_samples: cannot read an image of shape {tuple(image.shape)}")
    if img.dtype != np.uint8:
        f = img.astype(np.float64)
        finite = np.isfinite(f)
        lo = float(f[finite].min()) if finite.any() else 0.0
        hi = float(f[finite].max()) if finite.any() else 1.0
        scale = 255.0 / (hi - lo) if hi > lo else 0.0
        f = np.where(finite, (f - lo) * scale, 0.0)
        img = np.clip(np.rint(f), 0, 255).astype(np.uint8)
    pil = Image.fromarray(img)
    if max(pil.size) > THUMBNAIL_SIZE:
        pil.thumbnail((THUMBNAIL_SIZE, THUMBNAIL_SIZE))
    buf = io.BytesIO()
    pil.save(buf, format="PNG", optimize=False)
    return buf.getvalue(), list(img.shape)


def sample_rows(
    data: Any, n_expected: int | None, kind: str | None, what: str
) -> tuple[list[tuple[str, bytes | None, str | None, str | None, str | None]], int]:
    """Rows ``(kind, payload, dtype, shape, text)`` for each sample, and their count.

    ``kind`` None guesses: a sequence of strings is text, an array of rank >= 3 is
    images (N, H, W[, C]) or (N, C, H, W), rank 2 is tabular rows (numbers); a
    pandas DataFrame or a sequence of mappings gives each row as text, one
    ``column: value`` line per column (columns may hold anything).
    """
    if isinstance(data, str):
        raise TypeError(f"{what}: data is one string; pass a list of strings for text samples")
    records = _records(data)
    if records is not None:  # a table of mixed columns: each row as "column: value" lines
        if kind not in (None, "text"):
            raise ValueError(f"{what}: a table's rows are text samples, not kind={kind!r}")
        for r in records:
            for k in r:
                check_text(k, what, "a column name")
        texts = ["\n".join(f"{k}: {_cell(v)}" for k, v in r.items()) for r in records]
        for i, t in enumerate(texts):
            check_text(t, what, f"row {i}", empty=True)
        return [("text", None, None, None, t) for t in texts], len(texts)
    if isinstance(data, Sequence) and data and all(isinstance(d, str) for d in data):
        texts = list(data)
        if kind not in (None, "text"):
            raise ValueError(f"{what}: strings can only be text samples, not kind={kind!r}")
        for i, t in enumerate(texts):
            check_text(t, what, f"data[{i}]", empty=True)
        return [("text", None, None, None, t) for t in texts], len(texts)
    arr = to_numpy(data, f"{what}: data")
    if arr.ndim == 0:
        raise ValueError(f"{what}: data must hold one item per sample, got a scalar")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what}: data must be numeric (or a list of strings), got {arr.dtype}")
    if arr.shape[0] == 0:
        raise ValueError(f"{what}: data holds no samples (shape {tuple(arr.shape)})")
    if kind is None:
        kind = "image" if arr.ndim >= 3 else "array"
    if kind not in ("image", "array"):
        raise ValueError(f"{what}: kind must be 'image', 'array' or 'text', got {kind!r}")
    rows = []
    if kind == "image":
        if arr.ndim not in (3, 4):
            raise ValueError(
                f"{what}: images must be (N, H, W), (N, H, W, C) or (N, C, H, W), got shape "
                f"{tuple(arr.shape)}"
            )
        if 0 in arr.shape:
            raise ValueError(
                f"{what}: images of shape {tuple(arr.shape)} are empty: every side must be "
                "at least one pixel"
            )
        for img in arr:
            png, shape = png_thumbnail(img)
            rows.append(("image", png, None, json.dumps(list(img.shape)), None))
    else:
        arr2 = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr.reshape(-1, 1)
        for row in arr2:
            a = np.ascontiguousarray(row, dtype=row.dtype.newbyteorder("<"))
            rows.append(("array", a.tobytes(), a.dtype.str, json.dumps(list(a.shape)), None))
    return rows, len(rows)


def _records(data: Any) -> list[Mapping[str, Any]] | None:
    """The rows of a pandas DataFrame or a sequence of mappings; None for anything else."""
    if hasattr(data, "to_dict") and hasattr(data, "columns") and hasattr(data, "iloc"):
        return [{str(k): v for k, v in r.items()} for r in data.to_dict("records")]
    if isinstance(data, Sequence) and data and all(isinstance(d, Mapping) for d in data):
        return [{str(k): v for k, v in r.items()} for r in data]
    return None


def _cell(value: Any) -> str:
    """A table cell as text (floats to 6 significant digits)."""
    if isinstance(value, float | np.floating):
        return f"{float(value):.6g}"
    return str(value)


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
