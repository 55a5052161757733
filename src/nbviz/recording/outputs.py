"""What ``log_outputs`` is given (a model that is not a classifier), made into rows.

A regression model, an autoencoder, a segmentation-like or a multi-label model
has no predicted class: what says how it did on a sample is its loss. Each
sample's loss goes into ``predictions`` (``label`` where the samples have
classes, ``pred`` and ``confidence`` NULL), and the outputs and targets, where
they are small enough to show, into one ``outputs`` row per evaluation, as raw
little-endian arrays (never pickled):

- outputs and targets have one row per sample, or those of the first samples
  only (what an evaluation kept); a sample's outputs (or targets) are kept when they hold at most
  :data:`MAX_VALUES_PER_SAMPLE` values (a 64x64 image, a few thousand
  regression outputs), for the first samples up to
  :data:`MAX_VALUES_PER_EVALUATION` values in all;
- floats are kept as float32, integers (class masks) and booleans as they are.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbviz import records as rec
from nbviz.store import to_blob

__all__ = ["MAX_VALUES_PER_EVALUATION", "MAX_VALUES_PER_SAMPLE", "per_sample_loss", "rows"]

MAX_VALUES_PER_SAMPLE = 4096
"""Largest output (or target) of one sample that is kept to be shown."""
MAX_VALUES_PER_EVALUATION = 2**20
"""Values of outputs (and as many of targets) kept per evaluation, at most (4 MiB of float32)."""


def per_sample_loss(loss: Any, what: str, n: int | None = None) -> np.ndarray:
    """One float64 loss per sample: a ``(N,)`` loss as it is, extra dims averaged
    (a per-pixel or per-label loss of ``reduction='none'``)."""
    arr = rec.to_numpy(loss, f"{what}: loss")
    if arr.ndim == 0:
        raise ValueError(
            f"{what}: loss is one number ({_number(arr)}), not one per sample: give the loss "
            "function reduction='none' (e.g. nn.MSELoss(reduction='none'))"
        )
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what}: loss must be numbers, got dtype {arr.dtype}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{what}: loss has {arr.shape[0]} rows but there are {n} samples")
    arr = arr.astype(np.float64).reshape(arr.shape[0], -1)
    if arr.shape[1] == 0:
        raise ValueError(f"{what}: loss of shape {tuple(rec.to_numpy(loss, what).shape)} is empty")
    return arr.mean(axis=1) if arr.shape[1] > 1 else arr[:, 0]


def _number(arr: np.ndarray) -> str:
    try:
        return f"{float(arr):g}"
    except (TypeError, ValueError):
        return repr(arr)


def _kept(values: Any, n: int, what: str, arg: str) -> np.ndarray | None:
    """``values`` checked (numeric, one row per sample: all ``n``, or the first samples'),
    or None when one sample's is too big to show."""
    if values is None:
        return None
    arr = rec.to_numpy(values, f"{what}: {arg}")
    if arr.ndim == 0 or arr.shape[0] > n:
        shape = tuple(arr.shape)
        raise ValueError(f"{what}: {arg} of shape {shape} must have one row per sample ({n})")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what}: {arg} must be numbers, got dtype {arr.dtype}")
    if math.prod(arr.shape[1:]) > MAX_VALUES_PER_SAMPLE:
        return None
    if arr.dtype.kind == "f":
        return arr.astype(np.float32)
    return arr.astype(np.int64) if arr.dtype.kind in "iu" else arr


def rows(
    step: Any,
    loss: Any,
    outputs: Any,
    targets: Any,
    ids: Any,
    split: Any,
    *,
    labels: Any,
    targets_are_inputs: bool,
    n_classes: int | None,
) -> tuple[list[tuple], list[tuple]]:
    """Rows of ``predictions`` (one per sample) and of ``outputs`` (one)."""
    what = "log_outputs"
    step = rec.check_step(step, what)
    split = rec.check_split(split, what)
    per = per_sample_loss(loss, what)
    n = len(per)
    if not n:
        raise ValueError(f"{what}: loss holds no samples; log outputs once there are some")
    ids_arr = rec.check_ids(ids, n, what)
    y = rec.check_labels(labels, n, n_classes, what) if labels is not None else None
    out = _kept(outputs, n, what, "outputs")
    tgt = _kept(targets, n, what, "targets")
    size = max((math.prod(a.shape[1:]) for a in (out, tgt) if a is not None), default=0)
    lengths = [len(a) for a in (out, tgt) if a is not None]
    k = min([n, MAX_VALUES_PER_EVALUATION // max(size, 1), *lengths])
    predictions = [
        (split, step, int(i), None if y is None else int(y[j]), None, float(per[j]), None)
        for j, i in enumerate(ids_arr)
    ]
    blobs: list[Any] = []
    for arr in (out, tgt):
        blobs.extend(to_blob(np.ascontiguousarray(arr[:k])) if arr is not None else (None,) * 3)
    source = "inputs" if targets_are_inputs else "targets"
    kept = ids_arr[:k].astype("<i8").tobytes()
    return predictions, [(split, step, kept, *blobs, source)]
