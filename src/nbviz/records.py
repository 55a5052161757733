"""Checking what a user logs and turning it into store rows.

Every check names the argument, what was expected and what came: bad input is
refused at logging time, where the user can still fix it, not later in a view.
"""

from __future__ import annotations

import io
import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Largest side of a stored image thumbnail, in pixels.
THUMBNAIL_SIZE = 96


def to_numpy(value: Any, what: str) -> np.ndarray:
    """A numpy array from a numpy array, torch tensor or sequence (detached, on the host)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu()
        if str(value.dtype) in ("torch.bfloat16", "torch.float16"):
            value = value.float()
        return value.numpy()
    try:
        return np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - any conversion failure means bad input
        raise TypeError(f"{what}: expected an array or tensor, got {type(value).__name__}") from exc


def scalar_value(name: str, value: Any) -> float:
    """A float from a Python/numpy number or a 0-d tensor; NaN and inf are kept."""
    kind = type(value)
    if kind is float or kind is int:
        return float(value)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item") and kind is not np.bool_:
        item = value.item()  # a 0-d tensor or array, a numpy number
        if type(item) is float or type(item) is int:
            return float(item)
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
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


def check_step(step: Any, what: str) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        if hasattr(step, "item") and getattr(step, "ndim", 1) == 0:
            step = step.item()
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"{what}: step must be an integer, got {step!r}")
    step = int(step)
    if step < 0:
        raise ValueError(f"{what}: step must be >= 0, got {step}")
    return step


def check_split(split: Any, what: str) -> str:
    """A split's name: a non-empty string."""
    if not isinstance(split, str) or not split:
        raise TypeError(f"{what}: split must be a non-empty string, got {split!r}")
    return split


def check_class_names(class_names: Any, current: Sequence[str] | None) -> list[str]:
    """Class names as strings; a run that has names already may only get as many or more."""
    if isinstance(class_names, str) or not isinstance(class_names, Iterable):
        raise TypeError(f"class_names must be a list of strings, got {class_names!r}")
    names = [str(c) for c in class_names]
    if current is not None and names != list(current) and len(names) < len(current):
        raise ValueError(
            f"class_names: the run already has {len(current)} classes; got {len(names)}"
        )
    return names


def jsonable(value: dict[str, Any], what: str) -> dict[str, Any]:
    """``value`` as JSON would give it back: numpy numbers as numbers, paths as text,
    anything else JSON cannot hold as its ``repr``."""
    try:
        return json.loads(json.dumps(value, default=_json_default))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what}: values must be JSON-serialisable ({exc})") from exc


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def check_ids(ids: Any, n: int, what: str) -> np.ndarray:
    """Sample ids: ``0..n-1`` when None, else ``n`` unique non-negative integers."""
    if ids is None:
        return np.arange(n, dtype=np.int64)
    arr = to_numpy(ids, f"{what}: ids").reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{what}: ids has {arr.shape[0]} items but there are {n} samples")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(
                f"{what}: ids must be integers, got dtype {arr.dtype}; map string keys to "
                "integers (and log the names as text samples)"
            )
    arr = arr.astype(np.int64)
    if n and arr.min() < 0:
        raise ValueError(f"{what}: ids must be >= 0, got {int(arr.min())}")
    uniq, counts = np.unique(arr, return_counts=True)
    if uniq.shape[0] != n:
        dup = uniq[counts > 1][:5].tolist()
        raise ValueError(f"{what}: ids are not unique; repeated: {dup}")
    return arr


def check_labels(labels: Any, n: int, n_classes: int | None, what: str) -> np.ndarray:
    arr = to_numpy(labels, f"{what}: labels").reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{what}: labels has {arr.shape[0]} items but there are {n} samples")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{what}: labels must be integer class indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if n and arr.min() < 0:
        raise ValueError(f"{what}: labels must be >= 0, got {int(arr.min())}")
    if n_classes is not None and n and arr.max() >= n_classes:
        bad = int(arr.max())
        raise ValueError(
            f"{what}: label {bad} is out of range for {n_classes} classes (0..{n_classes - 1})"
        )
    return arr


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def predictions_from(
    logits_or_preds: Any, labels: np.ndarray | None, what: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """``(pred, loss, confidence, probs)`` from logits ``(N, C)`` or predicted classes ``(N,)``.

    From logits: softmax probabilities, cross-entropy per sample, confidence = top
    probability. ``(N, 1)`` logits are a binary model's single logit, read as
    :func:`two_class_logits`. From classes alone: loss and confidence are NaN.
    """
    arr = to_numpy(logits_or_preds, f"{what}: logits_or_preds")
    if arr.ndim == 2:
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"{what}: logits must be numeric, got dtype {arr.dtype}")
        single = arr.shape[1] == 1
        logits = two_class_logits(arr.astype(np.float64))
        probs = softmax(logits.copy())
        pred = probs.argmax(axis=1).astype(np.int64)
        confidence = probs.max(axis=1)
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
            shifted = logits - logits.max(axis=1, keepdims=True)
            log_z = np.log(np.exp(shifted).sum(axis=1))
            loss = log_z - shifted[np.arange(len(labels)), labels]
        else:
            loss = np.full(len(pred), np.nan)
        return pred, loss, confidence, probs.astype(np.float32)
    if arr.ndim == 1:
        if arr.dtype.kind not in "iu" and not (
            arr.dtype.kind == "f" and np.all(arr == np.round(arr))
        ):
            raise TypeError(
                f"{what}: a 1-d logits_or_preds must hold predicted class indices, got dtype "
                f"{arr.dtype}; for a binary model's single logit per sample, pass shape (N, 1)"
            )
        pred = arr.astype(np.int64)
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
        texts = ["\n".join(f"{k}: {_cell(v)}" for k, v in r.items()) for r in records]
        return [("text", None, None, None, t) for t in texts], len(texts)
    if isinstance(data, Sequence) and data and all(isinstance(d, str) for d in data):
        texts = list(data)
        if kind not in (None, "text"):
            raise ValueError(f"{what}: strings can only be text samples, not kind={kind!r}")
        return [("text", None, None, None, t) for t in texts], len(texts)
    arr = to_numpy(data, f"{what}: data")
    if arr.ndim == 0:
        raise ValueError(f"{what}: data must hold one item per sample, got a scalar")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what}: data must be numeric (or a list of strings), got {arr.dtype}")
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
